//! The GPU backend's supervision and pipeline without a GPU: real compile
//! workers (`gevod eval-worker`, with the simulator pre-screen) feeding a
//! stand-in GPU worker (tests/fixtures/fake/gpu-worker.sh) that crashes,
//! hangs, answers garbage or exits on the requests its plan names. Each
//! fault costs its variant and a respawn; every other variant, in the same
//! batch and the next, is measured.

use crate::common;
use crate::common::gpu_backend::*;

use gevo_ir::Patch;
use gevo_model::spec::TestSet;
use gevo_search::evolve::{Backend, Evaluated};
use std::collections::BTreeSet;
use std::time::Duration;

/// The PTX hashes a batch assessed (measured, or refused by the
/// pre-screen).
fn assessed_ptx(results: &[Evaluated]) -> BTreeSet<String> {
    results
        .iter()
        .filter(|e| e.assessment.is_some())
        .filter_map(|e| e.build.as_ref().ok().map(|b| b.ptx_hash.clone()))
        .collect()
}

#[test]
fn gpu_worker_faults_cost_one_variant_each_and_a_respawn() {
    let dir = tempfile::tempdir().unwrap();
    let counter = dir.path().join("requests");
    // No pre-screen: most random variants compute something else, and it
    // would reject them before the stand-in GPU worker's planted faults.
    let mut backend = backend("2:crash 4:hang 6:garbage 8:exit", &counter, false);
    let batch = patches(1, 40);
    let results = backend
        .evaluate(&batch, TestSet::Train, &|_| false)
        .unwrap();
    assert_eq!(results.len(), batch.len());
    let seen = measured(&results);
    assert!(seen.len() >= 9, "only {} variants measured", seen.len());
    // One variant each (the GPU side takes variants as they compile, so
    // which ones is not fixed); the 8th answers, then its worker exits.
    assert_eq!(
        failures(&seen),
        ["timed out", "worker answered garbage", "worker crashed"],
        "{seen:?}"
    );
    assert_eq!(backend.respawns(), 4, "crash, hang, garbage and exit");

    // The next batch is measured normally on the replacement worker.
    let again = backend
        .evaluate(&patches(2, 12), TestSet::Train, &|_| false)
        .unwrap();
    assert!(measured(&again).iter().all(Option::is_none));
    assert_eq!(backend.respawns(), 4);
}

/// The seconds a GPU worker holds no request are counted: between two
/// batches, while the engine would breed, its GPU waits for the search.
#[test]
fn a_gpu_worker_waiting_for_the_search_is_counted_idle() {
    let dir = tempfile::tempdir().unwrap();
    let counter = dir.path().join("requests");
    let mut backend = backend("", &counter, false);
    backend
        .evaluate(&patches(3, 6), TestSet::Train, &|_| false)
        .unwrap();
    let first = backend.take_utilization().unwrap();
    std::thread::sleep(Duration::from_millis(400));
    backend
        .evaluate(&patches(4, 6), TestSet::Train, &|_| false)
        .unwrap();
    let second = backend.take_utilization().unwrap();
    assert!(
        second.gpu_idle_s >= 0.4,
        "the pause between batches: {second:?}"
    );
    for u in [&first, &second] {
        assert!(u.gpu_idle_s <= u.wall_s * f64::from(u.gpu_workers), "{u:?}");
    }
}

