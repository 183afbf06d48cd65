//! scripts/install-deps.sh by purpose: the main job (scripts/run.sh)
//! installs what building and running need, the test command
//! (scripts/test.sh, which CI runs) everything else besides. Read through
//! the script's own `--list`, which installs nothing.

use std::path::PathBuf;
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The script's `--list` for `args`: its words, and its exit code.
fn list(args: &[&str]) -> (Vec<String>, Option<i32>) {
    let out = Command::new("bash")
        .arg(repo().join("scripts/install-deps.sh"))
        .args(args)
        .arg("--list")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let words = text
        .split_whitespace()
        .map(str::to_string)
        .filter(|w| !w.ends_with(':') && !w.ends_with(','))
        .collect();
    (words, out.status.code())
}

const TEST_ONLY: &[&str] = &[
    "slurmctld",
    "slurmd",
    "slurm-client",
    "munge",
    "chromium",
    "nvidia-cuda-toolkit",
    "cmake",
    "clang-19",
    "systemd-analyze",
];
const BUILD: &[&str] = &["llvm-19-dev", "libpolly-19-dev", "libzstd-dev", "g++"];

#[test]
fn the_main_job_installs_what_building_needs_and_the_tests_the_rest() {
    let (build, code) = list(&["build"]);
    assert_eq!(code, Some(0));
    let (test, code) = list(&["test"]);
    assert_eq!(code, Some(0));
    // (purpose, list, wanted, unwanted)
    for (purpose, words, wanted, unwanted) in [
        ("build", &build, BUILD, TEST_ONLY),
        ("test", &test, BUILD, &[][..]),
        ("test", &test, TEST_ONLY, &[][..]),
    ] {
        for w in wanted {
            assert!(
                words.iter().any(|x| x == w),
                "{purpose} lacks {w}: {words:?}"
            );
        }
        for u in unwanted {
            assert!(
                !words.iter().any(|x| x == u),
                "{purpose} installs {u}: {words:?}"
            );
        }
    }
    // No argument is the test purpose: scripts that predate the split get everything.
    assert_eq!(list(&[]).0, test);
    assert_eq!(list(&["bogus"]).1, Some(2));
}

#[test]
fn run_installs_for_building_and_test_for_testing() {
    for (script, call) in [
        ("scripts/run.sh", "scripts/install-deps.sh build"),
        ("scripts/test.sh", "scripts/install-deps.sh test"),
    ] {
        let text = std::fs::read_to_string(repo().join(script)).unwrap();
        let calls: Vec<&str> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.starts_with('#') && l.contains("install-deps.sh"))
            .collect();
        assert_eq!(calls, [call], "{script}");
    }
    // CI runs the test command.
    let ci = std::fs::read_to_string(repo().join(".ci/run")).unwrap();
    assert!(ci.contains("exec scripts/test.sh"), "{ci}");
}
