//! What a GPU worker does with a variant's PTX: on every test one checked
//! run (outputs poisoned first, then compared with the original's), then on
//! each test rounds that time the original and the variant back to back in
//! alternating order, each run after restoring the inputs and flushing L2.
//! The original's outputs on each test are computed once, at start, and
//! kept on the device beside the pristine inputs, where the comparison
//! kernels (`compare`) judge each variant's outputs without copying them
//! back; without those kernels the outputs are compared on the host.

use super::checked::{CheckedBuild, Guarded};
use super::compare::DeviceComparison;
use super::driver::{Context, DeviceBuffer, Event, Kernel};
use super::guarded::{Budget, GuardedBuild, GuardedKernel};
use super::load::{Loader, Prepared};
use super::pace::Pacer;
use super::staged::StagedTest;
use super::timing::PROFILE_MAX_LAUNCHES;
use super::toolkit::{Assembler, Cubin};
use super::CudaError;
pub use crate::config::Measurement;
use gevo_model::assessment::{Assessment, TestSummary};
use gevo_model::busy::{Spent, StartUp};
use gevo_model::device::DeviceInfo;
use gevo_model::spec::{Spec, SpecError, TestCase, TestSet};
use gevo_model::stats::{self, Timing};
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

/// The original runs under this limit when the references are made.
const ORIGINAL_LIMIT: Duration = Duration::from_secs(60);
/// Runs of the original timed at start, for the timeouts.
const START_TIMINGS: usize = 5;

/// Refuses, before anything is uploaded, tests whose buffers do not fit in
/// the device's free memory; says how much they take.
fn check_memory(
    spec: &Spec,
    cases: &[TestCase],
    references: bool,
    context: &Context,
    device: &DeviceInfo,
) -> Result<(), MeasureError> {
    let mut need = 0;
    for case in cases {
        need += spec.device_bytes(case, references)?;
    }
    let (free, _) = context.memory()?;
    // A margin for what the driver needs beside them: the modules the
    // variants load, the flush buffer, the events.
    let margin = free / 16;
    tracing::info!(
        test_mib = need >> 20,
        free_mib = free >> 20,
        outputs_on_device = references,
        "device memory for the tests"
    );
    if need > free.saturating_sub(margin) {
        return Err(MeasureError::TooLarge {
            need,
            free,
            device: device.name.clone(),
        });
    }
    Ok(())
}

impl Measurer {
    /// Uploads every test's inputs, and runs and times the original on each.
    /// With an `assembler`, the original and the variants load as cubins
    /// for this device ([`Loader`]). With `comparison_ptx`
    /// (`compare::module_ptx`), outputs are compared on the device.
    pub fn new(
        spec: Spec,
        device: DeviceInfo,
        programs: Programs<'_>,
        kernel_names: &[String],
        options: MeasureOptions,
        assembler: Option<Assembler>,
    ) -> Result<Self, MeasureError> {
        let mut start_up = StartUp::default();
        let mut clock = Instant::now();
        let mut lap = || {
            std::mem::replace(&mut clock, Instant::now())
                .elapsed()
                .as_secs_f64()
        };
        let context = Context::new(device.ordinal)?;
        let (original, loader) =
            Loader::original(programs.original, kernel_names, assembler, &device.arch())?;
        let events = (0..4 * options
            .rounds
            .max(options.heldout_rounds)
            .max(START_TIMINGS as u32))
            .map(|_| Event::new())
            .collect::<Result<_, _>>()?;
        let flush = DeviceBuffer::new((2 * device.l2_bytes).max(1 << 20) as usize)?;
        let mut profile_events = Vec::new();
        if kernel_names.len() > 1 {
            let mut most = 0;
            for case in spec.tests(TestSet::All) {
                most = most.max(spec.instantiate(case)?.launches.len());
            }
            for _ in 0..=most.min(PROFILE_MAX_LAUNCHES) {
                profile_events.push(Event::new()?);
            }
        }
        let outputs = spec.outputs();
        let comparison = match programs
            .comparison
            .map(|p| DeviceComparison::load(p, outputs.len()))
        {
            Some(Ok(c)) => Some(c),
            Some(Err(e)) => {
                tracing::warn!(error = %e, "the comparison kernels do not load; outputs are compared on the host");
                None
            }
            None => None,
        };
        let cases: Vec<TestCase> = spec.tests(TestSet::All).into_iter().cloned().collect();
        check_memory(&spec, &cases, comparison.is_some(), &context, &device)?;
        let mut m = Measurer {
            outputs,
            spec,
            device,
            kernel_names: kernel_names.to_vec(),
            options,
            original,
            loader,
            tests: Vec::new(),
            flush,
            events,
            pacer: Pacer::new()?,
            profile_events,
            start_up: StartUp::default(),
            comparison,
            guards: false,
            _context: context,
        };
        start_up.context_s = lap();
        for case in cases {
            let instance = m.spec.instantiate(&case)?;
            start_up.inputs_s += lap();
            let mut test = StagedTest::upload(&case.name, instance)?;
            start_up.upload_s += lap();
            let failed = |source| MeasureError::OriginalFails {
                test: case.name.clone(),
                source,
            };
            test.reference = m
                .checked_run(&m.original, false, &test, ORIGINAL_LIMIT)
                .map_err(failed)?;
            if let Some(comparison) = &m.comparison {
                test.keep_reference(&m.outputs)?;
                test.kept_inputs = m.inputs_left(comparison, &test)?;
            }
            let mut times = Vec::with_capacity(START_TIMINGS);
            for _ in 0..START_TIMINGS {
                let (start, end) = (&m.events[0], &m.events[1]);
                m.pacer.begin(ORIGINAL_LIMIT);
                m.timed_run(&m.original, &test, start, end)?;
                m.pacer.wait(end).map_err(failed)?;
                times.push(start.nanos_until(end)?);
            }
            test.original_ns = stats::median(&times);
            tracing::info!(test = %case.name, original_us = test.original_ns / 1e3, "reference ready");
            m.tests.push(test);
            start_up.references_s += lap();
        }
        if let Some(guarded) = programs.guarded_original {
            m.calibrate_guards(guarded);
            start_up.references_s += lap();
        }
        m.start_up = start_up;
        Ok(m)
    }

