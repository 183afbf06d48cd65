//! Harness mode (docs/harness.md): the heat example builds and evolves on
//! the simulator through its own program; a harness that fails, crashes,
//! hangs, writes nothing, too much or something else rejects the variant
//! with that reason; the daemon runs a harness job as its unprivileged user
//! and refuses specs of users it does not trust.

use crate::common;

use common::daemon::{s, Daemon};
use common::{have_tools, kernel_fixture, repo_root};
use gevo_client::proto::JobState;
use gevo_ir::{CodegenOptions, KernelIr};
use gevo_model::spec::TestSet;
use gevod::harness::{HarnessEvaluator, Runner};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn gevod() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_gevod"))
}

/// The heat example's program and spec in `dir`, its IR emitted by the
/// example's Makefile (clang-19), or `None` (said why) without the tools.
fn build_heat(dir: &Path) -> Option<()> {
    if !have_tools(&["make", "cc", "clang-19"]) {
        return None;
    }
    let example = repo_root().join("examples/harness-app");
    for f in ["Makefile", "heat.c", "heat.gevo.toml"] {
        std::fs::copy(example.join(f), dir.join(f)).unwrap();
    }
    let out = Command::new("make")
        .current_dir(dir)
        .arg(format!("GEVO={}", repo_root().display()))
        .arg(format!("GEVOD={}", gevod().display()))
        .args(["all", "stencil.ptx"])
        .output()
        .unwrap();
    assert!(out.status.success(), "make: {}", text(&out.stderr));
    Some(())
}

#[test]
fn heat_example_evolves_on_the_simulator_and_a_racing_variant_is_rejected() {
    let dir = tempfile::tempdir().unwrap();
    if build_heat(dir.path()).is_none() {
        return;
    }
    std::fs::write(
        dir.path().join("evolve.toml"),
        "[evolve]\npopulation = 32\n",
    )
    .unwrap();
    let out = Command::new(gevod())
        .current_dir(dir.path())
        .args([
            "evolve",
            "heat.gevo.toml",
            "--backend",
            "sim",
            "--state",
            "state",
        ])
        .args(["--generations", "15", "--config", "evolve.toml"])
        .output()
        .unwrap();
    let report = text(&out.stdout);
    assert!(out.status.success(), "{report}\n{}", text(&out.stderr));
    assert!(report.contains("harness-sim on sm_90"), "{report}");
    let speedup: f64 = report
        .split("speedup ")
        .nth(1)
        .and_then(|t| t.split('x').next())
        .unwrap_or_else(|| panic!("no validated variant:\n{report}"))
        .parse()
        .unwrap();
    assert!(speedup > 1.0, "{report}");
    // The validated variant is other PTX than the original, and the program
    // runs it on every test with the same grids and a lower cost.
    let best = |name: &str| {
        report
            .lines()
            .find_map(|l| {
                l.trim()
                    .strip_prefix(name)
                    .map(|p| dir.path().join(p.trim()))
            })
            .unwrap_or_else(|| panic!("no {name} in\n{report}"))
    };
    let original = std::fs::read(dir.path().join("stencil.ptx")).unwrap();
    assert_ne!(std::fs::read(best("PTX:")).unwrap(), original);
    let run = Command::new(gevod())
        .current_dir(dir.path())
        .args([
            "run",
            "heat.gevo.toml",
            "--backend",
            "sim",
            "--tests",
            "all",
            "--patch",
        ])
        .arg(best("minimized patch:"))
        .output()
        .unwrap();
    let table = text(&run.stdout);
    assert!(run.status.success(), "{table}\n{}", text(&run.stderr));
    assert_eq!(table.matches(" pass ").count(), 3, "{table}");
    let ratio: f64 = table
        .split("cost ratio ")
        .nth(1)
        .and_then(|t| t.split(',').next())
        .unwrap()
        .parse()
        .unwrap();
    assert!(ratio < 1.0, "{table}");

    // Dropping both barriers races on shared memory: the simulator stops
    // the launch, heat exits 1, and the variant is rejected with the race.
    let spec = std::fs::read_to_string(dir.path().join("heat.gevo.toml")).unwrap();
    std::fs::write(
        dir.path().join("fixture.gevo.toml"),
        spec.replace(
            "ir = \"stencil.ll\"",
            &format!("ir = \"{}\"", kernel_fixture("stencil").display()),
        ),
    )
    .unwrap();
    let ir = KernelIr::load(&kernel_fixture("stencil"), None).unwrap();
    std::fs::write(
        dir.path().join("race.patch.json"),
        format!(
            r#"{{"format": 1, "ir_hash": "{}", "kernel": "stencil5", "edits": [{{"op": "delete", "target": 86}}, {{"op": "delete", "target": 87}}]}}"#,
            ir.ir_hash()
        ),
    )
    .unwrap();
    let run = Command::new(gevod())
        .current_dir(dir.path())
        .args(["run", "fixture.gevo.toml", "--backend", "sim"])
        .args(["--patch", "race.patch.json"])
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(1), "{run:?}");
    let table = text(&run.stdout);
    assert!(table.contains("harness_exit"), "{table}");
    assert!(table.contains("shared-memory race"), "{table}");
}

