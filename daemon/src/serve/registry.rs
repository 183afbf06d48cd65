//! What the daemon knows: its jobs (one per kernel version), the spec files
//! that could not make a job, the watch roots and the slots. Plain data
//! behind one mutex in [`super::Shared`]; the control loop, the runners and
//! the API handler each hold the lock only to read or update a few fields.

use crate::config::serve::ScheduleSection;
use crate::sched::share::{Progress, Share};
use gevo_client::proto::{
    BestRecord, GeneratedTests, JobInfo, JobState, ParetoPoint, ReducedShare,
};
use gevo_search::evolve::{Engine, Validated};
use gevo_search::store::{DaemonJob, JobRecord};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct JobEntry {
    pub id: String,
    pub daemon: DaemonJob,
    pub record: JobRecord,
    /// The IR as the job was created (what its workers load).
    pub ir_snapshot: PathBuf,
    /// Its spec file is not (or no longer) among the scanned ones.
    pub removed: bool,
    /// The uid owning its spec file as last read (a symlink's maker): who
    /// may pause and resume it. `None` until a scan or start-up saw it.
    pub owner: Option<u32>,
    pub finished: bool,
    pub error: Option<String>,
    /// The slot running it.
    pub running_on: Option<usize>,
    pub vtime: f64,
    pub generations: u64,
    pub evaluations: u64,
    pub validated: usize,
    /// What its search found when, for its share of the slots.
    pub progress: Progress,
    pub best: Option<(Validated, BestRecord)>,
    pub pareto: Vec<ParetoPoint>,
    /// The generated held-out tests, once a runner has started the job
    /// (`super::generated`).
    pub generated: Option<GeneratedTests>,
    /// The PTX hash of the best whose edit contributions this daemon run
    /// measured or tried (`super::explain`): never tried twice.
    pub explained: Option<String>,
    /// The PTX hash of the best whose contributions this daemon run
    /// measured or tried on the job's GPU, in its slot (`super::explain_slot`).
    pub explained_on_slot: Option<String>,
    /// Its sweep chose another configuration of its `[tune]` spec: the next
    /// scan makes that the kernel's version, and this one waits.
    pub configuring: bool,
}

impl JobEntry {
    /// A job with no generation run in this process yet.
    pub fn new(
        daemon: DaemonJob,
        record: JobRecord,
        ir_snapshot: PathBuf,
        removed: bool,
        vtime: f64,
    ) -> JobEntry {
        JobEntry {
            id: record.id.clone(),
            daemon,
            record,
            ir_snapshot,
            removed,
            owner: None,
            finished: false,
            error: None,
            running_on: None,
            vtime,
            generations: 0,
            evaluations: 0,
            validated: 0,
            progress: Progress::default(),
            best: None,
            pareto: Vec::new(),
            generated: None,
            configuring: false,
            explained: None,
            explained_on_slot: None,
        }
    }

    pub fn state(&self) -> JobState {
        if self.error.is_some() {
            JobState::Error
        } else if self.daemon.superseded {
            JobState::Superseded
        } else if self.removed {
            JobState::Removed
        } else if self.daemon.paused {
            JobState::Paused
        } else if self.running_on.is_some() {
            JobState::Running
        } else if self.finished {
            JobState::Finished
        } else {
            JobState::Queued
        }
    }

    /// May be scheduled (whether or not a slot is free).
    /// Neither failed nor replaced nor gone: the job answers for its kernel.
    pub fn live(&self) -> bool {
        self.error.is_none() && !self.daemon.superseded && !self.removed
    }

    /// The hash of the spec file's content the job was made from: the
    /// record's, or for a `[tune]` spec's configured version the file's
    /// (the record holds the configured text).
    pub fn file_spec_hash(&self) -> &str {
        self.daemon
            .tuned
            .as_ref()
            .map_or(&self.record.spec_hash, |t| &t.spec_hash)
    }

    pub fn runnable(&self) -> bool {
        self.error.is_none()
            && !self.configuring
            && !self.daemon.superseded
            && !self.removed
            && !self.daemon.paused
            && !self.finished
    }

    /// Counters, best validated variant's generation and Pareto front from
    /// the engine after a generation (its train cost goes to `progress`
    /// with the generation's report).
    pub fn absorb(&mut self, engine: &Engine) {
        let c = engine.counters();
        self.generations = engine.generations().saturating_sub(1);
        self.evaluations = c.evaluations;
        self.validated = engine.validated().len();
        self.progress
            .validated(engine.best_validated().map(|v| v.generation));
        self.pareto = engine
            .archive()
            .iter()
            .filter_map(|m| {
                m.outcome.objectives().map(|(cost, error)| ParetoPoint {
                    cost,
                    error,
                    edits: m.patch.edits.len(),
                })
            })
            .collect();
    }

