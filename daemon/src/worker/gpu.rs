//! The engine's side of GPU evaluation: a pool of compile workers
//! (`gevod eval-worker`: LLVM, and the simulator pre-screen) feeding a GPU
//! worker per device (`gevod gpu-worker`). Compilation runs ahead of the
//! GPUs, and each compiled variant goes to the next idle GPU worker at
//! once (no batch waits for its slowest variant), so a GPU does not wait on
//! LLVM nor on another GPU; a worker that crashes, hangs or loses its
//! context costs one variant and a respawn.

use super::background_gate::BackgroundGate;
use super::pool::{failed_assessment, Feed, PoolOptions, Waker, WorkerPool};
use super::sanitize::SafetyGate;
use super::{Handler, Request, Response};
use crate::assessment::Assessment;
use crate::busy::{StartUp, Utilization};
use crate::cuda::measure::{Measurement, Measurer};
use crate::device::DeviceInfo;
use crate::evolve::{Backend, BackendError, Build, Evaluated, GateStart, Scope};
use crate::ir::Patch;
use crate::spec::{Spec, TestSet, TestTarget};
use std::collections::{BTreeMap, BTreeSet};
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
                        stopped_early: measured.stopped_early,
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
    /// Run each new variant on the simulator's train tests first.
    pub prescreen: bool,
    /// compute-sanitizer on each variant about to be validated.
    pub gate: Option<SafetyGate>,
    /// How the search's variants are timed.
    pub measurement: Measurement,
}

/// Why variants are being measured: the search's (which may race them
/// against the selection threshold, and whose counts the report shows), or
/// promotion's (always the full rounds).
#[derive(Debug, Clone, Copy)]
enum Purpose {
    Search { race: Option<f64> },
    Promotion,
}

/// Compile workers and GPU workers as one [`Backend`].
pub struct CudaBackend {
    compile: WorkerPool,
    gpu: WorkerPool,
    scope: Scope,
    prescreen: bool,
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
        let sim_spec = spec.for_backend(TestTarget::Sim);
        let compile = WorkerPool::start(options.compile, &sim_spec, compile_scope, stop.clone())?;
        let gpu_spec = spec.for_backend(TestTarget::Gpu);
        let gpu = WorkerPool::start(options.gpu, &gpu_spec, scope.clone(), stop)?;
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
        })
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

    /// Compiles (and pre-screens) every patch on the compile workers while
    /// the GPU workers measure: each variant goes to the next idle GPU
    /// worker as soon as it and the variants before it are compiled
    /// ([`Measuring`]), so no GPU worker waits for another's variant. Each
    /// distinct PTX that `known` does not answer is measured once.
    fn pipeline(
        &mut self,
        patches: &[Patch],
        set: TestSet,
        known: &dyn Fn(&str) -> bool,
        purpose: Purpose,
    ) -> Result<Vec<Evaluated>, BackendError> {
        let prescreen = self.prescreen;
        let cubin_for = &self.cubin_for;
        let race = match purpose {
            Purpose::Search { race } => race,
            Purpose::Promotion => None,
        };
        let (compile, gpu) = (&mut self.compile, &mut self.gpu);
        let waker = gpu.waker();
        let mut measuring = Measuring {
            compiled: None,
            pending: BTreeMap::new(),
            producer_done: false,
            out: Vec::with_capacity(patches.len()),
            seen: BTreeSet::new(),
            known,
            measured: Vec::new(),
            patches,
            utilization: &mut self.utilization,
            screened_out: 0,
            set,
            race,
            purpose,
        };
        std::thread::scope(|s| -> Result<(), BackendError> {
            let (sender, compiled) = mpsc::channel();
            measuring.compiled = Some(compiled);
            let producer = s.spawn(move || -> Result<(), BackendError> {
                let requests = patches
                    .iter()
                    .map(|p| Request::Compile {
                        id: compile.next_id(),
                        patch: p.clone(),
                        prescreen,
                        cubin_for: cubin_for.clone(),
                        guarded: true,
                        // Few of a search's variants pass their check.
                        defer_assembly: matches!(purpose, Purpose::Search { .. }),
                    })
                    .collect();
                let mut forward = Forward {
                    requests: Some(requests),
                    sender,
                    waker: waker.clone(),
                    abandoned: false,
                };
                let done = compile.run_fed(&mut forward);
                drop(forward); // the GPU side sees the end
                waker.wake();
                done
            });
            let measured = gpu.run_fed(&mut measuring);
            // A GPU side that failed leaves the compile workers nothing to
            // do but the variants they hold.
            measuring.compiled = None;
            let compiled = producer.join().expect("the compile thread does not panic");
            measured.and(compiled)
        })?;
        tracing::debug!(
            variants = patches.len(),
            measured = measuring.measured.len(),
            "batch measured"
        );
        self.screened_out += measuring.screened_out;
        Ok(measuring.out)
    }
}

