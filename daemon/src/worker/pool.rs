//! The engine side of the workers: a pool of `gevod eval-worker` processes,
//! one request in flight each. A worker that exits, answers garbage or runs
//! past the timeout is killed and replaced; the request it held fails with
//! the reason, and every other request goes on. Workers started as Slurm
//! steps ([`Launcher`]) may also vanish with their node: the request such a
//! worker held is tried again on another one, and a step that cannot be
//! replaced leaves the pool while the others go on.

mod run;

use super::launch::Launcher;
use super::process::{truncate, Event, State, Worker};
use super::{Request, Response, PROTOCOL};
use crate::config::CpuPriority;
use gevo_ir::Patch;
use gevo_model::assessment::Assessment;
use gevo_model::spec::{Spec, TestSet};
use gevo_model::utilization::Spent;
use gevo_search::evolve::{Backend, BackendError, Build, Scope};
use run::Batch;
pub use run::{Carry, Feed, Placement, Waker};
use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How to start workers and how long to wait for them.
#[derive(Debug, Clone)]
pub struct PoolOptions {
    pub program: PathBuf,
    pub args: Vec<OsString>,
    /// Extra environment for the workers.
    pub env: Vec<(OsString, OsString)>,
    pub workers: usize,
    /// A request (one compile, or one variant on one test set) taking longer
    /// than this kills its worker.
    pub timeout: Duration,
    /// A worker must greet within this.
    pub start_timeout: Duration,
    /// Where the workers run.
    pub launcher: Launcher,
    /// Each worker needs a GPU of its own (a Slurm step asks for one).
    pub gpu: bool,
    /// Arguments for particular workers: worker `i` gets `slot_args[i]`
    /// after `args` (one GPU worker per device); empty: none.
    pub slot_args: Vec<Vec<OsString>>,
    /// Keep a started spare beside each worker, swapped in when the worker
    /// must be replaced: a GPU worker's start uploads every test and makes
    /// the references, seconds in which its GPU would measure nothing.
    pub standby: bool,
    /// The workers' CPU priority (`[workers] cpu`).
    pub cpu: CpuPriority,
}

impl PoolOptions {
    /// Requests in flight per worker: the launcher's.
    pub fn pipeline_depth(&self) -> usize {
        self.launcher.pipeline_depth()
    }

    /// `workers` local processes of `program args`, no GPU, none with
    /// arguments of its own.
    pub fn local(
        program: PathBuf,
        args: Vec<OsString>,
        workers: usize,
        timeout: Duration,
        start_timeout: Duration,
    ) -> Self {
        PoolOptions {
            program,
            args,
            env: Vec::new(),
            workers,
            timeout,
            start_timeout,
            launcher: Launcher::Local,
            gpu: false,
            slot_args: Vec::new(),
            standby: false,
            cpu: CpuPriority::Normal,
        }
    }
}

/// A pool of evaluation worker processes; a [`Backend`].
pub struct WorkerPool {
    options: PoolOptions,
    scope: Scope,
    test_set_hashes: [(TestSet, String); 4],
    workers: Vec<Worker>,
    events: Receiver<Event>,
    sender: Sender<Event>,
    next_serial: u64,
    next_request: u64,
    stop: Arc<AtomicBool>,
    /// Workers replaced after a crash, garbage, a timeout or an exit.
    pub respawns: u64,
    /// Seconds workers took from their start to their greeting, summed (a
    /// GPU worker uploads its tests and makes the references meanwhile).
    pub startup_s: f64,
    /// Seconds started workers held no request, summed over them (counted
    /// when each takes its next): for GPU workers, the time their GPUs
    /// waited for the search rather than for their own worker.
    pub idle_s: f64,
    /// What the workers that greeted said their start took, summed (GPU
    /// workers; spares included); the GPU backend takes it per generation.
    pub start_parts: gevo_model::utilization::StartUp,
    /// Workers (Slurm steps) that vanished or could not be replaced.
    pub lost: u64,
    /// Only the worker started with this slot takes requests ([`pin`]).
    pinned: Option<usize>,
    /// Started workers that take no requests until one replaces a worker
    /// of their slot (`standby`).
    spares: Vec<Worker>,
    /// Replacements that were a spare already greeted.
    pub standby_swaps: u64,
    /// What the workers said `assess` requests cost, since the last
    /// [`take_assess_spent`](Self::take_assess_spent).
    assess_spent: Spent,
    /// Requests a run ended with unanswered that its feed let outlive it
    /// ([`Feed::may_carry`]): the next run takes them first.
    carried: Vec<run::CarriedRequest>,
    /// PTX hashes the search knows, in the order noted: each worker's
    /// search compile requests carry what it has not been sent yet
    /// ([`note_known`](Self::note_known)).
    known: super::known::KnownLog,
}

