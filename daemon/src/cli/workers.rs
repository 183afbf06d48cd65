//! The hidden commands other processes run: `gevod eval-worker` and
//! `gevod gpu-worker` (started by the worker pools, JSON lines on stdio),
//! and `gevod sim-launch` (run by gevo_harness.h).

use anyhow::{Context as _, Result};
use gevo_ir::CodegenOptions;
use gevo_model::access::Reader;
use gevo_model::device::DeviceSelector;
use gevo_model::spec::{Spec, SpecError, TestTarget};
use gevod::worker::gpu::GpuWorker;
use gevod::worker::setup::{
    arch_for, harness_runner, load_worker_spec, start_measurer, HarnessTarget, SetupError,
};
use gevod::worker::{self, Fault, Handler, InProcess};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct EvalWorkerArgs {
    spec: PathBuf,
    /// The spec's text to use instead of reading `spec` (a daemon job's
    /// snapshot of what it checked); `spec` still names it and anchors
    /// its relative paths.
    #[arg(long)]
    spec_text: Option<PathBuf>,
    /// The IR to load instead of the spec's `ir` (a daemon job's snapshot).
    #[arg(long)]
    ir: Option<PathBuf>,
    #[arg(long)]
    arch: Option<String>,
    #[arg(long)]
    libdevice: Option<PathBuf>,
    /// A harness spec's worker: where the program's launches run (sim or gpu).
    #[arg(long)]
    harness: Option<HarnessTarget>,
    /// The GPU (UUID) a `--harness gpu` program runs on.
    #[arg(long)]
    device: Option<String>,
    /// Run harness commands as UID:GID.
    #[arg(long, value_parser = parse_uid_gid)]
    run_as: Option<(u32, u32)>,
    /// Read the spec's files for its owner: UID:WATCH_ROOT (the daemon's jobs).
    #[arg(long, value_parser = Reader::from_worker_arg)]
    on_behalf_of: Option<Reader>,
}

/// The supervision tests' planted fault (`GEVOD_WORKER_FAULT`). Only debug
/// builds, which `cargo test` runs, read it: a release binary has none.
#[cfg(debug_assertions)]
fn planted_fault() -> Result<Option<Fault>> {
    match std::env::var("GEVOD_WORKER_FAULT") {
        Ok(v) => Ok(Some(
            v.parse::<Fault>()
                .map_err(|e| anyhow::anyhow!("GEVOD_WORKER_FAULT: {e}"))?,
        )),
        Err(_) => Ok(None),
    }
}

#[cfg(not(debug_assertions))]
fn planted_fault() -> Result<Option<Fault>> {
    Ok(None)
}

/// `UID:GID`.
fn parse_uid_gid(s: &str) -> Result<(u32, u32), String> {
    let bad = || format!("expected UID:GID, not {s:?}");
    let (u, g) = s.split_once(':').ok_or_else(bad)?;
    Ok((u.parse().map_err(|_| bad())?, g.parse().map_err(|_| bad())?))
}

impl EvalWorkerArgs {
    /// Loads the spec, greets, answers requests on stdio. A spec that does
    /// not load is answered in the greeting, so the pool can say why.
    pub fn run(self) -> Result<()> {
        let fault = planted_fault()?;
        let mut backend = self.backend().map_err(|e| e.to_string());
        let handler: Result<&mut dyn Handler, String> = match &mut backend {
            Ok(b) => Ok(b),
            Err(e) => Err(e.clone()),
        };
        let stdin = std::io::stdin().lock();
        let stdout = std::io::stdout().lock();
        worker::serve(handler, fault, stdin, stdout).context("worker I/O")
    }

    fn backend(self) -> Result<InProcess, SetupError> {
        let reader = self.on_behalf_of.unwrap_or(Reader::Caller);
        // The simulator's tests, or the GPU's for a program on a GPU.
        let tests = self.harness.map_or(TestTarget::Sim, HarnessTarget::tests);
        let spec = load_worker_spec(
            &self.spec,
            self.spec_text.as_deref(),
            self.ir.as_deref(),
            &reader,
            tests,
        )?;
        let arch = arch_for(&spec, self.arch, None);
        let codegen = CodegenOptions {
            arch,
            libdevice: self.libdevice,
        };
        Ok(match self.harness {
            None => InProcess::new(spec, codegen)?,
            Some(target) => {
                let runner = harness_runner(target, self.device)?;
                InProcess::harness(spec, codegen, runner, self.run_as)?
            }
        })
    }
}

