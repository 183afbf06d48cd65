//! The engine's side of GPU evaluation: a pool of compile workers
//! (`gevod eval-worker`: LLVM, and the simulator pre-screen) feeding a GPU
//! worker per device (`gevod gpu-worker`). Compilation runs ahead of the
//! GPUs, and each compiled variant goes to the next idle GPU worker at
//! once (no batch waits for its slowest variant), so a GPU does not wait on
//! LLVM nor on another GPU; a worker that crashes, hangs or loses its
//! context costs one variant and a respawn.

use super::background_gate::BackgroundGate;
use super::pool::{assessment_of, PoolOptions, WorkerPool};
use super::sanitize::SafetyGate;
use super::{Handler, Request, Response};
use crate::config::Prescreen;
use crate::cuda::measure::{MeasureOptions, Measurement, Measurer};
use gevo_ir::{KernelIr, Patch};
use gevo_model::assessment::Assessment;
use gevo_model::device::DeviceInfo;
use gevo_model::spec::{Spec, TestSet, TestTarget};
use gevo_model::stats::Decided;
use gevo_model::utilization::{StartUp, Utilization};
use gevo_search::evolve::{
    Backend, BackendError, Build, EndedPromotion, Evaluated, GateStart, Promotion, Scope,
};

mod ahead;
mod batch_sides;
mod pipeline;
mod promotion_lane;
use ahead::{CompiledAhead, MeasuredAhead};
use batch_sides::{compile_failure, Purpose};
use promotion_lane::{LaneSetup, Running};
use std::sync::atomic::AtomicBool;
use std::sync::{mpsc, Arc};
use std::time::Instant;

/// A GPU worker's request handler: measures PTX with its [`Measurer`].
pub struct GpuWorker {
    measurer: Measurer,
    start_up: StartUp,
}

impl GpuWorker {
    /// `started_s`: the seconds the whole start took; what the measurer
    /// did not spend of them went to set-up (spec, IR, the original's PTX,
    /// the device probe).
    pub fn new(measurer: Measurer, started_s: f64) -> Self {
        let m = measurer.start_up();
        let start_up = StartUp {
            setup_s: started_s - (m.context_s + m.inputs_s + m.upload_s + m.references_s),
            ..m.clone()
        };
        GpuWorker { measurer, start_up }
    }

    pub fn scope(device: &DeviceInfo) -> Scope {
        Scope {
            backend: "cuda".into(),
            target: device.target(),
        }
    }
}

impl Handler for GpuWorker {
    fn scope(&self) -> Scope {
        GpuWorker::scope(self.measurer.device())
    }

    fn device(&self) -> Option<DeviceInfo> {
        Some(self.measurer.device().clone())
    }

    fn start_up(&self) -> Option<StartUp> {
        Some(self.start_up.clone())
    }

    fn handle(&mut self, request: Request) -> Result<(Response, bool), String> {
        match request {
            Request::Measure {
                id,
                ptx,
                cubin,
                guarded,
                set,
                race,
            } => {
                let measured =
                    self.measurer
                        .measure(&ptx, cubin.as_ref(), guarded.as_ref(), set, race);
                Ok((
                    Response::Assessed {
                        id,
                        assessment: measured.assessment,
                        exiting: measured.fatal,
                        spent: measured.spent,
                        rounds: measured.rounds,
                        stopped_early: measured.stopped.is_some(),
                        stopped_better: measured.stopped == Some(Decided::Better),
                    },
                    measured.fatal,
                ))
            }
            other => Err(format!(
                "a GPU worker only measures PTX, not {:?}",
                other.id()
            )),
        }
    }
}

/// How the GPU backend starts its workers.
pub struct CudaOptions {
    /// `gevod eval-worker` processes: compilation and the pre-screen.
    pub compile: PoolOptions,
    /// `gevod gpu-worker` processes, one per device.
    pub gpu: PoolOptions,
    pub device: DeviceInfo,
    /// The target the compile workers emit PTX for.
    pub arch: String,
    /// The GPU architecture compile workers assemble variants for (with
    /// ptxas, where they find one), so the GPU worker does not JIT them.
    pub cubin_for: Option<String>,
    /// Which of the simulator's train tests each new variant runs on first.
    pub prescreen: Prescreen,
    /// compute-sanitizer on each variant about to be validated.
    pub gate: Option<SafetyGate>,
    /// How the search's variants are timed.
    pub measurement: Measurement,
}