impl WorkerPool {
    /// Starts the workers and waits for their greetings; `scope` is what
    /// they measure (checked against each worker's greeting); `stop`
    /// abandons a batch when set.
    pub fn start(
        options: PoolOptions,
        spec: &Spec,
        scope: Scope,
        stop: Arc<AtomicBool>,
    ) -> Result<Self, BackendError> {
        Self::launch(options, spec, scope, stop)?.ready()
    }

    /// Starts the workers, and their spares where the pool keeps them,
    /// all at once, without waiting for them: [`ready`](Self::ready)
    /// waits. Two pools launched before either waits start side by side.
    pub fn launch(
        options: PoolOptions,
        spec: &Spec,
        scope: Scope,
        stop: Arc<AtomicBool>,
    ) -> Result<Self, BackendError> {
        let (sender, events) = mpsc::channel();
        let test_set_hashes = [
            TestSet::Train,
            TestSet::Heldout,
            TestSet::All,
            TestSet::Generated,
        ]
        .map(|s| (s, spec.test_set_hash(s)));
        let mut pool = WorkerPool {
            options,
            scope,
            test_set_hashes,
            workers: Vec::new(),
            events,
            sender,
            next_serial: 0,
            next_request: 0,
            stop,
            respawns: 0,
            startup_s: 0.0,
            idle_s: 0.0,
            start_parts: Default::default(),
            lost: 0,
            pinned: None,
            spares: Vec::new(),
            carried: Vec::new(),
            known: Default::default(),
            standby_swaps: 0,
            assess_spent: Spent::default(),
        };
        for slot in 0..pool.options.workers.max(1) {
            let w = pool.spawn(slot)?;
            pool.workers.push(w);
        }
        if pool.options.standby {
            for slot in 0..pool.workers.len() {
                pool.start_spare(slot);
            }
        }
        Ok(pool)
    }

    /// Waits for every worker's greeting, so a broken spec fails here,
    /// once, and for the spares' (which started beside them: a GPU
    /// worker's start takes seconds, and its spare's no longer follows it).
    /// Idle time counts from here: what a worker waited for the others to
    /// start is not the search's.
    pub fn ready(mut self) -> Result<Self, BackendError> {
        self.run(Vec::new())?;
        self.settle_spares();
        self.idle_s = 0.0;
        for w in &mut self.workers {
            if let State::Idle(since) = &mut w.state {
                *since = Instant::now();
            }
        }
        Ok(self)
    }

    /// What `assess` requests cost the workers since the last call (the
    /// compile workers' generated tests, for the GPU backend's utilization).
    pub fn take_assess_spent(&mut self) -> Spent {
        std::mem::take(&mut self.assess_spent)
    }

    /// Starts a spare for worker slot `slot`; one that cannot start is
    /// left out (a replacement is then started as without standby).
    fn start_spare(&mut self, slot: usize) {
        match self.spawn(slot) {
            Ok(spare) => self.spares.push(spare),
            Err(e) => tracing::warn!("no standby worker: {e}"),
        }
    }

    /// Waits (up to the start timeout) for the spares' greetings.
    fn settle_spares(&mut self) {
        let deadline = Instant::now() + self.options.start_timeout;
        while self
            .spares
            .iter()
            .any(|s| matches!(s.state, State::Starting(_)))
        {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.events.recv_timeout(left) {
                Ok(event) => {
                    self.spare_event(&event);
                }
                Err(_) => return,
            }
        }
    }

    /// A spare's event: its greeting makes it ready; anything else (it
    /// died, or spoke before a request) ends it. False when the event is
    /// not a spare's.
    fn spare_event(&mut self, event: &Event) -> bool {
        let serial = match event {
            Event::Line(serial, _) | Event::Closed(serial) => *serial,
            Event::Wake => return false,
        };
        let Some(i) = self.spares.iter().position(|s| s.serial == serial) else {
            return false;
        };
        // A greeting as expected: its start-up parts, if it has some.
        let greeting = match event {
            Event::Line(_, line) => match serde_json::from_str(line) {
                Ok(Response::Ready {
                    protocol,
                    scope,
                    start_up,
                    ..
                }) if protocol == PROTOCOL && scope == self.scope => Some(start_up),
                _ => None,
            },
            Event::Closed(_) | Event::Wake => None,
        };
        if let Some(start_up) = greeting {
            if let Some(parts) = start_up {
                self.start_parts += &parts;
            }
            self.spares[i].state = State::Idle(Instant::now());
        } else {
            let mut spare = self.spares.swap_remove(i);
            let what = spare.end(&self.options.launcher);
            tracing::warn!("a standby worker ended before it was needed: {what}");
        }
        true
    }

