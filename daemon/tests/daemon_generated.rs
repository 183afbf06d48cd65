//! The daemon's job view of generated held-out tests, against a real
//! `gevod serve`: `gevo-client jobs <kernel>` lists the tests kept (with
//! the original's cost) and dropped (with why) and the lint lines, as
//! `gevod run --tests generated` does; the socket's job answer carries them.

use crate::common;

use common::daemon::{build_dir_with, Daemon};
use common::{s, text};
use gevo_client::proto::{Command, Reply};

#[test]
fn jobs_of_a_kernel_list_its_generated_tests_and_lints() {
    let dir = tempfile::tempdir().unwrap();
    let general = common::repo_root().join("tests/fixtures/general");
    // A kernel without a bounds check: sizes off its 64-thread grid are
    // dropped (the original reads past `in` there); no user test has a
    // partial block.
    build_dir_with(
        dir.path(),
        "app",
        &general.join("nocheck.gevo.toml"),
        &general.join("general.ll"),
    );
    let d = Daemon::start(dir.path(), &["--watch", s(&dir.path().join("app"))]);
    let generated = d.wait_for("the job's generated tests", |d| {
        d.jobs()
            .into_iter()
            .find(|j| j.kernel.ends_with("nocheck"))
            .and_then(|j| j.generated)
    });
    assert!(!generated.kept.is_empty(), "{generated:?}");
    assert!(
        generated
            .kept
            .iter()
            .all(|t| t.cost.is_some() && t.reason.is_none()),
        "{generated:?}"
    );
    assert!(
        generated.dropped.iter().any(|t| t
            .reason
            .as_deref()
            .is_some_and(|r| r.starts_with("the original fails there: out-of-bounds"))),
        "{generated:?}"
    );
    assert_eq!(
        generated.cost_per_validation,
        generated.kept.iter().filter_map(|t| t.cost).sum::<u64>()
    );
    assert_eq!(generated.lints.len(), 1, "{:?}", generated.lints);

    // The same, filtered to the kernel, over the socket.
    match d.call(Command::Jobs {
        kernel: Some("nocheck".into()),
    }) {
        Reply::Jobs(jobs) => {
            assert_eq!(jobs.len(), 1, "{jobs:?}");
            assert_eq!(jobs[0].generated.as_ref(), Some(&generated));
        }
        other => panic!("jobs answered {other:?}"),
    }

    // What `gevod run --tests generated` says, in the job view.
    let run = d.client(&["jobs", "nocheck"]);
    let said = text(&run.stdout);
    assert!(run.status.success(), "{said}{}", text(&run.stderr));
    for words in [
        "generated held-out tests: ",
        "kept     generated[",
        "n = 64: exactly one block (cost ",
        "dropped  generated[",
        "n = 7: one partial block: the original fails there: out-of-bounds",
        "lint: no test has a partial block (n below or off a multiple of the block)",
    ] {
        assert!(said.contains(words), "`{words}` not in:\n{said}");
    }
    let run = d.client(&["jobs", "nocheck", "--json"]);
    let json: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(
        json[0]["generated"]["lints"].as_array().map(Vec::len),
        Some(1),
        "{json}"
    );
    // An unknown kernel is the daemon's error; the plain list is as before.
    let run = d.client(&["jobs", "no-such-kernel"]);
    assert_eq!(run.status.code(), Some(1));
    assert!(text(&run.stderr).contains("no kernel named"));
    let run = d.client(&["jobs"]);
    assert!(run.status.success());
    assert!(!text(&run.stdout).contains("generated["));
}
