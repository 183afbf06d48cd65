//! What keeps an engine's state bounded in a search that never stops (a
//! daemon job): the fitness cache and the promotion failures it carries
//! from generation to generation. Both rules are functions of the state
//! alone, so a resumed search still continues exactly as if never stopped.

use super::{CacheKey, Engine};
use std::collections::{BTreeMap, BTreeSet};

/// Fitness cache entries (and as many generated-test verdicts) an engine
/// keeps at most. Over it, the entries no
/// member of the population, archive or promotion pool uses are dropped, in
/// key (PTX hash) order, down to three quarters of it: a variant seen again
/// after that is evaluated again.
pub const CACHE_LIMIT: usize = 16_384;
/// Promotion failures an engine keeps (the newest); the store keeps as many.
pub const KEPT_PROMOTION_FAILURES: usize = 1000;

impl Engine {
    /// Applies the bounds; called once per generation.
    pub(super) fn bound_state(&mut self) {
        if self.promotion_failures.len() > KEPT_PROMOTION_FAILURES {
            let excess = self.promotion_failures.len() - KEPT_PROMOTION_FAILURES;
            self.promotion_failures.drain(..excess);
        }
        if self.cache.len() <= CACHE_LIMIT && self.generality.len() <= CACHE_LIMIT {
            return;
        }
        let used: BTreeSet<String> = self
            .population
            .iter()
            .chain(&self.archive)
            .chain(&self.pool)
            .filter_map(|m| m.ptx_hash.clone())
            .collect();
        evict_unused(&mut self.cache, &used);
        evict_unused(&mut self.generality, &used);
    }
}

/// Over `CACHE_LIMIT` entries, drops those of PTX hashes not in `used`, in
/// key order, down to three quarters of it.
fn evict_unused<V>(map: &mut BTreeMap<CacheKey, V>, used: &BTreeSet<String>) {
    if map.len() <= CACHE_LIMIT {
        return;
    }
    let target = CACHE_LIMIT * 3 / 4;
    let excess = map.len().saturating_sub(target);
    let gone: Vec<CacheKey> = map
        .keys()
        .filter(|k| !used.contains(&k.ptx_hash))
        .take(excess)
        .cloned()
        .collect();
    for key in gone {
        map.remove(&key);
    }
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
        engine.bound_state();
        assert_eq!(engine.cache.len(), CACHE_LIMIT * 3 / 4);
        assert!(engine.cache.contains_key(&key(0)), "a member's entry stays");
        assert!(!engine.cache.contains_key(&key(1)));
        assert_eq!(engine.generality.len(), CACHE_LIMIT * 3 / 4);
        assert!(engine.generality.contains_key(&key(0)));
        assert_eq!(engine.promotion_failures.len(), KEPT_PROMOTION_FAILURES);
        assert_eq!(
            engine.promotion_failures[0].generation, 5,
            "the newest stay"
        );
        // Deterministic: the same state is bounded the same way.
        let mut again = before;
        again.bound_state();
        assert_eq!(again, engine);
    }
}
