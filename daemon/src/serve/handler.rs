//! What each API request does, against the shared registry.

use super::registry::{daemon_or_root, Lookup};
use super::{rights, Shared};
use crate::api::limits::{quote, quote_path};
use crate::api::{Access, Handler, Peer};
use gevo_client::proto::{
    Best, Command, ErrorCode, Pareto, PatchFile, Reply, ReportPage, Request, Response, SlotInfo,
    Status, WatchRoot,
};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

mod explain;

pub struct ApiHandler {
    pub shared: Arc<Shared>,
}

impl Handler for ApiHandler {
    fn access(&self) -> Access {
        let api = self.shared.config().api;
        Access::own(api.allowed_uids, api.allowed_gids)
    }

    fn handle(&self, request: Request, peer: &Peer) -> Response {
        tracing::debug!(?request.command, uid = peer.uid, "request");
        match self.command(request.command, peer.uid) {
            Ok(reply) => Response::ok(reply),
            Err((code, message)) => Response::error(code, message),
        }
    }
}

type Outcome = Result<Reply, (ErrorCode, String)>;

/// The store's setting of the directories a user unwatched.
const UNWATCHED: &str = "unwatched_roots";
/// Who unwatched each of them.
const UNWATCHED_BY: &str = "unwatched_roots_by";

impl ApiHandler {
    /// `uid`: the requesting peer's, whose rights the request has
    /// (`super::rights`).
    fn command(&self, command: Command, uid: u32) -> Outcome {
        match command {
            Command::Status => Ok(Reply::Status(self.status())),
            Command::Jobs { kernel: None } => {
                let schedule = self.shared.config().schedule;
                Ok(Reply::Jobs(self.shared.registry().infos(&schedule)))
            }
            Command::Jobs {
                kernel: Some(kernel),
            } => {
                let kernel = self.resolve(&kernel)?;
                let schedule = self.shared.config().schedule;
                Ok(Reply::Jobs(
                    self.shared.registry().infos_of(&kernel, &schedule),
                ))
            }
            Command::Best {
                kernel,
                arch,
                spec,
                spec_hash,
            } => {
                let spec = spec.as_deref().map(|s| (s, spec_hash.as_deref()));
                self.best(&kernel, arch.as_deref(), spec)
            }
            Command::Patch { kernel } => self.patch(&kernel),
            Command::Pareto { kernel } => self.pareto(&kernel),
            Command::Explain { kernel } => self.explain(&kernel),
            Command::Report { kernel } => self.report(&kernel),
            Command::Watch { dir, from_build } => self.watch(dir, true, from_build, uid),
            Command::Unwatch { dir } => self.watch(dir, false, false, uid),
            Command::Pause { kernel } => self.pause(kernel.as_deref(), true, uid),
            Command::Resume { kernel } => self.pause(kernel.as_deref(), false, uid),
            Command::Shutdown => {
                rights::may_run_the_daemon(uid, "shut gevod down")?;
                self.shared.shutdown.store(true, Ordering::Relaxed);
                Ok(Reply::Done("gevod is shutting down".into()))
            }
        }
    }

    fn status(&self) -> Status {
        let schedule = self.shared.config().schedule;
        let registry = self.shared.registry();
        let now = std::time::Instant::now();
        let slots = self
            .shared
            .slots
            .iter()
            .enumerate()
            .map(|(i, slot)| {
                let running = registry.jobs.values().find(|j| j.running_on == Some(i));
                let state = match (running, &registry.slots[i].reason) {
                    (Some(j), _) => format!("running {}", j.id),
                    (None, Some(why)) => format!("waiting: {why}"),
                    (None, None) => "idle".into(),
                };
                SlotInfo {
                    name: slot.name(),
                    state,
                    held_s: registry.slots[i].held(now).as_secs_f64(),
                }
            })
            .collect();
        Status {
            pid: std::process::id(),
            daemon_version: env!("CARGO_PKG_VERSION").into(),
            uptime_s: self.shared.started.elapsed().as_secs_f64(),
            socket: self.shared.socket.clone(),
            state_dir: self.shared.state_dir.clone(),
            watch_roots: registry
                .roots
                .iter()
                .map(|r| WatchRoot {
                    path: r.path.clone(),
                    source: if r.from_client { "client" } else { "config" }.into(),
                    exists: r.path.is_dir(),
                })
                .collect(),
            slots,
            jobs: registry.infos(&schedule),
        }
    }

