//! The next batch, compiled while this one is measured
//! (`Backend::compile_ahead`; docs/evolve.md, "Bred a step ahead"). The
//! engine sends the patches its next step will evaluate as soon as it has
//! bred them, during this step's batch; the batch's compile side takes
//! them, a few at a time, after its own requests, and keeps their answers
//! until the batch that asks for them takes them. So the next step's GPU
//! work is compiled when it starts, and the compile workers do not wait
//! for the GPUs' last variants.

use super::batch_sides::Answer;
use crate::worker::Request;
use gevo_ir::Patch;
use gevo_model::assessment::Assessment;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::mpsc::{Receiver, TryRecvError};

/// Patches to compile ahead, and the answers compiled so far.
#[derive(Default)]
pub(super) struct CompiledAhead {
    /// Where the next batch's patches come from, until they came.
    coming: Option<Receiver<Vec<Patch>>>,
    /// Not yet handed to a compile worker, in the engine's order.
    waiting: VecDeque<Patch>,
    /// Handed to a compile worker: by the index its request was fed at.
    in_flight: BTreeMap<usize, Patch>,
    answers: HashMap<Patch, Answer>,
}

impl CompiledAhead {
    /// The next batch's patches will come on `next`. What was not compiled
    /// ahead for the batch about to run compiles with it, as its own.
    pub(super) fn expect(&mut self, next: Receiver<Vec<Patch>>) {
        self.receive();
        self.waiting.clear();
        self.coming = Some(next);
    }

    /// The patches sent, when they came: they replace what was still to
    /// compile; each distinct patch is compiled once.
    fn receive(&mut self) {
        let Some(coming) = &self.coming else {
            return;
        };
        let next = match coming.try_recv() {
            Ok(next) => next,
            Err(TryRecvError::Empty) => return,
            Err(TryRecvError::Disconnected) => Vec::new(),
        };
        self.coming = None;
        // What another batch's patches compiled to is no longer asked for.
        let wanted: HashSet<&Patch> = next.iter().collect();
        self.answers.retain(|p, _| wanted.contains(p));
        let mut seen = HashSet::new();
        self.waiting = next
            .into_iter()
            .filter(|p| !self.answers.contains_key(p) && seen.insert(p.clone()))
            .collect();
    }

    /// The answers compiled ahead for `patches`, by index.
    pub(super) fn take_for(&self, patches: &[Patch]) -> BTreeMap<usize, Answer> {
        patches
            .iter()
            .enumerate()
            .filter_map(|(i, p)| Some((i, self.answers.get(p)?.clone())))
            .collect()
    }

    /// The next patch to compile, where fewer than `limit` are compiling;
    /// `index` is where its request is fed.
    pub(super) fn next(&mut self, index: usize, limit: usize) -> Option<Patch> {
        self.receive();
        if self.in_flight.len() >= limit {
            return None;
        }
        let patch = self.waiting.pop_front()?;
        self.in_flight.insert(index, patch.clone());
        Some(patch)
    }

    /// The patch the `index`th request fed compiled ahead, if it did; its
    /// answer is kept when so.
    pub(super) fn answered(&mut self, index: usize, answer: &Answer) -> Option<Patch> {
        let patch = self.in_flight.remove(&index)?;
        self.answers.insert(patch.clone(), answer.clone());
        Some(patch)
    }

    /// Nothing left to hand to a compile worker, nor to come.
    pub(super) fn all_fed(&self) -> bool {
        self.waiting.is_empty() && self.coming.is_none()
    }

    /// After a batch: a request whose answer never came is compiled again
    /// with the next batch (its own, or ahead).
    pub(super) fn settle(&mut self) {
        let lost = std::mem::take(&mut self.in_flight);
        for patch in lost.into_values().rev() {
            self.waiting.push_front(patch);
        }
    }
}

