//! What ptxas costs a variant, and what assembling several variants in
//! one ptxas run would save (docs/evolve.md, "What ptxas costs"): for each
//! fixture with GPU-sized tests, random variants that pass the pre-screen
//! (those a compile worker builds for the GPU), bred as a search breeds
//! them, their guarded builds (what the GPU checks) and ordinary builds
//! (what is timed) assembled
//! - one ptxas run per variant, whole;
//! - the guarded build as compile workers assemble it now (a pipeline's a
//!   kernel at a time, the original's parts assembled before, at the level
//!   `GEVO_CHECK_ASSEMBLY` names: `Assembler::for_checks`);
//! - `BATCH` variants in one ptxas run (`cuda::batch_assembly`).
//!
//! and ptxas on a module with no code: its fixed cost a run. CPU is
//! ptxas's and nvlink's (the children's user and system time); each
//! batched kernel's machine code is compared with its own assembly's
//! (`cuobjdump -sass`, names without the batch's suffix): the counts say
//! how many are the same. Run with `cargo bench -p gevod --bench
//! ptxas_batches --profile dev` (`BATCH`, 8, and `BATCHES`, 4, unless
//! set); it rewrites its section of BENCHMARKS.md, and says so and writes
//! nothing where this machine has no ptxas. With `PTX_OUT=DIR` it also
//! writes the modules it assembles there, for scripts/ptxas-cost.sh to
//! time another machine's ptxas on (the GPU host has no Rust).

mod report;
use report::repo_root;

use gevo_ir::{CodegenOptions, KernelIr, Patch};
use gevo_model::spec::{self, TestTarget};
use gevod::config::Prescreen;
use gevod::cuda::batch_assembly::{batched, renamed, SUFFIX};
use gevod::cuda::part_assembly::PartAssembler;
use gevod::cuda::toolkit::{Assembler, CheckAssembly, Cubin};
use gevod::worker::InProcess;
use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

/// CPU time of this process's children that have ended.
fn children_cpu() -> Duration {
    // SAFETY: an all-zero rusage is a valid value for the call to fill.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid rusage the call fills.
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) };
    let time = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    time(usage.ru_utime) + time(usage.ru_stime)
}

/// What `work` returns, and the CPU its child processes took.
fn in_children<T>(work: impl FnOnce() -> T) -> (T, Duration) {
    let started = children_cpu();
    let out = work();
    (out, children_cpu() - started)
}

/// Each function's machine code in `cubin`, by its name, with the batch's
/// suffix taken out of the code (calls name functions); `None` without
/// cuobjdump.
fn machine_code(cubin: &Cubin) -> Option<BTreeMap<String, String>> {
    let dir = tempfile::tempdir().ok()?;
    let path = dir.path().join("module.cubin");
    std::fs::write(&path, &cubin.0).ok()?;
    let out = Command::new("cuobjdump")
        .arg("-sass")
        .arg(&path)
        .output()
        .ok()?;
    out.status.success().then_some(())?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut functions = BTreeMap::new();
    for function in text.split("Function : ").skip(1) {
        let (name, code) = function.split_once('\n')?;
        // cuobjdump's layout around the code (blank lines, the rule of
        // dots after the last function) is not the code.
        let code: String = code
            .lines()
            .map(str::trim_end)
            .filter(|l| !l.trim_start_matches('.').is_empty())
            .map(|l| format!("{l}\n"))
            .collect();
        functions.insert(name.trim().to_string(), without_suffixes(&code));
    }
    Some(functions)
}

/// `text` with every `__gevo_b<index>` taken out.
fn without_suffixes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(SUFFIX) {
        out += &rest[..at];
        rest = rest[at + SUFFIX.len()..].trim_start_matches(|c: char| c.is_ascii_digit());
    }
    out + rest
}

#[derive(Default)]
struct Build {
    alone: Duration,
    batched: Duration,
    /// Kernels whose batched machine code is their own assembly's, of all.
    same_code: (usize, usize),
}

#[derive(Default)]
struct Row {
    name: String,
    variants: usize,
    fixed: Duration,
    guarded: Build,
    /// The guarded builds as compile workers assemble them (a
    /// pipeline's a kernel at a time).
    guarded_now: Duration,
    ordinary: Build,
}

