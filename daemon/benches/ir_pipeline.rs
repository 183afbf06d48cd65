//! Patch -> verified IR -> PTX, in process, beside the same work done the way
//! the reference GEVO implementation did it: one `opt` process to verify the
//! patched IR, one `llc` process to emit PTX (plus `llvm-link` for kernels
//! that need libdevice). Runs alternate so machine drift hits both; the
//! medians and their ratio go to BENCHMARKS.md.
//!
//! Run with `scripts/bench.sh` (or `cargo bench -p gevod --bench ir_pipeline`).
//! The process pipeline is given the already-patched IR untimed, which favours
//! it: the edits themselves are not counted against it.

mod report;
use report::repo_root;

use gevo_ir::{CodegenOptions, KernelIr};
use rand::SeedableRng;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const FIXTURES: [&str; 6] = ["vecadd", "reduce", "stencil", "nw", "loops", "expf"];
const EDITS: usize = 10;
const ROUNDS: usize = 30;
const TARGET_RATIO: f64 = 10.0;

fn llvm_tool(name: &str) -> String {
    let versioned = format!("{name}-19");
    let in_prefix = format!("/usr/lib/llvm-19/bin/{name}");
    if Path::new(&in_prefix).exists() {
        in_prefix
    } else {
        versioned
    }
}

fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn median(samples: &mut [Duration]) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

struct Row {
    name: &'static str,
    instructions: u32,
    in_process: Duration,
    pipeline: Duration,
}

fn main() {
    let root = repo_root();
    let libdevice = report::stub_libdevice();
    let options = CodegenOptions {
        libdevice: Some(libdevice.clone()),
        ..CodegenOptions::default()
    };
    let work = tempfile::tempdir().expect("temp dir");
    let (opt, llc, link) = (llvm_tool("opt"), llvm_tool("llc"), llvm_tool("llvm-link"));
    let mut rows = Vec::new();
    for name in FIXTURES {
        let ir = KernelIr::load(
            &root.join(format!("tests/fixtures/kernels/{name}.ll")),
            None,
        )
        .expect("fixture loads");
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let patch = ir.mutate(&mut rng, EDITS).expect("mutation");
        let patched = work.path().join(format!("{name}.ll"));
        std::fs::write(&patched, ir.apply(&patch).expect("patch applies")).unwrap();
        let verified = work.path().join(format!("{name}.opt.ll"));
        let linked = work.path().join(format!("{name}.linked.ll"));
        let ptx = work.path().join(format!("{name}.ptx"));
        let needs_libdevice = ir.text().contains("@__nv_");

        let mut in_process = Vec::new();
        let mut pipeline = Vec::new();
        for round in 0..ROUNDS + 3 {
            let t = Instant::now();
            let compiled = ir.compile(&patch, &options).expect("compiles");
            let a = t.elapsed();
            std::hint::black_box(compiled);

            let t = Instant::now();
            run(Command::new(&opt)
                .args(["-passes=verify", "-S", "-o"])
                .arg(&verified)
                .arg(&patched));
            let llc_input = if needs_libdevice {
                run(Command::new(&link)
                    .arg("-S")
                    .arg("-o")
                    .arg(&linked)
                    .arg(&verified)
                    .arg(&libdevice));
                &linked
            } else {
                &verified
            };
            run(Command::new(&llc)
                .args(["-mtriple=nvptx64-nvidia-cuda", "-mcpu=sm_90", "-o"])
                .arg(&ptx)
                .arg(llc_input));
            let b = t.elapsed();
            if round >= 3 {
                in_process.push(a);
                pipeline.push(b);
            }
        }
        let row = Row {
            name,
            instructions: ir.instruction_count(),
            in_process: median(&mut in_process),
            pipeline: median(&mut pipeline),
        };
        println!(
            "{:8} in-process {:7.3} ms  process pipeline {:7.3} ms  ratio {:5.1}x",
            row.name,
            ms(row.in_process),
            ms(row.pipeline),
            ratio(&row)
        );
        rows.push(row);
    }
    write_report(&root.join("BENCHMARKS.md"), &rows);
}

fn ratio(row: &Row) -> f64 {
    row.pipeline.as_secs_f64() / row.in_process.as_secs_f64()
}

/// Replaces this benchmark's section of BENCHMARKS.md, keeping the others.
fn write_report(path: &Path, rows: &[Row]) {
    let mut section = format!(
        "## IR edit engine: patch -> verified IR -> PTX\n\n\
         Command: `scripts/bench.sh` (runs `cargo bench -p gevod --bench ir_pipeline`). \
         Machine: {}. Date: {}.\n\n\
         Each fixture gets a fixed {EDITS}-edit patch (seed 1). *In-process* is `KernelIr::compile` \
         (replay on the original IR, verify, print, link libdevice where needed, emit PTX). \
         *Process pipeline* is the reference GEVO way: `opt-19 -passes=verify` on the patched IR, \
         `llvm-link-19` with libdevice where needed, `llc-19 -mcpu=sm_90`, each a new process; \
         the patched IR is handed to it for free. Medians of {ROUNDS} alternating rounds after 3 warm-ups; \
         the ratio is what to read on a shared, noisy machine. Target: at least {TARGET_RATIO}x on every fixture.\n\n\
         | fixture | instructions | in-process (ms) | process pipeline (ms) | ratio | target met |\n\
         |---|---:|---:|---:|---:|---|\n",
        report::machine(),
        report::today()
    );
    for row in rows {
        let r = ratio(row);
        section += &format!(
            "| {} | {} | {:.3} | {:.3} | {:.1}x | {} |\n",
            row.name,
            row.instructions,
            ms(row.in_process),
            ms(row.pipeline),
            r,
            if r >= TARGET_RATIO { "yes" } else { "no" }
        );
    }
    report::write_section(path, "ir-pipeline", &section);
}
