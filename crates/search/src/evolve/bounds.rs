//! What keeps an engine's state bounded in a search that never stops (a
//! daemon job): the fitness cache and the promotion failures it carries
//! from generation to generation. Both rules are functions of the state
//! alone, so a resumed search still continues exactly as if never stopped.
//!
//! Cache entries are chosen for eviction at the end of one generation and
//! dropped at the end of the next: the backend is told at once
//! (`Backend::forget_known`), and the batch already compiling ahead, whose
//! workers may still answer those PTX as known, finds them in the cache.

use super::{CacheKey, Engine};
use std::collections::{BTreeMap, BTreeSet};

/// Fitness cache entries (and as many generated-test verdicts) an engine
/// keeps at most. Over it, the entries no
/// member of the population, archive or promotion pool uses are dropped, in
/// key (PTX hash) order, down to three quarters of it (the cache's a
/// generation later): a variant seen again after that is evaluated again.
pub const CACHE_LIMIT: usize = 16_384;
/// Promotion failures an engine keeps (the newest); the store keeps as many.
pub const KEPT_PROMOTION_FAILURES: usize = 1000;

impl Engine {
    /// Applies the bounds; called once per generation.
    /// Returns the PTX hashes of the cache entries newly chosen for
    /// eviction, for the backend to forget.
    pub(super) fn bound_state(&mut self) -> Vec<String> {
        if self.promotion_failures.len() > KEPT_PROMOTION_FAILURES {
            let excess = self.promotion_failures.len() - KEPT_PROMOTION_FAILURES;
            self.promotion_failures.drain(..excess);
        }
        let over = self.cache.len() > CACHE_LIMIT || self.generality.len() > CACHE_LIMIT;
        if !over && self.evicting.is_empty() {
            return Vec::new();
        }
        let used: BTreeSet<String> = self
            .population
            .iter()
            .chain(&self.archive)
            .chain(&self.pool)
            .filter_map(|m| m.ptx_hash.clone())
            .collect();
        for key in std::mem::take(&mut self.evicting) {
            if !used.contains(&key.ptx_hash) {
                self.cache.remove(&key);
            }
        }
        self.evicting = unused_excess(&self.cache, &used);
        for key in unused_excess(&self.generality, &used) {
            self.generality.remove(&key);
        }
        self.evicting.iter().map(|k| k.ptx_hash.clone()).collect()
    }
}

/// Over `CACHE_LIMIT` entries, the keys of PTX hashes not in `used`, in key
/// order, whose removal leaves three quarters of it.
fn unused_excess<V>(map: &BTreeMap<CacheKey, V>, used: &BTreeSet<String>) -> Vec<CacheKey> {
    if map.len() <= CACHE_LIMIT {
        return Vec::new();
    }
    let excess = map.len().saturating_sub(CACHE_LIMIT * 3 / 4);
    map.keys()
        .filter(|k| !used.contains(&k.ptx_hash))
        .take(excess)
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evolve::{CacheKey, Config, Member, Outcome, PromotionFailure, Scope};
    use gevo_ir::Patch;

    fn key(i: usize) -> CacheKey {
        CacheKey {
            ptx_hash: format!("{i:08}"),
            scope: Scope {
                backend: "sim".into(),
                target: String::new(),
            },
            test_set_hash: "t".into(),
        }
    }

    fn patch() -> Patch {
        serde_json::from_str(r#"{"format":1,"ir_hash":"h","kernel":"k","edits":[]}"#).unwrap()
    }

    #[test]
    fn the_cache_and_the_failures_stay_bounded_and_keep_what_members_use() {
        let mut engine = Engine::new(Config::default(), 1).unwrap();
        let valid = Outcome::Valid {
            cost: 1.0,
            error: 0.0,
        };
        for i in 0..CACHE_LIMIT + 10 {
            engine.cache.insert(key(i), valid.clone());
            engine.generality.insert(key(i), None);
        }
        // The smallest key, which eviction would take first, is in use.
        engine.population.push(Member {
            patch: patch(),
            ptx_hash: Some(key(0).ptx_hash),
            outcome: valid.clone(),
        });
        let failure: PromotionFailure = serde_json::from_str(
            r#"{"generation":1,"patch":{"format":1,"ir_hash":"h","kernel":"k","edits":[]},
            "ptx_hash":"p","train_cost":0.9,"reason":"heldout[0]: mismatch"}"#,
        )
        .unwrap();
        for g in 0..KEPT_PROMOTION_FAILURES as u64 + 5 {
            engine.promotion_failures.push(PromotionFailure {
                generation: g,
                ..failure.clone()
            });
        }
        let before = engine.clone();
        let forgotten = engine.bound_state();
        // Chosen now and named for the backend; dropped a generation later.
        assert_eq!(forgotten.len(), CACHE_LIMIT / 4 + 10);
        assert_eq!(forgotten[0], key(1).ptx_hash);
        assert_eq!(engine.cache.len(), CACHE_LIMIT + 10);
        assert_eq!(engine.generality.len(), CACHE_LIMIT * 3 / 4);
        assert!(engine.generality.contains_key(&key(0)));
        let chosen = engine.clone();
        // One of them is a member again by then: it stays.
        engine.population.push(Member {
            patch: patch(),
            ptx_hash: Some(key(1).ptx_hash),
            outcome: valid.clone(),
        });
        assert!(engine.bound_state().is_empty(), "nothing more to choose");
        assert_eq!(engine.cache.len(), CACHE_LIMIT * 3 / 4 + 1);
        assert!(engine.cache.contains_key(&key(0)), "a member's entry stays");
        assert!(engine.cache.contains_key(&key(1)));
        assert!(!engine.cache.contains_key(&key(2)));
        assert!(engine.evicting.is_empty());
        assert!(engine.generality.contains_key(&key(0)));
        assert_eq!(engine.promotion_failures.len(), KEPT_PROMOTION_FAILURES);
        assert_eq!(
            engine.promotion_failures[0].generation, 5,
            "the newest stay"
        );
        // Deterministic: the same state is bounded the same way.
        let mut again = before;
        again.bound_state();
        assert_eq!(again, chosen);
    }
}
