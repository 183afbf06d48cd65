//! Is a GPU free for gevod? A GPU is idle when no other process computes on
//! it and its utilization stayed at or under a threshold for a grace
//! period. [`IdleGate`] is that rule over samples (testable without a GPU);
//! [`Nvml`] takes the samples through NVML, loaded at run time, and
//! [`gevo_model::own_processes`] tells gevod's own processes from other users'.

use gevo_model::own_processes::{self as own, Own, ProcessTable};
use std::time::{Duration, Instant};

/// One look at a GPU, as NVML (or a script) gives it.
#[derive(Debug, Clone, PartialEq)]
pub struct Look {
    /// Every process with a compute context on it.
    pub pids: Vec<u32>,
    /// Percent of time a kernel ran over the last sample period.
    pub utilization: u32,
}

/// A look with gevod's own processes told apart.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Processes computing on it that are not gevod's own, described
    /// (`pid 4242 python3`).
    pub others: Vec<String>,
    pub utilization: u32,
}

impl Sample {
    /// Sorts out the processes that are gevod's own (see [`Own`]), and those
    /// that have exited: NVML listed a killed safety gate's worker, orphaned
    /// and not yet reaped, after the daemon had let its group go, and the
    /// daemon stopped its own job for it.
    pub fn from_look(look: &Look, own: &Own, table: &dyn ProcessTable) -> Sample {
        Sample {
            others: look
                .pids
                .iter()
                .filter(|&&pid| {
                    let exited = table.exited(pid);
                    if exited {
                        tracing::debug!(
                            ancestry = %own::ancestry(pid, table),
                            "a process listed on the GPU has exited: not counted"
                        );
                    }
                    !exited && !own.owns(pid, table)
                })
                .inspect(|&&pid| {
                    // Which process it was, should it be gevod's after all.
                    tracing::debug!(
                        ancestry = %own::ancestry(pid, table),
                        daemon = own.daemon,
                        groups = ?own.groups,
                        "another process computes on the GPU"
                    )
                })
                .map(|&pid| own::describe(pid))
                .collect(),
            utilization: look.utilization,
        }
    }
}

/// Where looks come from: NVML, or a script in tests.
pub trait GpuProbe {
    fn look(&self, uuid: &str) -> Result<Look, String>;
}

#[derive(Debug, Clone)]
pub struct IdleGate {
    threshold: u32,
    grace: Duration,
    /// When the GPU was last seen busy; the grace runs from here. `None`
    /// until a look sees it busy.
    last_busy: Option<Instant>,
    /// Whether any look was taken yet.
    looked: bool,
    why_busy: Option<String>,
}

impl IdleGate {
    /// A new gate is closed until its first look. That look opens it when
    /// it finds no other process and utilization at or under the
    /// threshold: NVML lists every process holding a compute context, even
    /// between its kernels, and its utilization covers the last sample
    /// period, so a quiet first look means nobody is computing. The grace
    /// period runs only after the GPU was seen busy, where it guards
    /// against a user's program that computes in bursts.
    pub fn new(threshold: u32, grace: Duration) -> Self {
        IdleGate {
            threshold,
            grace,
            last_busy: None,
            looked: false,
            why_busy: None,
        }
    }

