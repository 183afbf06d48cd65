//! The job driver that `gevod evolve` and the daemon's slots share, through
//! the library on the in-process simulator backend: what it commits and
//! publishes, when it stops, and that a job resumed through the store ends
//! as a straight one.

use crate::common;

use common::search::backend;
use gevo_ir::Patch;
use gevo_model::assessment::Assessment;
use gevo_model::spec::TestSet;
use gevo_search::drive::{export_to, Driver, Ended, Limits, Publish, Start};
use gevo_search::evolve::{
    Backend, BackendError, Build, Config, Engine, GateStart, GenerationReport, Scope, Validated,
};
use gevo_search::store::{JobRecord, Store};
use gevod::worker::InProcess;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

fn small(population: usize) -> Config {
    Config {
        population,
        ..Config::plain_gevo()
    }
}

fn record(id: &str) -> JobRecord {
    JobRecord {
        id: id.into(),
        spec_path: "k.gevo.toml".into(),
        spec_hash: "s".into(),
        spec_text: "spec".into(),
        ir_hash: "i".into(),
        ir_text: "ir".into(),
        backend: "sim".into(),
        target: "sm_90".into(),
        seed: 1,
    }
}

fn start(config: Config, seed: u64) -> Start {
    Start {
        config,
        seed,
        patches: Vec::new(),
        fresh: true,
    }
}

/// What the driver told its caller; stops the run at the first best when
/// `stop_at_best` is set.
#[derive(Default)]
struct Seen<'a> {
    generations: Vec<(u64, bool)>,
    bests: Vec<String>,
    stop_at_best: Option<&'a AtomicBool>,
}

impl Publish for Seen<'_> {
    fn committed(&mut self, engine: &Engine, report: &GenerationReport, done: bool) {
        assert_eq!(engine.generations(), report.generation + 1);
        self.generations.push((report.generation, done));
    }
    fn new_best(&mut self, engine: &Engine, best: &Validated) {
        assert_eq!(engine.best_validated(), Some(best));
        self.bests.push(best.ptx_hash.clone());
        if let Some(stop) = self.stop_at_best {
            stop.store(true, Ordering::Relaxed);
        }
    }
}

#[test]
fn each_generation_is_committed_and_each_new_best_published_and_exported() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let (ir, mut b) = backend("stencil");
    let (mut driver, origin) =
        Driver::create(&store, &record("stencil"), ir, start(small(48), 2)).unwrap();
    assert_eq!(origin, None, "fresh: nothing carried over");
    let stop = AtomicBool::new(false);
    let mut seen = Seen {
        stop_at_best: Some(&stop),
        ..Seen::default()
    };
    let limits = Limits {
        generations: Some(25),
        ..Limits::default()
    };
    let ended = driver
        .run(&store, &mut b, &limits, &stop, &mut seen)
        .unwrap();
    assert_eq!(
        ended,
        Ended::Stopped,
        "stencil's redundant barrier is found within 25 generations of 48"
    );
    let generations = driver.engine().generations();
    let expected: Vec<(u64, bool)> = (0..generations).map(|g| (g, false)).collect();
    assert_eq!(seen.generations, expected);
    let best = driver.engine().best_validated().unwrap();
    assert_eq!(seen.bests, vec![best.ptx_hash.clone()]);
    // The store holds what the driver holds.
    assert_eq!(
        store.checkpoint("stencil").unwrap().as_ref(),
        Some(driver.engine())
    );
    assert_eq!(
        store.validated("stencil").unwrap(),
        driver.engine().validated()
    );

    let exported = export_to(&dir.path().join("stencil"), best).unwrap();
    assert_eq!(std::fs::read_to_string(&exported.ptx).unwrap(), best.ptx);
    let minimized = std::fs::read_to_string(&exported.minimized).unwrap();
    assert_eq!(
        gevo_ir::Patch::from_json(&minimized).unwrap(),
        best.minimized
    );
}