/// The next batch sent to `compile_ahead` compiles while this one is
/// measured: the batch that then asks for it compiles nothing, and its
/// variants are built and measured as a backend that compiled them then
/// would.
#[test]
fn the_next_batch_compiles_while_this_one_is_measured() {
    let dir = tempfile::tempdir().unwrap();
    let slow_gpu = |counter: &str| {
        let mut gpu = fake_gpu("", &dir.path().join(counter));
        // 12 variants at 200 ms outlast compiling 12 more on 2 workers.
        gpu.env.push(("FAKE_GPU_SET_MS".into(), "train:200".into()));
        gpu
    };
    let vecadd = common::spec_fixture("vecadd");
    let mut backend = start(&vecadd, slow_gpu("ahead"), false);
    assert!(backend.compiles_ahead());
    let (this, next) = (patches(7, 12), patches(8, 12));
    let (sender, coming) = std::sync::mpsc::channel();
    backend.compile_ahead(coming);
    sender.send(next.clone()).unwrap();
    backend.evaluate(&this, TestSet::Train, &|_| false).unwrap();
    let before = backend.take_utilization().unwrap();
    assert_eq!(before.compiled_ahead, 0);
    let ahead = backend.evaluate(&next, TestSet::Train, &|_| false).unwrap();
    let after = backend.take_utilization().unwrap();
    assert_eq!(after.compiled_ahead, next.len() as u64, "{after:?}");

    let mut plain = start(&vecadd, slow_gpu("plain"), false);
    let now = plain.evaluate(&next, TestSet::Train, &|_| false).unwrap();
    let hashes = |results: &[Evaluated]| -> Vec<Option<String>> {
        let hash = |e: &Evaluated| e.build.as_ref().ok().map(|b| b.ptx_hash.clone());
        results.iter().map(hash).collect()
    };
    assert_eq!(hashes(&ahead), hashes(&now));
    assert_eq!(measured(&ahead), measured(&now));
    assert!(!measured(&now).is_empty());
}

/// Where a GPU would wait for the batch's last variant, it measures the
/// next batch's variants compiled ahead; the next batch takes those
/// measurements and sends none of them to a GPU again.
#[test]
fn an_idle_gpu_measures_the_next_batch_ahead() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("requests.log");
    let mut gpu = two_fake_gpus(dir.path());
    // The batch's one variant holds the first GPU 3 s. Each request is a
    // line of the log (appended: the two workers' counter file races).
    gpu.env.extend([
        ("FAKE_GPU_SLOW".into(), "GPU-A:1:3".into()),
        ("FAKE_GPU_LOG".into(), log.clone().into()),
    ]);
    let mut backend = start(&common::spec_fixture("vecadd"), gpu, false);
    let (this, next) = (patches(11, 1), patches(12, 8));
    let (sender, coming) = std::sync::mpsc::channel();
    backend.compile_ahead(coming);
    sender.send(next.clone()).unwrap();
    backend.evaluate(&this, TestSet::Train, &|_| false).unwrap();
    let first = backend.take_utilization().unwrap();
    assert!(first.measured_ahead > 0, "{first:?}");
    assert_eq!(first.measured, 1 + first.measured_ahead);

    let results = backend.evaluate(&next, TestSet::Train, &|_| false).unwrap();
    let second = backend.take_utilization().unwrap();
    let distinct: std::collections::BTreeSet<&str> = results
        .iter()
        .filter_map(|e| e.build.as_ref().ok())
        .map(|b| b.ptx_hash.as_str())
        .collect();
    assert_eq!(
        second.measured + first.measured_ahead,
        distinct.len() as u64
    );
    assert_eq!(second.measured_ahead, 0, "nothing comes after it");
    let requests = std::fs::read_to_string(&log).unwrap().lines().count();
    assert_eq!(requests, 1 + distinct.len(), "each PTX measured once");
    let assessed = results.iter().filter(|e| e.assessment.is_some()).count();
    assert_eq!(assessed, distinct.len());
}

#[test]
fn each_new_ptx_is_measured_once_and_known_ones_not_at_all() {
    let dir = tempfile::tempdir().unwrap();
    let counter = dir.path().join("requests");
    let mut backend = backend("", &counter, false);
    let mut batch = patches(3, 20);
    batch.extend(batch.clone()); // every PTX twice
    let builds = backend.compile(&batch[..1]).unwrap();
    let known = builds[0].as_ref().unwrap().ptx_hash.clone();
    let results = backend
        .evaluate(&batch, TestSet::Train, &|h| h == known)
        .unwrap();
    let mut hashes = std::collections::BTreeSet::new();
    for (i, e) in results.iter().enumerate() {
        let Ok(build) = &e.build else {
            assert!(e.assessment.is_none(), "variant {i} did not compile");
            continue;
        };
        let first = hashes.insert(build.ptx_hash.clone());
        assert_eq!(
            e.assessment.is_some(),
            first && build.ptx_hash != known,
            "variant {i}"
        );
    }
    let requests: usize = std::fs::read_to_string(&counter)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(
        requests,
        hashes.len() - usize::from(hashes.contains(&known))
    );
}

