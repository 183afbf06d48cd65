//! The slot's measurement without a GPU: a stand-in backend of the slot's
//! scope (`cuda`) answering planted costs, on a daemon state of one job
//! whose best is validated.

use super::*;
use crate::serve::registry::{JobEntry, Registry};
use crate::serve::ServeConfig;
use gevo_client::export::Readers;
use gevo_client::proto::BestRecord;
use gevo_ir::Patch;
use gevo_model::assessment::{Assessment, TestSummary};
use gevo_model::spec::TestSet;
use gevo_search::evolve::{Build, Scope, Validated};
use gevo_search::store::{DaemonJob, JobRecord, Store};
use rand::SeedableRng;
use std::sync::atomic::AtomicBool;
use std::sync::{Condvar, Mutex, RwLock};

/// Answers every patch with a planted cost: 0.9 with its edit, the
/// original's 1.0 without; or fails as told.
struct Planted {
    backend: &'static str,
    answer: Answer,
    runs: usize,
}

#[derive(Clone, Copy, PartialEq)]
enum Answer {
    Costs,
    /// The full patch fails its test on this backend.
    FullFails,
    /// The measurement is stopped (a pause, a busy GPU).
    Interrupted,
}

impl Backend for Planted {
    fn scope(&self) -> Scope {
        Scope {
            backend: self.backend.into(),
            target: "Stand-in GPU".into(),
        }
    }
    fn test_set_hash(&self, _: TestSet) -> String {
        "t".into()
    }
    fn compile(&mut self, _: &[Patch]) -> Result<Vec<Result<Build, String>>, BackendError> {
        unreachable!("contributions only assess")
    }
    fn assess(&mut self, patches: &[Patch], _: TestSet) -> Result<Vec<Assessment>, BackendError> {
        if self.answer == Answer::Interrupted {
            return Err(BackendError::Interrupted);
        }
        self.runs += patches.len();
        Ok(patches
            .iter()
            .map(|p| {
                let full = !p.edits.is_empty();
                let fails = full && self.answer == Answer::FullFails;
                Assessment {
                    tests: vec![TestSummary {
                        test: "heldout[0]".into(),
                        failure: fails.then(|| ("mismatch".into(), "planted".into())),
                        cost: Some(if full { 900 } else { 1000 }),
                        original_cost: 1000,
                        error: Some(0.0),
                        timing: None,
                        kernels: Vec::new(),
                    }],
                    device: None,
                }
            })
            .collect())
    }
}

/// A daemon state of one `cuda` job of the vecadd fixture whose best is
/// a one-edit patch, validated; with the IR the slot holds.
fn one_job(dir: &std::path::Path) -> (Shared, KernelIr) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let spec_path = root.join("tests/fixtures/kernels/vecadd.gevo.toml");
    let spec_text = std::fs::read_to_string(&spec_path).unwrap();
    let ir = KernelIr::load(&root.join("tests/fixtures/kernels/vecadd.ll"), None).unwrap();
    let scope = Scope {
        backend: ON_SLOT.into(),
        target: "Stand-in GPU".into(),
    };
    let record = JobRecord::new("job-1".into(), spec_path, &spec_text, &ir, &scope, 1);
    let daemon = DaemonJob {
        kernel: "fixtures/vecadd".into(),
        version: 1,
        root: dir.to_path_buf(),
        fingerprint: "f".into(),
        paused: false,
        superseded: false,
        origin: None,
        search_key: None,
        follows: None,
        tuned: None,
    };
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
    let patch = ir.mutate(&mut rng, 1).unwrap();
    let validated = Validated {
        generation: 3,
        scope: scope.clone(),
        patch: patch.clone(),
        minimized: patch,
        ptx: String::new(),
        ptx_hash: "ptx-1".into(),
        train_cost: 0.9,
        speedup: 1.11,
        interval: (1.1, 1.12),
        heldout: Vec::new(),
    };
    let best = BestRecord {
        kernel: daemon.kernel.clone(),
        job: record.id.clone(),
        version: 1,
        target: scope.target.clone(),
        backend: scope.backend.clone(),
        speedup: 1.11,
        interval: (1.1, 1.12),
        generation: 3,
        ptx_hash: "ptx-1".into(),
        spec_hash: record.spec_hash.clone(),
        ir_hash: record.ir_hash.clone(),
        validated_at: 0,
        configuration: None,
    };
    let mut entry = JobEntry::new(daemon, record, dir.join("job-1.ll"), false, 0.0);
    entry.best = Some((validated, best));
    let mut registry = Registry::default();
    registry.jobs.insert("job-1".into(), entry);
    let shared = Shared {
        registry: Mutex::new(registry),
        wake: Condvar::new(),
        store: Store::open(&dir.join("state")).unwrap(),
        config: RwLock::new(ServeConfig::default()),
        slots: Vec::new(),
        scope,
        arch: None,
        state_dir: dir.join("state"),
        readers: Readers::Everyone,
        socket: dir.join("sock"),
        shutdown: AtomicBool::new(false),
        rescan: AtomicBool::new(false),
        started: Instant::now(),
    };
    (shared, ir)
}