/// The next batch's variants, measured where a GPU would otherwise wait
/// for this batch's last ones (its queue empty): by PTX hash, until the
/// batch that asks for them takes them. A search batch offers each variant
/// compiled ahead whose PTX the search does not know yet; at most one a GPU
/// is measured at a time, and none once the batch's own are measured.
#[derive(Default)]
pub(super) struct MeasuredAhead {
    /// Measured during the batch before, for this one.
    ready: HashMap<String, Assessment>,
    /// Measured during this batch, for the next.
    fresh: HashMap<String, Assessment>,
    /// Offered, not yet sent to a GPU worker: its PTX hash, its patch and
    /// its measure request.
    waiting: VecDeque<(String, Patch, Request)>,
    /// Sent: by the index the request was fed at.
    in_flight: BTreeMap<usize, (String, Patch)>,
}

impl MeasuredAhead {
    /// What the batch before measured of the PTX `ptx_hash`, taken once.
    pub(super) fn take(&mut self, ptx_hash: &str) -> Option<Assessment> {
        self.ready.remove(ptx_hash)
    }

    /// A variant compiled ahead to measure when a GPU has room, unless one
    /// of its PTX is measured, offered or under way already.
    pub(super) fn offer(&mut self, ptx_hash: String, patch: Patch, request: Request) {
        let known = self.ready.contains_key(&ptx_hash)
            || self.fresh.contains_key(&ptx_hash)
            || self.waiting.iter().any(|(h, ..)| *h == ptx_hash)
            || self.in_flight.values().any(|(h, _)| *h == ptx_hash);
        if !known {
            self.waiting.push_back((ptx_hash, patch, request));
        }
    }

    /// The next offered variant's request, to feed at `index`.
    pub(super) fn next(&mut self, index: usize) -> Option<Request> {
        let (ptx_hash, patch, request) = self.waiting.pop_front()?;
        self.in_flight.insert(index, (ptx_hash, patch));
        Some(request)
    }

    /// Whether a variant offered waits to be sent.
    pub(super) fn has_waiting(&self) -> bool {
        !self.waiting.is_empty()
    }

    /// Measurements sent and not answered.
    pub(super) fn under_way(&self) -> usize {
        self.in_flight.len()
    }

    /// The patch the `index`th request fed measured ahead, if it did; its
    /// assessment is kept for the next batch when so.
    pub(super) fn answered(&mut self, index: usize, assessment: Assessment) -> Option<Patch> {
        let (ptx_hash, patch) = self.in_flight.remove(&index)?;
        self.fresh.insert(ptx_hash, assessment);
        Some(patch)
    }

