//! Turning spec files into jobs: loading the jobs the store knows at
//! start-up, and on each scan registering new spec/IR contents as new
//! versions, marking vanished specs removed and broken ones as problems.

use super::register::Found;
use super::registry::{JobEntry, Problem, Registry};
use super::{ServeConfig, Shared};
use gevo_client::export::Readers;
use gevo_client::proto::BestRecord;
use gevo_ir::content_hash;
use gevo_model::access::Reader;
use gevo_search::evolve::Engine;
use gevo_search::store::{Store, StoreError};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// `[A-Za-z0-9._-]`, everything else `_`: kernel names are path components.
fn sanitize(s: &str) -> String {
    let s: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() || s.starts_with('.') {
        format!("_{s}")
    } else {
        s
    }
}

/// `<project>/<name>`: the spec's `project`, else the watched root's
/// directory name; the spec file's stem.
pub fn kernel_name(project: Option<&str>, root: &Path, spec: &Path) -> String {
    let project = project
        .map(str::to_string)
        .or_else(|| root.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "root".into());
    format!(
        "{}/{}",
        sanitize(&project),
        sanitize(&crate::watch::spec_stem(spec))
    )
}

pub(super) fn snapshot_path(state: &Path, id: &str) -> PathBuf {
    state.join("jobs").join(id).join("kernel.ll")
}

/// Where a job's spec text lies beside its IR snapshot.
pub fn spec_snapshot_path(ir_snapshot: &Path) -> PathBuf {
    ir_snapshot.with_file_name("spec.gevo.toml")
}

/// Writes the spec text a job was made from beside its IR snapshot.
pub fn write_spec_snapshot(ir_snapshot: &Path, text: &str, readers: Readers) -> Result<(), String> {
    let path = spec_snapshot_path(ir_snapshot);
    gevo_client::export::write_atomic_for(&path, text.as_bytes(), readers)
        .map_err(|e| format!("the spec's snapshot: {e}"))
}

/// The best validated variant of an engine as an export record.
pub fn best_record(
    entry: &JobEntry,
    engine: &Engine,
    validated_at: u64,
) -> Option<(gevo_search::evolve::Validated, BestRecord)> {
    let v = engine.best_validated()?.clone();
    let record = record_for(entry, &v, validated_at);
    Some((v, record))
}

/// What `entry`'s kernel serves of the validated variant `v` (its own
/// search's, or the one it shares: `shared_search`).
pub fn record_for(
    entry: &JobEntry,
    v: &gevo_search::evolve::Validated,
    validated_at: u64,
) -> BestRecord {
    let tuned = entry.daemon.tuned.as_ref();
    BestRecord {
        configuration: tuned.map(|t| t.configuration.clone()),
        kernel: entry.daemon.kernel.clone(),
        job: entry.id.clone(),
        version: entry.daemon.version,
        // The PTX target (what builds ask for); a GPU's scope also names
        // the device and driver it was measured on.
        target: entry.record.target.clone(),
        backend: if v.scope.target == entry.record.target {
            v.scope.backend.clone()
        } else {
            format!("{} on {}", v.scope.backend, v.scope.target)
        },
        speedup: v.speedup,
        interval: v.interval,
        generation: v.generation,
        ptx_hash: v.ptx_hash.clone(),
        // What the build's spec copy hashes to: the file's, for a tuned spec.
        spec_hash: entry.file_spec_hash().to_string(),
        ir_hash: entry.record.ir_hash.clone(),
        validated_at,
    }
}

pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Loads every daemon job from the store. They start `removed` until a
/// scan finds their spec again.
pub fn load_jobs(
    store: &Store,
    state: &Path,
    readers: Readers,
    registry: &mut Registry,
) -> Result<(), StoreError> {
    for (id, daemon) in store.daemon_jobs()? {
        let Some(record) = store.job(&id)? else {
            continue;
        };
        let engine = store.checkpoint(&id)?;
        let ir_snapshot = snapshot_path(state, &id);
        if !ir_snapshot.exists() {
            // The snapshot is derived data; the store has the IR.
            let text = record.ir_text.as_bytes();
            if let Err(e) = gevo_client::export::write_atomic_for(&ir_snapshot, text, readers) {
                tracing::error!(error = %e, "restoring a job's IR snapshot");
            }
        }
        // Removed until a scan finds the spec again. Its owner, until then:
        // the spec file's, if it is still there.
        let mut entry = JobEntry::new(daemon, record, ir_snapshot, true, 0.0);
        entry.owner = std::fs::symlink_metadata(&entry.record.spec_path)
            .ok()
            .map(|m| std::os::unix::fs::MetadataExt::uid(&m));
        if let Some(engine) = engine {
            // What the job found when, as the runners saw it commit each
            // generation: its share of the slots survives the restart.
            match store.generations(&id) {
                Ok(records) => {
                    for g in records {
                        let report = g.report;
                        entry
                            .progress
                            .committed(report.generation, report.best_cost);
                    }
                }
                Err(e) => {
                    tracing::warn!(job = %id, error = %e, "reading the generation records: the job's share of the slots is counted afresh from its next generation")
                }
            }
            entry.absorb(&engine);
            // Keep the export's time when it is this variant's.
            let at = gevo_client::export::read(
                state,
                &entry.daemon.kernel,
                Some(entry.record.target.as_str()),
            )
            .ok()
            .filter(|b| Some(&b.record.ptx_hash) == engine.best_validated().map(|v| &v.ptx_hash))
            .map_or_else(unix_now, |b| b.record.validated_at);
            entry.best = best_record(&entry, &engine, at);
        }
        registry.jobs.insert(id, entry);
    }
    Ok(())
}

