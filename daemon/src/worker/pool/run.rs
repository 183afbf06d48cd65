//! A pool's run: requests queued and handed to workers as they have room,
//! answers taken as they come. A run's requests may arrive while it goes on
//! ([`Feed`]): the GPU backend feeds each compiled variant to its GPU
//! workers as soon as it is ready, so no GPU worker waits for a batch's
//! slowest variant while others are queued.

use super::super::known::KnownLog;
use super::super::process::Event;
use super::super::process::State;
use super::super::{Request, Response};
use super::WorkerPool;
use gevo_search::evolve::BackendError;
use std::collections::VecDeque;
use std::io::Write;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

/// Where a run's requests come from and its answers go
/// ([`WorkerPool::run_fed`]).
pub trait Feed {
    /// The requests ready now (never waits), numbered with `next_id`;
    /// `None` once no more will come (not asked again after that).
    fn more(&mut self, next_id: &mut dyn FnMut() -> u64) -> Option<Vec<Request>>;
    /// The answer to the `index`th request fed (counting from 0), or why
    /// there is none, as soon as it is known.
    fn answered(&mut self, index: usize, result: Result<Response, String>);
    /// True once nobody wants the answers any more: the requests not yet
    /// handed to a worker are dropped (answered with an error), and the run
    /// ends when the workers have answered the ones they hold.
    fn abandoned(&self) -> bool {
        false
    }
    /// Where the `index`th request fed waits (asked once, when it is fed).
    fn placement(&self, _index: usize) -> Placement {
        Placement::default()
    }
    /// Whether the `index`th request may outlive the run: once the feed has
    /// no more and every request left unanswered may, the run ends, and
    /// they are the next run's, their answers going to its feed
    /// ([`Feed::answered_carried`]) with what [`Feed::carry`] handed over.
    fn may_carry(&self, _index: usize) -> bool {
        false
    }
    /// What the `index`th request's answer is to be delivered with by a
    /// later run's feed; `Some` wherever [`Feed::may_carry`] said so.
    fn carry(&mut self, _index: usize) -> Option<Carry> {
        None
    }
    /// The answer to a request an earlier run carried, with what that run's
    /// feed handed over for it (dropped where this feed cannot deliver it).
    fn answered_carried(&mut self, _carry: Carry, _result: Result<Response, String>) {}
}

/// What a feed hands over to deliver a carried request's answer with
/// ([`Feed::carry`]); only the feeds that make it know what it is.
pub type Carry = Box<dyn std::any::Any + Send>;

/// A request a run ended with unanswered, for the next run: in flight on
/// a worker (whose queue already names it by its place in the next run's
/// list) or queued.
pub(super) struct CarriedRequest {
    request: Request,
    slot: Option<usize>,
    lost_steps: u32,
    queued: bool,
    carry: Carry,
}

/// Where a request waits in its run's queue.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Placement {
    /// Ahead of the requests already queued (promotion's, which the search
    /// waits for, go before the search's own).
    pub ahead: bool,
    /// Only this worker slot takes it (measurements compared with each
    /// other run on one device).
    pub slot: Option<usize>,
}

/// Wakes a pool waiting in [`WorkerPool::run_fed`] for its feed, from
/// another thread.
#[derive(Clone)]
pub struct Waker(Sender<Event>);

impl Waker {
    pub fn wake(&self) {
        let _ = self.0.send(Event::Wake);
    }
}

/// A run's requests so far: the queue, the answers not yet handed to the
/// feed, and what is left. The first `carried` requests are those an
/// earlier run carried; the feed's own follow, its `i`th at `carried + i`.
#[derive(Default)]
pub(super) struct Batch {
    queue: VecDeque<usize>,
    done: Vec<(usize, Result<Response, String>)>,
    /// Per request: workers it has lost that were Slurm steps.
    pub(super) lost_steps: Vec<u32>,
    /// Per request: the only worker slot that may take it.
    slots: Vec<Option<usize>>,
    remaining: usize,
    carried: usize,
}

impl Batch {
    /// A request an earlier run carried, next in this run's list.
    fn carry_in(&mut self, carried: &CarriedRequest) {
        let r = self.lost_steps.len();
        self.slots.push(carried.slot);
        self.lost_steps.push(carried.lost_steps);
        if carried.queued {
            self.queue.push_back(r);
        }
        self.remaining += 1;
        self.carried += 1;
    }

