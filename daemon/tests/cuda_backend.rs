//! The GPU backend's supervision and pipeline without a GPU: real compile
//! workers (`gevod eval-worker`, with the simulator pre-screen) feeding a
//! stand-in GPU worker (tests/fixtures/fake/gpu-worker.sh) that crashes,
//! hangs, answers garbage or exits on the requests its plan names. Each
//! fault costs its variant and a respawn; every other variant, in the same
//! batch and the next, is measured.

use crate::common;

use common::workers::{eval_workers, fake_device};
use gevo_ir::Patch;
use gevo_model::spec::{self, TestSet};
use gevo_search::evolve::{Backend, Config, Engine, Evaluated};
use gevod::cuda::measure::Measurement;
use gevod::worker::gpu::{CudaBackend, CudaOptions};
use gevod::worker::pool::PoolOptions;
use rand::SeedableRng;
use std::ffi::OsString;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

fn backend(plan: &str, counter: &Path, prescreen: bool) -> CudaBackend {
    backend_for(&common::spec_fixture("vecadd"), plan, counter, prescreen)
}

fn backend_for(spec_path: &Path, plan: &str, counter: &Path, prescreen: bool) -> CudaBackend {
    start(spec_path, fake_gpu(plan, counter), prescreen)
}

/// One stand-in GPU worker following `plan`, counting requests in `counter`.
fn fake_gpu(plan: &str, counter: &Path) -> PoolOptions {
    PoolOptions {
        env: vec![
            ("FAKE_GPU_PLAN".into(), plan.into()),
            ("FAKE_GPU_COUNTER".into(), counter.into()),
        ],
        ..PoolOptions::local(
            common::repo_root().join("tests/fixtures/fake/gpu-worker.sh"),
            Vec::new(),
            1,
            Duration::from_secs(3),
            Duration::from_secs(30),
        )
    }
}

/// Two stand-in GPU workers, on devices GPU-A and GPU-B (`--devices A,B`).
fn two_fake_gpus(dir: &Path) -> PoolOptions {
    let mut gpu = fake_gpu("", &dir.join("counter"));
    gpu.workers = 2;
    gpu.slot_args = ["GPU-A", "GPU-B"]
        .iter()
        .map(|d| vec!["--device".into(), (*d).into()])
        .collect();
    gpu
}

fn start(spec_path: &Path, gpu: PoolOptions, prescreen: bool) -> CudaBackend {
    start_measuring(spec_path, gpu, prescreen, Measurement::Adaptive)
}

fn start_measuring(
    spec_path: &Path,
    gpu: PoolOptions,
    prescreen: bool,
    measurement: Measurement,
) -> CudaBackend {
    let stop = Arc::new(AtomicBool::new(false));
    start_stoppable(spec_path, gpu, prescreen, measurement, stop)
}

/// The backend, stopped when `stop` is set.
fn start_stoppable(
    spec_path: &Path,
    gpu: PoolOptions,
    prescreen: bool,
    measurement: Measurement,
    stop: Arc<AtomicBool>,
) -> CudaBackend {
    let spec = spec::load(spec_path).unwrap();
    let options = CudaOptions {
        compile: eval_workers(spec_path, 2),
        gpu,
        device: fake_device(),
        arch: "sm_90".into(),
        cubin_for: None,
        prescreen,
        gate: None,
        measurement,
    };
    CudaBackend::start(options, &spec, stop).unwrap()
}

/// vecadd's backend whose two compile workers assemble what the GPU
/// measures for sm_90, with the ptxas and the rest that `compile_env` sets.
fn start_assembling(
    gpu: PoolOptions,
    compile_env: Vec<(OsString, OsString)>,
    prescreen: bool,
) -> CudaBackend {
    let spec_path = common::spec_fixture("vecadd");
    let mut compile = eval_workers(&spec_path, 2);
    compile.env.extend(compile_env);
    let options = CudaOptions {
        compile,
        gpu,
        device: fake_device(),
        arch: "sm_90".into(),
        cubin_for: Some("sm_90".into()),
        prescreen,
        gate: None,
        measurement: Measurement::Adaptive,
    };
    let spec = spec::load(&spec_path).unwrap();
    CudaBackend::start(options, &spec, Arc::new(AtomicBool::new(false))).unwrap()
}