    fn spawn(&mut self, slot: usize) -> Result<Worker, BackendError> {
        let serial = self.next_serial;
        self.next_serial += 1;
        Worker::start(&self.options, slot, serial, self.sender.clone())
    }

    /// Stops worker `slot` and says how it ended.
    fn end(&mut self, slot: usize) -> String {
        self.workers[slot].end(&self.options.launcher)
    }

    /// Kills worker `slot` and starts its replacement: its spare when
    /// there is one (then a new spare starts), else a new process.
    fn replace(&mut self, slot: usize) -> Result<String, BackendError> {
        let what = self.end(slot);
        self.respawns += 1;
        let worker_slot = self.workers[slot].slot;
        if let Some(i) = self.spares.iter().position(|s| s.slot == worker_slot) {
            let mut spare = self.spares.swap_remove(i);
            match spare.state {
                // Still starting: the wait counts from now.
                State::Starting(_) => spare.state = State::Starting(Instant::now()),
                // Ready: its idle time as a worker counts from now, not
                // from its greeting as a spare.
                _ => {
                    spare.state = State::Idle(Instant::now());
                    self.standby_swaps += 1;
                }
            }
            self.workers[slot] = spare;
            self.start_spare(worker_slot);
            return Ok(what);
        }
        match self.spawn(worker_slot) {
            Ok(w) => self.workers[slot] = w,
            Err(e) if self.options.launcher.tolerates_lost_workers() => {
                self.drop_worker(slot, &e.to_string())?;
            }
            Err(e) => return Err(e),
        }
        Ok(what)
    }

    /// Marks a worker that has ended ([`end`](Self::end)) and cannot be
    /// replaced as lost; the search goes on with the rest, and stops when
    /// none is left.
    fn drop_worker(&mut self, slot: usize, why: &str) -> Result<(), BackendError> {
        self.workers[slot].state = State::Lost;
        self.lost += 1;
        let left = self.size();
        tracing::warn!(
            left,
            "a {} worker was lost and not replaced: {why}",
            self.options.launcher.name()
        );
        if left == 0 {
            return Err(BackendError::Failed(format!(
                "every {} worker was lost; the last: {why}",
                self.options.launcher.name()
            )));
        }
        Ok(())
    }

    /// Notes PTX hashes the search now knows (its fitness cache has their
    /// assessment): every worker hears of them with its next search compile
    /// request (`Compile::known`), and answers a variant with one of them
    /// early (`Compile::skip_known`). A pre-screen rejection's key is its
    /// IR's (`in_process::screened_key`).
    pub fn note_known(&mut self, hashes: impl IntoIterator<Item = String>) {
        self.known.note(hashes);
    }

    /// PTX hashes the search is about to forget: every worker drops them
    /// with its next search compile request, before the search does
    /// (`Backend::forget_known`), and they are not noted again until the
    /// next call ([`KnownLog::forget`](super::known::KnownLog::forget)).
    pub fn forget_known(&mut self, hashes: &[String]) {
        self.known.forget(hashes);
    }

    /// Sends every request to the worker of `slot` (its `slot_args`: one
    /// device) until unpinned with `None`: measurements that must be
    /// compared with each other come from one device.
    pub fn pin(&mut self, slot: Option<usize>) {
        self.pinned = slot;
    }

    /// Each test set's hash (for cache keys).
    pub fn test_set_hashes(&self) -> Vec<(TestSet, String)> {
        self.test_set_hashes.to_vec()
    }

    /// The stop flag this pool's runs end on.
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    /// Worker processes in the pool (not counting lost ones).
    pub fn size(&self) -> usize {
        self.workers
            .iter()
            .filter(|w| !matches!(w.state, State::Lost))
            .count()
    }

