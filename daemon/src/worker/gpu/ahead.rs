//! The next batch, compiled while this one is measured
//! (`Backend::compile_ahead`; docs/evolve.md, "Bred a step ahead"). The
//! engine sends the patches its next step will evaluate as soon as it has
//! bred them, during this step's batch; the batch's compile side takes
//! them, a few at a time, after its own requests, and keeps their answers
//! until the batch that asks for them takes them. So the next step's GPU
//! work is compiled when it starts, and the compile workers do not wait
//! for the GPUs' last variants.

use super::feeds::Answer;
use crate::ir::Patch;
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

    /// Whether the `index`th request fed was compiled ahead; its answer is
    /// kept when so.
    pub(super) fn answered(&mut self, index: usize, answer: &Answer) -> bool {
        let Some(patch) = self.in_flight.remove(&index) else {
            return false;
        };
        self.answers.insert(patch, answer.clone());
        true
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
        assert!(ahead.answered(10, &failed("a")));
        assert!(!ahead.answered(99, &failed("not ahead")));
        assert_eq!(ahead.next(13, 2), Some(c.clone()));
        assert!(ahead.all_fed());
        assert!(ahead.answered(13, &failed("c")));
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
        assert_eq!(ahead.take_for(&[c.clone()]).len(), 1);
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
        assert!(ahead.answered(1, &failed("b")));
        ahead.settle();
        assert_eq!(ahead.next(5, 4), Some(a.clone()), "lost, so first again");
        assert!(ahead.answered(5, &failed("a")));
        expect(&mut ahead, &[b.clone(), a.clone(), patch("d")]);
        assert_eq!(ahead.take_for(&[a, b, c]).len(), 2, "c was not compiled");
        assert_eq!(
            ahead.next(6, 4),
            Some(patch("d")),
            "a and b compiled already"
        );
        assert_eq!(ahead.next(7, 4), None);
    }
}
