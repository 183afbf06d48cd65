//! `gevod serve` and `gevod --check-config`: the config path by mode, the
//! signal flags, and the library's daemon started with this executable's
//! workers.

use anyhow::{Context as _, Result};
use gevod::serve::{slots_for, ServeConfig, ServeOptions, Signals, WorkerFactory};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

#[derive(clap::Args)]
pub struct ServeArgs {
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
}

/// `gevod serve --help` with the socket and state directory a daemon
/// started by this user takes when neither a flag nor the config sets
/// them: the system daemon's as root, else the user daemon's (the paths
/// gevo-client searches, `gevo_client::paths`).
pub fn with_defaults(cli: clap::Command) -> clap::Command {
    use gevo_client::paths::{Defaults, Mode};
    let here = Defaults::current();
    let system = Defaults::for_mode(Mode::System);
    let default = |path: &std::path::Path, systems: &std::path::Path| match here.mode {
        Mode::System => format!("{}, the system daemon's (run as root)", path.display()),
        Mode::User => format!(
            "{}, your user daemon's; as root {}",
            path.display(),
            systems.display()
        ),
    };
    let socket = format!(
        "API socket (overrides [daemon] socket) [default: {}]",
        default(&here.socket, &system.socket)
    );
    let state = format!(
        "State directory (overrides [daemon] state_dir) [default: {}]",
        default(&here.state, &system.state)
    );
    cli.mut_subcommand("serve", |serve| {
        serve
            .mut_arg("socket", |a| a.help(socket))
            .mut_arg("state", |a| a.help(state))
    })
}

/// The file and whether it must exist: one given on the command line must;
/// the mode's default may be absent (then every key has its default).
fn config_path(config: Option<PathBuf>) -> (PathBuf, bool) {
    match config {
        Some(p) => (p, true),
        None => (gevo_client::paths::Defaults::current().config, false),
    }
}

pub fn check_config(config: Option<PathBuf>) -> Result<()> {
    let (path, required) = config_path(config);
    ServeConfig::load(&path, required)?;
    println!("{}: ok", path.display());
    Ok(())
}

impl ServeArgs {
    pub fn run(self) -> Result<()> {
        let (config, config_required) = config_path(self.config);
        let options = ServeOptions {
            config,
            config_required,
            socket: self.socket,
            state: self.state,
            watch: self.watch,
        };
        let signals = Signals {
            terminate: Arc::new(AtomicBool::new(false)),
            reload: Arc::new(AtomicBool::new(false)),
        };
        for s in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
            signal_hook::flag::register(s, signals.terminate.clone()).context("signal handlers")?;
        }
        signal_hook::flag::register(signal_hook::consts::SIGHUP, signals.reload.clone())
            .context("signal handlers")?;
        let factory = Arc::new(WorkerFactory {
            libdevice: self.libdevice,
        });
        gevod::serve::serve(options, factory, slots_for, signals)?;
        Ok(())
    }
}