/// A one-island search of `population` on vecadd (seed 5), and its IR:
/// the promotion tests' engine.
fn vecadd_search(population: usize) -> (Engine, gevo_ir::KernelIr) {
    let config = Config {
        population,
        islands: 1,
        ..Config::default()
    };
    (Engine::new(config, 5).unwrap(), common::load("vecadd"))
}

/// Some promotion ended and was taken in: a variant validated or a
/// failure recorded.
fn assert_promotions_taken_in(engine: &Engine) {
    assert!(
        !engine.validated().is_empty() || !engine.promotion_failures().is_empty(),
        "the promotions' results were never taken in"
    );
}

/// Random patches of 1 to 3 edits (more than a compile chunk, so the
/// pipeline overlaps several).
fn patches(seed: u64, count: usize) -> Vec<Patch> {
    let ir = common::load("vecadd");
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    (0..count)
        .map(|k| ir.mutate(&mut rng, 1 + k % 3).unwrap())
        .collect()
}

/// The failure of each variant the GPU worker saw, in request order
/// (`None`: passed).
fn measured(results: &[Evaluated]) -> Vec<Option<String>> {
    results
        .iter()
        .filter_map(|e| e.assessment.as_ref())
        .filter(|a| {
            !a.first_failure()
                .is_some_and(|f| f.contains("pre-screen on the simulator"))
        })
        .map(|a| a.first_failure())
        .collect()
}

/// The fault each failed variant met, of those the stand-in plants, sorted.
fn failures(seen: &[Option<String>]) -> Vec<&'static str> {
    let planted = ["worker crashed", "timed out", "worker answered garbage"];
    let mut found: Vec<&'static str> = seen
        .iter()
        .flatten()
        .map(|f| {
            planted
                .into_iter()
                .find(|p| f.contains(p))
                .unwrap_or_else(|| panic!("an unplanted failure: {f}"))
        })
        .collect();
    found.sort();
    found
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

