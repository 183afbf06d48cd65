//! The GPU at the binary's edge: choosing the backend (`--backend
//! auto|sim|cuda`), starting the GPU backend's worker pools, the hidden
//! `gevod gpu-worker`, and `gevod run` on the GPU.

use anyhow::{bail, Context as _, Result};
use gevod::cuda::backend::{CudaBackend, CudaOptions, GpuWorker};
use gevod::cuda::measure::{MeasureOptions, Measurer};
use gevod::cuda::{driver, CudaError, DeviceInfo, DeviceSelector};
use gevod::eval::{Assessment, Evaluator};
use gevod::evolve::Scope;
use gevod::ir::{CodegenOptions, KernelIr};
use gevod::spec::{self, Acceptance, ArgKind, Metric, Spec, TestSet};
use gevod::worker::pool::PoolOptions;
use gevod::worker::{self, Handler};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendChoice {
    /// cuda when a GPU is present, else sim.
    Auto,
    /// The CPU simulator.
    Sim,
    /// The GPU, through the CUDA driver.
    Cuda,
}

/// The GPU to use, or `None` for the simulator. `cuda` without a usable
/// GPU is an error; `auto` then falls back to the simulator.
pub fn resolve(choice: BackendChoice, device: &DeviceSelector) -> Result<Option<DeviceInfo>> {
    match choice {
        BackendChoice::Sim => Ok(None),
        BackendChoice::Cuda => driver::probe(device)
            .map(Some)
            .map_err(|e| anyhow::anyhow!("--backend cuda: {e}")),
        BackendChoice::Auto => match driver::probe(device) {
            Ok(d) => Ok(Some(d)),
            Err(e @ (CudaError::NoDriver | CudaError::NoDevice { .. })) => {
                tracing::info!(reason = %e, "no GPU: the simulator evaluates");
                Ok(None)
            }
            Err(e) => Err(anyhow::anyhow!("--backend auto: {e}")),
        },
    }
}

/// The PTX target: `--arch`, else the GPU's, else the spec's, else sm_90.
pub fn arch_for(spec: &Spec, arch: Option<String>, device: Option<&DeviceInfo>) -> String {
    arch.or_else(|| device.map(DeviceInfo::arch))
        .or_else(|| spec.arch.clone())
        .unwrap_or_else(|| gevod::ir::DEFAULT_ARCH.to_string())
}

/// What evaluates a job's variants (`WorkerSetup::evaluators`).
pub enum Evaluators {
    /// `gevod eval-worker` processes, and the scope they measure.
    Pool(PoolOptions, Scope),
    /// The GPU backend (compile workers and a GPU worker) on this device.
    Gpu(DeviceInfo),
}

impl Evaluators {
    /// The scope of the results: the cache's and the job's.
    pub fn scope(&self) -> Scope {
        match self {
            Evaluators::Pool(_, scope) => scope.clone(),
            Evaluators::Gpu(d) => GpuWorker::scope(d),
        }
    }
}

/// What the worker processes need to know.
pub struct WorkerSetup<'a> {
    pub spec_path: &'a Path,
    /// The IR the workers load instead of the spec's (`--ir`).
    pub ir: Option<&'a Path>,
    pub arch: &'a str,
    pub libdevice: Option<&'a Path>,
    pub workers: usize,
    pub timeout: Duration,
}