    /// `n` more requests, each queued where the feed places it.
    fn push(&mut self, n: usize, feed: &dyn Feed) {
        let first = self.lost_steps.len();
        let mut ahead = Vec::new();
        for r in first..first + n {
            let placement = feed.placement(r - self.carried);
            self.slots.push(placement.slot);
            if placement.ahead {
                ahead.push(r);
            } else {
                self.queue.push_back(r);
            }
        }
        self.requeue(ahead.into());
        self.lost_steps.resize(first + n, 0);
        self.remaining += n;
    }

    /// The first queued request that worker slot `slot` may take: one
    /// placed on no slot, on this one, or on a slot no live worker has (a
    /// lost device's requests go to the others).
    fn next_for(&mut self, slot: usize, live: &[usize]) -> Option<usize> {
        let at = self
            .queue
            .iter()
            .position(|&r| self.slots[r].is_none_or(|s| s == slot || !live.contains(&s)))?;
        self.queue.remove(at)
    }

    pub(super) fn finish(&mut self, request: usize, result: Result<Response, String>) {
        self.done.push((request, result));
        self.remaining -= 1;
    }

    /// Requests that never started go first, in their order.
    pub(super) fn requeue(&mut self, requests: VecDeque<usize>) {
        for r in requests.into_iter().rev() {
            self.queue.push_front(r);
        }
    }
}

/// A run whose requests are all known at its start.
struct Fixed {
    requests: Option<Vec<Request>>,
    results: Vec<Option<Result<Response, String>>>,
}

impl Feed for Fixed {
    fn more(&mut self, _: &mut dyn FnMut() -> u64) -> Option<Vec<Request>> {
        self.requests.take()
    }

    fn answered(&mut self, index: usize, result: Result<Response, String>) {
        self.results[index] = Some(result);
    }
}

impl WorkerPool {
    /// Runs requests on the workers, each on one, and returns per request
    /// the response or why there is none.
    pub fn run(
        &mut self,
        requests: Vec<Request>,
    ) -> Result<Vec<Result<Response, String>>, BackendError> {
        let mut fixed = Fixed {
            results: vec![None; requests.len()],
            requests: Some(requests),
        };
        self.run_fed(&mut fixed)?;
        Ok(fixed
            .results
            .into_iter()
            .map(|r| r.expect("every request answered"))
            .collect())
    }

    /// Something another thread can wake this pool's [`run_fed`] with when
    /// its feed has more.
    ///
    /// [`run_fed`]: Self::run_fed
    pub fn waker(&self) -> Waker {
        Waker(self.sender.clone())
    }

    /// Runs the requests `feed` hands over, as they come, until it says no
    /// more will come and every one is answered. Idle workers take the next
    /// queued request at once: nothing waits for the others of its batch.
    /// A feed filled from another thread wakes the pool with a [`Waker`]
    /// (else it looks again within 50 ms).
    pub fn run_fed(&mut self, feed: &mut dyn Feed) -> Result<(), BackendError> {
        let mut requests: Vec<Request> = Vec::new();
        let mut batch = Batch::default();
        // The requests an earlier run carried come first, where the
        // workers holding them already place them.
        let mut carries: Vec<Option<Carry>> = Vec::new();
        for carried in std::mem::take(&mut self.carried) {
            batch.carry_in(&carried);
            requests.push(carried.request);
            carries.push(Some(carried.carry));
        }
        let mut open = true;
        let depth = self.options.pipeline_depth();
        loop {
            if self.stop.load(Ordering::Relaxed) {
                return Err(BackendError::Interrupted);
            }
            if open && feed.abandoned() {
                open = false;
                for r in std::mem::take(&mut batch.queue) {
                    batch.finish(r, Err("not run: its batch was abandoned".into()));
                }
            }
            if open {
                let next_request = &mut self.next_request;
                let mut next_id = || {
                    *next_request += 1;
                    *next_request
                };
                match feed.more(&mut next_id) {
                    Some(more) => {
                        batch.push(more.len(), feed);
                        requests.extend(more);
                    }
                    None => open = false,
                }
            }
            self.dispatch(&requests, &mut batch, depth)?;
            deliver(&mut batch, feed, &mut carries);
            let starting = self
                .workers
                .iter()
                .any(|w| matches!(w.state, State::Starting(_)));
            if !open && !starting {
                if batch.remaining == 0 {
                    break;
                }
                let left = self.unanswered(&batch);
                let carriable = |r: usize| r < batch.carried || feed.may_carry(r - batch.carried);
                if left.iter().all(|&r| carriable(r)) {
                    self.carry_out(&left, &requests, &batch, feed, &mut carries);
                    break;
                }
            }
            match self.events.recv_timeout(Duration::from_millis(50)) {
                Ok(ref event) if self.spare_event(event) => {}
                Ok(Event::Line(serial, line)) => {
                    let Some(slot) = self.workers.iter().position(|w| w.serial == serial) else {
                        continue; // from a worker already replaced
                    };
                    self.answer(slot, &line, &requests, &mut batch)?;
                }
                Ok(Event::Closed(serial)) => {
                    let Some(slot) = self.workers.iter().position(|w| w.serial == serial) else {
                        continue;
                    };
                    self.closed(slot, &mut batch)?;
                }
                Ok(Event::Wake) | Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => unreachable!("the pool holds a sender"),
            }
            self.check_timeouts(&mut batch)?;
            deliver(&mut batch, feed, &mut carries);
        }
        Ok(())
    }