/// A planted patch of a kernel fixture, `tests/fixtures/kernels/NAME.patch.json`.
fn kernel_patch(name: &str) -> Patch {
    let path = common::repo_root().join(format!("tests/fixtures/kernels/{name}.patch.json"));
    Patch::from_json(&std::fs::read_to_string(path).unwrap()).unwrap()
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

/// Adaptive measurement through the engine: every train measurement of the
/// search races against the engine's selection threshold (the original's
/// 1.0 for the initial population), promotion's held-out ones never do,
/// and each generation's utilization counts the stand-in worker's rounds
/// and times. With fixed measurement nothing races.
#[test]
fn the_search_races_train_measurements_against_the_selection_threshold() {
    for measurement in [Measurement::Adaptive, Measurement::Fixed] {
        let dir = tempfile::tempdir().unwrap();
        let races = dir.path().join("races.log");
        let mut gpu = fake_gpu("", &dir.path().join("counter"));
        gpu.env
            .push(("FAKE_GPU_RACE_LOG".into(), races.clone().into()));
        let spec = common::spec_fixture("vecadd");
        let mut backend = start_measuring(&spec, gpu, false, measurement);
        let config = Config {
            population: 16,
            islands: 1,
            ..Config::default()
        };
        let mut engine = Engine::new(config, 7).unwrap();
        let ir = common::load("vecadd");
        let mut reports = Vec::new();
        let mut seen = 0;
        let mut lines_per_generation = Vec::new();
        for _ in 0..3 {
            reports.push(engine.step(&ir, &mut backend).unwrap());
            let text = std::fs::read_to_string(&races).unwrap_or_default();
            let lines: Vec<String> = text.lines().skip(seen).map(String::from).collect();
            seen += lines.len();
            lines_per_generation.push(lines);
        }
        for (report, lines) in reports.iter().zip(&lines_per_generation) {
            let train: Vec<&str> = lines
                .iter()
                .filter_map(|l| l.strip_prefix("train "))
                .collect();
            for l in lines.iter().filter(|l| !l.starts_with("train ")) {
                assert!(l.ends_with(" -"), "a promotion raced: {l}");
            }
            let u = report
                .utilization
                .as_ref()
                .expect("the GPU backend reports");
            assert_eq!(u.measured as usize, train.len(), "{measurement:?}");
            assert_eq!(u.timed, u.measured, "the stand-in passes every variant");
            assert_eq!(
                u.rounds,
                5 * u.stopped_early + 15 * (u.timed - u.stopped_early)
            );
            assert!(u.spent.timing_s >= u.rounds as f64 / 1000.0 - 1e-9, "{u:?}");
            assert!(u.spent.compile_s > 0.0 && u.wall_s > 0.0, "{u:?}");
            assert_eq!((u.gpu_workers, u.compile_workers), (1, 2));
            // The first generation counts the GPU worker's start; the
            // stand-in never needs a replacement.
            let first = report.generation == 0;
            assert_eq!(u.gpu_starts, u64::from(first), "{u:?}");
            assert_eq!(u.gpu_start_s > 0.0, first, "{u:?}");
            let parts = (u.gpu_start_parts.inputs_s, u.gpu_start_parts.upload_s);
            assert_eq!(parts, if first { (0.5, 0.25) } else { (0.0, 0.0) });
            match measurement {
                Measurement::Fixed => {
                    assert!(train.iter().all(|r| *r == "-"), "{train:?}");
                    assert_eq!(u.stopped_early, 0);
                }
                Measurement::Adaptive => {
                    assert!(train.iter().all(|r| *r != "-"), "{train:?}");
                    if report.generation == 0 {
                        assert!(train.iter().all(|r| r.parse::<f64>() == Ok(1.0)));
                    }
                }
            }
        }
        if measurement == Measurement::Adaptive {
            let stopped: u64 = reports
                .iter()
                .map(|r| r.utilization.as_ref().unwrap().stopped_early)
                .sum();
            let timed: u64 = reports
                .iter()
                .map(|r| r.utilization.as_ref().unwrap().timed)
                .sum();
            assert!(stopped > 0 && stopped < timed, "{stopped} of {timed}");
            // Each side's stops are counted: the stand-in stops a variant
            // more than 10% below the line as better.
            let better: u64 = reports
                .iter()
                .map(|r| r.utilization.as_ref().unwrap().stopped_better)
                .sum();
            println!("{stopped} of {timed} stopped early, {better} as better");
            assert!(better > 0 && better < stopped, "{better} of {stopped}");
            // Later generations race against the elite's cutoff, below 1.0.
            let later: Vec<f64> = lines_per_generation[2]
                .iter()
                .filter_map(|l| l.strip_prefix("train "))
                .map(|r| r.parse().unwrap())
                .collect();
            assert!(later.iter().all(|&r| r < 1.0), "{later:?}");
        }
    }
}

/// With a standby GPU worker, a variant that crashes the worker is
/// answered as before, and the next variants go to the spare, which was
/// started and greeted beforehand (no wait for a new start), while a new
/// spare starts behind it.
#[test]
fn a_standby_gpu_worker_takes_over_after_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let mut gpu = fake_gpu("3:crash 9:hang", &dir.path().join("counter"));
    gpu.standby = true;
    let mut backend = start(&common::spec_fixture("vecadd"), gpu, false);
    let results = backend
        .evaluate(&patches(11, 24), TestSet::Train, &|_| false)
        .unwrap();
    let seen = measured(&results);
    assert!(seen.len() >= 10, "only {} variants measured", seen.len());
    // The GPU side takes variants as they compile: the 3rd and 9th requests
    // are some variants', one each.
    assert_eq!(failures(&seen), ["timed out", "worker crashed"], "{seen:?}");
    let u = backend.take_utilization().unwrap();
    assert_eq!(backend.respawns(), 2);
    assert_eq!(u.gpu_starts, 3, "the first worker and two replacements");
    assert_eq!(
        backend.standby_swaps(),
        2,
        "both replacements were ready spares"
    );
}

