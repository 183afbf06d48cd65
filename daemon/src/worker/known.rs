//! The PTX hashes a search knows, as its compile workers and their pool
//! keep them (`Compile::known`): the most recent [`KNOWN_LIMIT`], so a
//! daemon job searching for days holds a bounded set in each of its
//! workers. A hash forgotten costs what it cost before it was known: the
//! variant's pre-screen, guarded build and ptxas (its cache hits are mostly
//! recent elites' PTX again). A hash the search is about to forget (its
//! fitness cache evicts it) is forgotten by the workers first: a variant
//! the search does not know must never be answered as known.

use std::collections::{HashMap, HashSet, VecDeque};

/// Hashes kept, by each compile worker and by the pool's log.
pub const KNOWN_LIMIT: usize = 1 << 16;

/// A bounded set of PTX hashes, the oldest forgotten first.
#[derive(Debug, Default)]
pub struct KnownPtx {
    set: HashSet<String>,
    order: VecDeque<String>,
}

impl KnownPtx {
    pub fn extend(&mut self, hashes: impl IntoIterator<Item = String>) {
        for hash in hashes {
            if self.set.insert(hash.clone()) {
                self.order.push_back(hash);
            }
        }
        while self.order.len() > KNOWN_LIMIT {
            if let Some(old) = self.order.pop_front() {
                self.set.remove(&old);
            }
        }
    }

    pub fn contains(&self, hash: &str) -> bool {
        self.set.contains(hash)
    }

    /// Drops these hashes (their places in the order go when they come up:
    /// a re-learnt hash may then be forgotten early, which only costs a
    /// full compile).
    pub fn forget(&mut self, hashes: impl IntoIterator<Item = String>) {
        for hash in hashes {
            self.set.remove(&hash);
        }
    }
}

/// What a worker is sent: hashes to learn and hashes to forget, disjoint
/// (each hash's last change in the log since the worker's position).
#[derive(Debug, Default, PartialEq)]
pub struct KnownDelta {
    pub learn: Vec<String>,
    pub forget: Vec<String>,
}

/// The pool's log of known hashes, each worker's position in it, and the
/// log trimmed to [`KNOWN_LIMIT`] once it holds twice that (a position
/// before the trim then starts at the log's start: a worker behind by more
/// than the limit has forgotten the rest anyway). A hash the log holds is
/// not logged again: the search notes its cache hits too (after a resume
/// its workers know none of them), most of them many times. The log holds
/// changes: a hash learnt (`true`) or forgotten (`false`).
#[derive(Debug, Default)]
pub struct KnownLog {
    changes: Vec<(String, bool)>,
    logged: HashSet<String>,
    /// The hashes of the latest [`forget`](Self::forget): the search still
    /// knows them until its next one, and they are not noted meanwhile.
    forgetting: HashSet<String>,
    /// Changes trimmed off the front since the start.
    trimmed: usize,
}

impl KnownLog {
    pub fn note(&mut self, hashes: impl IntoIterator<Item = String>) {
        for hash in hashes {
            if !self.forgetting.contains(&hash) && self.logged.insert(hash.clone()) {
                self.changes.push((hash, true));
            }
        }
        self.trim();
    }

    /// Hashes the search is about to forget (at the end of its next
    /// generation; each call names one generation's, and ends the last
    /// call's wait): logged as forgotten, so every worker drops them with
    /// its next search compile request, and not noted again before the
    /// next call. Logged even where the log no longer holds the hash: a
    /// worker may have learnt it before a trim.
    pub fn forget(&mut self, hashes: &[String]) {
        for hash in hashes {
            self.logged.remove(hash);
            self.changes.push((hash.clone(), false));
        }
        self.forgetting = hashes.iter().cloned().collect();
        self.trim();
    }

    /// Past twice the limit the oldest changes go; a hash is logged (and
    /// not noted again) while its last change left says it is learnt.
    fn trim(&mut self) {
        if self.changes.len() < 2 * KNOWN_LIMIT {
            return;
        }
        let drop = self.changes.len() - KNOWN_LIMIT;
        self.changes.drain(..drop);
        self.trimmed += drop;
        self.logged = last_changes(&self.changes)
            .into_iter()
            .filter(|(_, learnt)| *learnt)
            .map(|(h, _)| h.to_string())
            .collect();
    }

    /// The changes after position `*sent` (counted from the log's start
    /// ever), each hash's last one, and `*sent` moved to the end.
    pub fn since(&self, sent: &mut usize) -> KnownDelta {
        let from = sent.saturating_sub(self.trimmed).min(self.changes.len());
        *sent = self.trimmed + self.changes.len();
        let mut delta = KnownDelta::default();
        for (hash, learnt) in last_changes(&self.changes[from..]) {
            match learnt {
                true => delta.learn.push(hash.to_string()),
                false => delta.forget.push(hash.to_string()),
            }
        }
        delta
    }
}

