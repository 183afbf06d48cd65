//! The GPU safety gate beside the search: compute-sanitizer's checks of
//! variants about to be validated run in a thread of their own, one at a
//! time, while the GPU worker goes on measuring the next generation. A
//! search that waited for each check spent about half of a short GPU
//! search's wall time in it (12.7 s a validated variant on the stencil).
//! The engine collects the verdicts between generations
//! (`evolve::gating`), and at the end of a search waits for the best
//! variant's only ([`BackgroundGate::focus`]).
//!
//! The newest request is checked first: each variant promoted beats every
//! one before it (the promotion bar), so the best is validated soonest.

use super::sanitize::{GateError, SafetyGate};
use gevo_search::evolve::Build;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

/// One finished check.
#[derive(Debug)]
pub struct GateVerdict {
    pub ptx_hash: String,
    /// The first report (rejected), none (passed), or why no verdict.
    pub outcome: Result<Option<String>, GateError>,
    /// Wall seconds the check took.
    pub seconds: f64,
}

/// What the thread sends back: the verdict (none for a check that `focus`
/// cancelled), and the gate's report line after it.
type Answer = (String, Option<GateVerdict>, String);

/// What the caller and the thread share.
#[derive(Default)]
struct Shared {
    /// Requests not started, the newest last.
    queue: Mutex<Vec<Build>>,
    wake: Condvar,
    /// The PTX hash of the check running.
    running: Mutex<Option<String>>,
    /// Set on drop: the running check is killed, the queue dropped.
    closing: Arc<AtomicBool>,
    /// Set by `focus`: the running check is killed and answers nothing.
    skip: Arc<AtomicBool>,
}

/// A [`SafetyGate`] in a thread of its own.
pub struct BackgroundGate {
    shared: Arc<Shared>,
    answers: Receiver<Answer>,
    /// PTX hashes submitted whose verdict has not come back.
    pending: BTreeSet<String>,
    /// Verdicts come back and not yet collected.
    ready: Vec<GateVerdict>,
    description: String,
    thread: Option<JoinHandle<()>>,
}

impl BackgroundGate {
    pub fn start(gate: SafetyGate) -> std::io::Result<Self> {
        let shared = Arc::new(Shared::default());
        let mut gate = gate
            .stopped_by(shared.closing.clone())
            .stopped_by(shared.skip.clone());
        let description = gate.describe();
        let (reply, answers) = mpsc::channel::<Answer>();
        let theirs = shared.clone();
        let thread = std::thread::Builder::new()
            .name("safety-gate".into())
            .spawn(move || {
                while let Some(build) = theirs.next() {
                    let started = std::time::Instant::now();
                    let outcome = gate.check(&build.ptx);
                    *lock(&theirs.running) = None;
                    let verdict =
                        (!theirs.skip.swap(false, Ordering::Relaxed)).then(|| GateVerdict {
                            ptx_hash: build.ptx_hash.clone(),
                            outcome,
                            seconds: started.elapsed().as_secs_f64(),
                        });
                    if reply
                        .send((build.ptx_hash, verdict, gate.describe()))
                        .is_err()
                    {
                        break;
                    }
                }
            })?;
        Ok(BackgroundGate {
            shared,
            answers,
            pending: BTreeSet::new(),
            ready: Vec::new(),
            description,
            thread: Some(thread),
        })
    }

    /// Queues `build` for a check, unless it is queued or running already.
    pub fn submit(&mut self, build: &Build) -> Result<(), GateError> {
        if self.pending.contains(&build.ptx_hash) {
            return Ok(());
        }
        if self.thread.as_ref().is_none_or(|t| t.is_finished()) {
            return Err(GateError::Failed("the safety gate's thread ended".into()));
        }
        lock(&self.shared.queue).push(build.clone());
        self.shared.wake.notify_one();
        self.pending.insert(build.ptx_hash.clone());
        Ok(())
    }

    /// The checks finished since the last call; with `wait`, at least one
    /// when any is pending (waiting for it).
    pub fn verdicts(&mut self, wait: bool) -> Result<Vec<GateVerdict>, GateError> {
        let mut waiting = wait && self.ready.is_empty();
        while !self.pending.is_empty() {
            let answer = match waiting {
                true => self.answers.recv().ok(),
                false => self.answers.try_recv().ok(),
            };
            match answer {
                Some(answer) => self.receive(answer),
                None if waiting => return Err(self.ended()),
                None => break,
            }
            waiting = wait && self.ready.is_empty();
        }
        Ok(std::mem::take(&mut self.ready))
    }

    /// Checks `build` and waits for its verdict (other verdicts that come
    /// meanwhile stay for [`verdicts`](Self::verdicts)).
    pub fn check_now(&mut self, build: &Build) -> Result<GateVerdict, GateError> {
        self.submit(build)?;
        loop {
            if let Some(i) = self.ready.iter().position(|v| v.ptx_hash == build.ptx_hash) {
                return Ok(self.ready.remove(i));
            }
            match self.answers.recv() {
                Ok(answer) => self.receive(answer),
                Err(_) => return Err(self.ended()),
            }
        }
    }

    /// Drops every check but `ptx_hash`'s: those queued at once, the one
    /// running killed (it answers nothing). The end of a search waits for
    /// the best variant's verdict only.
    pub fn focus(&mut self, ptx_hash: &str) {
        let mut queue = lock(&self.shared.queue);
        for dropped in queue.iter().filter(|b| b.ptx_hash != ptx_hash) {
            self.pending.remove(&dropped.ptx_hash);
        }
        queue.retain(|b| b.ptx_hash == ptx_hash);
        if lock(&self.shared.running)
            .as_ref()
            .is_some_and(|running| running != ptx_hash)
        {
            self.shared.skip.store(true, Ordering::Relaxed);
        }
    }

    /// The gate's report line: what runs, and what it did so far.
    pub fn describe(&self) -> &str {
        &self.description
    }

    fn receive(&mut self, (ptx_hash, verdict, description): Answer) {
        self.description = description;
        self.pending.remove(&ptx_hash);
        self.ready.extend(verdict);
    }

    fn ended(&self) -> GateError {
        GateError::Failed("the safety gate's thread ended before its verdicts".into())
    }
}

impl Shared {
    /// The newest request, marked running; `None` once closing.
    fn next(&self) -> Option<Build> {
        let mut queue = lock(&self.queue);
        loop {
            if self.closing.load(Ordering::Relaxed) {
                return None;
            }
            if let Some(build) = queue.pop() {
                *lock(&self.running) = Some(build.ptx_hash.clone());
                // A skip asked for before this check started is not for it.
                self.skip.store(false, Ordering::Relaxed);
                return Some(build);
            }
            queue = self.wake.wait(queue).unwrap_or_else(|e| e.into_inner());
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl Drop for BackgroundGate {
    /// A check still running is killed (within the gate's poll), and those
    /// queued are dropped: the search that wanted them has ended.
    fn drop(&mut self) {
        self.shared.closing.store(true, Ordering::Relaxed);
        self.shared.wake.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
