//! What running the pre-screen before code generation saves a compile
//! worker (docs/evolve.md, "The pre-screen"): random variants of each
//! fixture with GPU-sized tests, as a search breeds them, taken up to
//! their guarded build two ways, alternating per variant:
//! - code generation first (the order before): `compile_one` (replay,
//!   code generation) then `screen` (replay again, lower, simulate);
//! - the pre-screen first, as a compile request runs now: one replay, the
//!   IR hashed, lowered and simulated, and code generation only for a
//!   variant the pre-screen passed.
//!
//! Code generations are counts (the same on every machine); CPU is this
//! thread's. Run with `cargo bench -p gevod --bench screen_first --profile dev`
//! (`SCREEN_VARIANTS`: variants of each kind per fixture, 300 unless set);
//! it rewrites its section of BENCHMARKS.md.

mod report;
use report::repo_root;

use gevo_ir::{CodegenOptions, KernelIr, Patch};
use gevo_model::spec::{self, TestTarget};
use gevod::config::Prescreen;
use gevod::worker::{Handler, InProcess, Request, Response};
use std::time::Duration;

#[derive(Default)]
struct Row {
    name: String,
    variants: usize,
    screened_out: usize,
    codegen_first: Duration,
    screen_first: Duration,
    /// Code generations the screen-first order ran (the other runs one a
    /// variant).
    code_generations: usize,
}

/// What `work` returns, and this thread's CPU time it took.
fn timed<T>(work: impl FnOnce() -> T) -> (T, Duration) {
    let started = report::thread_cpu();
    let out = work();
    (out, report::thread_cpu() - started)
}

/// The order before: code generation, then the pre-screen on its own replay.
fn codegen_first(worker: &InProcess, patch: &Patch) -> bool {
    let built = worker.compile_one(patch).is_ok();
    built
        && worker
            .screen(patch, Prescreen::All)
            .expect("the pre-screen judges")
            .rejected
            .is_none()
}

/// A search's compile request without its guarded build; whether it
/// passed, and whether it came with PTX.
fn screen_first(worker: &mut InProcess, patch: &Patch) -> (bool, bool) {
    let request = Request::Compile {
        id: 1,
        patch: patch.clone(),
        prescreen: Prescreen::All,
        cubin_for: None,
        guarded: false,
        defer_assembly: true,
        known: Vec::new(),
        forget: Vec::new(),
        skip_known: true,
    };
    match worker.handle(request).expect("the worker answers").0 {
        Response::Built {
            build,
            screened_out,
            ..
        } => (screened_out.is_none(), !build.ptx.is_empty()),
        _ => (false, false),
    }
}

fn measure(name: &str, variants: u64, codegen: &CodegenOptions) -> Row {
    let path = repo_root().join(format!("tests/fixtures/{name}.gevo.toml"));
    let spec = spec::load(&path)
        .expect("fixture spec loads")
        .for_backend(TestTarget::Sim);
    let ir = KernelIr::load_kernels(&spec.ir, &spec.kernels).expect("fixture loads");
    let mut worker = InProcess::new(spec, codegen.clone()).expect("a compile worker");
    // The references are made once, on the first variant: the original's.
    assert!(
        codegen_first(&worker, &ir.empty_patch()),
        "{name}: the original is rejected"
    );
    let mut row = Row {
        name: name.rsplit('/').next().unwrap_or(name).into(),
        ..Row::default()
    };
    report::bred_variants(&ir, variants, |patch, seed, _| {
        row.variants += 1;
        let (old, old_cpu, (new, with_ptx), new_cpu) = match seed % 2 {
            0 => {
                let (old, old_cpu) = timed(|| codegen_first(&worker, patch));
                let (new, new_cpu) = timed(|| screen_first(&mut worker, patch));
                (old, old_cpu, new, new_cpu)
            }
            _ => {
                let (new, new_cpu) = timed(|| screen_first(&mut worker, patch));
                let (old, old_cpu) = timed(|| codegen_first(&worker, patch));
                (old, old_cpu, new, new_cpu)
            }
        };
        assert_eq!(old, new, "{name}: both orders judge a variant alike");
        row.codegen_first += old_cpu;
        row.screen_first += new_cpu;
        row.screened_out += usize::from(!new);
        row.code_generations += usize::from(with_ptx);
        new
    });
    println!(
        "{:10} {} variants, {} screened out: code generation first {:.2}s, pre-screen first {:.2}s",
        row.name,
        row.variants,
        row.screened_out,
        row.codegen_first.as_secs_f64(),
        row.screen_first.as_secs_f64()
    );
    row
}

fn line(r: &Row) -> String {
    let ms = |d: Duration| format!("{:.2}", 1e3 * d.as_secs_f64() / r.variants.max(1) as f64);
    format!(
        "| {} | {} | {} | {} / {} | {} | {} | {:.2} |\n",
        r.name,
        r.variants,
        r.screened_out,
        r.code_generations,
        r.variants,
        ms(r.codegen_first),
        ms(r.screen_first),
        r.screen_first.as_secs_f64() / r.codegen_first.as_secs_f64().max(1e-9),
    )
}

fn table(rows: &[Row], variants: u64) -> String {
    let mut body = format!(
        "## The pre-screen before code generation (simulator, in process)\n\n\
         Machine: {}. Date: {}. Commit: {}. Command: `SCREEN_VARIANTS={variants} cargo bench -p gevod --bench screen_first \
         --profile dev`. Random variants of each fixture with GPU-sized tests as a search breeds them ({variants} \
         fresh, 1 to 4 edits, and {variants} children, one edit more on a fresh one that passed), each taken up to \
         its guarded build two ways, alternating: code generation first, then the pre-screen on a \
         second replay, as compile workers did before (`all`, the default); and a search's compile request now (one replay, the \
         pre-screen first, code generation only for a variant it passed). Both judge every variant alike (the \
         bench asserts it). Code generations are counts; CPU is one thread's, per variant.\n\n\
         | fixture | variants | screened out | code generations, pre-screen first | CPU ms, code generation first | \
         pre-screen first | ratio |\n|---|---|---|---|---|---|---|\n",
        report::machine(),
        report::today(),
        report::commit(),
    );
    let mut total = Row {
        name: "**all**".into(),
        ..Row::default()
    };
    for r in rows {
        body += &line(r);
        total.variants += r.variants;
        total.screened_out += r.screened_out;
        total.code_generations += r.code_generations;
        total.codegen_first += r.codegen_first;
        total.screen_first += r.screen_first;
    }
    body += &line(&total);
    body
}

fn main() {
    let root = repo_root();
    let codegen = report::stub_codegen();
    let variants = report::setting("SCREEN_VARIANTS", 300) as u64;
    let rows: Vec<Row> = report::GPU_SIZED_FIXTURES
        .iter()
        .map(|f| measure(f, variants, &codegen))
        .collect();
    report::write_section(
        &root.join("BENCHMARKS.md"),
        "screen_first",
        &table(&rows, variants),
    );
}
