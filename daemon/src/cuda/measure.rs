//! What a GPU worker does with a variant's PTX: on every test one checked
//! run (outputs poisoned first, then compared with the original's), then on
//! each test rounds that time the original and the variant back to back in
//! alternating order, each run after restoring the inputs and flushing L2.
//! The original's outputs on each test are computed once, at start, and
//! kept on the device beside the pristine inputs, where the comparison
//! kernels (`compare`) judge each variant's outputs without copying them
//! back; without those kernels the outputs are compared on the host.

use super::compare::DeviceComparison;
use super::device_test::StagedTest;
use super::driver::{Context, DeviceBuffer, Event, Kernel};
use super::guarded::{GuardedBuild, GuardedKernel};
use super::load::{Loader, Prepared};
use super::output_check::{CheckedBuild, Guarded};
use super::pace::Pacer;
use super::toolkit::Cubin;
use super::CudaError;
pub use crate::config::Measurement;
use gevo_model::assessment::{Assessment, TestSummary};
use gevo_model::device::DeviceInfo;
use gevo_model::spec::{Spec, SpecError, TestSet};
use gevo_model::stats::{self, Timing};
use gevo_model::utilization::{Spent, StartUp};
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

/// How variants are timed. The defaults are documented in
/// ARCHITECTURE.md ("cuda").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MeasureOptions {
    /// Untimed runs of each kernel before the rounds (module load, clocks).
    pub warmups: u32,
    /// Timed rounds (one original and one variant run each) per train test.
    pub rounds: u32,
    /// Rounds per held-out test: promotion claims a speedup from these.
    pub heldout_rounds: u32,
    /// A variant's run may take this many times the original's.
    pub timeout_factor: f64,
    /// ... but at least this long (seconds).
    pub min_timeout_s: f64,
    /// Adaptive measurement: rounds per batch, between which a variant is
    /// judged against the selection threshold.
    pub race_batch: u32,
    /// ... and stopped once its interval lies wholly on one side of the
    /// threshold less this fraction (`stats::race`).
    pub race_margin: f64,
}

impl Default for MeasureOptions {
    fn default() -> Self {
        MeasureOptions {
            warmups: 2,
            rounds: 15,
            heldout_rounds: 40,
            timeout_factor: 100.0,
            min_timeout_s: 1.0,
            race_batch: 5,
            race_margin: 0.005,
        }
    }
}

impl MeasureOptions {
    /// The threshold to send a worker measuring with these options so that
    /// its race decides against `line` (`stats::race` draws its line at the
    /// threshold less `race_margin`).
    pub fn threshold_for_line(&self, line: f64) -> f64 {
        line / (1.0 - self.race_margin)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum MeasureError {
    #[error(transparent)]
    Spec(#[from] SpecError),
    #[error(transparent)]
    Cuda(#[from] CudaError),
    #[error(
        "the tests need {} MiB of device memory (inputs, the buffers the kernels run on and the original's outputs), and {device} has {} MiB free: use smaller [tests.gpu] sizes or fewer tests, or free the GPU",
        need >> 20, free >> 20
    )]
    TooLarge {
        need: usize,
        free: usize,
        device: String,
    },
    #[error("{test}: the original kernel fails on the GPU: {source}")]
    OriginalFails {
        test: String,
        #[source]
        source: CudaError,
    },
}

/// A variant's assessment, and whether the worker must exit after sending
/// it (the context is poisoned or a kernel is still running).
pub struct Measured {
    pub assessment: Assessment,
    pub fatal: bool,
    /// The worker's time on it, by phase.
    pub spent: Spent,
    /// Timing rounds per test (0 when a test failed first).
    pub rounds: u32,
    /// Where timing stopped before the full rounds: the side of the
    /// threshold the variant raced against that the rounds so far placed
    /// it on (none: it ran every round).
    pub stopped: Option<stats::Decided>,
}

impl Measured {
    /// Test `i` failed on the GPU with `e` after it had passed: the result
    /// is final.
    pub(super) fn failed_at(
        mut self,
        i: usize,
        failed: TestSummary,
        e: &CudaError,
        loaded: Loaded,
    ) -> Measured {
        self.assessment.tests[i] = failed;
        self.fatal = e.poisons_context();
        if self.fatal {
            self.lost_context(loaded)
        } else {
            self
        }
    }

    /// The result of a variant that lost the context. Unloading a module
    /// waits for its kernels, and one may run forever: the variant's
    /// modules (its guarded build's too) are left to the process exit.
    pub(super) fn lost_context(self, loaded: Loaded) -> Measured {
        tracing::warn!("context lost; the worker exits");
        std::mem::forget(loaded);
        self
    }
}

/// A variant's modules as loaded for one measurement.
pub(super) type Loaded<'a> = (Option<Kernel>, Option<Guarded<'a>>);

/// The code a measurer starts with.
pub struct Programs<'a> {
    /// The original kernel's PTX.
    pub original: &'a str,
    /// The original's guarded build (`KernelIr::compile_guarded`): with it,
    /// each test's trip budget is calibrated at start and variants that
    /// come with a guarded build are checked through it.
    pub guarded_original: Option<&'a gevo_ir::Guarded>,
    /// The comparison kernels (`compare::module_ptx`); without them,
    /// outputs are compared on the host.
    pub comparison: Option<&'a str>,
}