/// Variants the pre-screen passes, `count` of them at most.
fn passing_variants(ir: &KernelIr, worker: &InProcess, count: usize) -> Vec<Patch> {
    let mut found = Vec::new();
    // About a third of bred variants pass (BENCHMARKS.md, "The pre-screen
    // before code generation").
    report::bred_variants(ir, 4 * count as u64, |patch, _, _| {
        let passed = found.len() < count
            && worker
                .screen(patch, Prescreen::All)
                .is_ok_and(|s| s.rejected.is_none());
        if passed {
            found.push(patch.clone());
        }
        passed
    });
    found
}

/// Assembles `modules` one ptxas run each, then `batch` a run, adding to
/// `build`; compares each batched kernel's machine code with its own.
fn assemble_both(assembler: &Assembler, arch: &str, modules: &[String], build: &mut Build) {
    let (alone, cpu) = in_children(|| {
        modules
            .iter()
            .map(|ptx| {
                assembler
                    .assemble(ptx, arch)
                    .expect("ptxas takes a variant")
            })
            .collect::<Vec<_>>()
    });
    build.alone += cpu;
    let texts: Vec<&str> = modules.iter().map(String::as_str).collect();
    let batch = batched(&texts).expect("the fixture's modules batch");
    let (together, cpu) = in_children(|| {
        assembler
            .assemble(&batch, arch)
            .expect("ptxas takes the batch")
    });
    build.batched += cpu;
    let Some(batch_code) = machine_code(&together) else {
        return;
    };
    for (index, cubin) in alone.iter().enumerate() {
        let own = machine_code(cubin).expect("cuobjdump reads a cubin");
        for (name, code) in own {
            build.same_code.1 += 1;
            let copy = batch_code.get(&renamed(&name, index));
            build.same_code.0 += usize::from(copy == Some(&code));
        }
    }
}

fn measure(name: &str, batch: usize, batches: usize, codegen: &CodegenOptions) -> Row {
    let assembler = Assembler::find().expect("ptxas");
    let arch = &codegen.arch;
    let path = repo_root().join(format!("tests/fixtures/{name}.gevo.toml"));
    let spec = spec::load(&path)
        .expect("fixture spec loads")
        .for_backend(TestTarget::Sim);
    // As compile workers have it: with the spec's block bounds.
    let ir = KernelIr::load_spec(&spec).expect("fixture loads");
    let worker = InProcess::new(spec, codegen.clone()).expect("a compile worker");
    let variants = passing_variants(&ir, &worker, batch * batches);
    let mut row = Row {
        name: name.rsplit('/').next().unwrap_or(name).into(),
        variants: variants.len(),
        ..Row::default()
    };
    let original = ir
        .compile(&ir.empty_patch(), codegen)
        .expect("compiles")
        .ptx;
    let preamble: String = original
        .lines()
        .filter(|l| {
            [".version", ".target", ".address_size"]
                .iter()
                .any(|d| l.trim_start().starts_with(d))
        })
        .map(|l| format!("{l}\n"))
        .collect();
    let runs = 5;
    row.fixed = (0..runs)
        .map(|_| {
            in_children(|| {
                assembler
                    .assemble(&preamble, arch)
                    .expect("an empty module")
            })
            .1
        })
        .sum::<Duration>()
        / runs;
    let mut parts = PartAssembler::new(assembler.clone().for_checks(CheckAssembly::from_env()));
    let guarded_original = ir
        .compile_guarded(&ir.empty_patch(), codegen)
        .expect("guarded")
        .ptx;
    parts
        .assemble(&guarded_original, arch)
        .expect("the original's parts");
    let out = std::env::var_os("PTX_OUT").map(|dir| std::path::PathBuf::from(dir).join(&row.name));
    if let Some(out) = &out {
        write_module(&out.join("empty.ptx"), &preamble);
    }
    for (index, chunk) in variants.chunks(batch).enumerate() {
        let guarded: Vec<String> = chunk
            .iter()
            .map(|p| ir.compile_guarded(p, codegen).expect("a guarded build").ptx)
            .collect();
        let ordinary: Vec<String> = chunk
            .iter()
            .map(|p| ir.compile(p, codegen).expect("a build").ptx)
            .collect();
        if let Some(out) = &out {
            write_batch(&out.join(format!("guarded/{index}")), &guarded);
            write_batch(&out.join(format!("ordinary/{index}")), &ordinary);
        }
        row.guarded_now += in_children(|| {
            for ptx in &guarded {
                parts
                    .assemble(ptx, arch)
                    .expect("as compile workers assemble it");
            }
        })
        .1;
        assemble_both(&assembler, arch, &guarded, &mut row.guarded);
        assemble_both(&assembler, arch, &ordinary, &mut row.ordinary);
    }
    println!(
        "{:10} {} variants: fixed {:.1} ms; guarded {:.1} / now {:.1} / batched {:.1} ms a variant",
        row.name,
        row.variants,
        ms(row.fixed, 1),
        ms(row.guarded.alone, row.variants),
        ms(row.guarded_now, row.variants),
        ms(row.guarded.batched, row.variants),
    );
    row
}