    fn resolve(&self, kernel: &str) -> Result<String, (ErrorCode, String)> {
        match self.shared.registry().resolve(kernel) {
            Lookup::Found(k) => Ok(k),
            Lookup::Unknown => Err((
                ErrorCode::UnknownKernel,
                format!("no kernel named {} (see gevo-client jobs)", quote(kernel)),
            )),
            Lookup::Ambiguous(names) => Err((
                ErrorCode::AmbiguousKernel,
                format!("{kernel} is ambiguous; name one of: {}", names.join(", ")),
            )),
        }
    }

    /// The current version's validated variant (for `arch`): a variant
    /// evolved from other code is never the answer for this code, so a
    /// new version has none until it validates its own (its seeds carried
    /// from the previous version included) and the build uses the original.
    /// `spec`: the asking build's spec file, with its content's hash as
    /// the build sees it.
    fn best(
        &self,
        kernel: &str,
        arch: Option<&str>,
        spec: Option<(&Path, Option<&str>)>,
    ) -> Outcome {
        let spec_hash = spec.and_then(|(_, h)| h);
        let spec = spec.map(|(s, _)| s);
        let kernel = match self.resolve(kernel) {
            Ok(kernel) => kernel,
            Err((ErrorCode::UnknownKernel, message)) => {
                return Err(match spec.and_then(|s| self.spec_note(s)) {
                    Some((pending, note)) => {
                        let code = if pending {
                            ErrorCode::Pending
                        } else {
                            ErrorCode::UnknownKernel
                        };
                        (code, format!("{message}; {note}"))
                    }
                    None => (ErrorCode::UnknownKernel, message),
                })
            }
            Err(e) => return Err(e),
        };
        // A new content of the build's spec that has not made a version
        // yet: settling, or changed since the daemon last looked.
        let pending = spec
            .filter(|s| self.shared.registry().pending.contains_key(*s))
            .and_then(|s| self.spec_note(s))
            .or_else(|| self.unseen_change(&kernel, spec?, spec_hash?));
        let (found, progress, removed) = {
            let registry = self.shared.registry();
            let versions = registry.versions(&kernel);
            let found = versions.iter().take(1).find_map(|j| {
                registry
                    .best_of(j)
                    .filter(|(_, r)| arch.is_none_or(|a| r.target == a))
            });
            let newest = versions.first();
            (
                found,
                newest.map_or(String::new(), |j| progress(j)),
                newest.is_some_and(|j| j.removed),
            )
        };
        if let Some((v, record)) = found {
            return Ok(Reply::Best(Best { record, ptx: v.ptx }));
        }
        // The kernel's jobs are removed and the build's spec is in no
        // watched directory (the build was unwatched): that is the news,
        // not the removed job's progress.
        if let (true, Some((false, note))) = (removed, spec.and_then(|s| self.spec_note(s))) {
            return Err((ErrorCode::UnknownKernel, format!("{kernel}: {note}")));
        }
        let for_arch = arch.map_or(String::new(), |a| format!(" for {}", quote(a)));
        let message = format!("{kernel}: no validated variant{for_arch} yet{progress}");
        Err(match pending {
            Some((_, note)) => (ErrorCode::Pending, format!("{message}; {note}")),
            None => (ErrorCode::NoValidated, message),
        })
    }

