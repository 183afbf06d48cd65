//! Harness mode: the kernel is run by its own application. Each variant is
//! compiled to PTX (and IR), the spec's `[harness]` command runs once per
//! test with the variant's PTX, and its output files are compared with the
//! original's under the spec's acceptance. The cost is the kernel time the
//! program reports (`GEVO_KERNEL_MS=`, or `GEVO_KERNEL_COST=` from
//! `gevo_harness.h` on the simulator), else the process's wall time.
//!
//! On the simulator (`Runner::Simulate`) the program's launches go through
//! `gevo_harness.h` to `gevod sim-launch` ([`launch`]), which runs the
//! variant's IR on the SIMT simulator; on the GPU they go to the driver.
//! docs/harness.md describes the contract and the security rules.

pub mod launch;
pub mod run;

use crate::eval::{Assessment, Failure, TestSummary};
use crate::ir::{CodegenOptions, Compiled, KernelIr, Patch};
use crate::spec::{self, Harness, Spec, TestCase, TestSet};
use crate::stats::Timing;
use run::{Ending, RunOutcome, RunRequest};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A variant's run may take this many times the original's wall time on
/// the same test (at least `MIN_VARIANT_TIMEOUT`) before it is a timeout:
/// mutants loop forever easily, and the spec's timeout is for the original.
const VARIANT_TIMEOUT_FACTOR: u32 = 20;
const MIN_VARIANT_TIMEOUT: Duration = Duration::from_secs(2);

/// Where the program's kernel launches run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Runner {
    /// On the simulator, through `<gevod> sim-launch`.
    Simulate { gevod: PathBuf },
    /// On the GPU; the device's UUID is passed as `CUDA_VISIBLE_DEVICES`.
    Gpu { device: Option<String> },
}

impl Runner {
    /// The backend name in cache scopes and job identities.
    pub fn backend_name(&self) -> &'static str {
        backend_name(matches!(self, Runner::Gpu { .. }))
    }
}

/// The scope backend of harness runs on the GPU or on the simulator.
pub fn backend_name(on_gpu: bool) -> &'static str {
    if on_gpu {
        "harness-cuda"
    } else {
        "harness-sim"
    }
}

#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    #[error("{}: not a harness spec (no [harness] table)", .0.display())]
    NotHarness(PathBuf),
    #[error("{}: {source}", spec.display())]
    Ir {
        spec: PathBuf,
        #[source]
        source: crate::ir::IrError,
    },
    #[error("{}: {test}: the original kernel fails in the harness: {message}", spec.display())]
    OriginalFails {
        spec: PathBuf,
        test: String,
        message: String,
    },
    #[error("{0}")]
    Io(String),
}

/// The original's result on one test, computed once.
struct Reference {
    outputs: Vec<Vec<u8>>,
    cost: u64,
    wall: Duration,
}

/// One run's measurements, or why the variant fails there.
struct Measured {
    outputs: Vec<Vec<u8>>,
    cost: u64,
    wall: Duration,
}

/// Evaluates variants of a harness spec's kernel by running its application.
pub struct HarnessEvaluator {
    spec: Spec,
    harness: Harness,
    ir: KernelIr,
    codegen: CodegenOptions,
    runner: Runner,
    user: Option<(u32, u32)>,
    scratch: tempfile::TempDir,
    /// The original kernel's PTX and IR, written once.
    original: VariantFiles,
    references: Mutex<HashMap<String, Arc<Reference>>>,
    next_dir: AtomicU64,
}

