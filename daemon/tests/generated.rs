//! Generated held-out tests (docs/evolve.md, "Generated held-out tests"):
//! which candidates each fixture keeps and drops, and the planted variants
//! that pass the user's tests and fail a generated one, with the reason.

use crate::common;

use gevo_ir::Patch;
use gevo_model::spec::{self, TestSet, TestTarget};
use gevo_search::eval::Evaluator;

fn general(name: &str) -> std::path::PathBuf {
    common::repo_root().join(format!("tests/fixtures/general/{name}"))
}

fn evaluator(spec: &std::path::Path) -> Evaluator {
    let spec = spec::load(spec).unwrap().for_backend(TestTarget::Sim);
    Evaluator::new(spec, 2).unwrap()
}

/// A planted variant: passes every user test, and fails the generated
/// tests with a reason holding `words`.
#[test]
fn planted_variants_pass_the_users_tests_and_fail_a_generated_one() {
    let cases: [(&str, &str, &[&str]); 2] = [
        // 1/rx became 1/ry: every user test has rx == ry.
        (
            "scale2",
            "scale2.swap-scalars",
            &["rx != ry", "output out differs"],
        ),
        // The valid range taken as the whole block: wrong on a partial
        // block after the first; every user test is whole blocks.
        (
            "tailsum",
            "tailsum.whole-block",
            &["one block + 1", "never written", "`tile`", "general.cu:36"],
        ),
    ];
    for (spec, patch, words) in cases {
        let e = evaluator(&general(&format!("{spec}.gevo.toml")));
        let text = std::fs::read_to_string(general(&format!("{patch}.patch.json"))).unwrap();
        let patch = Patch::from_json(&text).unwrap();
        let users = e.evaluate(&patch, TestSet::All).unwrap();
        assert!(users.iter().all(|r| r.passed()), "{spec}: {users:?}");
        let original = e
            .evaluate(&e.ir().empty_patch(), TestSet::Generated)
            .unwrap();
        assert!(
            !original.is_empty() && original.iter().all(|r| r.passed()),
            "{spec}: the original passes its own generated tests: {original:?}"
        );
        let results = e.evaluate(&patch, TestSet::Generated).unwrap();
        let failed = results.last().unwrap();
        let failure = failed.failure.as_ref().expect("a generated test fails");
        let reason = format!("{}: {failure}", failed.test);
        for w in words {
            assert!(reason.contains(w), "{spec}: `{w}` not in: {reason}");
        }
    }
}

/// The original defines the domain: a kernel without a bounds check keeps
/// only generated tests on its block grid, and drops the others saying the
/// original fails there.
#[test]
fn a_kernel_that_needs_whole_blocks_keeps_only_whole_block_tests() {
    let e = evaluator(&general("nocheck.gevo.toml"));
    let g = e.generated().unwrap();
    assert!(!g.kept.is_empty(), "{g:?}");
    for k in &g.kept {
        let n = k.test.params["n"];
        assert!(n >= 64.0 && n % 64.0 == 0.0, "kept off the grid: {k:?}");
    }
    let off_grid: Vec<_> = g
        .dropped
        .iter()
        .filter(|d| d.test.params["n"] % 64.0 != 0.0)
        .collect();
    assert!(!off_grid.is_empty(), "{g:?}");
    for d in off_grid {
        assert!(
            d.reason.starts_with("the original fails there")
                || d.reason.starts_with("the spec does not make it"),
            "{d:?}"
        );
    }
    // The original, and so any variant as right as it, passes them all.
    let results = e
        .evaluate(&e.ir().empty_patch(), TestSet::Generated)
        .unwrap();
    assert!(results.iter().all(|r| r.passed()), "{results:?}");
    assert_eq!(results.len(), g.kept.len());
}