    fn pareto(&self, kernel: &str) -> Outcome {
        let kernel = self.resolve(kernel)?;
        let registry = self.shared.registry();
        let job = registry.versions(&kernel).into_iter().next().ok_or((
            ErrorCode::UnknownKernel,
            format!("{kernel} has no job: see gevo-client status"),
        ))?;
        Ok(Reply::Pareto(Pareto {
            kernel: kernel.clone(),
            job: job.id.clone(),
            points: job.pareto.clone(),
        }))
    }

    /// The HTML report of the kernel's newest version with a validated
    /// variant, else of its newest version.
    fn report(&self, kernel: &str) -> Outcome {
        let kernel = self.resolve(kernel)?;
        let (id, spec_path, root, generated) = {
            let registry = self.shared.registry();
            let versions = registry.shown_versions(&kernel);
            let job = versions
                .iter()
                .find(|j| j.best.is_some())
                .or(versions.first())
                .ok_or((
                    ErrorCode::UnknownKernel,
                    format!("{kernel} has no job: see gevo-client status"),
                ))?;
            (
                job.id.clone(),
                job.record.spec_path.clone(),
                job.daemon.root.clone(),
                job.generated.clone(),
            )
        };
        let html = report_html(
            &self.shared.store,
            &id,
            &spec_path,
            &root,
            generated.as_ref(),
        )
        .map_err(|e| (ErrorCode::Internal, format!("{id}: {e}")))?;
        Ok(Reply::Report(ReportPage {
            kernel,
            job: id,
            html,
        }))
    }

    /// The minimized patch of the current version's validated variant.
    fn patch(&self, kernel: &str) -> Outcome {
        let kernel = self.resolve(kernel)?;
        let registry = self.shared.registry();
        let versions = registry.versions(&kernel);
        let Some((job, (validated, _))) = versions
            .first()
            .map(|j| registry.shown(j))
            .and_then(|j| j.best.as_ref().map(|b| (j, b)))
        else {
            return Err((
                ErrorCode::NoValidated,
                format!("{kernel}: no validated variant yet, so no patch"),
            ));
        };
        Ok(Reply::Patch(PatchFile {
            kernel: kernel.clone(),
            job: job.id.clone(),
            speedup: validated.speedup,
            backend: job.record.backend.clone(),
            patch: validated.minimized.to_json(),
        }))
    }

    /// What the daemon knows of a spec file that names no job (a build's
    /// `best --spec`): `(true, why)` while it is pending (its content has
    /// not settled, or no scan has seen it yet), `(false, why)` when it
    /// will not make a job as it is. Only paths and the daemon's own
    /// messages: never a byte of the file.
    fn spec_note(&self, spec: &Path) -> Option<(bool, String)> {
        use std::os::unix::fs::MetadataExt;
        // Whose it is (a symlink's maker), for the roots that adopt it.
        let owner = std::fs::symlink_metadata(spec).ok().map(|m| m.uid());
        let registry = self.shared.registry();
        let settle = self.shared.config().daemon.settle;
        let shown = quote_path(spec);
        if let Some(wait) = registry.pending.get(spec) {
            return Some((
                true,
                format!(
                    "pending: gevod saw {shown} change and takes it once it and its IR have stayed \
                     the same for {:.1} s (settle); {:.1} s to go at the last scan: build again then",
                    settle.as_secs_f64(),
                    wait.as_secs_f64()
                ),
            ));
        }
        if let Some(problem) = registry.problems.get(spec) {
            return Some((false, format!("{shown}: {}", problem.message)));
        }
        let dir = spec.parent().unwrap_or(spec);
        let covering: Vec<_> = registry
            .roots
            .iter()
            .filter(|r| spec.starts_with(&r.path))
            .collect();
        let adopted = owner.is_none_or(|owner| covering.iter().any(|r| r.adopts_specs_of(owner)));
        if let (Some(root), false) = (covering.first(), adopted) {
            return Some((
                false,
                format!(
                    "{shown} is not taken: gevod watches {} for the specs of the user who added it \
                     only (`gevo-client watch {}` as the spec's owner)",
                    quote_path(&root.path),
                    quote_path(dir)
                ),
            ));
        }
        let Some(root) = covering.first() else {
            drop(registry);
            // Configure does not undo a user's unwatch: say how to.
            let unwatched: Vec<PathBuf> = self
                .shared
                .store
                .setting(UNWATCHED)
                .ok()
                .flatten()
                .unwrap_or_default();
            let how = match unwatched.iter().find(|d| spec.starts_with(d)) {
                Some(d) => format!(
                    "{} was unwatched with `gevo-client unwatch`; `gevo-client watch {}` watches it again",
                    quote_path(d),
                    quote_path(d)
                ),
                None => format!("re-run cmake, or `gevo-client watch {}`", quote_path(dir)),
            };
            return Some((
                false,
                format!("{shown} is in no directory gevod watches ({how})"),
            ));
        };
        if registry.jobs.values().any(|j| j.record.spec_path == spec) {
            return None;
        }
        Some((
            true,
            format!(
                "pending: gevod watches {} but has not scanned {shown} yet (it does once file \
                 events go quiet): build again in a few seconds",
                quote_path(&root.path)
            ),
        ))
    }

