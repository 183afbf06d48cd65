//! Seeding a kernel's new version from an earlier one: the earlier job's
//! validated patches (minimized, best first) and the elite of its last
//! population, carried to the new IR (`ir::transplant`). They are only
//! seeds: each is evaluated, promoted and validated on the new code like any
//! other individual, so nothing of the old version is served for the new
//! one before it passes there. The daemon (`serve::seed`, for a rebuild)
//! and `gevod evolve` (an earlier job of the same spec in its state
//! directory) pick the earlier job each their way and share the rest here.

use crate::evolve::{Engine, Validated};
use crate::store::{JobRecord, Origin, Store, StoreError};
use gevo_client::proto::JobOrigin;
use gevo_ir::transplant::Transplanter;
use gevo_ir::{Edit, IrError, KernelIr, Patch};

/// The store's setting that holds a `gevod evolve` job's origin (the
/// daemon keeps its jobs' origins in their `DaemonJob`).
pub fn origin_key(job: &str) -> String {
    format!("origin/{job}")
}

/// What a new version starts from: the carried patches and where they came
/// from (`Origin`: the earlier job, counts, and every carried edit).
#[derive(Debug, Clone, PartialEq)]
pub struct Seeding {
    pub seeds: Vec<Patch>,
    pub origin: Origin,
}

/// Patches carried from one IR to another.
#[derive(Debug, Clone, PartialEq)]
pub struct Carried {
    /// The distinct non-empty results.
    pub seeds: Vec<Patch>,
    /// Edits kept and dropped over all the patches.
    pub kept: usize,
    pub dropped: usize,
    /// Every carried edit, once.
    pub edits: Vec<Edit>,
}

#[derive(Debug, thiserror::Error)]
pub enum SeedError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("job {job}: {source}")]
    Ir {
        job: String,
        #[source]
        source: IrError,
    },
}

/// Seeds from the earlier job `from` (version `version`; 0 where versions
/// are not the daemon's) for a job whose IR is `new`. `None` when it has
/// nothing to hand on or nothing carries over.
pub fn from_job(
    store: &Store,
    from: &JobRecord,
    version: u64,
    new: &KernelIr,
) -> Result<Option<Seeding>, SeedError> {
    let validated = store.validated(&from.id)?;
    let engine = store.checkpoint(&from.id)?;
    let patches = previous_patches(validated, engine.as_ref());
    let Some(first) = patches.first() else {
        return Ok(None);
    };
    let old =
        KernelIr::parse_for_patch(&from.id, from.ir_text.as_bytes(), first).map_err(|source| {
            SeedError::Ir {
                job: from.id.clone(),
                source,
            }
        })?;
    let Some(carried) = carry(&old, new, &patches) else {
        return Ok(None);
    };
    let info = JobOrigin {
        job: from.id.clone(),
        version,
        patches: carried.seeds.len(),
        kept: carried.kept,
        dropped: carried.dropped,
    };
    Ok(Some(Seeding {
        seeds: carried.seeds,
        origin: Origin {
            info,
            edits: carried.edits,
        },
    }))
}

/// The earlier job a new `gevod evolve` job of `job`'s spec seeds from:
/// same spec file, backend and target, other IR, the most evaluations.
pub fn earlier_job(store: &Store, job: &JobRecord) -> Result<Option<JobRecord>, StoreError> {
    let mut best: Option<(JobRecord, u64)> = None;
    for id in store.jobs()? {
        let Some(record) = store.job(&id)? else {
            continue;
        };
        if record.spec_path != job.spec_path
            || record.ir_hash == job.ir_hash
            || record.backend != job.backend
            || record.target != job.target
        {
            continue;
        }
        let Some(engine) = store.checkpoint(&id)? else {
            continue;
        };
        let evaluations = engine.counters().evaluations;
        if best.as_ref().is_none_or(|(_, e)| evaluations > *e) {
            best = Some((record, evaluations));
        }
    }
    Ok(best.map(|(record, _)| record))
}

/// What an earlier version hands on: its validated patches (minimized),
/// best first, then the elite of its last population.
pub fn previous_patches(mut validated: Vec<Validated>, engine: Option<&Engine>) -> Vec<Patch> {
    validated.sort_by(|a, b| b.speedup.total_cmp(&a.speedup));
    let mut patches: Vec<Patch> = validated.into_iter().map(|v| v.minimized).collect();
    if let Some(engine) = engine {
        let config = engine.config();
        let elite = ((config.population as f64 * config.elite_fraction).round() as usize).max(1);
        // The population is kept in selection order: the elite come first.
        patches.extend(
            engine
                .population()
                .iter()
                .filter(|m| m.outcome.cost().is_some())
                .take(elite)
                .map(|m| m.patch.clone()),
        );
    }
    patches.retain(|p| !p.edits.is_empty());
    patches
}

/// `patches` carried from `old` to `new`; `None` when nothing carries over.
pub fn carry(old: &KernelIr, new: &KernelIr, patches: &[Patch]) -> Option<Carried> {
    let transplanter = match Transplanter::new(old, new) {
        Ok(t) => t,
        Err(e) => {
            tracing::warn!(error = %e, "cannot match the previous version; starting afresh");
            return None;
        }
    };
    let mut carried = Carried {
        seeds: Vec::new(),
        kept: 0,
        dropped: 0,
        edits: Vec::new(),
    };
    for p in patches {
        match transplanter.transplant(p) {
            Ok(t) => {
                carried.kept += t.kept.len();
                carried.dropped += t.dropped.len();
                for d in &t.dropped {
                    tracing::debug!(dropped = %d, "edit not carried over");
                }
                if !t.patch.edits.is_empty() && !carried.seeds.contains(&t.patch) {
                    for e in &t.patch.edits {
                        if !carried.edits.contains(e) {
                            carried.edits.push(e.clone());
                        }
                    }
                    carried.seeds.push(t.patch);
                }
            }
            Err(e) => {
                carried.dropped += p.edits.len();
                tracing::debug!(error = %e, "patch not carried over");
            }
        }
    }
    let (matched, total) = transplanter.matched();
    tracing::info!(
        seeds = carried.seeds.len(),
        kept = carried.kept,
        dropped = carried.dropped,
        matched,
        total,
        "carried the previous version's patches over"
    );
    (!carried.seeds.is_empty()).then_some(carried)
}
