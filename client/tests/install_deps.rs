//! scripts/install-deps.sh by purpose: the main job (scripts/run.sh)
//! installs what building and running need, a CMake user (docs/cmake.md)
//! that and what gevo_optimize() needs, the test command (scripts/test.sh,
//! which CI runs) everything else besides. Read through the script's own
//! `--list`, which installs nothing.

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
/// What a CMake project using gevo_optimize() needs besides building gevo.
const CMAKE: &[&str] = &["clang-19", "cmake", "make", "nvidia-cuda-toolkit"];
/// What the tests need and a CMake project does not.
const NOT_FOR_CMAKE: &[&str] = &[
    "slurmctld",
    "slurmd",
    "slurm-client",
    "munge",
    "chromium",
    "systemd-analyze",
    "rustfmt",
    "clippy",
];

#[test]
fn the_cmake_purpose_installs_what_a_cmake_project_needs_and_no_test_tools() {
    let (cmake, code) = list(&["cmake"]);
    assert_eq!(code, Some(0));
    // Building gevo (scripts/install.sh builds it), then the CMake side.
    for w in BUILD.iter().chain(CMAKE) {
        assert!(cmake.iter().any(|x| x == w), "cmake lacks {w}: {cmake:?}");
    }
    for u in NOT_FOR_CMAKE {
        assert!(
            !cmake.iter().any(|x| x == u),
            "cmake installs {u}: {cmake:?}"
        );
    }
    // The test purpose has all of it.
    let (test, _) = list(&["test"]);
    for w in &cmake {
        assert!(test.iter().any(|x| x == w), "test lacks {w}: {test:?}");
    }
}

/// Every `scripts/install-deps.sh <purpose>` the front door and the docs
/// tell a reader to run names a purpose the script knows, and the CMake
/// quick starts use the cmake purpose.
#[test]
fn the_docs_name_purposes_the_script_knows() {
    let mut docs = vec![repo().join("README.md"), repo().join("CONTRIBUTING.md")];
    for entry in std::fs::read_dir(repo().join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            docs.push(path);
        }
    }
    let mut named = 0;
    for doc in &docs {
        let text = std::fs::read_to_string(doc).unwrap();
        for (at, _) in text.match_indices("install-deps.sh ") {
            let word: String = text[at + "install-deps.sh ".len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect();
            if word.is_empty() || word.starts_with("--") {
                continue;
            }
            named += 1;
            let (_, code) = list(&[&word]);
            assert_eq!(code, Some(0), "{}: install-deps.sh {word}", doc.display());
        }
    }
    assert!(named > 0, "no purpose named in {docs:?}");
    for doc in ["README.md", "docs/cmake.md"] {
        let text = std::fs::read_to_string(repo().join(doc)).unwrap();
        assert!(
            text.contains("scripts/install-deps.sh cmake"),
            "{doc} does not use the cmake purpose"
        );
    }
}

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
