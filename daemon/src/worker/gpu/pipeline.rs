//! One batch's pipeline on the GPU backend: the compile side on its own
//! thread feeding the GPU side on the caller's, with what was compiled and
//! measured ahead for the batch, and the lanes of the promotion beside it.

use super::ahead::{CompiledAhead, MeasuredAhead};
use super::batch_sides::{Answer, BatchEnd, Fed, Forward, LaneInbox, Measuring, Purpose};
use super::CudaBackend;
use crate::worker::pool::WorkerPool;
use crate::worker::Request;
use gevo_ir::Patch;
use gevo_model::spec::TestSet;
use gevo_search::evolve::{BackendError, Evaluated};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};

impl CudaBackend {
    /// Compiles (and pre-screens) every patch on the compile workers while
    /// the GPU workers measure: each variant goes to the next idle GPU
    /// worker as soon as it and the variants before it are compiled
    /// ([`Measuring`]), so no GPU worker waits for another's variant. Each
    /// distinct PTX that `known` does not answer is measured once. The
    /// promotion running beside the search
    /// ([`Running`](super::promotion_lane::Running)) has its requests taken
    /// meanwhile, ahead of the batch's; the batch ends when its own
    /// variants are measured, or, `until_promotion_ends`, when that
    /// promotion ended.
    pub(super) fn pipeline(
        &mut self,
        patches: &[Patch],
        set: TestSet,
        known: &(dyn Fn(&str) -> bool + Sync),
        purpose: Purpose,
        until_promotion_ends: bool,
    ) -> Result<Vec<Evaluated>, BackendError> {
        let (race, searching) = match purpose {
            Purpose::Search { race } => (race, true),
            Purpose::Promotion { race } => (race, false),
        };
        // Validation never rests on less than every train test.
        let prescreen = match searching {
            true => self.prescreen,
            false => self.prescreen.for_promotion(),
        };
        let ahead = self.take_ahead(patches, searching);
        let (compiled_ahead, compiled_ahead_in) = mpsc::channel();
        self.utilization.compiled_ahead += ahead.precompiled.len() as u64;
        let own: Vec<usize> = (0..patches.len())
            .filter(|i| !ahead.precompiled.contains_key(i))
            .collect();
        let (compile_inbox, gpu_inbox) = match &mut self.promotion {
            Some(running) => running.inboxes(),
            None => (LaneInbox::default(), LaneInbox::default()),
        };
        let end = BatchEnd {
            measured: Arc::new(AtomicBool::new(false)),
            until_lane_ends: until_promotion_ends,
        };
        let cubin_for = self.cubin_for.clone();
        let (sender, compiled) = mpsc::channel();
        let forward = Forward {
            requests: None, // made on the compile side's thread
            own,
            sender,
            waker: self.gpu.waker(),
            abandoned: false,
            lane: compile_inbox,
            fed: 0,
            end: end.clone(),
            ahead: ahead.compiled,
            ahead_limit: ahead.compile_limit,
            compile_request: Box::new(move |id, patch| {
                // Few of a search's variants pass their check.
                Request::compile_measured(id, patch, prescreen, cubin_for.clone(), searching)
            }),
            compiled_ahead,
        };
        let mut measuring = Measuring {
            compiled: Some(compiled),
            pending: ahead.precompiled,
            producer_done: false,
            out: vec![None; patches.len()],
            seen: BTreeSet::new(),
            known,
            measured: Vec::new(),
            patches,
            utilization: &mut self.utilization,
            screened_out: 0,
            set,
            race,
            purpose,
            lane: gpu_inbox,
            end,
            compile_waker: self.compile.waker(),
            own_waiting: 0,
            lane_waiting: 0,
            compiled_ahead: Some(compiled_ahead_in),
            ahead: ahead.measured,
            measure_ahead_limit: ahead.measure_limit,
            carry_lane: self.carry_promotion,
        };
        let (outcome, compile_lane, compiled_ahead) =
            run_sides(&mut self.compile, &mut self.gpu, forward, &mut measuring);
        let Measuring {
            out,
            lane: gpu_lane,
            ahead: measured_ahead,
            screened_out,
            ..
        } = measuring;
        if searching {
            self.ahead = compiled_ahead;
            self.measured_ahead = measured_ahead;
            self.measured_ahead.settle();
        }
        self.screened_out += screened_out;
        self.end_lane(&outcome, compile_lane, gpu_lane);
        self.take_lane_outputs()?;
        outcome?;
        // A batch whose outcome is Ok took every patch's answer.
        Ok(evaluations(out))
    }

