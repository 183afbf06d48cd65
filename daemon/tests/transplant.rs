//! Carrying patches to a new version of a kernel (ARCHITECTURE.md,
//! "Transplanting patches"): the cases of tests/fixtures/transplant/cases.txt,
//! and the identity on every kernel fixture.

use crate::common;

use gevo_ir::transplant::Transplanter;
use gevo_ir::{KernelIr, Patch};
use gevo_model::spec;
use gevo_search::evolve::{Config, Engine};
use gevod::worker::InProcess;
use std::path::PathBuf;

fn transplant_dir() -> PathBuf {
    common::repo_root().join("tests/fixtures/transplant")
}

fn read_patch(path: &std::path::Path) -> Patch {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Patch::from_json(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn load(path: &std::path::Path, kernel: &str) -> KernelIr {
    KernelIr::load(path, Some(kernel)).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

struct Case {
    changed: String,
    patch: String,
    kept: (usize, usize),
    validates: bool,
}

fn cases() -> Vec<Case> {
    let text = std::fs::read_to_string(transplant_dir().join("cases.txt")).unwrap();
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (kept, total) = f[2].split_once('/').expect("kept/total");
            Case {
                changed: f[0].to_string(),
                patch: f[1].to_string(),
                kept: (kept.parse().unwrap(), total.parse().unwrap()),
                validates: f[3].starts_with("yes"),
            }
        })
        .collect()
}

/// The case's patch carried to the changed IR, through the base IR.
fn carry(case: &Case) -> (Patch, Patch, PathBuf, String) {
    let kernel = case.changed.split('.').next().unwrap().to_string();
    let patch = read_patch(
        &common::repo_root()
            .join("tests/fixtures")
            .join(format!("{}.patch.json", case.patch)),
    );
    let old = load(&common::kernel_fixture(&kernel), &patch.kernel);
    let base = load(
        &transplant_dir().join(format!("{kernel}.base.ll")),
        &patch.kernel,
    );
    let changed_path = transplant_dir().join(format!("{}.ll", case.changed));
    let changed = load(&changed_path, &patch.kernel);

    let to_base = Transplanter::new(&old, &base)
        .unwrap()
        .transplant(&patch)
        .unwrap();
    assert!(
        to_base.dropped.is_empty(),
        "{}: line tables alone lost edits: {:?}",
        case.patch,
        to_base.dropped
    );
    let carried = Transplanter::new(&base, &changed)
        .unwrap()
        .transplant(&to_base.patch)
        .unwrap();
    let label = format!("{} onto {}", case.patch, case.changed);
    assert_eq!(
        (carried.kept.len(), patch.edits.len()),
        case.kept,
        "{label}: dropped {:?}",
        carried
            .dropped
            .iter()
            .map(|d| d.to_string())
            .collect::<Vec<_>>()
    );
    for d in &carried.dropped {
        assert!(
            d.to_string().contains("no unambiguous match"),
            "{label}: {d}"
        );
    }
    changed.check(&carried.patch).unwrap();
    assert_eq!(carried.patch.ir_hash, changed.ir_hash());
    (patch, carried.patch, changed_path, kernel)
}

#[test]
fn changed_sources_keep_their_edits_and_validate_in_the_first_generation() {
    for case in cases() {
        let (_, carried, changed_path, kernel) = carry(&case);
        if !case.validates {
            continue;
        }
        let mut spec = spec::load(&common::spec_fixture(&kernel)).unwrap();
        spec.ir = changed_path.clone();
        let ir = load(&changed_path, &spec.kernel);
        let mut backend = InProcess::new(spec, common::codegen_options()).unwrap();
        let config = Config {
            population: 4,
            promotions_per_generation: 1,
            ..Config::default()
        };
        let mut engine = Engine::new(config, 1).unwrap();
        // The whole initial population is the carried patch: nothing
        // else can be what validates.
        engine.seed_with(vec![carried.clone(); 4]);
        engine.step(&ir, &mut backend).unwrap();
        assert!(
            engine.validated().iter().any(|v| v.patch == carried),
            "{}: the carried patch did not validate in generation 0: {:?}; {:?}",
            case.changed,
            engine.population()[0].outcome,
            engine.promotion_failures()
        );
    }
}

#[test]
fn carrying_a_patch_to_the_same_ir_changes_nothing() {
    for name in common::KERNEL_FIXTURES {
        let ir = common::load(name);
        let t = Transplanter::new(&ir, &ir).unwrap();
        assert_eq!(
            t.matched(),
            (
                ir.instruction_count() as usize,
                ir.instruction_count() as usize
            ),
            "{name}"
        );
        for id in 0..ir.instruction_count() {
            let id = gevo_ir::InstId(id);
            assert_eq!(t.map_id(id), Some(id), "{name}");
        }
        let mut rng = <rand_chacha::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(3);
        let patch = ir.mutate(&mut rng, 3).unwrap();
        let carried = t.transplant(&patch).unwrap();
        assert_eq!(carried.patch, patch, "{name}");
    }
}

/// Evaluations until the first validated variant (at most `cap` generations).
fn evaluations_to_validate(
    engine: &mut Engine,
    ir: &KernelIr,
    backend: &mut InProcess,
    cap: u64,
) -> u64 {
    while engine.validated().is_empty() {
        assert!(
            engine.generations() < cap,
            "nothing validated in {cap} generations"
        );
        engine.step(ir, backend).unwrap();
    }
    engine.counters().evaluations
}

/// The numbers of BENCHMARKS.md, "Rebuilt kernels keep their progress".
#[test]
fn a_seeded_search_validates_in_far_fewer_evaluations_than_a_fresh_one() {
    seeded_against_fresh("stencil", "stencil.constant");
    seeded_against_fresh("nw", "nw.helper");
}

fn seeded_against_fresh(kernel: &str, change: &str) {
    // GEVO's own search (the counts in BENCHMARKS.md are with it).
    let config = Config {
        population: 32,
        ..Config::plain_gevo()
    };
    let spec = spec::load(&common::spec_fixture(kernel)).unwrap();
    let old = load(&spec.ir, &spec.kernel);
    let mut backend = InProcess::new(spec.clone(), common::codegen_options()).unwrap();
    let mut previous = Engine::new(config.clone(), 1).unwrap();
    let first = evaluations_to_validate(&mut previous, &old, &mut backend, 60);

    let changed_path = transplant_dir().join(format!("{change}.ll"));
    let new = load(&changed_path, &spec.kernel);
    let mut changed_spec = spec.clone();
    changed_spec.ir = changed_path;
    let mut backend = InProcess::new(changed_spec, common::codegen_options()).unwrap();
    let mut fresh = Engine::new(config.clone(), 1).unwrap();
    let fresh_count = evaluations_to_validate(&mut fresh, &new, &mut backend, 60);

    let patches =
        gevo_search::seed::previous_patches(previous.validated().to_vec(), Some(&previous));
    let gevo_search::seed::Carried {
        seeds,
        kept,
        dropped,
        ..
    } = gevo_search::seed::carry(&old, &new, &patches).expect("patches carry over");
    let mut seeded = Engine::new(config, 1).unwrap();
    seeded.seed_with(seeds.clone());
    let seeded_count = evaluations_to_validate(&mut seeded, &new, &mut backend, 60);
    println!(
        "{kernel} -> {change}: previous version validated after {first} evaluations; \
         fresh job {fresh_count} evaluations (generation {}), seeded job {seeded_count} \
         (generation {}); {} patches carried, {kept} edits kept, {dropped} dropped",
        fresh.validated()[0].generation,
        seeded.validated()[0].generation,
        seeds.len()
    );
    assert_eq!(seeded.validated()[0].generation, 0);
    assert!(
        seeded_count * 3 <= fresh_count,
        "seeded {seeded_count} vs fresh {fresh_count}"
    );
}

#[test]
fn gevod_transplant_writes_the_carried_patch_or_under_strict_one_line_per_dropped_edit() {
    let dir = tempfile::tempdir().unwrap();
    let t = transplant_dir();
    let base = t.join("stencil.base.ll");
    // The evolved patch on the base IR (same code, line tables).
    let on_base = dir.path().join("base.patch.json");
    let run = |args: &[&std::ffi::OsStr]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_gevod"))
            .arg("transplant")
            .args(args)
            .output()
            .unwrap()
    };
    let out = run(&[
        common::kernel_fixture("stencil").as_os_str(),
        base.as_os_str(),
        "--patch".as_ref(),
        t.join("stencil.evolved.patch.json").as_os_str(),
        "-o".as_ref(),
        on_base.as_os_str(),
    ]);
    assert!(out.status.success(), "{out:?}");
    let summary = String::from_utf8_lossy(&out.stderr);
    assert!(
        summary.contains("2 of 2 edits kept, 0 dropped"),
        "{summary}"
    );

    let removed = t.join("stencil.removed.ll");
    let written = dir.path().join("removed.patch.json");
    let strict = run(&[
        base.as_os_str(),
        removed.as_os_str(),
        "--patch".as_ref(),
        on_base.as_os_str(),
        "-o".as_ref(),
        written.as_os_str(),
        "--strict".as_ref(),
    ]);
    assert_eq!(strict.status.code(), Some(1), "{strict:?}");
    let errors = String::from_utf8_lossy(&strict.stderr);
    let lines: Vec<&str> = errors.lines().collect();
    assert_eq!(lines.len(), 1, "{errors}");
    assert!(
        lines[0].contains("edit 1 (delete i86)")
            && lines[0].contains("tail call void @llvm.nvvm.barrier0()")
            && lines[0].contains("no unambiguous match"),
        "{errors}"
    );
    assert!(!written.exists(), "--strict wrote a patch");

    let lenient = run(&[
        base.as_os_str(),
        removed.as_os_str(),
        "--patch".as_ref(),
        on_base.as_os_str(),
        "-o".as_ref(),
        written.as_os_str(),
    ]);
    assert!(lenient.status.success(), "{lenient:?}");
    let summary = String::from_utf8_lossy(&lenient.stderr);
    assert!(
        summary.contains("1 of 2 edits kept, 1 dropped"),
        "{summary}"
    );
    let carried = read_patch(&written);
    assert_eq!(carried.edits.len(), 1);

    // A patch for other IR than the old one is refused, naming the patch.
    let wrong = run(&[
        removed.as_os_str(),
        base.as_os_str(),
        "--patch".as_ref(),
        on_base.as_os_str(),
    ]);
    assert_eq!(wrong.status.code(), Some(1));
    let error = String::from_utf8_lossy(&wrong.stderr);
    assert!(
        error.contains("base.patch.json") && error.contains("other IR"),
        "{error}"
    );
}