/// Scans the roots and updates the registry. Returns how long until the
/// next not-yet-settled spec may count, if any.
pub fn rescan(
    shared: &Shared,
    settler: &mut crate::watch::Settler,
    config: &ServeConfig,
    now: Instant,
) -> Option<Duration> {
    // Each root adopts the specs of whom it is for: a root a user added,
    // only theirs (`Root::adopts`).
    let roots: Vec<(PathBuf, crate::watch::Adopts)> = shared
        .registry()
        .roots
        .iter()
        .flat_map(|r| r.adopts().into_iter().map(|a| (r.path.clone(), a)))
        .collect();
    let found = crate::watch::scan(&roots);
    let present: BTreeSet<PathBuf> = found.iter().map(|f| f.spec.clone()).collect();
    settler.retain(|p| present.contains(p));
    let mut pending: Option<Duration> = None;
    for f in &found {
        // Every file the spec names, the spec included, is read for the
        // spec's owner.
        let read = Reader::for_spec(&f.spec, &f.root).and_then(|reader| {
            Ok((
                reader.read_capped(&f.spec, gevo_model::access::TEXT_CAP)?,
                reader,
            ))
        });
        let (spec_bytes, reader) = match read {
            Ok(read) => read,
            Err(e) => {
                let message = format!(
                    "{}: cannot read spec file: {}",
                    f.spec.display(),
                    e.about(&f.spec)
                );
                let problem = Problem {
                    kernel: kernel_name(None, &f.root, &f.spec),
                    fingerprint: content_hash(message.as_bytes()),
                    message,
                };
                record_problem(shared, &f.spec, problem);
                continue;
            }
        };
        let spec_text = String::from_utf8_lossy(&spec_bytes).into_owned();
        let parsed =
            gevo_model::spec::parse_as(&f.spec, &spec_text, &reader).map_err(|e| e.to_string());
        // A tuned spec whose sweep chose a configuration: that one's spec
        // (and its IR, read below) make the version.
        let configured = parsed
            .as_ref()
            .ok()
            .and_then(|s| super::tuned::configured(shared, s, &reader));
        let (parsed, spec_text, tuned) = match configured {
            None => (parsed, spec_text, None),
            Some(Ok(c)) => (Ok(c.spec), c.text, Some(c.tuned)),
            Some(Err(message)) => (
                Err(format!("{}: {message}", f.spec.display())),
                spec_text,
                None,
            ),
        };
        let ir_bytes = parsed
            .as_ref()
            .ok()
            .map(|s| reader.read_capped(&s.ir, gevo_ir::bounds::MAX_IR_BYTES));
        // What a harness command runs is part of the version: a replaced
        // program makes a new one.
        let programs: Vec<String> = parsed
            .as_ref()
            .ok()
            .and_then(|s| s.harness.as_ref())
            .map_or(Vec::new(), |h| {
                h.programs
                    .iter()
                    .map(|p| reader.identity(p).unwrap_or_else(|e| e.to_string()))
                    .collect()
            });
        let fingerprint = content_hash(
            format!(
                "{}\n{}{}",
                content_hash(&spec_bytes),
                ir_bytes
                    .as_ref()
                    .and_then(|r| r.as_deref().ok())
                    .map_or("-".to_string(), content_hash),
                programs
                    .iter()
                    .map(|p| format!("\n{p}"))
                    .collect::<String>()
                    + &tuned.as_ref().map_or(String::new(), |t| format!(
                        "\nconfiguration {}",
                        gevo_model::spec::tune::describe(&t.configuration)
                    ))
            )
            .as_bytes(),
        );
        let project = parsed.as_ref().ok().and_then(|s| s.project.clone());
        let kernel = kernel_name(project.as_deref(), &f.root, &f.spec);
        // An unchanged spec of a known job needs no settling.
        {
            let mut registry = shared.registry();
            let known = registry.jobs.values_mut().find(|j| {
                j.record.spec_path == f.spec
                    && j.daemon.fingerprint == fingerprint
                    && !j.daemon.superseded
            });
            if let Some(job) = known {
                job.removed = false;
                registry.problems.remove(&f.spec);
                set_owner(&mut registry, &f.spec, &reader);
                continue;
            }
        }
        let wait = settler.observe(&f.spec, &fingerprint, now, config.daemon.settle);
        if !wait.is_zero() {
            pending = Some(pending.map_or(wait, |p| p.min(wait)));
            continue;
        }
        let outcome = parsed.and_then(|spec| {
            let ir_bytes = ir_bytes
                .expect("read for every parsed spec")
                .map_err(|e| format!("{}: ir: {e}", f.spec.display()))?;
            let found = Found {
                found: f,
                reader: &reader,
                kernel: &kernel,
                spec,
                spec_text: &spec_text,
                ir_bytes: &ir_bytes,
                fingerprint: &fingerprint,
                tuned,
            };
            super::register::register(shared, config, found)
        });
        match outcome {
            Ok(()) => set_owner(&mut shared.registry(), &f.spec, &reader),
            Err(message) => {
                let problem = Problem {
                    kernel,
                    message,
                    fingerprint,
                };
                record_problem(shared, &f.spec, problem);
            }
        }
    }
    let mut registry = shared.registry();
    registry.problems.retain(|p, _| present.contains(p));
    for job in registry.jobs.values_mut() {
        if !present.contains(&job.record.spec_path) {
            job.removed = true;
        }
    }
    pending
}

/// Records whom the jobs of the spec file `spec` belong to: the owner its
/// files were read for (who may pause and resume them).
fn set_owner(registry: &mut Registry, spec: &Path, reader: &Reader) {
    if let Reader::OnBehalf { uid, .. } = reader {
        for job in registry.jobs.values_mut() {
            if job.record.spec_path == spec {
                job.owner = Some(*uid);
            }
        }
    }
}

/// Shows `problem` for `spec`, logging it once per spec content and
/// message rather than on every scan.
fn record_problem(shared: &Shared, spec: &Path, problem: Problem) {
    let mut registry = shared.registry();
    if registry.problems.get(spec) != Some(&problem) {
        tracing::warn!(spec = %spec.display(), message = %problem.message, "spec not usable");
    }
    registry.problems.insert(spec.to_path_buf(), problem);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_names_come_from_the_project_or_the_root() {
        let root = Path::new("/home/ann/app/build");
        let spec = Path::new("/home/ann/app/build/gevo/stencil.gevo.toml");
        assert_eq!(kernel_name(None, root, spec), "build/stencil");
        assert_eq!(kernel_name(Some("my app"), root, spec), "my_app/stencil");
        assert_eq!(kernel_name(Some(".."), root, spec), "_../stencil");
    }
}