/// Compile workers and GPU workers as one [`Backend`].
pub struct CudaBackend {
    compile: WorkerPool,
    gpu: WorkerPool,
    scope: Scope,
    prescreen: Prescreen,
    cubin_for: Option<String>,
    /// Variants rejected by the pre-screen (since start).
    pub screened_out: u64,
    gate: Option<BackgroundGate>,
    measurement: Measurement,
    /// The train cost new variants race against (adaptive measurement).
    race: Option<f64>,
    /// Workers' time and the search's measurements since `since`.
    utilization: Utilization,
    since: Instant,
    /// GPU workers started, and their start-up seconds, at `since`.
    gpu_starts_seen: (u64, f64),
    /// The GPU pool's idle seconds already counted in a utilization.
    gpu_idle_seen: f64,
    /// The promotion running beside the search, if one was started and
    /// not handed back.
    promotion: Option<Running>,
    /// The next batch, compiled while this one is measured, and what of
    /// it was measured where a GPU had nothing else to do.
    ahead: CompiledAhead,
    measured_ahead: MeasuredAhead,
    /// Whether a batch leaves promotion's measurements under way to the
    /// next ([`CudaBackend::carry_promotion`]).
    carry_promotion: bool,
}

impl CudaBackend {
    /// Starts the compile workers with the simulator's tests (the
    /// pre-screen runs the sim train tests) and the GPU worker with
    /// the GPU's (`[tests.sim]`, `[tests.gpu]` over `[tests]`).
    pub fn start(
        options: CudaOptions,
        spec: &Spec,
        stop: Arc<AtomicBool>,
    ) -> Result<Self, BackendError> {
        let scope = GpuWorker::scope(&options.device);
        let compile_scope = Scope {
            backend: "sim".into(),
            target: options.arch.clone(),
        };
        // Both pools start at once: the GPU worker's start (context, inputs,
        // references) takes seconds, as do fifteen compile workers'.
        let sim_spec = spec.for_backend(TestTarget::Sim);
        let compile = WorkerPool::launch(options.compile, &sim_spec, compile_scope, stop.clone())?;
        let gpu_spec = spec.for_backend(TestTarget::Gpu);
        let gpu = WorkerPool::launch(options.gpu, &gpu_spec, scope.clone(), stop)?;
        let (compile, gpu) = (compile.ready()?, gpu.ready()?);
        Ok(CudaBackend {
            compile,
            gpu,
            scope,
            prescreen: options.prescreen,
            cubin_for: options.cubin_for,
            screened_out: 0,
            gate: match options.gate {
                Some(gate) => Some(BackgroundGate::start(gate).map_err(|e| {
                    BackendError::Failed(format!("starting the safety gate's thread: {e}"))
                })?),
                None => None,
            },
            measurement: options.measurement,
            race: None,
            utilization: Utilization::default(),
            since: Instant::now(),
            gpu_starts_seen: (0, 0.0),
            gpu_idle_seen: 0.0,
            promotion: None,
            ahead: CompiledAhead::default(),
            measured_ahead: MeasuredAhead::default(),
            carry_promotion: true,
        })
    }

    /// On (the default), a batch whose own variants are measured ends
    /// though promotion's measurement is under way, which the next batch
    /// delivers; off, it waits for it (as before; the promotion_beside
    /// benchmark compares the two).
    pub fn carry_promotion(&mut self, on: bool) {
        self.carry_promotion = on;
    }

    /// GPU workers replaced (a lost context, a crash, a hang).
    pub fn gpu_restarts(&self) -> u64 {
        self.gpu.respawns
    }

    /// GPU worker replacements that were a spare already started.
    pub fn standby_swaps(&self) -> u64 {
        self.gpu.standby_swaps
    }

    /// Measures ready-made PTX (no compilation, no pre-screen), in order.
    pub fn measure_ptx(
        &mut self,
        ptx: &[String],
        set: TestSet,
    ) -> Result<Vec<Assessment>, BackendError> {
        let requests = ptx
            .iter()
            .map(|p| Request::Measure {
                id: self.gpu.next_id(),
                ptx: p.clone(),
                cubin: None,
                guarded: None,
                set,
                race: None,
            })
            .collect();
        Ok(self
            .gpu
            .run(requests)?
            .into_iter()
            .map(assessment_of)
            .collect())
    }

    /// What the promotion beside the search left: its compile workers'
    /// time, and its safety-gate checks, handed to the gate.
    fn take_lane_outputs(&mut self) -> Result<(), BackendError> {
        let Some(running) = &self.promotion else {
            return Ok(());
        };
        let outputs = running.take_outputs();
        self.utilization.spent += &outputs.spent;
        self.utilization.promotion += &outputs.spent;
        if let Some(gate) = &mut self.gate {
            for build in &outputs.gate_queue {
                gate.submit(build)?;
            }
        }
        Ok(())
    }