#[test]
fn a_job_resumed_through_the_store_ends_as_a_straight_one() {
    let goal = |n| Limits {
        generations: Some(n),
        ..Limits::default()
    };
    let stop = AtomicBool::new(false);
    let straight_dir = tempfile::tempdir().unwrap();
    let straight = Store::open(straight_dir.path()).unwrap();
    let (ir, mut b) = backend("vecadd");
    let (mut one, _) = Driver::create(&straight, &record("v"), ir, start(small(16), 5)).unwrap();
    let ended = one
        .run(&straight, &mut b, &goal(4), &stop, &mut Seen::default())
        .unwrap();
    assert_eq!(ended, Ended::Done);
    assert_eq!(
        one.engine().generations(),
        5,
        "the initial population and 4"
    );

    let resumed_dir = tempfile::tempdir().unwrap();
    let resumed = Store::open(resumed_dir.path()).unwrap();
    let (ir, mut b) = backend("vecadd");
    let (mut two, _) = Driver::create(&resumed, &record("v"), ir, start(small(16), 5)).unwrap();
    two.run(&resumed, &mut b, &goal(1), &stop, &mut Seen::default())
        .unwrap();
    drop(two);
    // Nothing carries over but the store: a new driver, a new backend.
    let (ir, mut b) = backend("vecadd");
    let mut two = Driver::resume(&resumed, "v", ir).unwrap();
    assert_eq!(two.engine().generations(), 2);
    let mut seen = Seen::default();
    let ended = two
        .run(&resumed, &mut b, &goal(4), &stop, &mut seen)
        .unwrap();
    assert_eq!(ended, Ended::Done);
    assert_eq!(seen.generations, vec![(2, false), (3, false), (4, true)]);
    assert_eq!(two.engine(), one.engine());
    assert_eq!(
        resumed.checkpoint("v").unwrap(),
        straight.checkpoint("v").unwrap()
    );
}

#[test]
fn the_goal_the_stop_and_the_deadline_are_asked_before_each_generation() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let (ir, mut b) = backend("vecadd");
    let (mut driver, _) = Driver::create(&store, &record("v"), ir, start(small(8), 1)).unwrap();
    let unlimited = Limits::default();
    let run = |driver: &mut Driver, b: &mut InProcess, limits: &Limits, stop: bool| {
        let mut seen = Seen::default();
        let stop = AtomicBool::new(stop);
        let ended = driver.run(&store, b, limits, &stop, &mut seen).unwrap();
        (ended, seen.generations.len())
    };
    assert_eq!(
        run(&mut driver, &mut b, &unlimited, true),
        (Ended::Stopped, 0)
    );
    let past = Limits {
        deadline: Some(Instant::now() - Duration::from_millis(1)),
        ..Limits::default()
    };
    assert_eq!(run(&mut driver, &mut b, &past, false), (Ended::TimeUp, 0));
    let evaluations = Limits {
        evaluations: Some(1),
        ..Limits::default()
    };
    assert_eq!(
        run(&mut driver, &mut b, &evaluations, false),
        (Ended::Done, 1),
        "the initial population's 8 evaluations meet a goal of 1"
    );
    assert_eq!(
        run(&mut driver, &mut b, &evaluations, false),
        (Ended::Done, 0)
    );
    assert_eq!(store.checkpoint("v").unwrap().unwrap().generations(), 1);
}

#[test]
fn a_resume_without_a_checkpoint_names_the_store_and_the_job() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let (ir, _) = backend("vecadd");
    let err = Driver::resume(&store, "nope", ir)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("job nope has no checkpoint"), "{err}");
    assert!(err.contains(&store.path().display().to_string()), "{err}");
}

/// The simulator with a safety gate that answers only when waited for, as
/// the GPU's answers after the search moved on.
struct GateAtTheEnd {
    inner: InProcess,
    running: Vec<String>,
    waited: u32,
    /// The wait is interrupted (a stop reached the backend's gate).
    interrupt: bool,
}