/// With `cubin_for`, the compile workers assemble the guarded build of each
/// variant that passes the pre-screen with ptxas (a stand-in here, named by
/// GEVO_PTXAS), and every measure request carries that cubin; the variant's
/// own only where the simulator saw it pass every train test (else the GPU
/// worker assembles it while it checks, as most fail); where ptxas
/// refuses, the variant is measured from its PTX alone. ptxas's time is
/// counted.
#[test]
fn compile_workers_assemble_the_measured_variants_for_the_gpu() {
    use base64::Engine as _;
    let fake_ptxas = common::repo_root().join("tests/fixtures/fake/ptxas.sh");
    for (ptxas, assembles) in [(fake_ptxas, true), ("/bin/false".into(), false)] {
        let dir = tempfile::tempdir().unwrap();
        let (cubins, calls) = (dir.path().join("cubins"), dir.path().join("calls"));
        let mut gpu = fake_gpu("", &dir.path().join("counter"));
        gpu.env
            .push(("FAKE_GPU_CUBIN_LOG".into(), cubins.clone().into()));
        let compile_env = vec![
            ("GEVO_PTXAS".into(), ptxas.into()),
            ("FAKE_PTXAS_LOG".into(), calls.clone().into()),
        ];
        let mut backend = start_assembling(gpu, compile_env, true);
        let results = backend
            .evaluate(&patches(5, 24), TestSet::Train, &|_| false)
            .unwrap();
        let measured = measured(&results).len();
        assert!(measured > 0);
        let sent = std::fs::read_to_string(&cubins).unwrap();
        let sent: Vec<&str> = sent.lines().collect();
        assert_eq!(sent.len(), measured);
        let u = backend.take_utilization().unwrap();
        if assembles {
            let elf = |text: &str| {
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(text)
                    .unwrap();
                assert!(bytes.starts_with(b"\x7fELF sm_90 "), "{bytes:?}");
            };
            let mut own = 0;
            for line in &sent {
                let (variant, guarded) = line.split_once(' ').unwrap();
                elf(guarded);
                if variant != "-" {
                    elf(variant);
                    own += 1;
                }
            }
            println!("{measured} measured, {own} with their own cubin");
            assert!(own > 0 && own < measured, "{own} of {measured}");
            // Only what the GPU measures is assembled: its guarded build,
            // and the variant itself where the simulator saw it pass.
            let calls = std::fs::read_to_string(&calls).unwrap();
            assert_eq!(
                calls.lines().collect::<Vec<_>>(),
                vec!["sm_90"; measured + own]
            );
            assert!(u.spent.assemble_s > 0.0, "{u:?}");
        } else {
            assert!(sent.iter().all(|c| *c == "- -"), "{sent:?}");
        }
    }
}

/// The GPU side takes variants as they compile: the first assembly of the
/// batch takes 3 s more, and the stand-in GPU worker measures the variants
/// compiled meanwhile, though they come after it in the batch.
#[test]
fn a_slow_compile_holds_back_no_other_variant() {
    let dir = tempfile::tempdir().unwrap();
    let (slow, times) = (dir.path().join("slow"), dir.path().join("times"));
    let mut gpu = fake_gpu("", &dir.path().join("counter"));
    gpu.env
        .push(("FAKE_GPU_TIME_LOG".into(), times.clone().into()));
    let fake_ptxas = common::repo_root().join("tests/fixtures/fake/ptxas.sh");
    let compile_env = vec![
        ("GEVO_PTXAS".into(), fake_ptxas.into()),
        (
            "FAKE_PTXAS_SLOW".into(),
            format!("{}:3", slow.display()).into(),
        ),
    ];
    // No pre-screen: every variant that builds goes to the GPU worker.
    let mut backend = start_assembling(gpu, compile_env, false);
    backend
        .evaluate(&patches(5, 24), TestSet::Train, &|_| false)
        .unwrap();
    let seconds = |text: &str| -> Vec<f64> {
        text.split_whitespace()
            .map(|t| t.parse().unwrap())
            .collect()
    };
    let slow = seconds(&std::fs::read_to_string(&slow).unwrap());
    let (from, to) = (slow[0], slow[1]);
    let received: Vec<f64> = std::fs::read_to_string(&times)
        .unwrap()
        .lines()
        .map(|l| seconds(l.split_once(' ').unwrap().1)[1])
        .collect();
    let meanwhile = received.iter().filter(|&&t| t > from && t < to).count();
    // Taken in the batch's order, at most the one variant before it that
    // the other compile worker held could have been.
    assert!(
        meanwhile >= 5,
        "{meanwhile} of {} variants measured during the slow assembly",
        received.len()
    );
}