/// A harness spec in `dir` for the stencil fixture whose command is
/// `command` (a TOML array), with one u8 output file `r.bin` compared
/// exactly, on the simulator.
fn script_harness(dir: &Path, command: &str) -> HarnessEvaluator {
    let spec_path = dir.join("app.gevo.toml");
    std::fs::write(
        &spec_path,
        common::harness_spec_text(&kernel_fixture("stencil"), command),
    )
    .unwrap();
    let spec = gevo_model::spec::load(&spec_path).unwrap();
    let runner = Runner::Simulate { gevod: gevod() };
    HarnessEvaluator::new(spec, CodegenOptions::default(), runner, None).unwrap()
}

/// One harness per row: a shell script that behaves for the original's PTX
/// and misbehaves as the row says for the variant's.
#[test]
fn each_harness_failure_rejects_the_variant_with_its_reason() {
    let cases: &[(&str, Option<(&str, &str)>)] = &[
        (
            "exit 3",
            Some(("harness_exit", "exited with status 3: boom")),
        ),
        ("kill -SEGV $$", Some(("harness_crash", "signal 11"))),
        ("sleep 30", Some(("timeout", "killed"))),
        ("exit 0", Some(("harness_output", "wrote no {out}/r.bin"))),
        (
            "head -c 5000 /dev/zero > \"$out/r.bin\"",
            Some(("harness_output", "more than max_output_bytes = 1000")),
        ),
        (
            "head -c 5000 /dev/zero",
            Some(("harness_output", "printed more than max_output_bytes")),
        ),
        (
            "printf 'AAAB' > \"$out/r.bin\"",
            Some(("mismatch", "output r.bin differs")),
        ),
        // An output that points elsewhere is never followed: under a root
        // daemon its mismatch numbers would tell a file the harness's user
        // may not read.
        (
            "ln -s /etc/passwd \"$out/r.bin\"",
            Some(("harness_output", "{out}/r.bin is a symlink")),
        ),
        (
            "mkfifo \"$out/r.bin\"",
            Some(("harness_output", "not a plain file")),
        ),
        // Faster and right: it passes, with the cost it reported.
        (
            "printf 'AAAA' > \"$out/r.bin\"; echo GEVO_KERNEL_MS=0.5",
            None,
        ),
    ];
    let ir = KernelIr::load(&kernel_fixture("stencil"), None).unwrap();
    for (misbehaviour, expected) in cases {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("app.sh"),
            format!(
                "out=$1\ncase \"$GEVO_PTX\" in */original/*)\n  printf 'AAAA' > \"$out/r.bin\"; echo GEVO_KERNEL_MS=2; exit 0;;\nesac\necho boom >&2\n{misbehaviour}\n"
            ),
        )
        .unwrap();
        let evaluator = script_harness(dir.path(), r#"["/bin/sh", "app.sh", "{out}"]"#);
        let a = evaluator.assess(&ir.empty_patch(), TestSet::Train).unwrap();
        let t = &a.tests[0];
        assert_eq!(t.original_cost, 2_000_000, "{misbehaviour}: {t:?}");
        match expected {
            None => {
                assert!(t.failure.is_none(), "{misbehaviour}: {t:?}");
                assert_eq!(t.cost, Some(500_000), "{misbehaviour}");
            }
            Some((kind, message)) => {
                let (k, m) = t
                    .failure
                    .as_ref()
                    .unwrap_or_else(|| panic!("{misbehaviour}: passed"));
                assert_eq!(k, kind, "{misbehaviour}: {m}");
                assert!(m.contains(message), "{misbehaviour}: {m}");
            }
        }
    }
}