/// With `PTX_OUT`, what is assembled goes to files as well, for
/// scripts/ptxas-cost.sh to time another machine's ptxas on.
fn write_module(path: &std::path::Path, ptx: &str) {
    std::fs::create_dir_all(path.parent().expect("a directory")).expect("PTX_OUT is writable");
    std::fs::write(path, ptx).expect("PTX_OUT is writable");
}

/// A batch's modules as `DIR/variant-N.ptx`, and their batch as
/// `DIR/batch.ptx`.
fn write_batch(dir: &std::path::Path, modules: &[String]) {
    for (n, ptx) in modules.iter().enumerate() {
        write_module(&dir.join(format!("variant-{n}.ptx")), ptx);
    }
    let texts: Vec<&str> = modules.iter().map(String::as_str).collect();
    write_module(
        &dir.join("batch.ptx"),
        &batched(&texts).expect("the modules batch"),
    );
}

fn ms(total: Duration, per: usize) -> f64 {
    1e3 * total.as_secs_f64() / per.max(1) as f64
}

fn line(r: &Row) -> String {
    let n = r.variants;
    let ratio = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64().max(1e-9);
    let same = |b: &Build| match b.same_code.1 {
        0 => "-".to_string(),
        all => format!("{} of {all}", b.same_code.0),
    };
    format!(
        "| {} | {n} | {:.1} | {:.1} | {:.1} | {:.1} | **{:.2}x** | {} | {:.1} | {:.1} | **{:.2}x** | {} |\n",
        r.name,
        ms(r.fixed, 1),
        ms(r.guarded.alone, n),
        ms(r.guarded_now, n),
        ms(r.guarded.batched, n),
        ratio(r.guarded_now, r.guarded.batched),
        same(&r.guarded),
        ms(r.ordinary.alone, n),
        ms(r.ordinary.batched, n),
        ratio(r.ordinary.alone, r.ordinary.batched),
        same(&r.ordinary),
    )
}

fn table(rows: &[Row], batch: usize, batches: usize, ptxas: &str) -> String {
    let mut body = format!(
        "## What ptxas costs: a run per variant against a batch\n\n\
         Machine: {}. Date: {}. Commit: {}. ptxas: {ptxas}. Command: `BATCH={batch} BATCHES={batches} cargo bench -p gevod \
         --bench ptxas_batches --profile dev`. For each fixture, {} random variants the pre-screen passes (bred as \
         a search breeds them), their guarded builds (what the GPU checks) and ordinary builds (what is timed) \
         assembled one ptxas run each, the guarded builds also as compile workers assemble them (now: a pipeline's \
         in parts, a kernel at a time, the parts kept by each worker, at ptxas's default level), and {batch} variants a ptxas run (`cuda::batch_assembly`). Fixed: ptxas on a module \
         with no code. CPU ms per variant, ptxas's and nvlink's; same code: kernels whose machine code in the \
         batch is their own assembly's (`cuobjdump -sass`).\n\n\
         | fixture | variants | fixed, ms a run | guarded: alone | now | batched | now / batched | same code | \
         ordinary: alone | batched | alone / batched | same code |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n",
        report::machine(),
        report::today(),
        report::commit(),
        batch * batches,
    );
    for r in rows {
        body += &line(r);
    }
    body
}

fn main() {
    let Some(assembler) = Assembler::find() else {
        println!("ptxas_batches: no ptxas on this machine; nothing measured, nothing written");
        return;
    };
    let version = Command::new(assembler.program())
        .arg("--version")
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .last()
                .unwrap_or("")
                .to_string()
        })
        .unwrap_or_default();
    let codegen = report::stub_codegen();
    let batch = report::setting("BATCH", 8);
    let batches = report::setting("BATCHES", 4);
    let rows: Vec<Row> = report::GPU_SIZED_FIXTURES
        .iter()
        .map(|f| measure(f, batch, batches, &codegen))
        .collect();
    report::write_section(
        &repo_root().join("BENCHMARKS.md"),
        "ptxas_batches",
        &table(&rows, batch, batches, &version),
    );
}
