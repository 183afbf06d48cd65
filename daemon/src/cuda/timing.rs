//! Timing a variant against the original on one test: rounds that
//! alternate which kernel runs first, queued together between events (the
//! inputs restored and L2 flushed before each run), and a pipeline's time
//! per kernel from runs with an event after every launch.

use super::device_test::StagedTest;
use super::driver::{Event, Kernel};
use super::measure::Measurer;
use super::CudaError;
use gevo_model::assessment::KernelTime;
use gevo_model::stats::{self, Timing};
use std::time::Duration;

/// Runs of the original and of the variant, with an event after every
/// launch, for a pipeline's per-kernel times.
const PROFILE_RUNS: usize = 3;
/// Per-kernel times are taken for tests of at most this many launches.
pub(super) const PROFILE_MAX_LAUNCHES: usize = 8192;

impl Measurer {
    /// Rounds `first..first + rounds` appended to `timing`, alternating
    /// which kernel runs first by the round's number; warm-ups before the
    /// first round.
    pub(super) fn time(
        &self,
        kernel: &Kernel,
        test: &StagedTest,
        first: u32,
        rounds: u32,
        limit: Duration,
        timing: &mut Timing,
    ) -> Result<(), CudaError> {
        let warmups = if first == 0 { self.options.warmups } else { 0 };
        self.pacer.begin(limit * (2 * rounds + 2 * warmups));
        for _ in 0..warmups {
            for k in [&self.original, kernel] {
                test.restore()?;
                test.launch_all(k, &self.pacer)?;
            }
        }
        let rounds = rounds as usize;
        for r in 0..rounds {
            let e = &self.events[4 * r..4 * r + 4];
            if (first as usize + r) % 2 == 0 {
                self.timed_run(&self.original, test, &e[0], &e[1])?;
                self.timed_run(kernel, test, &e[2], &e[3])?;
            } else {
                self.timed_run(kernel, test, &e[2], &e[3])?;
                self.timed_run(&self.original, test, &e[0], &e[1])?;
            }
        }
        // Every run queued. A variant that hangs does so in its first run:
        // given up on by then (the runs before it have their limits too),
        // not after the whole batch's; then the last event ends the batch.
        let last = if (first as usize + rounds) % 2 == 1 {
            3
        } else {
            1
        };
        let per_run = |e: CudaError| match e {
            CudaError::Timeout { .. } => CudaError::Timeout { limit },
            other => other,
        };
        self.pacer
            .wait_by(&self.events[3], limit * (2 * warmups + 2))
            .map_err(per_run)?;
        self.pacer
            .wait(&self.events[4 * (rounds - 1) + last])
            .map_err(per_run)?;
        for r in 0..rounds {
            let e = &self.events[4 * r..4 * r + 4];
            timing.original_ns.push(e[0].nanos_until(&e[1])?);
            timing.variant_ns.push(e[2].nanos_until(&e[3])?);
        }
        Ok(())
    }

    /// A pipeline's time per kernel, original and variant: runs with an
    /// event after every launch (apart from the timed rounds, which these
    /// events would disturb), each kernel's launches summed, the undisturbed
    /// time (`stats::undisturbed`) of `PROFILE_RUNS` runs. Empty for one
    /// kernel or a test of more than `PROFILE_MAX_LAUNCHES` launches.
    pub(super) fn kernel_times(
        &self,
        kernel: &Kernel,
        test: &StagedTest,
        limit: Duration,
    ) -> Result<Vec<KernelTime>, CudaError> {
        let launches = &test.instance.launches;
        let n = launches.len();
        if self.kernel_names.len() < 2 || n + 1 > self.profile_events.len() {
            return Ok(Vec::new());
        }
        let events = &self.profile_events[..=n];
        let kernels = self.spec.kernels.len();
        // [original, variant][kernel] -> one sum per run
        let mut sums = vec![vec![Vec::with_capacity(PROFILE_RUNS); kernels]; 2];
        for _ in 0..PROFILE_RUNS {
            for (which, k) in [&self.original, kernel].into_iter().enumerate() {
                self.pacer.begin(limit);
                test.restore()?;
                self.flush.fill(0)?;
                events[0].record()?;
                for (j, launch) in launches.iter().enumerate() {
                    test.launch_one(k, launch)?;
                    events[j + 1].record()?;
                    self.pacer.launched()?;
                }
                self.pacer.wait(&events[n])?;
                let mut per = vec![0.0; kernels];
                for (j, launch) in launches.iter().enumerate() {
                    per[launch.kernel] += events[j].nanos_until(&events[j + 1])?;
                }
                for (k, ns) in per.into_iter().enumerate() {
                    sums[which][k].push(ns);
                }
            }
        }
        Ok((0..kernels)
            .map(|k| KernelTime {
                kernel: self.spec.kernels[k].clone(),
                original_ns: stats::undisturbed(&sums[0][k]),
                variant_ns: stats::undisturbed(&sums[1][k]),
            })
            .collect())
    }

    /// Restores the inputs, evicts L2, and queues the launches between two
    /// events.
    pub(super) fn timed_run(
        &self,
        kernel: &Kernel,
        test: &StagedTest,
        start: &Event,
        end: &Event,
    ) -> Result<(), CudaError> {
        test.restore()?;
        self.flush.fill(0)?;
        start.record()?;
        test.launch_all(kernel, &self.pacer)?;
        end.record()
    }
}
