//! The two sides of a batch in [`CudaBackend::pipeline`](super::CudaBackend):
//! the compile workers' feed ([`Forward`]) and the GPU workers'
//! ([`Measuring`]). Each also takes promotion's requests from a
//! lane ([`super::promotion_lane::Running`]) while the batch runs ([`LaneInbox`]),
//! queued ahead of the batch's own, and sends their answers back. A batch
//! ends when its own variants are measured, whatever the lane still asks
//! (that waits for the next batch) and whatever of its measurements is
//! under way (the GPU pool carries those to the next batch's run,
//! [`Feed::carry`]), or, where it serves only the lane, when the lane ends.

use super::super::pool::{assessment_of, Carry, Feed, Placement, Waker};
use super::super::{Request, Response};
use super::ahead::{CompiledAhead, MeasuredAhead};
use super::promotion_lane::LaneJob;
use crate::cuda::guarded::GuardedBuild;
use crate::cuda::toolkit::Cubin;
use gevo_ir::Patch;
use gevo_model::assessment::Assessment;
use gevo_model::spec::TestSet;
use gevo_model::utilization::Utilization;
use gevo_search::evolve::{Build, Evaluated};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};

/// Why variants are being measured: the search's (which may race them
/// against the selection threshold, and whose counts the report shows), or
/// promotion's and its like (every patch measured, equal PTX too; the full
/// rounds unless raced, as edit contributions' subsets are).
#[derive(Debug, Clone, Copy)]
pub(super) enum Purpose {
    Search { race: Option<f64> },
    Promotion { race: Option<f64> },
}

impl Purpose {
    /// Promotion's: every round.
    pub(super) const PROMOTION: Purpose = Purpose::Promotion { race: None };
}

/// An answer on its way: the request's result.
pub(super) type Answer = Result<Response, String>;

/// Promotion's requests to one pool during a batch: taken as they come,
/// each answer sent back to the lane that asked.
#[derive(Default)]
pub(super) struct LaneInbox {
    jobs: Option<mpsc::Receiver<LaneJob>>,
    /// By the index the request was fed at: where its answer goes, and the
    /// patch it measures (for the GPU's accounting).
    replies: BTreeMap<usize, LaneReply>,
}

/// Where a lane's request's answer goes, and the patch it measures.
type LaneReply = (mpsc::Sender<Answer>, Option<Patch>);

impl LaneInbox {
    /// The requests `jobs` brings (none where it is `None`: no lane, or
    /// one that ended).
    pub(super) fn new(jobs: Option<mpsc::Receiver<LaneJob>>) -> Self {
        LaneInbox {
            jobs,
            replies: BTreeMap::new(),
        }
    }

    /// The lane's channel, for the next batch; `None` once it ended.
    pub(super) fn into_jobs(self) -> Option<mpsc::Receiver<LaneJob>> {
        self.jobs
    }

    /// The lane's requests that arrived, numbered, fed from index `fed`
    /// on.
    fn take(&mut self, fed: usize, next_id: &mut dyn FnMut() -> u64) -> Vec<Request> {
        let mut requests = Vec::new();
        while let Some(jobs) = &self.jobs {
            match jobs.try_recv() {
                Ok(job) => {
                    self.replies
                        .insert(fed + requests.len(), (job.reply, job.patch));
                    requests.push(job.request.with_id(next_id()));
                }
                Err(mpsc::TryRecvError::Empty) => break,
                Err(mpsc::TryRecvError::Disconnected) => self.jobs = None,
            }
        }
        requests
    }

    /// Whether the lane may still send requests.
    fn open(&self) -> bool {
        self.jobs.is_some()
    }

    fn placement(&self, index: usize, slot: Option<usize>) -> Placement {
        match self.replies.contains_key(&index) {
            true => Placement { ahead: true, slot },
            false => Placement::default(),
        }
    }

    /// Where the `index`th request's answer goes, when the lane asked it.
    fn reply_to(&mut self, index: usize) -> Option<LaneReply> {
        self.replies.remove(&index)
    }