    /// When the build's spec (`hash` as it sees it) is no content any
    /// version of `kernel` from that file was made of: the daemon has not
    /// looked at the file since it changed (its scan comes once file events
    /// go quiet).
    fn unseen_change(&self, kernel: &str, spec: &Path, hash: &str) -> Option<(bool, String)> {
        let registry = self.shared.registry();
        let versions = registry.versions(kernel);
        let from_this_file: Vec<_> = versions
            .iter()
            .filter(|j| j.record.spec_path == spec)
            .collect();
        if from_this_file.is_empty() || from_this_file.iter().any(|j| j.file_spec_hash() == hash) {
            return None;
        }
        Some((
            true,
            format!(
                "pending: {} changed since gevod last read it, and it takes the change at its                  next scan (once file events go quiet): build again in a few seconds",
                quote_path(spec)
            ),
        ))
    }

    /// Watch or unwatch `dir` for `uid`. A directory the user unwatched is
    /// remembered (the store's `unwatched_roots`, with who unwatched it)
    /// until a `watch` that is not `from_build`: a build's registration
    /// (CMake's configure) leaves it unwatched, when that user or an
    /// administrator unwatched it. Who may add and remove which roots, and
    /// whose specs a root adopts: `super::rights`, `Root::adopts`.
    fn watch(&self, dir: PathBuf, add: bool, from_build: bool, uid: u32) -> Outcome {
        if !dir.is_absolute() {
            return Err((
                ErrorCode::BadDirectory,
                format!("{}: give an absolute path", quote_path(&dir)),
            ));
        }
        if add {
            rights::may_add_root(uid, &dir)?;
        }
        if add && !dir.is_dir() {
            return Err((
                ErrorCode::BadDirectory,
                format!("{}: not a directory the daemon can see", quote_path(&dir)),
            ));
        }
        let store = &self.shared.store;
        let internal = |e: gevo_search::store::StoreError| (ErrorCode::Internal, e.to_string());
        let mut unwatched: Vec<PathBuf> = store
            .setting(UNWATCHED)
            .map_err(internal)?
            .unwrap_or_default();
        let mut unwatched_by: BTreeMap<PathBuf, u32> = store
            .setting(UNWATCHED_BY)
            .map_err(internal)?
            .unwrap_or_default();
        // An unwatch from before who unwatched was stored counts for all.
        let unwatched_for_them = unwatched.contains(&dir)
            && unwatched_by
                .get(&dir)
                .is_none_or(|&by| by == uid || daemon_or_root(by));
        let mut registry = self.shared.registry();
        let watched = registry.roots.iter().any(|r| r.path == dir);
        if add && from_build && !watched && unwatched_for_them {
            return Ok(Reply::Done(format!(
                "not watching {}: it was unwatched with `gevo-client unwatch`; \
                 `gevo-client watch {}` watches it again",
                dir.display(),
                dir.display()
            )));
        }
        let (message, removed) = rights::change_roots(&mut registry.roots, &dir, add, uid)?;
        let roots = registry.roots.clone();
        drop(registry);
        if add {
            unwatched.retain(|d| d != &dir);
            unwatched_by.remove(&dir);
        } else if removed {
            if !unwatched.contains(&dir) {
                unwatched.push(dir.clone());
            }
            unwatched_by.insert(dir.clone(), uid);
        }
        super::registry::save_client_roots(store, &roots).map_err(internal)?;
        store.put_setting(UNWATCHED, &unwatched).map_err(internal)?;
        store
            .put_setting(UNWATCHED_BY, &unwatched_by)
            .map_err(internal)?;
        self.shared.rescan.store(true, Ordering::Relaxed);
        Ok(Reply::Done(message))
    }

