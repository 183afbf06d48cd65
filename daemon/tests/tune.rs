//! `gevod tune` and `gevod evolve` on a spec with `[tune]`, on the simulator:
//! the configurations the sweep measures and drops (and why), the spec it
//! writes, the search on the fastest configuration, and the sweep kept for
//! `--resume`.

use crate::common::{copy_blockscale, repo_root, s, succeeded, text};
use std::path::PathBuf;
use std::process::{Command, Output};

fn gevod(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gevod"))
        .env_remove("GEVOD_LOG")
        .args(args)
        .output()
        .unwrap()
}

/// The fixture's directory copied to a temporary one (the sweep writes the
/// chosen configuration's spec beside the spec).
fn fixture() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let spec = copy_blockscale(dir.path());
    (dir, spec)
}

#[test]
fn the_sweep_measures_each_configuration_and_drops_the_faulting_ones() {
    let (dir, spec) = fixture();
    let chosen = dir.path().join("chosen.gevo.toml");
    let args = [
        "tune",
        s(&spec),
        "--backend",
        "sim",
        "--json",
        "--write",
        s(&chosen),
    ];
    let out = succeeded(gevod(&args), &args);
    let sweep: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let configs = sweep["configurations"].as_array().unwrap();
    assert_eq!(configs.len(), 6, "{sweep}");
    assert_eq!(
        sweep["source"],
        serde_json::json!({"BLOCK": 32, "ITEMS": 1})
    );
    for c in configs {
        let block = c["configuration"]["BLOCK"].as_i64().unwrap();
        if block > 64 {
            // The kernel's shared tile holds 64 floats.
            assert_eq!(c["status"], "dropped", "{c}");
            let why = c["why"].as_str().unwrap();
            assert!(
                why.contains("out-of-bounds") && why.contains("shared"),
                "{why}"
            );
            assert!(!why.contains('\n'), "{why}");
        } else {
            assert_eq!(c["status"], "measured", "{c}");
            assert_eq!(c["tests"].as_array().unwrap().len(), 2, "{c}");
        }
    }
    let source = configs
        .iter()
        .find(|c| c["configuration"] == sweep["source"])
        .unwrap();
    assert_eq!(source["mean_ratio"], 1.0);
    let best = &sweep["best"];
    let ratios: Vec<f64> = configs
        .iter()
        .filter_map(|c| c["mean_ratio"].as_f64())
        .collect();
    let fastest = ratios.iter().copied().fold(f64::INFINITY, f64::min);
    assert!(
        (best["speedup"].as_f64().unwrap() - 1.0 / fastest).abs() < 1e-9,
        "{sweep}"
    );

    // The written spec runs the fastest configuration.
    let written = std::fs::read_to_string(&chosen).unwrap();
    assert!(written.contains("[tune.chosen]"), "{written}");
    let loaded = gevo_model::spec::load(&chosen).unwrap();
    let tune = loaded.tune.unwrap();
    assert!(tune.chosen_written);
    assert_eq!(serde_json::json!(tune.chosen), best["configuration"]);

    // The table says the same, one line per configuration.
    let args = ["tune", s(&spec), "--backend", "sim"];
    let table = text(&succeeded(gevod(&args), &args).stdout);
    assert!(
        table.contains("  BLOCK=128 ITEMS=1            dropped: "),
        "{table}"
    );
    assert!(table.contains("s BLOCK=32 ITEMS=1 "), "{table}");
    assert!(table.lines().any(|l| l.starts_with("fastest: ")), "{table}");
}