/// What every process on a GPU takes (`gevod gpu-worker`, `gevod
/// gpu-check`): the spec with its GPU tests, and the device.
#[derive(clap::Args)]
pub struct GpuSpecArgs {
    spec: PathBuf,
    /// As `gevod eval-worker --spec-text`.
    #[arg(long)]
    spec_text: Option<PathBuf>,
    #[arg(long)]
    ir: Option<PathBuf>,
    #[arg(long, default_value = "0")]
    device: DeviceSelector,
    #[arg(long)]
    arch: Option<String>,
    #[arg(long)]
    libdevice: Option<PathBuf>,
    /// Read the spec's files for its owner: UID:WATCH_ROOT (the daemon's jobs).
    #[arg(long, value_parser = Reader::from_worker_arg)]
    on_behalf_of: Option<Reader>,
}

impl GpuSpecArgs {
    /// The spec with the GPU's test sets, read for its owner.
    fn load_spec(&self) -> std::result::Result<Spec, SpecError> {
        let reader = self.on_behalf_of.clone().unwrap_or(Reader::Caller);
        load_worker_spec(
            &self.spec,
            self.spec_text.as_deref(),
            self.ir.as_deref(),
            &reader,
            TestTarget::Gpu,
        )
    }
}

#[derive(clap::Args)]
pub struct GpuWorkerArgs {
    #[command(flatten)]
    gpu: GpuSpecArgs,
}

