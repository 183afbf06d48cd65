//! Which processes evaluate a job, for `gevod evolve` and the daemon alike:
//! a pool of `gevod eval-worker`s (the simulator, or a harness spec's
//! program), or the GPU backend (compile workers feeding a GPU worker). The
//! workers are this same executable, started with the arguments built here,
//! and load what they need themselves ([`load_worker_spec`], [`start_measurer`]).

use super::gpu::{CudaBackend, CudaOptions, GpuWorker};
use super::launch::Launcher;
use super::pool::{PoolOptions, WorkerPool};
use super::sanitize::{find_sanitizer, SafetyGate, SanitizeMode};
use crate::config::{CpuPriority, Prescreen};
use crate::cuda::measure::{MeasureError, MeasureOptions, Measurement, Measurer, Programs};
use crate::cuda::toolkit::Assembler;
use crate::cuda::{driver, CudaError};
use crate::harness::Runner;
use gevo_ir::{CodegenOptions, IrError, KernelIr};
use gevo_model::access::Reader;
use gevo_model::device::{DeviceInfo, DeviceSelector};
use gevo_model::spec::{self, Spec, SpecError, TestSet, TestTarget};
use gevo_search::evolve::{Backend, BackendError, Scope};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// Why evaluation could not start. Each names the spec it concerns.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("locating the gevod binary: {0}")]
    Executable(#[source] std::io::Error),
    #[error(transparent)]
    Spec(#[from] SpecError),
    #[error(transparent)]
    Cuda(#[from] CudaError),
    #[error(transparent)]
    Eval(#[from] gevo_search::eval::EvalError),
    #[error(transparent)]
    Harness(#[from] crate::harness::HarnessError),
    #[error("{}: {source}", spec.display())]
    Ir {
        spec: PathBuf,
        #[source]
        source: IrError,
    },
    #[error("{}: the original kernel: {source}", spec.display())]
    Original {
        spec: PathBuf,
        #[source]
        source: IrError,
    },
    #[error("{}: {source}", spec.display())]
    Measure {
        spec: PathBuf,
        #[source]
        source: Box<MeasureError>,
    },
    #[error("{}: {source}", spec.display())]
    Backend {
        spec: PathBuf,
        #[source]
        source: BackendError,
    },
}

/// The PTX target: the one asked for, else the GPU's, else the spec's,
/// else sm_90.
pub fn arch_for(spec: &Spec, arch: Option<String>, device: Option<&DeviceInfo>) -> String {
    arch.or_else(|| device.map(DeviceInfo::arch))
        .or_else(|| spec.arch.clone())
        .unwrap_or_else(|| gevo_ir::DEFAULT_ARCH.to_string())
}

/// Where a harness program's kernel launches run (`--harness sim|gpu` of
/// `gevod eval-worker`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HarnessTarget {
    Sim,
    Gpu,
}

impl HarnessTarget {
    pub fn name(self) -> &'static str {
        self.tests().name()
    }

    /// Whose tests the program runs: the simulator's or the GPU's.
    pub fn tests(self) -> TestTarget {
        match self {
            HarnessTarget::Sim => TestTarget::Sim,
            HarnessTarget::Gpu => TestTarget::Gpu,
        }
    }
}

impl std::str::FromStr for HarnessTarget {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "sim" => Ok(HarnessTarget::Sim),
            "gpu" => Ok(HarnessTarget::Gpu),
            _ => Err(format!("expected sim or gpu, not {s:?}")),
        }
    }
}

/// The harness runner of a worker: the simulator runs launches through this
/// very executable (`gevod sim-launch`); the GPU one on `device` (a UUID).
pub fn harness_runner(target: HarnessTarget, device: Option<String>) -> Result<Runner, SetupError> {
    Ok(match target {
        HarnessTarget::Sim => Runner::Simulate {
            gevod: std::env::current_exe().map_err(SetupError::Executable)?,
        },
        HarnessTarget::Gpu => Runner::Gpu { device },
    })
}

