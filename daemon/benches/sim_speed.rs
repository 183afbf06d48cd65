//! Simulator speed in executed IR instructions per second, on one worker
//! thread (per core), for the stencil and reduction fixtures. Writes its
//! section of BENCHMARKS.md. Run with `scripts/bench.sh`.

mod report;
use report::repo_root;

use gevo_ir::KernelIr;
use gevo_model::sim::{self, pointer, GlobalMemory, LaunchDims, Limits};
use std::path::Path;
use std::time::Instant;

const TARGET: f64 = 100e6;
const ROUNDS: usize = 5;

struct Row {
    name: &'static str,
    shape: String,
    steps: u64,
    rate: f64,
}

fn measure(name: &'static str, shape: String, run: impl Fn() -> sim::RunStats) -> Row {
    let steps = run().steps; // warm-up
    let mut rates: Vec<f64> = (0..ROUNDS)
        .map(|_| {
            let t = Instant::now();
            let s = run();
            s.steps as f64 / t.elapsed().as_secs_f64()
        })
        .collect();
    rates.sort_by(f64::total_cmp);
    let rate = rates[ROUNDS / 2];
    println!(
        "{name:8} {shape:28} {steps:>12} instructions  {:8.1} M/s",
        rate / 1e6
    );
    Row {
        name,
        shape,
        steps,
        rate,
    }
}

fn main() {
    let root = repo_root();
    let load = |name: &str| {
        KernelIr::load(
            &root.join(format!("tests/fixtures/kernels/{name}.ll")),
            None,
        )
        .unwrap()
    };
    let limits = Limits {
        block_step_budget: u64::MAX,
    };
    let mut rows = Vec::new();

    let ir = load("stencil");
    let program = ir.lower(&ir.empty_patch()).unwrap();
    let (nx, ny) = (512u32, 512u32);
    let input: Vec<u8> = (0..nx * ny)
        .flat_map(|i| ((i % 97) as f32).to_le_bytes())
        .collect();
    let dims = LaunchDims {
        grid: [nx / 16, ny / 16, 1],
        block: [16, 16, 1],
        dynamic_shared_bytes: 0,
    };
    rows.push(measure(
        "stencil",
        format!("{nx}x{ny}, 16x16 blocks"),
        || {
            let mem = GlobalMemory::new(&[&input, &vec![0u8; input.len()]]);
            let args = [
                pointer::make(pointer::GLOBAL, 0, 0),
                pointer::make(pointer::GLOBAL, 1, 0),
                u64::from(nx),
                u64::from(ny),
            ];
            sim::run(&program, &dims, &args, &mem, limits, 1).unwrap()
        },
    ));

    let ir = load("reduce");
    let program = ir.lower(&ir.empty_patch()).unwrap();
    let n = 1u32 << 18;
    let input: Vec<u8> = (0..n)
        .flat_map(|i| ((i % 13) as f32).to_le_bytes())
        .collect();
    let dims = LaunchDims {
        grid: [n / 256, 1, 1],
        block: [256, 1, 1],
        dynamic_shared_bytes: 0,
    };
    rows.push(measure(
        "reduce",
        format!("{n} elements, 256-thread blocks"),
        || {
            let mem = GlobalMemory::new(&[&input, &vec![0u8; (n / 256 * 4) as usize]]);
            let args = [
                pointer::make(pointer::GLOBAL, 0, 0),
                pointer::make(pointer::GLOBAL, 1, 0),
                u64::from(n),
            ];
            sim::run(&program, &dims, &args, &mem, limits, 1).unwrap()
        },
    ));
    write_report(&root.join("BENCHMARKS.md"), &rows);
}

fn write_report(path: &Path, rows: &[Row]) {
    let mut section = format!(
        "## Simulator speed\n\nCommand: `scripts/bench.sh` (runs `cargo bench -p gevod --bench sim_speed`). Machine: {}. Date: {}.\n\n\
         Executed IR instructions per second on one worker thread (one core), median of {ROUNDS} runs of the whole grid \
         with bounds, race and budget checks on. The instruction counts are deterministic. Target: {} million per second per core.\n\n\
         | fixture | launch | instructions per run | million instructions/s | target met |\n|---|---|---:|---:|---|\n",
        report::machine(),
        report::today(),
        TARGET / 1e6
    );
    for r in rows {
        section += &format!(
            "| {} | {} | {} | {:.1} | {} |\n",
            r.name,
            r.shape,
            r.steps,
            r.rate / 1e6,
            if r.rate >= TARGET { "yes" } else { "no" }
        );
    }
    report::write_section(path, "sim-speed", &section);
}
