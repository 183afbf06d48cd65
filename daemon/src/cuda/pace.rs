//! Launch pacing: a run of many launches (a pipeline's thousands) keeps at
//! most `2 * PACE` of them queued, so that a run that hangs ends in a
//! timeout at its limit. The driver's launch queue is finite: past it,
//! `cuLaunchKernel` blocks until a queued kernel finishes, which a hung one
//! never does, and the worker sat there past every limit until its
//! supervisor killed it (two minutes on the wavefront pipeline).
//!
//! Every `PACE` launches the pacer waits, up to the run's deadline, for the
//! mark it recorded `PACE` launches earlier, then records a new one: the
//! GPU always has `PACE` launches queued ahead of it, so pacing costs a
//! healthy run no GPU time.

use super::driver::Event;
use super::CudaError;
use std::cell::Cell;
use std::time::{Duration, Instant};

/// Launches between two marks.
pub(super) const PACE: usize = 256;

pub(super) struct Pacer {
    marks: [Event; 2],
    /// Launches queued since `begin`.
    queued: Cell<usize>,
    limit: Cell<Duration>,
    began: Cell<Instant>,
}

impl Pacer {
    pub fn new() -> Result<Pacer, CudaError> {
        Ok(Pacer {
            marks: [Event::new()?, Event::new()?],
            queued: Cell::new(0),
            limit: Cell::new(Duration::ZERO),
            began: Cell::new(Instant::now()),
        })
    }

    /// A run begins that may take `limit` from now, launches and waits
    /// together.
    pub fn begin(&self, limit: Duration) {
        self.queued.set(0);
        self.limit.set(limit);
        self.began.set(Instant::now());
    }

    /// One more launch was queued.
    pub fn launched(&self) -> Result<(), CudaError> {
        let queued = self.queued.get() + 1;
        self.queued.set(queued);
        if queued % PACE != 0 {
            return Ok(());
        }
        let mark = queued / PACE;
        if mark >= 2 {
            self.wait(&self.marks[(mark - 1) % 2])?;
        }
        // Waited for at the previous mark (or never recorded): free.
        self.marks[mark % 2].record()
    }

    /// Waits for `event` until the run's limit has passed since `begin`; a
    /// timeout names that limit.
    pub fn wait(&self, event: &Event) -> Result<(), CudaError> {
        self.wait_by(event, self.limit.get())
    }

    /// Waits for `event` until `by` has passed since `begin` (an event
    /// early in the run, due sooner than the whole run's limit).
    pub fn wait_by(&self, event: &Event, by: Duration) -> Result<(), CudaError> {
        let deadline = self.began.get() + by.min(self.limit.get());
        let left = deadline.saturating_duration_since(Instant::now());
        event.wait(left).map_err(|e| match e {
            CudaError::Timeout { .. } => CudaError::Timeout { limit: by },
            other => other,
        })
    }
}