    /// After a batch: what it measured ahead waits for the next one; what
    /// the batch before measured and nobody took is dropped, and so is what
    /// was offered and not sent.
    pub(super) fn settle(&mut self) {
        self.ready = std::mem::take(&mut self.fresh);
        self.waiting.clear();
        self.in_flight.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    fn patch(kernel: &str) -> Patch {
        let mut p = Patch::new("hash", "k");
        p.kernel = kernel.into();
        p
    }

    fn failed(reason: &str) -> Answer {
        Err(reason.into())
    }

    /// Expects `patches`, already sent.
    fn expect(ahead: &mut CompiledAhead, patches: &[Patch]) {
        let (sender, receiver) = mpsc::channel();
        sender.send(patches.to_vec()).unwrap();
        ahead.expect(receiver);
    }

    /// Nothing is compiled ahead before the patches come; then each
    /// distinct patch is compiled once, at most `limit` at a time, and a
    /// batch takes the answers of its own patches, at each of their places.
    /// The next batch's patches drop the answers no batch asks for.
    #[test]
    fn a_batch_takes_what_was_compiled_ahead_for_it() {
        let (a, b, c) = (patch("a"), patch("b"), patch("c"));
        let mut ahead = CompiledAhead::default();
        let (sender, receiver) = mpsc::channel();
        ahead.expect(receiver);
        assert_eq!(ahead.next(9, 2), None);
        assert!(!ahead.all_fed(), "the patches are still coming");
        sender
            .send(vec![a.clone(), b.clone(), a.clone(), c.clone()])
            .unwrap();
        assert_eq!(ahead.next(10, 2), Some(a.clone()));
        assert_eq!(ahead.next(11, 2), Some(b.clone()));
        assert_eq!(ahead.next(12, 2), None, "two compile at a time");
        assert_eq!(ahead.answered(10, &failed("a")), Some(a.clone()));
        assert_eq!(ahead.answered(99, &failed("not ahead")), None);
        assert_eq!(ahead.next(13, 2), Some(c.clone()));
        assert!(ahead.all_fed());
        assert!(ahead.answered(13, &failed("c")).is_some());
        let taken = ahead.take_for(&[c.clone(), a.clone(), b.clone(), a.clone()]);
        let reasons: Vec<(usize, String)> = taken
            .into_iter()
            .map(|(i, answer)| (i, answer.expect_err("a failure")))
            .collect();
        assert_eq!(
            reasons,
            [(0, "c".into()), (1, "a".into()), (3, "a".into())],
            "b still compiles"
        );
        // The next batch's patches come: only their answers are kept.
        expect(&mut ahead, &[b.clone(), c.clone()]);
        assert_eq!(ahead.next(14, 2), Some(b));
        assert_eq!(ahead.take_for(std::slice::from_ref(&c)).len(), 1);
        assert!(
            ahead.take_for(&[patch("a")]).is_empty(),
            "no batch asks for a"
        );
    }

    /// A request whose answer never came (its batch failed) is compiled
    /// again, first; a patch answered already is not asked again; what was
    /// not compiled ahead when its batch runs compiles with it instead.
    #[test]
    fn what_a_failed_batch_did_not_compile_waits_for_the_next() {
        let (a, b, c) = (patch("a"), patch("b"), patch("c"));
        let mut ahead = CompiledAhead::default();
        expect(&mut ahead, &[a.clone(), b.clone(), c.clone()]);
        assert_eq!(ahead.next(0, 4), Some(a.clone()));
        assert_eq!(ahead.next(1, 4), Some(b.clone()));
        assert!(ahead.answered(1, &failed("b")).is_some());
        ahead.settle();
        assert_eq!(ahead.next(5, 4), Some(a.clone()), "lost, so first again");
        assert!(ahead.answered(5, &failed("a")).is_some());
        expect(&mut ahead, &[b.clone(), a.clone(), patch("d")]);
        assert_eq!(ahead.take_for(&[a, b, c]).len(), 2, "c was not compiled");
        assert_eq!(
            ahead.next(6, 4),
            Some(patch("d")),
            "a and b compiled already"
        );
        assert_eq!(ahead.next(7, 4), None);
    }

    fn measure(ptx: &str) -> Request {
        Request::Measure {
            id: 0,
            ptx: ptx.into(),
            cubin: None,
            guarded: None,
            set: gevo_model::spec::TestSet::Train,
            race: None,
        }
    }

    fn passed() -> Assessment {
        Assessment::failed("none", "none", "stands for any assessment".into())
    }

    /// Each PTX is measured ahead once, in the order offered; what a batch
    /// measured ahead waits for the next batch only, which takes each once.
    #[test]
    fn a_variant_measured_ahead_waits_for_the_next_batch_only() {
        let mut ahead = MeasuredAhead::default();
        ahead.offer("h1".into(), patch("a"), measure("a"));
        ahead.offer("h2".into(), patch("b"), measure("b"));
        ahead.offer("h1".into(), patch("c"), measure("c"));
        assert!(matches!(ahead.next(4), Some(Request::Measure { ptx, .. }) if ptx == "a"));
        ahead.offer("h1".into(), patch("d"), measure("d"));
        assert_eq!(ahead.under_way(), 1);
        assert!(ahead.has_waiting(), "h2");
        assert_eq!(ahead.answered(4, passed()), Some(patch("a")));
        assert_eq!(ahead.answered(5, passed()), None, "not measured ahead");
        assert!(ahead.take("h1").is_none(), "for the next batch");
        ahead.settle();
        assert!(ahead.next(6).is_none(), "h2 was not sent: dropped");
        assert!(ahead.take("h1").is_some());
        assert!(ahead.take("h1").is_none(), "taken once");
        ahead.offer("h3".into(), patch("e"), measure("e"));
        assert!(ahead.next(7).is_some());
        assert!(ahead.answered(7, passed()).is_some());
        ahead.settle();
        ahead.settle();
        assert!(
            ahead.take("h3").is_none(),
            "the batch after did not take it"
        );
    }
}
