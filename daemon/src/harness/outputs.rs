//! A finished run judged: its output files read safely, compared with the
//! original's, and the kernel cost the program reported.

use super::run::{Ending, RunOutcome};
use super::{HarnessEvaluator, Measured, Reference};
use gevo_model::assessment::{Failure, TestSummary};
use gevo_model::spec::{self, TestCase};
use std::path::Path;

impl HarnessEvaluator {
    /// Compares a run's outputs with the reference.
    pub(super) fn judge(
        &self,
        test: &TestCase,
        reference: &Reference,
        m: &Measured,
    ) -> TestSummary {
        let mut worst = 0f64;
        let mut failure = None;
        for (i, output) in self.harness.outputs.iter().enumerate() {
            let c = spec::compare(
                &self.spec.acceptance,
                output.elem,
                &reference.outputs[i],
                &m.outputs[i],
            );
            worst = worst.max(c.error);
            if !c.passed && failure.is_none() {
                let mismatch = Failure::Mismatch {
                    arg: output.file.clone(),
                    error: c.error,
                    first_mismatch: c.first_mismatch,
                };
                failure = Some((mismatch.kind().to_string(), mismatch.to_string()));
            }
        }
        TestSummary {
            test: test.name.clone(),
            failure,
            cost: Some(m.cost),
            original_cost: reference.cost,
            error: Some(worst),
            timing: None,
            kernels: Vec::new(),
        }
    }

    /// A finished run's outputs and cost, or why it failed.
    pub(super) fn measure(
        &self,
        o: &RunOutcome,
        out: &Path,
    ) -> Result<Measured, (&'static str, String)> {
        let stderr = || match o.stderr_tail(3) {
            t if t.is_empty() => String::new(),
            t => format!(": {t}"),
        };
        match o.ending {
            Ending::TimedOut => {
                return Err((
                    "timeout",
                    format!(
                        "the harness ran past {:.1} s and was killed",
                        o.wall.as_secs_f64()
                    ),
                ))
            }
            Ending::Signaled(s) => {
                return Err((
                    "harness_crash",
                    format!("the harness died of signal {s}{}", stderr()),
                ))
            }
            Ending::Exited(0) => {}
            Ending::Exited(code) => {
                return Err((
                    "harness_exit",
                    format!("the harness exited with status {code}{}", stderr()),
                ))
            }
        }
        if o.overflowed {
            return Err((
                "harness_output",
                format!(
                    "the harness printed more than max_output_bytes = {}",
                    self.harness.max_output_bytes
                ),
            ));
        }
        let mut outputs = Vec::with_capacity(self.harness.outputs.len());
        for output in &self.harness.outputs {
            let bytes = read_output(out, &output.file, self.harness.max_output_bytes, self.user)
                .map_err(|e| ("harness_output", e))?;
            outputs.push(bytes);
        }
        let stdout = String::from_utf8_lossy(&o.stdout);
        // A pipeline's program opens a gevo_harness handle per kernel, and
        // each prints its own line.
        let reported = if self.spec.kernels.len() > 1 {
            reported_cost_summed(&stdout)
        } else {
            reported_cost(&stdout)
        };
        let cost = reported.unwrap_or(o.wall.as_nanos() as u64);
        Ok(Measured {
            outputs,
            cost,
            wall: o.wall,
        })
    }
}