    /// Every request of the run not answered yet: those the workers hold
    /// and those queued.
    fn unanswered(&self, batch: &Batch) -> Vec<usize> {
        let mut left: Vec<usize> = batch.queue.iter().copied().collect();
        for worker in &self.workers {
            if let State::Busy { requests, .. } = &worker.state {
                left.extend(requests.iter().copied());
            }
        }
        debug_assert_eq!(left.len(), batch.remaining);
        left
    }

    /// Leaves the requests `left` to the next run, numbered in its list by
    /// their order here (the workers' queues renumbered to match).
    fn carry_out(
        &mut self,
        left: &[usize],
        requests: &[Request],
        batch: &Batch,
        feed: &mut dyn Feed,
        carries: &mut [Option<Carry>],
    ) {
        let mut renumbered = std::collections::BTreeMap::new();
        for &r in left {
            let carry = match r.checked_sub(batch.carried) {
                Some(index) => feed.carry(index),
                None => carries[r].take(),
            };
            // A feed that said a request may be carried hands it over; one
            // that does not loses its answer.
            let carry = carry.unwrap_or_else(|| Box::new(()));
            renumbered.insert(r, self.carried.len());
            self.carried.push(CarriedRequest {
                request: requests[r].clone(),
                slot: batch.slots[r],
                lost_steps: batch.lost_steps[r],
                queued: batch.queue.contains(&r),
                carry,
            });
        }
        for worker in &mut self.workers {
            if let State::Busy { requests, .. } = &mut worker.state {
                for r in requests.iter_mut() {
                    *r = renumbered[r];
                }
            }
        }
    }
}

impl WorkerPool {
    /// Hands queued requests to workers with room: up to `depth` in flight
    /// each (more than one only for Slurm steps, whose stdio adds latency
    /// that the next request's computation should hide), dealt level by
    /// level: every worker gets its first before any gets a second, so a
    /// batch smaller than the workers' room spreads over all of them
    /// instead of filling the first few `depth` deep.
    fn dispatch(
        &mut self,
        requests: &[Request],
        batch: &mut Batch,
        depth: usize,
    ) -> Result<(), BackendError> {
        let live: Vec<usize> = self
            .workers
            .iter()
            .filter(|w| !matches!(w.state, State::Lost))
            .map(|w| w.slot)
            .collect();
        let in_flight: Vec<Option<usize>> = self
            .workers
            .iter()
            .map(|w| match &w.state {
                _ if self.pinned.is_some_and(|p| p != w.slot) => None,
                State::Idle(_) => Some(0),
                State::Busy { requests, .. } => Some(requests.len()),
                _ => None,
            })
            .collect();
        for slot in dealing_order(&in_flight, depth) {
            if batch.queue.is_empty() {
                break;
            }
            // A worker replaced during this deal takes nothing more of it.
            if !matches!(
                self.workers[slot].state,
                State::Idle(_) | State::Busy { .. }
            ) {
                continue;
            }
            let Some(r) = batch.next_for(self.workers[slot].slot, &live) else {
                continue;
            };
            tracing::trace!(
                gpu = self.options.gpu,
                slot,
                id = requests[r].id(),
                "dispatched"
            );
            let w = &mut self.workers[slot];
            let mut line = with_known(&requests[r], &self.known, &mut w.known_sent);
            line.push('\n');
            match &mut w.state {
                State::Busy { requests, .. } => requests.push_back(r),
                state => {
                    if let State::Idle(since) = state {
                        self.idle_s += since.elapsed().as_secs_f64();
                    }
                    w.state = State::Busy {
                        requests: VecDeque::from([r]),
                        since: Instant::now(),
                    }
                }
            }
            if w.stdin
                .write_all(line.as_bytes())
                .and_then(|_| w.stdin.flush())
                .is_err()
            {
                // It died before reading: its requests go to others.
                let lost = self.take_in_flight(slot);
                batch.requeue(lost);
                self.replace(slot)?;
            }
        }
        Ok(())
    }
}

