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
//!
//! A run's outputs are read and judged in [`outputs`]; its environment and
//! scratch files are made in [`scratch`].

pub mod launch;
mod outputs;
pub mod run;
mod scratch;

pub use outputs::{reported_cost, reported_cost_summed};
pub use scratch::run_as;

use gevo_ir::{CodegenOptions, Compiled, KernelIr, Patch};
use gevo_model::assessment::{Assessment, TestSummary};
use gevo_model::spec::{Harness, Spec, TestCase, TestSet};
use gevo_model::stats::Timing;
use run::RunRequest;
use scratch::{chown, write_files, VariantFiles};
use std::collections::HashMap;
use std::path::PathBuf;
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
        source: gevo_ir::IrError,
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
    /// the costs are their undisturbed times (`stats::undisturbed`), and
    /// the rounds go to the bootstrap.
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
        summary.original_cost = gevo_model::stats::undisturbed(&timing.original_ns).round() as u64;
        summary.cost = Some(gevo_model::stats::undisturbed(&timing.variant_ns).round() as u64);
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
            program: self.harness.program.as_ref().map(|p| p.fd.clone()),
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
}

/// A test the variant failed, beside the original's cost.
fn failed(test: &TestCase, reference: &Reference, kind: &str, message: String) -> TestSummary {
    TestSummary {
        original_cost: reference.cost,
        ..TestSummary::failed(&test.name, kind, message)
    }
}
