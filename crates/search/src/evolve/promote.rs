//! Promotion: a new train-best variant is re-run on the held-out tests it
//! never saw; only if it passes them all, is faster there on the whole, and
//! is slower with confidence on none of them, is it minimized and kept as
//! validated.

mod minimize;

use super::gating::gate_failure;
use super::{Backend, Engine, EvolveError, GateStart, Member, PromotionFailure, Validated};
use gevo_ir::{KernelIr, Patch};
use gevo_model::assessment::Assessment;
use gevo_model::spec::TestSet;
use gevo_model::stats::Interval;
use minimize::Minimized;
use std::collections::BTreeSet;

/// A promotion's results: the variants validated at once, and those that
/// failed.
pub(super) type Promoted = (Vec<Validated>, Vec<PromotionFailure>);

/// A valid variant below the promotion bar, never promoted before.
struct Candidate {
    patch: Patch,
    ptx_hash: String,
    train_cost: f64,
    /// Passed the generated tests in selection already.
    general: bool,
}

/// One generation's promotions, apart from the engine: its candidates and
/// bar are taken when it is made ([`Engine::promotion`]), and its results
/// go back in [`Engine::finish_promotion`]. In between it needs only a
/// backend, so it can run beside the batches that follow
/// ([`Backend::start_promotion`]).
pub struct Promotion {
    generation: u64,
    candidates: Vec<Candidate>,
    bar: f64,
    minimize_threshold: f64,
    max_test_regression: f64,
    /// PTX hashes tried on the held-out tests.
    tried: Vec<String>,
    /// Wall seconds `run` took.
    pub(super) seconds: f64,
    validated: Vec<Validated>,
    /// Passed all but the safety gate, which checks them beside the search.
    gating: Vec<Validated>,
    failures: Vec<PromotionFailure>,
}

impl Engine {
    /// The train cost a candidate must beat to be promoted: the best
    /// validated variant's, the original's 1.0 at first.
    /// Variants the safety gate is still checking count: the bar drops
    /// back if the gate rejects them.
    pub(super) fn promotion_bar(&self) -> f64 {
        self.validated
            .iter()
            .chain(&self.gating)
            .map(|v| v.train_cost)
            .fold(1.0, f64::min)
    }

    /// Promotes the candidates of `generation`, the population's now, and
    /// takes the results in.
    pub(super) fn promote(
        &mut self,
        ir: &KernelIr,
        backend: &mut dyn Backend,
        generation: u64,
    ) -> Result<(Vec<Validated>, Vec<PromotionFailure>), EvolveError> {
        let mut promotion = self.promotion(generation);
        promotion.run(ir, backend)?;
        Ok(self.finish_promotion(promotion))
    }

    /// The promotion of the population as it is now (found in
    /// `generation`): up to `promotions_per_generation` valid members of
    /// the population, the promotion pool or the Pareto archive that beat
    /// the promotion bar, cheapest first, each PTX at most once per search.
    pub(super) fn promotion(&self, generation: u64) -> Promotion {
        let bar = self.promotion_bar();
        // The population, then the promotion pool and the Pareto archive:
        // when the train-best fails, the next distinct candidates are
        // there even after they left the population.
        let archive: &[Member] = if self.config.promotion_pool > 0 {
            &self.archive
        } else {
            &[]
        };
        let members: Vec<&Member> = self
            .population
            .iter()
            .chain(&self.pool)
            .chain(archive)
            .collect();
        let mut ranked: Vec<(f64, f64, usize, usize)> = members
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
        let candidates = ranked
            .into_iter()
            .filter_map(|(cost, _, _, i)| {
                let m = members[i];
                let hash = m.ptx_hash.clone()?;
                (cost < bar
                    && !self.promoted.contains(&hash)
                    && this_generation.insert(hash.clone()))
                .then(|| Candidate {
                    patch: m.patch.clone(),
                    general: self.known_general(&hash),
                    ptx_hash: hash,
                    train_cost: cost,
                })
            })
            .take(self.config.promotions_per_generation)
            .collect();
        Promotion {
            generation,
            candidates,
            bar,
            minimize_threshold: self.config.minimize_threshold,
            max_test_regression: self.config.max_test_regression,
            tried: Vec::new(),
            seconds: 0.0,
            validated: Vec::new(),
            gating: Vec::new(),
            failures: Vec::new(),
        }
    }

