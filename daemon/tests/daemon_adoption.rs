//! What the second adoption round asked of the daemon and the client,
//! against a real `gevod serve`: an unwatch that sticks against a build's
//! registration, `best --spec` saying what the daemon knows of a build's
//! spec, the validated patch (`gevo-client patch`) that `gevod run`
//! replays, `explain`'s changed instructions, and speedups that say they
//! are the simulator's.

use crate::common;

use common::daemon::{build_dir, Daemon, CONFIG};
use common::{s, text};
use gevo_client::proto::{Body, Command, ErrorCode, Reply};
use std::path::{Path, PathBuf};
use std::process::Command as Process;

/// The directories the daemon watches now.
fn watched(d: &Daemon) -> Vec<PathBuf> {
    match d.call(Command::Status) {
        Reply::Status(status) => status.watch_roots.into_iter().map(|r| r.path).collect(),
        other => panic!("status answered {other:?}"),
    }
}

/// `gevo-client args`: its exit code and what it said on stdout and stderr.
fn client(d: &Daemon, args: &[&str]) -> (Option<i32>, String) {
    let run = d.client(args);
    (run.status.code(), text(&run.stdout) + &text(&run.stderr))
}

#[test]
fn an_unwatched_directory_stays_unwatched_until_the_user_watches_it_again() {
    let dir = tempfile::tempdir().unwrap();
    let mut d = Daemon::start(dir.path(), &[]);
    let build = build_dir(dir.path(), "app").canonicalize().unwrap();
    let b = s(&build);

    // (command, exit code, words said, whether the directory is watched after)
    let steps: &[(&[&str], i32, &str, bool)] = &[
        (&["watch", "--from-build", b], 0, "watching", true),
        (&["unwatch", b], 0, "no longer watching", false),
        // A reconfigure registers the build again: the unwatch stands.
        (&["watch", "--from-build", b], 0, "it was unwatched", false),
        (&["watch", "--from-build", b], 0, "gevo-client watch", false),
    ];
    for (args, code, words, after) in steps {
        let (got, said) = client(&d, args);
        assert_eq!(got, Some(*code), "{args:?}: {said}");
        assert!(said.contains(words), "{args:?}: {said}");
        assert_eq!(watched(&d).contains(&build), *after, "{args:?}");
    }

    // The unwatch is remembered across a restart.
    let (status, _) = d.signal(libc::SIGTERM);
    assert!(status.success(), "{}", d.log_text());
    d.spawn(&[]);
    let (got, said) = client(&d, &["watch", "--from-build", b]);
    assert_eq!(got, Some(0), "{said}");
    assert!(said.contains("it was unwatched"), "{said}");
    assert!(!watched(&d).contains(&build));

    // The user's own watch undoes it; builds register as before.
    let steps: &[(&[&str], &str, bool)] = &[
        (&["watch", b], "watching", true),
        (&["watch", "--from-build", b], "already watching", true),
        (&["unwatch", b], "no longer watching", false),
        (&["watch", b], "watching", true),
        (&["watch", "--from-build", b], "already watching", true),
    ];
    for (args, words, after) in steps {
        let (got, said) = client(&d, args);
        assert_eq!(got, Some(0), "{args:?}: {said}");
        assert!(said.contains(words), "{args:?}: {said}");
        assert_eq!(watched(&d).contains(&build), *after, "{args:?}");
    }
}

#[test]
fn best_says_what_the_daemon_knows_of_the_builds_spec() {
    let dir = tempfile::tempdir().unwrap();
    // A settle time no test outlives: the watched spec stays pending.
    std::fs::write(
        dir.path().join("gevod.toml"),
        CONFIG.replace("settle = \"300ms\"", "settle = \"10m\""),
    )
    .unwrap();
    let (d, build) = Daemon::watching_stencil(dir.path());
    let elsewhere = build_dir(&dir.path().join("unwatched"), "other");
    let spec = |b: &Path| s(&b.join("stencil.gevo.toml")).to_string();
    let (watched_spec, unwatched_spec) = (spec(&build), spec(&elsewhere));

    // (kernel, spec, exit code, words)
    let cases = [
        (
            "app/stencil",
            watched_spec.as_str(),
            3,
            "; pending: gevod saw",
        ),
        (
            "other/stencil",
            unwatched_spec.as_str(),
            3,
            "is in no directory gevod watches",
        ),
        // Without --spec, the answer is as before.
        ("app/stencil", "", 3, "no kernel named"),
    ];
    for (kernel, spec, code, words) in cases {
        let mut args = vec!["best", kernel];
        if !spec.is_empty() {
            args.extend(["--spec", spec]);
        }
        // The first scan may not have come yet: "not scanned" is pending too.
        let said = d.wait_for(words, |d| {
            let (got, said) = client(d, &args);
            assert_eq!(got, Some(code), "{args:?}: {said}");
            said.contains(words).then_some(said)
        });
        assert!(said.contains("no kernel named"), "{said}");
        if kernel == "app/stencil" && !spec.is_empty() {
            assert!(said.contains("settle"), "{said}");
            assert!(!said.contains("gevo-client watch"), "{said}");
        }
    }
    // On the wire: `pending` for the settling spec, `unknown_kernel` for
    // the one no watched directory holds.
    for (kernel, spec, code) in [
        ("app/stencil", &watched_spec, ErrorCode::Pending),
        ("other/stencil", &unwatched_spec, ErrorCode::UnknownKernel),
    ] {
        let response = d
            .try_call(Command::Best {
                kernel: kernel.into(),
                arch: None,
                spec: Some(spec.into()),
                spec_hash: None,
            })
            .unwrap();
        match response.body {
            Body::Error(e) => assert_eq!(e.code, code, "{}", e.message),
            Body::Ok(reply) => panic!("best answered {reply:?}"),
        }
    }
}

