//! The records the store keeps: a job (`JobRecord`), the daemon's view of
//! it (`DaemonJob`), what a version carried over (`Origin`), and one
//! committed generation (`GenerationRecord`).

use crate::evolve::{GenerationReport, Member};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// What a job is: the spec and IR it evolves (contents kept, so results stay
/// explainable after the files change) and how it searches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRecord {
    pub id: String,
    pub spec_path: PathBuf,
    pub spec_hash: String,
    pub spec_text: String,
    pub ir_hash: String,
    pub ir_text: String,
    pub backend: String,
    pub target: String,
    pub seed: u64,
}

impl JobRecord {
    /// Job `id`: evolving `ir` under the spec at `spec_path` (whose text is
    /// `spec_text`), on `scope`, from `seed`. `gevod evolve` and the daemon
    /// name their jobs each their way and record them here.
    pub fn new(
        id: String,
        spec_path: PathBuf,
        spec_text: &str,
        ir: &gevo_ir::KernelIr,
        scope: &crate::evolve::Scope,
        seed: u64,
    ) -> Self {
        JobRecord {
            id,
            spec_path,
            spec_hash: gevo_ir::content_hash(spec_text.as_bytes()),
            spec_text: spec_text.to_string(),
            ir_hash: ir.ir_hash().to_string(),
            ir_text: ir.text().to_string(),
            backend: scope.backend.clone(),
            target: scope.target.clone(),
            seed,
        }
    }
}

/// A job of `gevod serve`: which kernel and version it is, where its spec
/// was found, and the client's pause. The job's `JobRecord` and engine are
/// in their own tables under the same id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DaemonJob {
    /// `<project>/<name>`.
    pub kernel: String,
    /// 1 for the kernel's first spec+IR content, counting up.
    pub version: u64,
    pub root: PathBuf,
    /// Hash of the spec file's and the IR file's bytes as found.
    pub fingerprint: String,
    pub paused: bool,
    /// A newer version of the kernel replaced it.
    pub superseded: bool,
    /// Seeded from the previous version (`serve::seed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<Origin>,
    /// What another job must share to be the same search
    /// (`serve::shared_search::key`); `None`: never shared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search_key: Option<String>,
    /// The job whose search this one shares instead of running its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub follows: Option<String>,
    /// A `[tune]` spec's version that runs the configuration its sweep
    /// chose: the record's spec text is the configured one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tuned: Option<Tuned>,
}

/// The configuration a version of a `[tune]` spec runs, and the spec file's
/// own hash (builds compare their spec copy's hash with it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tuned {
    pub configuration: std::collections::BTreeMap<String, i64>,
    pub spec_hash: String,
}

/// What a job version took over from the one before it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Origin {
    pub info: gevo_client::proto::JobOrigin,
    /// Every edit of the carried patches, as it reads on this version's IR:
    /// a variant's edit that is one of these came from the previous version.
    pub edits: Vec<gevo_ir::Edit>,
}

/// One committed generation: its population with fitness, and counters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GenerationRecord {
    pub report: GenerationReport,
    pub population: Vec<Member>,
    pub evaluations: u64,
    pub cache_hits: u64,
    /// When it was committed, in seconds since the Unix epoch (absent in
    /// stores written before reports had plots over time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub committed_at: Option<f64>,
    /// Wall-clock seconds the generation took, when the caller measured it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
    /// The gevod version that ran it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gevod: Option<String>,
}
