//! Several GPU workers behind one search, emulated on the CPU: the GPU
//! backend (real `gevod eval-worker` compile workers, the simulator
//! pre-screen off, and 1, 2 or 4 stand-in GPU workers,
//! tests/fixtures/fake/gpu-worker.sh, each answer sleeping rounds x
//! FAKE_GPU_ROUND_MS as a GPU's time would pass) evaluates the same batches
//! of random valid patches of a real fixture (stencil, and the wavefront
//! pipeline), racing them against 1.0 as the search does. Records variants
//! measured per second, their ratio to one worker (one run), and each
//! worker's busy share from the times the stand-in logs, in BENCHMARKS.md
//! (section `bench:gpu_workers`). Each worker count runs twice: each batch
//! alone, and each with its successor handed ahead before it is evaluated
//! (`Backend::compile_ahead`, as the engine's steps do on the GPU), so the
//! successor compiles, and is measured where a worker would wait, meanwhile.
//!
//! `GEVO_BENCH_ROUND_MS` (default 40) sets the emulated time of a round;
//! `GEVO_BENCH_BATCHES` (default 3) and `GEVO_BENCH_BATCH` (default 48) the
//! batches; `GEVO_BENCH_COMPILE` (default 2) the compile workers.

mod report;
use report::{repo_root, setting};
// The tests' stand-ins: eval-worker pools and the GPU the fake worker claims to be.
#[path = "../tests/common/workers.rs"]
mod workers;

use gevo_ir::{KernelIr, Patch};
use gevo_model::spec::{self, TestSet};
use gevo_search::evolve::Backend;
use gevod::cuda::measure::Measurement;
use gevod::worker::gpu::{CudaBackend, CudaOptions};
use rand::SeedableRng;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

const WORKERS: [usize; 3] = [1, 2, 4];

/// `batches` batches of `size` random valid patches (1 to 3 edits each).
fn batches(ir: &KernelIr, batches: usize, size: usize) -> Vec<Vec<Patch>> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(38);
    (0..batches)
        .map(|b| {
            (0..size)
                .map(|k| ir.mutate(&mut rng, 1 + (b + k) % 3).unwrap())
                .collect()
        })
        .collect()
}

struct Run {
    workers: usize,
    measured: usize,
    /// Each batch's successor was handed ahead.
    ahead: bool,
    wall_s: f64,
    /// Per worker (device), the share of the wall time it held a request.
    busy: Vec<f64>,
    /// Per worker, requests answered.
    requests: Vec<usize>,
    /// Per worker, the mean milliseconds from an answer to its next request.
    gap_ms: Vec<f64>,
}

/// One worker's requests as its time log says: busy seconds, requests, and
/// (received, answered) per request.
type Worker = (f64, usize, Vec<(f64, f64)>);

impl Run {
    fn rate(&self) -> f64 {
        self.measured as f64 / self.wall_s
    }
}

fn run(spec_path: &Path, patches: &[Vec<Patch>], workers: usize, ahead: bool, dir: &Path) -> Run {
    let spec = spec::load(spec_path).unwrap();
    let time_log = dir.join(format!("times-{workers}"));
    let _ = std::fs::remove_file(&time_log);
    let round_ms = setting("GEVO_BENCH_ROUND_MS", 40);
    let gpu = workers::fake_gpus(
        workers,
        vec![
            ("FAKE_GPU_COUNTER".into(), dir.join("counter").into()),
            ("FAKE_GPU_ROUND_MS".into(), round_ms.to_string().into()),
            ("FAKE_GPU_TIME_LOG".into(), time_log.clone().into()),
        ],
    );
    let compile = workers::eval_workers(spec_path, setting("GEVO_BENCH_COMPILE", 2));
    let options = CudaOptions {
        compile,
        gpu,
        device: workers::fake_device(),
        arch: "sm_90".into(),
        cubin_for: None,
        // With the pre-screen most random variants stop on the simulator
        // as mismatches; what is emulated here is the GPU workers' side.
        prescreen: gevod::config::Prescreen::Off,
        gate: None,
        measurement: Measurement::Adaptive,
    };
    let mut backend = CudaBackend::start(options, &spec, Arc::new(AtomicBool::new(false))).unwrap();
    backend.race_against(Some(1.0));
    let mut known = BTreeSet::new();
    let started = Instant::now();
    for (i, batch) in patches.iter().enumerate() {
        if ahead {
            let (next, coming) = std::sync::mpsc::channel();
            backend.compile_ahead(coming);
            if let Some(successor) = patches.get(i + 1) {
                next.send(successor.clone()).unwrap();
            }
        }
        let evaluated = backend
            .evaluate(batch, TestSet::Train, &|h| known.contains(h))
            .unwrap();
        for e in evaluated {
            if let (Ok(b), Some(_)) = (e.build, e.assessment) {
                known.insert(b.ptx_hash);
            }
        }
    }
    let wall_s = started.elapsed().as_secs_f64();
    drop(backend);
    let text = std::fs::read_to_string(&time_log).unwrap_or_default();
    // Per worker: busy seconds, requests, and (received, answered) pairs.
    let mut per: BTreeMap<String, Worker> = BTreeMap::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        let (received, answered): (f64, f64) = (f[2].parse().unwrap(), f[3].parse().unwrap());
        let e = per.entry(f[0].to_string()).or_default();
        e.0 += answered - received;
        e.1 += 1;
        e.2.push((received, answered));
    }
    let gap_ms = per
        .values()
        .map(|(_, _, times)| {
            let gaps: Vec<f64> = times.windows(2).map(|w| w[1].0 - w[0].1).collect();
            1000.0 * gaps.iter().sum::<f64>() / gaps.len().max(1) as f64
        })
        .collect();
    Run {
        workers,
        measured: text.lines().count(),
        ahead,
        wall_s,
        busy: per.values().map(|(s, _, _)| s / wall_s).collect(),
        requests: per.values().map(|(_, n, _)| *n).collect(),
        gap_ms,
    }
}

