//! The configuration sweep of a spec's `[tune]` constants, what Kernel
//! Tuner's brute force does: every configuration's original kernel, checked
//! on the simulator against the source configuration's outputs, then timed on
//! the backend; the fastest is the one the search evolves (docs/spec.md,
//! "Tunable constants"). A configuration that does not load, faults, or
//! computes other outputs is dropped with why.

mod carry;
mod check;

pub use carry::{carry, Carried, Configurations};

use crate::worker::gpu_run::{measure_on_gpu, GpuRunError, Variants};
use crate::worker::setup::WorkerSetup;
use gevo_ir::KernelIr;
use gevo_model::access::Reader;
use gevo_model::device::DeviceInfo;
use gevo_model::spec::tune::{describe, Configuration};
use gevo_model::spec::{self, Spec, SpecError, TestSet, TestTarget};
use gevo_model::stats::{self, Timing};
use gevo_search::eval::{EvalError, Evaluator};
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum TuneError {
    #[error("{}: no [tune] table: nothing to choose (docs/spec.md, \"Tunable constants\")", .0.display())]
    NotTunable(PathBuf),
    #[error("{}: [tune.chosen] is written: this spec runs one configuration already; sweep the spec without it", .0.display())]
    AlreadyChosen(PathBuf),
    #[error("the source's configuration {configuration}: {why}")]
    Source { configuration: String, why: String },
    #[error("writing the configuration's spec text to {}: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("a scratch directory for the configurations' files: {0}")]
    Scratch(#[source] std::io::Error),
    #[error(transparent)]
    Gpu(#[from] Box<GpuRunError>),
}

/// Where the sweep times the configurations.
// One per sweep: boxing the GPU's setup would buy nothing.
#[allow(clippy::large_enum_variant)]
pub enum Timer<'a> {
    /// The simulator's cost model, with this many threads.
    Simulator { workers: usize },
    /// The GPU: `setup` as for `gevod run` (its spec path the tuned spec's).
    Gpu {
        setup: WorkerSetup<'a>,
        device: DeviceInfo,
    },
}

impl Timer<'_> {
    /// The backend's name, as scopes and the store's keys spell it.
    pub fn backend(&self) -> &'static str {
        match self {
            Timer::Simulator { .. } => "sim",
            Timer::Gpu { .. } => "cuda",
        }
    }
}

/// One configuration's original, as the sweep saw it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Measured {
    pub configuration: Configuration,
    /// Its IR file.
    pub ir: PathBuf,
    /// "measured", or "dropped" with `why`.
    pub status: String,
    pub why: Option<String>,
    /// Its original's cost per test of the set (GPU: nanoseconds, the lower
    /// quartile of the rounds; simulator: cost-model units).
    pub tests: Vec<TestCost>,
    /// Geometric mean over the tests of its cost over the source's.
    pub mean_ratio: Option<f64>,
    /// The GPU rounds per test, for intervals against the source.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    rounds: Vec<Vec<f64>>,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TestCost {
    pub test: String,
    pub cost: f64,
}

/// The fastest configuration and its speedup over the source's (the
/// geometric mean over the tests), with the 95% interval (GPU: a bootstrap
/// of that mean over both configurations' rounds, timed one after the
/// other; simulator: the exact point).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Best {
    pub configuration: Configuration,
    pub speedup: f64,
    pub interval: (f64, f64),
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Sweep {
    pub spec: PathBuf,
    /// "cuda" or "sim".
    pub backend: String,
    /// The test set timed.
    pub tests: String,
    pub source: Configuration,
    pub configurations: Vec<Measured>,
    pub best: Option<Best>,
}

/// The store setting that keeps the sweep of a tuned spec's text (by its
/// hash) on a backend: a resumed search, or the daemon's next scan, takes the
/// configuration chosen then instead of timing them all again.
pub fn sweep_key(spec_hash: &str, backend: &str) -> String {
    format!("tune/{spec_hash}/{backend}")
}

/// The store setting with the sweep that chose a job's configuration (the
/// report's table and plot of the configurations).
pub fn job_sweep_key(job: &str) -> String {
    format!("tune/job/{job}")
}

impl Sweep {
    /// How many configurations were measured (the others were dropped).
    pub fn measured(&self) -> usize {
        self.configurations
            .iter()
            .filter(|m| m.why.is_none())
            .count()
    }

    /// A sweep that could not run (the GPU failed): nothing measured, the
    /// source's configuration stays.
    pub fn failed(spec: &Path, source: Configuration, why: &str) -> Sweep {
        Sweep {
            spec: spec.to_path_buf(),
            backend: String::new(),
            tests: String::new(),
            configurations: vec![Measured {
                configuration: source.clone(),
                ir: PathBuf::new(),
                status: "dropped".into(),
                why: Some(format!("the sweep failed: {why}")),
                tests: Vec::new(),
                mean_ratio: None,
                rounds: Vec::new(),
            }],
            source,
            best: None,
        }
    }