impl Backend for GateAtTheEnd {
    fn scope(&self) -> Scope {
        self.inner.scope()
    }
    fn test_set_hash(&self, set: TestSet) -> String {
        self.inner.test_set_hash(set)
    }
    fn runs_generated(&self) -> bool {
        self.inner.runs_generated()
    }
    fn compile(&mut self, patches: &[Patch]) -> Result<Vec<Result<Build, String>>, BackendError> {
        self.inner.compile(patches)
    }
    fn assess(&mut self, patches: &[Patch], set: TestSet) -> Result<Vec<Assessment>, BackendError> {
        self.inner.assess(patches, set)
    }
    fn start_safety_check(&mut self, build: &Build) -> Result<GateStart, BackendError> {
        if !self.running.contains(&build.ptx_hash) {
            self.running.push(build.ptx_hash.clone());
        }
        Ok(GateStart::Started)
    }
    fn safety_verdicts(
        &mut self,
        wait: bool,
    ) -> Result<Vec<(String, Option<String>)>, BackendError> {
        if !wait {
            return Ok(Vec::new());
        }
        self.waited += 1;
        if self.interrupt {
            return Err(BackendError::Interrupted);
        }
        Ok(self.running.drain(..).map(|h| (h, None)).collect())
    }
}

/// A stencil job created in a new store and run for 25 generations behind
/// [`GateAtTheEnd`] (its wait interrupted or not): the store (and its
/// directory), the driver, the backend, how the run ended, and the PTX
/// hashes published as new bests.
fn run_to_the_gate(
    interrupt: bool,
) -> (
    tempfile::TempDir,
    Store,
    Driver,
    GateAtTheEnd,
    Ended,
    Vec<String>,
) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let (ir, inner) = backend("stencil");
    let mut b = GateAtTheEnd {
        inner,
        running: Vec::new(),
        waited: 0,
        interrupt,
    };
    let (mut driver, _) =
        Driver::create(&store, &record("stencil"), ir, start(small(48), 2)).unwrap();
    let mut seen = Seen::default();
    let limits = Limits {
        generations: Some(25),
        ..Limits::default()
    };
    let stop = AtomicBool::new(false);
    let ended = driver
        .run(&store, &mut b, &limits, &stop, &mut seen)
        .unwrap();
    (dir, store, driver, b, ended, seen.bests)
}

/// A variant still at the gate when the run ends is waited for, committed
/// to the store (validated row and checkpoint) and published, instead of
/// being left for a resume to check again.
#[test]
fn the_end_of_a_run_waits_for_the_gate_and_commits_its_verdicts() {
    let (_dir, store, driver, b, ended, bests) = run_to_the_gate(false);
    assert_eq!(ended, Ended::Done);
    assert_eq!(b.waited, 1, "one wait, at the end");
    let engine = driver.engine();
    assert!(engine.gating().is_empty());
    let best = engine
        .best_validated()
        .expect("stencil's redundant barrier passes the gate at the end");
    assert_eq!(bests, vec![best.ptx_hash.clone()]);
    assert_eq!(store.validated("stencil").unwrap(), engine.validated());
    assert_eq!(store.checkpoint("stencil").unwrap().as_ref(), Some(engine));
}

/// A stop that reaches the gate while the run waits for it ends the run as
/// stopped: the variants at the gate stay in the engine and its
/// checkpoint, to be checked when the job resumes.
#[test]
fn a_stop_at_the_gate_keeps_its_variants_for_the_resume() {
    let (_dir, store, driver, _, ended, _) = run_to_the_gate(true);
    assert_eq!(ended, Ended::Stopped);
    let engine = driver.engine();
    assert!(
        !engine.gating().is_empty(),
        "the variants at the gate are kept"
    );
    assert!(engine.validated().is_empty());
    assert_eq!(store.checkpoint("stencil").unwrap().as_ref(), Some(engine));
}