/// A train batch's assessed PTX become known to the compile workers: the
/// same variants in the next batch, which the search's cache answers, are
/// answered after code generation (no pre-screen, guarded build or
/// ptxas) and never measured; a variant new to that batch is compiled in
/// full and measured.
#[test]
fn variants_the_search_knows_stop_after_code_generation() {
    let dir = tempfile::tempdir().unwrap();
    let counter = dir.path().join("requests");
    let mut backend = backend("", &counter, true);
    let first = patches(5, 24);
    let results = backend
        .evaluate(&first, TestSet::Train, &|_| false)
        .unwrap();
    let assessed = assessed_ptx(&results);
    assert!(!assessed.is_empty());
    let u = backend.take_utilization().unwrap();
    assert_eq!(u.known_skipped, 0, "nothing known in the first batch");
    assert_eq!(u.compiled as usize, first.len(), "{u:?}");
    let screened = results
        .iter()
        .filter_map(|e| e.assessment.as_ref()?.first_failure())
        .filter(|f| f.contains("pre-screen on the simulator"))
        .count();
    assert!(
        screened > 0,
        "the batch has variants the pre-screen rejects"
    );
    assert_eq!(u.screened_out as usize, screened, "{u:?}");
    let measured = |counter: &std::path::Path| -> usize {
        let text = std::fs::read_to_string(counter).unwrap_or_default();
        text.trim().parse().unwrap_or(0)
    };
    let measured_first = measured(&counter);
    // The same variants again, and new ones.
    let mut second = first.clone();
    second.extend(patches(6, 24));
    let results = backend
        .evaluate(&second, TestSet::Train, &|h| assessed.contains(h))
        .unwrap();
    let u = backend.take_utilization().unwrap();
    let repeated = results
        .iter()
        .filter(|e| {
            e.build
                .as_ref()
                .is_ok_and(|b| assessed.contains(&b.ptx_hash))
        })
        .count();
    assert_eq!(u.known_skipped as usize, repeated, "{u:?}");
    assert!(results[..first.len()]
        .iter()
        .all(|e| e.assessment.is_none()));
    let new: std::collections::BTreeSet<&str> = results[first.len()..]
        .iter()
        .filter_map(|e| e.build.as_ref().ok())
        .filter(|b| !assessed.contains(&b.ptx_hash))
        .map(|b| b.ptx_hash.as_str())
        .collect();
    let measured_new = results[first.len()..]
        .iter()
        .filter(|e| e.assessment.is_some())
        .count();
    assert!(!new.is_empty(), "the new variants have new PTX");
    assert_eq!(measured_new, new.len(), "each new PTX assessed once");
    assert!(measured(&counter) <= measured_first + new.len());
}

/// After a resume the compile workers know nothing, while the search's
/// cache holds the job's PTX: the first batch that meets a cached PTX
/// compiles it in full (and does not measure it), and from then on the
/// workers answer it after code generation.
#[test]
fn a_resumed_search_teaches_its_workers_the_ptx_its_cache_holds() {
    let dir = tempfile::tempdir().unwrap();
    let counter = dir.path().join("requests");
    let batch = patches(5, 24);
    let cached = {
        let mut before = backend("", &counter, true);
        let results = before.evaluate(&batch, TestSet::Train, &|_| false).unwrap();
        assessed_ptx(&results)
    };
    assert!(!cached.is_empty());
    let mut resumed = backend("", &counter, true);
    let known = |h: &str| cached.contains(h);
    let first = resumed.evaluate(&batch, TestSet::Train, &known).unwrap();
    assert!(
        first.iter().all(|e| e.assessment.is_none()),
        "the cache answers them"
    );
    let u = resumed.take_utilization().unwrap();
    assert_eq!(u.known_skipped, 0, "the resumed workers knew none: {u:?}");
    let again = resumed.evaluate(&batch, TestSet::Train, &known).unwrap();
    let u = resumed.take_utilization().unwrap();
    let cached_builds = again
        .iter()
        .filter(|e| e.build.as_ref().is_ok_and(|b| cached.contains(&b.ptx_hash)))
        .count();
    assert!(cached_builds > 0);
    assert_eq!(u.known_skipped as usize, cached_builds, "{u:?}");
}