    /// Takes a promotion's results in; returns those validated at once and
    /// those that failed.
    pub(super) fn finish_promotion(
        &mut self,
        promotion: Promotion,
    ) -> (Vec<Validated>, Vec<PromotionFailure>) {
        self.promoted.extend(promotion.tried);
        self.gating.extend(promotion.gating);
        self.validated.extend(promotion.validated.iter().cloned());
        self.promotion_failures
            .extend(promotion.failures.iter().cloned());
        (promotion.validated, promotion.failures)
    }
}

impl Promotion {
    /// Whether there is anything to promote.
    pub(super) fn is_empty(&self) -> bool {
        self.candidates.is_empty()
    }

    /// Re-runs each candidate on the held-out tests (and the generated
    /// ones, where the backend has them); one that passes, is faster with
    /// confidence and regresses on no test is minimized and goes to the
    /// safety gate. A candidate no cheaper than one validated before it
    /// here is skipped.
    pub fn run(&mut self, ir: &KernelIr, backend: &mut dyn Backend) -> Result<(), EvolveError> {
        let started = std::time::Instant::now();
        let promoted = self.promote_each(ir, backend);
        self.seconds = started.elapsed().as_secs_f64();
        promoted
    }

    /// Promotes each candidate still below the bar in turn, raising the bar
    /// to each one validated.
    fn promote_each(
        &mut self,
        ir: &KernelIr,
        backend: &mut dyn Backend,
    ) -> Result<(), EvolveError> {
        for candidate in std::mem::take(&mut self.candidates) {
            if candidate.train_cost >= self.bar {
                continue; // an earlier candidate of this generation set a better bar
            }
            self.tried.push(candidate.ptx_hash.clone());
            match self.promote_one(ir, backend, &candidate)? {
                Ok((v, gate)) => {
                    self.bar = candidate.train_cost;
                    if gate == GateStart::Started {
                        self.gating.push(v);
                    } else {
                        self.validated.push(v);
                    }
                }
                Err(failure) => self.failures.push(failure),
            }
        }
        Ok(())
    }

    /// One candidate through the held-out checks, the compile of its
    /// minimized patch and the start of the safety gate: the validated
    /// variant with how its gate started, or why it failed.
    fn promote_one(
        &self,
        ir: &KernelIr,
        backend: &mut dyn Backend,
        c: &Candidate,
    ) -> Result<Result<(Validated, GateStart), PromotionFailure>, EvolveError> {
        let (minimized, heldout, interval) = match self.heldout_checks(ir, backend, c)? {
            Ok(checked) => checked,
            Err(failure) => return Ok(Err(failure)),
        };
        let build = match backend.compile(std::slice::from_ref(&minimized))?.remove(0) {
            Ok(b) => b,
            Err(reason) => {
                return Ok(Err(self.failure(
                    c,
                    format!("the minimized patch does not compile: {reason}"),
                )))
            }
        };
        let gate = backend.start_safety_check(&build)?;
        if let GateStart::Verdict(Some(reason)) = gate {
            return Ok(Err(gate_failure(self.failure(c, reason))));
        }
        let speedup = interval.reciprocal();
        let v = Validated {
            generation: self.generation,
            scope: backend.scope(),
            patch: c.patch.clone(),
            minimized,
            ptx: build.ptx,
            ptx_hash: build.ptx_hash,
            train_cost: c.train_cost,
            speedup: speedup.estimate,
            interval: (speedup.lo, speedup.hi),
            heldout: heldout.tests,
        };
        Ok(Ok((v, gate)))
    }

