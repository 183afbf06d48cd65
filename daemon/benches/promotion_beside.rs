//! Promotion beside the search on several GPU workers, emulated on the
//! CPU: the engine's steps on the GPU backend (real `gevod eval-worker`
//! compile workers, stand-in GPU workers, tests/fixtures/fake/gpu-worker.sh,
//! sleeping FAKE_GPU_ROUND_MS a round on the train tests and
//! `GEVO_BENCH_PROMOTION_MS` a measurement of promotion's), with batches
//! that leave promotion's measurement under way to the next batch (the
//! default) and with batches that wait for it. Records variants measured
//! per second, steps per second and promotion's measurements carried, and
//! the ratio of the two ways, in BENCHMARKS.md (section
//! `bench:promotion_beside`).
//!
//! `GEVO_BENCH_GPUS` (default 4) stand-in GPU workers; `GEVO_BENCH_STEPS`
//! (default 12) steps of a vecadd search of population
//! `GEVO_BENCH_POPULATION` (default 16); `GEVO_BENCH_ROUND_MS` (default 5).

mod report;
use report::{repo_root, setting};
#[path = "../tests/common/workers.rs"]
mod workers;

use gevo_ir::KernelIr;
use gevo_model::spec;
use gevo_search::evolve::{Config, Engine};
use gevod::cuda::measure::Measurement;
use gevod::worker::gpu::{CudaBackend, CudaOptions};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

struct Run {
    carry: bool,
    steps: usize,
    measured: u64,
    carried: u64,
    wall_s: f64,
}

fn run(spec_path: &Path, carry: bool, dir: &Path) -> Run {
    let spec = spec::load(spec_path).unwrap();
    let ir = KernelIr::load_kernels(&spec.ir, &spec.kernels).unwrap();
    let gpus = setting("GEVO_BENCH_GPUS", 4);
    let promotion_ms = setting("GEVO_BENCH_PROMOTION_MS", 1500);
    let gpu = workers::fake_gpus(
        gpus,
        vec![
            ("FAKE_GPU_COUNTER".into(), dir.join("counter").into()),
            (
                "FAKE_GPU_ROUND_MS".into(),
                setting("GEVO_BENCH_ROUND_MS", 5).to_string().into(),
            ),
            (
                "FAKE_GPU_SET_MS".into(),
                format!("heldout:{promotion_ms} all:{promotion_ms}").into(),
            ),
        ],
    );
    let options = CudaOptions {
        compile: workers::eval_workers(spec_path, 2),
        gpu,
        device: workers::fake_device(),
        arch: "sm_90".into(),
        cubin_for: None,
        prescreen: gevod::config::Prescreen::Off,
        gate: None,
        measurement: Measurement::Fixed,
    };
    let mut backend = CudaBackend::start(options, &spec, Arc::new(AtomicBool::new(false))).unwrap();
    backend.carry_promotion(carry);
    let config = Config {
        population: setting("GEVO_BENCH_POPULATION", 16),
        islands: 1,
        ..Config::default()
    };
    let mut engine = Engine::new(config, 5).unwrap();
    let steps = setting("GEVO_BENCH_STEPS", 12);
    let (mut measured, mut carried) = (0, 0);
    let started = Instant::now();
    for _ in 0..steps {
        let report = engine.step(&ir, &mut backend).unwrap();
        let u = report.utilization.expect("the GPU backend reports");
        measured += u.measured;
        carried += u.promotion_carried;
    }
    let wall_s = started.elapsed().as_secs_f64();
    engine.promote_last(&ir, &mut backend).unwrap();
    Run {
        carry,
        steps,
        measured,
        carried,
        wall_s,
    }
}

fn main() {
    let root = repo_root();
    std::env::set_var("GEVO_LIBDEVICE", report::stub_libdevice());
    let spec_path = root.join("tests/fixtures/kernels/vecadd.gevo.toml");
    let dir = tempfile::tempdir().unwrap();
    let runs: Vec<Run> = [true, false]
        .into_iter()
        .map(|carry| {
            let r = run(&spec_path, carry, dir.path());
            eprintln!(
                "carry {carry}: {} measured in {:.1} s, {} carried",
                r.measured, r.wall_s, r.carried
            );
            r
        })
        .collect();
    let rate = |r: &Run| r.measured as f64 / r.wall_s;
    let mut body = format!(
        "## Promotion beside the search on several GPU workers (this machine, fake GPU workers)\n\n\
         Machine: {}; {}. Command: `cargo bench -p gevod --bench promotion_beside --profile dev`.\n\
         An emulation on the CPU, not a GPU measurement: the engine's steps (vecadd, population {}, seed 5)\n\
         on the GPU backend with 2 real compile workers and {} stand-in GPU workers, whose train rounds\n\
         sleep {} ms and whose measurements for promotion (held-out tests, on the first worker) sleep\n\
         {} ms each; {} steps, then the promotion still running served to its end (not timed).\n\
         Carried: promotion's measurements a batch ended with under way, left to the next batch.\n\n\
         | batches | steps | variants measured | seconds | variants/s | steps/s | carried |\n\
         |---|---|---|---|---|---|---|\n",
        report::machine(),
        report::today(),
        setting("GEVO_BENCH_POPULATION", 16),
        setting("GEVO_BENCH_GPUS", 4),
        setting("GEVO_BENCH_ROUND_MS", 5),
        setting("GEVO_BENCH_PROMOTION_MS", 1500),
        setting("GEVO_BENCH_STEPS", 12),
    );
    for r in &runs {
        body += &format!(
            "| {} | {} | {} | {:.1} | {:.1} | {:.2} | {} |\n",
            match r.carry {
                true => "leave promotion's measurement under way",
                false => "wait for it",
            },
            r.steps,
            r.measured,
            r.wall_s,
            rate(r),
            r.steps as f64 / r.wall_s,
            r.carried
        );
    }
    body += &format!(
        "\nLeaving it to the next batch: **{:.2}x** the variants measured a second of waiting for it.\n\n",
        rate(&runs[0]) / rate(&runs[1])
    );
    report::write_section(&root.join("BENCHMARKS.md"), "promotion_beside", &body);
}
