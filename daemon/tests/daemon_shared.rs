//! Two build directories of one project share one search (docs/daemon.md,
//! "Build directories of one project"): the daemon runs the first one's
//! job only, serves its variant under both names, each with its own spec
//! hash, and runs the second one's own search once the first is gone.

use crate::common;

use common::daemon::{build_dir_with, Daemon};
use common::{s, text};
use gevo_client::proto::JobState;

/// `dir/<project>/build` with the stencil fixture; its IR's compilation
/// directory is `directory` (clang records the one it ran in).
fn build(dir: &std::path::Path, project: &str, directory: &str) -> std::path::PathBuf {
    let build = build_dir_with(
        dir,
        project,
        &common::spec_fixture("stencil"),
        &common::kernel_fixture("stencil"),
    );
    let ir = build.join("stencil.ll");
    let text = std::fs::read_to_string(&ir).unwrap().replace(
        "!DIFile(filename: \"stencil.cu\", directory: \".\")",
        &format!("!DIFile(filename: \"stencil.cu\", directory: \"{directory}\")"),
    );
    assert!(text.contains(directory), "the fixture names its directory");
    std::fs::write(ir, text).unwrap();
    build
}

fn started_jobs(d: &Daemon) -> Vec<String> {
    d.log_text()
        .lines()
        .filter(|l| l.contains("job started"))
        .filter_map(|l| {
            l.split("job{id=")
                .nth(1)?
                .split('}')
                .next()
                .map(str::to_string)
        })
        .collect()
}

#[test]
fn two_build_directories_of_the_same_code_share_one_search() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), "debug", "/src/app/build-debug");
    build(dir.path(), "release", "/src/app/build-release");
    std::fs::create_dir_all(dir.path().join("daemon")).unwrap();
    // Watched by a client, so that one of them can be unwatched below.
    let d = Daemon::start(&dir.path().join("daemon"), &[]);
    for project in ["debug", "release"] {
        let run = d.client(&["watch", s(&dir.path().join(project))]);
        assert_eq!(run.status.code(), Some(0), "{run:?}");
    }
    let jobs = d.wait_for("both jobs", |d| {
        let jobs = d.jobs();
        (jobs.len() == 2).then_some(jobs)
    });
    let follower = jobs
        .iter()
        .find(|j| {
            j.message
                .as_deref()
                .is_some_and(|m| m.contains("shares the search of"))
        })
        .unwrap_or_else(|| panic!("no job shares the other's search: {jobs:?}"));
    let leader = jobs.iter().find(|j| j.job != follower.job).unwrap();
    assert!(
        follower
            .message
            .as_deref()
            .unwrap()
            .contains(&leader.kernel),
        "{follower:?}"
    );

    // Both names serve the leader's variant, each with its own spec hash.
    for job in [leader, follower] {
        let kernel = &job.kernel;
        let out = dir.path().join(format!("{}.ptx", kernel.replace('/', "_")));
        let said = d.wait_for("a validated variant", |d| {
            let run = d.client(&["--json", "best", kernel, "-o", s(&out)]);
            (run.status.code() == Some(0)).then(|| text(&run.stdout))
        });
        let record: serde_json::Value = serde_json::from_str(&said).unwrap();
        let spec_bytes = std::fs::read(&job.spec).unwrap();
        assert_eq!(
            record["spec_hash"],
            gevo_client::export::sha256_hex(&spec_bytes),
            "{kernel}: {said}"
        );
        assert_eq!(record["kernel"], kernel.as_str(), "{said}");
    }
    let started = started_jobs(&d);
    assert!(!started.is_empty());
    assert!(
        !started.contains(&follower.job),
        "the follower ran its own search: {started:?}"
    );

    // The leader's directory unwatched: the follower runs its own search.
    let leader_root = if leader.spec.starts_with(dir.path().join("debug")) {
        dir.path().join("debug")
    } else {
        dir.path().join("release")
    };
    let run = d.client(&["unwatch", s(&leader_root)]);
    assert_eq!(run.status.code(), Some(0), "{run:?}");
    d.wait_for("the follower's own search", |d| {
        started_jobs(d).contains(&follower.job).then_some(())
    });
    let now = d.jobs();
    let alone = now.iter().find(|j| j.job == follower.job).unwrap();
    assert!(alone.message.is_none(), "{alone:?}");
    assert_ne!(alone.state, JobState::Superseded);
}
