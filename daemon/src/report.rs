//! The HTML report of a search: one self-contained file (inline CSS and
//! SVG, no script, nothing fetched) that shows the best validated variant
//! with its per-test speedups and its edits in CUDA source terms, how the
//! search progressed, why variants were rejected, and where it ran.
//!
//! `gather` reads what a report shows from a store, `plots` draws it
//! (plotters' SVG backend), `html` assembles the page; `edits` tells a
//! patch in source terms for the terminal, the API and the page alike;
//! `course` says how the train best went against the validated best;
//! `generated` derives the job's generated held-out tests; `tune` shows a
//! tuned job's launch configuration; `summary` gives the numbers as JSON
//! for scripts.

pub mod course;
pub mod diff;
pub mod edits;
mod gather;
mod generated;
mod html;
mod plots;
mod summary;
pub mod tune;

pub use gather::{gather, gather_with, heldout_sizes, pick_job};
pub use html::render;
pub use summary::summary_json;

use gevo_client::explain::SourceEdit;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error(transparent)]
    Store(#[from] gevo_search::store::StoreError),
    #[error("{store}: no job {job} (jobs: {})", available.join(", "))]
    UnknownJob {
        store: PathBuf,
        job: String,
        available: Vec<String>,
    },
    #[error("{store}: {} jobs; name one with --job: {}", available.len(), available.join(", "))]
    JobRequired {
        store: PathBuf,
        available: Vec<String>,
    },
    #[error("{store}: no jobs")]
    NoJobs { store: PathBuf },
    #[error("{store}: job {job} has no checkpoint")]
    NoCheckpoint { store: PathBuf, job: String },
    #[error("job {job}: its IR: {source}")]
    Ir {
        job: String,
        #[source]
        source: gevo_ir::IrError,
    },
}

/// Everything a report shows, as plain data.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportData {
    /// The kernel (`<project>/<name>` for daemon jobs).
    pub kernel: String,
    pub job: String,
    /// `sim` (speedups are the simulator's cost-model ratios) or `cuda`
    /// (measured on a GPU).
    pub backend: String,
    pub best: Option<BestVariant>,
    /// One point per committed generation.
    pub generations: Vec<GenerationPoint>,
    /// The Pareto front over (train cost ratio, error), cheapest first.
    pub pareto: Vec<(f64, f64)>,
    /// The last population's valid members (cost, error).
    pub population: Vec<(f64, f64)>,
    /// Rejections by reason, the named reasons always present.
    pub rejections: Vec<(String, u64)>,
    pub evaluations: u64,
    pub cache_hits: u64,
    pub valid: u64,
    /// The GPU backend's workers over every committed generation (none on
    /// the simulator, or in stores from before it was recorded).
    pub utilization: Option<gevo_model::utilization::Utilization>,
    /// The job's generated held-out tests and selection's use of them.
    pub generated: Generated,
    /// The configuration sweep that chose a tuned job's launch
    /// configuration (none for untuned jobs and older stores).
    pub launch: Option<tune::Launch>,
    /// Rows of (what, value).
    pub environment: Vec<(String, String)>,
    /// What this store lacks (written by an older gevod), said once each.
    pub notes: Vec<String>,
}

/// A job's generated held-out tests (docs/evolve.md): those the best
/// validated variant passed, and how selection used them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Generated {
    /// The generated tests the original runs cleanly (kept); a validated
    /// variant passed every one, at promotion or in selection.
    pub kept: KeptTests,
    /// Whether selection ran them (`[evolve] generality_in_selection`).
    pub in_selection: bool,
    /// Variants selection ran on them (`generality_in_selection`), each
    /// PTX once (`Counters::generality_checks`).
    pub checks: u64,
    /// Evaluations selection rejected for failing one, cache hits
    /// included (`Counters::rejections["generated"]`).
    pub rejected: u64,
    /// Train-best variants promotion refused for failing one.
    pub refused_at_promotion: u64,
}

/// The kept generated tests, or why the report has none to list.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum KeptTests {
    /// Derived from the job's spec and IR snapshots (or known to the
    /// daemon): each test's name and what it covers.
    Listed(Vec<GeneratedTest>),
    /// No validated variant: none passed any.
    #[default]
    NoBest,
    /// A harness spec runs the user's program: gevo generates no tests.
    Harness,
    /// The spec or the simulator could not make them here (why).
    NotDerived(String),
}

/// One generated held-out test.
#[derive(Debug, Clone, PartialEq)]
pub struct GeneratedTest {
    /// `generated[0]`.
    pub test: String,
    /// What it covers: `nx = 7, ny = 7: one partial block`.
    pub why: String,
}

/// The best validated variant.
#[derive(Debug, Clone, PartialEq)]
pub struct BestVariant {
    pub generation: u64,
    pub speedup: f64,
    /// 95% interval of the speedup.
    pub interval: (f64, f64),
    pub train_cost: f64,
    pub tests: Vec<TestRow>,
    pub edits: Vec<SourceEdit>,
    pub line_tables: bool,
    pub excerpts: Vec<edits::Excerpt>,
    /// Its edit contributions, when `gevod explain-edits` measured them.
    pub contributions: Option<gevo_search::contrib::Contributions>,
}

/// One held-out test of the best variant.
#[derive(Debug, Clone, PartialEq)]
pub struct TestRow {
    pub test: String,
    /// Its sizes (`n = 4096`); empty where the spec no longer parses.
    pub sizes: String,
    /// `pass`, or the failure's kind.
    pub verdict: String,
    /// Cost ratio (variant over original) with its 95% interval.
    pub ratio: Option<(f64, f64, f64)>,
    /// On the GPU, for a pipeline: each kernel's time, original and variant.
    pub kernels: Vec<gevo_model::assessment::KernelTime>,
}

/// One committed generation.
#[derive(Debug, Clone, PartialEq)]
pub struct GenerationPoint {
    pub generation: u64,
    /// Lowest train cost ratio in the population.
    pub best_train: Option<f64>,
    /// Held-out cost ratio of the best variant validated so far.
    pub best_validated: Option<f64>,
    /// Evaluations in this generation.
    pub evaluations: u64,
    /// Wall seconds it took (stores from before timings: none).
    pub seconds: Option<f64>,
}
