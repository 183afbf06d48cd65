//! The `gevod` command line: parsing and printing only. Each command's
//! arguments and its wiring live in a file of their own; everything a
//! daemon also needs (configuration, the choice of workers, the backends)
//! is in the library. Library errors are typed; here they gain the file
//! they concern and become one line on stderr.

mod evolve;
mod evolve_tune;
mod explain_edits;
mod explain_gpu;
mod html_report;
mod kernel;
mod output;
mod report;
mod run;
mod serve;
mod spec_init;
mod spec_init_sources;
mod tables;
mod transplant;
mod tune;
mod workers;

use anyhow::Result;
use clap::{Parser, Subcommand};
use gevo_model::device::{DeviceInfo, DeviceSelector};
use gevod::cuda::{driver, CudaError};

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
    config: Option<std::path::PathBuf>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Run the daemon: watch build directories for kernel specs, evolve
    /// them in idle GPU time, serve the best validated PTX on a socket.
    Serve(serve::ServeArgs),
    /// Emit PTX for a kernel, optionally with a patch applied.
    Ptx(kernel::PtxArgs),
    /// Run a kernel spec's tests (optionally with a patch) and report each.
    Run(run::RunArgs),
    /// Evolve faster variants of a spec's kernel; checkpoints in --state.
    Evolve(evolve::EvolveArgs),
    /// Time every configuration of a spec's [tune] constants (checked
    /// against the source's outputs) and write the fastest one's spec.
    Tune(tune::TuneArgs),
    /// Evaluation worker (started by `gevod evolve`; speaks JSON lines on stdio).
    #[command(hide = true)]
    EvalWorker(workers::EvalWorkerArgs),
    /// One kernel launch of a harness program on the simulator (run by
    /// gevo_harness.h; docs/harness.md).
    #[command(hide = true)]
    SimLaunch(workers::SimLaunchArgs),
    /// GPU worker (started by the GPU backend; speaks JSON lines on stdio).
    #[command(hide = true)]
    GpuWorker(workers::GpuWorkerArgs),
    /// Runs a variant's PTX once on one test (the safety gate runs this
    /// under compute-sanitizer)
    #[command(hide = true)]
    GpuCheck(workers::GpuCheckArgs),
    /// Checks the device comparison kernels against the host comparison
    /// on buffers of special values (the GPU suite runs this).
    #[command(hide = true)]
    GpuCompareCheck(workers::GpuCompareCheckArgs),
    /// Runs a kernel's (or a variant's) guarded build on each test against
    /// its unguarded build and the simulator (the GPU suite runs this).
    #[command(hide = true)]
    GpuGuardCheck(workers::GpuGuardCheckArgs),
    /// Write a patch of K random valid edits.
    Mutate(kernel::MutateArgs),
    /// List the kernel's instructions with the ids patches use.
    Ids(kernel::IdsArgs),
    /// Show each edit of a patch in CUDA source terms and the IR diff it makes.
    Edits(kernel::EditsArgs),
    /// Carry a patch to a new version of its kernel's IR.
    Transplant(transplant::TransplantArgs),
    /// Which edits of a validated variant give its speed: each edit alone,
    /// the patch without each, every pair (up to 6 edits), on the simulator;
    /// stored beside the variant.
    ExplainEdits(explain_edits::ExplainEditsArgs),
    /// Write a search's HTML report (one self-contained file) from a state directory.
    Report(html_report::ReportArgs),
    /// Kernel specs: `gevod spec init kernel.ll -o kernel.gevo.toml` writes
    /// a skeleton from the kernel's parameters.
    Spec {
        #[command(subcommand)]
        command: spec_init::SpecCommand,
    },
}

/// `--backend` of `gevod run` and `gevod evolve`.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum BackendChoice {
    /// cuda when a GPU is present, else sim.
    Auto,
    /// The CPU simulator.
    Sim,
    /// The GPU, through the CUDA driver.
    Cuda,
}

/// The GPU to use, or `None` for the simulator. `cuda` without a usable
/// GPU is an error; `auto` then falls back to the simulator.
fn resolve(choice: BackendChoice, device: &DeviceSelector) -> Result<Option<DeviceInfo>> {
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

/// Parses the command line, runs the command, and exits with its status.
pub fn main() {
    use clap::{CommandFactory, FromArgMatches};
    let matches = serve::with_defaults(Cli::command()).get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    init_logging(matches!(cli.command, Some(Command::Serve(_))));
    match dispatch(cli) {
        Ok(0) => {}
        Ok(status) => std::process::exit(status),
        Err(err) => {
            let text = gevo_client::text::error_line(err.chain());
            eprintln!("gevod: {}", gevo_client::text::escape_terminal(&text));
            std::process::exit(1);
        }
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
        .fmt_fields(escaped_fields())
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    if std::env::var_os("JOURNAL_STREAM").is_some() {
        builder.without_time().with_target(false).init();
    } else {
        builder.init();
    }
}

/// Log fields as the default format writes them, each value with its
/// control characters escaped: spec paths, keys and messages come from
/// files anybody may drop in a watched directory.
fn escaped_fields() -> impl for<'w> tracing_subscriber::fmt::FormatFields<'w> + 'static {
    use tracing_subscriber::field::MakeExt;
    tracing_subscriber::fmt::format::debug_fn(|w, field, value| {
        let text = format!("{value:?}");
        let text = gevo_client::text::escape_controls(&text);
        if field.name() == "message" {
            write!(w, "{text}")
        } else {
            write!(w, "{}={text}", field.name())
        }
    })
    .delimited(" ")
}

/// Runs the command; returns the process exit status.
fn dispatch(cli: Cli) -> Result<i32> {
    if cli.check_config {
        serve::check_config(cli.config)?;
        return Ok(0);
    }
    let Some(command) = cli.command else {
        use clap::CommandFactory;
        Cli::command().print_help()?;
        return Ok(2);
    };
    match command {
        Command::Serve(args) => args.run().map(|()| 0),
        Command::Ptx(args) => args.run().map(|()| 0),
        Command::Run(args) => args.run().map(|()| 0),
        Command::Evolve(args) => args.run(),
        Command::Tune(args) => args.run().map(|()| 0),
        Command::EvalWorker(args) => args.run().map(|()| 0),
        Command::SimLaunch(args) => args.run().map(|()| 0),
        Command::GpuWorker(args) => args.run().map(|()| 0),
        Command::GpuCheck(args) => args.run().map(|()| 0),
        Command::GpuCompareCheck(args) => args.run(),
        Command::GpuGuardCheck(args) => args.run(),
        Command::Mutate(args) => args.run().map(|()| 0),
        Command::Ids(args) => args.run().map(|()| 0),
        Command::Edits(args) => args.run().map(|()| 0),
        Command::Transplant(args) => args.run(),
        Command::Report(args) => args.run().map(|()| 0),
        Command::ExplainEdits(args) => args.run().map(|()| 0),
        Command::Spec { command } => command.run().map(|()| 0),
    }
}
