//! The search's additions to GEVO's loop, through the library on the
//! in-process simulator: distinct-PTX selection, restarts after stagnation
//! (of the train cost or of the validated best),
//! islands with migration, breeding a step ahead where the backend
//! compiles ahead, and exact resume with all of them on.

use crate::common;

use common::search::{assert_resume_is_exact, backend, run};
use gevo_ir::{KernelIr, Patch};
use gevo_model::spec::{self, TestSet, TestTarget};
use gevo_search::eval::Assessment;
use gevo_search::evolve::{Backend, BackendError, Build, Config, Engine, Evaluated, Scope};
use gevod::worker::InProcess;
use std::collections::BTreeSet;
use std::sync::mpsc::Receiver;

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
    for key in [
        "best_seen",
        "stagnant",
        "pool",
        "restarts",
        "validated_seen",
        "stalled",
    ] {
        assert!(object.remove(key).is_some(), "{key}");
    }
    let config = object["config"].as_object_mut().unwrap();
    for key in [
        "distinct_ptx",
        "islands",
        "promotion_pool",
        "stagnation_generations",
        "validated_stall_generations",
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

/// The validated best, not the train cost, sets the pace of these
/// restarts: a generation after a new validated best counts from 0, and a
/// restart comes only after `validated_stall_generations` without one.
#[test]
fn a_search_whose_validated_best_stalls_restarts_part_of_its_population() {
    // The stencil validates its gains early on the simulator, then stalls.
    let (ir, mut b) = backend("stencil");
    let config = Config {
        population: 16,
        stagnation_generations: 0,
        validated_stall_generations: 3,
        ..Config::default()
    };
    let mut engine = Engine::new(config, 2).unwrap();
    let reports = run(&mut engine, &ir, &mut b, 14);
    let mut best = 0.0_f64;
    let mut rose = 0;
    for w in reports.windows(2) {
        let found = w[0].validated.iter().map(|v| v.speedup).fold(0.0, f64::max);
        if found > best {
            best = found;
            rose += 1;
            assert_eq!(w[1].stalled, 0, "a new validated best in {:?}", w[0]);
        }
        if w[1].restarted > 0 {
            assert!(w[0].stalled >= 3, "restarted after {:?}", w[0]);
            assert!(w[1].stalled <= 1, "{:?}", w[1]);
        }
    }
    assert!(rose > 0, "nothing validated: {reports:#?}");
    let restarted: Vec<u64> = reports
        .iter()
        .filter(|r| r.restarted > 0)
        .map(|r| r.generation)
        .collect();
    assert!(!restarted.is_empty(), "no restart in 14 generations");
    assert_eq!(engine.restarts(), restarted);
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

/// The simulator as a backend that compiles the next batch ahead, as the
/// GPU backend does: records each batch sent ahead (waiting for it while
/// it evaluates the batch before) and each evaluated.
struct CompilingAhead {
    inner: InProcess,
    coming: Option<Receiver<Vec<Patch>>>,
    handed: Vec<Vec<Patch>>,
    evaluated: Vec<Vec<Patch>>,
}

impl CompilingAhead {
    fn new(name: &str) -> (KernelIr, Self) {
        let (ir, inner) = backend(name);
        let (handed, evaluated) = (Vec::new(), Vec::new());
        let coming = None;
        (
            ir,
            CompilingAhead {
                inner,
                coming,
                handed,
                evaluated,
            },
        )
    }
}

impl Backend for CompilingAhead {
    fn scope(&self) -> Scope {
        self.inner.scope()
    }
    fn test_set_hash(&self, set: TestSet) -> String {
        self.inner.test_set_hash(set)
    }
    fn compile(&mut self, patches: &[Patch]) -> Result<Vec<Result<Build, String>>, BackendError> {
        self.inner.compile(patches)
    }
    fn assess(&mut self, patches: &[Patch], set: TestSet) -> Result<Vec<Assessment>, BackendError> {
        self.inner.assess(patches, set)
    }
    fn compiles_ahead(&self) -> bool {
        true
    }
    fn compile_ahead(&mut self, next: Receiver<Vec<Patch>>) {
        self.coming = Some(next);
    }
    fn evaluate(
        &mut self,
        patches: &[Patch],
        set: TestSet,
        known: &(dyn Fn(&str) -> bool + Sync),
    ) -> Result<Vec<Evaluated>, BackendError> {
        self.evaluated.push(patches.to_vec());
        let evaluated = self.inner.evaluate(patches, set, known);
        if let Some(coming) = self.coming.take() {
            self.handed
                .push(coming.recv().expect("the engine sends the next batch"));
        }
        evaluated
    }
}

/// Islands and restarts, as the GPU searches run them.
fn islands_and_restarts() -> Config {
    Config {
        population: 24,
        islands: 3,
        migration_interval: 2,
        migrants: 1,
        stagnation_generations: 2,
        ..Config::default()
    }
}

/// Where the backend compiles ahead, each step measures the batch the step
/// before handed it, and hands the next; the search still works (its
/// islands migrate, it finds valid variants), and a checkpoint carries the
/// batch bred ahead, so a resumed search measures what the backend was
/// told to compile, and goes on exactly as if never stopped.
#[test]
fn a_backend_that_compiles_ahead_measures_the_batch_bred_a_step_before() {
    let (ir, mut b) = CompilingAhead::new("stencil");
    let mut straight = Engine::new(islands_and_restarts(), 11).unwrap();
    let reports = run(&mut straight, &ir, &mut b, 8);
    // The initial population, then 7 bred batches; the first bred now.
    assert_eq!(b.evaluated.len(), 8);
    assert_eq!(b.handed.len(), 7);
    for step in 2..8 {
        assert_eq!(b.evaluated[step], b.handed[step - 2], "step {step}");
    }
    assert_eq!(straight.population().len(), 24);
    assert!(reports.iter().any(|r| r.migrated > 0), "{reports:#?}");
    assert!(straight.counters().valid > 0);

    let (ir2, mut first_half) = CompilingAhead::new("stencil");
    let mut first = Engine::new(islands_and_restarts(), 11).unwrap();
    run(&mut first, &ir2, &mut first_half, 4);
    let checkpoint = serde_json::to_vec(&first).unwrap();
    let (ir3, mut second_half) = CompilingAhead::new("stencil");
    let mut resumed: Engine = serde_json::from_slice(&checkpoint).unwrap();
    run(&mut resumed, &ir3, &mut second_half, 4);
    assert_eq!(second_half.evaluated[0], *first_half.handed.last().unwrap());
    assert_eq!(
        resumed, straight,
        "4 + checkpoint + 4 generations differ from 8"
    );
}

/// The simulator breeds from the newest population and hands nothing
/// ahead: its checkpoints stay as they were.
#[test]
fn a_backend_that_does_not_compile_ahead_is_handed_nothing() {
    let (ir, mut b) = backend("vecadd");
    let mut engine = Engine::new(islands_and_restarts(), 3).unwrap();
    run(&mut engine, &ir, &mut b, 3);
    let value = serde_json::to_value(&engine).unwrap();
    assert!(value.get("ahead").is_none(), "{:?}", value.get("ahead"));
}
