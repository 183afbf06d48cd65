//! What a guarded check build (docs/evolve.md, "Guarded check builds")
//! costs the compile workers, against the ordinary build of the same
//! original: the PTX's size (a count, the same on every machine), code
//! generation in process, and assembly by ptxas (where the CUDA toolkit is
//! installed). Runs alternate so machine drift hits both builds; the
//! medians and their ratios go to BENCHMARKS.md.
//!
//! Run with `scripts/bench.sh` (or `cargo bench -p gevod --bench guard_builds`).

mod report;
use report::repo_root;

use gevo_ir::{CodegenOptions, KernelIr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const KERNELS: [&str; 6] = ["vecadd", "reduce", "stencil", "nw", "loops", "expf"];
const PIPELINES: [&str; 3] = ["wavefront", "lu", "pyramid"];
const ROUNDS: usize = 7;

/// The toolkit's ptxas, when this machine has one.
fn ptxas() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("ptxas"))
        .find(|p| p.is_file())
}

fn median(samples: &mut [Duration]) -> f64 {
    samples.sort();
    samples[samples.len() / 2].as_secs_f64() * 1e3
}

/// The medians of one build: code generation and assembly, in ms.
#[derive(Default)]
struct Build {
    bytes: usize,
    codegen_ms: f64,
    ptxas_ms: Option<f64>,
}

struct Row {
    name: String,
    ordinary: Build,
    guarded: Build,
}

