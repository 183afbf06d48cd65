//! The search on every fixture: `gevod evolve --backend sim` with 3,000
//! evaluations, seeds 1..3, GEVO's NSGA-II selection and the fitness-blind
//! control. Records validated speedups, evaluations per second and the cache
//! hit rate in BENCHMARKS.md (section `bench:evolve`).

mod report;
use report::repo_root;

use std::path::Path;
use std::process::Command;

const EVALUATIONS: u32 = 3000;
const SEEDS: [u64; 3] = [1, 2, 3];
const FIXTURES: [&str; 6] = ["vecadd", "reduce", "stencil", "nw", "loops", "expf"];
/// Evaluations per second wanted on these fixtures.
const RATE_TARGET: f64 = 100.0;
const RATE_FIXTURES: [&str; 2] = ["vecadd", "stencil"];

struct Row {
    fixture: &'static str,
    seed: u64,
    selection: &'static str,
    evaluations: u64,
    rate: f64,
    hit_rate: f64,
    best_cost: Option<f64>,
    speedup: Option<f64>,
    edits: Option<(u64, u64)>,
}

fn run(fixture: &'static str, seed: u64, selection: &'static str) -> Row {
    let root = repo_root();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("evolve.toml");
    std::fs::write(&config, format!("[evolve]\nselection = \"{selection}\"\n")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_gevod"))
        .arg("evolve")
        .arg(root.join(format!("tests/fixtures/kernels/{fixture}.gevo.toml")))
        .arg("--state")
        .arg(dir.path().join("state"))
        .arg("--config")
        .arg(&config)
        .args(["--evaluations", &EVALUATIONS.to_string()])
        .args(["--seed", &seed.to_string(), "--json"])
        .env("GEVO_LIBDEVICE", report::stub_libdevice())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{fixture} seed {seed}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let best = &r["best"];
    let row = Row {
        fixture,
        seed,
        selection,
        evaluations: r["evaluations"].as_u64().unwrap(),
        rate: r["evaluations_per_second"].as_f64().unwrap(),
        hit_rate: r["cache_hit_rate"].as_f64().unwrap(),
        best_cost: r["best_cost"].as_f64(),
        speedup: best["speedup"].as_f64(),
        edits: best["edits_before"]
            .as_u64()
            .zip(best["edits_after"].as_u64()),
    };
    eprintln!(
        "{fixture:8} seed {seed} {selection:6} {:6.1} eval/s  hits {:4.1}%  speedup {:?}",
        row.rate,
        100.0 * row.hit_rate,
        row.speedup
    );
    row
}

fn main() {
    let mut rows = Vec::new();
    for fixture in FIXTURES {
        for seed in SEEDS {
            for selection in ["nsga2", "blind"] {
                rows.push(run(fixture, seed, selection));
            }
        }
    }
    write_report(&repo_root().join("BENCHMARKS.md"), &rows);
}

fn fmt_opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".into(), |v| format!("{v:.digits$}"))
}

fn write_report(path: &Path, rows: &[Row]) {
    let mut body = format!(
        "## Search quality and throughput (simulator)\n\n\
         Command: `scripts/bench.sh` (runs `cargo bench -p gevod --bench evolve`). Machine: {}. Date: {}.\n\n\
         `gevod evolve --backend sim --evaluations {EVALUATIONS}` per fixture and seed, with gevod's defaults \
         (population 256, one worker process per core). *nsga2* is the search; *blind* is the \
         control that ignores fitness (random parents and survivors; rejected variants still die). *speedup* is \
         the best validated variant's, on the held-out tests (the simulator's cost is deterministic, so its \
         interval is the point). Rates are wall-clock on a shared machine: read them as rough. \
         Target: {RATE_TARGET} evaluations/s on {}.\n\n\
         | fixture | seed | search | evaluations | eval/s | cache hits | best train cost ratio | validated speedup | edits found / minimized |\n\
         |---|---:|---|---:|---:|---:|---:|---:|---|\n",
        report::machine(),
        report::today(),
        RATE_FIXTURES.join(" and ")
    );
    for r in rows {
        body += &format!(
            "| {} | {} | {} | {} | {:.1} | {:.1}% | {} | {} | {} |\n",
            r.fixture,
            r.seed,
            r.selection,
            r.evaluations,
            r.rate,
            100.0 * r.hit_rate,
            fmt_opt(r.best_cost, 4),
            r.speedup.map_or("none".into(), |s| format!("{s:.4}x")),
            r.edits.map_or("-".into(), |(a, b)| format!("{a} / {b}")),
        );
    }
    body += "\nPer fixture: the search's worst and best seed against the control's best seed.\n\n\
             | fixture | nsga2, lowest speedup | nsga2, highest speedup | blind, highest speedup | eval/s (nsga2, median) | target met |\n\
             |---|---:|---:|---:|---:|---|\n";
    for fixture in FIXTURES {
        let of = |sel: &'static str| {
            rows.iter()
                .filter(move |r| r.fixture == fixture && r.selection == sel)
        };
        let worst = of("nsga2")
            .map(|r| r.speedup.unwrap_or(1.0))
            .fold(f64::INFINITY, f64::min);
        let best = of("nsga2")
            .map(|r| r.speedup.unwrap_or(1.0))
            .fold(0.0, f64::max);
        let blind = of("blind")
            .map(|r| r.speedup.unwrap_or(1.0))
            .fold(0.0, f64::max);
        let mut rates: Vec<f64> = of("nsga2").map(|r| r.rate).collect();
        rates.sort_by(f64::total_cmp);
        let rate = rates[rates.len() / 2];
        let target = if RATE_FIXTURES.contains(&fixture) {
            if rate >= RATE_TARGET {
                "yes"
            } else {
                "no"
            }
        } else {
            "-"
        };
        body += &format!(
            "| {fixture} | {worst:.4}x | {best:.4}x | {blind:.4}x | {rate:.1} | {target} |\n"
        );
    }
    report::write_section(path, "evolve", &body);
}