    /// How many requests taken ahead of need the pool's workers may hold
    /// at once ([`Launcher::ahead_per_worker`] each).
    ///
    /// [`Launcher::ahead_per_worker`]: super::launch::Launcher::ahead_per_worker
    pub fn ahead_capacity(&self) -> usize {
        self.size() * self.options.launcher.ahead_per_worker()
    }

    /// A request id not used before in this pool.
    pub fn next_id(&mut self) -> u64 {
        self.next_request += 1;
        self.next_request
    }

    /// A worker's line: its greeting, the answer to its oldest request, or
    /// garbage (which costs that request and the worker).
    fn answer(
        &mut self,
        slot: usize,
        line: &str,
        requests: &[Request],
        batch: &mut Batch,
    ) -> Result<(), BackendError> {
        let response: Result<Response, _> = serde_json::from_str(line);
        let head = match &self.workers[slot].state {
            State::Busy { requests, .. } => requests.front().copied(),
            _ => None,
        };
        match (response, &self.workers[slot].state) {
            (Ok(Response::Fatal { message }), _) => {
                Err(BackendError::Failed(format!("worker: {message}")))
            }
            (
                Ok(Response::Ready {
                    protocol,
                    scope,
                    start_up,
                    ..
                }),
                State::Starting(started),
            ) => {
                self.startup_s += started.elapsed().as_secs_f64();
                if let Some(parts) = &start_up {
                    self.start_parts += parts;
                }
                if protocol != PROTOCOL || scope != self.scope {
                    return Err(BackendError::Failed(format!(
                        "worker speaks protocol {protocol} for {scope:?}; expected {PROTOCOL} for {:?}",
                        self.scope
                    )));
                }
                self.workers[slot].state = State::Idle(Instant::now());
                Ok(())
            }
            (Ok(response), State::Busy { .. })
                if head.is_some_and(|r| response.id() == Some(requests[r].id())) =>
            {
                let exiting = matches!(response, Response::Assessed { exiting: true, .. });
                let mut in_flight = self.take_in_flight(slot);
                let done = in_flight.pop_front().expect("a head");
                // With the dispatch's event, a timeline of each worker's
                // requests (`GEVOD_LOG=gevod::worker::pool=trace`).
                tracing::trace!(
                    gpu = self.options.gpu,
                    slot,
                    id = requests[done].id(),
                    answer = response.kind(),
                    spent = ?response.spent(),
                    "answered"
                );
                batch.finish(done, Ok(response));
                if exiting {
                    batch.requeue(in_flight);
                    self.replace(slot)?;
                } else if !in_flight.is_empty() {
                    self.workers[slot].state = State::Busy {
                        requests: in_flight,
                        since: Instant::now(),
                    };
                }
                Ok(())
            }
            _ => {
                tracing::warn!(line = %truncate(line, 200), "a worker answered garbage");
                let mut in_flight = self.take_in_flight(slot);
                let what = self.replace(slot)?;
                if let Some(r) = in_flight.pop_front() {
                    batch.finish(
                        r,
                        Err(format!(
                            "worker answered garbage ({}); replaced ({what})",
                            truncate(line, 80)
                        )),
                    );
                }
                batch.requeue(in_flight);
                Ok(())
            }
        }
    }

    /// A worker's stdout closed: it died. Its oldest request is the one it
    /// was running: a crash charged to that variant, unless the worker was
    /// a Slurm step, which may have gone with its node (the request is
    /// tried again elsewhere, once). The requests behind it never started.
    fn closed(&mut self, slot: usize, batch: &mut Batch) -> Result<(), BackendError> {
        let launcher = &self.options.launcher;
        let tolerant = launcher.tolerates_lost_workers();
        let retries = launcher.retries_after_loss();
        match self.workers[slot].state {
            State::Lost => return Ok(()),
            State::Starting(_) if tolerant => {
                let what = self.end(slot);
                return self.drop_worker(slot, &format!("exited before greeting: {what}"));
            }
            State::Starting(_) => {
                let what = self.end(slot);
                return Err(BackendError::Failed(format!(
                    "worker exited before greeting: {what}"
                )));
            }
            State::Idle(_) | State::Busy { .. } => {}
        }
        let mut in_flight = self.take_in_flight(slot);
        let what = self.replace(slot)?;
        if let Some(r) = in_flight.pop_front() {
            if batch.lost_steps[r] < retries {
                batch.lost_steps[r] += 1;
                tracing::warn!(
                    "a {} worker vanished mid-request ({what}); trying it on another",
                    self.options.launcher.name()
                );
                in_flight.push_front(r);
            } else {
                batch.finish(r, Err(format!("worker crashed: {what}")));
            }
        }
        batch.requeue(in_flight);
        Ok(())
    }