/// What evaluates a job's variants ([`WorkerSetup::evaluators`]).
pub enum Evaluators {
    /// `gevod eval-worker` processes, the scope they measure, and whose
    /// tests they run (the simulator's, or a harness program's GPU ones).
    Pool(PoolOptions, Scope, TestTarget),
    /// The GPU backend (compile workers and a GPU worker) on this device.
    Gpu(DeviceInfo),
}

impl Evaluators {
    /// The scope of the results: the cache's and the job's.
    pub fn scope(&self) -> Scope {
        match self {
            Evaluators::Pool(_, scope, _) => scope.clone(),
            Evaluators::Gpu(d) => GpuWorker::scope(d),
        }
    }
}

/// What the worker processes need to know.
#[derive(Clone)]
pub struct WorkerSetup<'a> {
    pub spec_path: &'a Path,
    /// The spec's text the workers use instead of reading `spec_path`
    /// (`--spec-text`): the daemon's snapshot of the version it checked.
    pub spec_text: Option<&'a Path>,
    /// The IR the workers load instead of the spec's (`--ir`).
    pub ir: Option<&'a Path>,
    pub arch: &'a str,
    pub libdevice: Option<&'a Path>,
    pub workers: usize,
    pub timeout: Duration,
    /// Who the spec's files are read for (the daemon: the spec's owner).
    pub reader: &'a Reader,
    /// The GPU backend's compute-sanitizer gate.
    pub sanitize: SanitizeMode,
    /// How the GPU backend times the search's variants.
    pub measurement: Measurement,
    /// Where the workers run: here, or as Slurm steps.
    pub launcher: &'a Launcher,
    /// GPUs behind the job besides the one `evaluators` is given: a GPU
    /// worker each (local workers only).
    pub more_devices: &'a [DeviceInfo],
    /// The compile and simulator workers' CPU priority.
    pub cpu: CpuPriority,
    /// GPU only: which of the simulator's train tests new variants run on
    /// before GPU time is spent on them.
    pub prescreen: Prescreen,
    /// The uid/gid harness commands run as (a root daemon's `[harness]
    /// user`); `None`: as this process.
    pub harness_user: Option<(u32, u32)>,
}

