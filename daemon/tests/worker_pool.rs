//! Worker supervision with real `gevod eval-worker` processes that abort,
//! hang or answer garbage on purpose (`GEVOD_WORKER_FAULT`): the variant
//! they held fails with the reason, the worker is replaced, and every other
//! variant, in the same batch and the next, evaluates normally.

use crate::common;

use common::workers::eval_workers;
use gevo_ir::{KernelIr, Patch};
use gevo_model::spec::{self, TestSet};
use gevo_search::evolve::{Backend, Scope};
use gevod::worker::pool::{PoolOptions, WorkerPool};
use rand::SeedableRng;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

fn pool(spec_name: &str, fault: Option<&str>, timeout: Duration) -> Result<WorkerPool, String> {
    let path = common::spec_fixture(spec_name);
    let spec = spec::load(&path).map_err(|e| e.to_string())?;
    let env = fault
        .map(|f| vec![("GEVOD_WORKER_FAULT".into(), f.into())])
        .unwrap_or_default();
    let options = PoolOptions {
        env,
        timeout,
        ..eval_workers(&path, 2)
    };
    let scope = Scope {
        backend: "sim".into(),
        target: "sm_90".into(),
    };
    WorkerPool::start(options, &spec, scope, Arc::new(AtomicBool::new(false)))
        .map_err(|e| e.to_string())
}

/// Patches with 0, 1, 2 and 3 edits.
fn patches(ir: &KernelIr) -> Vec<Patch> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(4);
    (0..4).map(|k| ir.mutate(&mut rng, k).unwrap()).collect()
}

fn check_fault(fault: &str, faulty: usize, expect: &str, timeout: Duration) {
    let ir = common::load("vecadd");
    let patches = patches(&ir);
    let reference: Vec<_> = patches
        .iter()
        .map(|p| ir.compile(p, &Default::default()).unwrap().ptx_hash)
        .collect();
    let mut pool = pool("vecadd", Some(fault), timeout).unwrap();
    for round in 0..2 {
        let builds = pool.compile(&patches).unwrap();
        for (i, b) in builds.iter().enumerate() {
            if i == faulty {
                let reason = b.as_ref().expect_err("the faulty variant fails");
                assert!(reason.contains(expect), "{fault}: {reason}");
            } else {
                assert_eq!(
                    b.as_ref().unwrap().ptx_hash,
                    reference[i],
                    "{fault}: variant {i}"
                );
            }
        }
        assert_eq!(
            pool.respawns,
            round + 1,
            "{fault}: one replacement per fault"
        );
    }
    // Assessment goes on normally after the faults.
    let results = pool.assess(&patches[..1], TestSet::Train).unwrap();
    assert!(results[0].passed(), "{:?}", results[0]);
}

#[test]
fn an_aborting_worker_costs_its_variant_and_a_respawn() {
    check_fault("abort:2", 2, "worker crashed", Duration::from_secs(60));
}

#[test]
fn a_hanging_worker_is_killed_after_the_timeout() {
    check_fault("hang:1", 1, "timed out", Duration::from_secs(2));
}

#[test]
fn a_worker_answering_garbage_is_replaced() {
    check_fault("garbage:3", 3, "garbage", Duration::from_secs(60));
}

#[test]
fn workers_that_cannot_start_fail_the_pool_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    // The spec loads here, then its IR disappears before the workers start.
    let broken = dir.path().join("vecadd.gevo.toml");
    std::fs::copy(common::spec_fixture("vecadd"), &broken).unwrap();
    std::fs::copy(
        common::kernel_fixture("vecadd"),
        dir.path().join("vecadd.ll"),
    )
    .unwrap();
    let spec = spec::load(&broken).unwrap();
    std::fs::remove_file(dir.path().join("vecadd.ll")).unwrap();
    let options = PoolOptions {
        timeout: Duration::from_secs(10),
        ..eval_workers(&broken, 1)
    };
    let scope = Scope {
        backend: "sim".into(),
        target: "sm_90".into(),
    };
    let err = WorkerPool::start(options, &spec, scope, Arc::new(AtomicBool::new(false)))
        .err()
        .expect("refused")
        .to_string();
    assert!(err.contains("vecadd.ll"), "{err}");
}

/// A worker that never greets stops the pool with one message, said once
/// however gevod prints it: as `gevod evolve` does (the spec, then the
/// causes not already said) and as the daemon records a job's error.
#[test]
fn a_worker_that_never_greets_is_said_once() {
    use gevod::worker::setup::SetupError;
    let path = common::spec_fixture("vecadd");
    let spec = spec::load(&path).unwrap();
    let options = PoolOptions {
        program: "/bin/sleep".into(),
        args: vec!["30".into()],
        start_timeout: Duration::from_millis(300),
        ..eval_workers(&path, 1)
    };
    let scope = Scope {
        backend: "sim".into(),
        target: "sm_90".into(),
    };
    let err = WorkerPool::start(options, &spec, scope, Arc::new(AtomicBool::new(false)))
        .err()
        .expect("refused");
    let setup = SetupError::Backend {
        spec: path.clone(),
        source: err,
    };
    // The daemon records the error's own line; the CLI adds the causes.
    let recorded = setup.to_string();
    let printed = gevo_client::text::error_line(anyhow::Error::from(setup).chain());
    for text in [&recorded, &printed] {
        assert_eq!(text.matches("did not start within").count(), 1, "{text}");
        assert!(text.starts_with(&path.display().to_string()), "{text}");
    }
}
