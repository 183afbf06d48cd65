//! What evaluating a variant yields, whatever evaluated it: why a test
//! failed ([`Failure`]), one test's result ([`TestResult`], and in plain
//! data [`TestSummary`]), and a variant's results on a test set
//! ([`Assessment`]), with the output comparison that judges a run. The
//! simulator's evaluator (`eval`), the GPU worker (`cuda`), harness runs
//! and the search (`evolve`) share them.

use crate::device::DeviceInfo;
use crate::sim::Verdict;
use crate::spec::{self, ArgValue, Spec};
use crate::stats::{self, Interval, Timing};

/// Why a test did not pass.
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    /// The variant does not build (invalid patch, unsupported by the simulator).
    Invalid(String),
    /// The simulator stopped it.
    Verdict(Verdict),
    /// It changed an `in` buffer that the original leaves unchanged
    /// (compared bitwise after the run, on the simulator).
    InputWritten { arg: String, first_change: usize },
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
            Failure::InputWritten { arg, first_change } => write!(
                f,
                "writes the input buffer `{arg}`, which the original leaves unchanged (first changed byte {first_change})"
            ),
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
            Failure::InputWritten { .. } => "input_written",
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
    /// GPU rounds (the costs above are their lower quartiles,
    /// `stats::undisturbed`, in nanoseconds); none
    /// on the simulator, whose costs are exact counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timing: Option<Timing>,
    /// On the GPU, for a pipeline of several kernels: each kernel's time
    /// (its launches summed) for the original and the variant.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kernels: Vec<KernelTime>,
}

/// One kernel's share of a pipeline's time on one test (lower quartiles of a few
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

/// Compares every output argument of a run with the reference under the
/// spec's acceptance: the first failing output (if any), and the largest
/// error of any output.
/// The first `in` buffer the original leaves unchanged (its final bytes
/// are its initial ones) that the variant changed: inputs stay inputs.
pub fn inputs_unchanged(
    spec: &Spec,
    instance: &spec::Instance,
    reference: &[Vec<u8>],
    actual: &[Vec<u8>],
) -> Option<Failure> {
    spec.args.iter().enumerate().find_map(|(i, a)| {
        let spec::ArgKind::Buffer {
            role: spec::Role::In,
            ..
        } = a.kind
        else {
            return None;
        };
        let ArgValue::Buffer { data, .. } = &instance.args[i] else {
            return None;
        };
        if reference[i] != *data || actual[i] == *data {
            return None;
        }
        let first_change = data
            .iter()
            .zip(&actual[i])
            .position(|(a, b)| a != b)
            .unwrap_or(data.len().min(actual[i].len()));
        Some(Failure::InputWritten {
            arg: a.name.clone(),
            first_change,
        })
    })
}

pub fn compare_outputs(
    spec: &Spec,
    instance: &spec::Instance,
    reference: &[Vec<u8>],
    actual: &[Vec<u8>],
) -> (Option<Failure>, f64) {
    let compared = spec.outputs().into_iter().filter_map(|i| {
        let ArgValue::Buffer { elem, .. } = &instance.args[i] else {
            return None;
        };
        Some((
            i,
            spec::compare(&spec.acceptance, *elem, &reference[i], &actual[i]),
        ))
    });
    outputs_verdict(spec, compared)
}

/// What the comparisons of a test's outputs (argument index, comparison,
/// in the spec's order) say together: the first failing output, named, and
/// the worst error over all of them; wherever they were compared.
pub fn outputs_verdict(
    spec: &Spec,
    compared: impl IntoIterator<Item = (usize, spec::Comparison)>,
) -> (Option<Failure>, f64) {
    let mut worst = 0f64;
    let mut failure = None;
    for (i, c) in compared {
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