#[test]
fn tune_refuses_what_it_cannot_sweep() {
    let (dir, spec) = fixture();
    let other = tempfile::tempdir().unwrap();
    let elsewhere = other.path().join("x.gevo.toml");
    let out = gevod(&[
        "tune",
        s(&spec),
        "--backend",
        "sim",
        "--write",
        s(&elsewhere),
    ]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("write it beside"),
        "{}",
        text(&out.stderr)
    );
    assert!(!elsewhere.exists());

    let plain = repo_root().join("tests/fixtures/kernels/stencil.gevo.toml");
    let out = gevod(&["tune", s(&plain), "--backend", "sim"]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("no [tune] table"),
        "{}",
        text(&out.stderr)
    );

    let chosen = dir.path().join("chosen.gevo.toml");
    let configured =
        std::fs::read_to_string(&spec).unwrap() + "\n[tune.chosen]\nBLOCK = 64\nITEMS = 1\n";
    std::fs::write(&chosen, configured).unwrap();
    let out = gevod(&["tune", s(&chosen), "--backend", "sim"]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("runs one configuration already"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn evolve_searches_the_fastest_configuration_and_resumes_it() {
    let (dir, spec) = fixture();
    let state = dir.path().join("state");
    let run = |generations: &str, resume: bool| {
        let mut args = vec![
            "evolve",
            s(&spec),
            "--backend",
            "sim",
            "--generations",
            generations,
            "--state",
            s(&state),
            "--json",
            "--no-explain",
            "--workers",
            "2",
        ];
        if resume {
            args.push("--resume");
        }
        let out = succeeded(gevod(&args), &args);
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        (report, text(&out.stderr))
    };
    let (first, said) = run("1", false);
    let best = first["tune"]["best"]["configuration"].clone();
    assert!(best.is_object(), "{first}");
    assert!(said.contains("searching on "), "{said}");
    // The job runs the chosen configuration's spec text.
    let store = gevo_search::store::Store::open(&state).unwrap();
    let job = store.job(first["job"].as_str().unwrap()).unwrap().unwrap();
    assert!(job.spec_text.contains("[tune.chosen]"), "{}", job.spec_text);
    drop(store);

    let (second, said) = run("2", true);
    assert!(said.contains("the sweep of this spec stored in"), "{said}");
    assert_eq!(second["job"], first["job"]);
    assert_eq!(second["tune"]["best"]["configuration"], best);
    assert_eq!(second["generations"], 2);

    // The validated variant's edits, carried to the next-fastest
    // configurations and measured there.
    assert!(second["best"].is_object(), "{second}");
    let carried = second["carried"].as_array().unwrap();
    assert_eq!(carried.len(), 3, "{second}");
    for c in carried {
        assert_ne!(c["configuration"], best, "{c}");
        assert!(
            c["kept"].as_u64().unwrap() <= c["edits"].as_u64().unwrap(),
            "{c}"
        );
        assert!(c["of_source"].is_f64() != c["why"].is_string(), "{c}");
    }
    assert!(carried.iter().any(|c| c["of_source"].is_f64()), "{second}");
}

/// `gevod report` of a tuned search: the section "Launch configuration"
/// with a row per configuration the sweep timed (its ratio, or dropped and
/// why), the chosen one marked, the plot with a row label per measured
/// configuration and the served variant's point, and the numbers in
/// `--json`. (An untuned job's report has no such section:
/// report_browser.rs.)
#[test]
fn the_report_shows_the_launch_configuration() {
    let (dir, spec) = fixture();
    let state = dir.path().join("state");
    let args = [
        "evolve",
        s(&spec),
        "--backend",
        "sim",
        "--generations",
        "3",
        "--state",
        s(&state),
        "--json",
        "--no-explain",
        "--workers",
        "2",
    ];
    let evolved: serde_json::Value =
        serde_json::from_slice(&succeeded(gevod(&args), &args).stdout).unwrap();
    let sweep = &evolved["tune"];
    let best = evolved["best"]["speedup"]
        .as_f64()
        .expect("a validated variant");
    let html_path = dir.path().join("report.html");
    let args = ["report", s(&state), "-o", s(&html_path)];
    succeeded(gevod(&args), &args);
    let html = std::fs::read_to_string(&html_path).unwrap();
    let section = html
        .split("<h2 id=\"launch\">Launch configuration</h2>")
        .nth(1)
        .expect("no launch configuration section");
    let section = &section[..section.find("<h2").unwrap()];

    let describe = |c: &serde_json::Value| {
        gevo_model::spec::tune::describe(&serde_json::from_value(c.clone()).unwrap())
    };
    let chosen = describe(&sweep["best"]["configuration"]);
    assert!(
        section.contains(&format!("The search ran on <code>{chosen}</code>")),
        "{section}"
    );
    let mut chosen_ratio = None;
    let mut measured = Vec::new();
    for c in sweep["configurations"].as_array().unwrap() {
        let constants = describe(&c["configuration"]);
        let cell = format!("<td><code>{constants}</code></td>");
        let row = section.split(&cell).nth(1).expect(&cell);
        let row = &row[..row.find("</tr>").unwrap()];
        match c["mean_ratio"].as_f64() {
            Some(ratio) => {
                assert!(row.starts_with("<td>measured</td>"), "{row}");
                assert!(row.contains(&format!("{ratio:.3}")), "{row}");
                measured.push(constants.clone());
            }
            None => assert!(
                row.starts_with("<td>dropped: train[0]: the original kernel fails on the simulator: out-of-bounds"),
                "{row}"
            ),
        }
        let marked = section.contains(&format!("<tr class=\"chosen\">{cell}"));
        assert_eq!(marked, constants == chosen, "{constants}: {section}");
        if constants == chosen {
            chosen_ratio = c["mean_ratio"].as_f64();
        }
    }
    assert_eq!(measured.len(), 4, "{section}");
    let figure = section
        .split("<figure id=\"plot-launch\">")
        .nth(1)
        .expect("no launch plot");
    assert!(figure.trim_start().starts_with("<svg"), "{figure:.200}");
    for label in &measured {
        assert!(figure.contains(&format!("\n{label}\n</text>")), "{label}");
    }
    assert!(figure.contains("<polygon"), "the served variant's point");

    let args = ["report", s(&state), "--json"];
    let summary: serde_json::Value =
        serde_json::from_slice(&succeeded(gevod(&args), &args).stdout).unwrap();
    let launch = &summary["launch"];
    assert_eq!(launch["chosen"], sweep["best"]["configuration"]);
    let served = launch["served_cost_ratio"].as_f64().unwrap();
    assert!(
        (served - chosen_ratio.unwrap() / best).abs() < 1e-9,
        "{launch}"
    );
}
