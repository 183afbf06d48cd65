//! The GPU backend's tests without a GPU: starting it on real compile
//! workers and a stand-in GPU worker (tests/fixtures/fake/gpu-worker.sh),
//! and reading what it measured.

use crate::common;

use common::workers::{eval_workers, fake_device};
use gevo_ir::Patch;
use gevo_model::spec;
use gevo_search::evolve::{Config, Engine, Evaluated};
use gevod::config::Prescreen;
use gevod::cuda::measure::Measurement;
use gevod::worker::gpu::{CudaBackend, CudaOptions};
use gevod::worker::pool::PoolOptions;
use rand::SeedableRng;
use std::ffi::OsString;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

pub fn backend(plan: &str, counter: &Path, prescreen: impl Into<Prescreen>) -> CudaBackend {
    backend_for(&common::spec_fixture("vecadd"), plan, counter, prescreen)
}

pub fn backend_for(
    spec_path: &Path,
    plan: &str,
    counter: &Path,
    prescreen: impl Into<Prescreen>,
) -> CudaBackend {
    start(spec_path, fake_gpu(plan, counter), prescreen)
}

/// One stand-in GPU worker following `plan`, counting requests in `counter`.
pub fn fake_gpu(plan: &str, counter: &Path) -> PoolOptions {
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

/// One stand-in GPU worker logging each request's test set and race
/// threshold to the file returned (`FAKE_GPU_RACE_LOG`), under `dir`.
pub fn fake_gpu_logging_races(dir: &Path) -> (PoolOptions, std::path::PathBuf) {
    let races = dir.join("races.log");
    let mut gpu = fake_gpu("", &dir.join("counter"));
    gpu.env
        .push(("FAKE_GPU_RACE_LOG".into(), races.clone().into()));
    (gpu, races)
}

/// Two stand-in GPU workers, on devices GPU-A and GPU-B (`--devices A,B`).
pub fn two_fake_gpus(dir: &Path) -> PoolOptions {
    let mut gpu = fake_gpu("", &dir.join("counter"));
    gpu.workers = 2;
    gpu.slot_args = ["GPU-A", "GPU-B"]
        .iter()
        .map(|d| vec!["--device".into(), (*d).into()])
        .collect();
    gpu
}

pub fn start(spec_path: &Path, gpu: PoolOptions, prescreen: impl Into<Prescreen>) -> CudaBackend {
    start_measuring(spec_path, gpu, prescreen, Measurement::Adaptive)
}

pub fn start_measuring(
    spec_path: &Path,
    gpu: PoolOptions,
    prescreen: impl Into<Prescreen>,
    measurement: Measurement,
) -> CudaBackend {
    let stop = Arc::new(AtomicBool::new(false));
    start_stoppable(spec_path, gpu, prescreen, measurement, stop)
}

/// The backend, stopped when `stop` is set.
pub fn start_stoppable(
    spec_path: &Path,
    gpu: PoolOptions,
    prescreen: impl Into<Prescreen>,
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
        prescreen: prescreen.into(),
        gate: None,
        measurement,
    };
    CudaBackend::start(options, &spec, stop).unwrap()
}

/// vecadd's backend whose two compile workers assemble what the GPU
/// measures for sm_90, with the ptxas and the rest that `compile_env` sets.
pub fn start_assembling(
    gpu: PoolOptions,
    compile_env: Vec<(OsString, OsString)>,
    prescreen: impl Into<Prescreen>,
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
        prescreen: prescreen.into(),
        gate: None,
        measurement: Measurement::Adaptive,
    };
    let spec = spec::load(&spec_path).unwrap();
    CudaBackend::start(options, &spec, Arc::new(AtomicBool::new(false))).unwrap()
}

/// A one-island search of `population` on vecadd (seed 5), and its IR:
/// the promotion tests' engine.
pub fn vecadd_search(population: usize) -> (Engine, gevo_ir::KernelIr) {
    let config = Config {
        population,
        islands: 1,
        // The fake GPU's costs are made up: selection on the generated
        // tests (real simulator runs) would reject what it calls faster.
        generality_in_selection: false,
        ..Config::default()
    };
    (Engine::new(config, 5).unwrap(), common::load("vecadd"))
}

/// Some promotion ended and was taken in: a variant validated or a
/// failure recorded.
pub fn assert_promotions_taken_in(engine: &Engine) {
    assert!(
        !engine.validated().is_empty() || !engine.promotion_failures().is_empty(),
        "the promotions' results were never taken in"
    );
}

/// Random patches of 1 to 3 edits (more than a compile chunk, so the
/// pipeline overlaps several).
pub fn patches(seed: u64, count: usize) -> Vec<Patch> {
    let ir = common::load("vecadd");
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    (0..count)
        .map(|k| ir.mutate(&mut rng, 1 + k % 3).unwrap())
        .collect()
}

/// The failure of each variant the GPU worker saw, in request order
/// (`None`: passed).
pub fn measured(results: &[Evaluated]) -> Vec<Option<String>> {
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
pub fn failures(seen: &[Option<String>]) -> Vec<&'static str> {
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

/// A planted patch of a kernel fixture, `tests/fixtures/kernels/NAME.patch.json`.
pub fn kernel_patch(name: &str) -> Patch {
    let path = common::repo_root().join(format!("tests/fixtures/kernels/{name}.patch.json"));
    Patch::from_json(&std::fs::read_to_string(path).unwrap()).unwrap()
}
