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

/// `dir/<project>/build/gevo` as gevo_optimize() fills it: the stencil
/// fixture's IR with clang's compilation directory set to `directory`, and
/// the spec gevod reads as GevoBuildStep.cmake's spec step writes it (the
/// user's spec with `ir`, `arch` and the build's `project`, and the IR's
/// SHA-256 in a comment, which differs with the directory).
fn cmake_build(dir: &std::path::Path, project: &str, directory: &str) -> std::path::PathBuf {
    let gevo = dir.join(project).join("build/gevo");
    std::fs::create_dir_all(&gevo).unwrap();
    let ir = gevo.join("stencil.ll");
    let text = std::fs::read_to_string(common::kernel_fixture("stencil"))
        .unwrap()
        .replace(
            "!DIFile(filename: \"stencil.cu\", directory: \".\")",
            &format!(
                "!DIFile(filename: \"/src/app/kernels/stencil.cu\", directory: \"{directory}\")"
            ),
        );
    assert!(text.contains(directory), "the fixture names its directory");
    std::fs::write(&ir, text).unwrap();
    let step = common::repo_root().join("cmake/GevoBuildStep.cmake");
    let args = [
        "-DGEVO_STEP=spec".to_string(),
        format!("-DUSER_SPEC={}", s(&common::spec_fixture("stencil"))),
        format!("-DOUT={}", s(&gevo.join("stencil.gevo.toml"))),
        format!("-DLL={}", s(&ir)),
        "-DARCH=sm_90".to_string(),
        format!("-DPROJECT=app.{project}"),
        "-P".to_string(),
        s(&step).to_string(),
    ];
    let out = std::process::Command::new("cmake")
        .args(&args)
        .output()
        .expect("cmake (scripts/install-deps.sh test installs it)");
    common::succeeded(out, &args.iter().map(String::as_str).collect::<Vec<_>>());
    dir.join(project)
}

/// A Debug and a Release build directory of one project, as CMake writes
/// them: specs that differ in `project` and in the IR hash their comment
/// records, IR that differs in the debug info's directory. One search runs;
/// `best` answers for both kernel names; `jobs` says which one follows.
#[test]
fn a_debug_and_a_release_build_written_by_cmake_share_one_search() {
    let dir = tempfile::tempdir().unwrap();
    let debug = cmake_build(dir.path(), "debug", "/src/app/build-debug");
    let release = cmake_build(dir.path(), "release", "/src/app/build-release");
    let spec = |root: &std::path::Path| {
        std::fs::read_to_string(root.join("build/gevo/stencil.gevo.toml")).unwrap()
    };
    assert_ne!(spec(&debug), spec(&release), "the builds' specs differ");
    std::fs::create_dir_all(dir.path().join("daemon")).unwrap();
    let d = Daemon::start(&dir.path().join("daemon"), &[]);
    for root in [&debug, &release] {
        let run = d.client(&["watch", s(root)]);
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
    let names: Vec<&str> = jobs.iter().map(|j| j.kernel.as_str()).collect();
    assert!(
        names.contains(&"app.debug/stencil") && names.contains(&"app.release/stencil"),
        "{names:?}"
    );

    // `jobs` says which job the follower's search is.
    let listed = text(&d.client(&["jobs"]).stdout);
    let line = listed
        .lines()
        .find(|l| l.contains(&follower.kernel))
        .unwrap_or_else(|| panic!("{listed}"));
    assert!(
        line.contains(&format!("shares the search of {}", leader.kernel))
            && line.contains(&leader.job),
        "{listed}"
    );

    // Both names answer the one search's best, each with its own spec hash.
    let mut ptx = Vec::new();
    for job in [leader, follower] {
        let out = dir
            .path()
            .join(format!("{}.ptx", job.kernel.replace('/', "_")));
        let said = d.wait_for("a validated variant", |d| {
            let run = d.client(&["--json", "best", &job.kernel, "-o", s(&out)]);
            (run.status.code() == Some(0)).then(|| text(&run.stdout))
        });
        let record: serde_json::Value = serde_json::from_str(&said).unwrap();
        assert_eq!(record["kernel"], job.kernel.as_str(), "{said}");
        assert_eq!(
            record["spec_hash"],
            gevo_client::export::sha256_hex(&std::fs::read(&job.spec).unwrap()),
            "{said}"
        );
        ptx.push(std::fs::read(&out).unwrap());
    }
    assert_eq!(ptx[0], ptx[1], "both names serve the same variant");
    let started = started_jobs(&d);
    assert!(started.contains(&leader.job), "{started:?}");
    assert!(
        !started.contains(&follower.job),
        "the follower ran: {started:?}"
    );
}
