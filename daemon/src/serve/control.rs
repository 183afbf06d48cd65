//! The control loop's own state (`Control`), driven by [`serve`](super::serve)
//! every tick: scans of the roots, the GPU idle gates, and the stop flags of
//! runners whose job must not go on.

use super::{scan, ServeConfig, Shared};
use crate::sched::idle::{GpuProbe, IdleGate, Nvml, Sample};
use gevo_model::own_processes::{Own, Proc};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The control loop's own state.
pub(super) struct Control {
    shared: Arc<Shared>,
    settler: crate::watch::Settler,
    next_scan: Instant,
    nvml: Option<Nvml>,
    /// Per slot, an idle gate per GPU (none without NVML or a GPU).
    gates: Vec<Vec<IdleGate>>,
    last_poll: Option<Instant>,
}

impl Control {
    pub(super) fn new(shared: Arc<Shared>) -> Control {
        let config = shared.config();
        let now = Instant::now();
        let gpus = shared.slots.iter().any(|s| s.device.is_some());
        let nvml = if gpus {
            match Nvml::init() {
                Ok(n) => Some(n),
                Err(e) => {
                    tracing::warn!(error = %e, "no idle detection: GPUs count as idle");
                    None
                }
            }
        } else {
            None
        };
        let gates = shared
            .slots
            .iter()
            .map(|s| {
                s.devices()
                    .filter(|_| nvml.is_some())
                    .map(|_| IdleGate::new(config.gpu.idle_utilization, config.gpu.idle_grace))
                    .collect()
            })
            .collect();
        Control {
            shared,
            settler: Default::default(),
            next_scan: now,
            nvml,
            gates,
            last_poll: None,
        }
    }

    pub(super) fn root_paths(&self) -> Vec<PathBuf> {
        self.shared
            .registry()
            .roots
            .iter()
            .map(|r| r.path.clone())
            .collect()
    }

    pub(super) fn scan_due(&self, now: Instant) -> bool {
        now >= self.next_scan
    }

    pub(super) fn scan_now(&mut self) {
        let config = self.shared.config();
        let now = Instant::now();
        let pending = scan::rescan(&self.shared, &mut self.settler, &config, now);
        {
            // What `best --spec` says of a spec that has no job yet.
            let mut registry = self.shared.registry();
            registry.pending = self.settler.unsettled(now, config.daemon.settle);
            registry.scanned = Some(now);
        }
        // Rescan when the next unsettled spec may have settled, else at
        // the periodic interval.
        self.next_scan = now
            + pending
                .map(|p| p + Duration::from_millis(50))
                .unwrap_or(config.daemon.scan_interval)
                .min(config.daemon.scan_interval);
    }

    /// Samples each GPU (at the poll interval) and opens or closes its slot.
    pub(super) fn gates(&mut self, config: &ServeConfig, now: Instant) {
        let poll = self
            .last_poll
            .is_none_or(|t| now.duration_since(t) >= config.gpu.poll_interval);
        let own = poll.then(Own::now);
        let mut registry = self.shared.registry();
        for (i, slot) in self.shared.slots.iter().enumerate() {
            let using = registry.jobs.values().any(|j| j.running_on == Some(i));
            // A slot is open when every one of its GPUs is idle.
            let (mut open, mut reason) = (true, None);
            if let Some(nvml) = &self.nvml {
                for (device, gate) in slot.devices().zip(self.gates[i].iter_mut()) {
                    if let Some(own) = &own {
                        match nvml.look(&device.uuid) {
                            Ok(look) => {
                                gate.observe(&Sample::from_look(&look, own, &Proc), using, now)
                            }
                            Err(e) => tracing::warn!(error = %e, "GPU sample"),
                        }
                    }
                    if open && !gate.open(now) {
                        open = false;
                        reason = gate.reason(now);
                    }
                }
            }
            let slot_state = &mut registry.slots[i];
            if slot_state.open && !open {
                tracing::info!(slot = i, reason = ?reason, "GPU busy: the slot waits");
            }
            slot_state.open = open;
            slot_state.reason = reason;
        }
        if poll {
            self.last_poll = Some(now);
        }
    }

    /// Sets the stop flag of every runner whose job must not go on: shut
    /// down, its GPU became busy, or the job was paused, superseded,
    /// removed or failed.
    pub(super) fn stop_what_must_stop(&self) {
        let registry = self.shared.registry();
        for (i, slot) in self.shared.slots.iter().enumerate() {
            let must_stop = registry
                .jobs
                .values()
                .find(|j| j.running_on == Some(i))
                .is_some_and(|j| !j.runnable() || !registry.slots[i].open);
            if must_stop && !slot.stop.swap(true, Ordering::Relaxed) {
                tracing::info!(slot = i, reason = ?registry.slots[i].reason, "stopping the running job");
            }
        }
    }
}