/// PTX the engine evicts from its cache are forgotten by the compile
/// workers first (`Backend::forget_known`): while the engine still holds
/// them the cache answers them and they are not taught again, and once it
/// dropped them they are compiled in full and measured through their
/// guarded builds, never answered as known to a search that forgot them.
#[test]
fn ptx_the_engine_forgets_are_forgotten_by_the_workers_first() {
    let dir = tempfile::tempdir().unwrap();
    let counter = dir.path().join("requests");
    let mut backend = backend("", &counter, true);
    let batch = patches(5, 24);
    let first = backend
        .evaluate(&batch, TestSet::Train, &|_| false)
        .unwrap();
    let assessed = assessed_ptx(&first);
    assert!(!assessed.is_empty());
    backend.take_utilization();
    let evicted: Vec<String> = assessed.iter().cloned().collect();
    backend.forget_known(&evicted);
    let held = backend
        .evaluate(&batch, TestSet::Train, &|h| assessed.contains(h))
        .unwrap();
    assert!(held.iter().all(|e| e.assessment.is_none()), "still cached");
    let u = backend.take_utilization().unwrap();
    assert_eq!(u.known_skipped, 0, "the workers forgot them: {u:?}");
    backend.forget_known(&[]);
    let dropped = backend
        .evaluate(&batch, TestSet::Train, &|_| false)
        .unwrap();
    let u = backend.take_utilization().unwrap();
    assert_eq!(u.known_skipped, 0, "not taught again while held: {u:?}");
    let measured = assessed_ptx(&dropped);
    assert_eq!(measured, assessed, "each measured again");
}

/// The pre-screen rejects each planted variant on the simulator's train
/// tests, by the verdict and the test named, before the GPU worker sees a
/// request: an out-of-bounds access; a variant storing `a[i]` instead of
/// `a[i] + b[i]`, whose outputs differ (no guarded build or GPU run is
/// spent on it); and loops' endless variant, which passes the smallest
/// test (`iters = 0` never enters the loop) and is stopped by the step
/// budget on a larger one (every sim train test runs, least input first).
#[test]
fn the_prescreen_rejects_faults_and_mismatches_before_the_gpu() {
    // (fixture, planted patch, verdict, the rejecting train test: vecadd's
    // smallest is train[2])
    let cases = [
        ("vecadd", "vecadd.no-bounds-check", "out_of_bounds", 2),
        ("vecadd", "vecadd.drops-b", "mismatch", 2),
        ("loops", "loops.endless", "step_budget", 1),
    ];
    for (fixture, planted, verdict, test) in cases {
        let dir = tempfile::tempdir().unwrap();
        let counter = dir.path().join("requests");
        let mut backend = backend_for(&common::spec_fixture(fixture), "", &counter, true);
        let a = backend
            .assess(&[kernel_patch(planted)], TestSet::Train)
            .unwrap();
        assert_eq!(
            a[0].tests.len(),
            1,
            "{planted}: only the rejecting test: {a:?}"
        );
        let kind = a[0].tests[0]
            .failure
            .as_ref()
            .map(|(kind, _)| kind.as_str());
        assert_eq!(kind, Some(verdict), "{planted}: {a:?}");
        let failure = a[0].first_failure().expect("rejected");
        assert!(
            failure.starts_with(&format!("train[{test}]: pre-screen on the simulator: ")),
            "{planted}: {failure}"
        );
        assert!(!counter.exists(), "{planted}: the GPU worker saw a request");
    }
}