fn table(name: &str, runs: &[Run]) -> String {
    let base = runs[0].rate();
    let mut t = format!(
        "{name}:\n\n| fake GPU workers | successor ahead | variants measured | seconds | variants/s | vs 1 worker | each worker busy | requests each | mean gap before a request, ms |\n|---|---|---|---|---|---|---|---|---|\n"
    );
    for r in runs {
        let busy: Vec<String> = r
            .busy
            .iter()
            .map(|b| format!("{:.0}%", b * 100.0))
            .collect();
        let each: Vec<String> = r.requests.iter().map(|n| n.to_string()).collect();
        let gaps: Vec<String> = r.gap_ms.iter().map(|g| format!("{g:.0}")).collect();
        t += &format!(
            "| {} | {} | {} | {:.1} | {:.2} | **{:.2}x** | {} | {} | {} |\n",
            r.workers,
            if r.ahead { "yes" } else { "no" },
            r.measured,
            r.wall_s,
            r.rate(),
            r.rate() / base,
            busy.join(", "),
            each.join(", "),
            gaps.join(", ")
        );
    }
    t + "\n"
}

fn main() {
    let root = repo_root();
    // Compile workers link the team's libdevice stand-in where a kernel
    // needs it.
    std::env::set_var("GEVO_LIBDEVICE", report::stub_libdevice());
    let (count, size) = (
        setting("GEVO_BENCH_BATCHES", 3),
        setting("GEVO_BENCH_BATCH", 48),
    );
    let fixtures = [
        (
            "stencil",
            root.join("tests/fixtures/kernels/stencil.gevo.toml"),
        ),
        (
            "wavefront (pipeline)",
            root.join("tests/fixtures/pipelines/wavefront.gevo.toml"),
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    let mut body = format!(
        "## Several GPU workers with emulated GPU time (this machine, fake GPU workers)\n\n\
         Machine: {}; {}. Command: `cargo bench -p gevod --bench gpu_workers --profile dev`.\n\
         An emulation on the CPU, not a GPU measurement: real compile workers ({} `gevod eval-worker`,\n\
         simulator pre-screen off, as most random variants now stop there as mismatches) feed 1, 2 or 4\n\
         stand-in GPU workers (tests/fixtures/fake/gpu-worker.sh)\n\
         whose answers sleep {} ms per round (15 rounds, or 5 for a variant raced out against 1.0).\n\
         The same {count} batches of {size} random valid patches per fixture, each distinct PTX measured once;\n\
         busy share: the seconds a worker held a request over the batches' wall time; gap: from a worker's\n\
         answer to its next request, as the stand-in logs them.\n\n",
        report::machine(),
        report::today(),
        setting("GEVO_BENCH_COMPILE", 2),
        setting("GEVO_BENCH_ROUND_MS", 40),
    );
    for (name, spec_path) in &fixtures {
        let spec = spec::load(spec_path).unwrap();
        let ir = KernelIr::load_kernels(&spec.ir, &spec.kernels).unwrap();
        let patches = batches(&ir, count, size);
        for ahead in [false, true] {
            let runs: Vec<Run> = WORKERS
                .iter()
                .map(|&n| {
                    let dir = dir.path().join(name.split(' ').next().unwrap());
                    std::fs::create_dir_all(&dir).unwrap();
                    let r = run(spec_path, &patches, n, ahead, &dir);
                    eprintln!(
                        "{name}: {n} workers, ahead {ahead}: {} measured in {:.1} s, busy {:?}",
                        r.measured, r.wall_s, r.busy
                    );
                    r
                })
                .collect();
            body += &table(name, &runs);
        }
    }
    report::write_section(&root.join("BENCHMARKS.md"), "gpu_workers", &body);
}
