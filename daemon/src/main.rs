//! The `gevod` command line. Library errors are typed; here they gain the
//! file they concern and become one line on stderr.

use anyhow::{Context as _, Result};
use clap::{Parser, Subcommand};
use gevod::eval::{Evaluator, TestResult};
use gevod::ir::{CodegenOptions, IrError, KernelIr, Patch, DEFAULT_ARCH};
use gevod::spec::TestSet;
use rand::SeedableRng;
use std::io::Write;
use std::path::{Path, PathBuf};

mod evolve_cli;
mod gpu_cli;
mod serve_cli;

use gpu_cli::BackendChoice;

/// The stencil fixture, compiled in so `gevod ptx` has something to show on a
/// fresh machine.
const BUNDLED_KERNEL: &str = include_str!("../../tests/fixtures/kernels/stencil.ll");
const BUNDLED_NAME: &str = "<bundled stencil.ll>";

#[derive(Parser)]
#[command(
    name = "gevod",
    version,
    about = "Evolves faster CUDA kernels (GEVO) on their LLVM IR"
)]
struct Cli {
    /// Validate the daemon's configuration file and exit.
    #[arg(long)]
    check_config: bool,
    /// With --check-config: the file (default: /etc/gevod/gevod.toml as
    /// root, else $XDG_CONFIG_HOME/gevo/gevod.toml).
    #[arg(long, requires = "check_config")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Run the daemon: watch build directories for kernel specs, evolve
    /// them in idle GPU time, serve the best validated PTX on a socket.
    Serve {
        /// Configuration file (default: /etc/gevod/gevod.toml as root, else
        /// $XDG_CONFIG_HOME/gevo/gevod.toml; a missing default is empty).
        #[arg(long)]
        config: Option<PathBuf>,
        /// API socket (overrides [daemon] socket).
        #[arg(long)]
        socket: Option<PathBuf>,
        /// State directory (overrides [daemon] state_dir).
        #[arg(long)]
        state: Option<PathBuf>,
        /// A build directory to watch, besides the configured ones (repeatable).
        #[arg(long)]
        watch: Vec<PathBuf>,
        #[arg(long, env = "GEVO_LIBDEVICE")]
        libdevice: Option<PathBuf>,
    },
    /// Emit PTX for a kernel, optionally with a patch applied.
    Ptx {
        /// Kernel IR (.ll or .bc); the bundled stencil kernel when omitted.
        kernel_ir: Option<PathBuf>,
        /// Kernel name, mangled or demangled (default: the patch's, or the only one).
        #[arg(long)]
        kernel: Option<String>,
        #[arg(long)]
        patch: Option<PathBuf>,
        #[arg(long, default_value = DEFAULT_ARCH)]
        arch: String,
        /// libdevice.10.bc to link for __nv_* calls (default: searched).
        #[arg(long, env = "GEVO_LIBDEVICE")]
        libdevice: Option<PathBuf>,
        /// Also write the patched, verified IR here.
        #[arg(long)]
        emit_ir: Option<PathBuf>,
        /// Output file (default: stdout).
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Run a kernel spec's tests (optionally with a patch) and report each.
    Run {
        spec: PathBuf,
        #[arg(long)]
        patch: Option<PathBuf>,
        /// GPU only: measure this PTX instead of a patch (repeat for several,
        /// measured in order on the same workers).
        #[arg(long, conflicts_with = "patch")]
        ptx: Vec<PathBuf>,
        #[arg(long, value_enum, default_value = "all")]
        tests: Tests,
        /// auto: the GPU when one is present, else the simulator.
        #[arg(long, value_enum, default_value = "auto")]
        backend: BackendChoice,
        /// GPU by ordinal or UUID (GPU-...).
        #[arg(long, default_value = "0")]
        device: gevod::cuda::DeviceSelector,
        /// GPU only: instead of a variant, check the original kernel's outputs
        /// on the GPU against the simulator's.
        #[arg(long, conflicts_with_all = ["patch", "ptx"])]
        compare_sim: bool,
        /// Simulator threads, or compile workers on the GPU (default: all cores).
        #[arg(long)]
        workers: Option<usize>,
        #[arg(long)]
        arch: Option<String>,
        #[arg(long, env = "GEVO_LIBDEVICE")]
        libdevice: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Evolve faster variants of a spec's kernel; checkpoints in --state.
    Evolve {
        spec: PathBuf,
        /// auto: the GPU when one is present, else the simulator.
        #[arg(long, value_enum, default_value = "auto")]
        backend: BackendChoice,
        /// GPU by ordinal or UUID (GPU-...).
        #[arg(long, default_value = "0")]
        device: gevod::cuda::DeviceSelector,
        /// GPU only: do not run new variants on the simulator's smallest
        /// train test before spending GPU time on them.
        #[arg(long)]
        no_prescreen: bool,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Stop after N generations past the initial population (for the whole job).
        #[arg(long, group = "budget")]
        generations: Option<u64>,
        /// Stop once N variants were evaluated (for the whole job; checked between generations).
        #[arg(long, group = "budget")]
        evaluations: Option<u64>,
        /// Stop after this much wall time in this run (90s, 10m, 2h).
        #[arg(long, group = "budget", value_parser = gevod::serve::config::parse_duration)]
        time: Option<std::time::Duration>,
        /// State directory holding gevod.redb and the exported best variant.
        #[arg(long, default_value = ".gevo-state")]
        state: PathBuf,
        /// Continue the job's checkpoint (starts it when there is none).
        #[arg(long)]
        resume: bool,
        #[arg(long)]
        json: bool,
        /// TOML file with an [evolve] table of search parameters.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Evaluation worker processes (default: one per core).
        #[arg(long)]
        workers: Option<usize>,
        /// Target arch (default: the spec's, else sm_90).
        #[arg(long)]
        arch: Option<String>,
        #[arg(long, env = "GEVO_LIBDEVICE")]
        libdevice: Option<PathBuf>,
        /// Seconds one compile or one variant's test run may take before its worker is killed.
        #[arg(long, default_value_t = 120.0)]
        worker_timeout: f64,
    },
    /// Evaluation worker (started by `gevod evolve`; speaks JSON lines on stdio).
    #[command(hide = true)]
    EvalWorker {
        spec: PathBuf,
        /// The IR to load instead of the spec's `ir` (a daemon job's snapshot).
        #[arg(long)]
        ir: Option<PathBuf>,
        #[arg(long)]
        arch: Option<String>,
        #[arg(long)]
        libdevice: Option<PathBuf>,
        /// A harness spec's worker: where the program's launches run.
        #[arg(long, value_enum)]
        harness: Option<evolve_cli::HarnessTarget>,
        /// The GPU (UUID) a `--harness gpu` program runs on.
        #[arg(long)]
        device: Option<String>,
        /// Run harness commands as UID:GID.
        #[arg(long, value_parser = evolve_cli::parse_uid_gid)]
        run_as: Option<(u32, u32)>,
    },
    /// One kernel launch of a harness program on the simulator (run by
    /// gevo_harness.h; docs/harness.md).
    #[command(hide = true)]
    SimLaunch {
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
    },
    /// GPU worker (started by the GPU backend; speaks JSON lines on stdio).
    #[command(hide = true)]
    GpuWorker {
        spec: PathBuf,
        #[arg(long)]
        ir: Option<PathBuf>,
        #[arg(long, default_value = "0")]
        device: gevod::cuda::DeviceSelector,
        #[arg(long)]
        arch: Option<String>,
        #[arg(long)]
        libdevice: Option<PathBuf>,
    },
    /// Write a patch of K random valid edits.
    Mutate {
        kernel_ir: PathBuf,
        #[arg(long)]
        kernel: Option<String>,
        #[arg(long)]
        seed: u64,
        #[arg(long, default_value_t = 1)]
        edits: usize,
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// List the kernel's instructions with the ids patches use.
    Ids {
        kernel_ir: PathBuf,
        #[arg(long)]
        kernel: Option<String>,
    },
    /// Show each edit of a patch and the IR diff it makes.
    Edits {
        kernel_ir: PathBuf,
        #[arg(long)]
        kernel: Option<String>,
        #[arg(long)]
        patch: PathBuf,
    },
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum Tests {
    Train,
    Heldout,
    All,
}

fn main() {
    let cli = Cli::parse();
    init_logging(matches!(cli.command, Some(Command::Serve { .. })));
    if let Err(err) = run(cli) {
        eprintln!("gevod: {err:#}");
        std::process::exit(1);
    }
}

/// Logs go to stderr, filtered by GEVOD_LOG (default: info for the daemon,
/// errors only for the one-shot commands). Under systemd (JOURNAL_STREAM
/// set) lines are plain, without the time journald adds itself; colour only
/// on a terminal.
fn init_logging(daemon: bool) {
    use std::io::IsTerminal;
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_env("GEVOD_LOG")
        .unwrap_or_else(|_| EnvFilter::new(if daemon { "info" } else { "error" }));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    if std::env::var_os("JOURNAL_STREAM").is_some() {
        builder.without_time().with_target(false).init();
    } else {
        builder.init();
    }
}

fn run(cli: Cli) -> Result<()> {
    if cli.check_config {
        return serve_cli::check_config(cli.config);
    }
    let Some(command) = cli.command else {
        use clap::CommandFactory;
        Cli::command().print_help()?;
        std::process::exit(2);
    };
    match command {
        Command::Serve {
            config,
            socket,
            state,
            watch,
            libdevice,
        } => serve_cli::serve(config, socket, state, watch, libdevice),
        Command::Evolve {
            spec,
            backend,
            device,
            no_prescreen,
            seed,
            generations,
            evaluations,
            time,
            state,
            resume,
            json,
            config,
            workers,
            arch,
            libdevice,
            worker_timeout,
        } => {
            let device = gpu_cli::resolve(backend, &device)?;
            let budget = match (generations, evaluations, time) {
                (_, Some(n), _) => evolve_cli::Budget::Evaluations(n),
                (_, _, Some(t)) => evolve_cli::Budget::Time(t),
                (n, _, _) => evolve_cli::Budget::Generations(n.unwrap_or(10)),
            };
            if !(worker_timeout.is_finite() && worker_timeout > 0.0) {
                anyhow::bail!("--worker-timeout must be a positive number of seconds");
            }
            let status = evolve_cli::evolve(evolve_cli::EvolveArgs {
                spec,
                seed,
                budget,
                state,
                resume,
                json,
                config,
                workers,
                libdevice,
                arch,
                worker_timeout: std::time::Duration::from_secs_f64(worker_timeout),
                device,
                prescreen: !no_prescreen,
            })?;
            if status != 0 {
                std::process::exit(status);
            }
            Ok(())
        }
        Command::EvalWorker {
            spec,
            ir,
            arch,
            libdevice,
            harness,
            device,
            run_as,
        } => {
            let harness = harness.map(|target| evolve_cli::HarnessWorker {
                target,
                device,
                run_as,
            });
            evolve_cli::eval_worker(&spec, ir.as_deref(), arch, libdevice, harness)
        }
        Command::SimLaunch {
            ir,
            kernel,
            launch,
            result,
        } => {
            let stats = gevod::harness::launch::run_launch(&ir, kernel.as_deref(), &launch, 1)?;
            std::fs::write(
                &result,
                format!("cost {}\nsteps {}\n", stats.cost, stats.steps),
            )
            .with_context(|| result.display().to_string())?;
            Ok(())
        }
        Command::GpuWorker {
            spec,
            ir,
            device,
            arch,
            libdevice,
        } => gpu_cli::gpu_worker(&spec, ir.as_deref(), &device, arch, libdevice),
        Command::Ptx {
            kernel_ir,
            kernel,
            patch,
            arch,
            libdevice,
            emit_ir,
            output,
        } => {
            let patch_file = patch;
            let patch = patch_file.as_deref().map(read_patch).transpose()?;
            let ir = match &kernel_ir {
                Some(path) => load_kernel(path, kernel.as_deref(), patch.as_ref())?,
                None => {
                    KernelIr::parse(BUNDLED_NAME, BUNDLED_KERNEL.as_bytes(), kernel.as_deref())?
                }
            };
            let patch = patch.unwrap_or_else(|| ir.empty_patch());
            let options = CodegenOptions { arch, libdevice };
            let compiled = ir
                .compile(&patch, &options)
                .with_context(|| match &patch_file {
                    Some(p) => format!("{} with patch {}", ir.source(), p.display()),
                    None => ir.source().to_string(),
                })?;
            if let Some(path) = emit_ir {
                write_output(Some(&path), &compiled.ir)?;
            }
            tracing::info!(ptx_hash = %compiled.ptx_hash, edits = patch.edits.len(), "emitted PTX");
            write_output(output.as_deref(), &compiled.ptx)
        }
        Command::Mutate {
            kernel_ir,
            kernel,
            seed,
            edits,
            output,
        } => {
            let ir = load_kernel(&kernel_ir, kernel.as_deref(), None)?;
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
            let patch = ir
                .mutate(&mut rng, edits)
                .with_context(|| kernel_ir.display().to_string())?;
            write_output(output.as_deref(), &(patch.to_json() + "\n"))
        }
        Command::Run {
            spec,
            patch,
            ptx,
            tests,
            backend,
            device,
            compare_sim,
            workers,
            arch,
            libdevice,
            json,
        } => {
            let spec_file = spec;
            let spec = gevod::spec::load(&spec_file)?;
            let device = gpu_cli::resolve(backend, &device)?;
            let workers = workers.unwrap_or_else(default_workers);
            let set = match tests {
                Tests::Train => TestSet::Train,
                Tests::Heldout => TestSet::Heldout,
                Tests::All => TestSet::All,
            };
            if compare_sim || !ptx.is_empty() {
                gpu_cli::require_gpu(
                    device.as_ref(),
                    if compare_sim {
                        "--compare-sim"
                    } else {
                        "--ptx"
                    },
                )?;
            }
            if spec.harness.is_some() {
                if !ptx.is_empty() {
                    anyhow::bail!("--ptx: not for harness specs (pass --patch)");
                }
                let arch = gpu_cli::arch_for(&spec, arch, device.as_ref());
                let codegen = gevod::ir::CodegenOptions { arch, libdevice };
                return run_harness(
                    &spec_file,
                    spec,
                    codegen,
                    device,
                    patch.as_deref(),
                    set,
                    json,
                );
            }
            let Some(device) = device else {
                return run_on_simulator(&spec_file, spec, patch.as_deref(), set, workers, json);
            };
            let arch = gpu_cli::arch_for(&spec, arch, Some(&device));
            if compare_sim {
                let (text, agree) =
                    gpu_cli::compare_with_simulator(&spec_file, &device, &arch, libdevice, set)?;
                write_output(None, &text)?;
                if !agree {
                    anyhow::bail!(
                        "{}: the GPU and the simulator disagree",
                        spec_file.display()
                    );
                }
                return Ok(());
            }
            let variants = if ptx.is_empty() {
                let (label, patch) = match &patch {
                    Some(p) => (p.display().to_string(), read_patch(p)?),
                    None => {
                        let ir = KernelIr::load(&spec.ir, Some(&spec.kernel))?;
                        ("original".to_string(), ir.empty_patch())
                    }
                };
                gpu_cli::Variants::Patch(label, patch)
            } else {
                gpu_cli::Variants::Ptx(ptx)
            };
            let setup = gpu_cli::WorkerSetup {
                ir: None,
                spec_path: &spec_file,
                arch: &arch,
                libdevice: libdevice.as_deref(),
                workers,
                timeout: std::time::Duration::from_secs(120),
            };
            let results = gpu_cli::run_on_gpu(&setup, &spec, device, variants, set)?;
            write_assessments(&results, json)?;
            let failed = results.iter().filter(|(_, a)| !a.passed()).count();
            if failed > 0 {
                anyhow::bail!(
                    "{}: {failed} of {} variants failed",
                    spec_file.display(),
                    results.len()
                );
            }
            Ok(())
        }
        Command::Ids { kernel_ir, kernel } => {
            let ir = load_kernel(&kernel_ir, kernel.as_deref(), None)?;
            let out: String = ir
                .listing()?
                .iter()
                .map(|(id, text)| format!("{id:>6}  {text}\n"))
                .collect();
            write_output(None, &out)
        }
        Command::Edits {
            kernel_ir,
            kernel,
            patch,
        } => {
            let patch_file = patch;
            let patch = read_patch(&patch_file)?;
            let ir = load_kernel(&kernel_ir, kernel.as_deref(), Some(&patch))?;
            let steps = ir
                .explain(&patch)
                .with_context(|| patch_file.display().to_string())?;
            let mut out = String::new();
            let mut before = ir.text().to_string();
            for (i, step) in steps.iter().enumerate() {
                out += &format!("edit {i}: {}\n", step.edit);
                for (id, text) in &step.operands {
                    out += &format!("  {id} = {text}\n");
                }
                let diff = similar::TextDiff::from_lines(&before, &step.ir_after);
                out += &diff
                    .unified_diff()
                    .context_radius(2)
                    .header("before", "after")
                    .to_string();
                out += "\n";
                before = step.ir_after.clone();
            }
            ir.apply(&patch)
                .with_context(|| patch_file.display().to_string())?;
            write_output(None, &out)
        }
    }
}

fn run_on_simulator(
    spec_file: &Path,
    spec: gevod::spec::Spec,
    patch: Option<&Path>,
    set: TestSet,
    workers: usize,
    json: bool,
) -> Result<()> {
    let evaluator = Evaluator::new(spec, workers)?;
    let patch = match patch {
        Some(p) => read_patch(p)?,
        None => evaluator.ir().empty_patch(),
    };
    let results = evaluator.evaluate(&patch, set)?;
    let text = if json {
        results_json(&results)
    } else {
        results_table(&results)
    };
    write_output(None, &text)?;
    let failed = results.iter().filter(|r| !r.passed()).count();
    if failed > 0 {
        anyhow::bail!(
            "{}: {failed} of {} tests failed",
            spec_file.display(),
            results.len()
        );
    }
    Ok(())
}

/// `gevod run` on a harness spec: the application runs the original, then
/// the patched kernel, on every test of the set (as this user).
fn run_harness(
    spec_file: &Path,
    spec: gevod::spec::Spec,
    codegen: gevod::ir::CodegenOptions,
    device: Option<gevod::cuda::DeviceInfo>,
    patch: Option<&Path>,
    set: TestSet,
    json: bool,
) -> Result<()> {
    use evolve_cli::HarnessTarget;
    let runner = match &device {
        Some(d) => evolve_cli::harness_runner(HarnessTarget::Gpu, Some(d.uuid.clone())),
        None => evolve_cli::harness_runner(HarnessTarget::Sim, None),
    }
    .map_err(anyhow::Error::msg)?;
    let evaluator = gevod::harness::HarnessEvaluator::new(spec, codegen, runner, None)?;
    let (label, patch) = match patch {
        Some(p) => (p.display().to_string(), read_patch(p)?),
        None => ("original".to_string(), evaluator.ir().empty_patch()),
    };
    let mut assessment = evaluator.assess(&patch, set)?;
    assessment.device = device;
    let results = vec![(label, assessment)];
    write_assessments(&results, json)?;
    let a = &results[0].1;
    if let Some(failure) = a.first_failure() {
        anyhow::bail!("{}: {failure}", spec_file.display());
    }
    Ok(())
}

/// Labelled assessments as tables (or JSON) on stdout.
fn write_assessments(results: &[(String, gevod::eval::Assessment)], json: bool) -> Result<()> {
    let text = if json {
        serde_json::to_string_pretty(&results_by_label(results))? + "\n"
    } else {
        results
            .iter()
            .map(|(l, a)| gpu_cli::gpu_table(l, a))
            .collect()
    };
    write_output(None, &text)
}

/// GPU results as JSON: per variant its label, whether it passed, the
/// cost ratio with its interval, and the tests (with their timing rounds).
fn results_by_label(results: &[(String, gevod::eval::Assessment)]) -> serde_json::Value {
    results
        .iter()
        .map(|(label, a)| {
            serde_json::json!({
                "variant": label,
                "passed": a.passed(),
                "failure": a.first_failure(),
                "cost_ratio": a.cost_interval(),
                "device": a.device,
                "tests": a.tests,
            })
        })
        .collect()
}

fn results_table(results: &[TestResult]) -> String {
    let mut out = format!(
        "{:<12} {:<22} {:>14} {:>8} {:>12}\n",
        "test", "verdict", "cost", "ratio", "error"
    );
    for r in results {
        let verdict = r.failure.as_ref().map_or("pass", |f| f.kind());
        let cost = r.cost.map_or("-".into(), |c| c.to_string());
        let ratio = r.cost.map_or("-".into(), |c| {
            format!("{:.3}", c as f64 / r.original_cost as f64)
        });
        let error = r.error.map_or("-".into(), |e| format!("{e:.3e}"));
        out += &format!(
            "{:<12} {:<22} {:>14} {:>8} {:>12}\n",
            r.test, verdict, cost, ratio, error
        );
        if let Some(f) = &r.failure {
            out += &format!("  {f}\n");
        }
    }
    out
}

fn results_json(results: &[TestResult]) -> String {
    let rows: Vec<serde_json::Value> = results
        .iter()
        .map(|r| {
            serde_json::json!({
                "test": r.test,
                "passed": r.passed(),
                "verdict": r.failure.as_ref().map_or("pass", |f| f.kind()),
                "reason": r.failure.as_ref().map(|f| f.to_string()),
                "cost": r.cost,
                "original_cost": r.original_cost,
                "cost_ratio": r.cost.map(|c| c as f64 / r.original_cost as f64),
                "error": r.error,
            })
        })
        .collect();
    serde_json::to_string_pretty(&rows).expect("JSON of plain values") + "\n"
}

/// Worker threads or processes when none are asked for: one per core.
fn default_workers() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Loads a kernel; when the module has several and none is named, the
/// patch's kernel is taken. Library errors already name the file.
fn load_kernel(path: &Path, kernel: Option<&str>, patch: Option<&Patch>) -> Result<KernelIr> {
    match (KernelIr::load(path, kernel), patch) {
        (Err(IrError::KernelRequired { .. }), Some(patch)) if kernel.is_none() => {
            Ok(KernelIr::load(path, Some(&patch.kernel))?)
        }
        (result, _) => Ok(result?),
    }
}

fn read_patch(path: &Path) -> Result<Patch> {
    let text = std::fs::read_to_string(path).with_context(|| path.display().to_string())?;
    Patch::from_json(&text).with_context(|| path.display().to_string())
}

/// Writes `text` to `path` atomically (nothing is left behind on failure), or
/// to stdout.
fn write_output(path: Option<&Path>, text: &str) -> Result<()> {
    let Some(path) = path else {
        std::io::stdout().write_all(text.as_bytes())?;
        return Ok(());
    };
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut tmp =
        tempfile::NamedTempFile::new_in(dir).with_context(|| path.display().to_string())?;
    tmp.write_all(text.as_bytes())
        .and_then(|_| tmp.as_file().sync_all())
        .with_context(|| path.display().to_string())?;
    tmp.persist(path)
        .with_context(|| path.display().to_string())?;
    Ok(())
}