#[test]
fn gevod_evolve_seeds_a_changed_kernel_from_the_earlier_search_in_its_state() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::copy(common::spec_fixture("stencil"), d.join("stencil.gevo.toml")).unwrap();
    std::fs::copy(common::kernel_fixture("stencil"), d.join("stencil.ll")).unwrap();
    std::fs::write(d.join("search.toml"), "[evolve]\npopulation = 32\n").unwrap();
    let evolve = |generations: &str| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_gevod"))
            .current_dir(d)
            .args([
                "evolve",
                "stencil.gevo.toml",
                "--backend",
                "sim",
                "--workers",
                "2",
            ])
            .args([
                "--config",
                "search.toml",
                "--state",
                "st",
                "--generations",
                generations,
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (first, _) = evolve("4");
    assert!(first.contains("best validated variant"), "{first}");
    assert!(!first.contains("seeded from"), "{first}");

    std::fs::copy(
        transplant_dir().join("stencil.constant.ll"),
        d.join("stencil.ll"),
    )
    .unwrap();
    let (report, log) = evolve("0");
    assert!(log.contains("seeded from job stencil-"), "{log}");
    assert!(
        report.contains("seeded from job stencil-") && report.contains("0 dropped"),
        "{report}"
    );
    assert!(
        report.contains("best validated variant (generation 0)"),
        "{report}"
    );
    assert!(report.contains("(from job stencil-"), "{report}");
}