impl HarnessEvaluator {
    /// `user`: run the command as this uid/gid (when the daemon is root).
    pub fn new(
        spec: Spec,
        codegen: CodegenOptions,
        runner: Runner,
        user: Option<(u32, u32)>,
    ) -> Result<Self, HarnessError> {
        let harness = spec
            .harness
            .clone()
            .ok_or_else(|| HarnessError::NotHarness(spec.path.clone()))?;
        let ir_error = |source| HarnessError::Ir {
            spec: spec.path.clone(),
            source,
        };
        let ir = KernelIr::load_kernels(&spec.ir, &spec.kernels).map_err(ir_error)?;
        let compiled = ir.compile(&ir.empty_patch(), &codegen).map_err(ir_error)?;
        // Private: it holds the user's IR and PTX.
        let scratch = tempfile::Builder::new()
            .prefix("gevo-harness-")
            .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .tempdir()
            .map_err(|e| HarnessError::Io(format!("creating a scratch directory: {e}")))?;
        if let Some((uid, gid)) = user {
            chown(scratch.path(), uid, gid)?;
        }
        let original = write_files(scratch.path().join("original"), &compiled, user)?;
        Ok(HarnessEvaluator {
            spec,
            harness,
            ir,
            codegen,
            runner,
            user,
            scratch,
            original,
            references: Mutex::new(HashMap::new()),
            next_dir: AtomicU64::new(0),
        })
    }

    pub fn spec(&self) -> &Spec {
        &self.spec
    }

    pub fn ir(&self) -> &KernelIr {
        &self.ir
    }

    pub fn runner(&self) -> &Runner {
        &self.runner
    }

    /// The patch's PTX (what the program loads).
    pub fn compile(&self, patch: &Patch) -> Result<Compiled, String> {
        self.ir
            .compile(patch, &self.codegen)
            .map_err(|e| e.to_string())
    }

    /// Runs the patch through the harness on every test of `set`.
    pub fn assess(&self, patch: &Patch, set: TestSet) -> Result<Assessment, HarnessError> {
        let variant = match self.compile(patch) {
            Ok(c) => c,
            Err(message) => return Ok(Assessment::failed("compile", "invalid", message)),
        };
        let files = self.write_variant(&variant)?;
        let mut tests = Vec::new();
        for test in self.spec.tests(set) {
            let reference = self.reference(test)?;
            tests.push(match &self.runner {
                Runner::Simulate { .. } => self.assess_simulated(test, &files, &reference)?,
                Runner::Gpu { .. } => self.assess_timed(test, &files, &reference)?,
            });
        }
        Ok(Assessment {
            tests,
            device: None,
        })
    }

    /// One run on the simulator: deterministic, so once is enough.
    fn assess_simulated(
        &self,
        test: &TestCase,
        files: &VariantFiles,
        reference: &Reference,
    ) -> Result<TestSummary, HarnessError> {
        let timeout = self.variant_timeout(reference);
        Ok(match self.run_once(test, files, timeout)? {
            Err((kind, message)) => failed(test, reference, kind, message),
            Ok(m) => self.judge(test, reference, &m),
        })
    }

    /// `rounds` runs of the original and the variant in alternating order;
    /// the costs are the medians, and the rounds go to the bootstrap.
    fn assess_timed(
        &self,
        test: &TestCase,
        files: &VariantFiles,
        reference: &Reference,
    ) -> Result<TestSummary, HarnessError> {
        let timeout = self.variant_timeout(reference);
        let mut timing = Timing {
            original_ns: Vec::new(),
            variant_ns: Vec::new(),
        };
        let mut summary = None;
        for round in 0..self.harness.rounds {
            let variant_first = round % 2 == 1;
            let mut original_ns = None;
            if !variant_first {
                original_ns = Some(self.run_original(test)?.cost as f64);
            }
            let m = match self.run_once(test, files, timeout)? {
                Err((kind, message)) => return Ok(failed(test, reference, kind, message)),
                Ok(m) => m,
            };
            // Every round's outputs must pass, not only the first's.
            let judged = self.judge(test, reference, &m);
            if judged.failure.is_some() {
                return Ok(judged);
            }
            if variant_first {
                original_ns = Some(self.run_original(test)?.cost as f64);
            }
            timing.original_ns.extend(original_ns);
            timing.variant_ns.push(m.cost as f64);
            summary = Some(judged);
        }
        let mut summary = summary.expect("at least one round");
        summary.original_cost = crate::stats::median(&timing.original_ns).round() as u64;
        summary.cost = Some(crate::stats::median(&timing.variant_ns).round() as u64);
        summary.timing = Some(timing);
        Ok(summary)
    }