    /// What a batch takes of the work done ahead: the search's batches
    /// take what was compiled for them ahead, and compile the next one's
    /// patches (promotion's measure their own, and do nothing ahead).
    fn take_ahead(&mut self, patches: &[Patch], searching: bool) -> Ahead {
        if !searching {
            return Ahead {
                precompiled: BTreeMap::new(),
                compiled: CompiledAhead::default(),
                compile_limit: 0,
                measured: MeasuredAhead::default(),
                measure_limit: 0,
            };
        }
        Ahead {
            precompiled: self.ahead.take_for(patches),
            compiled: std::mem::take(&mut self.ahead),
            compile_limit: self.compile.ahead_capacity(),
            measured: std::mem::take(&mut self.measured_ahead),
            measure_limit: self.gpu.ahead_capacity(),
        }
    }

    /// After a batch, the lanes go back to the promotion beside the search
    /// where the batch succeeded.
    fn end_lane(
        &mut self,
        outcome: &Result<(), BackendError>,
        compile_lane: LaneInbox,
        gpu_lane: LaneInbox,
    ) {
        match (outcome, &mut self.promotion) {
            (Ok(()), Some(running)) => running.put_back(compile_lane, gpu_lane),
            // A failed batch (a stop, a lost pool) ends the promotion beside
            // it: its thread learns so from its closed channels, nobody
            // takes its result, and a later step promotes its candidates
            // again (a daemon keeps its backend across a stop).
            (Err(_), running) => *running = None,
            (Ok(()), None) => {}
        }
    }
}

/// What a batch takes of the work done ahead for it, and how much it may
/// do ahead for the next (nothing, for a batch that is not the search's).
struct Ahead {
    /// This batch's patches compiled ahead: their answers by index.
    precompiled: BTreeMap<usize, Answer>,
    /// The next batch's patches, to compile ahead.
    compiled: CompiledAhead,
    /// At most this many of them compile at a time.
    compile_limit: usize,
    /// Variants measured ahead.
    measured: MeasuredAhead,
    /// At most this many GPU requests under way when one is measured ahead.
    measure_limit: usize,
}

/// Runs a batch's compile side (`forward`) on its own thread and its GPU
/// side (`measuring`) on this one until both end: the batch's outcome, and
/// the compile side's lane and what it compiled ahead.
fn run_sides(
    compile: &mut WorkerPool,
    gpu: &mut WorkerPool,
    forward: Forward,
    measuring: &mut Measuring,
) -> (Result<(), BackendError>, LaneInbox, CompiledAhead) {
    let patches = measuring.patches;
    let outcome = std::thread::scope(|s| {
        let producer = s.spawn(move || compile_side(compile, patches, forward));
        let measured = gpu.run_fed(measuring);
        // A GPU side that failed leaves the compile workers nothing
        // to do but the variants they hold, and the lane no answer.
        measuring.compiled = None;
        if measured.is_err() {
            measuring.lane.close();
        }
        // Set already where the batch's variants were all measured; a
        // GPU side that failed ends the compile side's wait for it too.
        measuring.end.measured.store(true, Ordering::Relaxed);
        measuring.compile_waker.wake();
        let (compiled, compile_lane, ahead) =
            producer.join().expect("the compile thread does not panic");
        (measured.and(compiled), compile_lane, ahead)
    });
    tracing::debug!(
        variants = patches.len(),
        measured = measuring
            .measured
            .iter()
            .filter(|f| matches!(f, Fed::Own(_)))
            .count(),
        "batch measured"
    );
    outcome
}

/// The compile side of a batch: queues the requests of its own patches,
/// then feeds the compile workers until the batch ends; its outcome, its
/// lane (closed where it failed) and what it compiled ahead.
fn compile_side(
    compile: &mut WorkerPool,
    patches: &[Patch],
    mut forward: Forward,
) -> (Result<(), BackendError>, LaneInbox, CompiledAhead) {
    let requests = forward
        .own
        .iter()
        .map(|&i| (forward.compile_request)(compile.next_id(), patches[i].clone()))
        .collect();
    forward.requests = Some(requests);
    let done = compile.run_fed(&mut forward);
    let mut lane = std::mem::take(&mut forward.lane);
    if done.is_err() {
        lane.close(); // the lane learns the pools failed
    }
    let mut ahead = std::mem::take(&mut forward.ahead);
    ahead.settle();
    let waker = forward.waker.clone();
    drop(forward); // the GPU side sees the end
    waker.wake();
    (done, lane, ahead)
}

/// Each patch's evaluation, in order; one whose compile answer never came
/// says so.
fn evaluations(out: Vec<Option<Evaluated>>) -> Vec<Evaluated> {
    out.into_iter()
        .map(|e| {
            e.unwrap_or_else(|| Evaluated {
                build: Err("its compile answer never came".into()),
                assessment: None,
            })
        })
        .collect()
}
