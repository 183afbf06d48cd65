//! `gevod serve`: the long-running daemon. It watches build directories for
//! kernel specs, keeps one job per kernel version, runs jobs on idle GPUs
//! (or the simulator) in slices chosen by the scheduler, checkpoints every
//! generation in the store, exports each new best validated variant, and
//! answers clients on a Unix socket.
//!
//! Threads: the control loop (this module's [`serve`] and [`control`]:
//! signals, scans, GPU idleness, telling runners to stop, the systemd
//! watchdog), one runner per slot ([`runner`]: the engine and its worker
//! processes), and the API ([`crate::api`] with [`handler`]). They share
//! [`Shared`].
//!
//! Invariants: a job runs on at most one slot; a job's engine is only
//! advanced by committed generations, so stopping a runner at any moment
//! loses at most the generation in flight; a spec or IR change never alters
//! a job, it makes a new version.

mod control;
mod explain;
mod explain_slot;
mod generated;
mod handler;
mod register;
pub mod registry;
mod rights;
mod runner;
mod scan;
pub mod seed;
mod shared_search;
mod slots;
mod tuned;

pub use crate::config::ServeConfig;
pub use slots::{slots_for, WorkerFactory};

use crate::worker::setup::WorkerSetup;
use control::Control;
use gevo_client::export::Readers;
use gevo_model::access::Reader;
use gevo_model::device::DeviceInfo;
use gevo_model::spec::Spec;
use gevo_search::evolve::{Backend, Scope};
use gevo_search::store::{Store, StoreError};
use registry::{Registry, SlotState};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock};
use std::time::{Duration, Instant};

/// The control loop's tick: how fast it reacts to signals and stops.
const TICK: Duration = Duration::from_millis(100);

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Api(#[from] crate::api::ApiError),
    #[error("{0}")]
    Gpu(String),
    #[error("{}: cannot make it private ([daemon] private): {source}", path.display())]
    Private {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Who may read the state directory's exports and job snapshots (`[daemon]
/// private`). Private, the state directory and the store are made 0750 and
/// 0640 too: what was written before, 0644 in 0755 directories, is then
/// out of others' reach as well.
fn state_readers(state_dir: &Path, private: bool) -> Result<Readers, ServeError> {
    use std::os::unix::fs::PermissionsExt;
    if !private {
        return Ok(Readers::Everyone);
    }
    let store = state_dir.join(gevo_search::store::FILE_NAME);
    for (path, mode) in [(state_dir.to_path_buf(), 0o750), (store, 0o640)] {
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))
            .map_err(|source| ServeError::Private { path, source })?;
    }
    Ok(Readers::Group)
}

pub trait BackendFactory: Send + Sync {
    /// Starts the backend of one job on `device` (the simulator when
    /// `None`): the workers `job` describes, for `spec`.
    fn start(
        &self,
        job: &WorkerSetup,
        spec: &Spec,
        device: Option<&DeviceInfo>,
        stop: Arc<AtomicBool>,
    ) -> Result<Box<dyn Backend>, String>;

    /// Sweeps a tuned spec's configurations (`crate::tune`) on `device`
    /// (the simulator, with `workers` threads, when `None`), reading its
    /// files for `reader`.
    fn sweep(
        &self,
        spec_path: &Path,
        tuned: &Spec,
        device: Option<&DeviceInfo>,
        reader: &Reader,
        workers: usize,
    ) -> Result<crate::tune::Sweep, String>;
}

/// The GPUs of one slot: the first (which measures promotions) and the
/// others behind the same job, a GPU worker each.
#[derive(Debug, Clone, PartialEq)]
pub struct SlotGpus {
    pub first: DeviceInfo,
    pub more: Vec<DeviceInfo>,
}

/// Where jobs run: one GPU (or a group of them), or the simulator.
pub struct Slot {
    pub device: Option<DeviceInfo>,
    /// Further GPUs behind the slot's job (`[gpu] devices_per_job`).
    pub more_devices: Vec<DeviceInfo>,
    /// Set to make the runner abandon its generation and return.
    pub stop: Arc<AtomicBool>,
}