impl WorkerSetup<'_> {
    fn args(&self, command: &str) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec![
            command.into(),
            self.spec_path.into(),
            "--arch".into(),
            self.arch.into(),
        ];
        if let Some(text) = self.spec_text {
            args.push("--spec-text".into());
            args.push(text.into());
        }
        if let Some(ir) = self.ir {
            args.push("--ir".into());
            args.push(ir.into());
        }
        if let Some(l) = self.libdevice {
            args.push("--libdevice".into());
            args.push(l.into());
        }
        if let Some(r) = self.reader.worker_arg() {
            args.push("--on-behalf-of".into());
            args.push(r.into());
        }
        args
    }

    /// `gevod eval-worker` processes.
    pub fn compile_pool(&self) -> Result<PoolOptions, SetupError> {
        Ok(PoolOptions {
            launcher: self.launcher.clone(),
            cpu: self.cpu,
            ..PoolOptions::local(
                std::env::current_exe().map_err(SetupError::Executable)?,
                self.args("eval-worker"),
                self.workers,
                self.timeout,
                Duration::from_secs(120),
            )
        })
    }

    /// What evaluates `spec`'s variants: a pool of `gevod eval-worker`s (a
    /// harness spec's, on `device` or the simulator; or the simulator's for
    /// a kernel spec without a GPU), or the GPU backend on `device`.
    pub fn evaluators(
        &self,
        spec: &Spec,
        device: Option<&DeviceInfo>,
    ) -> Result<Evaluators, SetupError> {
        let (options, backend, tests) = match (&spec.harness, device) {
            (Some(_), device) => (
                self.harness_pool(device, self.harness_user)?,
                crate::harness::backend_name(device.is_some()),
                if device.is_some() {
                    TestTarget::Gpu
                } else {
                    TestTarget::Sim
                },
            ),
            (None, None) => (self.compile_pool()?, "sim", TestTarget::Sim),
            (None, Some(d)) => return Ok(Evaluators::Gpu(d.clone())),
        };
        // The workers greet with this same scope (`InProcess::scope`).
        let scope = Scope {
            backend: backend.into(),
            target: self.arch.to_string(),
        };
        Ok(Evaluators::Pool(options, scope, tests))
    }

    /// Starts what `evaluators` chose, with the tests of its backend (the
    /// pool's test-set hashes are those its workers run: `[tests.sim]` or
    /// `[tests.gpu]` over `[tests]`).
    pub fn start(
        &self,
        evaluators: Evaluators,
        spec: &Spec,
        stop: Arc<AtomicBool>,
    ) -> Result<Box<dyn Backend>, SetupError> {
        match evaluators {
            Evaluators::Pool(options, scope, tests) => {
                WorkerPool::start(options, &spec.for_backend(tests), scope, stop)
                    .map(|p| Box::new(p) as Box<dyn Backend>)
                    .map_err(|source| self.backend_error(source))
            }
            Evaluators::Gpu(device) => self
                .cuda_backend(spec, device, self.prescreen, stop)
                .map(|b| Box::new(b) as Box<dyn Backend>),
        }
    }

    /// What evaluates `spec`'s variants on `device` (the simulator when
    /// `None`), chosen and started.
    pub fn start_backend(
        &self,
        spec: &Spec,
        device: Option<&DeviceInfo>,
        stop: Arc<AtomicBool>,
    ) -> Result<Box<dyn Backend>, SetupError> {
        let evaluators = self.evaluators(spec, device)?;
        self.start(evaluators, spec, stop)
    }

    fn backend_error(&self, source: BackendError) -> SetupError {
        SetupError::Backend {
            spec: self.spec_path.to_path_buf(),
            source,
        }
    }

    /// `gevod eval-worker` processes that run a harness spec's command: on
    /// `device` (one at a time, so runs do not share the GPU), or on the
    /// simulator; as `user` when given.
    fn harness_pool(
        &self,
        device: Option<&DeviceInfo>,
        user: Option<(u32, u32)>,
    ) -> Result<PoolOptions, SetupError> {
        let mut pool = self.compile_pool()?;
        match device {
            Some(d) => {
                pool.args.extend([
                    "--harness".into(),
                    HarnessTarget::Gpu.name().into(),
                    "--device".into(),
                    d.uuid.clone().into(),
                ]);
                pool.workers = 1;
            }
            None => pool
                .args
                .extend(["--harness".into(), HarnessTarget::Sim.name().into()]),
        }
        if let Some((uid, gid)) = user {
            pool.args
                .extend(["--run-as".into(), format!("{uid}:{gid}").into()]);
        }
        Ok(pool)
    }

    /// The GPU backend: compile workers (one core is left to the GPU
    /// worker) and one GPU worker on `device` (each runs its backend's
    /// tests: [`CudaBackend::start`]).
    pub fn cuda_backend(
        &self,
        spec: &Spec,
        device: DeviceInfo,
        prescreen: Prescreen,
        stop: Arc<AtomicBool>,
    ) -> Result<CudaBackend, SetupError> {
        let mut compile = self.compile_pool()?;
        compile.workers = self.workers.saturating_sub(1).max(1);
        let mut gpu = compile.clone();
        gpu.args = self.args("gpu-worker");
        let devices = self.gpu_worker_devices(&device)?;
        gpu.workers = devices.len();
        gpu.slot_args = devices
            .into_iter()
            .map(|d| vec!["--device".into(), d.into()])
            .collect();
        gpu.gpu = true;
        // Its timing loop must not wait for a core: it holds a GPU.
        gpu.cpu = CpuPriority::Normal;
        // A spare GPU worker per device, ready when a variant crashes or
        // hangs the active one (local processes only: a Slurm step would
        // hold a second GPU allocation).
        gpu.standby = matches!(self.launcher, Launcher::Local);
        // A stop kills a running check: the GPU is another user's at once.
        // With several local GPUs the gate, which runs beside the search,
        // takes the last one: promotion times held-out tests on the first.
        let gate_device = match self.launcher {
            Launcher::Local => self.more_devices.last().unwrap_or(&device),
            _ => &device,
        };
        let gate = self
            .safety_gate(spec, gate_device)?
            .map(|g| g.stopped_by(stop.clone()));
        // Compile workers assemble where this process finds ptxas too
        // (they share its environment); the GPU worker loads the original
        // the same way or ignores the cubins (`cuda::load`).
        let cubin_for = Assembler::find().map(|_| device.arch());
        let options = CudaOptions {
            compile,
            gpu,
            device,
            arch: self.arch.to_string(),
            cubin_for,
            prescreen,
            gate,
            measurement: self.measurement,
        };
        CudaBackend::start(options, spec, stop).map_err(|source| self.backend_error(source))
    }
}

