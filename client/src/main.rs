//! The `gevo-client` command line. docs/client.md is its manual; the exit
//! codes below are part of its contract with build scripts.

mod cli {
    //! The commands' parts, binary only: reaching the daemon, `best` and
    //! `report` with their fallback to the export, and the replies as text.
    pub mod daemon;
    pub mod fallback;
    pub mod render;
}

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use cli::daemon::{absolute_dir, ask, settings, unwatched_dir};
use cli::fallback::{best, report};
use cli::render::{render, reply_json};
use gevo_client::proto::Command;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

/// Usage errors, daemon errors other than "nothing validated", anything else.
const EXIT_ERROR: i32 = 1;
/// The daemon could not be reached (and, for `best`, no export could be used).
const EXIT_UNREACHABLE: i32 = 2;
/// `best`: the kernel has no validated variant (yet), or the daemon does not know it.
const EXIT_NO_VARIANT: i32 = 3;

#[derive(Parser)]
#[command(
    name = "gevo-client",
    version,
    about = "Asks the gevo daemon for the best validated PTX of a kernel, and manages its jobs",
    after_help = "Exit codes: 0 ok; 1 error; 2 daemon unreachable (best: and no usable export); \
                  3 best: no validated variant yet."
)]
struct Cli {
    /// gevod's config file; only [daemon] socket and state_dir are read
    /// [default: the mode's gevod.toml, if it exists]
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    /// The daemon's socket, and no other [default: $GEVO_SOCKET, else the
    /// config's, else the first that answers of your user daemon's and the
    /// system daemon's]
    #[arg(long, global = true, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// The daemon's state directory, read by `best` when the daemon is down
    /// [default: from the config, else the mode's of each daemon tried]
    #[arg(long, global = true, value_name = "DIR")]
    state: Option<PathBuf>,
    /// Print the answer as JSON instead of a table
    #[arg(long, global = true)]
    json: bool,
    /// Seconds to wait for the daemon to accept and answer [default: 30]
    #[arg(long, global = true, value_name = "SECONDS", value_parser = parse_seconds)]
    timeout: Option<Duration>,
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// The daemon: pid, uptime, paths, watch roots, GPU slots and jobs
    Status,
    /// Every job with its progress and best speedup; with a kernel, its
    /// jobs in full: the generated held-out tests kept and dropped (with
    /// why) and what your own tests miss
    Jobs {
        /// `<project>/<name>`, or `<name>` when only one project has it
        kernel: Option<String>,
    },
    /// Write the best validated PTX of a kernel (from the daemon, else its export)
    Best {
        /// `<project>/<name>`, or `<name>` when only one project has it
        kernel: String,
        /// The target, e.g. sm_90 [default: the variant with the highest speedup]
        #[arg(long, value_name = "sm_XX")]
        arch: Option<String>,
        /// Write the PTX here (only when it changed) instead of to stdout
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: Option<PathBuf>,
        /// The spec file the build wrote: when there is no answer, the
        /// daemon says what it knows of it (settling, not yet scanned,
        /// outside every watched directory, broken)
        #[arg(long, value_name = "FILE")]
        spec: Option<PathBuf>,
    },
    /// Write the validated patch of a kernel's best variant (JSON, for
    /// `gevod run --patch`)
    Patch {
        kernel: String,
        /// Write the patch here instead of to stdout
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// The Pareto front (cost, error, edits) of a kernel's current job
    Pareto { kernel: String },
    /// What the best variant changed: its edits and the changed IR
    /// instructions
    Explain {
        kernel: String,
        /// Show the whole IR diff (renumbered values included) instead of
        /// the changed instructions
        #[arg(long)]
        full_diff: bool,
    },
    /// Write a kernel's HTML report (from the daemon, else its export)
    Report {
        kernel: String,
        /// The HTML file to write [default: stdout]
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Have the daemon watch a build directory for kernel specs
    Watch {
        dir: PathBuf,
        /// A build's registration (CMake's configure): a directory you
        /// unwatched stays unwatched
        #[arg(long)]
        from_build: bool,
    },
    /// Stop watching a directory added with `watch`
    Unwatch { dir: PathBuf },
    /// Pause a kernel's job, or every job
    Pause { kernel: Option<String> },
    /// Resume a kernel's job, or every job
    Resume { kernel: Option<String> },
    /// Ask the daemon to exit
    Shutdown,
}

impl Cmd {
    /// The kernel the command names, and the target: checked before
    /// anything is asked or read ([`gevo_client::export::check_kernel_name`]).
    fn names(&self) -> (Option<&str>, Option<&str>) {
        match self {
            Cmd::Best { kernel, arch, .. } => (Some(kernel), arch.as_deref()),
            Cmd::Patch { kernel, .. }
            | Cmd::Pareto { kernel }
            | Cmd::Explain { kernel, .. }
            | Cmd::Report { kernel, .. } => (Some(kernel), None),
            Cmd::Jobs { kernel } | Cmd::Pause { kernel } | Cmd::Resume { kernel } => {
                (kernel.as_deref(), None)
            }
            Cmd::Status | Cmd::Watch { .. } | Cmd::Unwatch { .. } | Cmd::Shutdown => (None, None),
        }
    }
}

fn parse_seconds(s: &str) -> Result<Duration, String> {
    let secs: f64 = s.parse().map_err(|e| format!("{e}"))?;
    if !(secs > 0.0 && secs.is_finite()) {
        return Err("must be a positive number of seconds".into());
    }
    Ok(Duration::from_secs_f64(secs))
}

/// An error that ends the program with a particular exit code.
#[derive(Debug)]
struct Exit {
    code: i32,
    message: String,
}

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Exit {}

fn exit(code: i32, message: impl Into<String>) -> anyhow::Error {
    Exit {
        code,
        message: message.into(),
    }
    .into()
}

fn main() {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // clap exits 2 on usage errors; here 2 means "daemon unreachable".
            let code = if e.use_stderr() { EXIT_ERROR } else { 0 };
            let _ = e.print();
            std::process::exit(code);
        }
    };
    if let Err(e) = run(cli) {
        say(&gevo_client::text::error_line(e.chain()));
        let code = e.downcast_ref::<Exit>().map_or(EXIT_ERROR, |x| x.code);
        std::process::exit(code);
    }
}