/// The output file `name` the harness wrote in `out`, read safely: the
/// program (as another user, under a root daemon) chose what lies there, so
/// a symlink is refused (`O_NOFOLLOW`) rather than followed to a file it
/// could not read, and so is a file it does not own (a hard link), a FIFO or
/// a device; checked on the open descriptor, size capped.
fn read_output(
    out: &Path,
    name: &str,
    max: u64,
    user: Option<(u32, u32)>,
) -> Result<Vec<u8>, String> {
    use std::io::Read;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let shown = format!("{{out}}/{name}");
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(out.join(name))
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(format!("the harness wrote no {shown}"))
        }
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(format!("{shown} is a symlink; outputs must be plain files"))
        }
        Err(e) => return Err(format!("{shown}: {e}")),
    };
    let meta = file.metadata().map_err(|e| format!("{shown}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("{shown} is not a plain file"));
    }
    if let Some((uid, _)) = user {
        if meta.uid() != uid {
            return Err(format!(
                "{shown} is owned by uid {}, not the harness's user (uid {uid})",
                meta.uid()
            ));
        }
    }
    if meta.len() > max {
        return Err(format!(
            "{shown} has {} bytes, more than max_output_bytes = {max}",
            meta.len()
        ));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{shown}: {e}"))?;
    if bytes.len() as u64 > max {
        return Err(format!("{shown} grew past max_output_bytes = {max}"));
    }
    Ok(bytes)
}

/// The kernel cost a program reported on stdout: the last
/// `GEVO_KERNEL_COST=<integer>` (simulator cost units), else the last
/// `GEVO_KERNEL_MS=<float>` in nanoseconds.
pub fn reported_cost(stdout: &str) -> Option<u64> {
    let last = |key: &str| {
        stdout
            .lines()
            .rev()
            .find_map(|l| l.trim().strip_prefix(key).map(str::to_string))
    };
    if let Some(v) = last("GEVO_KERNEL_COST=") {
        if let Ok(c) = v.trim().parse::<u64>() {
            return Some(c);
        }
    }
    let ms: f64 = last("GEVO_KERNEL_MS=")?.trim().parse().ok()?;
    (ms.is_finite() && ms >= 0.0).then(|| (ms * 1e6).round() as u64)
}

/// A pipeline's cost: the sum of every `GEVO_KERNEL_COST=<integer>` line
/// (one per kernel's gevo_harness handle), else of every
/// `GEVO_KERNEL_MS=<float>` line, in nanoseconds.
pub fn reported_cost_summed(stdout: &str) -> Option<u64> {
    let all = |key: &str| -> Vec<String> {
        stdout
            .lines()
            .filter_map(|l| l.trim().strip_prefix(key).map(|v| v.trim().to_string()))
            .collect()
    };
    let costs: Option<Vec<u64>> = all("GEVO_KERNEL_COST=")
        .iter()
        .map(|v| v.parse().ok())
        .collect();
    if let Some(c) = costs.filter(|c| !c.is_empty()) {
        return Some(c.iter().fold(0u64, |a, &b| a.saturating_add(b)));
    }
    let ms: Option<Vec<f64>> = all("GEVO_KERNEL_MS=")
        .iter()
        .map(|v| v.parse().ok().filter(|x: &f64| x.is_finite() && *x >= 0.0))
        .collect();
    let ms = ms.filter(|m| !m.is_empty())?;
    Some((ms.iter().sum::<f64>() * 1e6).round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reported_cost_prefers_the_simulators_count_then_milliseconds() {
        assert_eq!(
            reported_cost("hello\nGEVO_KERNEL_MS=1.5\n"),
            Some(1_500_000)
        );
        assert_eq!(
            reported_cost("GEVO_KERNEL_MS=1.5\nGEVO_KERNEL_COST=420\n"),
            Some(420)
        );
        // The last line of a kind counts.
        assert_eq!(
            reported_cost("GEVO_KERNEL_MS=9\n  GEVO_KERNEL_MS=0.25  \n"),
            Some(250_000)
        );
        assert_eq!(reported_cost("GEVO_KERNEL_MS=fast\n"), None);
        assert_eq!(reported_cost("GEVO_KERNEL_MS=-1\n"), None);
        assert_eq!(reported_cost("nothing\n"), None);
    }

    #[test]
    fn a_pipelines_cost_sums_every_kernels_line() {
        let two = "GEVO_KERNEL_COST=400\nGEVO_KERNEL_COST=20\n";
        assert_eq!(reported_cost_summed(two), Some(420));
        assert_eq!(reported_cost(two), Some(20));
        assert_eq!(
            reported_cost_summed("GEVO_KERNEL_MS=1.5\nGEVO_KERNEL_MS=0.25\n"),
            Some(1_750_000)
        );
        assert_eq!(
            reported_cost_summed("GEVO_KERNEL_MS=1\nGEVO_KERNEL_COST=7\n"),
            Some(7)
        );
        assert_eq!(
            reported_cost_summed("GEVO_KERNEL_MS=1\nGEVO_KERNEL_MS=x\n"),
            None
        );
        assert_eq!(reported_cost_summed("nothing\n"), None);
    }
}
