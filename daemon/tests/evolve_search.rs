//! The search's additions to GEVO's loop, through the library on the
//! in-process simulator: distinct-PTX selection, restarts after stagnation,
//! islands with migration, and exact resume with all of them on.

use crate::common;

use common::search::{assert_resume_is_exact, backend, run};
use gevod::evolve::{Config, Engine};
use gevod::ir::KernelIr;
use gevod::spec::{self, TestSet, TestTarget};
use gevod::worker::InProcess;
use std::collections::BTreeSet;

fn distinct(engine: &Engine) -> usize {
    engine
        .population()
        .iter()
        .filter_map(|m| m.ptx_hash.as_deref())
        .collect::<BTreeSet<_>>()
        .len()
}

#[test]
fn resume_with_islands_and_restarts_is_exact() {
    let config = Config {
        population: 24,
        islands: 3,
        migration_interval: 2,
        migrants: 1,
        stagnation_generations: 1,
        ..Config::default()
    };
    let (straight, reports) = assert_resume_is_exact("stencil", config, 11);

    // Not vacuous: islands reported and migrating, population whole.
    assert_eq!(straight.population().len(), 24);
    assert!(reports.iter().all(|r| r.islands.len() == 3), "{reports:#?}");
    assert!(reports[2].migrated > 0 && reports[4].migrated > 0);
    assert_eq!(reports[3].migrated, 0);
}

#[test]
fn a_checkpoint_without_the_new_fields_still_loads() {
    let (ir, mut b) = backend("vecadd");
    let mut engine = Engine::new(
        Config {
            population: 8,
            ..Config::default()
        },
        3,
    )
    .unwrap();
    run(&mut engine, &ir, &mut b, 2);
    let mut value = serde_json::to_value(&engine).unwrap();
    let object = value.as_object_mut().unwrap();
    for key in ["best_seen", "stagnant", "pool", "restarts"] {
        assert!(object.remove(key).is_some(), "{key}");
    }
    let config = object["config"].as_object_mut().unwrap();
    for key in [
        "distinct_ptx",
        "islands",
        "promotion_pool",
        "stagnation_generations",
    ] {
        assert!(config.remove(key).is_some(), "{key}");
    }
    let mut old: Engine = serde_json::from_value(value).unwrap();
    run(&mut old, &ir, &mut b, 1);
    assert_eq!(old.generations(), 3);
}

#[test]
fn distinct_selection_reports_distinct_ptx_and_wastes_fewer_evaluations() {
    let (ir, mut b) = backend("stencil");
    let hits = |distinct_ptx: bool, b: &mut InProcess| {
        let config = Config {
            population: 32,
            distinct_ptx,
            ..Config::default()
        };
        let mut engine = Engine::new(config, 7).unwrap();
        for _ in 0..5 {
            let report = engine.step(&ir, b).unwrap();
            assert_eq!(report.distinct_ptx, distinct(&engine));
        }
        let c = engine.counters();
        (c.cache_hit_rate(), distinct(&engine))
    };
    let (hits_on, distinct_on) = hits(true, &mut b);
    let (hits_off, distinct_off) = hits(false, &mut b);
    assert!(
        hits_on < hits_off && distinct_on > distinct_off,
        "on: {hits_on} hits, {distinct_on} distinct; off: {hits_off}, {distinct_off}"
    );
}

#[test]
fn a_stagnant_search_restarts_part_of_its_population() {
    // vecadd has nothing to gain on the simulator: the best cost stalls.
    let (ir, mut b) = backend("vecadd");
    let config = Config {
        population: 16,
        stagnation_generations: 2,
        restart_fraction: 0.5,
        ..Config::default()
    };
    let mut engine = Engine::new(config, 4).unwrap();
    let reports = run(&mut engine, &ir, &mut b, 8);
    let restarted: Vec<u64> = reports
        .iter()
        .filter(|r| r.restarted > 0)
        .map(|r| r.generation)
        .collect();
    assert!(!restarted.is_empty(), "{reports:#?}");
    assert_eq!(engine.restarts(), restarted);
    for w in reports.windows(2) {
        if w[1].restarted > 0 {
            // Half of the 16 places (the 4 elites stay), after 2
            // stagnant generations; the count starts again.
            assert_eq!(w[1].restarted, 8);
            assert!(w[0].stagnant >= 2, "{:?}", w[0]);
            assert!(w[1].stagnant <= 1, "{:?}", w[1]);
        }
    }
}

/// The fixtures' GPU-sized tests (`[tests.gpu]`, for the GPU suite's timed
/// searches and `scripts/search-bench.sh --gpu`) load and are far larger
/// than the simulator's, which stay as they were.
#[test]
fn the_fixtures_gpu_sized_tests_load() {
    for name in ["stencil", "nw", "reduce", "loops"] {
        let path = common::spec_fixture(name);
        let spec = spec::load(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        KernelIr::load(&spec.ir, Some(&spec.kernel)).unwrap();
        let bytes = |target: TestTarget, set: TestSet| -> usize {
            let spec = spec.for_backend(target);
            spec.tests(set)
                .iter()
                .map(|t| spec.buffer_bytes(t).unwrap())
                .max()
                .unwrap()
        };
        for set in [TestSet::Train, TestSet::Heldout] {
            let (sim, gpu) = (bytes(TestTarget::Sim, set), bytes(TestTarget::Gpu, set));
            assert!(
                sim < 1 << 22,
                "{name}: simulator tests stay small: {sim} bytes"
            );
            assert!(
                gpu > 30 * sim,
                "{name}: {gpu} bytes on the GPU, {sim} on the simulator"
            );
        }
    }
}