    /// The best configuration's spec text: the tuned spec made to run it.
    pub fn best_text(&self, tuned: &Spec) -> Option<String> {
        tuned.configured_text(&self.best.as_ref()?.configuration)
    }
}

/// What the sweep reads the configurations' files for, and where it puts
/// its copies: each configuration's spec text and IR go to `scratch` (read
/// for `reader`, the spec's owner in the daemon), and the workers read
/// those copies, never the paths.
pub struct Files<'a> {
    pub reader: &'a Reader,
    pub scratch: &'a Path,
}

/// Sweeps every configuration of `tuned` (loaded from `spec_path`, no
/// `[tune.chosen]`) on `set`.
pub fn sweep(
    spec_path: &Path,
    tuned: &Spec,
    timer: &Timer,
    set: TestSet,
    files: &Files,
) -> Result<Sweep, TuneError> {
    let tune = tuned
        .tune
        .as_ref()
        .ok_or_else(|| TuneError::NotTunable(spec_path.to_path_buf()))?;
    if tune.chosen_written {
        return Err(TuneError::AlreadyChosen(spec_path.to_path_buf()));
    }
    let dir = spec_path.parent().unwrap_or(Path::new("."));
    let reference =
        check::Reference::of(tuned, timer_workers(timer)).map_err(|why| TuneError::Source {
            configuration: describe(&tune.source),
            why,
        })?;
    let mut configurations = Vec::new();
    for config in tune.configurations() {
        let ir = tune
            .ir_path(dir, &config)
            .unwrap_or_else(|| tuned.ir.clone());
        let text = tuned.configured_text(&config).expect("a tuned spec");
        let measured = match measure_one(spec_path, &text, &reference, timer, set, files) {
            Ok((tests, rounds)) => Measured {
                configuration: config,
                ir,
                status: "measured".into(),
                why: None,
                tests,
                mean_ratio: None,
                rounds,
            },
            Err(Dropped::Why(why)) => Measured {
                configuration: config,
                ir,
                status: "dropped".into(),
                why: Some(why),
                tests: Vec::new(),
                mean_ratio: None,
                rounds: Vec::new(),
            },
            Err(Dropped::Fatal(e)) => return Err(e),
        };
        tracing::info!(
            configuration = %describe(&measured.configuration),
            status = %measured.status,
            why = measured.why.as_deref().unwrap_or(""),
            "configuration swept"
        );
        configurations.push(measured);
    }
    let source_at = configurations
        .iter()
        .position(|m| m.configuration == tune.source)
        .expect("the source's configuration is swept");
    if let Some(why) = &configurations[source_at].why {
        return Err(TuneError::Source {
            configuration: describe(&tune.source),
            why: why.clone(),
        });
    }
    let source = configurations[source_at].clone();
    for m in configurations.iter_mut().filter(|m| m.why.is_none()) {
        m.mean_ratio = Some(mean_ratio(&m.tests, &source.tests));
    }
    let best = configurations
        .iter()
        .filter_map(|m| Some((m, m.mean_ratio?)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(m, ratio)| Best {
            configuration: m.configuration.clone(),
            speedup: 1.0 / ratio,
            interval: interval(&source, m, ratio),
        });
    Ok(Sweep {
        spec: spec_path.to_path_buf(),
        backend: timer.backend().into(),
        tests: set_name(set).into(),
        source: tune.source.clone(),
        configurations,
        best,
    })
}

/// [`sweep`] with a scratch directory of its own, the spec's files read for
/// `reader` (`gevod tune`'s and the daemon's sweeps).
pub fn sweep_in_scratch(
    spec_path: &Path,
    tuned: &Spec,
    timer: &Timer,
    set: TestSet,
    reader: &Reader,
) -> Result<Sweep, TuneError> {
    let scratch = tempfile::tempdir().map_err(TuneError::Scratch)?;
    let files = Files {
        reader,
        scratch: scratch.path(),
    };
    sweep(spec_path, tuned, timer, set, &files)
}

fn timer_workers(timer: &Timer) -> usize {
    match timer {
        Timer::Simulator { workers } => *workers,
        Timer::Gpu { setup, .. } => setup.workers,
    }
}

fn set_name(set: TestSet) -> &'static str {
    match set {
        TestSet::Train => "train",
        TestSet::Heldout => "heldout",
        TestSet::All => "all",
        TestSet::Generated => "generated",
    }
}

enum Dropped {
    /// The configuration is dropped, for this reason.
    Why(String),
    /// The sweep cannot go on (the GPU failed, a file cannot be written).
    Fatal(TuneError),
}

impl From<SpecError> for Dropped {
    fn from(e: SpecError) -> Self {
        Dropped::Why(first_line(&e.to_string()))
    }
}

impl From<EvalError> for Dropped {
    fn from(e: EvalError) -> Self {
        Dropped::Why(first_line(&e.to_string()))
    }
}

/// A table row's reason: the error's first line (the rest is advice on
/// fixing a spec, which a dropped configuration does not need).
fn first_line(message: &str) -> String {
    message.lines().next().unwrap_or_default().to_string()
}

