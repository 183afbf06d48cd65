//! The PTX hashes a search knows, as its compile workers and their pool
//! keep them (`Compile::known`): the most recent [`KNOWN_LIMIT`], so a
//! daemon job searching for days holds a bounded set in each of its
//! workers. A hash forgotten costs what it cost before it was known: the
//! variant's pre-screen, guarded build and ptxas (its cache hits are mostly
//! recent elites' PTX again).

use std::collections::{HashSet, VecDeque};

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
}

/// The pool's log of known hashes, each worker's position in it, and the
/// log trimmed to [`KNOWN_LIMIT`] once it holds twice that (a position
/// before the trim then starts at the log's start: a worker behind by more
/// than the limit has forgotten the rest anyway). A hash the log holds is
/// not logged again: the search notes its cache hits too (after a resume
/// its workers know none of them), most of them many times.
#[derive(Debug, Default)]
pub struct KnownLog {
    hashes: Vec<String>,
    logged: HashSet<String>,
    /// Hashes trimmed off the front since the start.
    trimmed: usize,
}

impl KnownLog {
    pub fn note(&mut self, hashes: impl IntoIterator<Item = String>) {
        for hash in hashes {
            if self.logged.insert(hash.clone()) {
                self.hashes.push(hash);
            }
        }
        if self.hashes.len() >= 2 * KNOWN_LIMIT {
            let drop = self.hashes.len() - KNOWN_LIMIT;
            for old in self.hashes.drain(..drop) {
                self.logged.remove(&old);
            }
            self.trimmed += drop;
        }
    }

    /// The hashes after position `*sent` (counted from the log's start
    /// ever), and `*sent` moved to the end.
    pub fn since(&self, sent: &mut usize) -> &[String] {
        let from = sent.saturating_sub(self.trimmed).min(self.hashes.len());
        *sent = self.trimmed + self.hashes.len();
        &self.hashes[from..]
    }
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
        let mut log = KnownLog::default();
        let (mut a, mut b) = (0, 0);
        log.note(hashes(0..5));
        assert_eq!(log.since(&mut a), hashes(0..5).as_slice());
        log.note(hashes(5..7));
        assert_eq!(log.since(&mut a), hashes(5..7).as_slice());
        assert!(log.since(&mut a).is_empty());
        // Hashes the log holds are not logged, nor sent, again.
        log.note(hashes(3..7));
        assert!(log.since(&mut a).is_empty());
        assert_eq!(log.since(&mut b), hashes(0..7).as_slice());
        // Past twice the limit the oldest go; a worker behind gets the rest.
        log.note(hashes(7..2 * KNOWN_LIMIT));
        assert_eq!(log.hashes.len(), KNOWN_LIMIT);
        assert_eq!(
            log.since(&mut a),
            hashes(KNOWN_LIMIT..2 * KNOWN_LIMIT).as_slice()
        );
        let mut fresh = 0;
        assert_eq!(log.since(&mut fresh).len(), KNOWN_LIMIT);
        log.note(hashes(2 * KNOWN_LIMIT..2 * KNOWN_LIMIT + 1));
        assert_eq!(
            log.since(&mut a),
            hashes(2 * KNOWN_LIMIT..2 * KNOWN_LIMIT + 1).as_slice()
        );
        assert_eq!(a, 2 * KNOWN_LIMIT + 1);
    }
}
