//! The GPU safety gate beside the search: compute-sanitizer's checks of
//! variants about to be validated run in a thread of their own, one at a
//! time, while the GPU worker goes on measuring the next generation. A
//! search that waited for each check spent about half of a short GPU
//! search's wall time in it (12.7 s a validated variant on the stencil).
//! The engine collects the verdicts between generations
//! (`evolve::promote`), and waits for the last ones when the search ends.

use super::sanitize::{GateError, SafetyGate};
use crate::evolve::Build;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
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

/// What the thread sends back: the verdict, and the gate's report line
/// after it.
type Answer = (GateVerdict, String);

/// A [`SafetyGate`] in a thread of its own.
pub struct BackgroundGate {
    requests: Option<Sender<Build>>,
    answers: Receiver<Answer>,
    /// PTX hashes submitted whose verdict has not come back.
    pending: BTreeSet<String>,
    /// Verdicts come back and not yet collected.
    ready: Vec<GateVerdict>,
    description: String,
    /// Set on drop: the running check is killed and the queue dropped.
    closing: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl BackgroundGate {
    pub fn start(gate: SafetyGate) -> std::io::Result<Self> {
        let closing = Arc::new(AtomicBool::new(false));
        let mut gate = gate.stopped_by(closing.clone());
        let description = gate.describe();
        let (requests, queue) = mpsc::channel::<Build>();
        let (reply, answers) = mpsc::channel::<Answer>();
        let quit = closing.clone();
        let thread = std::thread::Builder::new()
            .name("safety-gate".into())
            .spawn(move || {
                for build in queue {
                    if quit.load(Ordering::Relaxed) {
                        break;
                    }
                    let started = std::time::Instant::now();
                    let outcome = gate.check(&build.ptx);
                    let verdict = GateVerdict {
                        ptx_hash: build.ptx_hash,
                        outcome,
                        seconds: started.elapsed().as_secs_f64(),
                    };
                    if reply.send((verdict, gate.describe())).is_err() {
                        break;
                    }
                }
            })?;
        Ok(BackgroundGate {
            requests: Some(requests),
            answers,
            pending: BTreeSet::new(),
            ready: Vec::new(),
            description,
            closing,
            thread: Some(thread),
        })
    }

    /// Queues `build` for a check, unless it is queued or running already.
    pub fn submit(&mut self, build: &Build) -> Result<(), GateError> {
        if self.pending.contains(&build.ptx_hash) {
            return Ok(());
        }
        let sent = self
            .requests
            .as_ref()
            .is_some_and(|r| r.send(build.clone()).is_ok());
        if !sent {
            return Err(GateError::Failed("the safety gate's thread ended".into()));
        }
        self.pending.insert(build.ptx_hash.clone());
        Ok(())
    }

    /// The checks finished since the last call; with `wait`, every check
    /// submitted, waiting for those still running.
    pub fn verdicts(&mut self, wait: bool) -> Result<Vec<GateVerdict>, GateError> {
        while !self.pending.is_empty() {
            let answer = if wait {
                self.answers.recv().ok()
            } else {
                self.answers.try_recv().ok()
            };
            match answer {
                Some(answer) => self.receive(answer),
                None if wait => return Err(self.ended()),
                None => break,
            }
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

    /// The gate's report line: what runs, and what it did so far.
    pub fn describe(&self) -> &str {
        &self.description
    }

    fn receive(&mut self, (verdict, description): Answer) {
        self.description = description;
        self.pending.remove(&verdict.ptx_hash);
        self.ready.push(verdict);
    }

    fn ended(&self) -> GateError {
        GateError::Failed("the safety gate's thread ended before its verdicts".into())
    }
}

impl Drop for BackgroundGate {
    /// A check still running is killed (within the gate's poll), and those
    /// queued are dropped: the search that wanted them has ended.
    fn drop(&mut self) {
        self.closing.store(true, Ordering::Relaxed);
        self.requests = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
