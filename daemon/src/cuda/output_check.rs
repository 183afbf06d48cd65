//! A variant's checked runs: one run per test, outputs poisoned first, then
//! compared with the original's (on the device where the comparison kernels
//! are, else on the host); through the variant's guarded build where one
//! came (`guarded`), whose recorded fault is then the verdict.

use super::compare::{DeviceComparison, Pair};
use super::device_test::StagedTest;
use super::driver::Kernel;
use super::guarded::GuardedKernel;
use super::measure::{Measured, Measurer};
use super::CudaError;
use gevo_ir::GuardSite;
use gevo_model::assessment::{compare_outputs, outputs_verdict, Failure, TestSummary};
use gevo_model::spec::{Acceptance, ArgKind, ArgValue, Metric, Role};
use std::time::{Duration, Instant};

/// What a variant's outputs are checked through.
#[derive(Clone, Copy)]
pub(super) enum CheckedBuild<'k, 'a> {
    /// Its guarded build.
    Guarded(&'k Guarded<'a>),
    /// The variant itself, where its guarded build does not serve.
    Ordinary(&'k Kernel),
}

/// A variant's guarded build, loaded, and its sites.
pub(super) struct Guarded<'a> {
    pub kernel: GuardedKernel,
    pub sites: &'a [GuardSite],
    /// Its runs leave the kept inputs as they were (`GuardedBuild::protects_inputs`).
    pub protects_inputs: bool,
    /// It fills shared memory with poison first (`GuardedBuild::poisons_shared`).
    pub poisons_shared: bool,
}

/// Appended to a guarded run's mismatch whose outputs change with the
/// shared-memory poison pattern.
pub(super) const UNWRITTEN_SHARED: &str = "; the outputs change with the pattern shared memory is poisoned with: it reads shared memory its block never wrote";

impl Measurer {
    /// One test's checked run: a passed summary (its error, no cost yet),
    /// or the failure (which sets `fatal` when the context is lost). A run
    /// of the variant's guarded build is armed with the test's ranges and
    /// trip budget: a fault it recorded is the verdict.
    pub(super) fn check(
        &self,
        build: CheckedBuild,
        test: &StagedTest,
        out: &mut Measured,
    ) -> TestSummary {
        let started = Instant::now();
        let guarded = matches!(build, CheckedBuild::Guarded(_));
        let result = match build {
            CheckedBuild::Guarded(g) => g
                .kernel
                .arm(test, test.budget)
                .and_then(|()| {
                    let limit = self.guarded_limit(test);
                    self.check_outputs(&g.kernel.kernel, g.protects_inputs, test, limit)
                })
                .and_then(|outputs| {
                    let state = g.kernel.state()?;
                    Ok((
                        state.verdict(g.sites, test, test.budget, &self.kernel_names),
                        outputs,
                    ))
                }),
            CheckedBuild::Ordinary(kernel) => self
                .check_outputs(kernel, false, test, self.limit(test))
                .map(|o| (None, o)),
        };
        out.spent.check_s += started.elapsed().as_secs_f64();
        let mut summary = match result {
            Err(e) => {
                out.fatal = e.poisons_context();
                let mut failed = self.cuda_failure(test, &e);
                if guarded {
                    // Which build hung or faulted: guards were meant to
                    // catch what restarts the worker.
                    if let Some((_, message)) = &mut failed.failure {
                        message.insert_str(0, "guarded run: ");
                    }
                }
                return failed;
            }
            Ok((Some(fault), _)) => {
                let f = Failure::Verdict(fault);
                TestSummary::failed(&test.name, f.kind(), format!("guarded run on the GPU: {f}"))
            }
            Ok((None, (Some(f), error))) => {
                let mut message = f.to_string();
                if let CheckedBuild::Guarded(g) = build {
                    if self.changes_with_poison(g, test, &f, out) {
                        message += UNWRITTEN_SHARED;
                    }
                }
                let mut s = TestSummary::failed(&test.name, f.kind(), message);
                s.error = Some(error);
                s
            }
            Ok((None, (None, error))) => TestSummary {
                test: test.name.clone(),
                failure: None,
                cost: None,
                original_cost: 0,
                error: Some(error),
                timing: None,
                kernels: Vec::new(),
            },
        };
        summary.original_cost = test.original_ns as u64;
        summary
    }

