//! Promotion beside a search batch: a [`Backend`] whose requests go to the
//! batch's running pools ([`LaneInbox`](super::feeds::LaneInbox)), ahead of
//! the batch's own, so a generation's promotion does not hold the GPU
//! between generations (docs/evolve.md, "Promotion beside the search").

use super::super::pool::{assessment_of, build_of, hash_of, Waker};
use super::super::Request;
use super::feeds::{compile_failure, Answer, Compiled, LaneInbox};
use crate::assessment::Assessment;
use crate::busy::Utilization;
use crate::evolve::{Backend, BackendError, Build, GateStart, Scope};
use crate::ir::Patch;
use crate::spec::TestSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;

/// A request from a lane to one pool, and where its answer goes; `patch`:
/// the variant a measurement is of.
pub(super) struct LaneJob {
    pub(super) request: Request,
    pub(super) reply: mpsc::Sender<Answer>,
    pub(super) patch: Option<Patch>,
}

/// One pool as a lane reaches it.
struct PoolLine {
    jobs: mpsc::Sender<LaneJob>,
    waker: Waker,
}

/// What a lane knows of its backend besides the pools.
pub(super) struct LaneSetup {
    pub(super) scope: Scope,
    pub(super) test_set_hashes: Vec<(TestSet, String)>,
    pub(super) prescreen: bool,
    pub(super) cubin_for: Option<String>,
    /// Whether the backend has a safety gate: checks a lane starts are
    /// queued and handed to it after the batch.
    pub(super) gated: bool,
    pub(super) stop: Arc<AtomicBool>,
}

/// The backend promotion runs on while a batch is measured.
pub(super) struct Lane {
    compile: PoolLine,
    gpu: PoolLine,
    setup: LaneSetup,
    /// Builds to hand to the safety gate.
    pub(super) gate_queue: Vec<Build>,
    /// The compile workers' time on the lane's variants.
    pub(super) utilization: Utilization,
}

impl Lane {
    /// A lane into two pools whose runs take its requests from the inboxes
    /// returned (compile, GPU); each pool is woken by its waker.
    pub(super) fn open(
        setup: LaneSetup,
        compile_waker: Waker,
        gpu_waker: Waker,
    ) -> (Lane, LaneInbox, LaneInbox) {
        let (compile_jobs, compile_inbound) = mpsc::channel();
        let (gpu_jobs, gpu_inbound) = mpsc::channel();
        let lane = Lane {
            compile: PoolLine {
                jobs: compile_jobs,
                waker: compile_waker,
            },
            gpu: PoolLine {
                jobs: gpu_jobs,
                waker: gpu_waker,
            },
            setup,
            gate_queue: Vec::new(),
            utilization: Utilization::default(),
        };
        (
            lane,
            LaneInbox::new(compile_inbound),
            LaneInbox::new(gpu_inbound),
        )
    }

    /// Sends each request to `line`'s pool and waits for every answer, in
    /// order.
    fn ask(
        &self,
        line: &PoolLine,
        requests: Vec<(Request, Option<Patch>)>,
    ) -> Result<Vec<Answer>, BackendError> {
        let mut waiting = Vec::with_capacity(requests.len());
        for (request, patch) in requests {
            let (reply, answer) = mpsc::channel();
            line.jobs
                .send(LaneJob {
                    request,
                    reply,
                    patch,
                })
                .map_err(|_| self.ended())?;
            waiting.push(answer);
        }
        line.waker.wake();
        waiting
            .into_iter()
            .map(|answer| answer.recv().map_err(|_| self.ended()))
            .collect()
    }

    /// Why an answer will not come: a stop, or the batch's pools failed
    /// (their error is the batch's).
    fn ended(&self) -> BackendError {
        if self.setup.stop.load(Ordering::Relaxed) {
            BackendError::Interrupted
        } else {
            BackendError::Failed("the batch that promotion ran beside ended".into())
        }
    }
}

impl Backend for Lane {
    fn scope(&self) -> Scope {
        self.setup.scope.clone()
    }

    fn test_set_hash(&self, set: TestSet) -> String {
        hash_of(&self.setup.test_set_hashes, set)
    }

    fn stopping(&self) -> bool {
        self.setup.stop.load(Ordering::Relaxed)
    }

    fn compile(&mut self, patches: &[Patch]) -> Result<Vec<Result<Build, String>>, BackendError> {
        let requests = patches
            .iter()
            .map(|p| (Request::compile(0, p.clone()), None))
            .collect();
        let answers = self.ask(&self.compile, requests)?;
        Ok(answers.into_iter().map(build_of).collect())
    }

    /// The generated tests run on the simulator in the compile workers;
    /// the rest as the backend's own `assess`: each patch compiled, its
    /// guarded build checked and the variant timed on the first device.
    fn runs_generated(&self) -> bool {
        true
    }

    fn assess(&mut self, patches: &[Patch], set: TestSet) -> Result<Vec<Assessment>, BackendError> {
        if set == TestSet::Generated {
            let requests = patches
                .iter()
                .map(|p| {
                    let request = Request::Assess {
                        id: 0,
                        patch: p.clone(),
                        set,
                    };
                    (request, None)
                })
                .collect();
            let answers = self.ask(&self.compile, requests)?;
            return Ok(answers.into_iter().map(assessment_of).collect());
        }
        let requests = patches
            .iter()
            .map(|p| {
                // Promotion's variants mostly pass: both builds assembled.
                let request = Request::compile_measured(
                    0,
                    p.clone(),
                    self.setup.prescreen,
                    self.setup.cubin_for.clone(),
                    false,
                );
                (request, None)
            })
            .collect();
        let compiled = self.ask(&self.compile, requests)?;
        let mut out: Vec<Option<Assessment>> = Vec::with_capacity(patches.len());
        let mut measures = Vec::new();
        for (answer, patch) in compiled.into_iter().zip(patches) {
            let compiled = Compiled::of(answer, &mut self.utilization);
            out.push(match (&compiled.build, compiled.screened_out.clone()) {
                (Err(reason), _) => Some(compile_failure(reason.clone())),
                (Ok(_), Some(screened)) => Some(screened),
                (Ok(_), None) => {
                    let request = compiled.measure(set, None).expect("built");
                    measures.push((request, Some(patch.clone())));
                    None
                }
            });
        }
        let mut measured = self.ask(&self.gpu, measures)?.into_iter();
        Ok(out
            .into_iter()
            .map(|a| a.unwrap_or_else(|| assessment_of(measured.next().expect("one per measure"))))
            .collect())
    }

    /// Started after the batch, by the backend's gate.
    fn start_safety_check(&mut self, build: &Build) -> Result<GateStart, BackendError> {
        if !self.setup.gated {
            return Ok(GateStart::Verdict(None));
        }
        self.gate_queue.push(build.clone());
        Ok(GateStart::Started)
    }

    fn safety_check(&mut self, build: &Build) -> Result<Option<String>, BackendError> {
        match self.setup.gated {
            true => Err(BackendError::Failed(format!(
                "the safety gate checks {} only after the batch promotion ran beside",
                build.ptx_hash
            ))),
            false => Ok(None),
        }
    }
}