/// The original defines the domain and the domain still has room: a search
/// on a kernel that needs whole blocks validates its real improvement (the
/// barrier that orders nothing, deleted), promotion having run the
/// generated tests it keeps, all on the block grid.
#[test]
fn a_kernel_that_needs_whole_blocks_still_validates_its_real_improvement() {
    let gevod = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_gevod"))
            .env("GEVO_LIBDEVICE", common::libdevice_stub())
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", common::text(&out.stderr));
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let spec = general("gridonly.gevo.toml");
    let state = tempfile::tempdir().unwrap();
    let report = gevod(&[
        "evolve",
        common::s(&spec),
        "--state",
        common::s(state.path()),
        "--evaluations",
        "600",
        "--seed",
        "1",
        "--json",
    ]);
    let best = &report["best"];
    let speedup = best["speedup"].as_f64().unwrap_or(0.0);
    assert!(speedup > 1.1, "no real improvement validated: {report}");
    let minimized = best["minimized_patch"].as_str().unwrap();
    let patch = Patch::from_json(&std::fs::read_to_string(minimized).unwrap()).unwrap();
    let ir = gevo_ir::KernelIr::load(&spec.with_file_name("gridonly.ll"), None).unwrap();
    let stories: Vec<String> = ir
        .describe(&patch)
        .unwrap()
        .into_iter()
        .map(|s| s.summary)
        .collect();
    assert!(
        stories.iter().any(|s| s.contains("__syncthreads()")),
        "the validated edit is not the barrier's deletion: {stories:?}"
    );
    // What promotion ran: kept only on the grid, and the variant passes all.
    let run = gevod(&[
        "run",
        common::s(&spec),
        "--tests",
        "generated",
        "--patch",
        minimized,
        "--json",
    ]);
    let kept = run["kept"].as_array().unwrap();
    assert!(!kept.is_empty(), "{run}");
    for k in kept {
        let n = k["params"]["n"].as_f64().unwrap();
        assert!(n >= 64.0 && n % 64.0 == 0.0, "kept off the grid: {k}");
    }
    let results = run["results"].as_array().unwrap();
    assert_eq!(results.len(), kept.len(), "{run}");
    assert!(
        results
            .iter()
            .all(|r| r["passed"] == true && r["cost_ratio"].as_f64() < Some(1.0)),
        "{run}"
    );
}

/// An `in` buffer the original itself writes is the original's to change:
/// neither the original nor a variant leaving something else there (here
/// the value it read, undoubled) gets an `input_written` verdict, on the
/// user's tests or the generated ones.
#[test]
fn an_input_the_original_writes_may_change() {
    let e = evaluator(&general("inplace.gevo.toml"));
    let mut patch = serde_json::to_value(e.ir().empty_patch()).unwrap();
    // i11 `store float %14, ptr %12` stores the loaded %13 (i9) instead.
    patch["edits"] = serde_json::json!([
        { "op": "operand_replace", "user": 11, "operand": 0, "value": { "inst": 9 } }
    ]);
    let variant = Patch::from_json(&patch.to_string()).unwrap();
    for (name, p) in [
        ("the original", e.ir().empty_patch()),
        ("the variant", variant),
    ] {
        for set in [TestSet::All, TestSet::Generated] {
            let results = e.evaluate(&p, set).unwrap();
            assert!(!results.is_empty(), "{name}: no {set:?} tests");
            assert!(results.iter().all(|r| r.passed()), "{name}: {results:?}");
        }
    }
}

/// Per fixture: the lint lines, and bounds on what is kept (at most the
/// spec's `generate`, each under the cost cap).
#[test]
fn lints_and_bounds_per_fixture() {
    let cases: [(std::path::PathBuf, &[&str]); 4] = [
        (
            general("scale2.gevo.toml"),
            &["rx and ry are equal in every test"],
        ),
        (
            general("tailsum.gevo.toml"),
            &["no test has a partial block (n"],
        ),
        (
            general("nocheck.gevo.toml"),
            &["no test has a partial block (n"],
        ),
        (common::spec_fixture("vecadd"), &[]),
    ];
    for (path, lints) in cases {
        let e = evaluator(&path);
        let g = e.generated().unwrap();
        assert_eq!(
            g.lints.len(),
            lints.len(),
            "{}: {:?}",
            path.display(),
            g.lints
        );
        for (line, words) in g.lints.iter().zip(lints) {
            assert!(line.contains(words), "{line}");
        }
        assert!(g.kept.len() <= e.spec().generation().max, "{g:?}");
        assert!(g.kept.iter().all(|k| k.cost <= g.cost_cap), "{g:?}");
    }
}

