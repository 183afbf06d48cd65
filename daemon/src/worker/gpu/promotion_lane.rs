//! Promotion beside the search: a [`Backend`] whose requests go to the
//! pools of whichever batch runs ([`LaneInbox`](super::batch_sides::LaneInbox)),
//! ahead of the batch's own, and wait between batches; it runs in a thread
//! of its own ([`Running`]), so neither the GPU between generations nor a
//! batch waits for a promotion (docs/evolve.md, "Promotion beside the
//! search").

use super::super::pool::{assessment_of, build_of, hash_of, Waker};
use super::super::{Request, Response};
use super::batch_sides::{compile_failure, Answer, Compiled, LaneInbox};
use crate::config::Prescreen;
use gevo_ir::{KernelIr, Patch};
use gevo_model::assessment::Assessment;
use gevo_model::spec::TestSet;
use gevo_model::utilization::{Spent, Utilization};
use gevo_search::evolve::{
    Backend, BackendError, Build, EndedPromotion, GateStart, Promotion, Scope,
};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};

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
    /// The search's placement; promotion's variants take
    /// [`Prescreen::for_promotion`].
    pub(super) prescreen: Prescreen,
    pub(super) cubin_for: Option<String>,
    /// Whether the backend has a safety gate: checks a lane starts are
    /// queued and handed to it after a batch.
    pub(super) gated: bool,
    pub(super) stop: Arc<AtomicBool>,
}

/// What a lane leaves for the backend to take after each batch.
#[derive(Default)]
pub(super) struct LaneOutputs {
    /// Builds to hand to the safety gate.
    pub(super) gate_queue: Vec<Build>,
    /// The compile workers' time on the lane's variants.
    pub(super) spent: Spent,
}

/// The backend promotion runs on, beside the batches.
struct Lane {
    compile: PoolLine,
    gpu: PoolLine,
    setup: LaneSetup,
    outputs: Arc<Mutex<LaneOutputs>>,
}

/// A promotion running beside the search: the far ends of its lane, which
/// each batch's pools take its requests from (put back after the batch),
/// and its result to come.
pub(super) struct Running {
    compile_jobs: Option<mpsc::Receiver<LaneJob>>,
    gpu_jobs: Option<mpsc::Receiver<LaneJob>>,
    outputs: Arc<Mutex<LaneOutputs>>,
    ended: mpsc::Receiver<EndedPromotion>,
}

impl Running {
    /// `promotion` started in a thread of its own on a lane into the pools
    /// each waker wakes (compile, GPU). The thread hands its result back,
    /// then drops the lane, which ends the requests' channels.
    pub(super) fn start(
        mut promotion: Promotion,
        ir: KernelIr,
        setup: LaneSetup,
        compile_waker: Waker,
        gpu_waker: Waker,
    ) -> Result<Running, BackendError> {
        let (compile_jobs, compile_inbound) = mpsc::channel();
        let (gpu_jobs, gpu_inbound) = mpsc::channel();
        let outputs = Arc::new(Mutex::new(LaneOutputs::default()));
        let mut lane = Lane {
            compile: PoolLine {
                jobs: compile_jobs,
                waker: compile_waker,
            },
            gpu: PoolLine {
                jobs: gpu_jobs,
                waker: gpu_waker,
            },
            setup,
            outputs: outputs.clone(),
        };
        let (result, ended) = mpsc::channel();
        std::thread::Builder::new()
            .name("gevod-promotion".into())
            .spawn(move || {
                let outcome = promotion.run(&ir, &mut lane);
                let _ = result.send(EndedPromotion { promotion, outcome });
            })
            .map_err(|e| BackendError::Failed(format!("starting promotion's thread: {e}")))?;
        Ok(Running {
            compile_jobs: Some(compile_inbound),
            gpu_jobs: Some(gpu_inbound),
            outputs,
            ended,
        })
    }

    /// The lane's requests for one batch (compile, GPU); give them back
    /// with [`put_back`](Self::put_back) when it ends.
    pub(super) fn inboxes(&mut self) -> (LaneInbox, LaneInbox) {
        (
            LaneInbox::new(self.compile_jobs.take()),
            LaneInbox::new(self.gpu_jobs.take()),
        )
    }

