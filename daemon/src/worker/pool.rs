//! The engine side of the workers: a pool of `gevod eval-worker` processes,
//! one request in flight each. A worker that exits, answers garbage or runs
//! past the timeout is killed and replaced; the request it held fails with
//! the reason, and every other request goes on.

use super::{Request, Response, PROTOCOL};
use crate::eval::Assessment;
use crate::evolve::{Backend, BackendError, Build, Scope};
use crate::ir::Patch;
use crate::spec::{Spec, TestSet};
use std::collections::VecDeque;
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
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
}

enum State {
    Starting(Instant),
    Idle,
    Busy { request: usize, since: Instant },
}

struct Worker {
    serial: u64,
    child: Child,
    stdin: ChildStdin,
    stderr_tail: Arc<Mutex<String>>,
    state: State,
}

enum Event {
    Line(u64, String),
    Closed(u64),
}

/// A pool of evaluation worker processes; a [`Backend`].
pub struct WorkerPool {
    options: PoolOptions,
    scope: Scope,
    test_set_hashes: [(TestSet, String); 3],
    workers: Vec<Worker>,
    events: Receiver<Event>,
    sender: Sender<Event>,
    next_serial: u64,
    next_request: u64,
    stop: Arc<AtomicBool>,
    /// Workers replaced after a crash, garbage, a timeout or an exit.
    pub respawns: u64,
}

/// Keeps the last few KiB a worker wrote to stderr, for crash reports.
const STDERR_TAIL: usize = 4096;