impl Slot {
    pub fn name(&self) -> String {
        match &self.device {
            Some(d) if self.more_devices.is_empty() => format!("{} ({})", d.name, d.uuid),
            Some(d) => format!(
                "{} x{} ({})",
                d.name,
                1 + self.more_devices.len(),
                self.devices()
                    .map(|d| d.uuid.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            None => "sim".into(),
        }
    }

    /// Every GPU of the slot, the first first.
    pub fn devices(&self) -> impl Iterator<Item = &DeviceInfo> {
        self.device.iter().chain(&self.more_devices)
    }
}

/// Paths and overrides from the command line.
#[derive(Debug, Clone, Default)]
pub struct ServeOptions {
    pub config: PathBuf,
    /// The config was named on the command line (so it must exist).
    pub config_required: bool,
    pub socket: Option<PathBuf>,
    pub state: Option<PathBuf>,
    pub watch: Vec<PathBuf>,
}

impl ServeOptions {
    pub fn load_config(&self) -> Result<ServeConfig, ServeError> {
        Ok(ServeConfig::load(&self.config, self.config_required)?)
    }

    fn socket(&self, config: &ServeConfig) -> PathBuf {
        self.socket
            .clone()
            .or_else(|| {
                config
                    .daemon
                    .socket
                    .as_ref()
                    .map(|p| self.config_relative(p))
            })
            .unwrap_or_else(|| gevo_client::paths::Defaults::current().socket)
    }

    fn state(&self, config: &ServeConfig) -> PathBuf {
        self.state
            .clone()
            .or_else(|| {
                config
                    .daemon
                    .state_dir
                    .as_ref()
                    .map(|p| self.config_relative(p))
            })
            .unwrap_or_else(|| gevo_client::paths::Defaults::current().state)
    }

    /// A path from the config file: relative ones are relative to the file
    /// (as gevo-client reads them), not to the daemon's working directory.
    fn config_relative(&self, path: &Path) -> PathBuf {
        let base = self.config.parent().unwrap_or(Path::new("."));
        absolute(&base.join(path))
    }

    /// Config roots: the file's and `--watch`, made absolute.
    fn roots(&self, config: &ServeConfig) -> Vec<PathBuf> {
        let mut roots: Vec<PathBuf> = config
            .daemon
            .watch
            .iter()
            .map(|p| self.config_relative(p))
            .chain(self.watch.iter().map(|p| absolute(p)))
            .collect();
        roots.dedup();
        roots
    }
}

pub struct Shared {
    pub registry: Mutex<Registry>,
    /// Wakes runners waiting for a job.
    pub wake: Condvar,
    pub store: Store,
    pub config: RwLock<ServeConfig>,
    pub slots: Vec<Slot>,
    /// What jobs are measured on: `sim`, or `cuda` and the first GPU.
    pub scope: Scope,
    /// The GPUs' PTX target; `None` on the simulator (each spec's own).
    pub arch: Option<String>,
    pub state_dir: PathBuf,
    /// Who may read the exports and snapshots written there.
    pub readers: Readers,
    pub socket: PathBuf,
    pub shutdown: AtomicBool,
    /// A client asked for a rescan (watch/unwatch).
    pub rescan: AtomicBool,
    pub started: Instant,
}

impl Shared {
    pub fn registry(&self) -> MutexGuard<'_, Registry> {
        // A panicking thread cannot leave the registry half-updated in a way
        // worse than stopping the daemon would; keep serving.
        self.registry.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn config(&self) -> ServeConfig {
        self.config
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn set_config(&self, config: ServeConfig) {
        *self.config.write().unwrap_or_else(|e| e.into_inner()) = config;
    }
}

/// Signals the control loop reacts to, as flags set by handlers.
pub struct Signals {
    pub terminate: Arc<AtomicBool>,
    pub reload: Arc<AtomicBool>,
}

/// Runs the daemon until SIGTERM/SIGINT or a client's shutdown.
pub fn serve(
    options: ServeOptions,
    factory: Arc<dyn BackendFactory>,
    slots_for: impl Fn(&ServeConfig) -> Result<Vec<Option<SlotGpus>>, String>,
    signals: Signals,
) -> Result<(), ServeError> {
    // SIGTERM is honoured between the steps of start-up too (a GPU probe
    // or a store on a slow disk can take seconds): stop before the next.
    let stopped = || {
        let stop = signals.terminate.load(Ordering::Relaxed);
        if stop {
            tracing::info!("stopped during start-up");
        }
        stop
    };
    let config = options.load_config()?;
    let state_dir = options.state(&config);
    let socket = options.socket(&config);
    if stopped() {
        return Ok(());
    }
    let devices = slots_for(&config).map_err(ServeError::Gpu)?;
    if stopped() {
        return Ok(());
    }
    let store = Store::open(&state_dir)?;
    // Its job snapshots are named like specs: never found as the user's,
    // wherever the state directory lies.
    crate::watch::skip_own_state(&state_dir);
    let readers = state_readers(&state_dir, config.daemon.private)?;
    let (scope, arch) = match devices.first() {
        Some(Some(SlotGpus { first: d, .. })) => {
            (crate::worker::gpu::GpuWorker::scope(d), Some(d.arch()))
        }
        _ => (
            Scope {
                backend: "sim".into(),
                target: String::new(),
            },
            None,
        ),
    };
    let slots: Vec<Slot> = devices
        .into_iter()
        .map(|gpus| Slot {
            device: gpus.as_ref().map(|g| g.first.clone()),
            more_devices: gpus.map(|g| g.more).unwrap_or_default(),
            stop: Arc::new(AtomicBool::new(false)),
        })
        .collect();
    let mut registry = Registry {
        slots: vec![SlotState::default(); slots.len()],
        ..Registry::default()
    };
    registry.roots = registry::load_roots(&store, &options.roots(&config))?;
    scan::load_jobs(&store, &state_dir, readers, &mut registry)?;
    if stopped() {
        return Ok(());
    }
    let shared = Arc::new(Shared {
        registry: Mutex::new(registry),
        wake: Condvar::new(),
        store,
        config: RwLock::new(config),
        slots,
        scope,
        arch,
        state_dir,
        readers,
        socket: socket.clone(),
        shutdown: AtomicBool::new(false),
        rescan: AtomicBool::new(false),
        started: Instant::now(),
    });

    let listener = crate::api::bind(&socket)?;
    // Beside the socket, the state directory its clients read exports from
    // while this daemon is down (kept after it stops).
    match gevo_client::record::write(&socket, &shared.state_dir) {
        Ok(path) => tracing::debug!(record = %path.display(), "daemon record written"),
        Err(e) => tracing::warn!(error = %e, "no daemon record beside the socket"),
    }
    let api_handler: Arc<dyn crate::api::Handler> = Arc::new(handler::ApiHandler {
        shared: shared.clone(),
    });
    std::thread::Builder::new()
        .name("api".into())
        .spawn(move || crate::api::serve(listener, api_handler))
        .expect("spawning the API thread");
    tracing::info!(socket = %socket.display(), state = %shared.state_dir.display(), slots = shared.slots.len(), "gevod serving");

    let mut control = Control::new(shared.clone());
    control.scan_now();
    let runners: Vec<_> = (0..shared.slots.len())
        .map(|i| {
            let shared = shared.clone();
            let factory = factory.clone();
            std::thread::Builder::new()
                .name(format!("runner-{i}"))
                .spawn(move || runner::run(&shared, i, factory.as_ref()))
                .expect("spawning a runner thread")
        })
        .collect();
    let explainer = {
        let shared = shared.clone();
        std::thread::Builder::new()
            .name("explainer".into())
            .spawn(move || explain::run(&shared))
            .expect("spawning the explainer thread")
    };
    // Ready: the store is open and the socket listens.
    let _ = sd_notify::notify(&[sd_notify::NotifyState::Ready]);
    let watchdog = sd_notify::watchdog_enabled().map(|d| d / 2);
    let mut last_ping = Instant::now();

    let mut events = crate::watch::Events::watch(&control.root_paths());
    loop {
        if signals.terminate.load(Ordering::Relaxed) || shared.shutdown.load(Ordering::Relaxed) {
            break;
        }
        let now = Instant::now();
        if signals.reload.swap(false, Ordering::Relaxed) {
            let _ = sd_notify::notify(&[sd_notify::NotifyState::Reloading]);
            match options.load_config() {
                Ok(config) => {
                    let roots = registry::load_roots(&shared.store, &options.roots(&config))?;
                    {
                        let mut registry = shared.registry();
                        registry.roots = roots;
                        // A reload is also the way to retry jobs that failed.
                        for job in registry.jobs.values_mut() {
                            job.error = None;
                        }
                    }
                    shared.set_config(config);
                    events = crate::watch::Events::watch(&control.root_paths());
                    control.scan_now();
                    tracing::info!("configuration reloaded");
                }
                Err(e) => {
                    tracing::error!(error = %e, "reload refused; keeping the configuration in force")
                }
            }
            let _ = sd_notify::notify(&[sd_notify::NotifyState::Ready]);
        }
        let config = shared.config();
        if shared.rescan.swap(false, Ordering::Relaxed) {
            events = crate::watch::Events::watch(&control.root_paths());
            control.scan_now();
        } else if events.quiet_after_change(now, config.daemon.debounce) || control.scan_due(now) {
            control.scan_now();
        }
        control.gates(&config, now);
        control.stop_what_must_stop();
        shared.wake.notify_all();
        if let Some(interval) = watchdog {
            if last_ping.elapsed() >= interval {
                let _ = sd_notify::notify(&[sd_notify::NotifyState::Watchdog]);
                last_ping = Instant::now();
            }
        }
        std::thread::sleep(TICK);
    }

    tracing::info!("shutting down: stopping the runners");
    let _ = sd_notify::notify(&[sd_notify::NotifyState::Stopping]);
    shared.shutdown.store(true, Ordering::Relaxed);
    for slot in &shared.slots {
        slot.stop.store(true, Ordering::Relaxed);
    }
    shared.wake.notify_all();
    for r in runners {
        let _ = r.join();
    }
    let _ = explainer.join();
    // Only a socket: whatever replaced ours since (a file, a link) stays.
    use std::os::unix::fs::FileTypeExt;
    if std::fs::symlink_metadata(&socket).is_ok_and(|m| m.file_type().is_socket()) {
        let _ = std::fs::remove_file(&socket);
    }
    tracing::info!("stopped; every job is checkpointed at its last generation");
    Ok(())
}

fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}
