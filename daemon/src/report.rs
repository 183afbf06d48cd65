//! The HTML report of a search: one self-contained file (inline CSS and
//! SVG, no script, nothing fetched) that shows the best validated variant
//! with its per-test speedups and its edits in CUDA source terms, how the
//! search progressed, why variants were rejected, and where it ran.
//!
//! `gather` reads what a report shows from a store, `plots` draws it
//! (plotters' SVG backend), `html` assembles the page; `edits` tells a
//! patch in source terms for the terminal, the API and the page alike;
//! `summary` gives the numbers as JSON for scripts.

pub mod diff;
pub mod edits;
mod gather;
mod html;
mod plots;
mod summary;

pub use gather::{gather, pick_job};
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
    /// Rows of (what, value).
    pub environment: Vec<(String, String)>,
    /// What this store lacks (written by an older gevod), said once each.
    pub notes: Vec<String>,
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
