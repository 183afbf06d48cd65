//! The GPU safety gate: before a variant is validated on the GPU, its PTX
//! runs once on the smallest held-out test under compute-sanitizer's
//! memcheck, racecheck and synccheck (`gevod gpu-check` under each tool,
//! the three side by side); any report rejects it with the first tool's
//! first message. Races and
//! out-of-bounds accesses that change no output and do not crash are caught
//! here, where the simulator's smaller inputs may not reach them. A check
//! takes seconds (racecheck runs a kernel tens of times slower); when the
//! backend is told to stop (another user's process on the GPU, a pause, a
//! shutdown), the sanitizer and what it runs are killed at once, so that the
//! GPU is free within a poll, not when the check would have ended.

pub use crate::config::SanitizeMode;
use gevo_search::evolve::BackendError;
use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Why a check gave no verdict.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GateError {
    /// The stop flag was set: the check was killed.
    #[error("interrupted")]
    Interrupted,
    /// The check ran past its timeout: killed.
    #[error("ran past {0:?}")]
    TimedOut(Duration),
    /// The check itself could not run.
    #[error("{0}")]
    Failed(String),
}

impl From<GateError> for BackendError {
    fn from(e: GateError) -> Self {
        match e {
            GateError::Interrupted => BackendError::Interrupted,
            e @ GateError::TimedOut(_) => BackendError::Failed(e.to_string()),
            GateError::Failed(message) => BackendError::Failed(message),
        }
    }
}

/// How often a running check looks at the stop flag and the clock.
const POLL: Duration = Duration::from_millis(50);

/// The tools run, in order; the first report decides.
pub const TOOLS: [&str; 3] = ["memcheck", "racecheck", "synccheck"];

/// compute-sanitizer's exit status when it found something (ours, chosen
/// to differ from the checked program's own failures).
const FOUND: i32 = 86;

/// compute-sanitizer on the PATH, else in the CUDA toolkit's usual places.
pub fn find_sanitizer() -> Option<PathBuf> {
    crate::cuda::toolkit::find_tool("compute-sanitizer")
}

/// Runs variants once under compute-sanitizer.
#[derive(Debug)]
pub struct SafetyGate {
    sanitizer: PathBuf,
    /// `gevod` and its `gpu-check` arguments, but the PTX file.
    program: PathBuf,
    args: Vec<OsString>,
    /// The held-out test the variant runs on.
    test: String,
    timeout: Duration,
    /// Variants checked and rejected, and the seconds spent, for the report.
    pub checked: u64,
    pub rejected: u64,
    pub seconds: f64,
    /// Any of them set (the backend must stop, the gate is closing): a
    /// running check is killed.
    stops: Vec<Arc<AtomicBool>>,
}

impl SafetyGate {
    pub fn new(
        sanitizer: PathBuf,
        program: PathBuf,
        args: Vec<OsString>,
        test: String,
        timeout: Duration,
    ) -> Self {
        SafetyGate {
            sanitizer,
            program,
            args,
            test,
            timeout,
            checked: 0,
            rejected: 0,
            seconds: 0.0,
            stops: Vec::new(),
        }
    }

    /// The same gate, killing a running check when `stop` is set (as well
    /// as when any flag given before is).
    pub fn stopped_by(mut self, stop: Arc<AtomicBool>) -> Self {
        self.stops.push(stop);
        self
    }

    /// One line for the report: what runs, and what it did so far.
    pub fn describe(&self) -> String {
        let per = if self.checked > 0 {
            format!(", {:.1} s per variant", self.seconds / self.checked as f64)
        } else {
            String::new()
        };
        format!(
            "GPU safety gate: {} ({}) on {}: {} checked, {} rejected{per}",
            self.sanitizer.display(),
            TOOLS.join(", "),
            self.test,
            self.checked,
            self.rejected
        )
    }

