//! Generality in selection (docs/evolve.md, "Generality in selection"): a
//! variant that fails a generated held-out test is rejected for selection
//! as a train failure is, not only refused at promotion. Otherwise, once an
//! edit that holds only at whole blocks is free on the user's train tests,
//! the whole population carries it and every later promotion fails.
//!
//! Only the valid variants that may matter to selection are checked: those
//! at or under the train cost that enters an island's elite (the race
//! threshold), and those the Pareto front would take. Each PTX is checked
//! once per job: the verdict is kept by PTX hash beside the fitness cache,
//! and bounded with it.

use super::{Backend, CacheKey, Engine, EvolveError, Member, Outcome, Scope};
use gevo_model::spec::TestSet;
use std::collections::BTreeSet;

impl Engine {
    /// Runs the generated tests on the members of a new batch that may
    /// matter to selection (those at or under `threshold`, or not dominated
    /// by the archive nor by another valid member of the batch), where the
    /// backend runs them and `generality_in_selection` is on; a member that
    /// fails one becomes `Rejected` (kind `generated`). Repeats while a
    /// rejection lets another member onto the batch's front.
    pub(super) fn select_on_generality(
        &mut self,
        members: &mut [Member],
        threshold: f64,
        backend: &mut dyn Backend,
    ) -> Result<(), EvolveError> {
        if !self.config.generality_in_selection || !backend.runs_generated() {
            return Ok(());
        }
        let scope = backend.scope();
        let test_set_hash = backend.test_set_hash(TestSet::Generated);
        let key = |ptx_hash: &str| CacheKey {
            ptx_hash: ptx_hash.to_string(),
            scope: scope.clone(),
            test_set_hash: test_set_hash.clone(),
        };
        loop {
            self.apply_verdicts(members, &key);
            let todo = self.unchecked(members, threshold, &key);
            if todo.is_empty() {
                return Ok(());
            }
            let patches: Vec<_> = todo.iter().map(|&i| members[i].patch.clone()).collect();
            let results = backend.assess(&patches, TestSet::Generated)?;
            self.counters.generality_checks += todo.len() as u64;
            for (&i, a) in todo.iter().zip(&results) {
                let hash = members[i]
                    .ptx_hash
                    .as_deref()
                    .expect("checked members compiled");
                let verdict = a.first_failure().map(|r| format!("generated test {r}"));
                tracing::debug!(ptx = hash, failure = ?verdict, "generality checked");
                self.generality.insert(key(hash), verdict);
            }
        }
    }

    /// Rejects every valid member whose PTX failed a generated test.
    fn apply_verdicts(&self, members: &mut [Member], key: &dyn Fn(&str) -> CacheKey) {
        for m in members.iter_mut() {
            let (Some(hash), Some(_)) = (&m.ptx_hash, m.outcome.cost()) else {
                continue;
            };
            if let Some(Some(reason)) = self.generality.get(&key(hash)) {
                m.outcome = Outcome::Rejected {
                    reason: reason.clone(),
                    kind: "generated".into(),
                };
            }
        }
    }

    /// Indices of valid members that matter to selection and whose PTX has
    /// no verdict yet, one per PTX.
    fn unchecked(
        &self,
        members: &[Member],
        threshold: f64,
        key: &dyn Fn(&str) -> CacheKey,
    ) -> Vec<usize> {
        let front: Vec<(f64, f64)> = self
            .archive
            .iter()
            .chain(members.iter())
            .filter_map(|m| m.outcome.objectives())
            .collect();
        let mut seen = BTreeSet::new();
        members
            .iter()
            .enumerate()
            .filter_map(|(i, m)| {
                let hash = m.ptx_hash.as_deref()?;
                let (cost, error) = m.outcome.objectives()?;
                let matters = cost <= threshold || !dominated((cost, error), &front);
                (matters && !self.generality.contains_key(&key(hash)) && seen.insert(hash))
                    .then_some(i)
            })
            .collect()
    }