    /// Its share of the slots under `schedule`.
    pub fn share(&self, schedule: &ScheduleSection) -> Share {
        crate::sched::share::share(&self.progress, schedule)
    }

    /// Its status line; `schedule` tells whether its share is reduced.
    pub fn info(&self, schedule: &ScheduleSection) -> JobInfo {
        let share = self.share(schedule);
        let reduced_share = share
            .stalled_for
            .filter(|_| self.live() && !self.finished)
            .map(|generations_without| ReducedShare {
                weight: share.weight,
                generations_without,
                last_found: self.progress.last_found(),
            });
        JobInfo {
            kernel: self.daemon.kernel.clone(),
            job: self.id.clone(),
            version: self.daemon.version,
            spec: self.record.spec_path.clone(),
            state: self.state(),
            message: self.error.clone(),
            backend: self.record.backend.clone(),
            target: self.record.target.clone(),
            generations: self.generations,
            evaluations: self.evaluations,
            validated: self.validated,
            best_speedup: self.best.as_ref().map(|(v, _)| v.speedup),
            origin: self.daemon.origin.as_ref().map(|o| o.info.clone()),
            generated: self.generated.clone(),
            reduced_share,
            configuration: self
                .daemon
                .tuned
                .as_ref()
                .map(|t| gevo_model::spec::tune::describe(&t.configuration)),
        }
    }
}

impl JobEntry {
    /// This job's line where it shares `leader`'s search: the leader's
    /// state and progress, and which kernel's (and job's) search it is.
    pub fn info_sharing(&self, leader: &JobEntry, schedule: &ScheduleSection) -> JobInfo {
        let own = self.info(schedule);
        JobInfo {
            kernel: own.kernel,
            job: own.job,
            version: own.version,
            spec: own.spec,
            message: Some(format!(
                "shares the search of {} (job {}: the same code, spec and target)",
                leader.daemon.kernel, leader.id
            )),
            origin: None,
            ..leader.info(schedule)
        }
    }
}

/// A spec file that did not make a job, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    pub kernel: String,
    pub message: String,
    /// The spec and IR content the message is about.
    pub fingerprint: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Root {
    pub path: PathBuf,
    pub from_client: bool,
    /// The uids that added it over the socket (`gevo-client watch`), in
    /// order; none for the configuration's roots.
    pub added_by: Vec<u32>,
}

impl Root {
    /// A root from the configuration file or `--watch`.
    pub fn configured(path: PathBuf) -> Root {
        Root {
            path,
            from_client: false,
            added_by: Vec::new(),
        }
    }

    /// Whose specs it adopts: everyone's when the configuration, root or
    /// the daemon's user added it; else each of its adders' own (one walk
    /// each).
    pub fn adopts(&self) -> Vec<crate::watch::Adopts> {
        use crate::watch::Adopts;
        if !self.from_client || self.added_by.iter().any(|&uid| daemon_or_root(uid)) {
            return vec![Adopts::Everyone];
        }
        self.added_by
            .iter()
            .map(|&uid| Adopts::OnlyOf(uid))
            .collect()
    }

    /// Whether it adopts the specs `owner` owns.
    pub fn adopts_specs_of(&self, owner: u32) -> bool {
        self.adopts().iter().any(|a| match a {
            crate::watch::Adopts::Everyone => true,
            crate::watch::Adopts::OnlyOf(uid) => *uid == owner,
        })
    }
}

/// The daemon's own user (its effective uid).
pub fn daemon_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Root or the daemon's own user: who may do anything over the socket.
pub fn daemon_or_root(uid: u32) -> bool {
    uid == 0 || uid == daemon_uid()
}

/// The store's settings of the roots clients added: their paths (as every
/// gevod version reads them) and who added each.
const CLIENT_ROOTS: &str = "watch_roots";
const ADDED_BY: &str = "watch_roots_added_by";

/// The watch roots: the configuration's (`config`), then those clients
/// added (from the store) that the configuration does not name. A client
/// root a gevod from before roots had adders stored is taken as added by
/// its directory's owner; one that root or the daemon's user owns (or that
/// is gone), which could have been anyone's `watch`, is dropped with a
/// warning: a `gevo-client watch` adds it again.
pub fn load_roots(
    store: &gevo_search::store::Store,
    config: &[PathBuf],
) -> Result<Vec<Root>, gevo_search::store::StoreError> {
    use std::os::unix::fs::MetadataExt;
    let paths: Vec<PathBuf> = store.setting(CLIENT_ROOTS)?.unwrap_or_default();
    let added_by: BTreeMap<PathBuf, Vec<u32>> = store.setting(ADDED_BY)?.unwrap_or_default();
    let mut roots: Vec<Root> = config.iter().cloned().map(Root::configured).collect();
    for path in paths {
        if roots.iter().any(|r| r.path == path) {
            continue;
        }
        let adders = added_by.get(&path).cloned().or_else(|| {
            let owner = std::fs::metadata(&path).ok().map(|m| m.uid());
            let kept = owner.filter(|&uid| !daemon_or_root(uid));
            if kept.is_none() {
                tracing::warn!(root = %path.display(), "not watching a client's root stored without who added it: `gevo-client watch` adds it again");
            }
            kept.map(|uid| vec![uid])
        });
        if let Some(added_by) = adders.filter(|a| !a.is_empty()) {
            roots.push(Root {
                path,
                from_client: true,
                added_by,
            });
        }
    }
    Ok(roots)
}