    /// Runs `ptx` under each tool; the first tool's first report, if any.
    /// `Err` when the check itself could not run, or was stopped. The tools
    /// run side by side (the check takes about its slowest tool's time, not
    /// the sum); where they cannot run
    /// together, one after another.
    pub fn check(&mut self, ptx: &str) -> Result<Option<String>, GateError> {
        let started = Instant::now();
        let failed = GateError::Failed;
        let dir = tempfile::tempdir().map_err(|e| failed(format!("a temporary directory: {e}")))?;
        let ptx_path = dir.path().join("variant.ptx");
        std::fs::write(&ptx_path, ptx)
            .map_err(|e| failed(format!("{}: {e}", ptx_path.display())))?;
        let verdict = match self.run(&TOOLS, &ptx_path, dir.path()) {
            Err(GateError::Failed(why)) => {
                tracing::warn!(
                    "the safety gate's tools did not run side by side ({why}); running them one after another"
                );
                let mut verdict = None;
                for tool in TOOLS {
                    verdict = self.run(&[tool], &ptx_path, dir.path())?;
                    if verdict.is_some() {
                        break;
                    }
                }
                verdict
            }
            other => other?,
        };
        self.checked += 1;
        self.rejected += u64::from(verdict.is_some());
        self.seconds += started.elapsed().as_secs_f64();
        Ok(verdict)
    }

    /// Runs `tools` at once on `ptx`; the first report in their order
    /// (`tool: message`), decided as soon as every tool before it has
    /// finished clean; the others are then killed.
    fn run(&self, tools: &[&str], ptx: &Path, dir: &Path) -> Result<Option<String>, GateError> {
        let mut running = Vec::with_capacity(tools.len());
        for tool in tools {
            running.push(self.spawn(tool, ptx, dir)?);
        }
        let started = Instant::now();
        loop {
            for run in &mut running {
                if run.status.is_none() {
                    run.status = run
                        .child
                        .try_wait()
                        .map_err(|e| GateError::Failed(format!("{}: {e}", run.tool)))?;
                }
            }
            // In order: a finished tool's report decides once all before it
            // finished clean.
            let mut all_clean = true;
            for run in &running {
                match run.status {
                    None => {
                        all_clean = false;
                        break;
                    }
                    Some(status) => {
                        if let Some(report) = run.verdict(status)? {
                            return Ok(Some(format!("{}: {report}", run.tool)));
                        }
                    }
                }
            }
            if all_clean {
                return Ok(None);
            }
            if self.stops.iter().any(|s| s.load(Ordering::Relaxed)) {
                return Err(GateError::Interrupted);
            }
            if started.elapsed() > self.timeout {
                return Err(GateError::TimedOut(self.timeout));
            }
            std::thread::sleep(POLL);
        }
    }

    /// Starts `tool` on `ptx` in a process group of its own (a stop kills
    /// the sanitizer and what it runs), its log and stderr in `dir`.
    fn spawn(&self, tool: &str, ptx: &Path, dir: &Path) -> Result<ToolRun, GateError> {
        let failed = GateError::Failed;
        let log = dir.join(format!("{tool}.log"));
        let mut command = Command::new(&self.sanitizer);
        command
            .args(["--tool", tool, "--print-limit", "1"])
            .arg(format!("--error-exitcode={FOUND}"))
            .arg("--log-file")
            .arg(&log)
            .arg(&self.program)
            .args(&self.args)
            .arg("--ptx")
            .arg(ptx)
            .args(["--test", &self.test])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .process_group(0);
        // A file, not a pipe: a chatty program cannot fill it and stall.
        let stderr = log.with_extension("stderr");
        let file = std::fs::File::create(&stderr)
            .map_err(|e| failed(format!("{}: {e}", stderr.display())))?;
        command.stderr(file);
        let child = command
            .spawn()
            .map_err(|e| failed(format!("{}: {e}", self.sanitizer.display())))?;
        let group = gevo_model::own_processes::started_group(child.id());
        Ok(ToolRun {
            tool: tool.to_string(),
            child,
            _group: group,
            status: None,
            log,
            stderr,
        })
    }
}

/// How long a killed run's group is awaited before the gate goes on; what
/// still runs then stays gevod's for up to `ORPHAN_LIMIT`.
const GROUP_GONE_LIMIT: std::time::Duration = std::time::Duration::from_secs(5);
const ORPHAN_LIMIT: std::time::Duration = std::time::Duration::from_secs(600);