impl WorkerSetup<'_> {
    /// The `--device` of each GPU worker: here, `device` and the further
    /// devices, which must be the same model with the same driver (results
    /// are keyed by that: `DeviceInfo::target`); under Slurm, device 0 of
    /// each of `gpu_steps` steps (Slurm gives each step its GPU).
    fn gpu_worker_devices(&self, device: &DeviceInfo) -> Result<Vec<String>, SetupError> {
        if let Launcher::Slurm(slurm) = self.launcher {
            return Ok(vec![
                self.launcher.gpu_device_arg(&device.uuid);
                slurm.gpu_steps.max(1)
            ]);
        }
        let mut devices = vec![device.uuid.clone()];
        for other in self.more_devices {
            if other.target() != device.target() {
                return Err(self.backend_error(BackendError::Failed(format!(
                    "GPU {} is a {} and GPU {} a {}: one search measures on one model (run a job per model)",
                    device.ordinal,
                    device.target(),
                    other.ordinal,
                    other.target()
                ))));
            }
            devices.push(other.uuid.clone());
        }
        Ok(devices)
    }

    /// compute-sanitizer around `gevod gpu-check` on the smallest held-out
    /// test (fewest threads over all its launches), as `sanitize` says.
    fn safety_gate(
        &self,
        spec: &Spec,
        device: &DeviceInfo,
    ) -> Result<Option<SafetyGate>, SetupError> {
        let sanitizer = match (self.sanitize, find_sanitizer()) {
            (SanitizeMode::Off, _) => return Ok(None),
            (_, Some(s)) => s,
            (SanitizeMode::Auto, None) => {
                tracing::info!("compute-sanitizer not found: no GPU safety gate");
                return Ok(None);
            }
            (SanitizeMode::Required, None) => {
                return Err(self.backend_error(BackendError::Failed(
                    "sanitize is \"required\", but compute-sanitizer is neither on the PATH nor in $CUDA_HOME/bin or /usr/local/cuda/bin".into(),
                )))
            }
        };
        // The GPU's held-out tests: the ones the variant was measured on.
        let spec = spec.for_backend(TestTarget::Gpu);
        let mut smallest: Option<(u64, String)> = None;
        for test in spec.tests(TestSet::Heldout) {
            let threads = spec.thread_count(test)?;
            if smallest.as_ref().is_none_or(|(t, _)| threads < *t) {
                smallest = Some((threads, test.name.clone()));
            }
        }
        let Some((_, test)) = smallest else {
            return Ok(None);
        };
        let mut args = self.args("gpu-check");
        args.extend(["--device".into(), device.uuid.clone().into()]);
        let program = std::env::current_exe().map_err(SetupError::Executable)?;
        // Racecheck runs a kernel tens of times slower than it runs alone.
        let timeout = self.timeout.max(Duration::from_secs(60)) * 10;
        Ok(Some(SafetyGate::new(
            sanitizer, program, args, test, timeout,
        )))
    }
}

