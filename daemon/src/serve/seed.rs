//! Seeding a kernel's new version from the one it replaces: the previous
//! job's validated patches (minimized) and the elite of its last
//! population are carried to the new IR (`ir::transplant`) and start the
//! new job's search. They are only seeds: each is evaluated, promoted and
//! validated on the new code like any other individual, so nothing of the
//! old version is served for the new one before it passes there.

use super::Shared;
use crate::evolve::{Engine, Validated};
use crate::ir::transplant::Transplanter;
use crate::ir::{Edit, KernelIr, Patch};
use crate::store::Origin;
use gevo_client::proto::JobOrigin;
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
) -> Option<(Vec<Patch>, Origin)> {
    let (prev_id, prev_version, ir_text) = {
        let registry = shared.registry();
        if registry.jobs.contains_key(id) {
            return None;
        }
        let prev = registry
            .versions(kernel)
            .into_iter()
            .find(|j| j.record.spec_path == spec)?;
        (
            prev.id.clone(),
            prev.daemon.version,
            prev.record.ir_text.clone(),
        )
    };
    let span = tracing::info_span!("seed", from = %prev_id);
    let _enter = span.enter();
    let validated = shared.store.validated(&prev_id).ok().unwrap_or_default();
    let engine = shared.store.checkpoint(&prev_id).ok().flatten();
    let patches = previous_patches(validated, engine.as_ref());
    let first = patches.first()?;
    let old = match KernelIr::parse_for_patch(&prev_id, ir_text.as_bytes(), first) {
        Ok(ir) => ir,
        Err(e) => {
            tracing::warn!(error = %e, "the previous version's IR does not load; starting afresh");
            return None;
        }
    };
    let (seeds, kept, dropped, edits) = carry(&old, new, &patches)?;
    let info = JobOrigin {
        job: prev_id,
        version: prev_version,
        patches: seeds.len(),
        kept,
        dropped,
    };
    Some((seeds, Origin { info, edits }))
}

/// What a previous version hands on: its validated patches (minimized),
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

/// `patches` carried from `old` to `new`: the distinct non-empty results,
/// the edits kept and dropped over all of them, and every carried edit.
/// `None` when nothing carries over.
pub fn carry(
    old: &KernelIr,
    new: &KernelIr,
    patches: &[Patch],
) -> Option<(Vec<Patch>, usize, usize, Vec<Edit>)> {
    let transplanter = match Transplanter::new(old, new) {
        Ok(t) => t,
        Err(e) => {
            tracing::warn!(error = %e, "cannot match the previous version; starting afresh");
            return None;
        }
    };
    let (mut seeds, mut edits): (Vec<Patch>, Vec<Edit>) = (Vec::new(), Vec::new());
    let (mut kept, mut dropped) = (0, 0);
    for p in patches {
        match transplanter.transplant(p) {
            Ok(t) => {
                kept += t.kept.len();
                dropped += t.dropped.len();
                for d in &t.dropped {
                    tracing::debug!(dropped = %d, "edit not carried over");
                }
                if !t.patch.edits.is_empty() && !seeds.contains(&t.patch) {
                    for e in &t.patch.edits {
                        if !edits.contains(e) {
                            edits.push(e.clone());
                        }
                    }
                    seeds.push(t.patch);
                }
            }
            Err(e) => {
                dropped += p.edits.len();
                tracing::debug!(error = %e, "patch not carried over");
            }
        }
    }
    let (matched, total) = transplanter.matched();
    tracing::info!(
        seeds = seeds.len(),
        kept,
        dropped,
        matched,
        total,
        "carried the previous version's patches over"
    );
    (!seeds.is_empty()).then_some((seeds, kept, dropped, edits))
}