    /// Whether a guarded run's output mismatch `first` (made with the first
    /// poison pattern) is another verdict when shared memory is poisoned
    /// with the second: then what the outputs hold came from shared bytes
    /// the block never wrote. One more guarded run of a failing test, only
    /// for a build that poisons shared memory (a race can change outputs
    /// between runs too, which the simulator's pre-screen mostly rejects
    /// before the GPU sees it).
    fn changes_with_poison(
        &self,
        g: &Guarded,
        test: &StagedTest,
        first: &Failure,
        out: &mut Measured,
    ) -> bool {
        if !g.poisons_shared || !matches!(first, Failure::Mismatch { .. }) {
            return false;
        }
        let started = Instant::now();
        let second = g
            .kernel
            .arm_poisoned(test, test.budget, gevo_ir::guard::POISON_PATTERNS[1])
            .and_then(|()| {
                let limit = self.guarded_limit(test);
                self.check_outputs(&g.kernel.kernel, g.protects_inputs, test, limit)
            });
        out.spent.check_s += started.elapsed().as_secs_f64();
        match second {
            // Display, not PartialEq: an error of NaN in both is the same.
            Ok((second, _)) => second.map(|f| f.to_string()) != Some(first.to_string()),
            Err(e) => {
                out.fatal |= e.poisons_context();
                tracing::debug!("the second poison pattern's run: {e}");
                false
            }
        }
    }

    /// The outputs' verdict after one run of `kernel` on `test`: compared
    /// on the device where the comparison kernels loaded, else on the host.
    /// `protected`: the kernel cannot write the kept inputs (a guarded build
    /// that protects them), which then need no restore or comparison.
    pub(super) fn check_outputs(
        &self,
        kernel: &Kernel,
        protected: bool,
        test: &StagedTest,
        limit: Duration,
    ) -> Result<(Option<Failure>, f64), CudaError> {
        match &self.comparison {
            Some(comparison) => self.checked_on_device(comparison, kernel, protected, test, limit),
            None => self
                .checked_run(kernel, protected, test, limit)
                .map(|o| compare_outputs(&self.spec, &test.instance, &test.reference, &o)),
        }
    }

    /// A test that failed on the GPU, with the timeout explained.
    pub(super) fn cuda_failure(&self, test: &StagedTest, e: &CudaError) -> TestSummary {
        let mut message = e.to_string();
        if let CudaError::Timeout { .. } = e {
            message += &format!(
                " ({}x the original's {:.1} us)",
                self.options.timeout_factor,
                test.original_ns / 1e3
            );
        }
        let mut s = TestSummary::failed(&test.name, e.kind(), message);
        s.original_cost = test.original_ns as u64;
        s
    }

    /// One run with outputs poisoned, its outputs compared on the device
    /// with the original's: what `compare_outputs` says of them (the worst
    /// error, the first failing output), with 24 bytes read back per output.
    pub(super) fn checked_on_device(
        &self,
        comparison: &DeviceComparison,
        kernel: &Kernel,
        protected: bool,
        test: &StagedTest,
        limit: Duration,
    ) -> Result<(Option<Failure>, f64), CudaError> {
        let binding = test.run_once(kernel, protected, &self.pacer, &self.events[0], limit)?;
        let mut compared = Vec::with_capacity(self.outputs.len());
        let mut pairs = Vec::with_capacity(self.outputs.len());
        for &i in &self.outputs {
            let reference = test.reference_device[i].as_ref();
            let actual = test.work[binding[i]].as_ref();
            if let (Some(reference), Some(actual), ArgValue::Buffer { elem, .. }) =
                (reference, actual, &test.instance.args[i])
            {
                compared.push(i);
                pairs.push(Pair {
                    elem: *elem,
                    reference,
                    actual,
                });
            }
        }
        let comparisons = comparison.compare(&self.spec.acceptance, &pairs)?;
        let (failure, error) = outputs_verdict(&self.spec, compared.into_iter().zip(comparisons));
        if failure.is_some() || protected && test.protect_kept.get() {
            return Ok((failure, error));
        }
        Ok((self.written_input(comparison, test, &binding)?, error))
    }

