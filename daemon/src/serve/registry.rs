//! What the daemon knows: its jobs (one per kernel version), the spec files
//! that could not make a job, the watch roots and the slots. Plain data
//! behind one mutex in [`super::Shared`]; the control loop, the runners and
//! the API handler each hold the lock only to read or update a few fields.

use gevo_client::proto::{BestRecord, GeneratedTests, JobInfo, JobState, ParetoPoint};
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
    pub finished: bool,
    pub error: Option<String>,
    /// The slot running it.
    pub running_on: Option<usize>,
    pub vtime: f64,
    pub generations: u64,
    pub evaluations: u64,
    pub validated: usize,
    pub best_cost: Option<f64>,
    /// The generation whose best train cost was the last improvement.
    pub last_improvement: Option<u64>,
    pub best: Option<(Validated, BestRecord)>,
    pub pareto: Vec<ParetoPoint>,
    /// The generated held-out tests, once a runner has started the job
    /// (`super::generated`).
    pub generated: Option<GeneratedTests>,
    /// The PTX hash of the best whose edit contributions this daemon run
    /// measured or tried (`super::explain`): never tried twice.
    pub explained: Option<String>,
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
            finished: false,
            error: None,
            running_on: None,
            vtime,
            generations: 0,
            evaluations: 0,
            validated: 0,
            best_cost: None,
            last_improvement: None,
            best: None,
            pareto: Vec::new(),
            generated: None,
            explained: None,
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

    pub fn runnable(&self) -> bool {
        self.error.is_none()
            && !self.daemon.superseded
            && !self.removed
            && !self.daemon.paused
            && !self.finished
    }

    /// Counters, best and Pareto front from the engine after a generation.
    pub fn absorb(&mut self, engine: &Engine) {
        let c = engine.counters();
        self.generations = engine.generations().saturating_sub(1);
        self.evaluations = c.evaluations;
        self.validated = engine.validated().len();
        let best_cost = engine.best_cost();
        if let Some(b) = best_cost {
            if self.best_cost.is_none_or(|old| b < old) {
                self.last_improvement = Some(self.generations);
            }
        }
        self.best_cost = best_cost;
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

    pub fn info(&self) -> JobInfo {
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
        }
    }
}

impl JobEntry {
    /// This job's line where it shares `leader`'s search: the leader's
    /// state and progress, and which kernel's search it is.
    pub fn info_sharing(&self, leader: &JobEntry) -> JobInfo {
        let own = self.info();
        JobInfo {
            kernel: own.kernel,
            job: own.job,
            version: own.version,
            spec: own.spec,
            message: Some(format!(
                "shares the search of {} (the same code, spec and target)",
                leader.daemon.kernel
            )),
            origin: None,
            ..leader.info()
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
    /// `<project>/<name>` for a kernel given either way.
    pub fn resolve(&self, kernel: &str) -> Lookup {
        let mut names: Vec<&str> = self
            .jobs
            .values()
            .map(|j| j.daemon.kernel.as_str())
            .chain(self.problems.values().map(|p| p.kernel.as_str()))
            .filter(|k| {
                *k == kernel || (!kernel.contains('/') && k.rsplit('/').next() == Some(kernel))
            })
            .collect();
        names.sort();
        names.dedup();
        match names.as_slice() {
            [] => Lookup::Unknown,
            [one] => Lookup::Found(one.to_string()),
            many => Lookup::Ambiguous(many.iter().map(|s| s.to_string()).collect()),
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
    pub fn infos_of(&self, kernel: &str) -> Vec<JobInfo> {
        let mut out = self.infos();
        out.retain(|j| j.kernel == kernel);
        out
    }

    /// Status lines for every job and every problem spec.
    pub fn infos(&self) -> Vec<JobInfo> {
        let mut out: Vec<JobInfo> = self
            .jobs
            .values()
            .map(|j| match self.leader_of(j) {
                Some(leader) => j.info_sharing(leader),
                None => j.info(),
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