type Costs = (Vec<TestCost>, Vec<Vec<f64>>);

/// One configuration (`text`, the tuned spec made to run it): checked
/// against the source's outputs on the simulator, then timed.
fn measure_one(
    spec_path: &Path,
    text: &str,
    reference: &check::Reference,
    timer: &Timer,
    set: TestSet,
    files: &Files,
) -> Result<Costs, Dropped> {
    let mut spec = spec::parse_as(spec_path, text, files.reader)?;
    let (text_file, ir_file) = copy_to_scratch(&spec, text, files)?;
    spec.ir = ir_file.clone();
    let sim = Evaluator::new(spec.for_backend(TestTarget::Sim), timer_workers(timer))?;
    reference
        .check(&sim)
        .map_err(|why| Dropped::Why(first_line(&why)))?;
    match timer {
        Timer::Simulator { .. } => {
            let results = sim.evaluate(&sim.ir().empty_patch(), set)?;
            let tests = results
                .iter()
                .map(|r| TestCost {
                    test: r.test.clone(),
                    cost: r.original_cost as f64,
                })
                .collect();
            Ok((tests, Vec::new()))
        }
        Timer::Gpu { setup, device } => {
            let setup = WorkerSetup {
                spec_text: Some(&text_file),
                ir: Some(&ir_file),
                ..setup.clone()
            };
            let gpu_spec = spec.for_backend(TestTarget::Gpu);
            let ir = KernelIr::load_kernels(&gpu_spec.ir, &gpu_spec.kernels)
                .map_err(|e| Dropped::Why(first_line(&e.to_string())))?;
            let variants = Variants::Patch("original".into(), ir.empty_patch());
            let run = measure_on_gpu(&setup, &gpu_spec, device.clone(), variants, set)
                .map_err(|e| Dropped::Fatal(Box::new(e).into()))?;
            let (_, assessment) = run.results.into_iter().next().expect("one variant");
            if let Some(t) = assessment.tests.iter().find(|t| t.failure.is_some()) {
                let (kind, message) = t.failure.clone().expect("a failure");
                return Err(Dropped::Why(format!(
                    "{} on the GPU: {kind}: {message}",
                    t.test
                )));
            }
            let tests = assessment
                .tests
                .iter()
                .map(|t| TestCost {
                    test: t.test.clone(),
                    cost: t.original_cost as f64,
                })
                .collect();
            let rounds = assessment
                .tests
                .iter()
                .map(|t| {
                    t.timing
                        .as_ref()
                        .map(|t| t.original_ns.clone())
                        .unwrap_or_default()
                })
                .collect();
            Ok((tests, rounds))
        }
    }
}

/// The configuration's spec text and IR (read for the spec's owner) written
/// to the scratch directory: the files its evaluators and workers load.
fn copy_to_scratch(spec: &Spec, text: &str, files: &Files) -> Result<(PathBuf, PathBuf), Dropped> {
    let ir = files
        .reader
        .read_capped(&spec.ir, gevo_ir::bounds::MAX_IR_BYTES)
        .map_err(|e| Dropped::Why(format!("IR {}", e.about(&spec.ir))))?;
    let stem = spec.content_hash();
    let text_file = files.scratch.join(format!("{stem}.gevo.toml"));
    let ir_file = files.scratch.join(format!("{stem}.ll"));
    for (path, bytes) in [(&text_file, text.as_bytes()), (&ir_file, &ir[..])] {
        std::fs::write(path, bytes).map_err(|source| {
            Dropped::Fatal(TuneError::Write {
                path: path.clone(),
                source,
            })
        })?;
    }
    Ok((text_file, ir_file))
}

/// The geometric mean of `tests`' costs over `source`'s, test by test.
fn mean_ratio(tests: &[TestCost], source: &[TestCost]) -> f64 {
    stats::geometric_mean(
        tests
            .iter()
            .zip(source)
            .map(|(t, s)| t.cost / s.cost.max(f64::MIN_POSITIVE)),
    )
}

/// The speedup's interval over the source: from both configurations' GPU
/// rounds where there are any, else the point.
fn interval(source: &Measured, best: &Measured, ratio: f64) -> (f64, f64) {
    let timings: Vec<Timing> = source
        .rounds
        .iter()
        .zip(&best.rounds)
        .filter(|(s, b)| !s.is_empty() && s.len() == b.len())
        .map(|(s, b)| Timing {
            original_ns: s.clone(),
            variant_ns: b.clone(),
        })
        .collect();
    if timings.is_empty() || timings.len() != best.rounds.len() {
        return (1.0 / ratio, 1.0 / ratio);
    }
    // The geometric mean's own interval: the ratio of sums' follows the
    // longest test and need not hold the speedup reported beside it (nor,
    // by the costs' rounding to whole nanoseconds, quite does this one).
    let cost = stats::geometric_cost_ratio(&timings.iter().collect::<Vec<_>>());
    (1.0 / cost.hi.max(ratio), 1.0 / cost.lo.min(ratio))
}