    /// Every patch compiled at once and measured in turn on the first
    /// GPU (its measurements are compared with each other), raced against
    /// `race` where given.
    fn assess_each(
        &mut self,
        patches: &[Patch],
        set: TestSet,
        race: Option<f64>,
    ) -> Result<Vec<Assessment>, BackendError> {
        if set == TestSet::Generated {
            let out = self.compile.assess(patches, set);
            // Only promotion runs the generated tests.
            let spent = self.compile.take_assess_spent();
            self.utilization.spent += &spent;
            self.utilization.promotion += &spent;
            return out;
        }
        self.gpu.pin(Some(0));
        let out = self.pipeline(patches, set, &|_| false, Purpose::Promotion { race }, false);
        self.gpu.pin(None);
        let evaluated = out?;
        Ok(evaluated
            .into_iter()
            .map(|e| match (e.build, e.assessment) {
                (_, Some(a)) => a,
                (Err(reason), None) => compile_failure(reason),
                (Ok(_), None) => unreachable!("promotion measures or screens out every build"),
            })
            .collect())
    }

    /// The search's race threshold where it measures adaptively.
    fn race_for(&self, set: TestSet) -> Option<f64> {
        match (self.measurement, set) {
            (Measurement::Adaptive, TestSet::Train) => self.race,
            _ => None,
        }
    }
}

impl Backend for CudaBackend {
    fn scope(&self) -> Scope {
        self.scope.clone()
    }

    fn respawns(&self) -> u64 {
        self.compile.respawns + self.gpu.respawns
    }

    /// Both pools share the one stop flag.
    fn stopping(&self) -> bool {
        self.compile.stopping()
    }

    fn safety_check(&mut self, build: &Build) -> Result<Option<String>, BackendError> {
        let Some(gate) = &mut self.gate else {
            return Ok(None);
        };
        let verdict = gate.check_now(build)?;
        self.utilization.spent.sanitizer_s += verdict.seconds;
        Ok(verdict.outcome?)
    }

    /// The gate runs in a thread of its own, beside the GPU worker.
    fn start_safety_check(&mut self, build: &Build) -> Result<GateStart, BackendError> {
        match &mut self.gate {
            Some(gate) => {
                gate.submit(build)?;
                Ok(GateStart::Started)
            }
            None => Ok(GateStart::Verdict(None)),
        }
    }

    fn safety_verdicts(
        &mut self,
        wait: bool,
    ) -> Result<Vec<(String, Option<String>)>, BackendError> {
        let Some(gate) = &mut self.gate else {
            return Ok(Vec::new());
        };
        let mut verdicts = Vec::new();
        for verdict in gate.verdicts(wait)? {
            self.utilization.spent.sanitizer_s += verdict.seconds;
            verdicts.push((verdict.ptx_hash, verdict.outcome?));
        }
        Ok(verdicts)
    }

    fn focus_safety_check(&mut self, ptx_hash: &str) {
        if let Some(gate) = &mut self.gate {
            gate.focus(ptx_hash);
        }
    }

    fn safety_gate(&self) -> Option<String> {
        self.gate.as_ref().map(|g| g.describe().to_string())
    }

    /// The GPU's tests: they are what the results measure.
    fn test_set_hash(&self, set: TestSet) -> String {
        self.gpu.test_set_hash(set)
    }

    fn compile(&mut self, patches: &[Patch]) -> Result<Vec<Result<Build, String>>, BackendError> {
        self.compile.compile(patches)
    }

    /// The GPU runs and times the variant's PTX (or its cubin, assembled
    /// from it), nothing else of the IR.
    fn runs_ptx(&self) -> bool {
        true
    }

    /// The generated held-out tests are correctness tests: the compile
    /// workers run them on the simulator, as they run the pre-screen.
    fn runs_generated(&self) -> bool {
        true
    }

    /// Every patch compiled, pre-screened and measured (no deduplication:
    /// each patch gets its own measurement), all on the first device: the
    /// promotion's measurements, compared with each other. The generated
    /// tests run on the simulator, in the compile workers.
    fn assess(&mut self, patches: &[Patch], set: TestSet) -> Result<Vec<Assessment>, BackendError> {
        self.assess_each(patches, set, None)
    }