#[test]
fn a_harness_whose_original_fails_is_an_error_naming_the_test() {
    let dir = tempfile::tempdir().unwrap();
    let evaluator = script_harness(
        dir.path(),
        r#"["/bin/sh", "-c", "echo no GPU here >&2; exit 1"]"#,
    );
    let ir = evaluator.ir().empty_patch();
    let e = evaluator
        .assess(&ir, TestSet::Train)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("app.gevo.toml: train[0]: the original kernel fails in the harness")
            && e.contains("status 1: no GPU here"),
        "{e}"
    );
}

/// As root, the daemon runs a harness job as `nobody` and serves its best
/// variant; a harness spec owned by another user is refused in status.
#[test]
fn the_daemon_runs_harness_jobs_unprivileged_and_refuses_untrusted_specs() {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        println!("skipped: running as another user and chown need root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let open =
        |p: &Path| std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    open(dir.path());
    let app = dir.path().join("app");
    std::fs::create_dir(&app).unwrap();
    open(&app);
    if build_heat(&app).is_none() {
        return;
    }
    // The checkout may sit where nobody cannot reach (/root): a copy of
    // gevod runs the daemon, and so its workers and the simulator.
    let binary = dir.path().join("gevod");
    std::fs::copy(gevod(), &binary).unwrap();
    open(&binary);
    let mut d = Daemon::start_binary(dir.path(), &binary, &["--watch", s(&app)]);
    let best = d.wait_for("heat's validated variant", |d| {
        let out = d.client(&["--json", "best", "heat/heat"]);
        match out.status.code() {
            Some(0) => Some(serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()),
            Some(3) => None,
            _ => panic!("best: {out:?}\n{}", d.log_text()),
        }
    });
    assert!(best["speedup"].as_f64().unwrap() > 1.0, "{best}");
    // Its workers were told to run the program as nobody.
    d.wait_for("a worker running harness commands as nobody", |_| {
        std::fs::read_dir("/proc").unwrap().flatten().find(|p| {
            std::fs::read(p.path().join("cmdline"))
                .is_ok_and(|c| text(&c).contains("--run-as\x0065534:65534"))
        })
    });

    // Another user's copy of the spec is refused, and said so in status.
    let theirs = app.join("theirs.gevo.toml");
    std::fs::write(
        &theirs,
        std::fs::read_to_string(app.join("heat.gevo.toml"))
            .unwrap()
            .replace("project = \"heat\"", "project = \"theirs\""),
    )
    .unwrap();
    std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
    let refused = d.wait_for("the refusal", |d| {
        d.jobs()
            .into_iter()
            .find(|j| j.kernel == "theirs/theirs" && j.state == JobState::Error)
    });
    let message = refused.message.unwrap_or_default();
    assert!(
        message.contains("harness: refused: the spec is owned by uid 65534"),
        "{message}"
    );
    let (status, _) = d.signal(libc::SIGTERM);
    assert!(status.success(), "{status}");
}
