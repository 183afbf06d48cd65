//! Workers as Slurm job steps against local workers: the same search
//! (`gevod evolve --backend sim`, stencil, 2 workers, 2,000 evaluations),
//! alternating local and Slurm runs five times on a single-node cluster
//! (scripts/slurm-cluster.sh). Records evaluations per second of each and
//! their ratio in BENCHMARKS.md (section `bench:slurm`).

#[path = "../tests/common/slurm.rs"]
mod cluster;
mod report;
use report::repo_root;

use std::path::Path;
use std::process::Command;

const RUNS: usize = 5;
const WORKERS: &str = "2";
const EVALUATIONS: &str = "2000";
/// Slurm steps' evaluations/s wanted, as a share of local workers'.
const TARGET: f64 = 0.9;

fn rate(mut command: Command, state: &Path, slurm: bool) -> f64 {
    let root = repo_root();
    command
        .arg(env!("CARGO_BIN_EXE_gevod"))
        .arg("evolve")
        .arg(root.join("tests/fixtures/kernels/stencil.gevo.toml"))
        .args(["--backend", "sim", "--workers", WORKERS, "--seed", "1"])
        .args(["--evaluations", EVALUATIONS, "--json", "--state"])
        .arg(state)
        .env("GEVO_LIBDEVICE", report::stub_libdevice());
    if slurm {
        command.arg("--slurm");
    }
    let out = command.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    r["evaluations_per_second"].as_f64().unwrap()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let cluster = match cluster::Cluster::start(&repo_root()) {
        Ok(c) => c,
        Err(why) => {
            eprintln!("slurm benchmark skipped: the cluster could not start: {why}");
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let (mut local, mut steps, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for run in 0..RUNS {
        let l = rate(
            Command::new("env"),
            &dir.path().join(format!("l{run}")),
            false,
        );
        let mut salloc = cluster.command("salloc");
        salloc.args(["-n", WORKERS, "--quiet"]);
        let s = rate(salloc, &dir.path().join(format!("s{run}")), true);
        eprintln!("run {run}: local {l:.1} eval/s, slurm {s:.1} eval/s");
        local.push(l);
        steps.push(s);
        ratios.push(s / l);
    }
    let ratio = median(ratios.clone());
    let list = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{x:.1}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let body = format!(
        "## Workers as Slurm job steps (simulator)\n\n\
         Machine: {}; {}. Command: `cargo bench -p gevod --bench slurm`.\n\
         A single-node Slurm cluster from Debian's packages (scripts/slurm-cluster.sh);\n\
         `gevod evolve --backend sim` on stencil, {WORKERS} workers, {EVALUATIONS} evaluations, seed 1,\n\
         local workers and `--slurm` (inside `salloc -n {WORKERS}`) alternating, {RUNS} runs each.\n\n\
         | workers | evaluations/s (each run) | median |\n|---|---|---|\n\
         | local processes | {} | {:.1} |\n| Slurm steps | {} | {:.1} |\n\n\
         Slurm / local, per pair of runs: {}; median **{:.2}** (target at least {TARGET:.2}: {}).\n\n",
        report::machine(),
        report::today(),
        list(&local),
        median(local.clone()),
        list(&steps),
        median(steps.clone()),
        ratios
            .iter()
            .map(|x| format!("{x:.2}"))
            .collect::<Vec<_>>()
            .join(", "),
        ratio,
        if ratio >= TARGET { "met" } else { "missed" },
    );
    report::write_section(&repo_root().join("BENCHMARKS.md"), "slurm", &body);
    drop(cluster);
}
