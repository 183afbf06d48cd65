//! The daemon's side of seeding a kernel's new version (`gevo_search::seed`):
//! which earlier job it seeds from. A rebuild's new version seeds from the
//! kernel's latest version from the same spec file; a failure to read it
//! only means starting afresh.

use super::Shared;
use gevo_ir::KernelIr;
use gevo_search::seed::Seeding;
use std::path::Path;

/// Seeds for job `id` (not yet created) of `kernel` from `spec`, whose IR
/// is `new`: `None` when the job exists already (content reverted), there
/// is no previous version from this spec file, or nothing carries over.
pub fn from_previous(
    shared: &Shared,
    kernel: &str,
    spec: &Path,
    id: &str,
    new: &KernelIr,
) -> Option<Seeding> {
    let (prev, version) = {
        let registry = shared.registry();
        if registry.jobs.contains_key(id) {
            return None;
        }
        let prev = registry
            .versions(kernel)
            .into_iter()
            .find(|j| j.record.spec_path == spec)?;
        (prev.record.clone(), prev.daemon.version)
    };
    let span = tracing::info_span!("seed", from = %prev.id);
    let _enter = span.enter();
    match gevo_search::seed::from_job(&shared.store, &prev, version, new) {
        Ok(seeding) => seeding,
        Err(e) => {
            tracing::warn!(error = %e, "the previous version cannot seed this one; starting afresh");
            None
        }
    }
}