    /// No more requests, and no answers: a lane waiting for one learns
    /// that the pools failed.
    pub(super) fn close(&mut self) {
        self.jobs = None;
        self.replies.clear();
    }
}

/// When a batch's pools stop taking the lane's requests.
#[derive(Clone)]
pub(super) struct BatchEnd {
    /// Set by the GPU side once the batch's own variants are measured.
    pub(super) measured: Arc<AtomicBool>,
    /// Serve the lane until it ends, not only until then (a batch of no
    /// variants that waits for a promotion).
    pub(super) until_lane_ends: bool,
}

impl BatchEnd {
    /// Whether a pool whose lane is `lane` takes no more requests.
    fn reached(&self, lane: &LaneInbox) -> bool {
        !lane.open() || (!self.until_lane_ends && self.measured.load(Ordering::Relaxed))
    }
}

/// The compile side of a batch: every patch's request not compiled ahead
/// queued at once; each answer sent to the GPU side as it comes. Then, a
/// few at a time, the next batch's patches ([`CompiledAhead`]), until this
/// batch's own variants are measured.
pub(super) struct Forward {
    pub(super) requests: Option<Vec<Request>>,
    /// Per own request, in the order fed, its patch's index in the batch.
    pub(super) own: Vec<usize>,
    pub(super) sender: mpsc::Sender<(usize, Answer)>,
    pub(super) waker: Waker,
    pub(super) abandoned: bool,
    pub(super) lane: LaneInbox,
    pub(super) fed: usize,
    /// The GPU side goes on measuring after the last variant compiled: the
    /// lane's compile requests are taken until it is done.
    pub(super) end: BatchEnd,
    pub(super) ahead: CompiledAhead,
    /// At most this many of the next batch's patches compile at a time (0:
    /// none, a batch that is not the search's).
    pub(super) ahead_limit: usize,
    /// Makes the request that compiles a patch ahead, numbered.
    pub(super) compile_request: Box<dyn Fn(u64, Patch) -> Request + Send>,
    /// Where each patch compiled ahead goes with its answer: the GPU side,
    /// which may measure it ahead.
    pub(super) compiled_ahead: mpsc::Sender<(Patch, Answer)>,
}

impl Forward {
    /// The next batch's patches, while this batch's variants are measured.
    fn ahead_requests(&mut self, fed: usize, next_id: &mut dyn FnMut() -> u64) -> Vec<Request> {
        let mut requests = Vec::new();
        if self.end.measured.load(Ordering::Relaxed) {
            return requests;
        }
        while let Some(patch) = self.ahead.next(fed + requests.len(), self.ahead_limit) {
            requests.push((self.compile_request)(next_id(), patch));
        }
        requests
    }
}

impl Feed for Forward {
    fn more(&mut self, next_id: &mut dyn FnMut() -> u64) -> Option<Vec<Request>> {
        let first = self.requests.is_some();
        let mut requests = self.requests.take().unwrap_or_default();
        requests.extend(self.lane.take(self.fed + requests.len(), next_id));
        let ahead = self.ahead_requests(self.fed + requests.len(), next_id);
        requests.extend(ahead);
        self.fed += requests.len();
        // A batch that is not the search's has nothing to compile ahead.
        let ahead_done = self.ahead.all_fed() || self.end.measured.load(Ordering::Relaxed);
        if !first && requests.is_empty() && self.end.reached(&self.lane) && ahead_done {
            return None;
        }
        Some(requests)
    }

    fn answered(&mut self, index: usize, result: Answer) {
        if let Some((reply, _)) = self.lane.reply_to(index) {
            let _ = reply.send(result);
            return;
        }
        if let Some(patch) = self.ahead.answered(index, &result) {
            let _ = self.compiled_ahead.send((patch, result));
            self.waker.wake();
            return;
        }
        if self.sender.send((self.own[index], result)).is_err() {
            self.abandoned = true;
        }
        self.waker.wake();
    }

    fn abandoned(&self) -> bool {
        self.abandoned
    }