    /// Pauses or resumes one kernel's jobs (its spec's owner may), or
    /// every job (the daemon's user or root may), for `uid`.
    fn pause(&self, kernel: Option<&str>, pause: bool, uid: u32) -> Outcome {
        let kernel = kernel.map(|k| self.resolve(k)).transpose()?;
        let mut registry = self.shared.registry();
        match &kernel {
            None => rights::may_run_the_daemon(
                uid,
                &format!("{} every job", if pause { "pause" } else { "resume" }),
            )?,
            Some(k) => rights::may_control(
                uid,
                k,
                registry
                    .jobs
                    .values()
                    .filter(|j| !j.daemon.superseded && &j.daemon.kernel == k),
            )?,
        }
        let mut changed = Vec::new();
        for job in registry.jobs.values_mut() {
            if job.daemon.superseded || kernel.as_ref().is_some_and(|k| &job.daemon.kernel != k) {
                continue;
            }
            if job.daemon.paused != pause {
                job.daemon.paused = pause;
                self.shared
                    .store
                    .put_daemon_job(&job.id, &job.daemon)
                    .map_err(|e| (ErrorCode::Internal, e.to_string()))?;
                changed.push(job.id.clone());
            }
        }
        self.shared.wake.notify_all();
        let verb = if pause { "paused" } else { "resumed" };
        Ok(Reply::Done(if changed.is_empty() {
            format!("nothing to do: no job to be {verb}")
        } else {
            format!("{verb} {}", changed.join(", "))
        }))
    }
}

/// A job's HTML report, its CUDA sources read as the spec's owner; the
/// generated tests the job's entry holds are listed, not derived again.
pub fn report_html(
    store: &gevo_search::store::Store,
    id: &str,
    spec_path: &std::path::Path,
    root: &std::path::Path,
    generated: Option<&gevo_client::proto::GeneratedTests>,
) -> Result<String, String> {
    let reader =
        gevo_model::access::Reader::for_spec(spec_path, root).map_err(|e| e.to_string())?;
    let known = generated.map(|g| {
        g.kept
            .iter()
            .map(|t| crate::report::GeneratedTest {
                test: t.test.clone(),
                why: t.why.clone(),
            })
            .collect()
    });
    let data = crate::report::gather_with(store, id, reader, known).map_err(|e| e.to_string())?;
    Ok(crate::report::render(&data))
}

/// A version's progress as `best` says it when nothing is validated:
/// ` (version 1 is running at generation 2, target sm_90)`; a removed one
/// says why it no longer runs.
fn progress(j: &super::registry::JobEntry) -> String {
    if j.removed && j.error.is_none() && !j.daemon.superseded {
        return format!(
            " (version {} is removed: its spec {} is gone or in no directory gevod watches; it \
             stopped at generation {})",
            j.daemon.version,
            quote_path(&j.record.spec_path),
            j.generations
        );
    }
    format!(
        " (version {} is {:?} at generation {}, target {})",
        j.daemon.version,
        j.state(),
        j.generations,
        j.record.target
    )
    .to_lowercase()
}