impl WorkerSetup<'_> {
    fn args(&self, command: &str) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec![
            command.into(),
            self.spec_path.into(),
            "--arch".into(),
            self.arch.into(),
        ];
        if let Some(ir) = self.ir {
            args.push("--ir".into());
            args.push(ir.into());
        }
        if let Some(l) = self.libdevice {
            args.push("--libdevice".into());
            args.push(l.into());
        }
        args
    }

    /// `gevod eval-worker` processes.
    pub fn compile_pool(&self) -> Result<PoolOptions> {
        Ok(PoolOptions {
            program: std::env::current_exe().context("locating the gevod binary")?,
            args: self.args("eval-worker"),
            env: Vec::new(),
            workers: self.workers,
            timeout: self.timeout,
            start_timeout: Duration::from_secs(120),
        })
    }

    /// What evaluates `spec`'s variants: a pool of `gevod eval-worker`s (a
    /// harness spec's, on `device` or the simulator; or the simulator's for
    /// a kernel spec without a GPU), or the GPU backend on `device`.
    /// `user`: the uid/gid harness commands run as.
    pub fn evaluators(
        &self,
        spec: &Spec,
        device: Option<&DeviceInfo>,
        user: Option<(u32, u32)>,
    ) -> Result<Evaluators> {
        let (options, backend) = match (&spec.harness, device) {
            (Some(_), device) => (
                self.harness_pool(device, user)?,
                gevod::harness::backend_name(device.is_some()),
            ),
            (None, None) => (self.compile_pool()?, "sim"),
            (None, Some(d)) => return Ok(Evaluators::Gpu(d.clone())),
        };
        // The workers greet with this same scope (`InProcess::scope`).
        let scope = Scope {
            backend: backend.into(),
            target: self.arch.to_string(),
        };
        Ok(Evaluators::Pool(options, scope))
    }

    /// `gevod eval-worker` processes that run a harness spec's command: on
    /// `device` (one at a time, so runs do not share the GPU), or on the
    /// simulator; as `user` when given.
    fn harness_pool(
        &self,
        device: Option<&DeviceInfo>,
        user: Option<(u32, u32)>,
    ) -> Result<PoolOptions> {
        let mut pool = self.compile_pool()?;
        match device {
            Some(d) => {
                pool.args.extend([
                    "--harness".into(),
                    "gpu".into(),
                    "--device".into(),
                    d.uuid.clone().into(),
                ]);
                pool.workers = 1;
            }
            None => pool.args.extend(["--harness".into(), "sim".into()]),
        }
        if let Some((uid, gid)) = user {
            pool.args
                .extend(["--run-as".into(), format!("{uid}:{gid}").into()]);
        }
        Ok(pool)
    }

    /// The GPU backend: compile workers (one core is left to the GPU
    /// worker) and one GPU worker on `device`.
    pub fn cuda_backend(
        &self,
        spec: &Spec,
        device: DeviceInfo,
        prescreen: bool,
        stop: Arc<AtomicBool>,
    ) -> Result<CudaBackend> {
        let mut compile = self.compile_pool()?;
        compile.workers = self.workers.saturating_sub(1).max(1);
        let mut gpu = compile.clone();
        gpu.args = self.args("gpu-worker");
        gpu.args
            .extend(["--device".into(), device.uuid.clone().into()]);
        gpu.workers = 1;
        let options = CudaOptions {
            compile,
            gpu,
            device,
            arch: self.arch.to_string(),
            prescreen,
        };
        CudaBackend::start(options, spec, stop)
            .map_err(anyhow::Error::from)
            .with_context(|| self.spec_path.display().to_string())
    }
}

/// The hidden GPU worker: loads the spec, makes the references on the GPU,
/// greets, and measures PTX from stdin until it closes.
pub fn gpu_worker(
    spec_path: &Path,
    ir: Option<&Path>,
    device: &DeviceSelector,
    arch: Option<String>,
    libdevice: Option<PathBuf>,
) -> Result<()> {
    let mut started = load_worker_spec(spec_path, ir)
        .map_err(anyhow::Error::from)
        .and_then(|spec| start_measurer(spec, spec_path, device, arch, libdevice))
        .map(GpuWorker::new);
    let handler: Result<&mut dyn Handler, String> = match &mut started {
        Ok(h) => Ok(h),
        Err(e) => Err(format!("{e:#}")),
    };
    let stdin = std::io::stdin().lock();
    let stdout = std::io::stdout().lock();
    let served = worker::serve(handler, None, stdin, stdout).context("worker I/O");
    if served.is_ok() {
        // No destructors: freeing device memory or unloading modules waits
        // for running kernels, and after a timeout one runs forever. The
        // driver reclaims everything when the process ends.
        std::process::exit(0);
    }
    served
}

/// A worker's spec, with the IR path replaced when the daemon gives a
/// snapshot (the build may have rewritten the spec's IR since).
pub fn load_worker_spec(path: &Path, ir: Option<&Path>) -> Result<Spec, spec::SpecError> {
    let mut spec = spec::load(path)?;
    if let Some(ir) = ir {
        spec.ir = ir.to_path_buf();
    }
    Ok(spec)
}

fn start_measurer(
    spec: Spec,
    spec_path: &Path,
    device: &DeviceSelector,
    arch: Option<String>,
    libdevice: Option<PathBuf>,
) -> Result<Measurer> {
    let device = driver::probe(device)?;
    let arch = arch_for(&spec, arch, Some(&device));
    let ir = KernelIr::load(&spec.ir, Some(&spec.kernel))
        .with_context(|| spec_path.display().to_string())?;
    let original = ir
        .compile(&ir.empty_patch(), &CodegenOptions { arch, libdevice })
        .with_context(|| format!("{}: the original kernel", spec_path.display()))?;
    let kernel = ir.kernel().to_string();
    Measurer::new(
        spec,
        device,
        &original.ptx,
        &kernel,
        MeasureOptions::default(),
    )
    .with_context(|| spec_path.display().to_string())
}

