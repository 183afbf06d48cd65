//! The search-quality bar: `gevod evolve --backend sim` with 3,000
//! evaluations (1,500 on expf and loops) and seeds 1..3 (gevod's default
//! search) finds a validated variant on every fixture that carries
//! inefficiencies, with every seed but on reduce (whose only safe savings
//! are edge cases of ~0.1-3% that some seeds miss): there, with the median
//! seed. For stencil and nw the median
//! seed must also reach a bar that the search without its additions (GEVO's
//! own, `scripts/search-bench.sh`'s "before") reaches only with its best
//! seeds (BENCHMARKS.md, "Search: before and after"); for expf, reduce and
//! loops the bar only asks for a validated variant. Every validated variant
//! is re-run independently, with two simulator threads, and must pass every
//! test: a racy variant is never validated.

use crate::common;

use std::process::Command;

/// Fixture and the speedup the median seed must reach. Measured
/// (BENCHMARKS.md, bench:search, seeds 1-3): stencil's median 1.1075 (the
/// search without its additions: 1.088), nw's 1.2204 (without: 1.2149).
/// Re-measured with promotion running the generated held-out tests and
/// stores into inputs a verdict (BENCHMARKS.md, "Search quality with
/// generated held-out tests"): the same medians, so the same bars.
/// With the generated tests in selection (2026-11-29): stencil's median
/// unchanged (1.1075), nw's 1.2176 (seeds 1.154, 1.220, 1.218): still
/// above the search without its additions (1.2149), where nw's bar now
/// sits.
/// The third column: whether every seed must validate a variant. The
/// fourth: evaluations per run (expf and loops validate a variant within
/// 1,500 with every seed, which keeps the test short).
const BAR: [(&str, f64, bool, u32); 5] = [
    ("stencil", 1.10, true, 3000),
    ("nw", 1.215, true, 3000),
    ("expf", 1.0, true, 1500),
    ("reduce", 1.0, false, 3000),
    ("loops", 1.0, true, 1500),
];
const SEEDS: [u64; 3] = [1, 2, 3];

fn gevod() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_gevod"));
    c.env("GEVO_LIBDEVICE", common::libdevice_stub());
    c
}

// One test per fixture: the five searches run side by side, and no single
// test sets the suite's pace.
#[test]
fn stencil_beats_its_bar() {
    beats_the_bar("stencil");
}

#[test]
fn nw_beats_its_bar() {
    beats_the_bar("nw");
}

#[test]
fn expf_beats_its_bar() {
    beats_the_bar("expf");
}

#[test]
fn reduce_beats_its_bar() {
    beats_the_bar("reduce");
}

#[test]
fn loops_beats_its_bar() {
    beats_the_bar("loops");
}

#[test]
fn every_fixture_with_a_bar_has_its_test() {
    let tested = ["stencil", "nw", "expf", "reduce", "loops"];
    let barred: Vec<&str> = BAR.iter().map(|(fixture, ..)| *fixture).collect();
    assert_eq!(barred, tested);
}

/// Runs `fixture`'s search with every seed and checks its bar.
fn beats_the_bar(fixture: &str) {
    let (_, bar, every_seed, evaluations) = *BAR
        .iter()
        .find(|(name, ..)| *name == fixture)
        .unwrap_or_else(|| panic!("{fixture} has no bar"));
    let mut failures = Vec::new();
    let mut speedups = Vec::new();
    for seed in SEEDS {
        let dir = tempfile::tempdir().unwrap();
        let out = gevod()
            .arg("evolve")
            .arg(common::spec_fixture(fixture))
            .arg("--state")
            .arg(dir.path())
            .args([
                "--evaluations",
                &evaluations.to_string(),
                "--seed",
                &seed.to_string(),
                "--json",
                // The bar is the search's: contributions would only
                // add time.
                "--no-explain",
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{fixture} seed {seed}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let speedup = report["best"]["speedup"].as_f64().unwrap_or(0.0);
        eprintln!("{fixture} seed {seed}: speedup {speedup:.4} (median bar {bar})");
        speedups.push(speedup);
        // A validated variant is faster by definition: > 1.0 always.
        if speedup <= 1.0 {
            if every_seed {
                failures.push(format!("{fixture} seed {seed}: no validated variant"));
            }
            continue;
        }
        // Independent re-check of the exported minimized patch.
        let run = gevod()
            .arg("run")
            .arg(common::spec_fixture(fixture))
            .arg("--patch")
            .arg(report["best"]["minimized_patch"].as_str().unwrap())
            .args(["--workers", "2", "--json"])
            .output()
            .unwrap();
        assert!(
            run.status.success(),
            "{fixture} seed {seed}: the validated variant fails: {}{}",
            String::from_utf8_lossy(&run.stdout),
            String::from_utf8_lossy(&run.stderr)
        );
    }
    speedups.sort_by(f64::total_cmp);
    let median = speedups[speedups.len() / 2];
    if median <= 1.0 || median < bar {
        failures.push(format!(
            "{fixture}: median seed {median:.4} < {bar} ({speedups:?})"
        ));
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