/// Each generation on the GPU backend says where the engine's own thread
/// spent it (breeding, waiting for evaluation, selection, promotion): every
/// part is measured, and the parts add up to no more than the generation's
/// wall time.
#[test]
fn each_generation_says_where_the_engine_spent_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut backend = backend("", &dir.path().join("counter"), false);
    let config = Config {
        population: 16,
        islands: 1,
        ..Config::default()
    };
    let mut engine = Engine::new(config, 3).unwrap();
    let ir = common::load("vecadd");
    for _ in 0..3 {
        let started = std::time::Instant::now();
        let report = engine.step(&ir, &mut backend).unwrap();
        let took = started.elapsed().as_secs_f64();
        let e = report.utilization.expect("the GPU backend measures").engine;
        let parts = [e.breed_s, e.evaluate_s, e.select_s, e.promote_s];
        assert!(parts.iter().all(|s| *s > 0.0), "{e:?}");
        assert!(parts.iter().sum::<f64>() <= took, "{e:?} in {took} s");
    }
}

/// A generation's promotion runs beside the next generations' batches: its
/// held-out and minimization measurements reach the GPU worker among their
/// train measurements (ahead of those still queued), never after a batch
/// as a step of their own. What the last generation found is promoted by
/// `promote_last` at the end; the validated variants name the generation
/// that found them, one before the step that validated them or earlier.
#[test]
fn a_generation_is_promoted_beside_the_next_ones_batch() {
    let dir = tempfile::tempdir().unwrap();
    let races = dir.path().join("races.log");
    let mut gpu = fake_gpu("", &dir.path().join("counter"));
    gpu.env.extend([
        ("FAKE_GPU_RACE_LOG".into(), races.clone().into()),
        // 15 ms a variant: the batch lasts while promotion's requests come.
        ("FAKE_GPU_ROUND_MS".into(), "1".into()),
    ]);
    let spec = common::spec_fixture("vecadd");
    let mut backend = start(&spec, gpu, false);
    assert!(backend.promotes_beside());
    let (mut engine, ir) = vecadd_search(24);
    let (mut seen, mut interleaved, mut promoted) = (0, 0, 0);
    for _ in 0..4 {
        let report = engine.step(&ir, &mut backend).unwrap();
        let text = std::fs::read_to_string(&races).unwrap_or_default();
        let sets: Vec<&str> = text
            .lines()
            .skip(seen)
            .map(|l| l.split(' ').next().unwrap())
            .collect();
        seen += sets.len();
        let last_train = sets.iter().rposition(|s| *s == "train");
        let first_promotion = sets.iter().position(|s| *s != "train");
        if report.generation == 0 {
            assert_eq!(
                first_promotion, None,
                "generation 0 promotes nothing: {sets:?}"
            );
        }
        if let (Some(p), Some(t)) = (first_promotion, last_train) {
            promoted += 1;
            interleaved += usize::from(p < t);
        }
        for v in &report.validated {
            assert!(v.generation < report.generation, "{v:?}");
        }
    }
    assert!(promoted > 0, "no generation promoted anything");
    assert!(
        interleaved > 0,
        "promotion waited for every batch: {}",
        std::fs::read_to_string(&races).unwrap()
    );
    let before = std::fs::read_to_string(&races).unwrap().lines().count();
    let (validated, failures) = engine.promote_last(&ir, &mut backend).unwrap();
    let after = std::fs::read_to_string(&races).unwrap().lines().count();
    assert_eq!(
        after > before,
        !(validated.is_empty() && failures.is_empty()),
        "promote_last measures what it promotes"
    );
    for v in &validated {
        assert!(v.generation <= 3, "{v:?}");
    }
    assert!(!backend.promotion_started(), "promote_last waits for it");
}