/// Times variants of one spec's kernel on one GPU.
pub struct Measurer {
    pub(super) spec: Spec,
    device: DeviceInfo,
    pub(super) kernel_names: Vec<String>,
    /// The arguments whose final bytes are compared (`Spec::outputs`).
    pub(super) outputs: Vec<usize>,
    pub(super) options: MeasureOptions,
    pub(super) original: Kernel,
    /// How the original was loaded, and so every variant.
    loader: Loader,
    tests: Vec<StagedTest>,
    /// Written between timed runs to evict the previous run's data from L2.
    pub(super) flush: DeviceBuffer,
    /// Four per round: original start/end, variant start/end.
    pub(super) events: Vec<Event>,
    /// Bounds the launches queued in every run (`pace`).
    pub(super) pacer: Pacer,
    /// One per launch and one more, for per-kernel times of a pipeline
    /// (empty for one kernel).
    pub(super) profile_events: Vec<Event>,
    /// What making all this took.
    start_up: StartUp,
    /// The comparison kernels; `None`: outputs are compared on the host.
    pub(super) comparison: Option<DeviceComparison>,
    /// Variants' guarded builds are used: the original's ran clean on
    /// every test and gave its outputs (each test's budget is set).
    guards: bool,
    // Dropped last: everything above lives in this context.
    _context: Context,
}

mod start;

impl Measurer {
    /// Whether variants' guarded builds are used.
    pub fn guarded(&self) -> bool {
        self.guards
    }

    /// What this measurer's start took (`setup_s` is the caller's).
    pub fn start_up(&self) -> &StartUp {
        &self.start_up
    }

    pub fn device(&self) -> &DeviceInfo {
        &self.device
    }

    /// The original's outputs on `test` (per argument, empty for arguments
    /// that are not outputs), as computed at start.
    pub fn reference(&self, test: &str) -> Option<&[Vec<u8>]> {
        self.test(test).map(|t| t.reference.as_slice())
    }

    fn test(&self, name: &str) -> Option<&StagedTest> {
        self.tests.iter().find(|t| t.name == name)
    }

    /// How long one run of the variant may take on `test`.
    pub(super) fn limit(&self, test: &StagedTest) -> Duration {
        Duration::from_secs_f64(
            (test.original_ns * 1e-9 * self.options.timeout_factor).max(self.options.min_timeout_s),
        )
    }

    /// How long one guarded run may take on `test`: past the time budget,
    /// with room for the looping threads to reach their next clock check.
    pub(super) fn guarded_limit(&self, test: &StagedTest) -> Duration {
        self.limit(test).max(test.budget.time * 4)
    }