fn assemble(ptxas: &Path, ptx: &Path, arch: &str) -> Duration {
    let cubin = ptx.with_extension("cubin");
    let t = Instant::now();
    let out = Command::new(ptxas)
        .arg(format!("-arch={arch}"))
        .arg(ptx)
        .arg("-o")
        .arg(&cubin)
        .output()
        .expect("ptxas runs");
    let took = t.elapsed();
    assert!(
        out.status.success(),
        "{}: {}",
        ptx.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    took
}

fn main() {
    let root = repo_root();
    let options = report::stub_codegen();
    let ptxas = ptxas();
    let work = tempfile::tempdir().expect("temp dir");
    let specs = KERNELS
        .iter()
        .map(|n| {
            (
                n,
                root.join(format!("tests/fixtures/kernels/{n}.gevo.toml")),
            )
        })
        .chain(PIPELINES.iter().map(|n| {
            (
                n,
                root.join(format!("tests/fixtures/pipelines/{n}.gevo.toml")),
            )
        }));
    let mut rows = Vec::new();
    for (name, spec) in specs {
        let spec = gevo_model::spec::load(&spec).expect("fixture spec loads");
        let ir = KernelIr::load_kernels(&spec.ir, &spec.kernels).expect("fixture loads");
        let empty = ir.empty_patch();
        let (mut plain_gen, mut guard_gen) = (Vec::new(), Vec::new());
        let (mut plain_asm, mut guard_asm) = (Vec::new(), Vec::new());
        let (mut plain_bytes, mut guard_bytes) = (0, 0);
        for round in 0..ROUNDS + 1 {
            let t = Instant::now();
            let plain = ir.compile(&empty, &options).expect("compiles").ptx;
            let a = t.elapsed();
            let t = Instant::now();
            let guarded = ir
                .compile_guarded(&empty, &options)
                .expect("guarded build compiles")
                .ptx;
            let b = t.elapsed();
            (plain_bytes, guard_bytes) = (plain.len(), guarded.len());
            let plain_file = work.path().join(format!("{name}.ptx"));
            let guard_file = work.path().join(format!("{name}.guarded.ptx"));
            std::fs::write(&plain_file, &plain).unwrap();
            std::fs::write(&guard_file, &guarded).unwrap();
            let assembled = ptxas.as_ref().map(|p| {
                (
                    assemble(p, &plain_file, &options.arch),
                    assemble(p, &guard_file, &options.arch),
                )
            });
            // The first round warms caches up.
            if round > 0 {
                plain_gen.push(a);
                guard_gen.push(b);
                if let Some((c, d)) = assembled {
                    plain_asm.push(c);
                    guard_asm.push(d);
                }
            }
        }
        let row = Row {
            name: name.to_string(),
            ordinary: Build {
                bytes: plain_bytes,
                codegen_ms: median(&mut plain_gen),
                ptxas_ms: (!plain_asm.is_empty()).then(|| median(&mut plain_asm)),
            },
            guarded: Build {
                bytes: guard_bytes,
                codegen_ms: median(&mut guard_gen),
                ptxas_ms: (!guard_asm.is_empty()).then(|| median(&mut guard_asm)),
            },
        };
        println!(
            "{:10} PTX {:7} -> {:7} bytes, codegen {:7.2} -> {:7.2} ms, ptxas {:?} -> {:?} ms",
            row.name,
            row.ordinary.bytes,
            row.guarded.bytes,
            row.ordinary.codegen_ms,
            row.guarded.codegen_ms,
            row.ordinary.ptxas_ms,
            row.guarded.ptxas_ms
        );
        rows.push(row);
    }
    let parts = parts_rows(&root, &options);
    write_report(&root.join("BENCHMARKS.md"), &rows, &parts, ptxas.is_some());
}

/// One pipeline's one-edit variants, assembled whole and a kernel at a
/// time (the original's parts assembled before, as a compile worker holds
/// them after its first variant).
struct PartsRow {
    name: String,
    variants: usize,
    whole_ms: f64,
    parts_ms: f64,
    /// Parts assembled per variant, of `parts`.
    assembled: f64,
    parts: usize,
}

const PART_VARIANTS: usize = 9;

fn parts_rows(root: &Path, options: &CodegenOptions) -> Vec<PartsRow> {
    use gevod::cuda::part_assembly::{split, PartAssembler};
    use rand::SeedableRng;
    let Some(assembler) = gevod::cuda::toolkit::Assembler::find() else {
        return Vec::new();
    };
    if assembler.linker().is_none() {
        return Vec::new();
    }
    let mut rows = Vec::new();
    for name in PIPELINES {
        let spec = root.join(format!("tests/fixtures/pipelines/{name}.gevo.toml"));
        let spec = gevo_model::spec::load(&spec).expect("fixture spec loads");
        let ir = KernelIr::load_kernels(&spec.ir, &spec.kernels).expect("fixture loads");
        let original = ir
            .compile_guarded(&ir.empty_patch(), options)
            .expect("guarded build compiles")
            .ptx;
        let Some(original_parts) = split(&original) else {
            continue;
        };
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        let (mut whole, mut parted, mut assembled) = (Vec::new(), Vec::new(), 0u64);
        while whole.len() < PART_VARIANTS {
            let patch = ir.mutate(&mut rng, 1).expect("a valid edit");
            let Ok(variant) = ir.compile_guarded(&patch, options) else {
                continue;
            };
            let t = Instant::now();
            assembler
                .assemble(&variant.ptx, &options.arch)
                .expect("ptxas assembles it");
            whole.push(t.elapsed());
            let mut parts = PartAssembler::new(assembler.clone());
            parts
                .assemble(&original, &options.arch)
                .expect("parts link");
            let before = parts.parts_assembled;
            let t = Instant::now();
            parts
                .assemble(&variant.ptx, &options.arch)
                .expect("parts link");
            parted.push(t.elapsed());
            assembled += parts.parts_assembled - before;
        }
        let row = PartsRow {
            name: name.to_string(),
            variants: whole.len(),
            whole_ms: median(&mut whole),
            parts_ms: median(&mut parted),
            assembled: assembled as f64 / PART_VARIANTS as f64,
            parts: original_parts.kernels.len() + 1,
        };
        println!(
            "{:10} {} one-edit variants: ptxas whole {:.1} ms, a kernel at a time {:.1} ms ({:.1} of {} parts each)",
            row.name, row.variants, row.whole_ms, row.parts_ms, row.assembled, row.parts
        );
        rows.push(row);
    }
    rows
}

fn ratio(a: f64, b: f64) -> String {
    format!("{:.1}x", b / a.max(1e-9))
}

/// Replaces this benchmark's section of BENCHMARKS.md, keeping the others.
fn write_report(path: &Path, rows: &[Row], parts: &[PartsRow], assembled: bool) {
    let ptxas_version = Command::new("ptxas")
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .last()
                .map(str::to_string)
        })
        .unwrap_or_default();
    let mut section = format!(
        "## Guarded check builds: what they cost the compile workers\n\n\
         Command: `scripts/bench.sh` (runs `cargo bench -p gevod --bench guard_builds`). \
         Machine: {}. Date: {}. ptxas: {}.\n\n\
         Each fixture's original (its chosen kernels, a pipeline's all) built the ordinary way \
         (`KernelIr::compile`) and guarded (`KernelIr::compile_guarded`, the build a GPU \
         worker checks outputs through), then each PTX assembled by ptxas for sm_90, as the \
         compile workers do for every variant that reaches the GPU. Medians of {ROUNDS} \
         alternating rounds after one warm-up; the PTX sizes are counts.\n\n\
         | fixture | PTX bytes, ordinary | guarded | codegen ms, ordinary | guarded | ratio | ptxas ms, ordinary | guarded | ratio |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        report::machine(),
        report::today(),
        if assembled {
            ptxas_version.as_str()
        } else {
            "none on this machine (assembly not timed)"
        }
    );
    for row in rows {
        let (o, g) = (&row.ordinary, &row.guarded);
        let asm = match (o.ptxas_ms, g.ptxas_ms) {
            (Some(a), Some(b)) => format!("{a:.1} | {b:.1} | {}", ratio(a, b)),
            _ => "- | - | -".into(),
        };
        section += &format!(
            "| {} | {} | {} | {:.2} | {:.2} | {} | {asm} |\n",
            row.name,
            o.bytes,
            g.bytes,
            o.codegen_ms,
            g.codegen_ms,
            ratio(o.codegen_ms, g.codegen_ms),
        );
    }
    section += "\nA refusal is recorded by one call of the runtime per run of accesses \
                (the accesses of a block with no call between that could end or hold \
                the thread), not per access: lu's four kernels, unrolled by the \
                compiler, have 303 guarded accesses in 23 runs. With a record inlined \
                at every access (before 7dcb21d), lu's guarded build took ptxas \
                1211.7 ms against 99.3 ms for the ordinary build (12.2x).\n";
    if !parts.is_empty() {
        section += &format!(
            "\nA kernel at a time (`cuda::parts`, the default): each pipeline's \
             guarded build of {PART_VARIANTS} random one-edit variants assembled whole by \
             ptxas, then split into a part per kernel and a common part, only the parts \
             whose PTX the edit changed assembled (`ptxas -c`; the original's parts \
             assembled before, as a compile worker keeps them), and linked by nvlink. \
             Medians; one run.\n\n\
             | pipeline | variants | ptxas whole, ms | a kernel at a time, ms | whole / a kernel at a time | parts assembled per variant |\n\
             |---|---:|---:|---:|---:|---:|\n"
        );
        for row in parts {
            section += &format!(
                "| {} | {} | {:.1} | {:.1} | {} | {:.1} of {} |\n",
                row.name,
                row.variants,
                row.whole_ms,
                row.parts_ms,
                ratio(row.parts_ms, row.whole_ms),
                row.assembled,
                row.parts
            );
        }
    }
    report::write_section(path, "guard-builds", &section);
}