    fn placement(&self, index: usize) -> Placement {
        self.lane.placement(index, None)
    }
}

/// The GPU side of a batch: compiled variants taken as they come, each
/// fresh one handed to the GPU workers at once, each answer put in its
/// place. Where two patches of a batch build the same PTX, the first
/// compiled is measured and the other takes its outcome from the engine's
/// cache (taking them in the patches' order made a GPU wait for a slow
/// compile, a guarded build in ptxas, while later variants were ready).
pub(super) struct Measuring<'a> {
    pub(super) compiled: Option<mpsc::Receiver<(usize, Answer)>>,
    /// Compiled (ahead, or since the last look), not taken yet.
    pub(super) pending: BTreeMap<usize, Answer>,
    pub(super) producer_done: bool,
    /// Per patch, its build and assessment once taken.
    pub(super) out: Vec<Option<Evaluated>>,
    pub(super) seen: BTreeSet<String>,
    pub(super) known: &'a (dyn Fn(&str) -> bool + Sync),
    /// Per GPU request fed, what it measures.
    pub(super) measured: Vec<Fed>,
    pub(super) patches: &'a [Patch],
    pub(super) utilization: &'a mut Utilization,
    pub(super) screened_out: u64,
    pub(super) set: TestSet,
    pub(super) race: Option<f64>,
    pub(super) purpose: Purpose,
    pub(super) lane: LaneInbox,
    pub(super) end: BatchEnd,
    /// Wakes the compile side when the batch's own variants are measured.
    pub(super) compile_waker: Waker,
    /// The batch's own measure requests not answered yet.
    pub(super) own_waiting: usize,
    /// The lane's measure requests not answered yet.
    pub(super) lane_waiting: usize,
    /// The next batch's variants as the compile side compiled them ahead,
    /// and those measured ahead ([`MeasuredAhead`]).
    pub(super) compiled_ahead: Option<mpsc::Receiver<(Patch, Answer)>>,
    pub(super) ahead: MeasuredAhead,
    /// GPU workers, times the requests each may hold to hide its stdio's
    /// round trip (two for a Slurm step): no more requests than that are
    /// under way when one is measured ahead (0: none is).
    pub(super) measure_ahead_limit: usize,
    /// Whether the lane's measurements under way when the batch's own are
    /// measured are carried to the next batch's run, not waited for.
    pub(super) carry_lane: bool,
}

/// What a GPU request fed measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Fed {
    /// The batch's variant at this index of `out` (and `patches`).
    Own(usize),
    /// A request the lane asked.
    Lane,
    /// A variant of the next batch.
    Ahead,
}