    /// The GPU worker races against a threshold less its margin: the
    /// threshold whose line is `line`.
    fn assess_against(
        &mut self,
        patches: &[Patch],
        set: TestSet,
        line: f64,
    ) -> Result<Vec<Assessment>, BackendError> {
        // GPU workers measure with the default options (worker/setup.rs).
        let threshold = MeasureOptions::default().threshold_for_line(line);
        self.assess_each(patches, set, Some(threshold))
    }

    fn evaluate(
        &mut self,
        patches: &[Patch],
        set: TestSet,
        known: &(dyn Fn(&str) -> bool + Sync),
    ) -> Result<Vec<Evaluated>, BackendError> {
        let race = self.race_for(set);
        let evaluated = self.pipeline(patches, set, known, Purpose::Search { race }, false)?;
        // The engine's fitness cache takes every assessment of a train
        // batch, and holds what `known` answers: the compile workers hear
        // of those PTX, and answer them after code generation from now on.
        // The known ones matter after a resume, whose workers start with
        // nothing but whose cache holds the whole job's PTX (those the
        // engine is about to forget the pool's log does not take).
        if set == TestSet::Train {
            self.compile.note_known(
                evaluated
                    .iter()
                    .filter_map(|e| Some((e.build.as_ref().ok()?, e.assessment.is_some())))
                    .filter(|(b, assessed)| *assessed || known(&b.ptx_hash))
                    .map(|(b, _)| b.ptx_hash.clone()),
            );
        }
        Ok(evaluated)
    }

    /// The compile workers forget these before the engine does (the batch
    /// compiling ahead may still take them for known: the engine drops them
    /// only after it).
    fn forget_known(&mut self, ptx_hashes: &[String]) {
        self.compile.forget_known(ptx_hashes);
    }

    /// The next batch compiles while this one is measured.
    fn compiles_ahead(&self) -> bool {
        true
    }

    fn compile_ahead(&mut self, next: mpsc::Receiver<Vec<Patch>>) {
        self.ahead.expect(next);
    }

    /// Promotion shares the workers with the batches that follow it.
    fn promotes_beside(&self) -> bool {
        true
    }

    fn start_promotion(&mut self, promotion: Promotion, ir: KernelIr) -> Result<(), BackendError> {
        if self.promotion.is_some() {
            return Err(BackendError::Failed(
                "a promotion already runs beside the search".into(),
            ));
        }
        let setup = LaneSetup {
            scope: self.scope.clone(),
            test_set_hashes: self.gpu.test_set_hashes(),
            prescreen: self.prescreen,
            cubin_for: self.cubin_for.clone(),
            gated: self.gate.is_some(),
            stop: self.compile.stop_flag(),
        };
        self.promotion = Some(Running::start(
            promotion,
            ir,
            setup,
            self.compile.waker(),
            self.gpu.waker(),
        )?);
        Ok(())
    }

    fn promotion_started(&self) -> bool {
        self.promotion.is_some()
    }

    /// With `wait`, a batch of no variants serves the promotion until it
    /// ends.
    fn ended_promotion(&mut self, wait: bool) -> Result<Option<EndedPromotion>, BackendError> {
        if self.promotion.is_none() {
            return Ok(None);
        }
        if wait {
            self.pipeline(&[], TestSet::Train, &|_| false, Purpose::PROMOTION, true)?;
        }
        let ended = match &self.promotion {
            Some(running) => running.ended(wait),
            None => Ok(None),
        };
        if !matches!(ended, Ok(None)) {
            // Its last gate checks and compile time, then it is done.
            self.take_lane_outputs()?;
            self.promotion = None;
        }
        ended
    }

    fn race_against(&mut self, threshold: Option<f64>) {
        self.race = threshold;
    }

    fn take_utilization(&mut self) -> Option<Utilization> {
        let mut u = std::mem::take(&mut self.utilization);
        u.wall_s = self.since.elapsed().as_secs_f64();
        u.gpu_workers = self.gpu.size() as u32;
        u.compile_workers = self.compile.size() as u32;
        // Every GPU worker started so far: the first ones and replacements.
        let starts = self.gpu.respawns + self.gpu.size() as u64;
        u.gpu_starts = starts.saturating_sub(self.gpu_starts_seen.0);
        u.gpu_start_s = self.gpu.startup_s - self.gpu_starts_seen.1;
        u.gpu_start_parts = std::mem::take(&mut self.gpu.start_parts);
        self.gpu_starts_seen = (starts, self.gpu.startup_s);
        u.gpu_idle_s = self.gpu.idle_s - self.gpu_idle_seen;
        self.gpu_idle_seen = self.gpu.idle_s;
        self.since = Instant::now();
        Some(u)
    }
}
