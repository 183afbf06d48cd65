//! What every benchmark writes beside its numbers: the machine, the date,
//! and its own section of BENCHMARKS.md; and where it finds the repository
//! and its settings.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The fixtures with GPU-sized tests (tests/fixtures/NAME.gevo.toml), as
/// the GPU benchmark searches them.
pub const GPU_SIZED_FIXTURES: [&str; 5] = [
    "kernels/stencil",
    "kernels/nw",
    "pipelines/wavefront",
    "pipelines/lu",
    "pipelines/pyramid",
];

/// The repository's root (fixtures, BENCHMARKS.md).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The environment variable `name` as a number, else `default`.
pub fn setting(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// CPU model and core count, as read on this machine.
pub fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!("{cpu}, {cores} cores")
}

/// Today's date (UTC), `YYYY-MM-DD`.
pub fn today() -> String {
    let out = Command::new("date").arg("-u").arg("+%Y-%m-%d").output();
    out.ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

/// The team's libdevice stand-in (tests/fixtures): no CUDA toolkit needed.
pub fn stub_libdevice() -> PathBuf {
    repo_root().join("tests/fixtures/libdevice-stub.ll")
}

/// Code generation as the fixtures' tests build them, with the stub
/// libdevice.
pub fn stub_codegen() -> gevo_ir::CodegenOptions {
    gevo_ir::CodegenOptions {
        libdevice: Some(stub_libdevice()),
        ..gevo_ir::CodegenOptions::default()
    }
}

/// The checked-out commit, short.
pub fn commit() -> String {
    Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

/// This thread's CPU time.
pub fn thread_cpu() -> std::time::Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec for the call to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    std::time::Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// Replaces the text between `<!-- bench:NAME -->` and its end marker in
/// BENCHMARKS.md (appending the section when it is new), keeping the others.
pub fn write_section(path: &Path, name: &str, body: &str) {
    let begin = format!("<!-- bench:{name} -->");
    let end = format!("<!-- /bench:{name} -->");
    let section = format!("{begin}\n{body}{end}");
    let old = std::fs::read_to_string(path).unwrap_or_else(|_| "# Benchmarks\n".into());
    let new = match (old.find(&begin), old.find(&end)) {
        (Some(b), Some(e)) if e > b => format!("{}{section}{}", &old[..b], &old[e + end.len()..]),
        _ => format!("{}\n\n{section}\n", old.trim_end()),
    };
    std::fs::write(path, new).expect("write BENCHMARKS.md");
}

/// Variants as a search breeds them: `n` fresh ones (1 to 4 random edits
/// from the original, seeds 1 to `n`), then `n` children (one edit more on
/// a fresh variant `judge` accepted as a parent). `judge(patch, seed,
/// child)` sees each in turn.
pub fn bred_variants(
    ir: &gevo_ir::KernelIr,
    n: u64,
    mut judge: impl FnMut(&gevo_ir::Patch, u64, bool) -> bool,
) {
    use rand::{Rng, SeedableRng};
    let mut parents = Vec::new();
    for seed in 1..=n {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let edits = rng.gen_range(1..=4);
        if let Ok(patch) = ir.mutate(&mut rng, edits) {
            if judge(&patch, seed, false) {
                parents.push(patch);
            }
        }
    }
    for seed in 1..=n {
        let Some(parent) = parents.get(seed as usize % parents.len().max(1)) else {
            break;
        };
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed + 1_000_000);
        if let Ok(child) = ir.extend(parent.clone(), &mut rng, 1) {
            judge(&child, seed, true);
        }
    }
}