    /// Runs the original's guarded build on every test with no trip
    /// budget: each test's budget comes from the most trips a thread made.
    /// Guards are used only when that build loads, records no fault and
    /// gives the original's outputs on every test (a test whose kernel
    /// reaches memory the spec does not describe would fail here).
    fn calibrate_guards(&mut self, original: &gevo_ir::Guarded) {
        let result = (|| -> Result<Vec<Budget>, String> {
            let guarded =
                GuardedKernel::load(&self.loader, &original.ptx, None, &self.kernel_names)
                    .map_err(|e| e.to_string())?;
            let mut budgets = Vec::with_capacity(self.tests.len());
            for test in &self.tests {
                let failed = |e: CudaError| format!("{}: {e}", test.name);
                let run = || -> Result<_, String> {
                    guarded.arm(test, Budget::NONE).map_err(failed)?;
                    let started = Instant::now();
                    let (failure, _) = self
                        .check_outputs(&guarded.kernel, false, test, ORIGINAL_LIMIT)
                        .map_err(failed)?;
                    let took = started.elapsed();
                    Ok((failure, took, guarded.state().map_err(failed)?))
                };
                let (mut failure, mut took, mut state) = run()?;
                if state
                    .written_input(&original.sites, test, &self.kernel_names)
                    .is_some()
                {
                    // The original writes a kept input (the bytes it
                    // held): variants' guarded runs leave it writable,
                    // restored and compared as before.
                    test.protect_kept.set(false);
                    (failure, took, state) = run()?;
                }
                if let Some(fault) = state.fault() {
                    return Err(format!(
                        "{}: the original's guarded run records {fault:?}",
                        test.name
                    ));
                }
                if let Some(f) = failure {
                    return Err(format!(
                        "{}: the original's guarded run differs: {f}",
                        test.name
                    ));
                }
                budgets.push(Budget::from_original(state.most_trips(), took));
            }
            Ok(budgets)
        })();
        match result {
            Ok(budgets) => {
                for (test, budget) in self.tests.iter_mut().zip(budgets) {
                    tracing::info!(
                        test = %test.name,
                        trip_budget = budget.trips,
                        time_budget_ms = budget.time.as_secs_f64() * 1e3,
                        "guarded checks ready"
                    );
                    test.budget = budget;
                }
                self.guards = true;
            }
            Err(why) => tracing::warn!(
                "variants are checked unguarded (a fault costs the worker): the original's guarded build does not serve: {why}"
            ),
        }
    }

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
        let guarded = match guarded.filter(|_| self.guards) {
            None => None,
            Some(build) => {
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
                    }),
                    Err(e) if e.poisons_context() => {
                        out.fatal = true;
                        out.assessment.tests.push(TestSummary::failed(
                            "load",
                            e.kind(),
                            e.to_string(),
                        ));
                        return out.lost_context((None, None));
                    }
                    // Its registers or shared memory past a limit, say:
                    // checked unguarded, as before.
                    Err(e) => {
                        tracing::debug!(
                            "the guarded build does not load ({e}); checking unguarded"
                        );
                        None
                    }
                }
            }
        };
        let mut prepared = Some(prepared);
        let mut kernel = None;
        if guarded.is_none() {
            let prepared = prepared.take().expect("loaded once");
            match self.load_variant(prepared, ptx, &mut out) {
                Some(k) => kernel = Some(k),
                None => return out,
            }
        }
        let full = match set {
            TestSet::Heldout => self.options.heldout_rounds,
            _ => self.options.rounds,
        };
        let batch = match race {
            Some(_) => self.options.race_batch.max(1).min(full),
            None => full,
        };
        let tests: Vec<&StagedTest> = self
            .spec
            .tests(set)
            .into_iter()
            .map(|case| self.test(&case.name).expect("every test uploaded at start"))
            .collect();
        // Every test's outputs checked before any is timed: most variants
        // fail a check, often only on a later test (a partial last block,
        // a larger size), and then cost no timing rounds at all.
        for test in &tests {
            let build = match (&guarded, &kernel) {
                (Some(g), _) => CheckedBuild::Guarded(g),
                (None, Some(k)) => CheckedBuild::Ordinary(k),
                (None, None) => unreachable!("loaded above when unguarded"),
            };
            let summary = self.check(build, test, &mut out);
            let failed = summary.failure.is_some();
            out.assessment.tests.push(summary);
            if out.fatal {
                return out.lost_context((kernel, guarded));
            }
            if failed {
                return out;
            }
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
                let result = self.time(&kernel, test, done, more, limit, timing);
                out.spent.timing_s += started.elapsed().as_secs_f64();
                if let Err(e) = result {
                    return out.failed_at(
                        i,
                        self.cuda_failure(test, &e),
                        &e,
                        (Some(kernel), guarded),
                    );
                }
            }
            done += more;
        }
        out.rounds = done;
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
            let kernels = self.kernel_times(&kernel, test, self.limit(test));
            out.spent.profile_s += started.elapsed().as_secs_f64();
            match kernels {
                Ok(k) => out.assessment.tests[i].kernels = k,
                Err(e) => {
                    return out.failed_at(
                        i,
                        self.cuda_failure(test, &e),
                        &e,
                        (Some(kernel), guarded),
                    )
                }
            }
        }
        out
    }
}
