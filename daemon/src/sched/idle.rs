//! Is a GPU free for gevod? A GPU is idle when no other process computes on
//! it and its utilization stayed at or under a threshold for a grace
//! period. [`IdleGate`] is that rule over samples (testable without a GPU);
//! [`Nvml`] takes the samples through NVML, loaded at run time.

use std::time::{Duration, Instant};

/// One look at a GPU.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Processes computing on it that are not gevod's own workers.
    pub others: Vec<u32>,
    /// Percent of time a kernel ran over the last sample period.
    pub utilization: u32,
}

#[derive(Debug, Clone)]
pub struct IdleGate {
    threshold: u32,
    grace: Duration,
    /// When the GPU was last seen busy; the grace runs from here.
    last_busy: Instant,
    why_busy: Option<String>,
}

impl IdleGate {
    /// A new gate is closed for one grace period: gevod does not assume a
    /// GPU it has not watched is free.
    pub fn new(threshold: u32, grace: Duration, now: Instant) -> Self {
        IdleGate {
            threshold,
            grace,
            last_busy: now,
            why_busy: Some("watching for idle".into()),
        }
    }

    /// Takes a sample. `using` says whether gevod itself is computing on
    /// the GPU now: its own load then says nothing about other users, so
    /// only other processes count.
    pub fn observe(&mut self, sample: &Sample, using: bool, now: Instant) {
        let busy = if !sample.others.is_empty() {
            Some(format!(
                "{} other process{} computing (pid {})",
                sample.others.len(),
                if sample.others.len() == 1 { "" } else { "es" },
                sample
                    .others
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        } else if !using && sample.utilization > self.threshold {
            Some(format!(
                "utilization {}% above {}%",
                sample.utilization, self.threshold
            ))
        } else {
            None
        };
        if let Some(why) = busy {
            self.last_busy = now;
            self.why_busy = Some(why);
        }
    }

    /// Whether gevod may launch on the GPU now.
    pub fn open(&self, now: Instant) -> bool {
        now.saturating_duration_since(self.last_busy) >= self.grace
    }

    /// Why the gate is closed, for `status`.
    pub fn reason(&self, now: Instant) -> Option<String> {
        if self.open(now) {
            return None;
        }
        let left = self.grace - now.saturating_duration_since(self.last_busy);
        Some(format!(
            "GPU busy: {}; idle in {:.0}s at the earliest",
            self.why_busy.as_deref().unwrap_or("busy"),
            left.as_secs_f64().ceil()
        ))
    }
}

/// NVML, for the samples. `None` from [`Nvml::init`] when the library is
/// not there (no NVIDIA driver).
pub struct Nvml {
    nvml: nvml_wrapper::Nvml,
}

impl Nvml {
    pub fn init() -> Result<Nvml, String> {
        nvml_wrapper::Nvml::init()
            .map(|nvml| Nvml { nvml })
            .map_err(|e| format!("NVML: {e}"))
    }

    /// Samples the GPU with `uuid`; processes whose parent is `own_pid`
    /// (gevod's workers) are not "others".
    pub fn sample(&self, uuid: &str, own_pid: u32) -> Result<Sample, String> {
        let device = self
            .nvml
            .device_by_uuid(uuid)
            .map_err(|e| format!("NVML {uuid}: {e}"))?;
        let processes = device
            .running_compute_processes()
            .map_err(|e| format!("NVML {uuid}: processes: {e}"))?;
        let utilization = device
            .utilization_rates()
            .map_err(|e| format!("NVML {uuid}: utilization: {e}"))?
            .gpu;
        let others = processes
            .iter()
            .map(|p| p.pid)
            .filter(|&pid| pid != own_pid && parent_of(pid) != Some(own_pid))
            .collect();
        Ok(Sample {
            others,
            utilization,
        })
    }
}

/// The parent pid from /proc/<pid>/stat (the field after the command name,
/// which may itself contain spaces and parentheses).
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(others: &[u32], utilization: u32) -> Sample {
        Sample {
            others: others.to_vec(),
            utilization,
        }
    }

    #[test]
    fn the_gate_follows_the_rule() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut gate = IdleGate::new(10, s(30), t0);
        // Closed for the first grace period even when quiet.
        gate.observe(&sample(&[], 0), false, t0 + s(10));
        assert!(!gate.open(t0 + s(29)));
        assert!(gate.open(t0 + s(30)));
        // Another process closes it at once, and the grace restarts after it leaves.
        gate.observe(&sample(&[4242], 95), true, t0 + s(40));
        assert!(!gate.open(t0 + s(40)));
        assert!(gate.reason(t0 + s(41)).unwrap().contains("pid 4242"));
        gate.observe(&sample(&[], 0), false, t0 + s(50));
        assert!(!gate.open(t0 + s(69)));
        assert!(gate.open(t0 + s(70)));
        // High utilization counts only while gevod is not computing itself.
        gate.observe(&sample(&[], 100), true, t0 + s(80));
        assert!(gate.open(t0 + s(80)));
        gate.observe(&sample(&[], 11), false, t0 + s(90));
        assert!(!gate.open(t0 + s(90)));
        assert!(gate.reason(t0 + s(90)).unwrap().contains("utilization 11%"));
        gate.observe(&sample(&[], 10), false, t0 + s(100));
        assert!(gate.open(t0 + s(120)));
    }

    #[test]
    fn parents_read_from_proc() {
        let me = std::process::id();
        let child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        assert_eq!(parent_of(child.id()), Some(me));
        let mut child = child;
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
