//! A pool's run: requests queued and handed to workers as they have room,
//! answers taken as they come. A run's requests may arrive while it goes on
//! ([`Feed`]): the GPU backend feeds each compiled variant to its GPU
//! workers as soon as it is ready, so no GPU worker waits for a batch's
//! slowest variant while others are queued.

use super::super::process::Event;
use super::super::process::State;
use super::super::{Request, Response};
use super::WorkerPool;
use crate::evolve::BackendError;
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
/// feed, and what is left.
#[derive(Default)]
pub(super) struct Batch {
    queue: VecDeque<usize>,
    done: Vec<(usize, Result<Response, String>)>,
    /// Per request: workers it has lost that were Slurm steps.
    pub(super) lost_steps: Vec<u32>,
    /// Per request: the only worker slot that may take it.
    slots: Vec<Option<usize>>,
    remaining: usize,
}

impl Batch {
    /// `n` more requests, each queued where the feed places it.
    fn push(&mut self, n: usize, feed: &dyn Feed) {
        let first = self.lost_steps.len();
        let mut ahead = Vec::new();
        for r in first..first + n {
            let placement = feed.placement(r);
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
        let mut open = true;
        let depth = self.options.launcher.pipeline_depth();
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
            for (r, result) in batch.done.drain(..) {
                feed.answered(r, result);
            }
            let starting = self
                .workers
                .iter()
                .any(|w| matches!(w.state, State::Starting(_)));
            if !open && batch.remaining == 0 && !starting {
                break;
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
            for (r, result) in batch.done.drain(..) {
                feed.answered(r, result);
            }
        }
        Ok(())
    }

    /// Hands queued requests to workers with room: up to `depth` in flight
    /// each (more than one only for Slurm steps, whose stdio adds latency
    /// that the next request's computation should hide).
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
        for slot in 0..self.workers.len() {
            if self.pinned.is_some_and(|p| p != self.workers[slot].slot) {
                continue;
            }
            loop {
                let in_flight = match &self.workers[slot].state {
                    State::Idle => 0,
                    State::Busy { requests, .. } => requests.len(),
                    _ => break,
                };
                if in_flight >= depth {
                    break;
                }
                let Some(r) = batch.next_for(self.workers[slot].slot, &live) else {
                    break;
                };
                let mut line = serde_json::to_string(&requests[r]).expect("requests serialize");
                line.push('\n');
                let w = &mut self.workers[slot];
                match &mut w.state {
                    State::Busy { requests, .. } => requests.push_back(r),
                    _ => {
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
                    break;
                }
            }
        }
        Ok(())
    }
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
}
