//! Turning spec files into jobs: loading the jobs the store knows at
//! start-up, and on each scan registering new spec/IR contents as new
//! versions, marking vanished specs removed and broken ones as problems.

use super::registry::{JobEntry, Problem, Registry};
use super::{ServeConfig, Shared};
use gevo_client::export::Readers;
use gevo_client::proto::BestRecord;
use gevo_ir::{content_hash, KernelIr};
use gevo_model::access::Reader;
use gevo_search::evolve::Engine;
use gevo_search::store::{DaemonJob, JobRecord, Store, StoreError};
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

fn snapshot_path(state: &Path, id: &str) -> PathBuf {
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
    BestRecord {
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
        spec_hash: entry.record.spec_hash.clone(),
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
        // Removed until a scan finds the spec again.
        let mut entry = JobEntry::new(daemon, record, ir_snapshot, true, 0.0);
        if let Some(engine) = engine {
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
    let roots: Vec<PathBuf> = shared
        .registry()
        .roots
        .iter()
        .map(|r| r.path.clone())
        .collect();
    let found = crate::watch::scan(&roots);
    let present: BTreeSet<PathBuf> = found.iter().map(|f| f.spec.clone()).collect();
    settler.retain(|p| present.contains(p));
    let mut pending: Option<Duration> = None;
    for f in &found {
        // Every file the spec names, the spec included, is read for the
        // spec's owner.
        let read = Reader::for_spec(&f.spec, &f.root)
            .and_then(|reader| Ok((reader.read(&f.spec)?, reader)));
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
        let parsed = gevo_model::spec::parse_as(&f.spec, &spec_text, &reader);
        let ir_bytes = parsed.as_ref().ok().map(|s| reader.read(&s.ir));
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
                continue;
            }
        }
        let wait = settler.observe(&f.spec, &fingerprint, now, config.daemon.settle);
        if !wait.is_zero() {
            pending = Some(pending.map_or(wait, |p| p.min(wait)));
            continue;
        }
        let outcome = parsed.map_err(|e| e.to_string()).and_then(|spec| {
            let ir_bytes = ir_bytes
                .expect("read for every parsed spec")
                .map_err(|e| format!("{}: ir: {e}", f.spec.display()))?;
            register(
                shared,
                config,
                f,
                &reader,
                &kernel,
                spec,
                &spec_text,
                &ir_bytes,
                &fingerprint,
            )
        });
        if let Err(message) = outcome {
            let problem = Problem {
                kernel,
                message,
                fingerprint,
            };
            record_problem(shared, &f.spec, problem);
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

/// Shows `problem` for `spec`, logging it once per spec content and
/// message rather than on every scan.
fn record_problem(shared: &Shared, spec: &Path, problem: Problem) {
    let mut registry = shared.registry();
    if registry.problems.get(spec) != Some(&problem) {
        tracing::warn!(spec = %spec.display(), message = %problem.message, "spec not usable");
    }
    registry.problems.insert(spec.to_path_buf(), problem);
}

/// Makes a job for a settled spec and IR content (or revives the one that
/// had this content), superseding the kernel's other versions from the same
/// spec file.
#[allow(clippy::too_many_arguments)]
fn register(
    shared: &Shared,
    config: &ServeConfig,
    found: &crate::watch::Found,
    reader: &Reader,
    kernel: &str,
    spec: gevo_model::spec::Spec,
    spec_text: &str,
    ir_bytes: &[u8],
    fingerprint: &str,
) -> Result<(), String> {
    // The owner the spec's files were judged for, never re-read from the
    // path (a symlink flipped since would name someone else).
    let owner = match reader {
        Reader::OnBehalf { uid, .. } => *uid,
        Reader::Caller => effective_uid(),
    };
    if spec.harness.is_some() {
        check_harness_owner(&found.spec, owner, &config.harness.allowed_uids)?;
    }
    // A version whose harness runs a program its spec's owner does not own
    // (root's) starts from nothing: that program's change is not theirs.
    let carry = spec.harness.as_ref().is_none_or(|h| {
        use std::os::unix::fs::MetadataExt;
        h.programs
            .iter()
            .all(|p| std::fs::metadata(p).is_ok_and(|m| m.uid() == owner))
    });
    let ir_path = spec.ir.display().to_string();
    let ir = KernelIr::parse_kernels(&ir_path, ir_bytes, &spec.kernels)
        .map_err(|e| format!("{}: {e}", found.spec.display()))?;
    // The PTX target: the GPUs', else the spec's, else the default.
    let arch = shared
        .arch
        .clone()
        .or_else(|| spec.arch.clone())
        .unwrap_or_else(|| gevo_ir::DEFAULT_ARCH.to_string());
    let scope = &shared.scope;
    // Harness runs measure the application, not the kernel alone: another
    // backend, so never the same job or cached results as a kernel spec's.
    let backend = match spec.harness {
        Some(_) => crate::harness::backend_name(scope.backend == "cuda").to_string(),
        None => scope.backend.clone(),
    };
    let identity = format!("{fingerprint}\n{backend}\n{}\n{arch}", scope.target);
    let id = format!("{kernel}@{}", &content_hash(identity.as_bytes())[..12]);
    let search_key = super::shared_search::key(&spec, spec_text, ir.text(), &backend, &arch);

    // Work done before the registry is locked: carrying patches over
    // replays each on the new IR.
    let seeding = if carry {
        super::seed::from_previous(shared, kernel, &found.spec, &id, &ir)
    } else {
        None
    };
    let mut registry = shared.registry();
    // Another spec file already defines this kernel name.
    if let Some(other) = registry.jobs.values().find(|j| {
        j.daemon.kernel == kernel
            && j.record.spec_path != found.spec
            && !j.daemon.superseded
            && !j.removed
    }) {
        return Err(format!(
            "{}: kernel {kernel} is already defined by {}; set `project` in one of them (gevo_optimize: PROJECT, or -DGEVO_PROJECT at configure)",
            found.spec.display(),
            other.record.spec_path.display()
        ));
    }
    let store = &shared.store;
    let persist = |id: &str, d: &DaemonJob| store.put_daemon_job(id, d).map_err(|e| e.to_string());
    // The same kernel and content from a spec file that is gone (its
    // directory unwatched, a build directory replaced): the job moves to
    // this spec and keeps its progress.
    if let Some(job) = registry.jobs.get_mut(&id) {
        if job.removed && job.record.spec_path != found.spec {
            job.record.spec_path = found.spec.clone();
            job.daemon.root = found.root.clone();
            store.put_job(&job.record).map_err(|e| e.to_string())?;
            persist(&job.id, &job.daemon)?;
            tracing::info!(job = %id, spec = %found.spec.display(), "job moved to another spec file");
        }
    }
    let versions = registry.versions(kernel);
    let last_version = versions.iter().map(|j| j.daemon.version).max();
    // A rebuild does not undo a client's pause of the current version.
    let paused = versions.first().is_some_and(|j| j.daemon.paused);
    // A new job sharing another's search serves that one's variant at once.
    let mut new_follower = false;
    if !registry.jobs.contains_key(&id) {
        // Another build directory's job of the same code: share its search.
        let follows = search_key
            .as_deref()
            .and_then(|key| registry.leader_for(key, kernel));
        let mut engine =
            Engine::new(config.evolve.clone(), config.jobs.seed).map_err(|e| e.to_string())?;
        new_follower = follows.is_some();
        let origin = seeding.filter(|_| follows.is_none()).map(|s| {
            engine.seed_with(s.seeds);
            s.origin
        });
        let record = JobRecord {
            id: id.clone(),
            spec_path: found.spec.clone(),
            spec_hash: content_hash(spec_text.as_bytes()),
            spec_text: spec_text.to_string(),
            ir_hash: ir.ir_hash().to_string(),
            ir_text: ir.text().to_string(),
            backend,
            target: arch,
            seed: config.jobs.seed,
        };
        let daemon = DaemonJob {
            kernel: kernel.to_string(),
            version: last_version.map_or(1, |v| v + 1),
            root: found.root.clone(),
            fingerprint: fingerprint.to_string(),
            paused,
            superseded: false,
            origin,
            search_key,
            follows,
        };
        let ir_snapshot = snapshot_path(&shared.state_dir, &id);
        let text = record.ir_text.as_bytes();
        gevo_client::export::write_atomic_for(&ir_snapshot, text, shared.readers)
            .map_err(|e| e.to_string())?;
        store
            .create_daemon_job(&record, &engine, &daemon)
            .map_err(|e| e.to_string())?;
        match &daemon.follows {
            Some(leader) => {
                tracing::info!(job = %id, version = daemon.version, %leader, "new job, sharing the search of another build directory's job of the same code")
            }
            None => tracing::info!(job = %id, version = daemon.version, "new job"),
        }
        let vtime = registry.entry_vtime();
        registry.jobs.insert(
            id.clone(),
            JobEntry::new(daemon, record, ir_snapshot, false, vtime),
        );
    }
    let vtime = registry.entry_vtime();
    let mut changed_version = new_follower;
    for job in registry.jobs.values_mut() {
        if job.daemon.kernel != kernel || job.record.spec_path != found.spec {
            continue;
        }
        let current = job.id == id;
        if job.daemon.superseded == current {
            changed_version = true;
            job.daemon.superseded = !current;
            persist(&job.id, &job.daemon)?;
            if current {
                job.vtime = vtime;
            }
        }
        if current {
            job.removed = false;
            job.error = None;
        }
    }
    registry.problems.remove(&found.spec);
    // The export (what builds get when the daemon is down) follows the
    // current version: its own variant, or none.
    let export = changed_version.then(|| {
        let job = &registry.jobs[&id];
        (registry.best_of(job), job.record.target.clone())
    });
    drop(registry);
    match export {
        Some((Some((validated, record)), _)) => {
            let best = gevo_client::proto::Best {
                record,
                ptx: validated.ptx,
            };
            gevo_client::export::write(&shared.state_dir, &best, shared.readers)
        }
        Some((None, target)) => gevo_client::export::remove(&shared.state_dir, kernel, &target),
        None => Ok(()),
    }
    .unwrap_or_else(|e| tracing::error!(error = %e, "exporting the current version's variant"));
    Ok(())
}

/// A harness command runs with the daemon's rights, so only spec files
/// owned by the daemon's own user or by an allowed uid may name one.
fn check_harness_owner(spec: &Path, owner: u32, allowed_uids: &[u32]) -> Result<(), String> {
    let me = effective_uid();
    if owner == me || allowed_uids.contains(&owner) {
        return Ok(());
    }
    Err(format!(
        "{}: harness: refused: the spec is owned by uid {owner}, and gevod runs harness commands only from its own user's (uid {me}) spec files or those of [harness] allowed_uids in gevod.toml",
        spec.display()
    ))
}

fn effective_uid() -> u32 {
    // SAFETY: geteuid cannot fail and touches no memory.
    unsafe { libc::geteuid() }
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
