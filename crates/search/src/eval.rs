//! Evaluation: (kernel IR + patch, spec, test set, backend) -> per test a
//! verdict, a cost and the error against the reference. The reference of each
//! test is the original kernel's output on the same inputs, computed once.

use gevo_ir::{EditKind, IrError, KernelIr, Patch};
pub use gevo_model::assessment::{
    compare_outputs, inputs_unchanged, Assessment, Failure, KernelTime, TestResult, TestSummary,
};
use gevo_model::sim::code::Program;
use gevo_model::sim::{
    self, pointer, BufferName, Fault, GlobalMemory, LaunchDims, Limits, RunStats, Verdict,
};
use gevo_model::spec::{self, scalar_bits, ArgValue, Spec, SpecError, TestCase, TestSet};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

mod arguments;
mod blame;
mod generated;

pub use blame::SpecCause;
pub use generated::{Dropped, GeneratedTests, Kept, COST_CAP_FACTOR};

/// A variant may run this many times the original's steps per block before
/// it is stopped (mutations easily make loops endless). A variant that
/// needs more is no candidate for a faster kernel, and each endless one
/// costs this many blocks of simulation: 5 measured a fifth off the loops
/// fixture's search (20 before) with the same variants validated.
pub const DEFAULT_BUDGET_FACTOR: u64 = 5;
/// Budget floor, so kernels whose blocks do almost nothing still get room.
const MIN_BLOCK_BUDGET: u64 = 100_000;

#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    #[error(transparent)]
    Spec(#[from] SpecError),
    #[error("{}: {source}", spec.display())]
    Ir {
        spec: std::path::PathBuf,
        #[source]
        source: IrError,
    },
    /// A finding about the user's kernel, not gevo's error: one block of
    /// text saying what is wrong, on which test, where, and what to do.
    /// When a change to the spec clears the fault (`spec_cause`: tried, not
    /// guessed), the advice names that spec line and ends by sending the
    /// user to that field; otherwise it ends by sending them to the
    /// kernel's line.
    #[error(
        "{}: {test}: the original kernel fails on the simulator: {verdict}\n\
         The kernel does this before gevo changes anything. On a GPU it may run without a visible \
         error (memory next to a buffer is often mapped; some GPUs tolerate a divergent barrier), \
         but its result is then undefined, and there is no reference to judge variants against.\n\
         {}",
        spec.display(),
        blame::what_to_do(spec_cause.as_ref(), verdict)
    )]
    OriginalFails {
        spec: std::path::PathBuf,
        test: String,
        verdict: Box<Verdict>,
        spec_cause: Option<SpecCause>,
    },
}

/// What a test needs once per evaluator: its inputs and the original
/// kernel's outputs and stats on them.
struct Reference {
    instance: spec::Instance,
    outputs: Vec<Vec<u8>>,
    stats: RunStats,
    /// The `in` buffers (memory slots) the original never writes on this
    /// test: a variant's store into one is a verdict.
    protected: Vec<usize>,
}

/// The original's run on one test: its stats, every argument's final
/// bytes, and the `in` buffers it never writes.
type OriginalRun = (RunStats, Vec<Vec<u8>>, Vec<usize>);

/// Evaluates variants of one spec's kernel on the simulator.
pub struct Evaluator {
    spec: Spec,
    ir: KernelIr,
    /// The original of each kernel the pipeline uses, in `spec.kernels` order.
    original: Vec<Program>,
    workers: usize,
    budget_factor: u64,
    references: Mutex<HashMap<String, Arc<Reference>>>,
    /// The generated held-out tests, made on first use (`generated.rs`).
    generated: Mutex<Option<Arc<GeneratedTests>>>,
}

impl Evaluator {
    pub fn new(spec: Spec, workers: usize) -> Result<Self, EvalError> {
        let ir_error = |source| EvalError::Ir {
            spec: spec.path.clone(),
            source,
        };
        let ir = KernelIr::load_spec(&spec).map_err(ir_error)?;
        let original = ir.lower_all(&ir.empty_patch()).map_err(ir_error)?;
        arguments::check(&spec, &original)?;
        Ok(Evaluator {
            spec,
            ir,
            original,
            workers: workers.max(1),
            budget_factor: DEFAULT_BUDGET_FACTOR,
            references: Mutex::new(HashMap::new()),
            generated: Mutex::new(None),
        })
    }

    pub fn spec(&self) -> &Spec {
        &self.spec
    }

    pub fn ir(&self) -> &KernelIr {
        &self.ir
    }

