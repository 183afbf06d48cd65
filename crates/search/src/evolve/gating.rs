//! The safety gate beside the search: a variant that passed its held-out
//! tests waits in `Engine::gating` while the backend's gate checks it (the
//! GPU's compute-sanitizer, in a thread of its own), and the search goes on.
//! Verdicts are collected before each generation's promotions and waited
//! for at the end of a search. A backend that decides at once (the
//! simulator, which has no gate) never leaves a variant here, so its
//! searches stay deterministic.

use super::{Backend, Build, Engine, EvolveError, GateStart, PromotionFailure, Validated};

impl Engine {
    /// The end of a search: waits for the safety gate's verdict on the best
    /// variant it is checking (the lowest train cost), then on the next best
    /// if that one is rejected, and so on. Once one passes, the others are
    /// worse and left unchecked (dropped from `gating`, neither validated nor
    /// failed), so a search ends at most about one check after its time.
    /// Returns those validated and rejected.
    pub fn settle(
        &mut self,
        backend: &mut dyn Backend,
    ) -> Result<(Vec<Validated>, Vec<PromotionFailure>), EvolveError> {
        let (mut validated, mut failures) = (Vec::new(), Vec::new());
        while let Some(best) = self
            .gating
            .iter()
            .min_by(|a, b| a.train_cost.total_cmp(&b.train_cost))
            .map(|v| v.ptx_hash.clone())
        {
            backend.focus_safety_check(&best);
            let (passed, rejected) = self.collect_gates(backend, Some(&best))?;
            if passed.is_empty() && rejected.is_empty() {
                break; // no verdict to wait for: the checkpoint keeps them
            }
            let done = passed.iter().any(|v| v.ptx_hash == best);
            validated.extend(passed);
            failures.extend(rejected);
            if done {
                self.gating.clear();
            }
        }
        Ok((validated, failures))
    }

    /// Variants that passed everything but the safety gate, still checked.
    pub fn gating(&self) -> &[Validated] {
        &self.gating
    }

    /// Collects the safety gate's verdicts on `gating` variants: those it
    /// passed are validated, those it rejected are promotion failures. Each
    /// is (re)started first: a backend ignores a check it is running, and a
    /// new backend (a resumed search, replaced workers) starts it again.
    /// With `waiting_for`, only that variant is (re)started, and the call
    /// waits for at least one verdict.
    pub(super) fn collect_gates(
        &mut self,
        backend: &mut dyn Backend,
        waiting_for: Option<&str>,
    ) -> Result<(Vec<Validated>, Vec<PromotionFailure>), EvolveError> {
        let (mut validated, mut failures) = (Vec::new(), Vec::new());
        let mut verdicts = Vec::new();
        let mut started = false;
        let wanted = |v: &&Validated| waiting_for.is_none_or(|h| h == v.ptx_hash);
        for v in self.gating.iter().filter(wanted) {
            let build = Build {
                ptx_hash: v.ptx_hash.clone(),
                ptx: v.ptx.clone(),
            };
            match backend.start_safety_check(&build)? {
                GateStart::Started => started = true,
                GateStart::Verdict(reason) => verdicts.push((v.ptx_hash.clone(), reason)),
            }
        }
        if started {
            verdicts.extend(backend.safety_verdicts(waiting_for.is_some())?);
        }
        for (ptx_hash, reason) in verdicts {
            let Some(i) = self.gating.iter().position(|v| v.ptx_hash == ptx_hash) else {
                continue; // a check of a step that was abandoned
            };
            let v = self.gating.remove(i);
            match reason {
                None => {
                    self.validated.push(v.clone());
                    validated.push(v);
                }
                Some(reason) => failures.push(gate_failure(PromotionFailure {
                    generation: v.generation,
                    patch: v.patch,
                    ptx_hash: v.ptx_hash,
                    train_cost: v.train_cost,
                    reason,
                    kind: String::new(),
                })),
            }
        }
        self.promotion_failures.extend(failures.iter().cloned());
        Ok((validated, failures))
    }
}