    /// Takes a sample. `using` says whether gevod itself is computing on
    /// the GPU now: its own load then says nothing about other users, so
    /// only other processes count.
    pub fn observe(&mut self, sample: &Sample, using: bool, now: Instant) {
        self.looked = true;
        let busy = if !sample.others.is_empty() {
            Some(format!(
                "{} other process{} computing ({})",
                sample.others.len(),
                if sample.others.len() == 1 { "" } else { "es" },
                sample.others.join(", ")
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
            self.last_busy = Some(now);
            self.why_busy = Some(why);
        }
    }

    /// Whether gevod may launch on the GPU now.
    pub fn open(&self, now: Instant) -> bool {
        self.looked
            && self
                .last_busy
                .is_none_or(|busy| now.saturating_duration_since(busy) >= self.grace)
    }

    /// Why the gate is closed, for `status` and the log.
    pub fn reason(&self, now: Instant) -> Option<String> {
        if self.open(now) {
            return None;
        }
        let Some(busy) = self.last_busy.filter(|_| self.looked) else {
            return Some("waiting for the first look at the GPU".into());
        };
        let left = self.grace - now.saturating_duration_since(busy);
        Some(format!(
            "GPU busy: {}; idle in {:.0}s at the earliest",
            self.why_busy.as_deref().unwrap_or("busy"),
            left.as_secs_f64().ceil()
        ))
    }
}

/// NVML, for the samples, loaded at run time; an error from
/// [`Nvml::init`] when the library is not there (no NVIDIA driver).
pub struct Nvml {
    nvml: nvml_wrapper::Nvml,
}

impl Nvml {
    pub fn init() -> Result<Nvml, String> {
        nvml_wrapper::Nvml::init()
            .map(|nvml| Nvml { nvml })
            .map_err(|e| format!("NVML: {e}"))
    }
}

impl GpuProbe for Nvml {
    fn look(&self, uuid: &str) -> Result<Look, String> {
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
        Ok(Look {
            pids: processes.iter().map(|p| p.pid).collect(),
            utilization,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(others: &[u32], utilization: u32) -> Sample {
        Sample {
            others: others.iter().map(|p| format!("pid {p}")).collect(),
            utilization,
        }
    }

    #[test]
    fn the_gate_follows_the_rule() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut gate = IdleGate::new(10, s(30));
        // Closed until the first look; a quiet first look opens it at once.
        assert!(!gate.open(t0));
        assert_eq!(
            gate.reason(t0).unwrap(),
            "waiting for the first look at the GPU"
        );
        gate.observe(&sample(&[], 0), false, t0);
        assert!(gate.open(t0));
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
    fn a_busy_first_look_waits_the_grace() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut gate = IdleGate::new(10, s(30));
        gate.observe(&sample(&[], 50), false, t0);
        assert!(!gate.open(t0 + s(29)));
        assert!(gate.reason(t0).unwrap().contains("utilization 50%"));
        gate.observe(&sample(&[], 0), false, t0 + s(1));
        assert!(gate.open(t0 + s(30)));
    }

    /// A scripted NVML: what each look at one GPU returns, in turn.
    struct Scripted(std::cell::RefCell<Vec<Look>>);

    impl GpuProbe for Scripted {
        fn look(&self, _uuid: &str) -> Result<Look, String> {
            Ok(self.0.borrow_mut().remove(0))
        }
    }

    #[test]
    fn a_process_that_has_exited_never_closes_the_gate() {
        // A child that exits and is not reaped: a zombie, listed beside
        // init, for a daemon that owns neither.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let zombie = child.id();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !own::Proc.exited(zombie) {
            assert!(Instant::now() < deadline, "pid {zombie} never exited");
            std::thread::sleep(Duration::from_millis(10));
        }
        let nobody = Own {
            daemon: 0,
            groups: Default::default(),
        };
        let look = Look {
            pids: vec![zombie, 1],
            utilization: 100,
        };
        let sample = Sample::from_look(&look, &nobody, &own::Proc);
        assert_eq!(sample.others.len(), 1, "{:?}", sample.others);
        assert!(sample.others[0].starts_with("pid 1"), "{:?}", sample.others);
        child.wait().unwrap();
    }

    #[test]
    fn the_daemons_own_processes_never_close_the_gate() {
        use std::io::{BufRead, BufReader};
        // A child and a grandchild of this process, as the sanitizer and the
        // worker it runs: both compute on the scripted GPU, at full load.
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & echo $!; wait"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        let grandchild: u32 = line.trim().parse().unwrap();
        let ours = vec![std::process::id(), child.id(), grandchild];
        let probe = Scripted(std::cell::RefCell::new(vec![
            Look {
                pids: ours.clone(),
                utilization: 100,
            },
            Look {
                pids: [ours.clone(), vec![1]].concat(),
                utilization: 100,
            },
        ]));
        let (t0, grace) = (Instant::now(), Duration::from_secs(30));
        let mut gate = IdleGate::new(10, grace);
        let own = Own::now();
        let first = Sample::from_look(&probe.look("gpu").unwrap(), &own, &own::Proc);
        assert!(first.others.is_empty(), "{:?}", first.others);
        gate.observe(&first, true, t0);
        assert!(gate.open(t0));
        // A process that is not ours (init) closes it, named.
        let second = Sample::from_look(&probe.look("gpu").unwrap(), &own, &own::Proc);
        gate.observe(&second, true, t0);
        assert!(!gate.open(t0));
        assert!(gate
            .reason(t0)
            .unwrap()
            .contains("1 other process computing (pid 1"));
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