/// No step waits for the promotion beside it: one whose measurements take
/// long (on the first of two GPUs) goes on while the next steps breed and
/// measure, and its results come with the step during which it ended, or
/// with `promote_last`.
#[test]
fn no_step_waits_for_the_promotion_beside_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut gpu = two_fake_gpus(dir.path());
    gpu.env.extend([
        // 15 ms a search variant, 1.5 s more a promotion's measurement: a
        // promotion (two measurements at least) outlasts a step of 8
        // variants even where compiling them is slow.
        ("FAKE_GPU_ROUND_MS".into(), "1".into()),
        ("FAKE_GPU_SET_MS".into(), "heldout:1500 all:1500".into()),
    ]);
    let mut backend = start(&common::spec_fixture("vecadd"), gpu, false);
    let (mut engine, ir) = vecadd_search(8);
    let mut outlived = 0;
    for _ in 0..5 {
        let report = engine.step(&ir, &mut backend).unwrap();
        outlived += usize::from(backend.promotion_started());
        for v in &report.validated {
            assert!(v.generation < report.generation, "{v:?}");
        }
    }
    assert!(outlived > 0, "every step waited for its promotion");
    engine.promote_last(&ir, &mut backend).unwrap();
    assert!(!backend.promotion_started());
    assert_promotions_taken_in(&engine);
}

/// A batch whose own variants are measured ends though the promotion's
/// measurement on the first GPU (1.5 s) is under way: the next batch's
/// run delivers its answer. Idle GPUs measure the next batch ahead while a
/// batch's last variants are measured. Every measurement on the train
/// tests is one the generations' reports count, once, and every promotion
/// is taken in.
#[test]
fn no_batch_waits_for_the_promotion_measurement_under_way() {
    let dir = tempfile::tempdir().unwrap();
    let races = dir.path().join("races");
    let mut gpu = two_fake_gpus(dir.path());
    gpu.env.extend([
        ("FAKE_GPU_ROUND_MS".into(), "1".into()),
        ("FAKE_GPU_SET_MS".into(), "heldout:1500 all:1500".into()),
        ("FAKE_GPU_RACE_LOG".into(), races.clone().into()),
    ]);
    let mut backend = start(&common::spec_fixture("vecadd"), gpu, false);
    let (mut engine, ir) = vecadd_search(8);
    let (mut measured, mut ahead, mut carried) = (0, 0, 0);
    for _ in 0..5 {
        let report = engine.step(&ir, &mut backend).unwrap();
        let u = report.utilization.expect("the GPU backend reports");
        measured += u.measured;
        ahead += u.measured_ahead;
        carried += u.promotion_carried;
    }
    assert!(ahead > 0, "no variant measured ahead in 5 steps");
    assert!(
        carried > 0,
        "every batch waited for the promotion's measurement"
    );
    let train = std::fs::read_to_string(&races)
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("train "))
        .count() as u64;
    assert_eq!(train, measured);
    engine.promote_last(&ir, &mut backend).unwrap();
    assert_promotions_taken_in(&engine);
}

/// A stop seen between steps (a daemon's pause: `Ended::Stopped`, the
/// backend kept) leaves the promotion running beside the search waiting,
/// with nothing measured meanwhile; with the stop lifted, the next steps'
/// batches serve it again, and `promote_last` to its end, its results
/// taken in.
#[test]
fn a_promotion_waits_out_a_pause_between_steps() {
    let dir = tempfile::tempdir().unwrap();
    let races = dir.path().join("races.log");
    let mut gpu = two_fake_gpus(dir.path());
    gpu.env.extend([
        ("FAKE_GPU_RACE_LOG".into(), races.clone().into()),
        ("FAKE_GPU_ROUND_MS".into(), "1".into()),
        ("FAKE_GPU_SET_MS".into(), "heldout:300 all:300".into()),
    ]);
    let stop = Arc::new(AtomicBool::new(false));
    let spec = common::spec_fixture("vecadd");
    let mut backend = start_stoppable(&spec, gpu, false, Measurement::Fixed, stop.clone());
    let (mut engine, ir) = vecadd_search(8);
    engine.step(&ir, &mut backend).unwrap();
    while !backend.promotion_started() {
        engine.step(&ir, &mut backend).unwrap();
    }
    // The pause: stopped between steps, nothing starts (a promotion
    // measurement the last batch left under way finishes: 300 ms).
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    std::thread::sleep(Duration::from_millis(400));
    let lines = || {
        std::fs::read_to_string(&races)
            .unwrap_or_default()
            .lines()
            .count()
    };
    let before = lines();
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(lines(), before, "something was measured during the pause");
    stop.store(false, std::sync::atomic::Ordering::Relaxed);
    // A batch measured ahead during the step before the pause ends at
    // once; the next one measures again.
    for _ in 0..3 {
        engine.step(&ir, &mut backend).unwrap();
        if lines() > before {
            break;
        }
    }
    assert!(lines() > before, "nothing measured after the pause");
    engine.promote_last(&ir, &mut backend).unwrap();
    assert!(!backend.promotion_started());
    assert_promotions_taken_in(&engine);
}