/// `request` as its line, a search compile request with the changes to the
/// known PTX hashes its worker has not been sent (those after `*sent` in
/// `known`).
fn with_known(request: &Request, known: &KnownLog, sent: &mut usize) -> String {
    let delta = match request {
        Request::Compile {
            skip_known: true, ..
        } => known.since(sent),
        _ => Default::default(),
    };
    let line = match delta.learn.is_empty() && delta.forget.is_empty() {
        true => serde_json::to_string(request),
        false => {
            let mut request = request.clone();
            if let Request::Compile {
                known: learn,
                forget,
                ..
            } = &mut request
            {
                learn.extend(delta.learn);
                forget.extend(delta.forget);
            }
            serde_json::to_string(&request)
        }
    };
    line.expect("requests serialize")
}

/// Hands the answers come in to the feed: its own requests' to
/// [`Feed::answered`], those an earlier run carried to
/// [`Feed::answered_carried`].
fn deliver(batch: &mut Batch, feed: &mut dyn Feed, carries: &mut [Option<Carry>]) {
    for (r, result) in batch.done.drain(..) {
        match r.checked_sub(batch.carried) {
            Some(index) => feed.answered(index, result),
            None => {
                if let Some(carry) = carries[r].take() {
                    feed.answered_carried(carry, result);
                }
            }
        }
    }
}

/// The workers (indices into `in_flight`, `None` for one that takes
/// nothing now) in the order they take one request each: at level `l`,
/// every worker holding at most `l` requests, so each level brings every
/// worker below it one closer, up to `depth` each.
fn dealing_order(in_flight: &[Option<usize>], depth: usize) -> impl Iterator<Item = usize> + '_ {
    (0..depth).flat_map(move |level| {
        in_flight
            .iter()
            .enumerate()
            .filter(move |(_, held)| held.is_some_and(|held| held <= level))
            .map(|(slot, _)| slot)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Places request `i` as `placements[i]` says.
    struct Placed(Vec<Placement>);

    impl Feed for Placed {
        fn more(&mut self, _: &mut dyn FnMut() -> u64) -> Option<Vec<Request>> {
            None
        }
        fn answered(&mut self, _: usize, _: Result<Response, String>) {}
        fn placement(&self, index: usize) -> Placement {
            self.0[index]
        }
    }

    /// Requests placed ahead go before those queued, in their own order; a
    /// request placed on a slot goes only to that slot's worker, unless no
    /// live worker has that slot.
    #[test]
    fn requests_wait_where_their_feed_places_them() {
        let ahead_on_0 = Placement {
            ahead: true,
            slot: Some(0),
        };
        let feed = Placed(vec![
            Placement::default(),
            Placement::default(),
            ahead_on_0,
            Placement {
                ahead: true,
                slot: None,
            },
        ]);
        let mut batch = Batch::default();
        batch.push(2, &feed);
        batch.push(2, &feed);
        assert_eq!(Vec::from(batch.queue.clone()), vec![2, 3, 0, 1]);
        assert_eq!(batch.next_for(1, &[0, 1]), Some(3), "2 waits for slot 0");
        assert_eq!(batch.next_for(1, &[0, 1]), Some(0));
        assert_eq!(batch.next_for(0, &[0, 1]), Some(2));
        assert_eq!(batch.next_for(0, &[0, 1]), Some(1));
        assert_eq!(batch.next_for(0, &[0, 1]), None);

        let mut batch = Batch::default();
        batch.push(3, &Placed(vec![ahead_on_0; 3]));
        assert_eq!(batch.next_for(1, &[0, 1]), None, "slot 0 is live");
        assert_eq!(batch.next_for(1, &[1]), Some(0), "slot 0 was lost");
        assert_eq!(batch.remaining, 3);
    }

    /// Every worker with room takes one before any takes another; one that
    /// takes nothing now (starting, lost, or not the pinned one) is passed.
    #[test]
    fn requests_are_dealt_level_by_level() {
        let order: Vec<usize> = dealing_order(&[Some(0), Some(3), None, Some(1)], 4).collect();
        assert_eq!(order, vec![0, 0, 3, 0, 3, 0, 1, 3]);

        // A batch of 20 among 14 idle Slurm steps (16 deep): each gets one
        // or two, none sixteen.
        let first: Vec<usize> = dealing_order(&[Some(0); 14], 16).take(20).collect();
        let mut held = [0; 14];
        for slot in first {
            held[slot] += 1;
        }
        assert!(held.iter().all(|&h| (1..=2).contains(&h)), "{held:?}");
        assert_eq!(
            dealing_order(&[Some(1)], 1).count(),
            0,
            "a full worker takes none"
        );
    }
}