/// One tool's run of the variant.
struct ToolRun {
    tool: String,
    child: std::process::Child,
    _group: gevo_model::own_processes::GroupGuard,
    status: Option<std::process::ExitStatus>,
    log: PathBuf,
    stderr: PathBuf,
}

impl ToolRun {
    /// What the finished run says: clean, a report, or that it could not
    /// run the variant.
    fn verdict(&self, status: std::process::ExitStatus) -> Result<Option<String>, GateError> {
        match status.code() {
            Some(0) => Ok(None),
            Some(FOUND) => {
                let report = std::fs::read_to_string(&self.log).unwrap_or_default();
                Ok(Some(first_report(&report).unwrap_or_else(|| {
                    "a report without a message (see the sanitizer's log)".into()
                })))
            }
            _ => {
                let stderr = std::fs::read_to_string(&self.stderr).unwrap_or_default();
                let last = stderr.lines().last().unwrap_or_default();
                Err(GateError::Failed(format!(
                    "{} could not run the variant ({status}): {last}",
                    self.tool
                )))
            }
        }
    }
}

impl Drop for ToolRun {
    /// A run not finished when its check was decided, stopped or timed out
    /// is killed with what it started. Either way its group stays the
    /// daemon's until nothing of it runs: the worker the sanitizer ran (a
    /// grandchild, orphaned once the sanitizer exits) tears down its GPU
    /// context before it exits, and meanwhile it must not look like another
    /// user's process (one stopped the daemon's own job for 30 s).
    fn drop(&mut self) {
        let group = self.child.id();
        let mut below = Vec::new();
        let mut _held = Vec::new();
        if self.status.is_none() {
            // Anything below that left the group is killed by pid as well.
            below = gevo_model::own_processes::descendants(group);
            _held = below
                .iter()
                .map(|&p| gevo_model::own_processes::hold(p))
                .collect();
            // SAFETY: plain signals to the group this run leads (its pid is
            // the group id: `process_group(0)`, not yet reaped) and to the
            // processes found below it a moment ago.
            unsafe {
                libc::kill(-(group as libc::pid_t), libc::SIGKILL);
                for &p in &below {
                    libc::kill(p as libc::pid_t, libc::SIGKILL);
                }
            }
            let _ = self.child.wait();
        }
        tracing::debug!(group, below = ?below, killed = self.status.is_none(), "a safety-gate run ends");
        if !gevo_model::own_processes::await_gone(group, &below, GROUP_GONE_LIMIT) {
            tracing::debug!(
                group,
                "a safety-gate run outlasts its wait: held until gone"
            );
            // Still tearing down: gevod's until it is gone, without
            // holding up the gate any longer.
            gevo_model::own_processes::own_until_gone(group, below, ORPHAN_LIMIT);
        }
    }
}

/// The sanitizer's first error line (`========= Invalid __global__ read of
/// size 4 bytes`), without its prefix.
pub fn first_report(log: &str) -> Option<String> {
    log.lines()
        .filter_map(|l| l.strip_prefix("========="))
        .map(str::trim)
        .find(|l| {
            !l.is_empty()
                && !l.starts_with("COMPUTE-SANITIZER")
                && !l.starts_with("ERROR SUMMARY")
                && !l.starts_with("RACECHECK SUMMARY")
                && !l.starts_with("Target application returned")
        })
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::first_report;

    #[test]
    fn the_first_report_is_the_first_error_line() {
        let log = "========= COMPUTE-SANITIZER\n\
                   ========= Error: Race reported between Write access at pair_sum+0x90\n\
                   =========     and Read access at pair_sum+0xb0 [4 hazards]\n\
                   ========= \n\
                   ========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)\n";
        assert_eq!(
            first_report(log).as_deref(),
            Some("Error: Race reported between Write access at pair_sum+0x90")
        );
        let clean = "========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n";
        assert_eq!(first_report(clean), None);
    }
}