/// A stop while a generation's promotion runs beside the next batch ends
/// the step at once, the promotion with it: no request waits for an answer
/// that will not come, and the engine is as it was.
#[test]
fn a_stop_ends_a_step_whose_promotion_runs_beside_its_batch() {
    let dir = tempfile::tempdir().unwrap();
    let races = dir.path().join("races.log");
    let mut gpu = fake_gpu("", &dir.path().join("counter"));
    gpu.env.extend([
        ("FAKE_GPU_RACE_LOG".into(), races.clone().into()),
        // 300 ms a variant: the step lasts long after the stop.
        ("FAKE_GPU_ROUND_MS".into(), "20".into()),
    ]);
    let stop = Arc::new(AtomicBool::new(false));
    let spec = common::spec_fixture("vecadd");
    let mut backend = start_stoppable(&spec, gpu, false, Measurement::Fixed, stop.clone());
    let (mut engine, ir) = vecadd_search(8);
    engine.step(&ir, &mut backend).unwrap();
    let before = engine.clone();
    let flag = stop.clone();
    let log = races.clone();
    let stopper = std::thread::spawn(move || {
        // Stop once promotion's first measurement reached the GPU.
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while std::time::Instant::now() < deadline {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if text.lines().any(|l| !l.starts_with("train ")) {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        flag.store(true, std::sync::atomic::Ordering::Relaxed);
        std::time::Instant::now()
    });
    let result = engine.step(&ir, &mut backend);
    let stopped_at = stopper.join().unwrap();
    let text = std::fs::read_to_string(&races).unwrap();
    assert!(
        text.lines().any(|l| !l.starts_with("train ")),
        "generation 0 had something to promote: {text}"
    );
    assert!(
        matches!(
            result,
            Err(gevo_search::evolve::EvolveError::Backend(
                gevo_search::evolve::BackendError::Interrupted
            ))
        ),
        "{result:?}"
    );
    assert!(
        stopped_at.elapsed() < Duration::from_secs(5),
        "the step took {:?} after the stop",
        stopped_at.elapsed()
    );
    assert_eq!(engine, before, "a stopped step changes nothing");
}

/// A GPU worker lost while promotion waits beside a batch for its
/// measurement, with no replacement able to start: the step fails with the
/// pool's reason instead of waiting for an answer that will not come.
#[test]
fn a_lost_gpu_ends_a_step_whose_promotion_waits_for_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut gpu = fake_gpu("", &dir.path().join("counter"));
    gpu.env.extend([
        ("FAKE_GPU_CRASH_SET".into(), "heldout".into()),
        ("FAKE_GPU_STARTS".into(), "1".into()),
        ("FAKE_GPU_ROUND_MS".into(), "5".into()),
    ]);
    let mut backend = start(&common::spec_fixture("vecadd"), gpu, false);
    let (mut engine, ir) = vecadd_search(8);
    engine.step(&ir, &mut backend).unwrap();
    let started = std::time::Instant::now();
    let failed = (0..3).find_map(|_| engine.step(&ir, &mut backend).err());
    let e = failed
        .expect("a held-out measurement crashed its worker")
        .to_string();
    assert!(e.contains("before greeting"), "{e}");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
}