    /// One run with outputs poisoned; returns each output argument's final
    /// bytes (empty for the others). Only outputs are compared, and an input
    /// can be far larger than the outputs (a reduction's): downloading it
    /// with every check once took most of the GPU worker's time.
    pub(super) fn checked_run(
        &self,
        kernel: &Kernel,
        protected: bool,
        test: &StagedTest,
        limit: Duration,
    ) -> Result<Vec<Vec<u8>>, CudaError> {
        let binding = test.run_once(kernel, protected, &self.pacer, &self.events[0], limit)?;
        let mut outputs = Vec::with_capacity(test.work.len());
        for (i, _) in test.work.iter().enumerate() {
            outputs.push(match &test.work[binding[i]] {
                Some(buffer) if self.outputs.contains(&i) => {
                    let mut bytes = vec![0u8; buffer.len];
                    buffer.download(&mut bytes)?;
                    bytes
                }
                _ => Vec::new(),
            });
        }
        Ok(outputs)
    }

    /// The first of the test's kept inputs (`StagedTest::kept_inputs`) that
    /// the run just made changed, compared exactly on the device with its
    /// pristine copy.
    fn written_input(
        &self,
        comparison: &DeviceComparison,
        test: &StagedTest,
        binding: &[usize],
    ) -> Result<Option<Failure>, CudaError> {
        for &i in &test.kept_inputs {
            if let Some(first_change) = changed(comparison, test, binding, i)? {
                return Ok(Some(Failure::InputWritten {
                    arg: test.instance.names[i].clone(),
                    first_change,
                }));
            }
        }
        Ok(None)
    }

    /// The `in` arguments of `test` that the original's run (just made)
    /// left as uploaded.
    pub(super) fn inputs_left(
        &self,
        comparison: &DeviceComparison,
        test: &StagedTest,
    ) -> Result<Vec<usize>, CudaError> {
        let mut kept = Vec::new();
        for (i, arg) in self.spec.args.iter().enumerate() {
            if matches!(arg.kind, ArgKind::Buffer { role: Role::In, .. })
                && changed(comparison, test, &test.instance.final_binding, i)?.is_none()
            {
                kept.push(i);
            }
        }
        Ok(kept)
    }
}

/// Exact comparison, for inputs.
const EXACT: Acceptance = Acceptance {
    metric: Metric::Exact,
    tolerance: 0.0,
};

/// Where argument `i`'s buffer (as `binding` leaves it) first differs from
/// its pristine copy, in bytes; None when it does not (or has no copy).
fn changed(
    comparison: &DeviceComparison,
    test: &StagedTest,
    binding: &[usize],
    i: usize,
) -> Result<Option<usize>, CudaError> {
    let (Some(pristine), Some(actual), ArgValue::Buffer { elem, .. }) = (
        test.pristine(i),
        test.work[binding[i]].as_ref(),
        &test.instance.args[i],
    ) else {
        return Ok(None);
    };
    let pair = Pair {
        elem: *elem,
        reference: pristine,
        actual,
    };
    let c = comparison.compare(&EXACT, &[pair])?.remove(0);
    Ok((!c.passed).then(|| c.first_mismatch.unwrap_or(0) * elem.size()))
}
