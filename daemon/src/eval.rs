//! Evaluation: (kernel IR + patch, spec, test set, backend) -> per test a
//! verdict, a cost and the error against the reference. The reference of each
//! test is the original kernel's output on the same inputs, computed once.

use crate::device::DeviceInfo;
use crate::ir::{IrError, KernelIr, Patch};
use crate::sim::code::Program;
use crate::sim::{
    self, pointer, BufferName, Fault, GlobalMemory, LaunchDims, Limits, RunStats, Verdict,
};
use crate::spec::{self, ArgValue, Scalar, Spec, SpecError, TestCase, TestSet};
use crate::stats::{self, Interval, Timing};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// A variant may run this many times the original's steps per block before
/// it is stopped (mutations easily make loops endless).
pub const DEFAULT_BUDGET_FACTOR: u64 = 20;
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
    #[error(
        "{}: {test}: the original kernel fails on the simulator: {verdict}\n\
         The kernel does this before gevo changes anything. On a GPU it may run without a visible \
         error (memory next to a buffer is often mapped; some GPUs tolerate a divergent barrier), \
         but its result is then undefined, and there is no reference to judge variants against.\n\
         Fix the kernel{}, or give tests that do not reach the fault.",
        spec.display(),
        verdict.context.source.as_deref().map_or(String::new(), |s| format!(" at {s}"))
    )]
    OriginalFails {
        spec: std::path::PathBuf,
        test: String,
        verdict: Box<Verdict>,
    },
    #[error("{}: {message}", spec.display())]
    Arguments {
        spec: std::path::PathBuf,
        message: String,
    },
}

/// Why a test did not pass.
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    /// The variant does not build (invalid patch, unsupported by the simulator).
    Invalid(String),
    /// The simulator stopped it.
    Verdict(Verdict),
    /// It ran, but an output differs from the reference beyond the tolerance.
    Mismatch {
        arg: String,
        error: f64,
        first_mismatch: Option<usize>,
    },
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Invalid(m) => write!(f, "invalid variant: {m}"),
            Failure::Verdict(v) => write!(f, "{v}"),
            Failure::Mismatch {
                arg,
                error,
                first_mismatch,
            } => {
                write!(
                    f,
                    "output {arg} differs from the reference (error {error:e}"
                )?;
                if let Some(i) = first_mismatch {
                    write!(f, ", first at element {i}")?;
                }
                f.write_str(")")
            }
        }
    }
}

impl Failure {
    pub fn kind(&self) -> &'static str {
        match self {
            Failure::Invalid(_) => "invalid",
            Failure::Verdict(v) => v.kind(),
            Failure::Mismatch { .. } => "mismatch",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct TestResult {
    pub test: String,
    pub failure: Option<Failure>,
    /// The simulator's cost (all launches), when the run completed.
    pub cost: Option<u64>,
    /// The original kernel's cost on the same test.
    pub original_cost: u64,
    /// Largest error of any output against the reference, when it ran.
    pub error: Option<f64>,
}

impl TestResult {
    pub fn passed(&self) -> bool {
        self.failure.is_none()
    }
}

/// One test's result in plain data, as the search and the wire see it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TestSummary {
    pub test: String,
    /// `None` when the test passed; else the failure's kind (`mismatch`,
    /// `race`, ...) and its message.
    pub failure: Option<(String, String)>,
    pub cost: Option<u64>,
    pub original_cost: u64,
    pub error: Option<f64>,
    /// GPU rounds (the costs above are their medians, in nanoseconds); none
    /// on the simulator, whose costs are exact counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timing: Option<Timing>,
    /// On the GPU, for a pipeline of several kernels: each kernel's time
    /// (its launches summed) for the original and the variant.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kernels: Vec<KernelTime>,
}

/// One kernel's share of a pipeline's time on one test (medians over a few
/// runs with an event after every launch, apart from the timed rounds).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct KernelTime {
    /// The kernel as the spec names it.
    pub kernel: String,
    pub original_ns: f64,
    pub variant_ns: f64,
}

impl TestSummary {
    /// This test's cost ratio with its confidence interval: a bootstrap over
    /// its GPU rounds, or the exact point on the simulator.
    pub fn cost_interval(&self) -> Option<Interval> {
        let cost = self.cost?;
        Some(match &self.timing {
            Some(t) if !t.original_ns.is_empty() => stats::cost_ratio(&[t]),
            _ => Interval::point(cost as f64 / self.original_cost.max(1) as f64),
        })
    }

    /// A test that did not pass, with no measurements.
    pub fn failed(test: &str, kind: &str, message: String) -> Self {
        TestSummary {
            test: test.to_string(),
            failure: Some((kind.to_string(), message)),
            cost: None,
            original_cost: 0,
            error: None,
            timing: None,
            kernels: Vec::new(),
        }
    }
}

/// A variant's results on one test set.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Assessment {
    pub tests: Vec<TestSummary>,
    /// The GPU that measured it (none on the simulator).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<DeviceInfo>,
}

