//! Promotion: a new train-best variant is re-run on the held-out tests it
//! never saw; only if it passes them all, is faster there on the whole, and
//! is slower with confidence on none of them, is it minimized and kept as
//! validated.

use super::{Backend, Engine, EvolveError, PromotionFailure, Validated};
use crate::eval::Assessment;
use crate::ir::{KernelIr, Patch};
use crate::spec::TestSet;
use std::collections::BTreeSet;

impl Engine {
    /// Tries up to `promotions_per_generation` valid members of the
    /// population that beat the best validated train cost (the original's
    /// 1.0 at first), cheapest first, each PTX at most once per search.
    pub(super) fn promote(
        &mut self,
        ir: &KernelIr,
        backend: &mut dyn Backend,
        generation: u64,
    ) -> Result<(Vec<Validated>, Vec<PromotionFailure>), EvolveError> {
        let mut bar = self
            .validated
            .iter()
            .map(|v| v.train_cost)
            .fold(1.0, f64::min);
        let mut ranked: Vec<(f64, f64, usize, usize)> = self
            .population
            .iter()
            .enumerate()
            .filter_map(|(i, m)| {
                m.outcome
                    .objectives()
                    .map(|(c, e)| (c, e, m.patch.edits.len(), i))
            })
            .collect();
        ranked.sort_by(|a, b| {
            a.0.total_cmp(&b.0)
                .then(a.1.total_cmp(&b.1))
                .then(a.2.cmp(&b.2))
                .then(a.3.cmp(&b.3))
        });
        let mut this_generation = BTreeSet::new();
        let candidates: Vec<(Patch, String, f64)> = ranked
            .into_iter()
            .filter_map(|(cost, _, _, i)| {
                let m = &self.population[i];
                let hash = m.ptx_hash.clone()?;
                (cost < bar
                    && !self.promoted.contains(&hash)
                    && this_generation.insert(hash.clone()))
                .then(|| (m.patch.clone(), hash, cost))
            })
            .take(self.config.promotions_per_generation)
            .collect();

        let (mut validated, mut failures) = (Vec::new(), Vec::new());
        for (patch, ptx_hash, train_cost) in candidates {
            if train_cost >= bar {
                continue; // an earlier candidate of this generation set a better bar
            }
            self.promoted.insert(ptx_hash.clone());
            let heldout = assess_one(backend, &patch, TestSet::Heldout)?;
            let failure = |reason: String| PromotionFailure {
                generation,
                patch: patch.clone(),
                ptx_hash: ptx_hash.clone(),
                train_cost,
                reason,
                kind: "heldout".into(),
            };
            if let Some(reason) = heldout.first_failure() {
                failures.push(failure(reason));
                continue;
            }
            let minimized = self.minimize(ir, backend, &patch)?;
            let heldout = if minimized == patch {
                heldout
            } else {
                assess_one(backend, &minimized, TestSet::Heldout)?
            };
            // A speedup is claimed only when the whole confidence interval
            // of the cost ratio lies below 1.0 (on the simulator, whose
            // costs are exact, the interval is the point).
            let interval = heldout.cost_interval();
            let Some(interval) = interval.filter(|i| i.below(1.0)) else {
                failures.push(failure(match interval {
                    Some(i) => format!(
                        "not faster with confidence on the held-out tests (cost ratio {:.4}, 95% interval {:.4}..{:.4})",
                        i.estimate, i.lo, i.hi
                    ),
                    None => "no cost measured on the held-out tests".into(),
                }));
                continue;
            };
            // Faster on the whole is not enough: a user whose input looks
            // like one held-out test must not get a slower program.
            if let Some(reason) = heldout.first_regression(self.config.max_test_regression) {
                failures.push(failure(reason));
                continue;
            }
            let build = match backend.compile(std::slice::from_ref(&minimized))?.remove(0) {
                Ok(b) => b,
                Err(reason) => {
                    failures.push(failure(format!(
                        "the minimized patch does not compile: {reason}"
                    )));
                    continue;
                }
            };
            if let Some(reason) = backend.safety_check(&build)? {
                failures.push(PromotionFailure {
                    kind: "sanitizer".into(),
                    ..failure(format!("GPU safety gate: {reason}"))
                });
                continue;
            }
            let speedup = interval.reciprocal();
            bar = train_cost;
            let v = Validated {
                generation,
                scope: backend.scope(),
                patch: patch.clone(),
                minimized,
                ptx: build.ptx,
                ptx_hash: build.ptx_hash,
                train_cost,
                speedup: speedup.estimate,
                interval: (speedup.lo, speedup.hi),
                heldout: heldout.tests,
            };
            self.validated.push(v.clone());
            validated.push(v);
        }
        self.promotion_failures.extend(failures.iter().cloned());
        Ok((validated, failures))
    }

    /// Drops, last edit first, each edit whose removal keeps the variant
    /// valid on every test and moves its cost by less than the threshold
    /// (relative to the patch as found, so small changes cannot add up).
    fn minimize(
        &mut self,
        ir: &KernelIr,
        backend: &mut dyn Backend,
        patch: &Patch,
    ) -> Result<Patch, EvolveError> {
        let full = assess_one(backend, patch, TestSet::All)?;
        let Some(full_cost) = full.cost_ratio() else {
            return Ok(patch.clone());
        };
        let mut current = patch.clone();
        for i in (0..current.edits.len()).rev() {
            let mut candidate = current.clone();
            candidate.edits.remove(i);
            if ir.check(&candidate).is_err() {
                continue; // a later edit needs this one
            }
            let a = assess_one(backend, &candidate, TestSet::All)?;
            // Still faster than the original, and within the threshold: an
            // improvement smaller than the threshold is never minimized away.
            let keeps_cost = a.cost_ratio().is_some_and(|c| {
                c < 1.0 && (c - full_cost).abs() < self.config.minimize_threshold * full_cost
            });
            if a.passed() && keeps_cost {
                current = candidate;
            }
        }
        Ok(current)
    }
}

fn assess_one(
    backend: &mut dyn Backend,
    patch: &Patch,
    set: TestSet,
) -> Result<Assessment, EvolveError> {
    let mut results = backend.assess(std::slice::from_ref(patch), set)?;
    Ok(results.remove(0))
}