    /// Runs a candidate on the held-out (and generated) tests, minimizes
    /// it where it is faster with confidence as found, and checks the
    /// minimized patch is faster with confidence and regresses on no test:
    /// the minimized patch, its held-out assessment and cost-ratio
    /// interval, or why it failed.
    fn heldout_checks(
        &self,
        ir: &KernelIr,
        backend: &mut dyn Backend,
        c: &Candidate,
    ) -> Result<Result<(Patch, Assessment, Interval), PromotionFailure>, EvolveError> {
        let patch = &c.patch;
        let started = std::time::Instant::now();
        let heldout = assess_one(backend, patch, TestSet::Heldout)?;
        tracing::debug!(
            seconds = started.elapsed().as_secs_f64(),
            edits = patch.edits.len(),
            "promotion: held-out run"
        );
        if let Some(reason) = heldout.first_failure() {
            return Ok(Err(self.failure(c, reason)));
        }
        // Not faster as found: minimizing, which keeps the cost within the
        // threshold, would measure every edit to fail the same way.
        if let Err(reason) = faster_with_confidence(&heldout) {
            return Ok(Err(self.failure(c, reason)));
        }
        if !c.general {
            if let Some(reason) = generated_failure(backend, patch)? {
                return Ok(Err(self.failure_generated(c, reason)));
            }
        }
        let started = std::time::Instant::now();
        let Minimized {
            patch: minimized,
            same_program,
            measured,
        } = self.minimize(ir, backend, patch)?;
        tracing::debug!(
            seconds = started.elapsed().as_secs_f64(),
            edits = patch.edits.len(),
            kept = minimized.edits.len(),
            measured,
            "promotion: minimized"
        );
        if minimized != *patch {
            if let Some(reason) = generated_failure(backend, &minimized)? {
                let reason = format!("the minimized patch: {reason}");
                return Ok(Err(self.failure_generated(c, reason)));
            }
        }
        // The same program runs the same on the held-out tests: measured
        // again, it would only add noise and GPU time.
        let heldout = if same_program {
            heldout
        } else {
            assess_one(backend, &minimized, TestSet::Heldout)?
        };
        let interval = match faster_with_confidence(&heldout) {
            Ok(interval) => interval,
            Err(reason) => return Ok(Err(self.failure(c, reason))),
        };
        // Faster on the whole is not enough: a user whose input looks
        // like one held-out test must not get a slower program.
        if let Some(reason) = heldout.first_regression(self.max_test_regression) {
            return Ok(Err(self.failure(c, reason)));
        }
        Ok(Ok((minimized, heldout, interval)))
    }

    /// A held-out failure of candidate `c` in this promotion's generation.
    fn failure(&self, c: &Candidate, reason: String) -> PromotionFailure {
        PromotionFailure {
            generation: self.generation,
            patch: c.patch.clone(),
            ptx_hash: c.ptx_hash.clone(),
            train_cost: c.train_cost,
            reason,
            kind: "heldout".into(),
        }
    }

    /// A failure of candidate `c` on the generated tests.
    fn failure_generated(&self, c: &Candidate, reason: String) -> PromotionFailure {
        PromotionFailure {
            kind: "generated".into(),
            ..self.failure(c, reason)
        }
    }
}

/// The cost ratio's interval on the held-out tests where all of it lies
/// below 1.0: a speedup is claimed only then (on the simulator, whose
/// costs are exact, the interval is the point); else why not.
fn faster_with_confidence(heldout: &Assessment) -> Result<Interval, String> {
    match heldout.cost_interval() {
        Some(i) if i.below(1.0) => Ok(i),
        Some(i) => Err(format!(
            "not faster with confidence on the held-out tests (cost ratio {:.4}, 95% interval {:.4}..{:.4})",
            i.estimate, i.lo, i.hi
        )),
        None => Err("no cost measured on the held-out tests".into()),
    }
}

