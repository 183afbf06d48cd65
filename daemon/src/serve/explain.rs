//! The daemon's own `explain-edits` (`[jobs] explain_edits`): the edit
//! contributions and relies-on lines of a job's best validated variant,
//! measured on the simulator in the runner's thread
//! (`crate::explain_edits`) and stored as `gevod explain-edits` stores
//! them, so `gevo-client explain` shows them without anyone running the
//! command.
//!
//! When (the runner asks, between slices; docs/daemon.md, "Edit
//! contributions"):
//! - [`Why::Ended`]: the job's search has just ended (`Ended::Done`);
//! - [`Why::Settled`]: a slice ended with the same best it started with
//!   (a best that lasted a whole slice; a search still finding new bests
//!   every slice is not held up explaining each);
//! - [`Why::Idle`]: the slot has no job to run: any live job's best.
//!
//! Each (job, PTX hash) is tried at most once per daemon run (the entry's
//! `explained`, set before measuring) and never once the store holds it. A
//! measurement stops between two subsets when the daemon shuts down, the
//! slot's GPU becomes busy, the job is paused or replaced, or (idle work
//! only) a job becomes runnable on the slot; it is then tried again later.
//! A failure is logged and records nothing; it never touches the job.

use super::Shared;
use crate::access::Reader;
use crate::explain_edits::ExplainError;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// Why the runner explains a job now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    Ended,
    Settled,
    Idle,
}

/// The job an idle slot may explain: live, unpaused, not running, leading
/// its own search, with a best not tried yet in this run.
pub fn idle_candidate(shared: &Shared) -> Option<String> {
    let registry = shared.registry();
    registry
        .jobs
        .values()
        .find(|j| {
            j.live()
                && !j.daemon.paused
                && j.running_on.is_none()
                && registry.leader_of(j).is_none()
                && j.best
                    .as_ref()
                    .is_some_and(|(v, _)| j.explained.as_deref() != Some(v.ptx_hash.as_str()))
        })
        .map(|j| j.id.clone())
}

/// Measures and stores the contributions of job `id`'s best validated
/// variant, unless it has none, it was tried already, or the store holds
/// them. Returns how long it measured (nothing: `None`).
pub fn job(shared: &Shared, slot: usize, id: &str, why: Why) -> Option<std::time::Duration> {
    // Claimed under the lock: no other slot takes the same variant.
    let (record, root, hash, patch) = {
        let mut registry = shared.registry();
        let job = registry.jobs.get_mut(id)?;
        let (best, _) = job.best.as_ref()?;
        if !job.live() || job.daemon.paused || job.explained.as_ref() == Some(&best.ptx_hash) {
            return None;
        }
        let (hash, patch) = (best.ptx_hash.clone(), best.minimized.clone());
        job.explained = Some(hash.clone());
        (job.record.clone(), job.daemon.root.clone(), hash, patch)
    };
    match shared.store.contributions(id, &hash) {
        Ok(None) => {}
        Ok(Some(_)) => {
            tracing::debug!(ptx = %hash, "edit contributions already stored");
            return None;
        }
        Err(e) => {
            tracing::warn!(error = %e, "edit contributions: reading the store");
            return None;
        }
    }
    let reader = match Reader::for_spec(&record.spec_path, &root) {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(error = %e, "edit contributions not measured");
            return None;
        }
    };
    let stop = || {
        if shared.shutdown.load(Ordering::Relaxed) {
            return true;
        }
        let registry = shared.registry();
        !registry.slots[slot].open
            || registry
                .jobs
                .get(id)
                .is_none_or(|j| !j.live() || j.daemon.paused)
            || (why == Why::Idle && registry.pick(slot).is_some())
    };
    tracing::info!(?why, edits = patch.edits.len(), ptx = %hash, "measuring edit contributions on the simulator");
    let started = Instant::now();
    match crate::explain_edits::measure(&record, &reader, &patch, None, &stop) {
        Ok(c) => match shared.store.put_contributions(id, &hash, &c) {
            Ok(()) => {
                let classes: Vec<&str> = c.edits.iter().map(|e| e.class.name()).collect();
                tracing::info!(
                    classes = ?classes,
                    variants = c.variants_measured,
                    seconds = started.elapsed().as_secs_f64(),
                    "edit contributions stored"
                );
            }
            Err(e) => tracing::warn!(error = %e, "edit contributions: storing them"),
        },
        Err(ExplainError::Harness { .. }) => {
            tracing::debug!(
                "a harness spec: edit contributions are measured for spec launches only"
            );
        }
        Err(ExplainError::Interrupted) => {
            tracing::info!("edit contributions interrupted; measured again later");
            if let Some(job) = shared.registry().jobs.get_mut(id) {
                if job.explained.as_ref() == Some(&hash) {
                    job.explained = None;
                }
            }
        }
        Err(e) => {
            let chain =
                std::iter::successors(Some(&e as &(dyn std::error::Error + 'static)), |e| {
                    e.source()
                });
            let error = gevo_client::text::error_line(chain);
            tracing::warn!(%error, "edit contributions not measured");
        }
    }
    Some(started.elapsed())
}