    /// Whether the generated tests are known to pass `ptx_hash`'s variant
    /// (checked in selection): promotion need not run them again.
    pub(super) fn known_general(&self, ptx_hash: &str) -> bool {
        // The keys order by PTX hash first: the range from the least key
        // of this hash holds all of its verdicts.
        let least = CacheKey {
            ptx_hash: ptx_hash.to_string(),
            scope: Scope {
                backend: String::new(),
                target: String::new(),
            },
            test_set_hash: String::new(),
        };
        self.generality
            .range(least..)
            .take_while(|(k, _)| k.ptx_hash == ptx_hash)
            .any(|(_, verdict)| verdict.is_none())
    }
}

/// Whether some point of `points` dominates `p` (no worse in both
/// objectives, better in one).
fn dominated(p: (f64, f64), points: &[(f64, f64)]) -> bool {
    points
        .iter()
        .any(|q| q.0 <= p.0 && q.1 <= p.1 && (q.0 < p.0 || q.1 < p.1))
}

#[cfg(test)]
mod tests {
    use super::super::promote::tests::{key, member, two_variants, Table};
    use super::*;
    use crate::evolve::Config;
    use std::collections::BTreeMap;

    fn engine(generality_in_selection: bool) -> Engine {
        let config = Config {
            population: 4,
            generality_in_selection,
            ..Config::default()
        };
        Engine::new(config, 1).unwrap()
    }

    /// The cheaper variant (0.8) fails a generated test: in selection it is
    /// rejected with kind `generated`, each PTX is checked once, and a
    /// second batch with the same PTX is answered from the verdicts. With
    /// the key off, both stay valid and nothing is checked.
    #[test]
    fn a_variant_failing_a_generated_test_is_rejected_for_selection() {
        let (_, cheap, general) = two_variants();
        let table = BTreeMap::from([(key(&cheap), (0.8, true)), (key(&general), (0.9, true))]);
        let mut backend = Table(table, Some(vec![key(&cheap)]));
        let mut on = engine(true);
        let batch = vec![cheap.clone(), general.clone(), cheap.clone()];
        let members = on.evaluate(batch.clone(), &mut backend).unwrap();
        let kinds: Vec<_> = members.iter().map(|m| kind(&m.outcome)).collect();
        assert_eq!(kinds, ["generated", "valid", "generated"]);
        assert_eq!(on.counters.generality_checks, 2);
        assert_eq!(on.counters.rejections["generated"], 2);
        assert_eq!(on.counters.valid, 1);
        assert!(on.known_general(&key(&general)) && !on.known_general(&key(&cheap)));
        let again = on.evaluate(batch.clone(), &mut backend).unwrap();
        assert_eq!(again, members, "answered from the verdicts");
        assert_eq!(on.counters.generality_checks, 2, "no second check");

        let mut off = engine(false);
        let members = off.evaluate(batch, &mut backend).unwrap();
        assert!(members.iter().all(|m| m.outcome.cost().is_some()));
        assert_eq!(off.counters.generality_checks, 0);
    }

    /// A valid variant above the elite's cost that the archive dominates
    /// cannot enter selection's elite nor the Pareto front: not checked.
    #[test]
    fn only_variants_that_matter_to_selection_are_checked() {
        let (_, elite, slow) = two_variants();
        let table = BTreeMap::from([(key(&elite), (0.5, true)), (key(&slow), (0.95, true))]);
        let mut backend = Table(table, Some(vec![key(&slow)]));
        let mut e = engine(true);
        e.population = vec![member(&elite, 0.5); 4];
        e.archive = vec![member(&elite, 0.5)];
        let members = e.evaluate(vec![slow.clone()], &mut backend).unwrap();
        assert_eq!(kind(&members[0].outcome), "valid", "not checked");
        assert_eq!(e.counters.generality_checks, 0);
    }

    fn kind(o: &Outcome) -> &str {
        match o {
            Outcome::Valid { .. } => "valid",
            Outcome::Rejected { kind, .. } => kind,
        }
    }
}
