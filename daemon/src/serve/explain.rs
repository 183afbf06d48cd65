//! The daemon's own `explain-edits` (`[jobs] explain_edits`): the edit
//! contributions and relies-on lines of a job's best validated variant,
//! measured on the simulator (`crate::explain_edits`) by one explainer
//! thread beside the runners, and stored as `gevod explain-edits` stores
//! them, so `gevo-client explain` shows them without anyone running the
//! command. It uses one CPU core at the workers' priority (`[workers]
//! cpu`) and no GPU: the job's search goes on meanwhile, and no slot waits
//! for it.
//!
//! A GPU job's contributions are measured on its GPU by its slot
//! (`super::explain_slot`); this thread then attaches their relies-on lines
//! ([`Why::Relies`]), and measures on the simulator only where the GPU
//! could not ([`Why::GpuFailed`]) or will not (a finished job no slot runs
//! again, [`Why::Idle`]).
//!
//! When (the runners queue the job; docs/daemon.md, "Edit contributions"):
//! - [`Why::Ended`]: the job's search has just ended (`Ended::Done`);
//! - [`Why::Settled`]: a slice ended with the same best it started with
//!   (a best that lasted a whole slice; a search still finding new bests
//!   every slice is not explained at each);
//! - [`Why::Idle`]: a slot has no job to run: any live job's best.
//!
//! Each (job, PTX hash) is tried at most once per daemon run (the entry's
//! `explained`, set before measuring) and never once the store holds it. A
//! measurement stops between two subsets when the daemon shuts down or the
//! job is paused or replaced; it is then tried again later. A failure is
//! logged and records nothing; it never touches the job.

use super::Shared;
use crate::explain_edits::ExplainError;
use gevo_model::access::Reader;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// Why a runner queued a job for the explainer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    Ended,
    Settled,
    Idle,
    /// A slot stored GPU-measured contributions: their relies-on lines.
    Relies,
    /// A slot could not measure them on the GPU: the simulator's instead.
    GpuFailed,
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

/// Queues job `id` for the explainer (once: a job queued already keeps its
/// place and first reason).
pub fn enqueue(shared: &Shared, id: &str, why: Why) {
    let mut registry = shared.registry();
    if registry
        .explain_queue
        .iter()
        .all(|(queued, _)| queued != id)
    {
        registry.explain_queue.push_back((id.to_string(), why));
        drop(registry);
        shared.wake.notify_all();
    }
}

/// The explainer thread: measures the queued jobs' bests, one at a time,
/// until the daemon shuts down.
pub fn run(shared: &Shared) {
    // Beside the searches at their CPU priority (`[workers] cpu`).
    let priority = shared.config().workers.cpu;
    if let Err(e) = crate::worker::priority::lower_this_thread(priority) {
        tracing::warn!(error = %e, ?priority, "the explainer thread keeps its CPU priority");
    }
    loop {
        if shared.shutdown.load(Ordering::Relaxed) {
            return;
        }
        let mut registry = shared.registry();
        let Some((id, why)) = registry.explain_queue.pop_front() else {
            let _ = shared
                .wake
                .wait_timeout(registry, std::time::Duration::from_millis(500));
            continue;
        };
        drop(registry);
        if !shared.config().jobs.explain_edits {
            continue;
        }
        let span = tracing::info_span!("job", id = %id);
        let _enter = span.enter();
        job(shared, &id, why);
    }
}

/// Measures and stores the contributions of job `id`'s best validated
/// variant, unless it has none, it was tried already, or the store holds
/// them.
fn job(shared: &Shared, id: &str, why: Why) {
    if why == Why::Relies {
        return relies(shared, id);
    }
    // Claimed under the lock: no other slot takes the same variant.
    let (record, root, hash, patch, slot_measures) = {
        let mut registry = shared.registry();
        let Some(job) = registry.jobs.get_mut(id) else {
            return;
        };
        let Some((best, _)) = job.best.as_ref() else {
            return;
        };
        let tried = job.explained.as_ref() == Some(&best.ptx_hash) && why != Why::GpuFailed;
        if !job.live() || job.daemon.paused || tried {
            return;
        }
        let (hash, patch) = (best.ptx_hash.clone(), best.minimized.clone());
        // A GPU job's slot measures them on the GPU, unless it failed or
        // no slot runs the job again.
        let slot_measures = job.record.backend == super::explain_slot::ON_SLOT
            && why != Why::GpuFailed
            && !job.finished;
        job.explained = Some(hash.clone());
        (
            job.record.clone(),
            job.daemon.root.clone(),
            hash,
            patch,
            slot_measures,
        )
    };
    match shared.store.contributions(id, &hash) {
        Ok(None) if slot_measures => return,
        Ok(None) => {}
        Ok(Some(_)) => {
            tracing::debug!(ptx = %hash, "edit contributions already stored");
            return;
        }
        Err(e) => {
            tracing::warn!(error = %e, "edit contributions: reading the store");
            return;
        }
    }
    let reader = match Reader::for_spec(&record.spec_path, &root) {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(error = %e, "edit contributions not measured");
            return;
        }
    };
    let stop = || {
        shared.shutdown.load(Ordering::Relaxed)
            || shared
                .registry()
                .jobs
                .get(id)
                .is_none_or(|j| !j.live() || j.daemon.paused)
    };
    tracing::info!(?why, edits = patch.edits.len(), ptx = %hash, "measuring edit contributions on the simulator");
    let started = Instant::now();
    match crate::explain_edits::measure(
        &record,
        &reader,
        &patch,
        &gevo_search::contrib::Options::default(),
        None,
        &stop,
    ) {
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
        Err(e) => warn_not_measured(&e),
    }
}

/// Attaches the relies-on lines (simulator runs) to the GPU-measured
/// contributions a slot stored for job `id`'s best, and stores them again.
fn relies(shared: &Shared, id: &str) {
    let (record, root, hash) = {
        let registry = shared.registry();
        let Some(job) = registry.jobs.get(id) else {
            return;
        };
        let Some((best, _)) = job.best.as_ref() else {
            return;
        };
        (
            job.record.clone(),
            job.daemon.root.clone(),
            best.ptx_hash.clone(),
        )
    };
    let mut c = match shared.store.contributions(id, &hash) {
        Ok(Some(c)) if c.relies_cost.is_none() => c,
        Ok(_) => return,
        Err(e) => {
            tracing::warn!(error = %e, "edit contributions: reading the store");
            return;
        }
    };
    let reader = match Reader::for_spec(&record.spec_path, &root) {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(error = %e, "relies-on lines not attached");
            return;
        }
    };
    match crate::explain_edits::attach_relies(&record, &reader, &mut c) {
        Ok(()) => match shared.store.put_contributions(id, &hash, &c) {
            Ok(()) => {
                tracing::info!(ptx = %hash, "relies-on lines attached to the GPU's edit contributions")
            }
            Err(e) => tracing::warn!(error = %e, "edit contributions: storing them"),
        },
        Err(e) => warn_not_measured(&e),
    }
}

fn warn_not_measured(e: &ExplainError) {
    let chain = std::iter::successors(Some(e as &(dyn std::error::Error + 'static)), |e| {
        e.source()
    });
    let error = gevo_client::text::error_line(chain);
    tracing::warn!(%error, "edit contributions not measured");
}