impl GpuWorkerArgs {
    /// Loads the spec, makes the references on the GPU, greets, and
    /// measures PTX from stdin until it closes.
    pub fn run(self) -> Result<()> {
        let g = self.gpu;
        let clock = std::time::Instant::now();
        let mut started = g
            .load_spec()
            .map_err(SetupError::from)
            .and_then(|spec| start_measurer(spec, &g.spec, &g.device, g.arch, g.libdevice))
            .map(|m| GpuWorker::new(m, clock.elapsed().as_secs_f64()));
        let handler: Result<&mut dyn Handler, String> = match &mut started {
            Ok(h) => Ok(h),
            Err(e) => Err(e.to_string()),
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
}

#[derive(clap::Args)]
pub struct SimLaunchArgs {
    /// The kernel's IR (`$GEVO_IR`).
    #[arg(long)]
    ir: PathBuf,
    #[arg(long)]
    kernel: Option<String>,
    /// The launch file the header wrote.
    #[arg(long)]
    launch: PathBuf,
    /// Where `cost` and `steps` are written.
    #[arg(long)]
    result: PathBuf,
}

impl SimLaunchArgs {
    pub fn run(self) -> Result<()> {
        let stats =
            gevod::harness::launch::run_launch(&self.ir, self.kernel.as_deref(), &self.launch, 1)?;
        std::fs::write(
            &self.result,
            format!("cost {}\nsteps {}\n", stats.cost, stats.steps),
        )
        .with_context(|| self.result.display().to_string())
    }
}

#[derive(clap::Args)]
pub struct GpuCheckArgs {
    /// `--arch` and `--libdevice` are accepted and unused: the PTX is given.
    #[command(flatten)]
    gpu: GpuSpecArgs,
    /// The variant's PTX.
    #[arg(long)]
    ptx: PathBuf,
    /// The test to run it on (`heldout[1]`).
    #[arg(long)]
    test: String,
}

impl GpuCheckArgs {
    pub fn run(self) -> Result<()> {
        let spec = self.gpu.load_spec()?;
        let ptx = gevo_client::files::read_text_capped(&self.ptx, gevo_client::files::PTX_CAP)?;
        let device = gevod::cuda::driver::probe(&self.gpu.device)?;
        let ir = gevo_ir::KernelIr::load_kernels(&spec.ir, &spec.kernels)?;
        let kernels: Vec<String> = ir.chosen_kernels().iter().map(|k| k.to_string()).collect();
        gevod::cuda::check::run_once(
            &spec,
            &self.test,
            &ptx,
            &kernels,
            device.ordinal,
            std::time::Duration::from_secs(600),
        )
        .with_context(|| format!("{}: {}", self.gpu.spec.display(), self.test))
    }
}

#[derive(clap::Args)]
pub struct GpuCompareCheckArgs {
    /// GPU by ordinal or UUID (GPU-...).
    #[arg(long, default_value = "0")]
    device: DeviceSelector,
    #[arg(long, env = "GEVO_LIBDEVICE")]
    libdevice: Option<PathBuf>,
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

impl GpuCompareCheckArgs {
    /// Exit 0 when the device and the host agree on every case, 1 when not
    /// (each disagreement on stderr).
    pub fn run(self) -> Result<i32> {
        let device = gevod::cuda::driver::probe(&self.device)?;
        let codegen = CodegenOptions {
            arch: device.arch(),
            libdevice: self.libdevice,
        };
        let found = gevod::cuda::compare::cases::check_on_device(&device, &codegen, self.seed)
            .context("comparing on the device")?;
        for d in &found.disagreements {
            eprintln!("gevod: {d}");
        }
        println!(
            "compare-check: {} cases on {}, {} disagreement(s)",
            found.cases,
            device.name,
            found.disagreements.len()
        );
        Ok(if found.disagreements.is_empty() { 0 } else { 1 })
    }
}

#[derive(clap::Args)]
pub struct GpuGuardCheckArgs {
    /// The kernel's spec; its simulator tests run on both sides.
    spec: PathBuf,
    /// A variant instead of the original.
    #[arg(long)]
    patch: Option<PathBuf>,
    /// GPU by ordinal or UUID (GPU-...).
    #[arg(long, default_value = "0")]
    device: DeviceSelector,
    /// No trip budget: only the time budget ends a runaway loop (the GPU
    /// suite's check of the time budget).
    #[arg(long)]
    time_budget_only: bool,
    /// Instead of checking: what the original's guarded build costs against
    /// its ordinary build on the spec's GPU train tests (median of RUNS
    /// runs each), and what restoring the inputs costs.
    #[arg(long, value_name = "RUNS")]
    cost: Option<usize>,
    /// Check (or with --cost, time) the guarded build as the compile workers
    /// assemble it instead of the JIT's build: at the level
    /// $GEVO_CHECK_ASSEMBLY names, a pipeline's linked from a part per
    /// kernel (ptxas -c and nvlink).
    #[arg(long)]
    parts: bool,
    #[arg(long, env = "GEVO_LIBDEVICE")]
    libdevice: Option<PathBuf>,
}

impl GpuGuardCheckArgs {
    /// Exit 0 when the guarded build agrees with the unguarded one and with
    /// the simulator on every test, 1 when not.
    pub fn run(self) -> Result<i32> {
        let tests = match self.cost {
            Some(_) => TestTarget::Gpu,
            None => TestTarget::Sim,
        };
        let spec = gevo_model::spec::load(&self.spec)?.for_backend(tests);
        let ir = gevo_ir::KernelIr::load_spec(&spec)?;
        let patch = match &self.patch {
            Some(path) => super::output::read_patch(path)?,
            None => ir.empty_patch(),
        };
        let device = gevod::cuda::driver::probe(&self.device)?;
        let codegen = CodegenOptions {
            arch: device.arch(),
            libdevice: self.libdevice,
        };
        let mut parts = match self.parts {
            true => Some(gevod::cuda::part_assembly::PartAssembler::new(
                gevod::cuda::toolkit::Assembler::find()
                    .context("--parts needs ptxas")?
                    .for_checks(gevod::cuda::toolkit::CheckAssembly::from_env()),
            )),
            false => None,
        };
        if let Some(runs) = self.cost {
            let costs = gevod::cuda::guard_cost::cost(
                &spec,
                &ir,
                &codegen,
                device.ordinal,
                runs,
                parts.as_mut(),
            )
            .with_context(|| self.spec.display().to_string())?;
            for cost in &costs {
                println!("{cost}");
            }
            return Ok(0);
        }
        let found = gevod::cuda::guard_check::check(
            &spec,
            &ir,
            &patch,
            &codegen,
            device.ordinal,
            self.time_budget_only,
            parts.as_mut(),
        )
        .with_context(|| self.spec.display().to_string())?;
        for line in &found.lines {
            println!("{line}");
        }
        Ok(if found.failures == 0 { 0 } else { 1 })
    }
}