/// Inputs stay inputs: a variant whose outputs are right but which also
/// stores into `in` (a copy of the output store, its pointer moved to the
/// input) fails every test at that store, a simulator verdict naming the
/// buffer, the element and the source line of the store it copied (even
/// on train[0], where rx = ry makes the stored value `in`'s own, bitwise);
/// the original passes.
#[test]
fn a_variant_writing_an_input_buffer_fails_naming_it_and_the_line() {
    let e = evaluator(&general("scale2.gevo.toml"));
    let original = e.evaluate(&e.ir().empty_patch(), TestSet::All).unwrap();
    assert!(original.iter().all(|r| r.passed()), "{original:?}");
    let text = std::fs::read_to_string(general("scale2.writes-input.patch.json")).unwrap();
    let results = e
        .evaluate(&Patch::from_json(&text).unwrap(), TestSet::All)
        .unwrap();
    assert_eq!(results.len(), 3);
    for (r, len) in results.iter().zip([200, 77, 300]) {
        let failure = r.failure.as_ref().expect("the variant fails");
        // Its outputs match: the failure is the input, not a mismatch.
        assert_eq!(failure.kind(), "input_written", "{}: {failure}", r.test);
        let text = failure.to_string();
        assert!(
            text.starts_with(&format!(
                "writes input buffer `in` at general.cu:22 (element 0 of {len}), which the original never writes (instruction i17"
            )),
            "{}: {text}",
            r.test
        );
    }
}

/// `gevod run --tests generated` lists the tests kept and dropped (with
/// why) and the lint lines, then the variant's results; a plain run says
/// the same list and lint lines on stderr, after its results on stdout,
/// and with `--json` its stdout is still the results array alone.
#[test]
fn gevod_run_lists_generated_tests_and_lints() {
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_gevod"))
            .args(args)
            .output()
            .unwrap();
        (
            out.status.success(),
            common::text(&out.stdout),
            common::text(&out.stderr),
        )
    };
    let spec = general("nocheck.gevo.toml");
    let (ok, stdout, _) = run(&[
        "run",
        common::s(&spec),
        "--backend",
        "sim",
        "--tests",
        "generated",
    ]);
    assert!(ok, "{stdout}");
    for words in [
        "kept     generated[",
        "n = 64: exactly one block",
        "dropped  generated[",
        "n = 7: one partial block: the original fails there: out-of-bounds",
        "lint: no test has a partial block (n below or off a multiple of the block)",
    ] {
        assert!(stdout.contains(words), "`{words}` not in:\n{stdout}");
    }
    let spec = general("tailsum.gevo.toml");
    let patch = general("tailsum.whole-block.patch.json");
    let (ok, stdout, _) = run(&[
        "run",
        common::s(&spec),
        "--backend",
        "sim",
        "--tests",
        "generated",
        "--patch",
        common::s(&patch),
    ]);
    assert!(!ok);
    // The columns are padded to the longest test name.
    let flat = stdout.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains("generated[3] (n = 65: one block + 1) uninitialized_shared"),
        "{stdout}"
    );
    let (ok, _, stderr) = run(&[
        "run",
        common::s(&general("scale2.gevo.toml")),
        "--backend",
        "sim",
    ]);
    assert!(ok, "{stderr}");
    assert!(
        stderr.contains("lint: rx and ry are equal in every test"),
        "{stderr}"
    );
    // A plain run, text and JSON: the results on stdout, the generated
    // tests kept and dropped (with why) and the lints on stderr.
    let spec = general("nocheck.gevo.toml");
    for json in [false, true] {
        let mut args = vec!["run", common::s(&spec), "--backend", "sim"];
        if json {
            args.push("--json");
        }
        let (ok, stdout, stderr) = run(&args);
        assert!(ok, "{stderr}");
        for words in [
            "generated tests: ",
            "kept     generated[",
            "n = 64: exactly one block",
            "dropped  generated[",
            "n = 7: one partial block: the original fails there: out-of-bounds",
            "lint: no test has a partial block (n below or off a multiple of the block)",
        ] {
            assert!(
                stderr.contains(words),
                "json {json}: `{words}` not in:\n{stderr}"
            );
            assert!(
                !stdout.contains(words),
                "json {json}: `{words}` on stdout:\n{stdout}"
            );
        }
        if json {
            let rows: serde_json::Value = serde_json::from_str(&stdout).unwrap();
            let rows = rows.as_array().expect("the results array");
            assert!(
                !rows.is_empty() && rows.iter().all(|r| r["passed"] == true),
                "{stdout}"
            );
        } else {
            assert!(stdout.starts_with("test "), "{stdout}");
        }
    }
}