/// `gevod run --backend cuda`: the patch (or each `--ptx` file, in order,
/// on the same workers) measured on the GPU.
pub fn run_on_gpu(
    setup: &WorkerSetup,
    spec: &Spec,
    device: DeviceInfo,
    variants: Variants,
    set: TestSet,
) -> Result<Vec<(String, Assessment)>> {
    let stop = Arc::new(AtomicBool::new(false));
    let mut backend = setup.cuda_backend(spec, device, true, stop)?;
    Ok(match variants {
        Variants::Patch(name, patch) => {
            use gevod::evolve::Backend as _;
            let a = backend.assess(std::slice::from_ref(&patch), set)?;
            vec![(name, a.into_iter().next().expect("one in, one out"))]
        }
        Variants::Ptx(files) => {
            let mut texts = Vec::with_capacity(files.len());
            for f in &files {
                texts.push(std::fs::read_to_string(f).with_context(|| f.display().to_string())?);
            }
            let results = backend.measure_ptx(&texts, set)?;
            files
                .iter()
                .map(|f| f.display().to_string())
                .zip(results)
                .collect()
        }
    })
}

pub enum Variants {
    /// A label and the patch.
    Patch(String, gevod::ir::Patch),
    Ptx(Vec<PathBuf>),
}

/// `gevod run --backend cuda --compare-sim`: the original kernel's outputs
/// on the GPU against the simulator's, test by test: bit for bit for
/// integer outputs, within the spec's acceptance for floats. Returns a
/// line per test and whether all agree.
pub fn compare_with_simulator(
    spec_path: &Path,
    device: &DeviceInfo,
    arch: &str,
    libdevice: Option<PathBuf>,
    set: TestSet,
) -> Result<(String, bool)> {
    let selector = DeviceSelector::Uuid(device.uuid.clone());
    let spec = spec::load(spec_path)?;
    let evaluator = Evaluator::new(spec.clone(), crate::default_workers())?;
    let measurer = start_measurer(
        spec.clone(),
        spec_path,
        &selector,
        Some(arch.to_string()),
        libdevice,
    )?;
    let mut out = String::new();
    let mut all = true;
    for test in spec.tests(set) {
        let simulated = evaluator.reference_outputs(test)?;
        let on_gpu = measurer.reference(&test.name).expect("every test measured");
        for i in spec.outputs() {
            let ArgKind::Buffer { elem, .. } = &spec.args[i].kind else {
                continue;
            };
            let acceptance = if elem.is_float() {
                spec.acceptance
            } else {
                Acceptance {
                    metric: Metric::Exact,
                    tolerance: 0.0,
                }
            };
            let c = spec::compare(&acceptance, *elem, &simulated[i], &on_gpu[i]);
            all &= c.passed;
            out += &format!(
                "{:<12} {:<8} gpu vs sim: {} ({} {:.3e}{})\n",
                test.name,
                spec.args[i].name,
                if c.passed { "agree" } else { "DIFFER" },
                acceptance.metric.name(),
                c.error,
                c.first_mismatch
                    .map_or(String::new(), |e| format!(", first at element {e}"))
            );
        }
    }
    Ok((out, all))
}

/// A table of GPU results: per test the verdict, the medians and the cost
/// ratio, then the whole set's ratio with its interval.
pub fn gpu_table(label: &str, a: &Assessment) -> String {
    let mut out = format!("{label}\n");
    if let Some(d) = &a.device {
        out += &format!("  on {} ({}, {})\n", d.name, d.arch(), d.uuid);
    }
    out += &format!(
        "  {:<12} {:<14} {:>12} {:>12} {:>8} {:>8}\n",
        "test", "verdict", "original us", "variant us", "ratio", "spread"
    );
    for t in &a.tests {
        let verdict = t.failure.as_ref().map_or("pass", |f| f.0.as_str());
        let us = |ns: Option<u64>| ns.map_or("-".into(), |n| format!("{:.2}", n as f64 / 1e3));
        let ratio = t.cost.map_or("-".into(), |c| {
            format!("{:.4}", c as f64 / t.original_cost.max(1) as f64)
        });
        let spread = t.timing.as_ref().map_or("-".into(), |t| {
            format!(
                "{:.1}%",
                100.0 * gevod::stats::relative_spread(&t.variant_ns)
            )
        });
        out += &format!(
            "  {:<12} {verdict:<14} {:>12} {:>12} {ratio:>8} {spread:>8}\n",
            t.test,
            us(Some(t.original_cost)),
            us(t.cost),
        );
        if let Some((_, message)) = &t.failure {
            out += &format!("    {message}\n");
        }
    }
    if let Some(i) = a.cost_interval() {
        out += &format!(
            "  cost ratio {:.4}, 95% interval {:.4}..{:.4}: {}\n",
            i.estimate,
            i.lo,
            i.hi,
            if i.below(1.0) {
                "faster"
            } else if i.lo > 1.0 {
                "slower"
            } else {
                "no difference shown"
            }
        );
    }
    out
}

/// Refuses GPU-only options on the simulator.
pub fn require_gpu(device: Option<&DeviceInfo>, what: &str) -> Result<()> {
    if device.is_none() {
        bail!(
            "{what} needs the GPU backend (no GPU is in use: --backend sim, or auto without a GPU)"
        );
    }
    Ok(())
}