/// The compile side of [`CudaBackend::pipeline`]: every patch's request
/// queued at once; each answer sent to the GPU side as it comes.
struct Forward {
    requests: Option<Vec<Request>>,
    sender: mpsc::Sender<(usize, Result<Response, String>)>,
    waker: Waker,
    abandoned: bool,
}

impl Feed for Forward {
    fn more(&mut self, _: &mut dyn FnMut() -> u64) -> Option<Vec<Request>> {
        self.requests.take()
    }

    fn answered(&mut self, index: usize, result: Result<Response, String>) {
        if self.sender.send((index, result)).is_err() {
            self.abandoned = true;
        }
        self.waker.wake();
    }

    fn abandoned(&self) -> bool {
        self.abandoned
    }
}

/// The GPU side of [`CudaBackend::pipeline`]: compiled variants taken in
/// the patches' order (so the same PTX is measured for the same patch
/// however the compile workers finish), each fresh one handed to the GPU
/// workers at once, each answer put in its place.
struct Measuring<'a> {
    compiled: Option<mpsc::Receiver<(usize, Result<Response, String>)>>,
    /// Compiled ahead of a variant still compiling before them.
    pending: BTreeMap<usize, Result<Response, String>>,
    producer_done: bool,
    out: Vec<Evaluated>,
    seen: BTreeSet<String>,
    known: &'a dyn Fn(&str) -> bool,
    /// Per GPU request, its variant's index in `out` (and `patches`).
    measured: Vec<usize>,
    patches: &'a [Patch],
    utilization: &'a mut Utilization,
    screened_out: u64,
    set: TestSet,
    race: Option<f64>,
    purpose: Purpose,
}

impl Measuring<'_> {
    /// A compiled variant in its place; the measure request when it is a
    /// fresh one that passed the pre-screen.
    fn take(
        &mut self,
        response: Result<Response, String>,
        next_id: &mut dyn FnMut() -> u64,
    ) -> Option<Request> {
        let mut cubin = None;
        let mut guarded = None;
        let (build, screen) = match response {
            Ok(Response::Built {
                build,
                cubin: assembled,
                screened_out,
                guarded: guarded_build,
                spent,
                ..
            }) => {
                self.utilization.spent += &spent;
                cubin = assembled;
                guarded = guarded_build;
                (Ok(build), screened_out)
            }
            Ok(Response::CompileFailed { reason, spent, .. }) => {
                self.utilization.spent += &spent;
                (Err(reason), None)
            }
            Ok(other) => (Err(format!("unexpected answer {other:?}")), None),
            Err(reason) => (Err(format!("code generation failed: {reason}")), None),
        };
        let fresh = match (&build, self.purpose) {
            // Promotion measures every patch it is given (equal PTX too:
            // its measurements are compared with each other).
            (Ok(_), Purpose::Promotion) => true,
            (Ok(b), Purpose::Search { .. }) => {
                !(self.known)(&b.ptx_hash) && self.seen.insert(b.ptx_hash.clone())
            }
            (Err(_), _) => false,
        };
        let mut request = None;
        let assessment = match (fresh, screen) {
            (true, Some(a)) => {
                self.screened_out += 1;
                Some(a)
            }
            (true, None) => {
                self.measured.push(self.out.len());
                request = Some(Request::Measure {
                    id: next_id(),
                    ptx: ptx_of(&build).to_string(),
                    cubin,
                    guarded,
                    set: self.set,
                    race: self.race,
                });
                None
            }
            (false, _) => None,
        };
        self.out.push(Evaluated { build, assessment });
        request
    }
}

