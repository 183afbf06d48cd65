//! The search engine through the library, on the in-process simulator
//! backend: exact resume, determinism, the fitness cache, promotion and
//! minimization, and the invariant that only race-free, held-out-passing
//! variants are validated.

use crate::common;

use common::search::{assert_resume_is_exact, backend, run};
use gevo_ir::Patch;
use gevo_model::spec::{self, TestSet};
use gevo_search::eval::{Assessment, Evaluator};
use gevo_search::evolve::{Backend, BackendError, Build, Config, Engine, Scope};
use gevod::worker::InProcess;
use std::collections::BTreeSet;

/// GEVO's own search (none of gevod's additions), whose evaluation counts
/// the assertions below know; tests/evolve_search.rs covers the additions.
fn small(population: usize) -> Config {
    Config {
        population,
        ..Config::plain_gevo()
    }
}

#[test]
fn resume_from_a_serialized_checkpoint_is_exact() {
    let (straight, _) = assert_resume_is_exact("stencil", small(24), 11);
    // And the comparison is not vacuous: the search did something.
    // 24 initial, then 18 children per generation (a quarter are elites).
    assert_eq!(straight.counters().evaluations, 24 + 5 * 18);
    assert!(straight.counters().valid > 0);
}

#[test]
fn the_same_seed_gives_the_same_search_and_another_seed_another() {
    let (ir, mut b) = backend("vecadd");
    let mut one = Engine::new(small(16), 5).unwrap();
    let mut two = Engine::new(small(16), 5).unwrap();
    let mut other = Engine::new(small(16), 6).unwrap();
    run(&mut one, &ir, &mut b, 3);
    run(&mut two, &ir, &mut b, 3);
    run(&mut other, &ir, &mut b, 3);
    assert_eq!(one, two);
    assert_ne!(one.population(), other.population());
}

/// Counts what reaches the real backend.
struct Counting<'a> {
    inner: &'a mut InProcess,
    compiled: usize,
    assessed: Vec<Patch>,
}

impl Backend for Counting<'_> {
    fn scope(&self) -> Scope {
        self.inner.scope()
    }
    fn test_set_hash(&self, set: TestSet) -> String {
        self.inner.test_set_hash(set)
    }
    fn compile(&mut self, patches: &[Patch]) -> Result<Vec<Result<Build, String>>, BackendError> {
        self.compiled += patches.len();
        self.inner.compile(patches)
    }
    fn assess(&mut self, patches: &[Patch], set: TestSet) -> Result<Vec<Assessment>, BackendError> {
        if set == TestSet::Train {
            self.assessed.extend(patches.iter().cloned());
        }
        self.inner.assess(patches, set)
    }
}

#[test]
fn each_distinct_ptx_is_assessed_once_and_the_rest_are_cache_hits() {
    let (ir, mut inner) = backend("vecadd");
    let mut b = Counting {
        inner: &mut inner,
        compiled: 0,
        assessed: Vec::new(),
    };
    // Copies kept (distinct_ptx off) so that the cache has work to do.
    let config = Config {
        distinct_ptx: false,
        ..small(32)
    };
    let mut engine = Engine::new(config, 3).unwrap();
    run(&mut engine, &ir, &mut b, 4);
    let c = engine.counters().clone();
    assert_eq!(c.evaluations as usize, b.compiled);
    // Every compiled variant was either assessed or answered by the cache.
    assert_eq!(
        c.evaluations,
        b.assessed.len() as u64 + c.cache_hits + c.compile_failures
    );
    // Assessed variants all have different PTX.
    let hashes: BTreeSet<String> = b
        .assessed
        .iter()
        .map(|p| b.inner.compile_one(p).unwrap().ptx_hash)
        .collect();
    assert_eq!(hashes.len(), b.assessed.len());
    // vecadd has few distinct variants: the cache must be doing real work.
    assert!(c.cache_hit_rate() > 0.3, "{c:?}");
}

#[test]
fn validated_variants_pass_every_test_race_free_and_are_minimized() {
    let (ir, mut b) = backend("stencil");
    let mut engine = Engine::new(small(48), 2).unwrap();
    let mut generations = 0;
    while engine.validated().is_empty() && generations < 25 {
        engine.step(&ir, &mut b).unwrap();
        generations += 1;
    }
    let best = engine
        .best_validated()
        .expect("stencil's redundant barrier is found within 25 generations of 48");
    assert!(best.speedup > 1.0 && best.interval.0 > 1.0, "{best:?}");
    assert!(best.minimized.edits.len() <= best.patch.edits.len());
    assert!(!best.minimized.edits.is_empty());
    assert_eq!(best.heldout.len(), 2);
    // Re-check independently, with two simulator threads: every test passes
    // (so no race, out-of-bounds or mismatch) and the cost is lower.
    let evaluator =
        Evaluator::new(spec::load(&common::spec_fixture("stencil")).unwrap(), 2).unwrap();
    for v in engine.validated() {
        let results = evaluator.evaluate(&v.minimized, TestSet::All).unwrap();
        for r in &results {
            assert!(
                r.passed(),
                "validated variant fails {}: {:?}",
                r.test,
                r.failure
            );
            assert!(r.cost.unwrap() < r.original_cost, "{}", r.test);
        }
        // Dropping any one more edit would either break the variant or
        // change its cost by at least the threshold.
        let full = Assessment::new(&results).cost_ratio().unwrap();
        for i in 0..v.minimized.edits.len() {
            let mut fewer = v.minimized.clone();
            fewer.edits.remove(i);
            if ir.check(&fewer).is_err() {
                continue;
            }
            let a = Assessment::new(&evaluator.evaluate(&fewer, TestSet::All).unwrap());
            let still_minimal = !a.passed()
                || a.cost_ratio()
                    .is_none_or(|c| c >= 1.0 || (c - full).abs() >= 0.01 * full);
            assert!(still_minimal, "edit {i} of {:?} could go", v.minimized);
        }
    }
    // The PTX handed out is the minimized patch's.
    assert_eq!(b.compile_one(&best.minimized).unwrap().ptx, best.ptx);
}

#[test]
fn a_bad_configuration_is_refused_naming_the_key() {
    for (config, key) in [
        (
            Config {
                population: 2,
                ..Config::default()
            },
            "population",
        ),
        (
            Config {
                crossover_rate: 1.5,
                ..Config::default()
            },
            "crossover_rate",
        ),
        (
            Config {
                tournament_size: 0,
                ..Config::default()
            },
            "tournament_size",
        ),
    ] {
        let err = Engine::new(config, 1).expect_err("refused").to_string();
        assert!(err.contains(key), "{err}");
    }
}

/// The fitness cache keys on PTX hashes, so a patch's PTX must not depend on
/// what the process compiled before (LLVM numbers call sites process-wide).
#[test]
fn ptx_does_not_depend_on_compile_order() {
    use rand::SeedableRng;
    let options = common::codegen_options();
    for name in common::KERNEL_FIXTURES {
        let ir = common::load(name);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(2);
        let patches: Vec<_> = (0..20).map(|_| ir.mutate(&mut rng, 3).unwrap()).collect();
        let hash = |p: &Patch| {
            ir.compile(p, &options)
                .map(|c| c.ptx_hash)
                .unwrap_or_default()
        };
        let forward: Vec<String> = patches.iter().map(hash).collect();
        let mut backward: Vec<String> = patches.iter().rev().map(hash).collect();
        backward.reverse();
        assert_eq!(forward, backward, "{name}");
    }
}