/// The job's best's stored contributions.
fn stored(shared: &Shared) -> Option<contrib::Contributions> {
    shared.store.contributions("job-1", "ptx-1").unwrap()
}

fn queued(shared: &Shared) -> Vec<(String, Why)> {
    shared.registry().explain_queue.iter().cloned().collect()
}

fn planted(backend: &'static str, answer: Answer) -> Planted {
    Planted {
        backend,
        answer,
        runs: 0,
    }
}

/// A GPU job's best is measured once on its slot's backend and stored as
/// that backend's, the relies-on lines left to the explainer thread.
#[test]
fn a_gpu_jobs_best_is_measured_once_on_its_slot() {
    let dir = tempfile::tempdir().unwrap();
    let (shared, ir) = one_job(dir.path());
    let mut gpu = planted(ON_SLOT, Answer::Costs);
    assert!(measure(&shared, "job-1", &ir, &mut gpu));
    // The full patch and the patch without its one edit (the original).
    assert_eq!(gpu.runs, 2);
    let stored = stored(&shared).unwrap();
    assert_eq!(stored.scope.backend, ON_SLOT);
    assert_eq!(stored.edits.len(), 1);
    assert_eq!(stored.edits[0].class, contrib::Class::CarriesSpeed);
    assert_eq!(queued(&shared), [("job-1".to_string(), Why::Relies)]);
    // Measured: the next slice does not measure it again.
    assert!(!measure(&shared, "job-1", &ir, &mut gpu));
    assert_eq!(gpu.runs, 2);
}

/// Nothing is measured on a simulator slot, nor with `[jobs]
/// explain_edits` off.
#[test]
fn a_simulator_slot_or_explain_edits_off_measures_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (shared, ir) = one_job(dir.path());
    let mut sim = planted("sim", Answer::Costs);
    assert!(!measure(&shared, "job-1", &ir, &mut sim));
    shared.config.write().unwrap().jobs.explain_edits = false;
    let mut gpu = planted(ON_SLOT, Answer::Costs);
    assert!(!measure(&shared, "job-1", &ir, &mut gpu));
    assert_eq!((sim.runs, gpu.runs), (0, 0));
    assert!(stored(&shared).is_none());
    assert!(queued(&shared).is_empty());
}

/// A stop records nothing and lets the next slice try again; a failure on
/// the GPU hands the variant to the explainer thread's simulator, once.
#[test]
fn a_stop_is_tried_again_and_a_failure_goes_to_the_simulator() {
    let dir = tempfile::tempdir().unwrap();
    let (shared, ir) = one_job(dir.path());
    let mut stopped = planted(ON_SLOT, Answer::Interrupted);
    assert!(measure(&shared, "job-1", &ir, &mut stopped));
    assert!(stored(&shared).is_none());
    assert!(queued(&shared).is_empty());
    let mut failing = planted(ON_SLOT, Answer::FullFails);
    assert!(measure(&shared, "job-1", &ir, &mut failing), "tried again");
    assert!(stored(&shared).is_none());
    assert_eq!(queued(&shared), [("job-1".to_string(), Why::GpuFailed)]);
    assert!(!measure(&shared, "job-1", &ir, &mut failing), "tried once");
}
