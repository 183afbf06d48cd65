//! Specs with `[tune]` in the daemon. A kernel's first version runs the
//! source's configuration; the first time a runner takes it, it sweeps the
//! configurations on its slot (`crate::tune`) and stores the sweep. The next
//! scan then makes the fastest configuration the kernel's current version,
//! seeded from the first by transplant like any new version, and builds are
//! served its PTX with the constants it was built with (docs/daemon.md,
//! "Tunable constants").

use super::{BackendFactory, Shared};
use crate::tune::{sweep_key, Sweep};
use gevo_model::access::Reader;
use gevo_model::spec::tune::describe;
use gevo_model::spec::Spec;
use gevo_search::store::Tuned;
use std::sync::atomic::Ordering;

/// The version a scan registers for a tuned spec whose sweep chose another
/// configuration than the source's.
pub(super) struct Configured {
    pub spec: Spec,
    pub text: String,
    pub tuned: Tuned,
}

/// For `spec` (the file as parsed): the configuration
/// its stored sweep on this daemon's backend chose, when that is not the
/// source's; `Err` when that configuration's spec no longer loads.
pub(super) fn configured(
    shared: &Shared,
    spec: &Spec,
    reader: &Reader,
) -> Option<Result<Configured, String>> {
    let tune = spec.tune.as_ref().filter(|t| !t.chosen_written)?;
    let key = sweep_key(&spec.content_hash(), &shared.scope.backend);
    let sweep: Sweep = shared.store.setting(&key).ok().flatten()?;
    let best = sweep.best?;
    if best.configuration == tune.source {
        return None;
    }
    let configured_text = spec.configured_text(&best.configuration)?;
    let parsed = gevo_model::spec::parse_as(&spec.path, &configured_text, reader)
        .map_err(|e| {
            format!(
                "the configuration {} its sweep chose: {e}",
                describe(&best.configuration)
            )
        })
        .map(|configured| Configured {
            spec: configured,
            text: configured_text,
            tuned: Tuned {
                configuration: best.configuration,
                spec_hash: spec.content_hash(),
            },
        });
    Some(parsed)
}

/// Before job `id` searches: when it is a tuned spec's source version with
/// no sweep stored, the sweep, on the slot's backend. Returns whether the
/// runner should leave the job (it was swept, and another configuration
/// will be its kernel's next version).
pub(super) fn sweep_first(
    shared: &Shared,
    slot: usize,
    id: &str,
    factory: &dyn BackendFactory,
    workers: usize,
) -> bool {
    let (record, snapshot, root, tuned) = {
        let registry = shared.registry();
        let Some(job) = registry.jobs.get(id) else {
            return false;
        };
        (
            job.record.clone(),
            job.ir_snapshot.clone(),
            job.daemon.root.clone(),
            job.daemon.tuned.is_some(),
        )
    };
    if tuned {
        return false;
    }
    let Ok(reader) = Reader::for_spec(&record.spec_path, &root) else {
        return false;
    };
    let Ok(mut spec) = gevo_model::spec::parse_as(&record.spec_path, &record.spec_text, &reader)
    else {
        return false;
    };
    if spec.tune.as_ref().is_none_or(|t| t.chosen_written) {
        return false;
    }
    let key = sweep_key(&spec.content_hash(), &shared.scope.backend);
    if let Ok(Some(stored)) = shared.store.setting::<Sweep>(&key) {
        return leave_for(&spec, &stored);
    }
    spec.ir = snapshot;
    tracing::info!(job = %id, "sweeping the spec's [tune] configurations");
    let swept = factory.sweep(
        &record.spec_path,
        &spec,
        shared.slots[slot].device.as_ref(),
        &reader,
        workers,
    );
    match swept {
        Ok(sweep) => {
            if let Err(e) = shared.store.put_setting(&key, &sweep) {
                tracing::error!(error = %e, "storing the configuration sweep");
                return false;
            }
            let best = sweep.best.as_ref().map(|b| describe(&b.configuration));
            tracing::info!(job = %id, best = ?best, "configurations swept");
            let leave = leave_for(&spec, &sweep);
            if leave {
                // The scan makes the chosen configuration's version now.
                shared.rescan.store(true, Ordering::Relaxed);
                if let Some(job) = shared.registry().jobs.get_mut(id) {
                    job.configuring = true;
                }
            }
            leave
        }
        Err(e) => {
            // The search goes on with the source's configuration.
            tracing::error!(job = %id, error = %e, "configuration sweep failed");
            if let Err(e) = shared.store.put_setting(&key, &failed_sweep(&spec, &e)) {
                tracing::error!(error = %e, "storing the configuration sweep");
            }
            false
        }
    }
}

/// Whether the sweep chose another configuration than `spec`'s source.
fn leave_for(spec: &Spec, sweep: &Sweep) -> bool {
    let source = spec.tune.as_ref().map(|t| &t.source);
    sweep
        .best
        .as_ref()
        .is_some_and(|b| Some(&b.configuration) != source)
}

/// A sweep that measured nothing, kept so that it is not retried at every
/// slice: the spec's next change sweeps again.
fn failed_sweep(spec: &Spec, why: &str) -> Sweep {
    let source = spec
        .tune
        .as_ref()
        .map(|t| t.source.clone())
        .unwrap_or_default();
    Sweep::failed(&spec.path, source, why)
}