/// Stores the roots clients added, with who added each.
pub fn save_client_roots(
    store: &gevo_search::store::Store,
    roots: &[Root],
) -> Result<(), gevo_search::store::StoreError> {
    let client: Vec<&Root> = roots.iter().filter(|r| r.from_client).collect();
    let paths: Vec<&PathBuf> = client.iter().map(|r| &r.path).collect();
    let added_by: BTreeMap<&PathBuf, &Vec<u32>> =
        client.iter().map(|r| (&r.path, &r.added_by)).collect();
    store.put_setting(CLIENT_ROOTS, &paths)?;
    store.put_setting(ADDED_BY, &added_by)
}

#[derive(Debug, Clone, Default)]
pub struct SlotState {
    /// Whether jobs may run here now (the GPU is idle).
    pub open: bool,
    /// Why not, when closed.
    pub reason: Option<String>,
    /// How long jobs held the slot before the current one took it.
    held: Duration,
    /// Since when the current job holds it.
    held_since: Option<Instant>,
}

impl SlotState {
    /// A job takes the slot.
    pub fn hold(&mut self, now: Instant) {
        self.held_since.get_or_insert(now);
    }

    /// The job gives the slot back.
    pub fn release(&mut self, now: Instant) {
        if let Some(since) = self.held_since.take() {
            self.held += now.saturating_duration_since(since);
        }
    }

    /// How long jobs have held the slot since the daemon started, up to now.
    pub fn held(&self, now: Instant) -> Duration {
        self.held
            + self
                .held_since
                .map_or(Duration::ZERO, |since| now.saturating_duration_since(since))
    }
}

#[derive(Debug, Default)]
pub struct Registry {
    pub jobs: BTreeMap<String, JobEntry>,
    /// By spec path.
    pub problems: BTreeMap<PathBuf, Problem>,
    pub roots: Vec<Root>,
    pub slots: Vec<SlotState>,
    /// Spec files seen with content that has not settled yet, with how
    /// long it must still stay the same, as of `scanned`.
    pub pending: BTreeMap<PathBuf, Duration>,
    /// When the roots were last scanned.
    pub scanned: Option<Instant>,
    /// Jobs whose best the explainer is to measure, in order, with why
    /// (`super::explain`).
    pub explain_queue: std::collections::VecDeque<(String, super::explain::Why)>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Lookup {
    Found(String),
    Unknown,
    Ambiguous(Vec<String>),
}

impl Registry {
    /// `<project>/<name>` for a kernel given either way. A `<name>` that
    /// several projects have names the one whose spec is still watched
    /// when the others' jobs are all removed (an unwatched build's, a
    /// deleted spec's): those are kept for their history, not to make a
    /// name ambiguous; their full names still find them.
    pub fn resolve(&self, kernel: &str) -> Lookup {
        let matches = |k: &str| {
            k == kernel || (!kernel.contains('/') && k.rsplit('/').next() == Some(kernel))
        };
        // Each matching name, and whether a job or problem of it is present.
        let mut names: BTreeMap<&str, bool> = BTreeMap::new();
        let jobs = self
            .jobs
            .values()
            .map(|j| (j.daemon.kernel.as_str(), !j.removed));
        let problems = self.problems.values().map(|p| (p.kernel.as_str(), true));
        for (name, present) in jobs.chain(problems).filter(|(k, _)| matches(k)) {
            *names.entry(name).or_default() |= present;
        }
        let present: Vec<&str> = names.iter().filter(|(_, p)| **p).map(|(n, _)| *n).collect();
        match (names.len(), present.as_slice()) {
            (0, _) => Lookup::Unknown,
            (1, _) => Lookup::Found(names.keys().next().expect("one").to_string()),
            (_, [one]) => Lookup::Found(one.to_string()),
            _ => Lookup::Ambiguous(names.keys().map(|s| s.to_string()).collect()),
        }
    }

