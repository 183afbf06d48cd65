//! `gevod explain-edits`: the edit contributions of a validated variant,
//! measured on the simulator and stored beside it.

use crate::common;

use gevo_search::contrib::{Class, Contributions};
use gevo_search::store::Store;
use std::path::Path;
use std::process::{Command, Output};

fn gevod(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gevod"))
        .env_remove("GEVOD_LOG")
        .args(args)
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `gevod explain-edits STATE ARGS --json`, which must succeed: its result.
fn explained(state: &Path, args: &[&str]) -> Contributions {
    let out = gevod(&[&["explain-edits", s(state)], args, &["--json"]].concat());
    assert!(out.status.success(), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The contributions the store holds for job `id`'s variant `ptx_hash`.
fn stored(state: &Path, id: &str, ptx_hash: &str) -> Option<Contributions> {
    Store::open(state)
        .unwrap()
        .contributions(id, ptx_hash)
        .unwrap()
}

/// The contrib fixture's planted three-edit patch.
fn contrib_planted() -> gevo_ir::Patch {
    serde_json::from_str(
        &std::fs::read_to_string(
            common::repo_root().join("tests/fixtures/kernels/contrib.planted.patch.json"),
        )
        .unwrap(),
    )
    .unwrap()
}

/// A real `gevod evolve` job on the contrib fixture (one generation), and
/// the planted three-edit patch recorded as its validated variant: the
/// minimized patch as promotion would hand it over, without minimization
/// dropping the neutral edit. Returns the job's id.
fn job_with_planted_variant(state: &Path, dir: &Path) -> String {
    job_with_variant(state, dir, "contrib", contrib_planted())
}

/// A one-generation `gevod evolve` job on kernel fixture `fixture`, with
/// `planted` recorded as its validated variant.
fn job_with_variant(state: &Path, dir: &Path, fixture: &str, planted: gevo_ir::Patch) -> String {
    let config = dir.join("evolve.toml");
    std::fs::write(&config, "[evolve]\npopulation = 8\n").unwrap();
    let spec = common::spec_fixture(fixture);
    let out = gevod(&[
        "evolve",
        s(&spec),
        "--state",
        s(state),
        "--config",
        s(&config),
        "--generations",
        "1",
        "--backend",
        "sim",
        "--workers",
        "1",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let store = Store::open(state).unwrap();
    let id = store.jobs().unwrap().remove(0);
    let engine = store.checkpoint(&id).unwrap().unwrap();
    let mut report = store.generation(&id, 0).unwrap().unwrap().report;
    report.generation = 1;
    report.validated = vec![gevo_search::evolve::Validated {
        generation: 1,
        scope: gevo_search::evolve::Scope {
            backend: "sim".into(),
            target: "sm_90".into(),
        },
        patch: planted.clone(),
        minimized: planted,
        ptx: String::new(),
        ptx_hash: "planted".into(),
        train_cost: 0.22,
        speedup: 4.9,
        interval: (4.9, 4.9),
        heldout: Vec::new(),
    }];
    store.commit_generation(&id, &engine, &report).unwrap();
    id
}

/// The planted patch: edit 1 skips the counting loop (alone: y is 0, a
/// mismatch), edit 2 makes y's multiply use the converted scale (alone:
/// valid and no faster), edit 3 swaps two independent instructions.
#[test]
fn a_planted_patch_is_classified_speed_enabling_neutral() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let id = job_with_planted_variant(&state, dir.path());

    let c = explained(&state, &[]);
    let classes: Vec<Class> = c.edits.iter().map(|e| e.class).collect();
    assert_eq!(
        classes,
        [Class::CarriesSpeed, Class::Enabling, Class::Neutral],
        "{:#?}",
        c.edits
    );
    assert_eq!(c.scope.backend, "sim");
    assert_eq!(c.set, "heldout");
    // Full, three alone, three without one (which are the three pairs).
    assert_eq!(
        (c.variants_measured, c.not_replayed, c.pairs.len()),
        (7, 0, 3)
    );
    assert!(c.full.estimate < 0.3, "{:?}", c.full);
    assert!(
        c.edits[0]
            .alone
            .phrase()
            .contains("output y differs from the reference"),
        "{:?}",
        c.edits[0]
    );
    assert_eq!(c.edits[1].enables, [0]);
    assert!(c.edits.iter().all(|e| e.kernel == "contrib"));
    // The relies-on analysis ran: none of these edits touches a barrier,
    // a store or a loop's loads, and the patch holds at every generated size.
    let cost = c.relies_cost.expect("relies-on analysis ran");
    assert!(cost.runs > 0, "{cost:?}");
    assert!(
        c.edits.iter().all(|e| e.relies_on.is_empty()),
        "{:#?}",
        c.edits
    );

    // Stored beside the variant; the next call answers from the store.
    assert_eq!(stored(&state, &id, "planted").as_ref(), Some(&c));
    // `--backend cuda` measures on the GPU or says why it cannot; the
    // simulator's stored result stays either way when it cannot.
    let out = gevod(&["explain-edits", s(&state), "--backend", "cuda", "--json"]);
    match gevod::cuda::driver::probe(&"0".parse().unwrap()) {
        Ok(_) => {
            assert!(out.status.success(), "{}", text(&out.stderr));
            let gpu: Contributions = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(gpu.scope.backend, "cuda");
        }
        Err(_) => {
            println!("skipped the GPU measurement: no usable GPU");
            assert!(!out.status.success());
            assert!(
                text(&out.stderr).starts_with("gevod: --backend cuda: "),
                "{}",
                text(&out.stderr)
            );
            assert_eq!(stored(&state, &id, "planted").as_ref(), Some(&c));
        }
    }
    let out = gevod(&["explain-edits", s(&state), "--job", &id, "--backend", "sim"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let shown = text(&out.stdout);
    for line in [
        "#1 carries speed",
        "#2 enabling",
        "#3 neutral",
        "edit #1 is faster only with it",
        "#1 + #2: cost 0.",
        "relies-on lines: ",
    ] {
        assert!(shown.contains(line), "{line:?} not in:\n{shown}");
    }
}

/// A row stored before the relies-on analysis existed (no `relies_on`, no
/// `relies_cost`) still loads, and explain-edits adds the lines to it.
#[test]
fn a_row_stored_before_relies_on_gets_the_lines() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let root = common::repo_root().join("tests/fixtures/kernels");
    let ir = gevo_ir::KernelIr::load(&root.join("relies.ll"), Some("relies")).unwrap();
    let mut planted = ir.empty_patch();
    // Delete the first of the doubled barriers; drop the bounds check.
    planted.edits = serde_json::from_str(
        r#"[{"op":"delete","target":16},{"op":"operand_replace","user":9,"operand":0,"value":{"const":"one"}}]"#,
    )
    .unwrap();
    let id = job_with_variant(&state, dir.path(), "relies", planted);
    let fresh = explained(&state, &[]);
    assert!(fresh.edits.iter().all(|e| e.kernel == "relies"));
    assert!(!fresh.edits[0].relies_on.is_empty(), "{:#?}", fresh.edits);

    // The same row as an older gevod stored it: the JSON without the keys.
    let mut old = serde_json::to_value(&fresh).unwrap();
    old.as_object_mut().unwrap().remove("relies_cost");
    for e in old["edits"].as_array_mut().unwrap() {
        e.as_object_mut().unwrap().remove("relies_on");
    }
    let old: Contributions = serde_json::from_value(old).unwrap();
    assert!(old.relies_cost.is_none() && old.edits.iter().all(|e| e.relies_on.is_empty()));
    Store::open(&state)
        .unwrap()
        .put_contributions(&id, "planted", &old)
        .unwrap();

    let out = gevod(&["explain-edits", s(&state)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let shown = text(&out.stdout);
    for line in [
        "#1 ",
        "[relies]",
        "    relies on: deleted the __syncthreads() at relies.cu:34 ordered the shared-memory store to tile at relies.cu:33 before the shared-memory load of tile at relies.cu:36: the __syncthreads() at relies.cu:35 now orders them",
        "    relies on: holds only at the tests' sizes: the patch fails generated[0] (n = 7: one partial block)",
        "relies-on lines: ",
    ] {
        assert!(shown.contains(line), "{line:?} not in:\n{shown}");
    }
    let stored = stored(&state, &id, "planted").unwrap();
    assert!(stored.relies_cost.is_some());
    assert_eq!(stored.edits[0].relies_on, fresh.edits[0].relies_on);
}

#[test]
fn a_wrong_variant_or_job_is_a_one_line_error() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    job_with_planted_variant(&state, dir.path());
    let cases: &[(&[&str], &str)] = &[
        (&["--variant", "2"], "--variant 2: job contrib-"),
        (&["--variant", "0"], "has 1 validated variants"),
        (&["--job", "nope"], "nope"),
    ];
    for (extra, expected) in cases {
        let out = gevod(&[&["explain-edits", s(&state)], *extra].concat());
        let err = text(&out.stderr);
        assert!(
            !out.status.success() && err.contains(expected),
            "{extra:?}: {err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let out = gevod(&["explain-edits", s(&empty)]);
    assert!(text(&out.stderr).contains("is it a state directory?"));
}

/// `--pareto N`: a member of the search's Pareto front, its patch as the
/// search found it (not minimized), stored under its own PTX hash; an
/// out-of-range number says how many there are.
#[test]
fn a_pareto_member_is_explained_on_request() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let config = dir.path().join("evolve.toml");
    std::fs::write(&config, "[evolve]\npopulation = 16\n").unwrap();
    let planted = common::repo_root().join("tests/fixtures/kernels/contrib.planted.patch.json");
    let out = gevod(&[
        "evolve",
        s(&common::spec_fixture("contrib")),
        "--state",
        s(&state),
        "--config",
        s(&config),
        "--generations",
        "2",
        "--seed",
        "1",
        "--start-from",
        s(&planted),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let store = Store::open(&state).unwrap();
    let id = store.jobs().unwrap().remove(0);
    let engine = store.checkpoint(&id).unwrap().unwrap();
    let front: Vec<_> = engine
        .archive()
        .iter()
        .filter(|m| m.outcome.objectives().is_some())
        .collect();
    assert!(!front.is_empty());
    let member = front[0];
    drop(store);

    let c = explained(&state, &["--pareto", "1"]);
    assert_eq!(c.patch, member.patch);
    assert_eq!(c.edits.len(), member.patch.edits.len());
    let kept = stored(&state, &id, member.ptx_hash.as_deref().unwrap());
    assert_eq!(kept.as_ref(), Some(&c));

    let beyond = (front.len() + 1).to_string();
    let out = gevod(&["explain-edits", s(&state), "--pareto", &beyond]);
    assert!(!out.status.success());
    assert_eq!(
        text(&out.stderr),
        format!(
            "gevod: --pareto {beyond}: job {id}'s Pareto front has {} members\n",
            front.len()
        )
    );
}

/// `--threshold` judges with the given fraction, and a result stored at
/// another threshold is measured again (then answered from the store); a
/// threshold outside (0, 1) is refused in one line.
#[test]
fn the_threshold_is_the_users_and_is_stored_with_the_result() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let id = job_with_planted_variant(&state, dir.path());
    assert_eq!(explained(&state, &[]).threshold, 0.01);

    let out = gevod(&["explain-edits", s(&state), "--threshold", "0.5", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let half: Contributions = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(half.threshold, 0.5);
    let neutral = half
        .edits
        .iter()
        .find(|e| e.class == Class::Neutral)
        .expect("the swap stays neutral");
    assert!(
        neutral.why.contains("exceed 50% of its gain"),
        "{}",
        neutral.why
    );
    assert_eq!(stored(&state, &id, "planted").as_ref(), Some(&half));
    let again = gevod(&["explain-edits", s(&state), "--threshold", "0.5", "--json"]);
    assert_eq!(again.stdout, out.stdout, "answered from the store");

    for bad in ["0", "1.5", "x"] {
        let out = gevod(&["explain-edits", s(&state), "--threshold", bad]);
        assert!(!out.status.success());
        let err = text(&out.stderr);
        assert!(err.contains("a fraction between 0 and 1"), "{err}");
    }
}
