//! Registering a settled spec and IR content as a job: its identity, the
//! job made (or revived), the kernel's current version marked, and the
//! export that follows the current version.

use super::registry::{JobEntry, Registry};
use super::{ServeConfig, Shared};
use gevo_ir::{content_hash, KernelIr};
use gevo_model::access::Reader;
use gevo_model::spec::Spec;
use gevo_search::drive::new_engine;
use gevo_search::evolve::Scope;
use gevo_search::seed::Seeding;
use gevo_search::store::{DaemonJob, JobRecord};
use std::path::Path;

/// What one scan found for a kernel: the spec file, its root, whom its
/// files were read for, and the contents as read.
pub(super) struct Found<'a> {
    pub found: &'a crate::watch::Found,
    pub reader: &'a Reader,
    pub kernel: &'a str,
    pub spec: Spec,
    pub spec_text: &'a str,
    pub ir_bytes: &'a [u8],
    pub fingerprint: &'a str,
    /// A `[tune]` spec's chosen configuration (`spec` and `spec_text` are
    /// then its configured spec).
    pub tuned: Option<gevo_search::store::Tuned>,
}

/// A version's identity: its job id and what makes it.
struct Version {
    id: String,
    ir: KernelIr,
    scope: Scope,
    /// Jobs of other build directories with this key share one search.
    search_key: Option<String>,
    /// Whether patches of the kernel's earlier version may seed it.
    carry: bool,
}