    /// A kernel's jobs: the current version first (content reverted to an
    /// older version makes that one current again), then the superseded
    /// ones, newest first.
    pub fn versions(&self, kernel: &str) -> Vec<&JobEntry> {
        let mut v: Vec<&JobEntry> = self
            .jobs
            .values()
            .filter(|j| j.daemon.kernel == kernel)
            .collect();
        v.sort_by_key(|j| (j.daemon.superseded, std::cmp::Reverse(j.daemon.version)));
        v
    }

    /// Status lines for one kernel's jobs (each version, and a problem
    /// spec of that kernel).
    pub fn infos_of(&self, kernel: &str, schedule: &ScheduleSection) -> Vec<JobInfo> {
        let mut out = self.infos(schedule);
        out.retain(|j| j.kernel == kernel);
        out
    }

    /// Status lines for every job and every problem spec; `schedule`
    /// tells whose share is reduced.
    pub fn infos(&self, schedule: &ScheduleSection) -> Vec<JobInfo> {
        let mut out: Vec<JobInfo> = self
            .jobs
            .values()
            // A follower shows its leader's search while it answers for
            // its kernel; removed or replaced, its own state.
            .map(|j| match self.leader_of(j) {
                Some(leader) if j.live() => j.info_sharing(leader, schedule),
                _ => j.info(schedule),
            })
            .collect();
        out.extend(self.problems.iter().map(|(path, p)| JobInfo {
            kernel: p.kernel.clone(),
            job: String::new(),
            version: 0,
            spec: path.clone(),
            state: JobState::Error,
            message: Some(p.message.clone()),
            backend: String::new(),
            target: String::new(),
            generations: 0,
            evaluations: 0,
            validated: 0,
            best_speedup: None,
            origin: None,
            generated: None,
            reduced_share: None,
            configuration: None,
        }));
        out.sort_by(|a, b| a.kernel.cmp(&b.kernel).then(b.version.cmp(&a.version)));
        out
    }

    /// The next job for slot `slot`, by the scheduler's policy.
    pub fn pick(&self, slot: usize) -> Option<String> {
        if !self.slots.get(slot).is_some_and(|s| s.open) {
            return None;
        }
        let candidates: Vec<crate::sched::Candidate> = self
            .jobs
            .values()
            .filter(|j| j.runnable() && j.running_on.is_none() && self.leader_of(j).is_none())
            .map(|j| crate::sched::Candidate {
                id: &j.id,
                vtime: j.vtime,
            })
            .collect();
        crate::sched::pick(&candidates).map(str::to_string)
    }

    /// Virtual time for a job becoming runnable now.
    pub fn entry_vtime(&self) -> f64 {
        crate::sched::entry_vtime(self.jobs.values().filter(|j| j.runnable()).map(|j| j.vtime))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::watch::Adopts;
    use std::os::unix::fs::chown;

    #[test]
    fn client_roots_keep_who_added_them_and_old_ones_go_to_their_owner() {
        if daemon_uid() != 0 {
            println!("skipped: directories of other owners need root to make");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let store = gevo_search::store::Store::open(&dir.path().join("state")).unwrap();
        let theirs = dir.path().join("theirs");
        let roots_own = dir.path().join("root-owned");
        let configured = dir.path().join("configured");
        for d in [&theirs, &roots_own, &configured] {
            std::fs::create_dir(d).unwrap();
        }
        chown(&theirs, Some(4242), None).unwrap();
        // As a gevod from before adders were stored left them: paths only.
        let old = vec![theirs.clone(), roots_own.clone(), configured.clone()];
        store.put_setting(CLIENT_ROOTS, &old).unwrap();
        let mut roots = load_roots(&store, std::slice::from_ref(&configured)).unwrap();
        let added = |path: &PathBuf, uids: &[u32]| Root {
            path: path.clone(),
            from_client: true,
            added_by: uids.to_vec(),
        };
        // Root's directory could have been anyone's `watch`: dropped.
        assert_eq!(
            roots,
            [
                Root::configured(configured.clone()),
                added(&theirs, &[4242])
            ]
        );
        assert_eq!(roots[0].adopts(), [Adopts::Everyone]);
        assert_eq!(roots[1].adopts(), [Adopts::OnlyOf(4242)]);
        assert!(roots[1].adopts_specs_of(4242) && !roots[1].adopts_specs_of(4343));
        // Stored with who added them, they come back so, whoever owns the
        // directory by then.
        roots[1].added_by.push(4343);
        roots.push(added(&roots_own, &[4242, 0]));
        save_client_roots(&store, &roots).unwrap();
        chown(&theirs, Some(4343), None).unwrap();
        let loaded = load_roots(&store, std::slice::from_ref(&configured)).unwrap();
        assert_eq!(loaded, roots);
        assert_eq!(
            loaded[1].adopts(),
            [Adopts::OnlyOf(4242), Adopts::OnlyOf(4343)]
        );
        assert_eq!(loaded[2].adopts(), [Adopts::Everyone]);
    }
}
