//! What the daemon runs jobs on: the slots (one per GPU to use, or the
//! simulator) chosen from `[gpu]`, and the [`BackendFactory`] that starts a
//! job's worker processes from this executable through `worker::setup`.

use super::{BackendFactory, SlotGpus};
use crate::config::{BackendSetting, ServeConfig, WithoutGpu};
use crate::cuda::driver;
use crate::worker::setup::WorkerSetup;
use gevo_model::access::Reader;
use gevo_model::device::{DeviceInfo, DeviceSelector};
use gevo_model::spec::Spec;
use gevo_search::evolve::Backend;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// The slots: one per GPU to use (or per group of `[gpu] devices_per_job`
/// GPUs of one model), or the simulator (`None`).
pub fn slots_for(config: &ServeConfig) -> Result<Vec<Option<SlotGpus>>, String> {
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
    Ok(group(same, gpu.devices_per_job))
}

/// GPUs in groups of `size`, in order, each group of one model and driver
/// (a job's results are keyed by that); a model's remainder is a smaller
/// group.
fn group(devices: Vec<DeviceInfo>, size: usize) -> Vec<Option<SlotGpus>> {
    let mut groups: Vec<Vec<DeviceInfo>> = Vec::new();
    for d in devices {
        match groups
            .iter_mut()
            .find(|g| g.len() < size.max(1) && g[0].target() == d.target())
        {
            Some(g) => g.push(d),
            None => groups.push(vec![d]),
        }
    }
    groups
        .into_iter()
        .map(|mut g| {
            let first = g.remove(0);
            Some(SlotGpus { first, more: g })
        })
        .collect()
}

/// Starts jobs' workers as `gevod eval-worker` / `gevod gpu-worker`
/// processes of this executable.
pub struct WorkerFactory {
    pub libdevice: Option<PathBuf>,
}

impl BackendFactory for WorkerFactory {
    fn start(
        &self,
        job: &WorkerSetup,
        spec: &Spec,
        device: Option<&DeviceInfo>,
        stop: Arc<AtomicBool>,
    ) -> Result<Box<dyn Backend>, String> {
        let setup = WorkerSetup {
            libdevice: self.libdevice.as_deref(),
            ..*job
        };
        setup
            .start_backend(spec, device, stop)
            .map_err(|e| e.to_string())
    }

    fn sweep(
        &self,
        spec_path: &std::path::Path,
        tuned: &Spec,
        device: Option<&DeviceInfo>,
        reader: &Reader,
        workers: usize,
    ) -> Result<crate::tune::Sweep, String> {
        let arch = crate::worker::setup::arch_for(tuned, None, device);
        let timer = match device {
            None => crate::tune::Timer::Simulator { workers },
            Some(device) => crate::tune::Timer::Gpu {
                setup: WorkerSetup {
                    libdevice: self.libdevice.as_deref(),
                    reader,
                    ..crate::worker::setup::measuring_setup(spec_path, &arch, None, workers)
                },
                device: device.clone(),
            },
        };
        crate::tune::sweep_in_scratch(
            spec_path,
            tuned,
            &timer,
            gevo_model::spec::TestSet::Train,
            reader,
        )
        .map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(ordinal: usize, name: &str) -> DeviceInfo {
        DeviceInfo {
            ordinal,
            uuid: format!("GPU-{ordinal}"),
            name: name.into(),
            compute_capability: (9, 0),
            driver_version: "13.0".into(),
            l2_bytes: 1 << 20,
        }
    }

    /// `(first, more)` ordinals of each slot.
    type Slots = Vec<(usize, Vec<usize>)>;

    fn slots(devices: &[&str], size: usize) -> Slots {
        let devices = devices.iter().enumerate().map(|(i, n)| gpu(i, n)).collect();
        group(devices, size)
            .into_iter()
            .map(|g| {
                let g = g.expect("a GPU slot");
                (g.first.ordinal, g.more.iter().map(|d| d.ordinal).collect())
            })
            .collect()
    }

    #[test]
    fn gpus_are_grouped_in_order_by_model() {
        let cases: &[(&[&str], usize, Slots)] = &[
            (&["H100", "H100"], 1, vec![(0, vec![]), (1, vec![])]),
            (
                &["H100", "H100", "H100"],
                2,
                vec![(0, vec![1]), (2, vec![])],
            ),
            (
                &["H100", "H200", "H100", "H200"],
                2,
                vec![(0, vec![2]), (1, vec![3])],
            ),
            (&["H100"; 4], 8, vec![(0, vec![1, 2, 3])]),
            (&["H100"; 2], 0, vec![(0, vec![]), (1, vec![])]),
        ];
        for (devices, size, want) in cases {
            assert_eq!(&slots(devices, *size), want, "{devices:?} by {size}");
        }
    }
}