    /// The variant `prepared` started on, loaded; none, with the failure in
    /// `out` (fatal where it cost the context), when it does not load.
    fn load_variant(
        &self,
        prepared: Prepared<'_>,
        ptx: &str,
        out: &mut Measured,
    ) -> Option<Kernel> {
        let loading = Instant::now();
        let kernel = self.loader.load(prepared, ptx, &self.kernel_names);
        out.spent.jit_load_s += loading.elapsed().as_secs_f64();
        match kernel {
            Ok(k) => Some(k),
            Err(e) => {
                out.fatal = e.poisons_context();
                out.assessment
                    .tests
                    .push(TestSummary::failed("load", e.kind(), e.to_string()));
                None
            }
        }
    }

    /// Checks and times `ptx` (loaded from `cubin` where that serves:
    /// [`Loader::variant`]) on every test of `set`; stops at the first
    /// test that fails. With `race` (a train cost the variant must beat to
    /// matter to the search), timing goes in batches of `race_batch` rounds
    /// and stops once they place the variant confidently on one side of it
    /// (docs/evolve.md, "Adaptive measurement").
    pub fn measure(
        &self,
        ptx: &str,
        cubin: Option<&Cubin>,
        guarded: Option<&GuardedBuild>,
        set: TestSet,
        race: Option<f64>,
    ) -> Measured {
        let mut out = Measured {
            assessment: Assessment {
                tests: Vec::new(),
                device: Some(self.device.clone()),
            },
            fatal: false,
            spent: Spent::default(),
            rounds: 0,
            stopped: None,
        };
        // ptxas (where no cubin came) runs beside the guarded build's
        // checks, and is stopped if they fail, as most variants do.
        let prepared = self.loader.prepare(ptx, cubin);
        let guarded = self.load_guarded(guarded, &mut out);
        if out.fatal {
            return out.lost_context((None, None));
        }
        let mut prepared = Some(prepared);
        let mut kernel = None;
        if guarded.is_none() {
            let prepared = prepared.take().expect("loaded once");
            match self.load_variant(prepared, ptx, &mut out) {
                Some(k) => kernel = Some(k),
                None => return out,
            }
        }
        let tests: Vec<&StagedTest> = self
            .spec
            .tests(set)
            .into_iter()
            .map(|case| self.test(&case.name).expect("every test uploaded at start"))
            .collect();
        if !self.check_tests(&tests, (&guarded, &kernel), &mut out) {
            return if out.fatal {
                out.lost_context((kernel, guarded))
            } else {
                out
            };
        }
        // Passed: the variant itself is loaded, to be timed.
        let kernel = match (kernel, prepared) {
            (Some(k), _) => k,
            (None, prepared) => {
                let prepared = prepared.expect("not loaded yet");
                match self.load_variant(prepared, ptx, &mut out) {
                    Some(k) => k,
                    None if out.fatal => return out.lost_context((None, guarded)),
                    None => return out,
                }
            }
        };
        let timed = self
            .time_rounds(&kernel, &tests, set, race, &mut out)
            .and_then(|done| {
                out.rounds = done;
                self.summarize(&kernel, &tests, race, &mut out)
            });
        match timed {
            Ok(()) => out,
            Err((i, e)) => {
                let failed = self.cuda_failure(tests[i], &e);
                out.failed_at(i, failed, &e, (Some(kernel), guarded))
            }
        }
    }

