//! `gevod serve` and `gevod --check-config` at the binary's edge: the
//! config path by mode, the GPUs to use, signal flags, and the backend
//! factory that starts a job's worker processes from this executable.

use crate::gpu_cli::Evaluators;
use anyhow::{Context as _, Result};
use gevod::cuda::{driver, CudaError, DeviceInfo, DeviceSelector};
use gevod::evolve::Backend;
use gevod::serve::config::{BackendSetting, WithoutGpu};
use gevod::serve::{BackendFactory, JobFiles, ServeConfig, ServeOptions, Signals};
use gevod::worker::pool::WorkerPool;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

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

pub fn serve(
    config: Option<PathBuf>,
    socket: Option<PathBuf>,
    state: Option<PathBuf>,
    watch: Vec<PathBuf>,
    libdevice: Option<PathBuf>,
) -> Result<()> {
    let (config, config_required) = config_path(config);
    let options = ServeOptions {
        config,
        config_required,
        socket,
        state,
        watch,
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
    let factory = Arc::new(Factory { libdevice });
    gevod::serve::serve(options, factory, slots_for, signals)?;
    Ok(())
}

/// The slots: one per GPU to use, or the simulator.
fn slots_for(config: &ServeConfig) -> Result<Vec<Option<DeviceInfo>>, String> {
    let gpu = &config.gpu;
    if gpu.backend == BackendSetting::Sim {
        return Ok(vec![None]);
    }
    let devices = if gpu.devices.is_empty() {
        all_devices()
    } else {
        gpu.devices
            .iter()
            .map(|d| {
                let selector: DeviceSelector = d.parse()?;
                driver::probe(&selector).map_err(|e| format!("[gpu] devices: {d}: {e}"))
            })
            .collect()
    };
    let devices = match (devices, gpu.backend) {
        (Ok(d), _) if !d.is_empty() => d,
        (Ok(_), BackendSetting::Cuda) => {
            return Err("[gpu] backend = \"cuda\": no GPU found".into())
        }
        (Err(e), BackendSetting::Cuda) => return Err(format!("[gpu] backend = \"cuda\": {e}")),
        (Err(e), _) => {
            tracing::info!(reason = %e, "no GPU");
            Vec::new()
        }
        (Ok(_), _) => Vec::new(),
    };
    if devices.is_empty() {
        return Ok(match gpu.without_gpu {
            WithoutGpu::Simulate => {
                tracing::info!("no GPU: jobs run on the simulator");
                vec![None]
            }
            WithoutGpu::Wait => {
                tracing::warn!("no GPU and [gpu] without_gpu = \"wait\": jobs stay queued");
                Vec::new()
            }
        });
    }
    // Jobs are keyed by one target: GPUs of another architecture than the
    // first are left out (said once, here).
    let arch = devices[0].arch();
    let (same, other): (Vec<_>, Vec<_>) = devices.into_iter().partition(|d| d.arch() == arch);
    for d in &other {
        tracing::warn!(gpu = %d.name, arch = %d.arch(), first = %arch, "GPU of another architecture left out");
    }
    Ok(same.into_iter().map(Some).collect())
}

fn all_devices() -> Result<Vec<DeviceInfo>, String> {
    let mut found = Vec::new();
    for ordinal in 0.. {
        match driver::probe(&DeviceSelector::Ordinal(ordinal)) {
            Ok(d) => found.push(d),
            Err(CudaError::NoDevice { .. }) => break,
            Err(e) if found.is_empty() => return Err(e.to_string()),
            Err(_) => break,
        }
    }
    Ok(found)
}

struct Factory {
    libdevice: Option<PathBuf>,
}

impl BackendFactory for Factory {
    fn start(
        &self,
        job: &JobFiles,
        device: Option<&DeviceInfo>,
        stop: Arc<AtomicBool>,
    ) -> Result<Box<dyn Backend>, String> {
        let setup = crate::gpu_cli::WorkerSetup {
            spec_path: job.spec_path,
            ir: Some(job.ir),
            arch: job.arch,
            libdevice: self.libdevice.as_deref(),
            workers: job.workers,
            timeout: job.timeout,
        };
        let started: Result<Box<dyn Backend>> = setup
            .evaluators(job.spec, device, job.harness_user)
            .and_then(|evaluators| match evaluators {
                Evaluators::Pool(options, scope) => {
                    WorkerPool::start(options, job.spec, scope, stop)
                        .map(|p| Box::new(p) as Box<dyn Backend>)
                        .map_err(anyhow::Error::from)
                }
                Evaluators::Gpu(d) => setup
                    .cuda_backend(job.spec, d, job.prescreen, stop)
                    .map(|b| Box::new(b) as Box<dyn Backend>),
            });
        started.map_err(|e| format!("{e:#}"))
    }
}
