//! What the second adoption round asked of the CMake module, with a real
//! daemon (docs/cmake.md, "Which daemon"): an unwatched build directory
//! stays unwatched through reconfigures, GEVO_WATCH=OFF registers nothing,
//! configure remembers the running daemon's state directory so that a
//! build with the daemon down reads its exports there, and a build right
//! after configure does not send the user to re-register a directory the
//! daemon is only about to take. Third round: after an unwatch of a build
//! whose job exists, the build says the daemon does not watch it (and how
//! to undo the unwatch), and a failed registration does not promise the
//! original PTX to a build that then uses the export.

use crate::common;

use common::cmake::{run, Project};
use common::daemon::{client_binary, s, Daemon};
use common::have_tools;
use gevo_client::proto::{Best, BestRecord, Command, JobState, Reply};
use std::path::{Path, PathBuf};

fn flat(log: &str) -> String {
    log.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn assert_said(log: &str, wanted: &str) {
    assert!(flat(log).contains(wanted), "wanted: {wanted}\nin:\n{log}");
}

/// gevo's tools and the daemon's socket, but no GEVO_STATE.
fn settings(socket: &Path, extra: &[&str]) -> Vec<String> {
    let mut args = vec![
        format!("-Dgevo_DIR={}", s(&common::repo_root().join("cmake"))),
        format!("-DGEVO_CLIENT={}", s(&client_binary())),
        format!("-DGEVOD={}", env!("CARGO_BIN_EXE_gevod")),
        format!("-DGEVO_SOCKET={}", s(socket)),
    ];
    args.extend(extra.iter().map(|a| a.to_string()));
    args
}

fn watched(d: &Daemon) -> Vec<PathBuf> {
    match d.call(Command::Status) {
        Reply::Status(status) => status.watch_roots.into_iter().map(|r| r.path).collect(),
        other => panic!("status answered {other:?}"),
    }
}

#[test]
fn an_unwatched_build_stays_unwatched_and_gevo_watch_off_registers_nothing() {
    if !have_tools(&["cmake", "clang-19"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("daemon")).unwrap();
    let d = Daemon::start(&dir.path().join("daemon"), &[]);
    let p = Project::new(dir.path(), "stencil-app", "build");
    let log = p.configure();
    let gevo = p.build.join("gevo").canonicalize().unwrap();
    assert_said(&log, &format!("gevod: watching {}", gevo.display()));
    assert!(watched(&d).contains(&gevo));
    // The first build writes the IR and the spec, and the daemon makes the
    // job: the build after the unwatch meets a removed job, not no job.
    p.build();
    let spec = gevo.join("stencil.gevo.toml");
    d.wait_for("the build's job", |d| {
        d.jobs().into_iter().find(|j| j.spec == spec)
    });

    let run_client = d.client(&["unwatch", s(&gevo)]);
    assert!(run_client.status.success(), "{run_client:?}");
    let said = String::from_utf8_lossy(&run_client.stdout).into_owned()
        + &String::from_utf8_lossy(&run_client.stderr);
    assert_said(&said, "the jobs of its specs stop");
    d.wait_for("the job removed", |d| {
        d.jobs()
            .into_iter()
            .find(|j| j.spec == spec && j.state == JobState::Removed)
    });
    // Reconfiguring (as editing the spec does) registers the build again:
    // the unwatch stands, and configure says so.
    for _ in 0..2 {
        let log = p.configure();
        assert_said(
            &log,
            &format!("gevod: not watching {}: it was unwatched", gevo.display()),
        );
        assert!(!watched(&d).contains(&gevo), "{log}");
    }
    let log = p.build();
    assert_said(&log, "gevod does not watch this build:");
    assert_said(&log, "is in no directory gevod watches");
    assert_said(
        &log,
        &format!(
            "{} was unwatched with `gevo-client unwatch`; `gevo-client watch {}` watches it again",
            gevo.display(),
            gevo.display()
        ),
    );
    assert!(!log.contains("no validated variant yet"), "{log}");
    // The user's watch undoes it.
    let run_client = d.client(&["watch", s(&gevo)]);
    assert!(run_client.status.success(), "{run_client:?}");
    p.configure();
    assert!(watched(&d).contains(&gevo));

    // GEVO_WATCH=OFF: nothing registered, and configure says so.
    let q = Project::new(dir.path(), "stencil-app", "unregistered");
    let log = q.configure_with(&["-DGEVO_WATCH=OFF".to_string()]);
    let q_gevo = q.build.join("gevo");
    assert_said(
        &log,
        &format!("gevo: GEVO_WATCH is OFF: {} is not registered", s(&q_gevo)),
    );
    let q_gevo = q_gevo.canonicalize().unwrap();
    assert!(!watched(&d).contains(&q_gevo));
}

#[test]
fn configure_remembers_the_daemons_state_directory_for_builds_while_it_is_down() {
    if !have_tools(&["cmake", "clang-19"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("daemon")).unwrap();
    // The test daemon runs with --state <dir>/daemon/state, not a default.
    let mut d = Daemon::start(&dir.path().join("daemon"), &[]);
    let p = Project::new(dir.path(), "stencil-app", "build");
    let args = settings(&d.socket, &[]);
    let log = run(&mut p.bare_configure(&args));
    assert_said(
        &log,
        &format!(
            "gevo: builds read gevod's exports from {} when it is down (the running daemon's \
             state directory",
            s(&d.state)
        ),
    );
    // Right after configure the daemon is only about to take the spec: the
    // build does not send the user to re-register the directory.
    let log = p.build();
    assert_said(&log, "using the original PTX");
    assert!(!log.contains("does gevod watch"), "{log}");

    // The daemon stops; what it exported for this very spec stays.
    let (status, _) = d.signal(libc::SIGTERM);
    assert!(status.success(), "{}", d.log_text());
    let spec = std::fs::read(p.gevo_file("stencil.gevo.toml")).unwrap();
    let ptx = p.original() + "// the exported variant\n";
    let best = Best {
        record: BestRecord {
            configuration: None,
            kernel: p.kernel("stencil"),
            job: "planted".into(),
            version: 1,
            target: "sm_90".into(),
            backend: "sim".into(),
            speedup: 1.5,
            interval: (1.4, 1.6),
            generation: 3,
            ptx_hash: gevo_client::export::ptx_hash(&ptx),
            spec_hash: gevo_client::export::sha256_hex(&spec),
            ir_hash: String::new(),
            validated_at: 0,
        },
        ptx: ptx.clone(),
    };
    gevo_client::export::write(&d.state, &best, Default::default()).unwrap();

    let log = run(&mut p.bare_configure(&args));
    assert_said(
        &log,
        &format!(
            "gevo: gevod did not answer; builds read its exports from {} when it is down (the \
             state directory it named at an earlier configure",
            s(&d.state)
        ),
    );
    // Registering fails, and configure does not promise the original PTX
    // to a build that is about to use the export.
    assert_said(
        &log,
        "until it is, builds use the best variant gevod exported for this build's spec where \
         there is one, else the original kernels",
    );
    let log = p.build();
    assert_said(&log, "using the evolved PTX");
    assert_said(
        &log,
        &format!(
            "on the simulator (a cost-model ratio, not a GPU speedup) (from the export in {}",
            s(&d.state)
        ),
    );
    assert_eq!(
        std::fs::read_to_string(p.gevo_file("stencil.ptx")).unwrap(),
        ptx
    );

    // GEVO_STATE, when set, is the one.
    let other = dir.path().join("elsewhere");
    let log = run(&mut p.bare_configure(&settings(
        &d.socket,
        &[&format!("-DGEVO_STATE={}", s(&other))],
    )));
    assert_said(
        &log,
        &format!(
            "gevo: builds read gevod's exports from {} when it is down (GEVO_STATE)",
            s(&other)
        ),
    );
}