    /// Kills workers whose oldest request ran past the timeout (charged to
    /// it), and stops the batch if a worker never greets.
    fn check_timeouts(&mut self, batch: &mut Batch) -> Result<(), BackendError> {
        for slot in 0..self.workers.len() {
            match &self.workers[slot].state {
                State::Busy { since, .. } if since.elapsed() > self.options.timeout => {
                    let mut in_flight = self.take_in_flight(slot);
                    let what = self.replace(slot)?;
                    let r = in_flight.pop_front().expect("busy workers hold a request");
                    batch.finish(
                        r,
                        Err(format!(
                            "timed out after {:.0?}; worker killed ({what})",
                            self.options.timeout
                        )),
                    );
                    batch.requeue(in_flight);
                }
                State::Starting(since) if since.elapsed() > self.options.start_timeout => {
                    return Err(BackendError::Failed(format!(
                        "worker did not start within {:.0?}",
                        self.options.start_timeout
                    )))
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The requests worker `slot` holds, oldest first; it is left idle.
    fn take_in_flight(&mut self, slot: usize) -> VecDeque<usize> {
        match std::mem::replace(&mut self.workers[slot].state, State::Idle(Instant::now())) {
            State::Busy { requests, .. } => requests,
            other => {
                self.workers[slot].state = other;
                VecDeque::new()
            }
        }
    }

    fn requests(
        &mut self,
        make: impl Fn(u64, &Patch) -> Request,
        patches: &[Patch],
    ) -> Vec<Request> {
        patches.iter().map(|p| make(self.next_id(), p)).collect()
    }
}

impl Drop for WorkerPool {
    fn drop(&mut self) {
        for w in self.workers.iter_mut().chain(&mut self.spares) {
            w.stop(&self.options.launcher);
        }
    }
}

impl Backend for WorkerPool {
    fn scope(&self) -> Scope {
        self.scope.clone()
    }

    fn respawns(&self) -> u64 {
        self.respawns
    }

    fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Simulator workers run the generated tests (harness workers answer
    /// with none).
    fn runs_generated(&self) -> bool {
        self.scope.backend == "sim"
    }

    fn test_set_hash(&self, set: TestSet) -> String {
        hash_of(&self.test_set_hashes, set)
    }

    fn compile(&mut self, patches: &[Patch]) -> Result<Vec<Result<Build, String>>, BackendError> {
        let requests = self.requests(|id, p| Request::compile(id, p.clone()), patches);
        Ok(self.run(requests)?.into_iter().map(build_of).collect())
    }

    fn assess(&mut self, patches: &[Patch], set: TestSet) -> Result<Vec<Assessment>, BackendError> {
        let requests = self.requests(
            |id, p| Request::Assess {
                id,
                patch: p.clone(),
                set,
            },
            patches,
        );
        let answers = self.run(requests)?;
        for spent in answers.iter().flatten().filter_map(Response::spent) {
            self.assess_spent += spent;
        }
        Ok(answers.into_iter().map(assessment_of).collect())
    }
}

/// A variant whose run ended its worker: one failing pseudo-test saying why.
pub fn failed_assessment(reason: String) -> Assessment {
    Assessment::failed("worker", "worker", reason)
}

/// `set`'s hash among a pool's test-set hashes (every set is hashed).
pub fn hash_of(hashes: &[(TestSet, String)], set: TestSet) -> String {
    hashes
        .iter()
        .find(|(s, _)| *s == set)
        .map(|(_, h)| h.clone())
        .expect("all sets hashed")
}

/// The build a compile request answered, or why there is none.
pub fn build_of(response: Result<Response, String>) -> Result<Build, String> {
    match response {
        Ok(Response::Built { build, .. }) => Ok(build),
        Ok(Response::CompileFailed { reason, .. }) => Err(reason),
        Ok(other) => Err(format!("unexpected answer {other:?}")),
        Err(reason) => Err(format!("code generation failed: {reason}")),
    }
}

/// The assessment an assess or measure request answered (a failing one
/// saying why, when there is none).
pub fn assessment_of(response: Result<Response, String>) -> Assessment {
    match response {
        Ok(Response::Assessed { assessment, .. }) => assessment,
        Ok(other) => failed_assessment(format!("unexpected answer {other:?}")),
        Err(reason) => failed_assessment(reason),
    }
}
