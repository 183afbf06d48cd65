//! Generating a spec's test inputs at GPU sizes, on one thread and on every
//! core: what a GPU worker spends at each start (and after each variant that
//! crashes one) before it measures anything. The bytes are checked equal.
//! Writes its section of BENCHMARKS.md. Run with `scripts/bench.sh`.

mod report;

use gevo_model::spec::{self, ArgValue, Spec, TestSet, TestTarget};
use std::path::PathBuf;
use std::time::Instant;

const ROUNDS: usize = 3;
const FIXTURES: [&str; 2] = ["reduce", "loops"];

struct Row {
    fixture: &'static str,
    bytes: usize,
    one_s: f64,
    all_s: f64,
}

/// Every GPU test's buffers, made on `threads` threads: their bytes and
/// the median seconds of `ROUNDS` runs.
fn generate(spec: &Spec, threads: usize) -> (Vec<Vec<u8>>, f64) {
    let mut seconds = Vec::new();
    let mut buffers = Vec::new();
    for _ in 0..ROUNDS {
        let started = Instant::now();
        buffers = spec
            .tests(TestSet::All)
            .into_iter()
            .flat_map(|t| spec.instantiate_on(t, threads).unwrap().args)
            .filter_map(|a| match a {
                ArgValue::Buffer { data, .. } => Some(data),
                ArgValue::Scalar(_) => None,
            })
            .collect();
        seconds.push(started.elapsed().as_secs_f64());
    }
    seconds.sort_by(f64::total_cmp);
    (buffers, seconds[ROUNDS / 2])
}

fn main() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut rows = Vec::new();
    for fixture in FIXTURES {
        let path = root.join(format!("tests/fixtures/kernels/{fixture}.gevo.toml"));
        let spec = spec::load(&path).unwrap().for_backend(TestTarget::Gpu);
        let (one, one_s) = generate(&spec, 1);
        let (all, all_s) = generate(&spec, cores);
        assert!(
            one == all,
            "{fixture}: the bytes depend on the thread count"
        );
        let bytes = one.iter().map(Vec::len).sum();
        println!(
            "{fixture:8} {bytes:>12} bytes  1 thread {one_s:.3} s  {cores} threads {all_s:.3} s"
        );
        rows.push(Row {
            fixture,
            bytes,
            one_s,
            all_s,
        });
    }
    let mut section = format!(
        "## Test inputs at GPU sizes\n\nCommand: `scripts/bench.sh` (runs `cargo bench -p gevod --bench inputs`). \
         Machine: {}. Date: {}.\n\n\
         Every `[tests.gpu]` buffer of the fixture generated as a GPU worker does at each start (and after each \
         variant that crashes one), on one thread and on {cores}; median of {ROUNDS} runs, the bytes checked \
         equal. The GPU test machine has 16 cores.\n\n\
         | fixture | bytes | 1 thread | {cores} threads | speedup |\n|---|---:|---:|---:|---:|\n",
        report::machine(),
        report::today(),
    );
    for r in &rows {
        section += &format!(
            "| {} | {} | {:.2} s | {:.2} s | {:.2}x |\n",
            r.fixture,
            r.bytes,
            r.one_s,
            r.all_s,
            r.one_s / r.all_s
        );
    }
    report::write_section(&root.join("BENCHMARKS.md"), "inputs", &section);
}