impl Measuring<'_> {
    /// Every variant of the batch compiled and measured: the compile side
    /// is told, so it stops taking the lane's requests too.
    fn note_measured(&mut self) {
        let measured = self.all_taken() && self.own_waiting == 0;
        if measured && !self.end.measured.swap(true, Ordering::Relaxed) {
            self.compile_waker.wake();
        }
    }

    /// The next batch's variants to measure now: while this batch's own
    /// are not all measured, one for each GPU worker that nothing else is
    /// under way for (its queue would be empty).
    fn ahead_requests(&mut self, next_id: &mut dyn FnMut() -> u64) -> Vec<Request> {
        let mut requests = Vec::new();
        let arrived: Vec<(Patch, Answer)> = match &self.compiled_ahead {
            Some(compiled) => compiled.try_iter().collect(),
            None => Vec::new(),
        };
        for (patch, answer) in arrived {
            self.offer_ahead(patch, answer);
        }
        if !self.may_measure_ahead() {
            return requests;
        }
        while self.own_waiting + self.lane_waiting + self.ahead.under_way()
            < self.measure_ahead_limit
        {
            let index = self.measured.len();
            let Some(request) = self.ahead.next(index) else {
                break;
            };
            self.measured.push(Fed::Ahead);
            requests.push(request.with_id(next_id()));
        }
        requests
    }

    /// The batch ends once its own are measured (the lane's measurements
    /// under way are carried to the next batch, or, not carried, waited
    /// for) and the compile requests under way are answered: until then a
    /// GPU nothing waits for may as well measure ahead. Those compile
    /// requests are the next batch's, and one of lu's takes a second: the
    /// GPU measured nothing while it waited for them (`measured_ahead` 0
    /// in every one-GPU search of BENCHMARKS.md's "240 s searches").
    fn may_measure_ahead(&self) -> bool {
        !self.end.measured.load(Ordering::Relaxed)
            || (!self.carry_lane && self.lane_waiting > 0)
            || !self.producer_done
    }

    /// A variant compiled ahead, offered to measure ahead where it built,
    /// passed the pre-screen and has PTX the search does not know.
    fn offer_ahead(&mut self, patch: Patch, answer: Answer) {
        // Its compile time counts when the batch that asks for it takes
        // the answer ([`CompiledAhead`] keeps it too), not here.
        let compiled = Compiled::of(answer, &mut Utilization::default());
        let ptx_hash = match (&compiled.build, &compiled.screened_out) {
            (Ok(b), None) => b.ptx_hash.clone(),
            _ => return,
        };
        if (self.known)(&ptx_hash) || self.seen.contains(&ptx_hash) {
            return;
        }
        if let Some(request) = compiled.measure(self.set, self.race) {
            self.ahead.offer(ptx_hash, patch, request);
        }
    }

    /// Every patch's compiled answer taken.
    fn all_taken(&self) -> bool {
        self.out.iter().all(Option::is_some)
    }

    /// Patch `variant`'s compiled answer in its place; the measure request
    /// when it is a fresh one that passed the pre-screen.
    fn take(
        &mut self,
        variant: usize,
        response: Answer,
        next_id: &mut dyn FnMut() -> u64,
    ) -> Option<Request> {
        let searching = matches!(self.purpose, Purpose::Search { .. });
        if !searching {
            add_promotion_time(self.utilization, &response);
        }
        let Compiled {
            build,
            screened_out,
            cubin,
            guarded,
            known,
        } = Compiled::of(response, self.utilization);
        if searching {
            self.utilization.compiled += 1;
            self.utilization.screened_out += u64::from(screened_out.is_some());
        }
        let fresh = match (&build, self.purpose) {
            // Promotion measures every patch it is given (equal PTX too:
            // its measurements are compared with each other).
            (Ok(_), Purpose::Promotion { .. }) => true,
            (Ok(b), Purpose::Search { .. }) => {
                !(self.known)(&b.ptx_hash) && self.seen.insert(b.ptx_hash.clone())
            }
            (Err(_), _) => false,
        };
        if fresh && known {
            // The worker's known hashes are the search's cache's; a search
            // that forgot one measures it unguarded rather than not at all.
            tracing::warn!("a variant its compile worker took for known is new to the search: measured without its guarded build");
        }
        // Known by its IR, which only a pre-screen rejection keys: there is
        // no PTX to measure, and the simulator rejected this IR before.
        let screened_out = match (fresh && known, &build) {
            (true, Ok(b)) if b.ptx.is_empty() => Some(rejected_before()),
            _ => screened_out,
        };
        // Measured during the batch before, ahead of it.
        let measured_ahead = match (fresh, &screened_out, &build) {
            (true, None, Ok(b)) => self.ahead.take(&b.ptx_hash),
            _ => None,
        };
        let mut request = None;
        let assessment = match (fresh, screened_out, &build) {
            (true, Some(a), _) => {
                self.screened_out += 1;
                Some(a)
            }
            (true, None, Ok(_)) if measured_ahead.is_some() => measured_ahead,
            (true, None, Ok(b)) => {
                self.measured.push(Fed::Own(variant));
                self.own_waiting += 1;
                request = Some(Request::Measure {
                    id: next_id(),
                    ptx: b.ptx.clone(),
                    cubin,
                    guarded,
                    set: self.set,
                    race: self.race,
                });
                None
            }
            _ => None,
        };
        self.out[variant] = Some(Evaluated { build, assessment });
        request
    }
}

