//! One test on the device: its inputs uploaded once (pristine copies), the
//! buffers the kernels run on, and the original's results; launching a
//! test's kernels with its arguments, and restoring its inputs between runs.

use super::driver::{DeviceBuffer, Event, Kernel};
use super::guarded::Budget;
use super::pace::Pacer;
use super::CudaError;
use gevo_model::spec::scalar_bits;
use gevo_model::spec::{ArgValue, Instance, LaunchInstance, LaunchParam, Role};
use std::cell::Cell;
use std::time::Duration;

/// Poison for output buffers before each run: NaN for floats, -1 for
/// integers, so an element a variant forgets to write cannot pass.
const POISON: u8 = 0xff;

/// One test's inputs on the device and the original's results on them.
pub(super) struct StagedTest {
    pub name: String,
    pub instance: Instance,
    /// Per argument: the inputs as uploaded (`in`/`inout` buffers).
    pristine: Vec<Option<DeviceBuffer>>,
    /// Per argument: the buffer the kernel runs on.
    pub work: Vec<Option<DeviceBuffer>>,
    /// The original's final bytes per argument (empty but for outputs).
    pub reference: Vec<Vec<u8>>,
    /// The same on the device, where outputs are compared there (else
    /// empty).
    pub reference_device: Vec<Option<DeviceBuffer>>,
    /// The original's median time, for timeouts.
    pub original_ns: f64,
    /// What a variant's guarded run may spend in loops (none until the
    /// guards are calibrated).
    pub budget: Budget,
    /// The `in` arguments the original leaves as uploaded: a variant must
    /// too (checked on the device with the outputs, or refused by a
    /// guarded run that protects them).
    pub kept_inputs: Vec<usize>,
    /// Whether a guarded run refuses writes into the kept inputs (their
    /// ranges read-only in its table): unless the original's own guarded
    /// run writes one (the same bytes back, say), found at calibration.
    pub protect_kept: Cell<bool>,
    /// Whether the kept inputs' buffers hold their uploaded bytes: set by
    /// a restore that a protecting guarded run follows, cleared by any
    /// other ([`StagedTest::restore_for`]).
    kept_pristine: Cell<bool>,
}

impl StagedTest {
    /// Uploads the test's inputs; the work buffers are allocated.
    pub fn upload(name: &str, instance: Instance) -> Result<StagedTest, CudaError> {
        let mut pristine = Vec::with_capacity(instance.args.len());
        let mut work = Vec::with_capacity(instance.args.len());
        for arg in &instance.args {
            match arg {
                ArgValue::Buffer { role, data, .. } => {
                    work.push(Some(DeviceBuffer::new(data.len())?));
                    pristine.push(match role {
                        Role::Out => None,
                        Role::In | Role::Inout => {
                            let b = DeviceBuffer::new(data.len())?;
                            b.upload(data)?;
                            Some(b)
                        }
                    });
                }
                ArgValue::Scalar(_) => {
                    work.push(None);
                    pristine.push(None);
                }
            }
        }
        Ok(StagedTest {
            name: name.to_string(),
            instance,
            pristine,
            work,
            reference: Vec::new(),
            reference_device: Vec::new(),
            original_ns: f64::NAN,
            budget: Budget::NONE,
            kept_inputs: Vec::new(),
            protect_kept: Cell::new(true),
            kept_pristine: Cell::new(false),
        })
    }

    /// Keeps a device copy of each of `outputs` as the buffers hold them
    /// now, right after the original's run.
    pub fn keep_reference(&mut self, outputs: &[usize]) -> Result<(), CudaError> {
        let binding = &self.instance.final_binding;
        self.reference_device = (0..self.work.len())
            .map(|i| match &self.work[binding[i]] {
                Some(result) if outputs.contains(&i) => {
                    let copy = DeviceBuffer::new(result.len)?;
                    copy.copy_from(result)?;
                    Ok(Some(copy))
                }
                _ => Ok(None),
            })
            .collect::<Result<_, CudaError>>()?;
        Ok(())
    }

    /// Argument `i`'s input as uploaded (`in`/`inout` buffers).
    pub fn pristine(&self, i: usize) -> Option<&DeviceBuffer> {
        self.pristine.get(i)?.as_ref()
    }

    /// Inputs back to their uploaded contents, outputs poisoned, before a
    /// run that may write anything.
    pub fn restore(&self) -> Result<(), CudaError> {
        self.restore_for(false)
    }

    /// Inputs back to their uploaded contents, outputs poisoned, before a
    /// run; before a run that cannot write the kept inputs (`protected`:
    /// a guarded build whose writes refuse them), kept inputs that no run
    /// has written since their last copy are left as they are (a
    /// reduction's input is most of what a check would copy).
    pub fn restore_for(&self, protected: bool) -> Result<(), CudaError> {
        let protected = protected && self.protect_kept.get();
        let skip_kept = protected && self.kept_pristine.get();
        for (slot, (work, pristine)) in self.work.iter().zip(&self.pristine).enumerate() {
            match (work, pristine) {
                (Some(_), Some(_)) if skip_kept && self.kept_inputs.contains(&slot) => {}
                (Some(w), Some(p)) => w.copy_from(p)?,
                (Some(w), None) => w.fill(POISON)?,
                _ => {}
            }
        }
        self.kept_pristine.set(protected);
        Ok(())
    }

    /// One run within `limit`: inputs restored (as [`Self::restore_for`]
    /// says with `protected`) and outputs poisoned, the launches queued
    /// (paced), `done` recorded after them and waited for; returns which
    /// buffer each argument ends on.
    pub fn run_once(
        &self,
        kernel: &Kernel,
        protected: bool,
        pacer: &Pacer,
        done: &Event,
        limit: Duration,
    ) -> Result<Vec<usize>, CudaError> {
        pacer.begin(limit);
        self.restore_for(protected)?;
        let binding = self.launch_all(kernel, pacer)?;
        done.record()?;
        pacer.wait(done)?;
        Ok(binding)
    }

    /// Queues the test's launches, each with its kernel and the buffers the
    /// spec's swaps bind, paced (`pace`: a hung run times out at its limit);
    /// returns which buffer each argument ends on.
    pub fn launch_all(&self, kernel: &Kernel, pacer: &Pacer) -> Result<Vec<usize>, CudaError> {
        for launch in &self.instance.launches {
            self.launch_one(kernel, launch)?;
            pacer.launched()?;
        }
        Ok(self.instance.final_binding.clone())
    }

    /// Queues one launch of the test.
    pub fn launch_one(&self, kernel: &Kernel, launch: &LaunchInstance) -> Result<(), CudaError> {
        let mut args: Vec<u64> = launch
            .params
            .iter()
            .map(|p| match *p {
                LaunchParam::Buffer { slot, .. } => self.work[slot].as_ref().map_or(0, |b| b.ptr),
                LaunchParam::Scalar(s) => scalar_bits(s),
            })
            .collect();
        kernel.launch(
            launch.kernel,
            launch.grid,
            launch.block,
            launch.shared_bytes,
            &mut args,
        )
    }
}
