//! A GPU job's edit contributions measured on its own GPU, in its slot's
//! time: the explanation of a GPU speedup comes from the GPU that found it,
//! not from the simulator's cost model (which does not see what a barrier
//! costs a GPU).
//!
//! When: at the end of a slice (its deadline, or the job's search ending),
//! for the job's best validated variant when no GPU-measured contributions
//! are stored for it. The runner calls it before giving the slot back, so
//! the time is charged to the job like its search, and the next slice
//! starts after it; a new best is explained within a slice of its first
//! service. The subsets run through the slot's backend (its compile and GPU
//! workers, timed on the held-out tests like promotion). The relies-on lines
//! (simulator runs, seconds of CPU) are left to the explainer thread
//! (`super::explain`, [`Why::Relies`]), so the GPU does not wait on them.
//!
//! Each (job, PTX hash) is tried at most once per daemon run (the entry's
//! `explained_on_slot`); a stop (pause, a busy GPU, shutdown) records
//! nothing and the next slice tries again; a failure hands the variant to
//! the explainer thread, which measures it on the simulator and says so.

use super::explain::{self, Why};
use super::Shared;
use gevo_ir::KernelIr;
use gevo_search::contrib::{self, ContribError};
use gevo_search::evolve::{Backend, BackendError};
use std::time::Instant;

/// The job backend whose contributions a slot measures: spec launches on
/// the GPU (a harness job's timings are the user's program's).
pub const ON_SLOT: &str = "cuda";

/// Measures and stores the contributions of job `id`'s best validated
/// variant on `backend` (the slot's), when it is a GPU job whose best has
/// none measured there yet. Returns whether it measured.
pub fn measure(shared: &Shared, id: &str, ir: &KernelIr, backend: &mut dyn Backend) -> bool {
    if !shared.config().jobs.explain_edits || backend.scope().backend != ON_SLOT {
        return false;
    }
    let Some((hash, patch)) = claim(shared, id) else {
        return false;
    };
    match shared.store.contributions(id, &hash) {
        Ok(Some(c)) if c.scope.backend == ON_SLOT => return false,
        Ok(_) => {}
        Err(e) => {
            tracing::warn!(error = %e, "edit contributions: reading the store");
            return false;
        }
    }
    tracing::info!(edits = patch.edits.len(), ptx = %hash, "measuring edit contributions on the slot's GPU");
    let started = Instant::now();
    let options = crate::explain_edits::options_for(backend);
    match contrib::analyze(ir, backend, &patch, &options) {
        Ok(c) => {
            let classes: Vec<&str> = c.edits.iter().map(|e| e.class.name()).collect();
            tracing::info!(
                classes = ?classes,
                variants = c.variants_measured,
                seconds = started.elapsed().as_secs_f64(),
                "edit contributions measured on the GPU"
            );
            match shared.store.put_contributions(id, &hash, &c) {
                Ok(()) => explain::enqueue(shared, id, Why::Relies),
                Err(e) => tracing::warn!(error = %e, "edit contributions: storing them"),
            }
        }
        Err(ContribError::Backend(BackendError::Interrupted)) => {
            tracing::info!("edit contributions on the GPU interrupted; measured again next slice");
            unclaim(shared, id, &hash);
        }
        Err(e) => {
            tracing::warn!(error = %e, "edit contributions not measured on the GPU; the simulator's instead");
            explain::enqueue(shared, id, Why::GpuFailed);
        }
    }
    true
}

/// The job's best (PTX hash, minimized patch), claimed for this slot's
/// measurement: `None` when it has none or it was tried in this run.
fn claim(shared: &Shared, id: &str) -> Option<(String, gevo_ir::Patch)> {
    let mut registry = shared.registry();
    let job = registry.jobs.get_mut(id)?;
    if job.record.backend != ON_SLOT {
        return None;
    }
    let (best, _) = job.best.as_ref()?;
    if job.explained_on_slot.as_ref() == Some(&best.ptx_hash) {
        return None;
    }
    let claimed = (best.ptx_hash.clone(), best.minimized.clone());
    job.explained_on_slot = Some(claimed.0.clone());
    Some(claimed)
}

/// Lets the next slice try `hash` again.
fn unclaim(shared: &Shared, id: &str, hash: &str) {
    if let Some(job) = shared.registry().jobs.get_mut(id) {
        if job.explained_on_slot.as_deref() == Some(hash) {
            job.explained_on_slot = None;
        }
    }
}

#[cfg(test)]
mod tests;