    pub(super) fn put_back(&mut self, compile: LaneInbox, gpu: LaneInbox) {
        self.compile_jobs = compile.into_jobs();
        self.gpu_jobs = gpu.into_jobs();
    }

    /// What the lane left since the last call: the builds for the safety
    /// gate and the compile workers' time.
    pub(super) fn take_outputs(&self) -> LaneOutputs {
        let mut outputs = self.outputs.lock().unwrap_or_else(|e| e.into_inner());
        std::mem::take(&mut *outputs)
    }

    /// The promotion's result: at once, `None` while it runs; with `wait`,
    /// when it comes. Its thread always sends one unless it panicked.
    pub(super) fn ended(&self, wait: bool) -> Result<Option<EndedPromotion>, BackendError> {
        let gone = || BackendError::Failed("promotion's thread ended without its result".into());
        match wait {
            true => self.ended.recv().map(Some).map_err(|_| gone()),
            false => match self.ended.try_recv() {
                Ok(ended) => Ok(Some(ended)),
                Err(mpsc::TryRecvError::Empty) => Ok(None),
                Err(mpsc::TryRecvError::Disconnected) => Err(gone()),
            },
        }
    }
}

impl Lane {
    /// Adds the compile workers' time on the lane's variants to what the
    /// backend takes after the batch.
    fn share(&self, spent: &Spent) {
        let mut outputs = self.outputs.lock().unwrap_or_else(|e| e.into_inner());
        outputs.spent += spent;
    }

    /// Shares the compile workers' time on these answers.
    fn share_answers(&self, answers: &[Answer]) {
        let mut spent = Spent::default();
        for s in answers.iter().flatten().filter_map(Response::spent) {
            spent += s;
        }
        self.share(&spent);
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

    /// Why an answer will not come: a stop, or the pools failed (their
    /// error is their batch's) or are gone.
    fn ended(&self) -> BackendError {
        if self.setup.stop.load(Ordering::Relaxed) {
            BackendError::Interrupted
        } else {
            BackendError::Failed("the workers promotion ran on failed or are gone".into())
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
        self.share_answers(&answers);
        Ok(answers.into_iter().map(build_of).collect())
    }

    /// The GPU runs and times the variant's PTX (or its cubin, assembled
    /// from it), nothing else of the IR.
    fn runs_ptx(&self) -> bool {
        true
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
            self.share_answers(&answers);
            return Ok(answers.into_iter().map(assessment_of).collect());
        }
        let requests = patches
            .iter()
            .map(|p| {
                // Promotion's variants mostly pass: both builds assembled.
                let request = Request::compile_measured(
                    0,
                    p.clone(),
                    self.setup.prescreen.for_promotion(),
                    self.setup.cubin_for.clone(),
                    false,
                );
                (request, None)
            })
            .collect();
        let compiled = self.ask(&self.compile, requests)?;
        let mut out: Vec<Option<Assessment>> = Vec::with_capacity(patches.len());
        let mut measures = Vec::new();
        let mut utilization = Utilization::default();
        for (answer, patch) in compiled.into_iter().zip(patches) {
            let compiled = Compiled::of(answer, &mut utilization);
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
        self.share(&utilization.spent);
        let mut measured = self.ask(&self.gpu, measures)?.into_iter();
        Ok(out
            .into_iter()
            .map(|a| a.unwrap_or_else(|| assessment_of(measured.next().expect("one per measure"))))
            .collect())
    }

    /// Started after a batch, by the backend's gate.
    fn start_safety_check(&mut self, build: &Build) -> Result<GateStart, BackendError> {
        if !self.setup.gated {
            return Ok(GateStart::Verdict(None));
        }
        let mut outputs = self.outputs.lock().unwrap_or_else(|e| e.into_inner());
        outputs.gate_queue.push(build.clone());
        Ok(GateStart::Started)
    }

    fn safety_check(&mut self, build: &Build) -> Result<Option<String>, BackendError> {
        match self.setup.gated {
            true => Err(BackendError::Failed(format!(
                "the safety gate checks {} only after a batch promotion ran beside",
                build.ptx_hash
            ))),
            false => Ok(None),
        }
    }
}