/// A GPU job's promotion runs the generated held-out tests too: on the
/// simulator, in the compile workers (the stand-in GPU worker never sees
/// them). The planted variant swapping two scalars equal in every user
/// test fails there; the original passes.
#[test]
fn the_gpu_backend_runs_the_generated_tests_on_the_simulator() {
    let dir = tempfile::tempdir().unwrap();
    let counter = dir.path().join("requests");
    let general = common::repo_root().join("tests/fixtures/general");
    let mut backend = backend_for(&general.join("scale2.gevo.toml"), "", &counter, false);
    assert!(backend.runs_generated());
    let text = std::fs::read_to_string(general.join("scale2.swap-scalars.patch.json")).unwrap();
    let swapped = Patch::from_json(&text).unwrap();
    let original = Patch {
        edits: Vec::new(),
        ..swapped.clone()
    };
    let results = backend
        .assess(&[original, swapped], TestSet::Generated)
        .unwrap();
    assert!(!results[0].tests.is_empty(), "no generated test kept");
    assert_eq!(results[0].first_failure(), None, "{:?}", results[0]);
    let failure = results[1]
        .first_failure()
        .expect("the swap fails a generated test");
    assert!(failure.contains("rx != ry"), "{failure}");
    assert!(
        std::fs::read_to_string(&counter)
            .unwrap_or_default()
            .is_empty(),
        "the GPU worker was asked to run generated tests"
    );
    // Only promotion runs generated tests: their time is promotion's part,
    // in line (`promote_last`) as beside the search.
    let u = backend
        .take_utilization()
        .expect("the GPU backend keeps its utilization");
    assert!(u.spent.generated_s > 0.0, "{:?}", u.spent);
    assert_eq!(u.promotion.generated_s, u.spent.generated_s);
}

/// A kernel whose original faults on the simulator: the pre-screen says it
/// is the one refusing, and why, in the spec's words.
#[test]
fn the_prescreen_says_when_it_refuses_the_original() {
    let dir = tempfile::tempdir().unwrap();
    let spec = common::repo_root().join("tests/fixtures/findings/pastend.gevo.toml");
    let mut b = backend_for(&spec, "", &dir.path().join("n"), true);
    let ir = gevo_ir::KernelIr::load(&spec.with_file_name("pastend.ll"), None).unwrap();
    let outcome = b.evaluate(&[ir.empty_patch()], TestSet::Train, &|_| false);
    let text = match outcome {
        Err(e) => e.to_string(),
        Ok(results) => format!("{:?}", results[0].build),
    };
    println!("{text}");
    assert!(text.contains("the GPU backend's pre-screen"), "{text}");
    assert!(text.contains("just past its end"), "{text}");
}

/// Two GPU workers, one per device (`gevod evolve --devices A,B`): the
/// search's batches go to both; a promotion's measurements to the first only.
#[test]
fn batches_spread_over_devices_and_promotion_measures_on_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("requests.log");
    let mut gpu = two_fake_gpus(dir.path());
    gpu.env.push(("FAKE_GPU_LOG".into(), log.clone().into()));
    let mut backend = start(&common::spec_fixture("vecadd"), gpu, false);
    let devices_used = |from: usize| -> Vec<String> {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let mut d: Vec<String> = text
            .lines()
            .skip(from)
            .map(|l| l.split(' ').next().unwrap().to_string())
            .collect();
        d.sort();
        d.dedup();
        d
    };

    let batch = patches(5, 24);
    let results = backend
        .evaluate(&batch, TestSet::Train, &|_| false)
        .unwrap();
    assert!(!measured(&results).is_empty());
    assert_eq!(devices_used(0), ["GPU-A", "GPU-B"]);

    let before = std::fs::read_to_string(&log).unwrap().lines().count();
    let assessed = backend.assess(&batch[..6], TestSet::Heldout).unwrap();
    assert_eq!(assessed.len(), 6);
    assert_eq!(devices_used(before), ["GPU-A"]);
}