#[test]
fn a_spec_changed_since_the_daemons_last_scan_is_pending_not_the_old_versions_progress() {
    let dir = tempfile::tempdir().unwrap();
    // No scan comes after the first ones: the edit below stays unseen.
    std::fs::write(
        dir.path().join("gevod.toml"),
        CONFIG
            .replace("scan_interval = \"1s\"", "scan_interval = \"1h\"")
            .replace("debounce = \"200ms\"", "debounce = \"10m\""),
    )
    .unwrap();
    let (d, build) = Daemon::watching_stencil(dir.path());
    d.wait_for("version 1", |d| {
        d.jobs().into_iter().find(|j| j.kernel == "app/stencil")
    });
    let spec = build.join("stencil.gevo.toml");
    let args = ["best", "app/stencil", "--spec", s(&spec)];
    let (code, said) = client(&d, &args);
    assert_eq!(code, Some(3), "{said}");
    assert!(
        !said.contains("pending"),
        "the unchanged spec is not pending: {said}"
    );

    let text = std::fs::read_to_string(&spec).unwrap();
    std::fs::write(&spec, text + "\n# edited\n").unwrap();
    let (code, said) = client(&d, &args);
    assert_eq!(code, Some(3), "{said}");
    assert!(
        said.contains("changed since gevod last read it"),
        "a change the daemon has not seen: {said}"
    );
}

#[test]
fn the_validated_patch_replays_and_explain_shows_the_changed_instructions() {
    let dir = tempfile::tempdir().unwrap();
    let (d, build) = Daemon::watching_stencil(dir.path());
    d.wait_for("a validated variant", |d| d.validated_best("stencil"));

    // Every headline says the speedup is the simulator's.
    for args in [
        &["best", "stencil", "-o", s(&dir.path().join("k.ptx"))][..],
        &["status"],
        &["jobs"],
        &["explain", "stencil"],
    ] {
        let (got, said) = client(&d, args);
        assert_eq!(got, Some(0), "{args:?}: {said}");
        assert!(said.contains("on the simulator"), "{args:?}: {said}");
    }
    let page = dir.path().join("report.html");
    let (got, said) = client(&d, &["report", "stencil", "-o", s(&page)]);
    assert_eq!(got, Some(0), "{said}");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("x faster on the simulator</span>"), "{html}");

    // The patch, written for `gevod run --patch`, which replays it.
    let patch = dir.path().join("stencil.patch.json");
    let (got, said) = client(&d, &["patch", "stencil", "-o", s(&patch)]);
    assert_eq!(got, Some(0), "{said}");
    assert!(said.contains("on the simulator"), "{said}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&patch).unwrap()).unwrap();
    assert!(!json["edits"].as_array().unwrap().is_empty(), "{json}");
    let run = Process::new(env!("CARGO_BIN_EXE_gevod"))
        .args(["run", s(&build.join("stencil.gevo.toml")), "--patch"])
        .arg(&patch)
        .output()
        .unwrap();
    assert!(run.status.success(), "{run:?}");
    let (got, said) = client(&d, &["patch", "no-such-kernel"]);
    assert_eq!(got, Some(1), "{said}");
    assert!(said.contains("no kernel named"), "{said}");

    // explain: the changed instructions by default, the whole diff behind
    // a flag; renumbered lines are not changes.
    let (_, short) = client(&d, &["explain", "stencil"]);
    let (_, full) = client(&d, &["explain", "stencil", "--full-diff"]);
    assert!(short.contains("changed IR instructions"), "{short}");
    assert!(full.contains("--- original"), "{full}");
    let changed = |t: &str| {
        t.lines()
            .filter(|l| l.starts_with('-') || l.starts_with('+'))
            .count()
    };
    assert!(changed(&short) >= 1, "{short}");
    assert!(changed(&short) <= changed(&full), "{short}\n---\n{full}");
}