    fn run_original(&self, test: &TestCase) -> Result<Measured, HarnessError> {
        match self.run_once(test, &self.original, self.harness.timeout)? {
            Ok(m) => Ok(m),
            Err((_, message)) => Err(HarnessError::OriginalFails {
                spec: self.spec.path.clone(),
                test: test.name.clone(),
                message,
            }),
        }
    }

    /// Compares a run's outputs with the reference.
    fn judge(&self, test: &TestCase, reference: &Reference, m: &Measured) -> TestSummary {
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

    fn variant_timeout(&self, reference: &Reference) -> Duration {
        (reference.wall * VARIANT_TIMEOUT_FACTOR)
            .max(MIN_VARIANT_TIMEOUT)
            .min(self.harness.timeout)
    }

    fn reference(&self, test: &TestCase) -> Result<Arc<Reference>, HarnessError> {
        if let Some(r) = self.references.lock().expect("references").get(&test.name) {
            return Ok(r.clone());
        }
        let m = self.run_original(test)?;
        let r = Arc::new(Reference {
            outputs: m.outputs,
            cost: m.cost,
            wall: m.wall,
        });
        self.references
            .lock()
            .expect("references")
            .insert(test.name.clone(), r.clone());
        Ok(r)
    }

    fn write_variant(&self, variant: &Compiled) -> Result<VariantFiles, HarnessError> {
        // One directory per evaluation, reused by the next one.
        let dir = self.scratch.path().join("variant");
        if dir.exists() {
            std::fs::remove_dir_all(&dir)
                .map_err(|e| HarnessError::Io(format!("{}: {e}", dir.display())))?;
        }
        write_files(dir, variant, self.user)
    }

    /// Runs the command once on `test`; the measurements, or the failure's
    /// kind and message.
    fn run_once(
        &self,
        test: &TestCase,
        files: &VariantFiles,
        timeout: Duration,
    ) -> Result<Result<Measured, (&'static str, String)>, HarnessError> {
        let n = self.next_dir.fetch_add(1, Ordering::Relaxed);
        let run_dir = self.scratch.path().join(format!("run-{n}"));
        let out = run_dir.join("out");
        let tmp = run_dir.join("tmp");
        for d in [&run_dir, &out, &tmp] {
            std::fs::create_dir_all(d)
                .map_err(|e| HarnessError::Io(format!("{}: {e}", d.display())))?;
            if let Some((uid, gid)) = self.user {
                chown(d, uid, gid)?;
            }
        }
        let request = RunRequest {
            argv: self.harness.argv(test, &files.ptx, &out),
            workdir: self.harness.workdir.clone(),
            env: self.environment(test, files, &out, &tmp),
            timeout,
            max_output_bytes: self.harness.max_output_bytes,
            user: self.user,
        };
        let outcome = run::run(&request);
        let result = match outcome {
            Err(e) => Err(("harness_exit", e)),
            Ok(o) => self.measure(&o, &out),
        };
        // Nothing of a run is kept; its directory would only fill the disk.
        let _ = std::fs::remove_dir_all(&run_dir);
        Ok(result)
    }

    /// The documented variables, and nothing else of the daemon's environment.
    fn environment(
        &self,
        test: &TestCase,
        files: &VariantFiles,
        out: &Path,
        tmp: &Path,
    ) -> Vec<(String, String)> {
        let path = |p: &Path| p.display().to_string();
        let mut env = vec![
            ("PATH".to_string(), run::HARNESS_PATH.to_string()),
            ("LANG".to_string(), "C.UTF-8".to_string()),
            ("HOME".to_string(), path(tmp)),
            ("TMPDIR".to_string(), path(tmp)),
            ("GEVO_PTX".to_string(), path(&files.ptx)),
            ("GEVO_OUT".to_string(), path(out)),
            ("GEVO_KERNEL".to_string(), self.ir.kernel().to_string()),
            (
                "GEVO_KERNELS".to_string(),
                self.ir.chosen_kernels().join(" "),
            ),
            ("GEVO_TEST".to_string(), test.name.clone()),
            ("GEVO_SEED".to_string(), test.seed.to_string()),
        ];
        match &self.runner {
            Runner::Simulate { gevod } => {
                env.push(("GEVO_SIMULATOR".to_string(), path(gevod)));
                env.push(("GEVO_IR".to_string(), path(&files.ir)));
            }
            Runner::Gpu { device } => {
                if let Some(uuid) = device {
                    env.push(("CUDA_VISIBLE_DEVICES".to_string(), uuid.clone()));
                }
            }
        }
        env
    }

    /// A finished run's outputs and cost, or why it failed.
    fn measure(&self, o: &RunOutcome, out: &Path) -> Result<Measured, (&'static str, String)> {
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

/// A test the variant failed, beside the original's cost.
fn failed(test: &TestCase, reference: &Reference, kind: &str, message: String) -> TestSummary {
    TestSummary {
        original_cost: reference.cost,
        ..TestSummary::failed(&test.name, kind, message)
    }
}

/// Writes a compiled kernel's PTX and IR into `dir` (given to `user`).
fn write_files(
    dir: PathBuf,
    compiled: &Compiled,
    user: Option<(u32, u32)>,
) -> Result<VariantFiles, HarnessError> {
    let io = |p: &Path, e: std::io::Error| HarnessError::Io(format!("{}: {e}", p.display()));
    std::fs::create_dir_all(&dir).map_err(|e| io(&dir, e))?;
    let files = VariantFiles::in_dir(dir);
    std::fs::write(&files.ptx, &compiled.ptx).map_err(|e| io(&files.ptx, e))?;
    std::fs::write(&files.ir, &compiled.ir).map_err(|e| io(&files.ir, e))?;
    if let Some((uid, gid)) = user {
        for p in [&files.dir, &files.ptx, &files.ir] {
            chown(p, uid, gid)?;
        }
    }
    Ok(files)
}

/// The variant's files a run reads.
struct VariantFiles {
    dir: PathBuf,
    ptx: PathBuf,
    ir: PathBuf,
}

impl VariantFiles {
    fn in_dir(dir: PathBuf) -> Self {
        VariantFiles {
            ptx: dir.join("kernel.ptx"),
            ir: dir.join("kernel.ll"),
            dir,
        }
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

/// The uid and gid harness commands run as: `user`'s (a name or a number)
/// when this process is root, else `None` (they run as this process's user).
pub fn run_as(user: &str) -> Result<Option<(u32, u32)>, String> {
    // SAFETY: geteuid cannot fail and touches no memory.
    if unsafe { libc::geteuid() } != 0 {
        return Ok(None);
    }
    let not_found = || format!("[harness] user: no user \"{user}\" on this system");
    let name = std::ffi::CString::new(user).map_err(|_| not_found())?;
    // SAFETY: getpwnam/getpwuid return a pointer to static storage or null;
    // it is read at once, before any other call could overwrite it.
    let entry = unsafe {
        match user.parse::<u32>() {
            Ok(uid) => libc::getpwuid(uid),
            Err(_) => libc::getpwnam(name.as_ptr()),
        }
    };
    if entry.is_null() {
        return Err(not_found());
    }
    // SAFETY: non-null, from getpw*.
    let (uid, gid) = unsafe { ((*entry).pw_uid, (*entry).pw_gid) };
    if uid == 0 {
        return Err(format!(
            "[harness] user: \"{user}\" is root; harness commands run unprivileged"
        ));
    }
    Ok(Some((uid, gid)))
}

fn chown(path: &Path, uid: u32, gid: u32) -> Result<(), HarnessError> {
    std::os::unix::fs::chown(path, Some(uid), Some(gid))
        .map_err(|e| HarnessError::Io(format!("{}: giving it to uid {uid}: {e}", path.display())))
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