    /// The variant's guarded build loaded, where it comes with one and
    /// guards are used; `None` when it does not load (with the failure in
    /// `out` and `out.fatal` set where that cost the context).
    fn load_guarded<'b>(
        &self,
        guarded: Option<&'b GuardedBuild>,
        out: &mut Measured,
    ) -> Option<Guarded<'b>> {
        let build = guarded.filter(|_| self.guards)?;
        let loading = Instant::now();
        let loaded = GuardedKernel::load(
            &self.loader,
            &build.ptx,
            build.cubin.as_ref(),
            &self.kernel_names,
        );
        out.spent.jit_load_s += loading.elapsed().as_secs_f64();
        match loaded {
            Ok(kernel) => Some(Guarded {
                kernel,
                sites: &build.sites,
                protects_inputs: build.protects_inputs,
                poisons_shared: build.poisons_shared,
            }),
            Err(e) if e.poisons_context() => {
                out.fatal = true;
                out.assessment
                    .tests
                    .push(TestSummary::failed("load", e.kind(), e.to_string()));
                None
            }
            // Its registers or shared memory past a limit, say:
            // checked unguarded, as before.
            Err(e) => {
                tracing::debug!("the guarded build does not load ({e}); checking unguarded");
                None
            }
        }
    }

    /// Checks the outputs on every test through the guarded build, or the
    /// variant where there is none, adding each test's summary to `out`:
    /// whether every test passed (stops at the first failure, or the first
    /// that cost the context).
    fn check_tests(
        &self,
        tests: &[&StagedTest],
        (guarded, kernel): (&Option<Guarded>, &Option<Kernel>),
        out: &mut Measured,
    ) -> bool {
        // Every test's outputs checked before any is timed: most variants
        // fail a check, often only on a later test (a partial last block,
        // a larger size), and then cost no timing rounds at all.
        for test in tests {
            let build = match (guarded, kernel) {
                (Some(g), _) => CheckedBuild::Guarded(g),
                (None, Some(k)) => CheckedBuild::Ordinary(k),
                (None, None) => unreachable!("loaded above when unguarded"),
            };
            let summary = self.check(build, test, out);
            let failed = summary.failure.is_some();
            out.assessment.tests.push(summary);
            if out.fatal || failed {
                return false;
            }
        }
        true
    }

    /// Times `kernel` against the original on every test, a batch of
    /// rounds at a time, until the full rounds of `set` are done or `race`
    /// decides (`out.stopped`): the rounds done, or the test that failed
    /// with its error.
    fn time_rounds(
        &self,
        kernel: &Kernel,
        tests: &[&StagedTest],
        set: TestSet,
        race: Option<f64>,
        out: &mut Measured,
    ) -> Result<u32, (usize, CudaError)> {
        let full = match set {
            TestSet::Heldout => self.options.heldout_rounds,
            _ => self.options.rounds,
        };
        let batch = match race {
            Some(_) => self.options.race_batch.max(1).min(full),
            None => full,
        };
        let mut done = 0;
        while done < full {
            // After each batch: race the rounds so far against the threshold.
            if let Some(threshold) = race.filter(|_| done > 0) {
                let timings: Vec<&Timing> = out
                    .assessment
                    .tests
                    .iter()
                    .filter_map(|t| t.timing.as_ref())
                    .collect();
                out.stopped = stats::race(&timings, threshold, self.options.race_margin);
                if out.stopped.is_some() {
                    break;
                }
            }
            let more = batch.min(full - done);
            for (i, test) in tests.iter().enumerate() {
                let started = Instant::now();
                let limit = self.limit(test);
                let timing = out.assessment.tests[i]
                    .timing
                    .get_or_insert_with(|| Timing {
                        original_ns: Vec::with_capacity(full as usize),
                        variant_ns: Vec::with_capacity(full as usize),
                    });
                let result = self.time(kernel, test, done, more, limit, timing);
                out.spent.timing_s += started.elapsed().as_secs_f64();
                result.map_err(|e| (i, e))?;
            }
            done += more;
        }
        Ok(done)
    }

    /// Each test's costs from its timed rounds and, unraced, its per-kernel
    /// times: the test that failed with its error, if one did.
    fn summarize(
        &self,
        kernel: &Kernel,
        tests: &[&StagedTest],
        race: Option<f64>,
        out: &mut Measured,
    ) -> Result<(), (usize, CudaError)> {
        for (i, test) in tests.iter().enumerate() {
            let summary = &mut out.assessment.tests[i];
            let timing = summary.timing.as_ref().expect("timed");
            summary.cost = Some(stats::undisturbed(&timing.variant_ns).round() as u64);
            summary.original_cost = stats::undisturbed(&timing.original_ns).round() as u64;
            // Per-kernel times only where they are read: the report's come
            // from promotion's held-out runs, which are not raced; a
            // search's (raced) train runs have no reader.
            if race.is_some() {
                continue;
            }
            let started = Instant::now();
            let kernels = self.kernel_times(kernel, test, self.limit(test));
            out.spent.profile_s += started.elapsed().as_secs_f64();
            out.assessment.tests[i].kernels = kernels.map_err(|e| (i, e))?;
        }
        Ok(())
    }
}