    fn reference(&self, test: &TestCase) -> Result<Arc<Reference>, EvalError> {
        if let Some(r) = self
            .references
            .lock()
            .expect("reference cache")
            .get(&test.name)
        {
            return Ok(r.clone());
        }
        let instance = self.spec.instantiate(test)?;
        let limits = Limits {
            block_step_budget: u64::MAX,
        };
        let (stats, outputs, protected) =
            self.run_original(&instance, limits).map_err(|verdict| {
                let spec_cause = blame::spec_cause(
                    &self.spec,
                    &self.original,
                    &instance,
                    &verdict,
                    self.workers,
                );
                EvalError::OriginalFails {
                    spec: self.spec.path.clone(),
                    test: test.name.clone(),
                    verdict: Box::new(self.located(verdict)),
                    spec_cause,
                }
            })?;
        let r = Arc::new(Reference {
            instance,
            outputs,
            stats,
            protected,
        });
        self.references
            .lock()
            .expect("reference cache")
            .insert(test.name.clone(), r.clone());
        Ok(r)
    }

    /// Runs the original on `instance` with every unswapped `in` buffer
    /// protected, dropping from the protection each one it writes (so a
    /// kernel writing an input reruns once per such buffer): its stats,
    /// outputs, and the `in` buffers it never writes.
    fn run_original(
        &self,
        instance: &spec::Instance,
        limits: Limits,
    ) -> Result<OriginalRun, Verdict> {
        let mut protected = input_slots(&self.spec, instance);
        loop {
            match simulate_guarded(&self.original, instance, &protected, limits, self.workers) {
                Err(Verdict {
                    fault: Fault::InputWritten { buffer, .. },
                    ..
                }) if protected.contains(&buffer) => protected.retain(|&b| b != buffer),
                Err(v) => return Err(v),
                Ok((stats, outputs)) => return Ok((stats, outputs, protected)),
            }
        }
    }

    /// The original kernel's outputs on `test` (per argument; empty for
    /// scalars), computed once.
    pub fn reference_outputs(&self, test: &TestCase) -> Result<Vec<Vec<u8>>, EvalError> {
        Ok(self.reference(test)?.outputs.clone())
    }

    /// The verdict with its instruction's CUDA source line, when the IR
    /// has line tables (an instruction a patch cloned has none).
    fn located(&self, mut verdict: Verdict) -> Verdict {
        verdict.context.source = self.ir.source_line(verdict.instruction).map(str::to_string);
        verdict
    }

    /// [`Self::located`] for a variant of `patch`: an instruction the patch
    /// cloned (copy, replace) has its source's line, as the edit engine
    /// keeps it, so a clone's verdict names the line it came from.
    fn located_in(&self, mut verdict: Verdict, patch: &Patch) -> Verdict {
        let mut id = verdict.instruction;
        // Clones of clones: at most one step per edit.
        for _ in 0..=patch.edits.len() {
            let source = patch.edits.iter().find_map(|e| match e.kind {
                EditKind::Copy { src, clone, .. } if clone.0 == id => Some(src.0),
                EditKind::Replace { with, clone, .. } if clone.0 == id => Some(with.0),
                _ => None,
            });
            match source {
                Some(s) => id = s,
                None => break,
            }
        }
        verdict.context.source = self.ir.source_line(id).map(str::to_string);
        verdict
    }

    /// Runs `patch` on every test of `set` (the generated tests until the
    /// first failure).
    pub fn evaluate(&self, patch: &Patch, set: TestSet) -> Result<Vec<TestResult>, EvalError> {
        if set == TestSet::Generated {
            return self.evaluate_generated(patch);
        }
        self.evaluate_until(patch, &self.spec.tests(set), |_| false)
    }

    /// Runs `patch` (lowered once) on the given tests of the spec, in
    /// order, until a result `stop` accepts (it is the last returned).
    pub fn evaluate_until(
        &self,
        patch: &Patch,
        tests: &[&TestCase],
        stop: impl Fn(&TestResult) -> bool,
    ) -> Result<Vec<TestResult>, EvalError> {
        self.evaluate_lowered(patch, &self.ir.lower_all(patch), tests, stop)
    }

    /// [`Evaluator::evaluate_until`] on `patch` already lowered (or not
    /// lowerable): a caller that replayed it for other work lowers it from
    /// that replay.
    pub fn evaluate_lowered(
        &self,
        patch: &Patch,
        program: &Result<Vec<Program>, IrError>,
        tests: &[&TestCase],
        stop: impl Fn(&TestResult) -> bool,
    ) -> Result<Vec<TestResult>, EvalError> {
        let mut results = Vec::new();
        for &test in tests {
            let reference = self.reference(test)?;
            let instance = &reference.instance;
            let mut result = TestResult {
                test: test.name.clone(),
                failure: None,
                cost: None,
                original_cost: reference.stats.cost,
                error: None,
            };
            match program {
                Err(e) => result.failure = Some(Failure::Invalid(e.to_string())),
                Ok(program) => {
                    let budget = (reference
                        .stats
                        .max_block_steps
                        .saturating_mul(self.budget_factor))
                    .max(MIN_BLOCK_BUDGET);
                    match simulate_guarded(
                        program,
                        instance,
                        &reference.protected,
                        Limits {
                            block_step_budget: budget,
                        },
                        self.workers,
                    ) {
                        Err(v) => {
                            result.failure = Some(Failure::Verdict(self.located_in(v, patch)))
                        }
                        Ok((stats, outputs)) => {
                            result.cost = Some(stats.cost);
                            let (failure, error) =
                                compare_outputs(&self.spec, instance, &reference.outputs, &outputs);
                            result.failure = failure.or_else(|| {
                                inputs_unchanged(&self.spec, instance, &reference.outputs, &outputs)
                            });
                            result.error = Some(error);
                        }
                    }
                }
            }
            let last = stop(&result);
            results.push(result);
            if last {
                break;
            }
        }
        Ok(results)
    }
}