impl Feed for Measuring<'_> {
    fn more(&mut self, next_id: &mut dyn FnMut() -> u64) -> Option<Vec<Request>> {
        if let Some(compiled) = &self.compiled {
            loop {
                match compiled.try_recv() {
                    Ok((i, response)) => {
                        self.pending.insert(i, response);
                    }
                    Err(mpsc::TryRecvError::Empty) => break,
                    Err(mpsc::TryRecvError::Disconnected) => {
                        self.producer_done = true;
                        break;
                    }
                }
            }
        }
        let mut requests = Vec::new();
        for (variant, response) in std::mem::take(&mut self.pending) {
            requests.extend(self.take(variant, response, next_id));
        }
        let fed = self.measured.len();
        let lane = self.lane.take(fed, next_id);
        self.lane_waiting += lane.len();
        self.measured.extend(lane.iter().map(|_| Fed::Lane));
        requests.extend(lane);
        self.note_measured();
        let ahead = self.ahead_requests(next_id);
        requests.extend(ahead);
        // The compile side ended: all compiled and measured (and the lane
        // ended, where the batch serves it to its end), or it failed (a variant's
        // answer never came; its error is the batch's). Variants offered to
        // measure ahead are fed as GPUs free up while the batch runs on.
        let failed = self.producer_done && !self.all_taken();
        let ahead_left = self.ahead.has_waiting() && self.may_measure_ahead();
        if requests.is_empty()
            && self.producer_done
            && (failed || (self.end.reached(&self.lane) && !ahead_left))
        {
            return None;
        }
        Some(requests)
    }

    fn answered(&mut self, index: usize, result: Answer) {
        match self.measured[index] {
            Fed::Own(variant) => {
                account(
                    self.utilization,
                    &result,
                    self.purpose,
                    &self.patches[variant],
                );
                if let Some(taken) = &mut self.out[variant] {
                    taken.assessment = Some(assessment_of(result));
                }
                self.own_waiting -= 1;
                self.note_measured();
            }
            Fed::Ahead => {
                let spent = Answer::clone(&result);
                if let Some(patch) = self.ahead.answered(index, assessment_of(result)) {
                    account(self.utilization, &spent, self.purpose, &patch);
                    self.utilization.measured_ahead += 1;
                }
            }
            Fed::Lane => {
                self.lane_waiting -= 1;
                let Some((reply, patch)) = self.lane.reply_to(index) else {
                    return;
                };
                if let Some(patch) = &patch {
                    account(self.utilization, &result, Purpose::PROMOTION, patch);
                }
                let _ = reply.send(result);
            }
        }
    }

    /// Promotion's measurements are compared with each other: one device.
    fn placement(&self, index: usize) -> Placement {
        self.lane.placement(index, Some(0))
    }

    /// Promotion's measurements take seconds on the first GPU: a batch
    /// whose own variants are measured ends without waiting for them, and
    /// the next batch delivers their answers.
    fn may_carry(&self, index: usize) -> bool {
        self.carry_lane && matches!(self.measured.get(index), Some(Fed::Lane))
    }

    fn carry(&mut self, index: usize) -> Option<Carry> {
        if !self.may_carry(index) {
            return None;
        }
        let reply = self.lane.reply_to(index)?;
        self.lane_waiting -= 1;
        self.utilization.promotion_carried += 1;
        Some(Box::new(reply))
    }

    fn answered_carried(&mut self, carry: Carry, result: Answer) {
        let Ok(reply) = carry.downcast::<LaneReply>() else {
            return;
        };
        let (reply, patch) = *reply;
        if let Some(patch) = &patch {
            account(self.utilization, &result, Purpose::PROMOTION, patch);
        }
        let _ = reply.send(result);
    }
}

