//! A kernel that faults before gevo changes anything gets a finding in the
//! user's words: the spec's argument, the element as a signed index and
//! where it lies, the shared variable by its source name, the CUDA source
//! line, and what to do. Data-driven: each `tests/fixtures/findings/*.cu`
//! plants one fault (compiled with line tables by scripts/gen-fixtures.sh),
//! and its `.expect` file lists lines the finding must hold, in order.
//! Three faults are the spec's (shortbuf: a buffer too short for the
//! launch; blockshape: a block the kernel's static shared tile was not
//! written for; argorder: buffers in another order): their advice names the
//! spec line and the finding ends with "Fix the spec: <field>", never
//! sending the user to the kernel; the kernels' own faults (pastend,
//! rowbefore, sharedrace) get no such advice and end with "Fix the kernel
//! at <source line>".

use crate::common;

use std::process::Command;

#[test]
fn each_planted_fault_is_a_finding_in_the_users_words() {
    let dir = common::repo_root().join("tests/fixtures/findings");
    let mut cases = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let expect = entry.unwrap().path();
        if expect.extension().is_none_or(|e| e != "expect") {
            continue;
        }
        cases += 1;
        let spec = expect.with_extension("gevo.toml");
        // Relative paths, as a user in the repository types them.
        let rel = spec.strip_prefix(common::repo_root()).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_gevod"))
            .arg("run")
            .arg(rel)
            .current_dir(common::repo_root())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{}: {stderr}", spec.display());
        let mut rest = &stderr[..];
        for line in std::fs::read_to_string(&expect).unwrap().lines() {
            let at = rest.find(line).unwrap_or_else(|| {
                panic!(
                    "{}: {line:?} not in what follows the previous line:\n{stderr}",
                    expect.display()
                )
            });
            rest = &rest[at + line.len()..];
        }
        let expected = std::fs::read_to_string(&expect).unwrap();
        assert_eq!(
            stderr.matches("The spec may").count(),
            expected.matches("The spec may").count(),
            "{}: spec advice only where the spec is the cause:\n{stderr}",
            expect.display()
        );
        // One piece of advice at the end: the spec's field, or the kernel.
        let spec_cause = expected.contains("The spec may");
        assert_eq!(
            stderr.contains("Fix the spec: "),
            spec_cause,
            "{}:\n{stderr}",
            expect.display()
        );
        assert_eq!(
            stderr.contains("Fix the kernel"),
            !spec_cause,
            "{}: the kernel is not what to fix when the spec is:\n{stderr}",
            expect.display()
        );
    }
    assert_eq!(cases, 6, "the planted faults in {}", dir.display());
}

/// The daemon shows the finding: its first line in `jobs`, all of it in
/// `explain`.
#[test]
fn the_daemon_shows_a_finding_in_jobs_and_explain() {
    use common::daemon::{s, Daemon};
    use gevo_client::proto::JobState;
    let dir = tempfile::tempdir().unwrap();
    let build = dir.path().join("app");
    std::fs::create_dir(&build).unwrap();
    let findings = common::repo_root().join("tests/fixtures/findings");
    for file in ["pastend.gevo.toml", "pastend.ll"] {
        std::fs::copy(findings.join(file), build.join(file)).unwrap();
    }
    let d = Daemon::start(dir.path(), &["--watch", s(&build)]);
    d.wait_for("the finding", |d| {
        d.jobs()
            .into_iter()
            .find(|j| j.state == JobState::Error && j.message.is_some())
    });
    let jobs = String::from_utf8(d.client(&["jobs"]).stdout).unwrap();
    assert!(
        jobs.contains("`in` at element 1000 of 1000, just past its end"),
        "{jobs}"
    );
    assert!(
        !jobs.contains("Fix the kernel"),
        "one line per job:\n{jobs}"
    );
    let out = d.client(&["explain", "pastend"]);
    let explain = String::from_utf8_lossy(&out.stderr);
    assert!(explain.contains("just past its end"), "{explain}");
    assert!(explain.contains("Fix the kernel at"), "{explain}");
}
