//! Starting a [`Measurer`]: the events and buffers it times with, every
//! test's inputs uploaded, the original's outputs and times on each, and
//! the trip budgets of the original's guarded build.

use super::{MeasureError, MeasureOptions, Measurer, Programs};
use crate::cuda::compare::DeviceComparison;
use crate::cuda::device_test::StagedTest;
use crate::cuda::driver::{Context, DeviceBuffer, Event};
use crate::cuda::guarded::{Budget, GuardedKernel};
use crate::cuda::load::Loader;
use crate::cuda::pace::Pacer;
use crate::cuda::timing::PROFILE_MAX_LAUNCHES;
use crate::cuda::toolkit::Assembler;
use crate::cuda::CudaError;
use gevo_model::device::DeviceInfo;
use gevo_model::spec::{Spec, TestCase, TestSet};
use gevo_model::stats;
use gevo_model::utilization::StartUp;
use std::time::{Duration, Instant};

/// The original runs under this limit when the references are made.
const ORIGINAL_LIMIT: Duration = Duration::from_secs(60);
/// Runs of the original timed at start, for the timeouts.
const START_TIMINGS: usize = 5;

/// Measures the start-up's parts one after another.
struct Lap(Instant);

impl Lap {
    /// Seconds since the previous lap; starts the next.
    fn lap(&mut self) -> f64 {
        std::mem::replace(&mut self.0, Instant::now())
            .elapsed()
            .as_secs_f64()
    }
}

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

/// The events for a pipeline's per-kernel times: one per launch of the
/// test with the most launches (up to the profile's limit) and one more;
/// none for a single kernel.
fn profile_events(spec: &Spec, kernel_names: &[String]) -> Result<Vec<Event>, MeasureError> {
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
    Ok(profile_events)
}

/// The comparison kernels loaded from `ptx`; `None` (outputs compared on
/// the host) without them or when they do not load.
fn load_comparison(ptx: Option<&str>, outputs: usize) -> Option<DeviceComparison> {
    match ptx.map(|p| DeviceComparison::load(p, outputs)) {
        Some(Ok(c)) => Some(c),
        Some(Err(e)) => {
            tracing::warn!(error = %e, "the comparison kernels do not load; outputs are compared on the host");
            None
        }
        None => None,
    }
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
        let mut clock = Lap(Instant::now());
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
        let profile_events = profile_events(&spec, kernel_names)?;
        let outputs = spec.outputs();
        let comparison = load_comparison(programs.comparison, outputs.len());
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
        start_up.context_s = clock.lap();
        for case in cases {
            m.stage_test(&case, &mut start_up, &mut clock)?;
        }
        if let Some(guarded) = programs.guarded_original {
            m.calibrate_guards(guarded);
            start_up.references_s += clock.lap();
        }
        m.start_up = start_up;
        Ok(m)
    }

    /// Uploads `case`'s inputs, then runs the original on it for its
    /// reference outputs (kept on the device where they are compared
    /// there) and times it; adds each part's seconds to `start_up`.
    fn stage_test(
        &mut self,
        case: &TestCase,
        start_up: &mut StartUp,
        clock: &mut Lap,
    ) -> Result<(), MeasureError> {
        let instance = self.spec.instantiate(case)?;
        start_up.inputs_s += clock.lap();
        let mut test = StagedTest::upload(&case.name, instance)?;
        start_up.upload_s += clock.lap();
        let failed = |source| MeasureError::OriginalFails {
            test: case.name.clone(),
            source,
        };
        test.reference = self
            .checked_run(&self.original, false, &test, ORIGINAL_LIMIT)
            .map_err(failed)?;
        if let Some(comparison) = &self.comparison {
            test.keep_reference(&self.outputs)?;
            test.kept_inputs = self.inputs_left(comparison, &test)?;
        }
        test.original_ns = self.time_original(&test, &failed)?;
        tracing::info!(test = %case.name, original_us = test.original_ns / 1e3, "reference ready");
        self.tests.push(test);
        start_up.references_s += clock.lap();
        Ok(())
    }

    /// The original's median time on `test` over the start's runs, in ns;
    /// a run that fails is `failed`.
    fn time_original(
        &self,
        test: &StagedTest,
        failed: &dyn Fn(CudaError) -> MeasureError,
    ) -> Result<f64, MeasureError> {
        let mut times = Vec::with_capacity(START_TIMINGS);
        for _ in 0..START_TIMINGS {
            let (start, end) = (&self.events[0], &self.events[1]);
            self.pacer.begin(ORIGINAL_LIMIT);
            self.timed_run(&self.original, test, start, end)?;
            self.pacer.wait(end).map_err(failed)?;
            times.push(start.nanos_until(end)?);
        }
        Ok(stats::median(&times))
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
}