/// Two GPU workers, one of them stuck on its first variant for seconds (a
/// slow kernel): the other measures every other variant of the batch
/// meanwhile, none waits for the stuck one, and every variant is measured
/// once. (Before: the batch went to the GPU workers a compile chunk at a
/// time, and the next chunk waited for the stuck variant.)
#[test]
fn a_gpu_worker_never_waits_for_another_while_variants_are_queued() {
    let dir = tempfile::tempdir().unwrap();
    let times = dir.path().join("times.log");
    let mut gpu = two_fake_gpus(dir.path());
    gpu.env
        .push(("FAKE_GPU_TIME_LOG".into(), times.clone().into()));
    gpu.env.push(("FAKE_GPU_SLOW".into(), "GPU-A:1:6".into()));
    gpu.timeout = Duration::from_secs(60);
    let mut backend = start(&common::spec_fixture("vecadd"), gpu, false);
    let batch = patches(11, 24);
    let results = backend
        .evaluate(&batch, TestSet::Train, &|_| false)
        .unwrap();
    let measured = measured(&results).len();
    drop(backend);

    // DEVICE ID RECEIVED ANSWERED, in the order answered.
    let text = std::fs::read_to_string(&times).unwrap();
    let log: Vec<(&str, f64, f64)> = text
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (f[0], f[2].parse().unwrap(), f[3].parse().unwrap())
        })
        .collect();
    assert_eq!(log.len(), measured, "{text}");
    assert!(measured > 8, "more variants than a compile chunk: {text}");
    let on = |d: &str| log.iter().filter(|(dev, _, _)| *dev == d).count();
    assert_eq!((on("GPU-A"), on("GPU-B")), (1, measured - 1), "{text}");
    let stuck_answered = log.iter().find(|(d, _, _)| *d == "GPU-A").unwrap().2;
    assert!(
        log.iter()
            .all(|(_, received, _)| *received < stuck_answered),
        "a variant waited for the stuck one: {text}"
    );
}

/// `smallest` screens a search's variants on the smallest train test
/// only: loops' endless variant passes it (`iters = 0`) and reaches the
/// GPU. A variant about to be validated still runs every train test:
/// promotion's measurements (`assess`) reject it on the simulator.
#[test]
fn smallest_screens_the_search_on_one_test_and_promotion_on_all() {
    let loops = common::spec_fixture("loops");
    let dir = tempfile::tempdir().unwrap();
    let counter = dir.path().join("requests");
    let mut search = backend_for(&loops, "", &counter, gevod::config::Prescreen::Smallest);
    search
        .evaluate(&[kernel_patch("loops.endless")], TestSet::Train, &|_| false)
        .unwrap();
    assert!(counter.exists(), "the GPU worker saw no request");
    let counter = dir.path().join("promotion");
    let mut promotion = backend_for(&loops, "", &counter, gevod::config::Prescreen::Smallest);
    let a = promotion
        .assess(&[kernel_patch("loops.endless")], TestSet::Heldout)
        .unwrap();
    let failure = a[0].first_failure().expect("rejected");
    assert!(
        failure.starts_with("train[1]: pre-screen on the simulator: "),
        "{failure}"
    );
    assert!(!counter.exists(), "the GPU worker saw a request");
}

/// The GPU worker's spare starts beside it, not after its greeting (a GPU
/// worker's start takes seconds, which the search would wait twice), and
/// the seconds the first worker waited for the spare are not counted as
/// the search's GPU idle time.
#[test]
fn a_standby_gpu_worker_starts_beside_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let starts = dir.path().join("starts");
    let mut gpu = fake_gpu("", &dir.path().join("counter"));
    gpu.standby = true;
    gpu.env.extend([
        ("FAKE_GPU_START_MS".into(), "700".into()),
        ("FAKE_GPU_START_LOG".into(), starts.clone().into()),
    ]);
    let mut backend = start(&common::spec_fixture("vecadd"), gpu, false);
    let log = std::fs::read_to_string(&starts).unwrap();
    let times: Vec<(f64, f64)> = log
        .lines()
        .map(|l| {
            let (started, greeted) = l.split_once(' ').unwrap();
            (started.parse().unwrap(), greeted.parse().unwrap())
        })
        .collect();
    assert_eq!(times.len(), 2, "the worker and its spare: {log}");
    let first_greeting = times[0].1.min(times[1].1);
    let last_start = times[0].0.max(times[1].0);
    assert!(
        last_start < first_greeting,
        "the spare started after the worker greeted: {log}"
    );
    let u = backend.take_utilization().unwrap();
    assert!(u.gpu_idle_s < 0.5, "the start counted as idle: {u:?}");
}