/// Makes a job for a settled spec and IR content (or revives the one that
/// had this content), superseding the kernel's other versions from the same
/// spec file.
pub(super) fn register(shared: &Shared, config: &ServeConfig, found: Found) -> Result<(), String> {
    let version = identify(shared, config, &found)?;
    let spec_path = &found.found.spec;
    // Work done before the registry is locked: carrying patches over
    // replays each on the new IR.
    let seeding = if version.carry {
        super::seed::from_previous(shared, found.kernel, spec_path, &version.id, &version.ir)
    } else {
        None
    };
    let id = version.id.clone();
    let mut registry = shared.registry();
    refuse_second_definition(&registry, found.kernel, spec_path)?;
    move_to_spec(shared, &mut registry, &id, found.found)?;
    let new_follower = match registry.jobs.contains_key(&id) {
        true => false,
        false => create(shared, config, &mut registry, &found, version, seeding)?,
    };
    let changed_version = mark_current(shared, &mut registry, found.kernel, spec_path, &id)?;
    registry.problems.remove(spec_path);
    // The export (what builds get when the daemon is down) follows the
    // current version: its own variant, or none.
    let export = (new_follower || changed_version).then(|| {
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
        Some((None, target)) => {
            gevo_client::export::remove(&shared.state_dir, found.kernel, &target)
        }
        None => Ok(()),
    }
    .unwrap_or_else(|e| tracing::error!(error = %e, "exporting the current version's variant"));
    Ok(())
}

/// The version's job id, IR and scope, with the harness rules applied.
fn identify(shared: &Shared, config: &ServeConfig, found: &Found) -> Result<Version, String> {
    let spec = &found.spec;
    // The owner the spec's files were judged for, never re-read from the
    // path (a symlink flipped since would name someone else).
    let owner = match found.reader {
        Reader::OnBehalf { uid, .. } => *uid,
        Reader::Caller => effective_uid(),
    };
    if spec.harness.is_some() {
        check_harness_owner(&found.found.spec, owner, &config.harness.allowed_uids)?;
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
    let ir = KernelIr::parse_kernels(&ir_path, found.ir_bytes, &spec.kernels)
        .map_err(|e| format!("{}: {e}", found.found.spec.display()))?;
    // The PTX target: the GPUs', else the spec's, else the default.
    let arch = shared
        .arch
        .clone()
        .or_else(|| spec.arch.clone())
        .unwrap_or_else(|| gevo_ir::DEFAULT_ARCH.to_string());
    // Harness runs measure the application, not the kernel alone: another
    // backend, so never the same job or cached results as a kernel spec's.
    let backend = match spec.harness {
        Some(_) => crate::harness::backend_name(shared.scope.backend == "cuda").to_string(),
        None => shared.scope.backend.clone(),
    };
    let identity = format!(
        "{}\n{backend}\n{}\n{arch}",
        found.fingerprint, shared.scope.target
    );
    let id = format!(
        "{}@{}",
        found.kernel,
        &content_hash(identity.as_bytes())[..12]
    );
    let search_key = super::shared_search::key(spec, found.spec_text, ir.text(), &backend, &arch);
    Ok(Version {
        id,
        ir,
        scope: Scope {
            backend,
            target: arch,
        },
        search_key,
        carry,
    })
}

/// Another spec file already defines this kernel name.
fn refuse_second_definition(registry: &Registry, kernel: &str, spec: &Path) -> Result<(), String> {
    let Some(other) = registry.jobs.values().find(|j| {
        j.daemon.kernel == kernel
            && j.record.spec_path != spec
            && !j.daemon.superseded
            && !j.removed
    }) else {
        return Ok(());
    };
    Err(format!(
        "{}: kernel {kernel} is already defined by {}; set `project` in one of them (gevo_optimize: PROJECT, or -DGEVO_PROJECT at configure)",
        spec.display(),
        other.record.spec_path.display()
    ))
}

/// The same kernel and content from a spec file that is gone (its
/// directory unwatched, a build directory replaced): the job moves to this
/// spec and keeps its progress.
fn move_to_spec(
    shared: &Shared,
    registry: &mut Registry,
    id: &str,
    found: &crate::watch::Found,
) -> Result<(), String> {
    let Some(job) = registry.jobs.get_mut(id) else {
        return Ok(());
    };
    if job.removed && job.record.spec_path != found.spec {
        job.record.spec_path = found.spec.clone();
        job.daemon.root = found.root.clone();
        shared
            .store
            .put_job(&job.record)
            .map_err(|e| e.to_string())?;
        (shared.store.put_daemon_job(&job.id, &job.daemon)).map_err(|e| e.to_string())?;
        tracing::info!(job = %id, spec = %found.spec.display(), "job moved to another spec file");
    }
    Ok(())
}

/// Makes the version's job: its record, engine and IR snapshot stored, its
/// entry in the registry. Returns whether it follows another build
/// directory's job of the same code (it then serves that one's variant).
fn create(
    shared: &Shared,
    config: &ServeConfig,
    registry: &mut Registry,
    found: &Found,
    version: Version,
    seeding: Option<Seeding>,
) -> Result<bool, String> {
    let versions = registry.versions(found.kernel);
    let last_version = versions.iter().map(|j| j.daemon.version).max();
    // A rebuild does not undo a client's pause of the current version.
    let paused = versions.first().is_some_and(|j| j.daemon.paused);
    // Another build directory's job of the same code: share its search.
    let follows = version
        .search_key
        .as_deref()
        .and_then(|key| registry.leader_for(key, found.kernel));
    let seeding = seeding.filter(|_| follows.is_none());
    let (engine, origin) = new_engine(config.evolve.clone(), config.jobs.seed, Vec::new(), seeding)
        .map_err(|e| e.to_string())?;
    let record = JobRecord::new(
        version.id.clone(),
        found.found.spec.clone(),
        found.spec_text,
        &version.ir,
        &version.scope,
        config.jobs.seed,
    );
    let daemon = DaemonJob {
        kernel: found.kernel.to_string(),
        version: last_version.map_or(1, |v| v + 1),
        root: found.found.root.clone(),
        fingerprint: found.fingerprint.to_string(),
        paused,
        superseded: false,
        origin,
        search_key: version.search_key,
        follows,
        tuned: found.tuned.clone(),
    };
    let id = version.id;
    let ir_snapshot = super::scan::snapshot_path(&shared.state_dir, &id);
    gevo_client::export::write_atomic_for(&ir_snapshot, record.ir_text.as_bytes(), shared.readers)
        .map_err(|e| e.to_string())?;
    (shared.store.create_daemon_job(&record, &engine, &daemon)).map_err(|e| e.to_string())?;
    if let Some(tuned) = &daemon.tuned {
        // The sweep that chose it, for the job's report.
        let key = crate::tune::sweep_key(&tuned.spec_hash, &shared.scope.backend);
        if let Ok(Some(sweep)) = shared.store.setting::<crate::tune::Sweep>(&key) {
            let job_key = crate::tune::job_sweep_key(&id);
            (shared.store.put_setting(&job_key, &sweep)).map_err(|e| e.to_string())?;
        }
    }
    match &daemon.follows {
        Some(leader) => {
            tracing::info!(job = %id, version = daemon.version, %leader, "new job, sharing the search of another build directory's job of the same code")
        }
        None => tracing::info!(job = %id, version = daemon.version, "new job"),
    }
    let follower = daemon.follows.is_some();
    let vtime = registry.entry_vtime();
    registry.jobs.insert(
        id.clone(),
        JobEntry::new(daemon, record, ir_snapshot, false, vtime),
    );
    Ok(follower)
}

/// Marks job `id` the current version of `kernel` from `spec` and the
/// others superseded. Returns whether the current version changed.
fn mark_current(
    shared: &Shared,
    registry: &mut Registry,
    kernel: &str,
    spec: &Path,
    id: &str,
) -> Result<bool, String> {
    let vtime = registry.entry_vtime();
    let mut changed = false;
    for job in registry.jobs.values_mut() {
        if job.daemon.kernel != kernel || job.record.spec_path != spec {
            continue;
        }
        let current = job.id == id;
        if job.daemon.superseded == current {
            changed = true;
            job.daemon.superseded = !current;
            (shared.store.put_daemon_job(&job.id, &job.daemon)).map_err(|e| e.to_string())?;
            if current {
                job.vtime = vtime;
            }
        }
        if current {
            job.removed = false;
            job.error = None;
        }
    }
    Ok(changed)
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
