//! What the daemon runs jobs on: the slots (one per GPU to use, or the
//! simulator) chosen from `[gpu]`, and the [`BackendFactory`] that starts a
//! job's worker processes from this executable through `worker::setup`.

use super::{BackendFactory, JobFiles};
use crate::config::{BackendSetting, ServeConfig, WithoutGpu};
use crate::cuda::driver;
use crate::device::{DeviceInfo, DeviceSelector};
use crate::evolve::Backend;
use crate::worker::setup::WorkerSetup;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// The slots: one per GPU to use, or the simulator.
pub fn slots_for(config: &ServeConfig) -> Result<Vec<Option<DeviceInfo>>, String> {
    let gpu = &config.gpu;
    if gpu.backend == BackendSetting::Sim {
        return Ok(vec![None]);
    }
    let devices = if gpu.devices.is_empty() {
        driver::probe_all().map_err(|e| e.to_string())
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

/// Starts jobs' workers as `gevod eval-worker` / `gevod gpu-worker`
/// processes of this executable.
pub struct WorkerFactory {
    pub libdevice: Option<PathBuf>,
}

impl BackendFactory for WorkerFactory {
    fn start(
        &self,
        job: &JobFiles,
        device: Option<&DeviceInfo>,
        stop: Arc<AtomicBool>,
    ) -> Result<Box<dyn Backend>, String> {
        let setup = WorkerSetup {
            spec_path: job.spec_path,
            ir: Some(job.ir),
            arch: job.arch,
            libdevice: self.libdevice.as_deref(),
            workers: job.workers,
            timeout: job.timeout,
            reader: job.reader,
            sanitize: job.sanitize,
            launcher: job.launcher,
            more_devices: &[],
        };
        setup
            .evaluators(job.spec, device, job.harness_user)
            .and_then(|evaluators| setup.start(evaluators, job.spec, job.prescreen, stop))
            .map_err(|e| e.to_string())
    }
}