/// A worker's spec, with `tests`' test sets (the simulator's for eval
/// workers, the GPU's for a GPU worker or a harness program on a GPU), and
/// the IR path replaced when the daemon gives a snapshot (the build may
/// have rewritten the spec's IR since).
pub fn load_worker_spec(
    path: &Path,
    text: Option<&Path>,
    ir: Option<&Path>,
    reader: &Reader,
    tests: TestTarget,
) -> Result<Spec, SpecError> {
    let spec = match text {
        // The daemon's own snapshot, in its state directory.
        Some(text) => {
            let text = Reader::Caller.read_to_string(text).map_err(|e| SpecError {
                file: path.to_path_buf(),
                line: None,
                column: None,
                field: String::new(),
                message: format!("the spec's snapshot: {e}"),
            })?;
            spec::parse_as(path, &text, reader)?
        }
        None => spec::load_as(path, reader)?,
    };
    let mut spec = spec.for_backend(tests);
    if let Some(ir) = ir {
        spec.ir = ir.to_path_buf();
    }
    Ok(spec)
}

/// What a GPU worker measures with: the device, and the original kernel's
/// PTX compiled here (for `arch`, else the device's) as the reference. It
/// measures `spec`'s tests as given (a GPU worker's: the GPU's,
/// [`load_worker_spec`]).
pub fn start_measurer(
    spec: Spec,
    spec_path: &Path,
    device: &DeviceSelector,
    arch: Option<String>,
    libdevice: Option<PathBuf>,
) -> Result<Measurer, SetupError> {
    let device = driver::probe(device)?;
    let arch = arch_for(&spec, arch, Some(&device));
    let codegen = CodegenOptions { arch, libdevice };
    let ir = KernelIr::load_spec(&spec).map_err(|source| SetupError::Ir {
        spec: spec_path.to_path_buf(),
        source,
    })?;
    let original =
        ir.compile(&ir.empty_patch(), &codegen)
            .map_err(|source| SetupError::Original {
                spec: spec_path.to_path_buf(),
                source,
            })?;
    let kernels: Vec<String> = ir.chosen_kernels().iter().map(|k| k.to_string()).collect();
    // Outputs are compared where they are; without these kernels (they do
    // not compile here), on the host, as before.
    let comparison = crate::cuda::compare::module_ptx(&codegen)
        .inspect_err(|e| tracing::warn!(error = %e, "outputs will be compared on the host"))
        .ok();
    // Variants that come with a guarded build are checked through it; the
    // original's calibrates each test's trip budget.
    let guarded = ir
        .compile_guarded(&ir.empty_patch(), &codegen)
        .inspect_err(
            |e| tracing::warn!(error = %e, "no guarded builds: a variant's fault costs the worker"),
        )
        .ok();
    Measurer::new(
        spec,
        device,
        Programs {
            original: &original.ptx,
            guarded_original: guarded.as_ref(),
            comparison: comparison.as_deref(),
        },
        &kernels,
        MeasureOptions::default(),
        Assembler::find(),
    )
    .map_err(|source| SetupError::Measure {
        spec: spec_path.to_path_buf(),
        source: Box::new(source),
    })
}

/// The workers of a command that measures a few variants on this machine
/// for its user (`gevod run`, `gevod explain-edits --backend cuda`): fixed
/// rounds, no safety gate, at the user's CPU priority.
pub fn measuring_setup<'a>(
    spec_path: &'a Path,
    arch: &'a str,
    libdevice: Option<&'a Path>,
    workers: usize,
) -> WorkerSetup<'a> {
    WorkerSetup {
        ir: None,
        spec_path,
        spec_text: None,
        arch,
        libdevice,
        workers,
        reader: &Reader::Caller,
        timeout: Duration::from_secs(120),
        sanitize: SanitizeMode::Off,
        measurement: crate::cuda::measure::Measurement::Fixed,
        launcher: &Launcher::Local,
        cpu: crate::config::CpuPriority::Normal,
        more_devices: &[],
        prescreen: Prescreen::All,
        harness_user: None,
    }
}