impl WorkerPool {
    /// Starts the workers; `scope` is what they measure (checked against
    /// each worker's greeting); `stop` abandons a batch when set.
    pub fn start(
        options: PoolOptions,
        spec: &Spec,
        scope: Scope,
        stop: Arc<AtomicBool>,
    ) -> Result<Self, BackendError> {
        let (sender, events) = mpsc::channel();
        let test_set_hashes =
            [TestSet::Train, TestSet::Heldout, TestSet::All].map(|s| (s, spec.test_set_hash(s)));
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
        };
        for _ in 0..pool.options.workers.max(1) {
            let w = pool.spawn()?;
            pool.workers.push(w);
        }
        // Wait for every greeting, so a broken spec fails here, once.
        pool.run(Vec::new())?;
        Ok(pool)
    }

    fn spawn(&mut self) -> Result<Worker, BackendError> {
        let serial = self.next_serial;
        self.next_serial += 1;
        let mut command = Command::new(&self.options.program);
        command
            .args(&self.options.args)
            .envs(self.options.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Its own process group: a Ctrl-C meant for the engine does not
            // kill the workers mid-answer; the engine stops them.
            .process_group(0);
        let mut child = command.spawn().map_err(|e| {
            BackendError::Failed(format!(
                "cannot start worker {}: {e}",
                self.options.program.display()
            ))
        })?;
        let stdin = child.stdin.take().expect("piped");
        let stdout = child.stdout.take().expect("piped");
        let mut stderr = child.stderr.take().expect("piped");
        let sender = self.sender.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if sender.send(Event::Line(serial, line)).is_err() {
                    return;
                }
            }
            let _ = sender.send(Event::Closed(serial));
        });
        let stderr_tail = Arc::new(Mutex::new(String::new()));
        let tail = stderr_tail.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 1024];
            while let Ok(n) = stderr.read(&mut buf) {
                if n == 0 {
                    break;
                }
                let mut t = tail.lock().expect("stderr tail");
                t.push_str(&String::from_utf8_lossy(&buf[..n]));
                if t.len() > STDERR_TAIL {
                    let cut = t.len() - STDERR_TAIL;
                    let cut = (cut..t.len()).find(|&i| t.is_char_boundary(i)).unwrap_or(0);
                    t.drain(..cut);
                }
            }
        });
        Ok(Worker {
            serial,
            child,
            stdin,
            stderr_tail,
            state: State::Starting(Instant::now()),
        })
    }

    /// Kills worker `slot` and starts its replacement.
    fn replace(&mut self, slot: usize) -> Result<String, BackendError> {
        let w = &mut self.workers[slot];
        let _ = w.child.kill();
        let status = w.child.wait().ok();
        // The reader threads may still be delivering the last lines.
        std::thread::sleep(Duration::from_millis(5));
        let tail = last_line(&w.stderr_tail.lock().expect("stderr tail"));
        let mut what = status.map_or_else(|| "unknown status".to_string(), |s| s.to_string());
        if !tail.is_empty() {
            what.push_str(&format!("; stderr: {tail}"));
        }
        self.respawns += 1;
        self.workers[slot] = self.spawn()?;
        Ok(what)
    }

    /// Worker processes in the pool.
    pub fn size(&self) -> usize {
        self.workers.len()
    }

    /// A request id not used before in this pool.
    pub fn next_id(&mut self) -> u64 {
        self.next_request += 1;
        self.next_request
    }

    /// Runs requests on the workers, each on one, and returns per request
    /// the response or why there is none.
    pub fn run(
        &mut self,
        requests: Vec<Request>,
    ) -> Result<Vec<Result<Response, String>>, BackendError> {
        let mut results: Vec<Option<Result<Response, String>>> = vec![None; requests.len()];
        let mut queue: VecDeque<usize> = (0..requests.len()).collect();
        let mut remaining = requests.len();
        loop {
            if self.stop.load(Ordering::Relaxed) {
                return Err(BackendError::Interrupted);
            }
            for slot in 0..self.workers.len() {
                if !matches!(self.workers[slot].state, State::Idle) {
                    continue;
                }
                let Some(r) = queue.pop_front() else { break };
                let mut line = serde_json::to_string(&requests[r]).expect("requests serialize");
                line.push('\n');
                let w = &mut self.workers[slot];
                w.state = State::Busy {
                    request: r,
                    since: Instant::now(),
                };
                if w.stdin
                    .write_all(line.as_bytes())
                    .and_then(|_| w.stdin.flush())
                    .is_err()
                {
                    // It died before reading: the request was never started.
                    queue.push_front(r);
                    self.workers[slot].state = State::Idle;
                    self.replace(slot)?;
                }
            }
            let starting = self
                .workers
                .iter()
                .any(|w| matches!(w.state, State::Starting(_)));
            if remaining == 0 && !starting {
                break;
            }
            match self.events.recv_timeout(Duration::from_millis(50)) {
                Ok(Event::Line(serial, line)) => {
                    let Some(slot) = self.workers.iter().position(|w| w.serial == serial) else {
                        continue; // from a worker already replaced
                    };
                    let response: Result<Response, _> = serde_json::from_str(&line);
                    match (response, &self.workers[slot].state) {
                        (Ok(Response::Fatal { message }), _) => {
                            return Err(BackendError::Failed(format!("worker: {message}")))
                        }
                        (
                            Ok(Response::Ready {
                                protocol, scope, ..
                            }),
                            State::Starting(_),
                        ) => {
                            if protocol != PROTOCOL || scope != self.scope {
                                return Err(BackendError::Failed(format!(
                                    "worker speaks protocol {protocol} for {scope:?}; expected {PROTOCOL} for {:?}",
                                    self.scope
                                )));
                            }
                            self.workers[slot].state = State::Idle;
                        }
                        (Ok(response), &State::Busy { request, .. })
                            if response_id(&response) == Some(requests[request].id()) =>
                        {
                            let exiting =
                                matches!(response, Response::Assessed { exiting: true, .. });
                            results[request] = Some(Ok(response));
                            remaining -= 1;
                            self.workers[slot].state = State::Idle;
                            if exiting {
                                self.replace(slot)?;
                            }
                        }
                        (_, state) => {
                            let request = match state {
                                State::Busy { request, .. } => Some(*request),
                                _ => None,
                            };
                            let what = self.replace(slot)?;
                            if let Some(r) = request {
                                results[r] = Some(Err(format!(
                                    "worker answered garbage ({}); replaced ({what})",
                                    truncate(&line, 80)
                                )));
                                remaining -= 1;
                            }
                        }
                    }
                }
                Ok(Event::Closed(serial)) => {
                    let Some(slot) = self.workers.iter().position(|w| w.serial == serial) else {
                        continue;
                    };
                    let state = std::mem::replace(&mut self.workers[slot].state, State::Idle);
                    let what = self.replace(slot)?;
                    match state {
                        State::Busy { request, .. } => {
                            results[request] = Some(Err(format!("worker crashed: {what}")));
                            remaining -= 1;
                        }
                        State::Starting(_) => {
                            return Err(BackendError::Failed(format!(
                                "worker exited before greeting: {what}"
                            )))
                        }
                        State::Idle => {}
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => unreachable!("the pool holds a sender"),
            }
            for slot in 0..self.workers.len() {
                match self.workers[slot].state {
                    State::Busy { request, since } if since.elapsed() > self.options.timeout => {
                        self.workers[slot].state = State::Idle;
                        let what = self.replace(slot)?;
                        results[request] = Some(Err(format!(
                            "timed out after {:.0?}; worker killed ({what})",
                            self.options.timeout
                        )));
                        remaining -= 1;
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
        }
        Ok(results
            .into_iter()
            .map(|r| r.expect("every request answered"))
            .collect())
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
        for w in &mut self.workers {
            let _ = w.child.kill();
            let _ = w.child.wait();
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

    fn test_set_hash(&self, set: TestSet) -> String {
        self.test_set_hashes
            .iter()
            .find(|(s, _)| *s == set)
            .map(|(_, h)| h.clone())
            .expect("all sets hashed")
    }

    fn compile(&mut self, patches: &[Patch]) -> Result<Vec<Result<Build, String>>, BackendError> {
        let requests = self.requests(
            |id, p| Request::Compile {
                id,
                patch: p.clone(),
                prescreen: false,
            },
            patches,
        );
        Ok(self
            .run(requests)?
            .into_iter()
            .map(|r| match r {
                Ok(Response::Built { build, .. }) => Ok(build),
                Ok(Response::CompileFailed { reason, .. }) => Err(reason),
                Ok(other) => Err(format!("unexpected answer {other:?}")),
                Err(reason) => Err(format!("code generation failed: {reason}")),
            })
            .collect())
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
        Ok(self
            .run(requests)?
            .into_iter()
            .map(|r| match r {
                Ok(Response::Assessed { assessment, .. }) => assessment,
                Ok(other) => failed_assessment(format!("unexpected answer {other:?}")),
                Err(reason) => failed_assessment(reason),
            })
            .collect())
    }
}

/// A variant whose run ended its worker: one failing pseudo-test saying why.
pub fn failed_assessment(reason: String) -> Assessment {
    Assessment::failed("worker", "worker", reason)
}

fn response_id(r: &Response) -> Option<u64> {
    match r {
        Response::Built { id, .. }
        | Response::CompileFailed { id, .. }
        | Response::Assessed { id, .. } => Some(*id),
        Response::Ready { .. } | Response::Fatal { .. } => None,
    }
}

fn last_line(text: &str) -> String {
    truncate(text.trim_end().lines().last().unwrap_or(""), 200)
}

fn truncate(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_string(),
    }
}