/// Why `patch` fails the generated held-out tests (`TestSet::Generated`,
/// made from the spec's parameters where the original runs cleanly), on a
/// backend that runs them; `None` when it passes or the backend has none.
fn generated_failure(
    backend: &mut dyn Backend,
    patch: &Patch,
) -> Result<Option<String>, EvolveError> {
    if !backend.runs_generated() {
        return Ok(None);
    }
    let a = assess_one(backend, patch, TestSet::Generated)?;
    Ok(a.first_failure().map(|r| format!("generated test {r}")))
}

fn assess_one(
    backend: &mut dyn Backend,
    patch: &Patch,
    set: TestSet,
) -> Result<Assessment, EvolveError> {
    let mut results = backend.assess(std::slice::from_ref(patch), set)?;
    Ok(results.remove(0))
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::evolve::{Build, Config, Outcome, Scope};
    use gevo_model::assessment::TestSummary;
    use rand::SeedableRng;
    use std::collections::BTreeMap;

    /// Answers from a table: each patch's train cost and whether it passes
    /// the held-out tests (a patch not in the table fails everything, so
    /// minimization keeps every edit).
    /// The second field: patches that fail the generated tests (the
    /// backend runs them when it is `Some`).
    pub(crate) struct Table(pub BTreeMap<String, (f64, bool)>, pub Option<Vec<String>>);

    pub(crate) fn key(p: &Patch) -> String {
        serde_json::to_string(&p.edits).unwrap()
    }

    impl Backend for Table {
        fn scope(&self) -> Scope {
            Scope {
                backend: "table".into(),
                target: "-".into(),
            }
        }
        fn test_set_hash(&self, _: TestSet) -> String {
            "t".into()
        }
        fn runs_generated(&self) -> bool {
            self.1.is_some()
        }
        fn compile(
            &mut self,
            patches: &[Patch],
        ) -> Result<Vec<Result<Build, String>>, super::super::BackendError> {
            Ok(patches
                .iter()
                .map(|p| {
                    Ok(Build {
                        ptx_hash: key(p),
                        ptx: key(p),
                    })
                })
                .collect())
        }
        fn assess(
            &mut self,
            patches: &[Patch],
            set: TestSet,
        ) -> Result<Vec<Assessment>, super::super::BackendError> {
            Ok(patches
                .iter()
                .map(|p| {
                    let (cost, mut passes) = self.0.get(&key(p)).copied().unwrap_or((1.0, false));
                    if set == TestSet::Generated {
                        passes = !self.1.as_ref().unwrap().contains(&key(p));
                    }
                    let test = TestSummary {
                        test: "t".into(),
                        failure: (!passes).then(|| ("mismatch".into(), "differs".into())),
                        cost: Some((cost * 1000.0) as u64),
                        original_cost: 1000,
                        error: Some(0.0),
                        timing: None,
                        kernels: Vec::new(),
                    };
                    Assessment {
                        tests: vec![test],
                        device: None,
                    }
                })
                .collect())
        }
    }

    /// vecadd's IR and its first two random one-edit variants (seed 1).
    pub(crate) fn two_variants() -> (KernelIr, Patch, Patch) {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let spec =
            gevo_model::spec::load(&root.join("tests/fixtures/kernels/vecadd.gevo.toml")).unwrap();
        let ir = KernelIr::load(&spec.ir, Some(&spec.kernel)).unwrap();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let first = ir.mutate(&mut rng, 1).unwrap();
        let second = ir.mutate(&mut rng, 1).unwrap();
        assert_ne!(first, second);
        (ir, first, second)
    }

    pub(crate) fn member(patch: &Patch, cost: f64) -> Member {
        Member {
            patch: patch.clone(),
            ptx_hash: Some(key(patch)),
            outcome: Outcome::Valid { cost, error: 0.0 },
        }
    }

    /// The race threshold: per island the elite's cutoff, or the promotion
    /// bar where the island has fewer valid members than elites; the most
    /// lenient island's; the bar before the initial population.
    #[test]
    fn the_race_threshold_is_the_elite_cutoff_or_the_promotion_bar() {
        let config = Config {
            population: 8,
            islands: 2,
            elite_fraction: 0.25, // one elite per island of 4
            ..Config::default()
        };
        let mut engine = Engine::new(config, 1).unwrap();
        assert_eq!(engine.race_threshold(), 1.0);
        let p = Patch {
            format: 1,
            ir_hash: "00".into(),
            kernel: "k".into(),
            kernels: Vec::new(),
            edits: Vec::new(),
        };
        let rejected = Member {
            outcome: Outcome::Rejected {
                reason: "differs".into(),
                kind: "mismatch".into(),
            },
            ..member(&p, 1.0)
        };
        let valid = |cost| member(&p, cost);
        engine.population = vec![
            valid(0.95),
            valid(0.9),
            rejected.clone(),
            valid(1.02),
            valid(0.8),
            rejected.clone(),
            rejected.clone(),
            valid(0.97),
        ];
        assert_eq!(engine.race_threshold(), 0.9, "the looser island cutoff");
        for m in &mut engine.population[4..] {
            *m = rejected.clone();
        }
        assert_eq!(
            engine.race_threshold(),
            1.0,
            "an island without valid members"
        );
    }

    /// The train-best (0.8) fails the held-out tests; the runner-up (0.9)
    /// passes them but has left the population by the next generation.
    /// With a promotion pool it is still validated; without one it is lost.
    #[test]
    fn the_runner_up_is_validated_after_the_train_best_fails() {
        let (ir, best, runner_up) = two_variants();
        let mut backend = Table(
            BTreeMap::from([(key(&best), (0.8, false)), (key(&runner_up), (0.9, true))]),
            None,
        );
        for (pool, validated) in [(4, true), (0, false)] {
            let config = Config {
                population: 4,
                promotions_per_generation: 1,
                promotion_pool: pool,
                ..Config::default()
            };
            let mut engine = Engine::new(config, 1).unwrap();
            engine.population = vec![member(&best, 0.8), member(&runner_up, 0.9)];
            engine.update_pool();
            let (v, f) = engine.promote(&ir, &mut backend, 0).unwrap();
            assert!(v.is_empty() && f.len() == 1 && f[0].train_cost == 0.8);
            engine.population = vec![member(&best, 0.8)];
            engine.update_pool();
            let (v, _) = engine.promote(&ir, &mut backend, 1).unwrap();
            assert_eq!(v.len() == 1, validated, "pool {pool}: {v:?}");
            if validated {
                assert_eq!(v[0].patch, runner_up);
                assert!((v[0].speedup - 1.0 / 0.9).abs() < 1e-3);
            }
        }
    }

    /// A variant that passes the user's held-out tests and fails a
    /// generated one is rejected with kind `generated`, and the reason
    /// names the test; on a backend without generated tests it validates.
    #[test]
    fn a_generated_test_failure_rejects_a_variant_the_heldout_tests_pass() {
        let (ir, variant, _) = two_variants();
        for (generated, validated) in [(Some(vec![key(&variant)]), false), (None, true)] {
            let mut backend = Table(BTreeMap::from([(key(&variant), (0.8, true))]), generated);
            let config = Config {
                population: 4,
                promotions_per_generation: 1,
                ..Config::default()
            };
            let mut engine = Engine::new(config, 1).unwrap();
            engine.population = vec![member(&variant, 0.8)];
            let (v, f) = engine.promote(&ir, &mut backend, 0).unwrap();
            assert_eq!(v.len() == 1, validated, "{v:?} {f:?}");
            if !validated {
                assert_eq!(f.len(), 1);
                assert_eq!(f[0].kind, "generated");
                assert_eq!(f[0].reason, "generated test t: differs");
            }
        }
    }
}