/// `failure` as the safety gate's rejection.
pub(super) fn gate_failure(failure: PromotionFailure) -> PromotionFailure {
    PromotionFailure {
        kind: "sanitizer".into(),
        reason: format!("GPU safety gate: {}", failure.reason),
        ..failure
    }
}

#[cfg(test)]
mod tests {
    use super::super::promote::tests::{key, member, two_variants, Table};
    use super::*;
    use crate::evolve::{BackendError, Config, Scope};
    use gevo_ir::Patch;
    use gevo_model::assessment::Assessment;
    use gevo_model::spec::TestSet;
    use std::collections::{BTreeMap, BTreeSet};

    /// [`Table`] with a gate that answers only when released (or waited
    /// for), rejecting the PTX hashes in `reject`.
    struct Deferred {
        table: Table,
        reject: BTreeSet<String>,
        running: BTreeSet<String>,
        /// Every start asked for, in order (a running check included).
        starts: Vec<String>,
        released: bool,
    }

    impl Backend for Deferred {
        fn scope(&self) -> Scope {
            self.table.scope()
        }
        fn test_set_hash(&self, set: TestSet) -> String {
            self.table.test_set_hash(set)
        }
        fn compile(
            &mut self,
            patches: &[Patch],
        ) -> Result<Vec<Result<Build, String>>, BackendError> {
            self.table.compile(patches)
        }
        fn assess(
            &mut self,
            patches: &[Patch],
            set: TestSet,
        ) -> Result<Vec<Assessment>, BackendError> {
            self.table.assess(patches, set)
        }
        fn start_safety_check(&mut self, build: &Build) -> Result<GateStart, BackendError> {
            self.starts.push(build.ptx_hash.clone());
            self.running.insert(build.ptx_hash.clone());
            Ok(GateStart::Started)
        }
        fn focus_safety_check(&mut self, ptx_hash: &str) {
            self.running.retain(|h| h == ptx_hash);
        }
        fn safety_verdicts(
            &mut self,
            wait: bool,
        ) -> Result<Vec<(String, Option<String>)>, BackendError> {
            if !(wait || self.released) {
                return Ok(Vec::new());
            }
            let reject = &self.reject;
            Ok(std::mem::take(&mut self.running)
                .into_iter()
                .map(|h| {
                    let reason = reject
                        .contains(&h)
                        .then(|| "memcheck: invalid read".to_string());
                    (h, reason)
                })
                .collect())
        }
    }

    fn deferred(best: &Patch, runner_up: &Patch, reject: &[&Patch]) -> Deferred {
        Deferred {
            table: Table(
                BTreeMap::from([(key(best), (0.8, true)), (key(runner_up), (0.9, true))]),
                None,
            ),
            reject: reject.iter().map(|p| key(p)).collect(),
            running: BTreeSet::new(),
            starts: Vec::new(),
            released: false,
        }
    }

    fn engine(members: Vec<crate::evolve::Member>) -> Engine {
        let config = Config {
            population: 4,
            promotions_per_generation: 1,
            ..Config::default()
        };
        let mut engine = Engine::new(config, 1).unwrap();
        engine.population = members;
        engine
    }