/// Each hash's last change in `changes`, in the order of their first.
fn last_changes(changes: &[(String, bool)]) -> Vec<(&str, bool)> {
    let mut at: HashMap<&str, usize> = HashMap::new();
    let mut last: Vec<(&str, bool)> = Vec::new();
    for (hash, learnt) in changes {
        match at.get(hash.as_str()) {
            Some(&i) => last[i].1 = *learnt,
            None => {
                at.insert(hash, last.len());
                last.push((hash, *learnt));
            }
        }
    }
    last
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hashes(range: std::ops::Range<usize>) -> Vec<String> {
        range.map(|i| format!("h{i}")).collect()
    }

    #[test]
    fn a_worker_keeps_the_most_recent_hashes() {
        let mut known = KnownPtx::default();
        known.extend(hashes(0..3));
        known.extend(hashes(1..4)); // two again: kept once
        assert_eq!(known.order.len(), 4);
        known.extend(hashes(4..KNOWN_LIMIT + 2));
        assert_eq!(known.order.len(), KNOWN_LIMIT);
        assert!(!known.contains("h0") && !known.contains("h1"));
        assert!(known.contains("h2") && known.contains(&format!("h{}", KNOWN_LIMIT + 1)));
    }

    #[test]
    fn each_worker_is_sent_what_it_has_not_been_and_the_log_stays_bounded() {
        let learn = |hashes: Vec<String>| KnownDelta {
            learn: hashes,
            forget: Vec::new(),
        };
        let mut log = KnownLog::default();
        let (mut a, mut b) = (0, 0);
        log.note(hashes(0..5));
        assert_eq!(log.since(&mut a), learn(hashes(0..5)));
        log.note(hashes(5..7));
        assert_eq!(log.since(&mut a), learn(hashes(5..7)));
        assert_eq!(log.since(&mut a), KnownDelta::default());
        // Hashes the log holds are not logged, nor sent, again.
        log.note(hashes(3..7));
        assert_eq!(log.since(&mut a), KnownDelta::default());
        assert_eq!(log.since(&mut b), learn(hashes(0..7)));
        // Past twice the limit the oldest go; a worker behind gets the rest.
        log.note(hashes(7..2 * KNOWN_LIMIT));
        assert_eq!(log.changes.len(), KNOWN_LIMIT);
        assert_eq!(
            log.since(&mut a),
            learn(hashes(KNOWN_LIMIT..2 * KNOWN_LIMIT))
        );
        let mut fresh = 0;
        assert_eq!(log.since(&mut fresh).learn.len(), KNOWN_LIMIT);
        log.note(hashes(2 * KNOWN_LIMIT..2 * KNOWN_LIMIT + 1));
        assert_eq!(
            log.since(&mut a),
            learn(hashes(2 * KNOWN_LIMIT..2 * KNOWN_LIMIT + 1))
        );
        assert_eq!(a, 2 * KNOWN_LIMIT + 1);
        // A trimmed hash is noted again.
        log.note(hashes(0..1));
        assert_eq!(log.since(&mut a), learn(hashes(0..1)));
    }

    /// Each worker is sent each hash's last change since its position: one
    /// that learnt and forgot in between is told to forget, one that forgot
    /// and learnt again to learn; a forgotten hash is noted again.
    #[test]
    fn forgotten_hashes_reach_every_worker_and_may_be_learnt_again() {
        let mut log = KnownLog::default();
        let (mut a, mut b) = (0, 0);
        log.note(hashes(0..4));
        assert_eq!(log.since(&mut a).learn, hashes(0..4));
        log.forget(&hashes(1..3));
        // The search dropped them (its next forget), then met h2 again.
        log.forget(&[]);
        log.note(hashes(2..3));
        let delta = log.since(&mut a);
        assert_eq!((delta.learn, delta.forget), (hashes(2..3), hashes(1..2)));
        let delta = log.since(&mut b);
        assert_eq!(delta.learn, ["h0", "h2", "h3"]);
        assert_eq!(delta.forget, hashes(1..2));
        // Until the next forget, the search still knows them: not noted.
        log.forget(&hashes(0..1));
        log.note(hashes(0..1));
        assert_eq!(log.since(&mut a).forget, hashes(0..1));
        log.forget(&[]);
        log.note(hashes(0..1));
        assert_eq!(log.since(&mut a).learn, hashes(0..1));
        let mut worker = KnownPtx::default();
        worker.extend(hashes(0..4));
        worker.forget(hashes(1..3));
        assert!(worker.contains("h0") && !worker.contains("h1") && !worker.contains("h2"));
    }
}
