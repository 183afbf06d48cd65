//! Promotion beside the search, the engine's side: on a backend that
//! promotes beside its evaluations (the GPU's), a promotion runs in a
//! thread of its own across the batches that follow it, and the engine
//! takes its results in with the step during which it ended
//! (docs/evolve.md, "Promotion beside the search").

use super::promote::Promoted;
use super::{
    Backend, BackendError, EndedPromotion, Engine, EvolveError, PromotionFailure, Validated,
};
use gevo_ir::KernelIr;
use gevo_model::utilization::EngineSpent;

impl Engine {
    /// The end of a search on a backend that promotes beside its
    /// evaluations: the promotion still running served until it ends and
    /// taken in, then the last generation's candidates, which a later
    /// promotion would have taken, promoted now. Nothing to do elsewhere
    /// (each generation promoted its own).
    pub fn promote_last(
        &mut self,
        ir: &KernelIr,
        backend: &mut dyn Backend,
    ) -> Result<(Vec<Validated>, Vec<PromotionFailure>), EvolveError> {
        if !backend.promotes_beside() || self.population.is_empty() {
            return Ok((Vec::new(), Vec::new()));
        }
        let (mut validated, mut failures) = self
            .take_ended_promotion(backend, true)?
            .map(|(promoted, _)| promoted)
            .unwrap_or_default();
        let (passed, failed) = self.promote(ir, backend, self.generations.saturating_sub(1))?;
        validated.extend(passed);
        failures.extend(failed);
        Ok((validated, failures))
    }

    /// The promotion the backend ran beside the search, once it has ended
    /// (with `wait`, served until it does), taken in: those validated at
    /// once, those that failed, and its wall seconds. A promotion that a
    /// stop interrupted, handed back when no stop is in force (a daemon
    /// that kept its backend across a pause), is dropped: its candidates
    /// were not recorded as tried, so a later promotion takes them again.
    pub(super) fn take_ended_promotion(
        &mut self,
        backend: &mut dyn Backend,
        wait: bool,
    ) -> Result<Option<(Promoted, f64)>, EvolveError> {
        let Some(EndedPromotion { promotion, outcome }) = backend.ended_promotion(wait)? else {
            return Ok(None);
        };
        match outcome {
            Err(EvolveError::Backend(BackendError::Interrupted)) if !backend.stopping() => {
                return Ok(None)
            }
            outcome => outcome?,
        }
        let seconds = promotion.seconds;
        Ok(Some((self.finish_promotion(promotion), seconds)))
    }

    /// A promotion that ended beside the search, added to this step's
    /// report (`take_ended_promotion`).
    pub(super) fn take_ended_beside(
        &mut self,
        backend: &mut dyn Backend,
        validated: &mut Vec<Validated>,
        failures: &mut Vec<PromotionFailure>,
        spent: &mut EngineSpent,
    ) -> Result<(), EvolveError> {
        if let Some(((passed, failed), seconds)) = self.take_ended_promotion(backend, false)? {
            validated.extend(passed);
            failures.extend(failed);
            spent.promote_beside_s += seconds;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::promote::tests::{key, member, two_variants, Table};
    use super::*;
    use crate::evolve::{Build, Config, Promotion, Scope};
    use gevo_ir::Patch;
    use gevo_model::assessment::Assessment;
    use gevo_model::spec::TestSet;
    use std::collections::BTreeMap;

    /// `Table`, promoting beside its evaluations: a promotion runs to its
    /// end when it is started (when it ends is the backend's business, not
    /// the engine's). Logs each assessment's test set.
    struct Beside(Table, Vec<TestSet>, Option<EndedPromotion>);

    impl Backend for Beside {
        fn scope(&self) -> Scope {
            self.0.scope()
        }
        fn test_set_hash(&self, set: TestSet) -> String {
            self.0.test_set_hash(set)
        }
        fn compile(
            &mut self,
            patches: &[Patch],
        ) -> Result<Vec<Result<Build, String>>, BackendError> {
            self.0.compile(patches)
        }
        fn assess(
            &mut self,
            patches: &[Patch],
            set: TestSet,
        ) -> Result<Vec<Assessment>, BackendError> {
            self.1.extend(patches.iter().map(|_| set));
            self.0.assess(patches, set)
        }
        fn promotes_beside(&self) -> bool {
            true
        }
        fn start_promotion(
            &mut self,
            mut promotion: Promotion,
            ir: KernelIr,
        ) -> Result<(), BackendError> {
            let outcome = promotion.run(&ir, self);
            self.2 = Some(EndedPromotion { promotion, outcome });
            Ok(())
        }
        fn promotion_started(&self) -> bool {
            self.2.is_some()
        }
        fn ended_promotion(&mut self, _wait: bool) -> Result<Option<EndedPromotion>, BackendError> {
            Ok(self.2.take())
        }
    }

    /// Where the backend promotes beside its evaluations, a generation's
    /// candidate is promoted during the next generation's step (and named
    /// as found in the one before); at the end of a search
    /// `promote_last` promotes the last generation's, once. Elsewhere
    /// `promote_last` has nothing to do: each step promoted its own.
    #[test]
    fn beside_the_search_the_next_step_promotes_what_a_generation_found() {
        let (ir, variant, _) = two_variants();
        let table = || Table(BTreeMap::from([(key(&variant), (0.8, true))]), None);
        let config = Config {
            population: 4,
            islands: 1,
            promotions_per_generation: 1,
            ..Config::default()
        };
        let found_in_generation_2 = || {
            let mut engine = Engine::new(config.clone(), 1).unwrap();
            engine.population = vec![member(&variant, 0.8); 4];
            engine.generations = 3;
            engine
        };

        let mut engine = found_in_generation_2();
        let mut backend = Beside(table(), Vec::new(), None);
        let report = engine.step(&ir, &mut backend).unwrap();
        assert_eq!(report.generation, 3);
        let found: Vec<u64> = report.validated.iter().map(|v| v.generation).collect();
        assert_eq!(found, vec![2], "{report:?}");
        let train = backend.1.iter().position(|s| *s == TestSet::Train);
        let heldout = backend.1.iter().position(|s| *s == TestSet::Heldout);
        assert!(train.is_some() && heldout.is_some(), "{:?}", backend.1);
        let (v, f) = engine.promote_last(&ir, &mut backend).unwrap();
        assert!(v.is_empty() && f.is_empty(), "promoted twice: {v:?} {f:?}");

        let mut engine = found_in_generation_2();
        let (v, _) = engine.promote_last(&ir, &mut backend).unwrap();
        assert_eq!(v.iter().map(|v| v.generation).collect::<Vec<_>>(), vec![2]);
        assert_eq!(engine.validated().len(), 1);

        let mut engine = found_in_generation_2();
        let (v, f) = engine.promote_last(&ir, &mut table()).unwrap();
        assert!(v.is_empty() && f.is_empty() && engine.validated().is_empty());
    }
}