impl Feed for Measuring<'_> {
    fn more(&mut self, next_id: &mut dyn FnMut() -> u64) -> Option<Vec<Request>> {
        if let Some(compiled) = &self.compiled {
            loop {
                match compiled.try_recv() {
                    Ok((i, response)) => {
                        self.pending.insert(i, response);
                    }
                    Err(mpsc::TryRecvError::Empty) => break,
                    Err(mpsc::TryRecvError::Disconnected) => {
                        self.producer_done = true;
                        break;
                    }
                }
            }
        }
        let mut requests = Vec::new();
        while let Some(response) = self.pending.remove(&self.out.len()) {
            requests.extend(self.take(response, next_id));
        }
        // The compile side ended: all compiled, or it failed (its error is
        // the pipeline's).
        if requests.is_empty() && self.producer_done {
            return None;
        }
        Some(requests)
    }

    fn answered(&mut self, index: usize, result: Result<Response, String>) {
        let variant = self.measured[index];
        account(
            self.utilization,
            &result,
            self.purpose,
            &self.patches[variant],
        );
        self.out[variant].assessment = Some(assessment_of(result));
    }
}

impl CudaBackend {
    /// Every patch compiled at once and measured in turn.
    fn assess_each(
        &mut self,
        patches: &[Patch],
        set: TestSet,
    ) -> Result<Vec<Assessment>, BackendError> {
        let evaluated = self.pipeline(patches, set, &|_| false, Purpose::Promotion)?;
        Ok(evaluated
            .into_iter()
            .map(|e| match (e.build, e.assessment) {
                (_, Some(a)) => a,
                (Err(reason), None) => Assessment::failed("compile", "invalid", reason),
                (Ok(_), None) => unreachable!("promotion measures or screens out every build"),
            })
            .collect())
    }
}

fn ptx_of(build: &Result<Build, String>) -> &str {
    &build
        .as_ref()
        .expect("only built variants are measured")
        .ptx
}

/// Adds a GPU worker's answer to the utilization: its time always, its
/// rounds for the search's measurements.
fn account(
    utilization: &mut Utilization,
    response: &Result<Response, String>,
    purpose: Purpose,
    patch: &Patch,
) {
    let searching = matches!(purpose, Purpose::Search { .. });
    if searching {
        utilization.measured += 1;
    }
    if let Ok(Response::Assessed {
        spent,
        rounds,
        stopped_early,
        exiting,
        assessment,
        ..
    }) = response
    {
        if *exiting {
            // What guards do not catch yet (docs/evolve.md): the kinds that
            // still cost a GPU worker start, for whoever adds the next guard
            // (the patch reproduces it: `gevod run --patch`).
            let failure = assessment.first_failure();
            tracing::info!(failure = ?failure, patch = %patch.to_json(), "a variant cost its GPU worker a restart");
        }
        utilization.spent += spent;
        if searching && *rounds > 0 {
            utilization.timed += 1;
            utilization.rounds += u64::from(*rounds);
            utilization.stopped_early += u64::from(*stopped_early);
        }
    }
}

fn assessment_of(response: Result<Response, String>) -> Assessment {
    match response {
        Ok(Response::Assessed { assessment, .. }) => assessment,
        Ok(other) => failed_assessment(format!("unexpected answer {other:?}")),
        Err(reason) => failed_assessment(reason),
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
        if set == TestSet::Generated {
            return self.compile.assess(patches, set);
        }
        self.gpu.pin(Some(0));
        let out = self.assess_each(patches, set);
        self.gpu.pin(None);
        out
    }

    fn evaluate(
        &mut self,
        patches: &[Patch],
        set: TestSet,
        known: &dyn Fn(&str) -> bool,
    ) -> Result<Vec<Evaluated>, BackendError> {
        let race = match (self.measurement, set) {
            (Measurement::Adaptive, TestSet::Train) => self.race,
            _ => None,
        };
        self.pipeline(patches, set, known, Purpose::Search { race })
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
        self.since = Instant::now();
        Some(u)
    }
}