impl Assessment {
    pub fn new(results: &[TestResult]) -> Self {
        let tests = results
            .iter()
            .map(|r| TestSummary {
                test: r.test.clone(),
                failure: r
                    .failure
                    .as_ref()
                    .map(|f| (f.kind().to_string(), f.to_string())),
                cost: r.cost,
                original_cost: r.original_cost,
                error: r.error,
                timing: None,
                kernels: Vec::new(),
            })
            .collect();
        Assessment {
            tests,
            device: None,
        }
    }

    /// A variant that failed before any test ran (one pseudo-test `test`).
    pub fn failed(test: &str, kind: &str, message: String) -> Self {
        Assessment {
            tests: vec![TestSummary::failed(test, kind, message)],
            device: None,
        }
    }

    pub fn passed(&self) -> bool {
        self.tests.iter().all(|t| t.failure.is_none())
    }

    /// The first failing test, as `<test>: <failure>`.
    pub fn first_failure(&self) -> Option<String> {
        self.tests
            .iter()
            .find_map(|t| t.failure.as_ref().map(|(_, m)| format!("{}: {m}", t.test)))
    }

    /// Summed cost over summed original cost, when every test ran.
    pub fn cost_ratio(&self) -> Option<f64> {
        let mut cost = 0u64;
        let mut original = 0u64;
        for t in &self.tests {
            cost = cost.saturating_add(t.cost?);
            original = original.saturating_add(t.original_cost);
        }
        Some(cost as f64 / original.max(1) as f64)
    }

    /// The cost ratio with its confidence interval: a bootstrap over the GPU
    /// rounds when every test was timed, else the exact point.
    pub fn cost_interval(&self) -> Option<Interval> {
        let point = self.cost_ratio()?;
        let timings: Option<Vec<&Timing>> = self.tests.iter().map(|t| t.timing.as_ref()).collect();
        Some(match timings {
            Some(t) if !t.is_empty() => stats::cost_ratio(&t),
            _ => Interval::point(point),
        })
    }

    /// The first test the variant is slower on with confidence, by more
    /// than `tolerance` (a fraction of the original's cost), as a reason.
    pub fn first_regression(&self, tolerance: f64) -> Option<String> {
        self.tests.iter().find_map(|t| {
            let i = t.cost_interval()?;
            (i.lo > 1.0 + tolerance).then(|| {
                format!(
                    "{}: slower with confidence on this test (cost ratio {:.4}, 95% interval {:.4}..{:.4}; max_test_regression {tolerance})",
                    t.test, i.estimate, i.lo, i.hi
                )
            })
        })
    }

    /// The largest error of any output on any test (0 when none ran).
    pub fn error(&self) -> f64 {
        self.tests
            .iter()
            .filter_map(|t| t.error)
            .fold(0.0, f64::max)
    }
}

/// What a test needs once per evaluator: its inputs and the original
/// kernel's outputs and stats on them.
struct Reference {
    instance: spec::Instance,
    outputs: Vec<Vec<u8>>,
    stats: RunStats,
}

/// Evaluates variants of one spec's kernel on the simulator.
pub struct Evaluator {
    spec: Spec,
    ir: KernelIr,
    /// The original of each kernel the pipeline uses, in `spec.kernels` order.
    original: Vec<Program>,
    workers: usize,
    budget_factor: u64,
    references: Mutex<HashMap<String, Arc<Reference>>>,
}