/// The verdict with the global buffer it names given as the spec's
/// argument bound to it in this launch, and the launch named.
fn name_buffer(
    mut verdict: Verdict,
    instance: &spec::Instance,
    launch: &spec::LaunchInstance,
) -> Verdict {
    if !launch.label.is_empty() {
        verdict.context.launch = Some(launch.label.clone());
    }
    let buffer = match verdict.fault {
        Fault::OutOfBounds {
            space: "global",
            buffer,
            ..
        }
        | Fault::GlobalRace { buffer, .. }
        | Fault::InputWritten { buffer, .. } => buffer,
        _ => return verdict,
    };
    let Some(arg) = launch.params.iter().find_map(|p| match *p {
        spec::LaunchParam::Buffer { arg, slot } if slot == buffer => Some(arg),
        _ => None,
    }) else {
        return verdict;
    };
    if let ArgValue::Buffer { elem, data, .. } = &instance.args[arg] {
        verdict.context.buffer = Some(BufferName {
            arg: instance.names[arg].clone(),
            elem_bytes: elem.size() as u64,
            len: (data.len() / elem.size().max(1)) as u64,
        });
    }
    verdict
}

/// The memory slots of the spec's `in` buffers that stay bound to their
/// own argument in every launch (a buffer in a swap is not protected).
fn input_slots(spec: &Spec, instance: &spec::Instance) -> Vec<usize> {
    let moved = |i: usize| {
        instance.launches.iter().any(|l| {
            l.params.iter().any(|p| {
                matches!(*p, spec::LaunchParam::Buffer { arg, slot } if (arg == i) != (slot == i))
            })
        })
    };
    spec.args
        .iter()
        .enumerate()
        .filter(|(i, a)| {
            matches!(
                a.kind,
                spec::ArgKind::Buffer {
                    role: spec::Role::In,
                    ..
                }
            ) && instance.final_binding.get(*i) == Some(i)
                && !moved(*i)
        })
        .map(|(i, _)| i)
        .collect()
}

/// Runs one test instance (all its launches, each with its kernel, on
/// buffers bound as the swaps left them) and returns the summed stats and
/// every argument's final bytes (empty for scalars). `programs` are the
/// spec's kernels in order.
pub fn simulate(
    programs: &[Program],
    instance: &spec::Instance,
    limits: Limits,
    workers: usize,
) -> Result<(RunStats, Vec<Vec<u8>>), Verdict> {
    simulate_guarded(programs, instance, &[], limits, workers)
}

/// [`simulate`], with a store into a `protected` memory slot a verdict
/// (`Fault::InputWritten`).
pub fn simulate_guarded(
    programs: &[Program],
    instance: &spec::Instance,
    protected: &[usize],
    limits: Limits,
    workers: usize,
) -> Result<(RunStats, Vec<Vec<u8>>), Verdict> {
    let buffers: Vec<&[u8]> = instance
        .args
        .iter()
        .map(|a| match a {
            ArgValue::Buffer { data, .. } => data.as_slice(),
            ArgValue::Scalar(_) => &[],
        })
        .collect();
    let mut memory = GlobalMemory::new(&buffers);
    for &slot in protected {
        memory.protect(slot);
    }
    let mut total = RunStats::default();
    for launch in &instance.launches {
        let dims = LaunchDims {
            grid: launch.grid,
            block: launch.block,
            dynamic_shared_bytes: u64::from(launch.shared_bytes),
        };
        let args: Vec<u64> = launch
            .params
            .iter()
            .map(|p| match *p {
                spec::LaunchParam::Buffer { slot, .. } => {
                    pointer::make(pointer::GLOBAL, slot as u64, 0)
                }
                spec::LaunchParam::Scalar(s) => scalar_bits(s),
            })
            .collect();
        total.add(
            &sim::run(
                &programs[launch.kernel],
                &dims,
                &args,
                &memory,
                limits,
                workers,
            )
            .map_err(|v| name_buffer(v, instance, launch))?,
        );
    }
    let outputs = instance
        .args
        .iter()
        .enumerate()
        .map(|(i, a)| match a {
            ArgValue::Buffer { .. } => memory.contents(instance.final_binding[i]),
            ArgValue::Scalar(_) => Vec::new(),
        })
        .collect();
    Ok((total, outputs))
}
