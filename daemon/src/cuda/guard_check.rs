//! The GPU suite's check of guarded builds (`gevod gpu-guard-check`): a
//! kernel's (or a variant's) guarded build run on each of a spec's tests,
//! against its unguarded build where the simulator finds no fault (every
//! buffer's bytes identical), and against the simulator's verdict where it
//! finds one (the same fault class, argument and side of the buffer; for a
//! read of shared memory never written, guarded outputs that differ from
//! the original's, shared memory being poisoned in the guarded build); after
//! each fault, the original's guarded build still runs in the same context.

use super::device_test::StagedTest;
use super::driver::{Context, Event, Kernel};
use super::guarded::{Budget, GuardedKernel};
use super::load::Loader;
use super::pace::Pacer;
use super::part_assembly::PartAssembler;
use super::CudaError;
use gevo_ir::{CodegenOptions, KernelIr, Patch};
use gevo_model::assessment::Failure;
use gevo_model::sim::{Fault, Verdict};
use gevo_model::spec::{Spec, TestSet};
use gevo_search::eval::{EvalError, Evaluator};
use std::time::{Duration, Instant};

#[derive(Debug, thiserror::Error)]
pub enum GuardCheckError {
    #[error(transparent)]
    Cuda(#[from] CudaError),
    #[error(transparent)]
    Ir(#[from] gevo_ir::IrError),
    #[error(transparent)]
    Eval(#[from] gevo_search::eval::EvalError),
    #[error(transparent)]
    Spec(#[from] gevo_model::spec::SpecError),
    #[error("assembling the guarded build a kernel at a time: {0}")]
    Parts(#[from] super::toolkit::AssembleError),
}

/// What the check found: a line per test, and how many disagree.
#[derive(Debug, Default)]
pub struct GuardCheck {
    pub lines: Vec<String>,
    pub failures: usize,
}

const LIMIT: Duration = Duration::from_secs(60);

/// Runs `patch`'s guarded build (the original's for an empty patch) on
/// every test of `spec` (its simulator tests: both sides run the same
/// sizes) on device `ordinal`. With `time_budget_only`, the runs have no
/// trip budget: only the time budget ends a runaway loop. With `parts`,
/// the guarded build checked is the cubin compile workers make: a
/// pipeline's linked from the build's parts (`cuda::parts`), loaded as it
/// is, with no fallback; one kernel's assembled whole.
pub fn check(
    spec: &Spec,
    ir: &KernelIr,
    patch: &Patch,
    codegen: &CodegenOptions,
    ordinal: usize,
    time_budget_only: bool,
    parts: Option<&mut PartAssembler>,
) -> Result<GuardCheck, GuardCheckError> {
    let names: Vec<String> = ir.chosen_kernels().iter().map(|k| k.to_string()).collect();
    let _context = Context::new(ordinal)?;
    let plain = Kernel::load(&ir.compile(patch, codegen)?.ptx, &names)?;
    let build = ir.compile_guarded(patch, codegen)?;
    let guarded = match parts {
        Some(parts) => {
            // One kernel's build is assembled whole, as compile workers do.
            let cubin = match names.len() {
                1 => parts.assemble(&build.ptx, &codegen.arch)?,
                _ => parts.assemble_linked(&build.ptx, &codegen.arch)?,
            };
            GuardedKernel::from_kernel(Kernel::load_cubin(&cubin, &names)?)?
        }
        None => GuardedKernel::load(&Loader::Jit, &build.ptx, None, &names)?,
    };
    // The original's guarded build calibrates the trip budget: the same
    // build when the patch is empty.
    let original = match patch.edits.is_empty() {
        true => None,
        false => Some(ir.compile_guarded(&ir.empty_patch(), codegen)?),
    };
    let calibration_ptx = original.as_ref().map_or(&build.ptx, |o| &o.ptx);
    let calibration = GuardedKernel::load(&Loader::Jit, calibration_ptx, None, &names)?;
    let evaluator = Evaluator::new(spec.clone(), 2)?;
    let mut found = GuardCheck::default();
    for case in spec.tests(TestSet::All) {
        let test = StagedTest::upload(&case.name, spec.instantiate(case)?)?;
        // An original that faults has no reference: its finding is the
        // simulator's verdict on this test.
        let sim = match evaluator.evaluate_until(patch, &[case], |_| false) {
            Ok(results) => results.into_iter().next().and_then(|r| match r.failure {
                Some(Failure::Verdict(v)) => Some(v),
                _ => None,
            }),
            Err(EvalError::OriginalFails { verdict, .. }) => Some(*verdict),
            Err(e) => return Err(e.into()),
        };
        // The budget the worker sets: from the original's most trips and
        // time (its guarded run with no budget).
        calibration.arm(&test, Budget::NONE)?;
        let started = Instant::now();
        run(&calibration.kernel, &test)?;
        let most = calibration.state()?.most_trips();
        let mut budget = Budget::from_original(most, started.elapsed());
        if time_budget_only {
            budget.trips = 0;
        }
        guarded.arm(&test, budget)?;
        let guarded_bytes = run(&guarded.kernel, &test)?;
        let gpu = guarded
            .state()?
            .verdict(&build.sites, &test, budget, &names);
        let (agree, what) = match (&sim, &gpu) {
            (None, None) => {
                let plain_bytes = run(&plain, &test)?;
                let same = plain_bytes == guarded_bytes;
                let bytes: usize = plain_bytes.iter().map(Vec::len).sum();
                (
                    same,
                    format!(
                        "no fault; guarded outputs {} the unguarded build's ({bytes} bytes); trip budget {} (the original's most {most}), time budget {:?}",
                        if same { "identical to" } else { "DIFFER from" },
                        budget.trips,
                        budget.time,
                    ),
                )
            }
            (Some(s), Some(g)) => (same_fault(s, g), format!("GPU: {g} | simulator: {s}")),
            (Some(s), None) if matches!(s.fault, Fault::UninitializedShared { .. }) => {
                poisoned_outputs(&calibration, &test, &guarded_bytes, s)?
            }
            (None, Some(g)) => (false, format!("GPU: {g} | simulator: no fault")),
            (Some(s), None) => (false, format!("GPU: no fault | simulator: {s}")),
        };
        if gpu.is_some() {
            // The context survives the fault: the original's guarded build
            // still runs (its unguarded one may fault for real, where the
            // original itself does).
            calibration.arm(&test, Budget::NONE)?;
            run(&calibration.kernel, &test)?;
        }
        found.failures += usize::from(!agree);
        found.lines.push(format!(
            "{} {}: {what}",
            if agree { "agree " } else { "DIFFER" },
            case.name
        ));
    }
    Ok(found)
}

/// A read of shared memory never written, which the simulator found and
/// the guarded build records no fault for: it agrees when the guarded
/// outputs (shared memory poisoned first) differ from the original's
/// guarded run's, as the output check then rejects it.
fn poisoned_outputs(
    original: &GuardedKernel,
    test: &StagedTest,
    guarded_bytes: &[Vec<u8>],
    sim: &Verdict,
) -> Result<(bool, String), CudaError> {
    original.arm(test, Budget::NONE)?;
    let original_bytes = run(&original.kernel, test)?;
    let differ = original_bytes != guarded_bytes;
    let what = match differ {
        true => "differ from",
        false => "are the SAME AS",
    };
    Ok((
        differ,
        format!("GPU: the guarded outputs (shared memory poisoned) {what} the original's | simulator: {sim}"),
    ))
}

/// One run with the inputs restored; every argument's final bytes.
fn run(kernel: &Kernel, test: &StagedTest) -> Result<Vec<Vec<u8>>, CudaError> {
    let binding = test.run_once(kernel, false, &Pacer::new()?, &Event::new()?, LIMIT)?;
    let mut out = Vec::with_capacity(binding.len());
    for &slot in &binding {
        out.push(match &test.work[slot] {
            Some(buffer) => {
                let mut bytes = vec![0u8; buffer.len];
                buffer.download(&mut bytes)?;
                bytes
            }
            None => Vec::new(),
        });
    }
    Ok(out)
}

/// The same fault as far as two runs can agree: its class and space, the
/// argument, and which side of the buffer (the first thread to fault may
/// differ, so the element may too).
fn same_fault(sim: &Verdict, gpu: &Verdict) -> bool {
    let class = |v: &Verdict| match &v.fault {
        Fault::OutOfBounds { space, .. } => format!("bounds {space}"),
        Fault::StepBudget { .. } | Fault::TripBudget { .. } | Fault::TimeBudget { .. } => {
            "budget".into()
        }
        Fault::DivergentBarrier { .. } | Fault::WarpDivergentBarrier { .. } => {
            "divergent barrier".into()
        }
        other => format!("{other:?}"),
    };
    let side = |v: &Verdict| {
        let text = v.to_string();
        if text.contains("before its start") {
            "before"
        } else if text.contains("past its end") {
            "past"
        } else {
            "inside"
        }
    };
    let arg = |v: &Verdict| v.context.buffer.as_ref().map(|b| b.arg.clone());
    class(sim) == class(gpu) && arg(sim) == arg(gpu) && side(sim) == side(gpu)
}
