//! What a guarded check build costs on the GPU (`gevod gpu-guard-check
//! --cost`): the original's ordinary and guarded builds run on each of the
//! spec's GPU train tests, a few times each, alternating; per test the
//! median time to restore the inputs (device-to-device copies) before an
//! ordinary run and before a guarded one (which leaves the kept inputs,
//! those the original does not change, where its build protects them:
//! `StagedTest::restore_for`), and the median kernel time of each build
//! (events around its launches). The
//! output check runs the guarded build once per train test, so these are
//! the parts of its cost that the GPU itself sets; the GPU worker's
//! `output check` seconds less these are launch, comparison and read-back
//! overhead.

use super::device_test::StagedTest;
use super::driver::{Context, Event, Kernel};
use super::guard_check::GuardCheckError;
use super::guarded::{Budget, GuardedKernel};
use super::load::Loader;
use super::pace::Pacer;
use super::part_assembly::PartAssembler;
use super::CudaError;
use gevo_ir::{CodegenOptions, KernelIr};
use gevo_model::spec::{ArgValue, Role, Spec, TestSet};
use gevo_model::stats::median;
use std::time::{Duration, Instant};

/// One test's medians, in milliseconds.
#[derive(Debug, Clone, PartialEq)]
pub struct TestCost {
    pub test: String,
    pub restore_ms: f64,
    pub guarded_restore_ms: f64,
    pub plain_ms: f64,
    pub guarded_ms: f64,
}

impl std::fmt::Display for TestCost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "cost {}: restore {:.3} ms ({:.3} ms before a guarded run), ordinary build {:.3} ms, guarded build {:.3} ms ({:.2}x)",
            self.test,
            self.restore_ms,
            self.guarded_restore_ms,
            self.plain_ms,
            self.guarded_ms,
            self.guarded_ms / self.plain_ms.max(1e-9)
        )
    }
}

const LIMIT: Duration = Duration::from_secs(60);

/// The original's builds timed on every train test of `spec` (give it the
/// GPU's tests) on device `ordinal`, `runs` times each after a warm-up.
/// The guarded build is loaded by the driver's JIT, or with `parts` as
/// compile workers assemble it (a kernel at a time, at the level
/// `parts`' assembler has: `Assembler::for_checks`).
pub fn cost(
    spec: &Spec,
    ir: &KernelIr,
    codegen: &CodegenOptions,
    ordinal: usize,
    runs: usize,
    parts: Option<&mut PartAssembler>,
) -> Result<Vec<TestCost>, GuardCheckError> {
    let names: Vec<String> = ir.chosen_kernels().iter().map(|k| k.to_string()).collect();
    let _context = Context::new(ordinal)?;
    let empty = ir.empty_patch();
    let plain = Kernel::load(&ir.compile(&empty, codegen)?.ptx, &names)?;
    let guarded_build = ir.compile_guarded(&empty, codegen)?;
    let guarded = match parts {
        Some(parts) => {
            let cubin = parts.assemble(&guarded_build.ptx, &codegen.arch)?;
            GuardedKernel::from_kernel(Kernel::load_cubin(&cubin, &names)?)?
        }
        None => GuardedKernel::load(&Loader::Jit, &guarded_build.ptx, None, &names)?,
    };
    let protects = guarded_build.protects_inputs;
    let timer = Timer::new()?;
    let mut costs = Vec::new();
    for case in spec.tests(TestSet::Train) {
        let mut test = StagedTest::upload(&case.name, spec.instantiate(case)?)?;
        timer.time(&plain, false, &test)?;
        test.kept_inputs = kept_inputs(&test)?;
        // The budget the GPU worker arms: from the guarded run's trips and
        // time with none.
        guarded.arm(&test, Budget::NONE)?;
        let started = Instant::now();
        timer.time(&guarded.kernel, false, &test)?;
        let most = guarded.state()?.most_trips();
        guarded.arm(&test, Budget::from_original(most, started.elapsed()))?;
        timer.time(&plain, false, &test)?; // warm-up
        let mut restore = Vec::new();
        let (mut guarded_restore, mut ordinary, mut checked) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..runs.max(1) {
            let (r, k) = timer.time(&plain, false, &test)?;
            restore.push(r);
            ordinary.push(k);
            // As the GPU worker checks: a guarded run after another.
            timer.time(&guarded.kernel, protects, &test)?;
            let (r, k) = timer.time(&guarded.kernel, protects, &test)?;
            guarded_restore.push(r);
            checked.push(k);
        }
        costs.push(TestCost {
            test: case.name.clone(),
            restore_ms: median(&restore),
            guarded_restore_ms: median(&guarded_restore),
            plain_ms: median(&ordinary),
            guarded_ms: median(&checked),
        });
    }
    Ok(costs)
}

/// Events around a run's restore and its launches.
struct Timer {
    pacer: Pacer,
    before_restore: Event,
    before_launches: Event,
    after: Event,
}

impl Timer {
    fn new() -> Result<Self, CudaError> {
        Ok(Timer {
            pacer: Pacer::new()?,
            before_restore: Event::new()?,
            before_launches: Event::new()?,
            after: Event::new()?,
        })
    }

    /// One run: (restore ms, launches ms); `protected` as
    /// `StagedTest::restore_for` says.
    fn time(
        &self,
        kernel: &Kernel,
        protected: bool,
        test: &StagedTest,
    ) -> Result<(f64, f64), CudaError> {
        self.pacer.begin(LIMIT);
        self.before_restore.record()?;
        test.restore_for(protected)?;
        self.before_launches.record()?;
        test.launch_all(kernel, &self.pacer)?;
        self.after.record()?;
        self.pacer.wait(&self.after)?;
        Ok((
            self.before_restore.nanos_until(&self.before_launches)? / 1e6,
            self.before_launches.nanos_until(&self.after)? / 1e6,
        ))
    }
}

/// The `in` arguments the original's run (just made) left as uploaded,
/// compared on the host: a diagnostic's way, where the GPU worker compares
/// on the device (`Measurer::inputs_left`).
fn kept_inputs(test: &StagedTest) -> Result<Vec<usize>, CudaError> {
    let mut kept = Vec::new();
    for (i, arg) in test.instance.args.iter().enumerate() {
        let (
            ArgValue::Buffer {
                role: Role::In,
                data,
                ..
            },
            Some(buffer),
        ) = (arg, test.work[test.instance.final_binding[i]].as_ref())
        else {
            continue;
        };
        let mut now = vec![0u8; buffer.len];
        buffer.download(&mut now)?;
        if now == *data {
            kept.push(i);
        }
    }
    Ok(kept)
}