impl Evaluator {
    pub fn new(spec: Spec, workers: usize) -> Result<Self, EvalError> {
        let ir_error = |source| EvalError::Ir {
            spec: spec.path.clone(),
            source,
        };
        let ir = KernelIr::load_kernels(&spec.ir, &spec.kernels).map_err(ir_error)?;
        let original = ir.lower_all(&ir.empty_patch()).map_err(ir_error)?;
        check_arguments(&spec, &original)?;
        Ok(Evaluator {
            spec,
            ir,
            original,
            workers: workers.max(1),
            budget_factor: DEFAULT_BUDGET_FACTOR,
            references: Mutex::new(HashMap::new()),
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
        let (stats, outputs) =
            simulate(&self.original, &instance, limits, self.workers).map_err(|verdict| {
                EvalError::OriginalFails {
                    spec: self.spec.path.clone(),
                    test: test.name.clone(),
                    verdict: Box::new(self.located(verdict)),
                }
            })?;
        let r = Arc::new(Reference {
            instance,
            outputs,
            stats,
        });
        self.references
            .lock()
            .expect("reference cache")
            .insert(test.name.clone(), r.clone());
        Ok(r)
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

    /// Runs `patch` on every test of `set`.
    pub fn evaluate(&self, patch: &Patch, set: TestSet) -> Result<Vec<TestResult>, EvalError> {
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
        let program = self.ir.lower_all(patch);
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
            match &program {
                Err(e) => result.failure = Some(Failure::Invalid(e.to_string())),
                Ok(program) => {
                    let budget = (reference
                        .stats
                        .max_block_steps
                        .saturating_mul(self.budget_factor))
                    .max(MIN_BLOCK_BUDGET);
                    match simulate(
                        program,
                        instance,
                        Limits {
                            block_step_budget: budget,
                        },
                        self.workers,
                    ) {
                        Err(v) => result.failure = Some(Failure::Verdict(self.located(v))),
                        Ok((stats, outputs)) => {
                            result.cost = Some(stats.cost);
                            let (failure, error) =
                                compare_outputs(&self.spec, instance, &reference.outputs, &outputs);
                            result.failure = failure;
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

/// Compares every output argument of a run with the reference under the
/// spec's acceptance: the first failing output (if any), and the largest
/// error of any output.
pub fn compare_outputs(
    spec: &Spec,
    instance: &spec::Instance,
    reference: &[Vec<u8>],
    actual: &[Vec<u8>],
) -> (Option<Failure>, f64) {
    let mut worst = 0f64;
    let mut failure = None;
    for i in spec.outputs() {
        let ArgValue::Buffer { elem, .. } = &instance.args[i] else {
            continue;
        };
        let c = spec::compare(&spec.acceptance, *elem, &reference[i], &actual[i]);
        worst = worst.max(c.error);
        if !c.passed && failure.is_none() {
            failure = Some(Failure::Mismatch {
                arg: spec.args[i].name.clone(),
                error: c.error,
                first_mismatch: c.first_mismatch,
            });
        }
    }
    (failure, worst)
}

/// Every launch's arguments must match its kernel's parameters in number
/// and kind: buffers for pointers, scalars of the parameter's width otherwise.
fn check_arguments(spec: &Spec, programs: &[Program]) -> Result<(), EvalError> {
    let error = |message: String| EvalError::Arguments {
        spec: spec.path.clone(),
        message,
    };
    for launch in spec.launch_specs() {
        let program = &programs[launch.kernel];
        // The single-kernel form's messages name `args[i]` as before.
        let (prefix, field) = if spec.is_single_launch() {
            (String::new(), "args".to_string())
        } else {
            (
                format!("{} ({}): ", launch.field, spec.kernels[launch.kernel]),
                format!("{}.args", launch.field),
            )
        };
        if launch.args.len() != program.params.len() {
            return Err(error(format!(
                "{prefix}the spec {} {} arguments but kernel {} takes {}",
                if spec.is_single_launch() {
                    "lists"
                } else {
                    "passes"
                },
                launch.args.len(),
                program.kernel,
                program.params.len()
            )));
        }
        for (i, (arg, param)) in launch.args.iter().zip(&program.params).enumerate() {
            let (name, kind) = match arg {
                spec::LaunchArg::Named(j) => (
                    spec.args[*j].name.clone(),
                    match &spec.args[*j].kind {
                        spec::ArgKind::Buffer { .. } => None,
                        spec::ArgKind::Scalar { ty, .. } => Some(*ty),
                    },
                ),
                spec::LaunchArg::Scalar { name, ty, .. } => {
                    (name.clone().unwrap_or_else(|| "scalar".into()), Some(*ty))
                }
            };
            match (kind, param.is_pointer) {
                (None, true) => {}
                (Some(ty), false) if ty.size() * 8 == param.bits as usize => {}
                (Some(ty), false) => {
                    return Err(error(format!(
                        "{prefix}{field}[{i}] ({name}): {} does not match the kernel's {}-bit parameter",
                        ty.name(),
                        param.bits
                    )))
                }
                (_, pointer) => {
                    return Err(error(format!(
                        "{prefix}{field}[{i}] ({name}): the kernel's parameter {i} is {}",
                        if pointer {
                            "a pointer: pass a buffer (kind = \"buffer\")"
                        } else {
                            "not a pointer: pass a scalar (kind = \"scalar\")"
                        }
                    )))
                }
            }
        }
    }
    Ok(())
}

pub fn scalar_bits(s: Scalar) -> u64 {
    match s {
        Scalar::I8(v) => v as u8 as u64,
        Scalar::I16(v) => v as u16 as u64,
        Scalar::I32(v) => v as u32 as u64,
        Scalar::I64(v) => v as u64,
        Scalar::U8(v) => u64::from(v),
        Scalar::U16(v) => u64::from(v),
        Scalar::U32(v) => u64::from(v),
        Scalar::U64(v) => v,
        Scalar::F32(v) => u64::from(v.to_bits()),
        Scalar::F64(v) => v.to_bits(),
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
        | Fault::GlobalRace { buffer, .. } => buffer,
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
    let buffers: Vec<&[u8]> = instance
        .args
        .iter()
        .map(|a| match a {
            ArgValue::Buffer { data, .. } => data.as_slice(),
            ArgValue::Scalar(_) => &[],
        })
        .collect();
    let memory = GlobalMemory::new(&buffers);
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