fn run(cli: Cli) -> Result<()> {
    // A kernel name becomes a path in the export: `../x`, `/x` and the like
    // are refused before the daemon or a state directory is asked.
    let (kernel, arch) = cli.command.names();
    if let Some(kernel) = kernel {
        gevo_client::export::check_kernel_name(kernel)?;
    }
    if let Some(arch) = arch {
        gevo_client::export::check_target(arch)?;
    }
    let settings = settings(&cli)?;
    let json = cli.json;
    let request = match cli.command {
        Cmd::Best {
            kernel,
            arch,
            output,
            spec,
        } => {
            let spec = spec.map(|s| std::fs::canonicalize(&s).unwrap_or(s));
            let query = cli::fallback::Query {
                kernel: &kernel,
                arch: arch.as_deref(),
                spec: spec.as_deref(),
            };
            return best(&settings, &query, output.as_deref(), json);
        }
        Cmd::Patch { kernel, output } => {
            return cli::fallback::patch(&settings, &kernel, output.as_deref(), json)
        }
        Cmd::Report { kernel, output } => return report(&settings, &kernel, output.as_deref()),
        Cmd::Status => Command::Status,
        Cmd::Jobs { kernel: None } => Command::Jobs { kernel: None },
        Cmd::Jobs {
            kernel: Some(kernel),
        } => {
            let reply = ask(
                &settings,
                Command::Jobs {
                    kernel: Some(kernel.clone()),
                },
            )?;
            let reply = cli::render::only_kernel(reply, &kernel);
            return print_out(&if json {
                reply_json(&reply)
            } else {
                cli::render::render_job_details(&reply)
            });
        }
        Cmd::Pareto { kernel } => Command::Pareto { kernel },
        Cmd::Explain { kernel, full_diff } => {
            let reply = ask(&settings, Command::Explain { kernel })?;
            return print_out(&if json {
                reply_json(&reply)
            } else {
                cli::render::render_with(&reply, full_diff)
            });
        }
        Cmd::Watch { dir, from_build } => Command::Watch {
            dir: absolute_dir(&dir)?,
            from_build,
        },
        Cmd::Unwatch { dir } => Command::Unwatch {
            dir: unwatched_dir(&dir)?,
        },
        Cmd::Pause { kernel } => Command::Pause { kernel },
        Cmd::Resume { kernel } => Command::Resume { kernel },
        Cmd::Shutdown => Command::Shutdown,
    };
    let reply = ask(&settings, request)?;
    let text = if json {
        reply_json(&reply)
    } else {
        render(&reply)
    };
    print_out(&text)
}

/// Prints `gevo-client: <message>` to stderr. Messages quote the daemon's
/// strings and file names others chose, so control characters are escaped
/// (line breaks kept: a TOML error points at its line below it).
fn say(message: &str) {
    eprintln!(
        "gevo-client: {}",
        gevo_client::text::escape_terminal(message)
    );
}

fn print_out(text: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .context("cannot write to stdout")
}