    /// A variant the gate is still checking is not validated, but it sets
    /// the bar (the runner-up is not promoted meanwhile); the verdict, come
    /// later, validates it.
    #[test]
    fn a_variant_is_validated_when_the_gate_passes_it_not_before() {
        let (ir, best, runner_up) = two_variants();
        let mut backend = deferred(&best, &runner_up, &[]);
        let mut engine = engine(vec![member(&best, 0.8), member(&runner_up, 0.9)]);
        let (v, f) = engine.promote(&ir, &mut backend, 0).unwrap();
        assert!(v.is_empty() && f.is_empty(), "{v:?} {f:?}");
        assert_eq!(engine.gating().len(), 1);
        assert_eq!(engine.promotion_bar(), 0.8);
        assert_eq!(engine.collect_gates(&mut backend, None).unwrap().0.len(), 0);
        let (v, f) = engine.promote(&ir, &mut backend, 1).unwrap();
        assert!(
            v.is_empty() && f.is_empty(),
            "the runner-up is above the bar"
        );
        backend.released = true;
        let (v, f) = engine.collect_gates(&mut backend, None).unwrap();
        assert!(f.is_empty());
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].patch, best);
        assert_eq!(v[0].generation, 0);
        assert_eq!(engine.best_validated().map(|b| &b.patch), Some(&best));
        assert!(engine.gating().is_empty());
    }

    /// The gate rejects the train-best: a `sanitizer` failure with the
    /// gate's reason, the bar drops back, and the runner-up is promoted.
    #[test]
    fn a_gate_rejection_drops_the_bar_back_for_the_next_candidate() {
        let (ir, best, runner_up) = two_variants();
        let mut backend = deferred(&best, &runner_up, &[&best]);
        backend.released = true;
        let mut engine = engine(vec![member(&best, 0.8), member(&runner_up, 0.9)]);
        engine.promote(&ir, &mut backend, 0).unwrap();
        let (v, f) = engine.collect_gates(&mut backend, None).unwrap();
        assert!(v.is_empty());
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].kind, "sanitizer");
        assert_eq!(f[0].reason, "GPU safety gate: memcheck: invalid read");
        assert_eq!(f[0].train_cost, 0.8);
        assert_eq!(engine.promotion_bar(), 1.0);
        engine.promote(&ir, &mut backend, 1).unwrap();
        let (v, _) = engine.settle(&mut backend).unwrap();
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].patch, runner_up);
        assert_eq!(engine.promotion_failures().len(), 1);
    }

    /// Two variants at the gate when the search ends (the runner-up promoted
    /// first, then the best): only the best is waited for, and the
    /// runner-up is dropped unchecked; when the best is rejected, the
    /// runner-up is checked again and validated.
    #[test]
    fn the_end_of_a_search_waits_for_the_best_variant_only() {
        let (ir, best, runner_up) = two_variants();
        for (reject, expected) in [(vec![], &best), (vec![&best], &runner_up)] {
            let mut backend = deferred(&best, &runner_up, &reject);
            let mut engine = engine(vec![member(&runner_up, 0.9)]);
            engine.promote(&ir, &mut backend, 0).unwrap();
            engine.population = vec![member(&best, 0.8)];
            engine.promote(&ir, &mut backend, 1).unwrap();
            assert_eq!(engine.gating().len(), 2);
            let (v, f) = engine.settle(&mut backend).unwrap();
            assert_eq!(v.len(), 1, "{v:?}");
            assert_eq!(&v[0].patch, expected);
            assert_eq!(f.len(), reject.len());
            assert!(engine.gating().is_empty());
            assert_eq!(engine.validated().len(), 1);
            let runner_up_checks = backend
                .starts
                .iter()
                .filter(|h| **h == key(&runner_up))
                .count();
            assert_eq!(
                runner_up_checks,
                1 + reject.len(),
                "checked again only after the rejection"
            );
        }
    }

    /// A checkpoint keeps the variants being checked; a resumed search's
    /// new backend checks them again, and `settle` waits for the verdict.
    #[test]
    fn a_resumed_search_checks_its_gating_variants_again() {
        let (ir, best, runner_up) = two_variants();
        let mut backend = deferred(&best, &runner_up, &[]);
        let mut engine = engine(vec![member(&best, 0.8)]);
        engine.promote(&ir, &mut backend, 0).unwrap();
        let saved: Engine = serde_json::from_str(&serde_json::to_string(&engine).unwrap()).unwrap();
        assert_eq!(saved.gating().len(), 1);
        let mut resumed = saved;
        let mut fresh = deferred(&best, &runner_up, &[]);
        let (v, _) = resumed.settle(&mut fresh).unwrap();
        assert_eq!(fresh.starts, vec![key(&best)]);
        assert_eq!(v.len(), 1);
        assert!(resumed.gating().is_empty());
        assert!(
            resumed.settle(&mut fresh).unwrap().0.is_empty(),
            "nothing left to settle"
        );
    }
}