/// A variant its compile worker knew by its IR, which the search no longer
/// holds a verdict for: only the pre-screen's rejections are keyed by IR.
fn rejected_before() -> Assessment {
    Assessment::failed(
        "train",
        "prescreen",
        "pre-screen on the simulator: this variant's IR was rejected before (the search no longer holds the verdict)".into(),
    )
}

/// A variant that did not compile, as promotion's measurements say it.
pub(super) fn compile_failure(reason: String) -> Assessment {
    Assessment::failed("compile", "invalid", reason)
}

/// A compile worker's answer, taken apart.
pub(super) struct Compiled {
    pub(super) build: Result<Build, String>,
    /// The pre-screen's rejection.
    pub(super) screened_out: Option<Assessment>,
    cubin: Option<Cubin>,
    guarded: Option<GuardedBuild>,
    /// Answered after code generation: its PTX was known to the search
    /// (`Compile::skip_known`), so it has neither cubin nor guarded build.
    known: bool,
}

impl Compiled {
    /// The answer, its worker's time added to `utilization`.
    pub(super) fn of(response: Answer, utilization: &mut Utilization) -> Self {
        let failed = |reason| Compiled {
            build: Err(reason),
            screened_out: None,
            cubin: None,
            guarded: None,
            known: false,
        };
        match response {
            Ok(Response::Built {
                build,
                cubin,
                screened_out,
                guarded,
                spent,
                known,
                ..
            }) => {
                utilization.spent += &spent;
                utilization.known_skipped += u64::from(known);
                utilization.timed_assembled += u64::from(cubin.is_some());
                utilization.guarded_assembled +=
                    u64::from(guarded.as_ref().is_some_and(|g| g.cubin.is_some()));
                Compiled {
                    build: Ok(build),
                    screened_out,
                    cubin,
                    guarded,
                    known,
                }
            }
            Ok(Response::CompileFailed { reason, spent, .. }) => {
                utilization.spent += &spent;
                failed(reason)
            }
            Ok(other) => failed(format!("unexpected answer {other:?}")),
            Err(reason) => failed(format!("code generation failed: {reason}")),
        }
    }

    /// The request that measures this build on `set` (numbered 0: the pool
    /// numbers it); none when it did not build.
    pub(super) fn measure(self, set: TestSet, race: Option<f64>) -> Option<Request> {
        let build = self.build.ok()?;
        Some(Request::Measure {
            id: 0,
            ptx: build.ptx,
            cubin: self.cubin,
            guarded: self.guarded,
            set,
            race,
        })
    }
}

/// Adds a worker's time on one of promotion's requests to promotion's part
/// (`utilization.spent` gets it where the answer is taken).
fn add_promotion_time(utilization: &mut Utilization, response: &Answer) {
    if let Some(spent) = response.as_ref().ok().and_then(Response::spent) {
        utilization.promotion += spent;
    }
}

/// Adds a GPU worker's answer to the utilization: its time always, its
/// rounds for the search's measurements.
pub(super) fn account(
    utilization: &mut Utilization,
    response: &Answer,
    purpose: Purpose,
    patch: &Patch,
) {
    let searching = matches!(purpose, Purpose::Search { .. });
    if searching {
        utilization.measured += 1;
    } else {
        utilization.promotion_measured += 1;
        add_promotion_time(utilization, response);
    }
    if let Ok(Response::Assessed {
        spent,
        rounds,
        stopped_early,
        stopped_better,
        exiting,
        assessment,
        ..
    }) = response
    {
        if *exiting {
            // What guards do not catch yet (docs/evolve.md): the kinds that
            // still cost a GPU worker start, for whoever adds the next guard
            // (the patch reproduces it: `gevod run --patch`).
            let failure = assessment.first_failure();
            tracing::info!(failure = ?failure, patch = %patch.to_json(), "a variant cost its GPU worker a restart");
        }
        utilization.spent += spent;
        if searching && *rounds > 0 {
            utilization.timed += 1;
            utilization.rounds += u64::from(*rounds);
            utilization.stopped_early += u64::from(*stopped_early);
            utilization.stopped_better += u64::from(*stopped_better);
        }
    }
}
