//! The real `gevo-client` binary against a fake gevod: a thread on a temp
//! socket that answers each connection with a canned response and hands
//! the test the request it received.

use gevo_client::export;
use gevo_client::proto::{Best, Command, ErrorCode, Reply, Response};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::time::Duration;

mod common;

use common::*;

#[test]
fn best_from_the_daemon_prints_the_ptx_and_says_where_it_came_from() {
    let dir = scratch("best-daemon");
    let socket = dir.join("d.sock");
    let daemon = FakeDaemon::replying(
        &socket,
        vec![ok(Reply::Best(best("app/stencil", "sm_90", 1.234, PTX)))],
    );
    let run = gevo(
        &dir,
        &[
            "--socket",
            s(&socket),
            "best",
            "app/stencil",
            "--arch",
            "sm_90",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, PTX);
    assert_eq!(
        run.stderr,
        "gevo-client: app/stencil sm_90: validated variant, speedup 1.234x [1.20, 1.26] on the GPU (from the daemon)\n"
    );
    assert_eq!(
        daemon.received(),
        Command::Best {
            kernel: "app/stencil".into(),
            arch: Some("sm_90".into()),
            spec: None,
            spec_hash: None,
        }
    );
}

#[test]
fn best_sends_the_hash_of_the_builds_spec_as_it_reads_it() {
    let dir = scratch("best-spec-hash");
    let socket = dir.join("d.sock");
    let spec = dir.join("k.gevo.toml");
    std::fs::write(&spec, "version = 1\n# this build's spec\n").unwrap();
    let daemon = FakeDaemon::replying(
        &socket,
        vec![ok(Reply::Best(best("app/k", "sm_90", 1.1, PTX)))],
    );
    let run = gevo(
        &dir,
        &["--socket", s(&socket), "best", "app/k", "--spec", s(&spec)],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let Command::Best { spec_hash, .. } = daemon.received() else {
        panic!("not a best request");
    };
    let expected = export::sha256_hex(&std::fs::read(&spec).unwrap());
    assert_eq!(spec_hash, Some(expected));
}

#[test]
fn best_rewrites_the_output_file_only_when_the_ptx_changed() {
    let dir = scratch("best-output");
    let socket = dir.join("d.sock");
    let other = PTX.replace("ret;", "bar.sync 0; ret;");
    let _daemon = FakeDaemon::replying(
        &socket,
        vec![
            ok(Reply::Best(best("app/stencil", "sm_90", 1.2, PTX))),
            ok(Reply::Best(best("app/stencil", "sm_90", 1.2, PTX))),
            ok(Reply::Best(best("app/stencil", "sm_90", 1.3, &other))),
        ],
    );
    let out = dir.join("build/kernel.ptx");
    let args = ["--socket", s(&socket), "best", "stencil", "-o", s(&out)];
    let stamp = |p: &Path| {
        let m = std::fs::metadata(p).unwrap();
        (m.ino(), m.modified().unwrap())
    };

    let run = gevo(&dir, &args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, "", "the PTX goes to the file only");
    assert!(run
        .stderr
        .ends_with(&format!("; wrote {}\n", out.display())));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), PTX);
    let first = stamp(&out);

    std::thread::sleep(Duration::from_millis(20));
    let run = gevo(&dir, &args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stderr.contains("; unchanged: "), "{}", run.stderr);
    assert_eq!(stamp(&out), first, "same answer, untouched file");

    let run = gevo(&dir, &args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(std::fs::read_to_string(&out).unwrap(), other);
    assert_ne!(stamp(&out), first);
    // No temporary files left beside it.
    assert_eq!(std::fs::read_dir(dir.join("build")).unwrap().count(), 1);
}

#[test]
fn daemon_errors_for_best_exit_3_only_when_nothing_is_validated() {
    let dir = scratch("best-errors");
    let cases = [
        (ErrorCode::NoValidated, 3),
        (ErrorCode::UnknownKernel, 3),
        (ErrorCode::AmbiguousKernel, 1),
        (ErrorCode::Refused, 1),
        (ErrorCode::BadRequest, 1),
        (ErrorCode::Internal, 1),
    ];
    for (i, (code, exit)) in cases.into_iter().enumerate() {
        let socket = dir.join(format!("d{i}.sock"));
        let message = format!("the daemon says {code:?}");
        let _daemon = FakeDaemon::replying(&socket, vec![Response::error(code, &message)]);
        let out = dir.join(format!("k{i}.ptx"));
        let run = gevo(
            &dir,
            &["--socket", s(&socket), "best", "app/k", "-o", s(&out)],
        );
        assert_eq!(run.code, exit, "{code:?}: {}", run.stderr);
        assert_eq!(run.stderr, format!("gevo-client: {message}\n"));
        assert!(!out.exists(), "{code:?}: nothing written");
    }
}

#[test]
fn best_refuses_an_answer_it_cannot_trust() {
    let dir = scratch("best-untrusted");
    let mut torn = best("app/k", "sm_90", 1.2, PTX);
    torn.ptx.push_str("garbage");
    let mut future = ok(Reply::Best(best("app/k", "sm_90", 1.2, PTX)));
    future.version = 2;
    let cases = [
        (ok(Reply::Best(torn)), "does not match its record's hash"),
        (
            ok(Reply::Best(best("app/k", "sm_80", 1.2, PTX))),
            "asked for sm_90, gevod answered with a variant for sm_80",
        ),
        (
            ok(Reply::Done("?".into())),
            "gevod answered best with a confirmation",
        ),
        (
            future,
            "protocol version mismatch: this client speaks 1, gevod 2",
        ),
    ];
    for (i, (response, expect)) in cases.into_iter().enumerate() {
        let socket = dir.join(format!("d{i}.sock"));
        let _daemon = FakeDaemon::replying(&socket, vec![response]);
        let out = dir.join("k.ptx");
        let run = gevo(
            &dir,
            &[
                "--socket",
                s(&socket),
                "best",
                "app/k",
                "--arch",
                "sm_90",
                "-o",
                s(&out),
            ],
        );
        assert_eq!(run.code, 1, "{expect}: {}", run.stderr);
        assert!(run.stderr.contains(expect), "{expect}: {}", run.stderr);
        assert!(!out.exists());
    }
}

/// Ways a daemon can be unreachable, as a socket path (and extra args).
fn unreachable_daemons(dir: &Path) -> Vec<(&'static str, PathBuf, Vec<&'static str>, String)> {
    let missing = dir.join("missing.sock");
    // A socket file nobody listens on any more: connection refused.
    let stale = dir.join("stale.sock");
    drop(UnixListener::bind(&stale).unwrap());
    let silent = dir.join("silent.sock");
    FakeDaemon::silent(&silent);
    vec![
        ("missing", missing, vec![], "no socket there".into()),
        (
            "stale",
            stale,
            vec![],
            "connection refused (a stale socket?)".into(),
        ),
        (
            "silent",
            silent,
            vec!["--timeout", "0.3"],
            "no answer within 0.3 s".into(),
        ),
    ]
}

#[test]
fn best_falls_back_on_the_export_when_the_daemon_is_unreachable() {
    let dir = scratch("best-export");
    let state = dir.join("state");
    let exported = best("app/stencil", "sm_90", 1.5, PTX);
    export::write(&state, &exported, export::Readers::Everyone).unwrap();
    for (name, socket, extra, why) in unreachable_daemons(&dir) {
        let mut args = vec!["--socket", s(&socket), "--state", s(&state)];
        args.extend(extra);
        args.extend(["best", "stencil", "--arch", "sm_90"]);
        let run = gevo(&dir, &args);
        assert_eq!(run.code, 0, "{name}: {}", run.stderr);
        assert_eq!(run.stdout, PTX, "{name}");
        assert_eq!(
            run.stderr,
            format!(
                "gevo-client: app/stencil sm_90: validated variant, speedup 1.500x [1.47, 1.53] on the GPU \
                 (from the export in {}, daemon unreachable: {why})\n",
                state.display()
            ),
            "{name}"
        );

        args.push("--json");
        let run = gevo(&dir, &args);
        assert_eq!(run.code, 0, "{name}: {}", run.stderr);
        let json: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
        assert_eq!(json["source"], "export");
        assert_eq!(serde_json::from_value::<Best>(json).unwrap(), exported);
    }
}

#[test]
fn best_without_daemon_or_usable_export_exits_2_and_says_both_why() {
    let dir = scratch("best-nothing");
    let socket = dir.join("missing.sock");
    let state = dir.join("state");
    export::write(
        &state,
        &best("app/stencil", "sm_80", 1.5, PTX),
        export::Readers::Everyone,
    )
    .unwrap();
    export::write(
        &state,
        &best("app/torn", "sm_90", 1.5, PTX),
        export::Readers::Everyone,
    )
    .unwrap();
    std::fs::write(state.join("exports/app/torn/sm_90.ptx"), "cut sho").unwrap();
    let exports = state.join("exports");
    let cases = [
        (
            "app/other",
            format!("no exported variant of app/other in {}", exports.display()),
        ),
        (
            "other",
            format!("no exported variant of other in {}", exports.display()),
        ),
        (
            "app/stencil",
            "app/stencil: no exported variant for sm_90 (exported: sm_80)".into(),
        ),
        (
            "torn",
            format!(
                "cannot use the export: {}: the PTX does not match its record's hash",
                exports.join("app/torn/sm_90.ptx").display()
            ),
        ),
    ];
    for (kernel, why) in cases {
        let out = dir.join("k.ptx");
        let run = gevo(
            &dir,
            &[
                "--socket",
                s(&socket),
                "--state",
                s(&state),
                "best",
                kernel,
                "--arch",
                "sm_90",
                "-o",
                s(&out),
            ],
        );
        assert_eq!(run.code, 2, "{kernel}: {}", run.stderr);
        let expect = format!(
            "gevo-client: cannot reach gevod at {}: no socket there; {why}",
            socket.display()
        );
        assert!(run.stderr.starts_with(&expect), "{kernel}: {}", run.stderr);
        assert_eq!(run.stdout, "");
        assert!(!out.exists());
    }
}

#[test]
fn best_json_carries_the_record_the_ptx_and_the_source() {
    let dir = scratch("best-json");
    let socket = dir.join("d.sock");
    let answer = best("app/stencil", "sm_90", 1.234, PTX);
    let _daemon = FakeDaemon::replying(
        &socket,
        vec![
            ok(Reply::Best(answer.clone())),
            ok(Reply::Best(answer.clone())),
        ],
    );
    let out = dir.join("k.ptx");
    for with_output in [false, true] {
        let mut args = vec!["--json", "--socket", s(&socket), "best", "app/stencil"];
        if with_output {
            args.extend(["-o", s(&out)]);
        }
        let run = gevo(&dir, &args);
        assert_eq!(run.code, 0, "{}", run.stderr);
        let json: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
        assert_eq!(json["source"], "daemon");
        assert_eq!(json["speedup"], 1.234);
        assert_eq!(serde_json::from_value::<Best>(json).unwrap(), answer);
    }
    assert_eq!(std::fs::read_to_string(&out).unwrap(), PTX);
}

#[test]
fn commands_send_what_they_name() {
    let dir = scratch("commands");
    let k = || Some("app/k".to_string());
    let cases: Vec<(Vec<&str>, Command)> = vec![
        (vec!["status"], Command::Status),
        (vec!["jobs"], Command::Jobs { kernel: None }),
        (vec!["pareto", "k"], Command::Pareto { kernel: "k".into() }),
        (
            vec!["explain", "app/k"],
            Command::Explain {
                kernel: "app/k".into(),
            },
        ),
        (vec!["pause"], Command::Pause { kernel: None }),
        (vec!["pause", "app/k"], Command::Pause { kernel: k() }),
        (vec!["resume"], Command::Resume { kernel: None }),
        (vec!["resume", "app/k"], Command::Resume { kernel: k() }),
        (vec!["shutdown"], Command::Shutdown),
        (
            vec!["best", "k"],
            Command::Best {
                kernel: "k".into(),
                arch: None,
                spec: None,
                spec_hash: None,
            },
        ),
        (
            vec!["best", "k", "--spec", "/no/such/k.gevo.toml"],
            Command::Best {
                kernel: "k".into(),
                arch: None,
                spec: Some("/no/such/k.gevo.toml".into()),
                // Unreadable: nothing to hash.
                spec_hash: None,
            },
        ),
        (
            vec!["patch", "app/k"],
            Command::Patch {
                kernel: "app/k".into(),
            },
        ),
    ];
    for (i, (args, expect)) in cases.into_iter().enumerate() {
        let socket = dir.join(format!("d{i}.sock"));
        let daemon = FakeDaemon::replying(&socket, vec![ok(Reply::Done("done it".into()))]);
        let mut argv = vec!["--socket", s(&socket)];
        argv.extend(&args);
        let run = gevo(&dir, &argv);
        assert_eq!(daemon.received(), expect, "{args:?}");
        if args[0] != "best" && args[0] != "patch" {
            assert_eq!(
                (run.code, run.stdout.as_str()),
                (0, "done it\n"),
                "{args:?}"
            );
        }
    }
}

#[test]
fn watch_sends_an_absolute_path_and_refuses_a_missing_one_itself() {
    let dir = scratch("watch");
    std::fs::create_dir_all(dir.join("app/build")).unwrap();
    std::fs::write(dir.join("file"), "").unwrap();
    let canonical = std::fs::canonicalize(dir.join("app/build")).unwrap();
    for (i, command) in ["watch", "unwatch"].into_iter().enumerate() {
        let socket = dir.join(format!("d{i}.sock"));
        let daemon = FakeDaemon::replying(&socket, vec![ok(Reply::Done(format!("{command}ed")))]);
        // Relative to the client's working directory, with a detour.
        let run = gevo(
            &dir,
            &["--socket", s(&socket), command, "app/./build/../build"],
        );
        assert_eq!(run.code, 0, "{}", run.stderr);
        let expect = match command {
            "watch" => Command::Watch {
                dir: canonical.clone(),
                from_build: false,
            },
            _ => Command::Unwatch {
                dir: canonical.clone(),
            },
        };
        assert_eq!(daemon.received(), expect);

        if command == "unwatch" {
            // A watched directory deleted since can still be unwatched.
            let daemon = FakeDaemon::replying(
                &dir.join("d-gone.sock"),
                vec![ok(Reply::Done("unwatched".into()))],
            );
            let run = gevo(
                &dir,
                &["--socket", s(&dir.join("d-gone.sock")), command, "nope"],
            );
            assert_eq!(run.code, 0, "{}", run.stderr);
            let gone = std::fs::canonicalize(&dir).unwrap().join("nope");
            assert_eq!(daemon.received(), Command::Unwatch { dir: gone });
        }
        for (bad, why) in [
            ("nope", "cannot use the directory nope"),
            ("file", "file is not a directory"),
        ] {
            if command == "unwatch" && bad == "nope" {
                continue;
            }
            let run = gevo(&dir, &["--socket", s(&socket), command, bad]);
            assert_eq!(run.code, 1, "{bad}");
            assert!(run.stderr.contains(why), "{bad}: {}", run.stderr);
            assert!(daemon.received_nothing(), "{bad}: the daemon was asked");
        }
    }
}

#[test]
fn other_commands_exit_2_when_the_daemon_is_unreachable_and_1_on_its_errors() {
    let dir = scratch("unreachable");
    for (name, socket, extra, why) in unreachable_daemons(&dir) {
        let mut args = vec!["--socket", s(&socket)];
        args.extend(extra);
        args.push("status");
        let run = gevo(&dir, &args);
        assert_eq!(run.code, 2, "{name}");
        let hint = if name == "silent" {
            ""
        } else {
            " (is it running? start it with: gevod serve)"
        };
        assert_eq!(
            run.stderr,
            format!(
                "gevo-client: cannot reach gevod at {}: {why}{hint}\n",
                socket.display()
            ),
            "{name}"
        );
    }

    let socket = dir.join("d.sock");
    let _daemon = FakeDaemon::replying(
        &socket,
        vec![Response::error(
            ErrorCode::UnknownKernel,
            "no kernel named app/x",
        )],
    );
    let run = gevo(&dir, &["--socket", s(&socket), "pause", "app/x"]);
    assert_eq!(run.code, 1);
    assert_eq!(run.stderr, "gevo-client: no kernel named app/x\n");
}

#[test]
fn usage_errors_exit_1_not_2() {
    let dir = scratch("usage");
    for (args, code) in [
        (vec!["frobnicate"], 1),
        (vec!["best"], 1),
        (vec!["--timeout", "0", "status"], 1),
        (vec!["--help"], 0),
        (vec!["best", "--help"], 0),
    ] {
        let run = gevo(&dir, &args);
        assert_eq!(run.code, code, "{args:?}: {}", run.stderr);
    }
}

#[test]
fn a_socket_path_that_is_not_a_socket_says_what_it_is() {
    let dir = scratch("not-a-socket");
    let state = dir.join("state");
    export::write(
        &state,
        &best("app/stencil", "sm_90", 1.5, PTX),
        export::Readers::Everyone,
    )
    .unwrap();
    type Make = fn(&Path) -> PathBuf;
    let cases: [(&str, Make, &str); 3] = [
        (
            "a FIFO",
            |dir| {
                let path = dir.join("fifo.sock");
                mkfifo(&path);
                path
            },
            "a FIFO",
        ),
        (
            "a regular file",
            |dir| {
                let path = dir.join("file.sock");
                std::fs::write(&path, "").unwrap();
                path
            },
            "a regular file",
        ),
        (
            "a directory",
            |dir| {
                let path = dir.join("dir.sock");
                std::fs::create_dir(&path).unwrap();
                path
            },
            "a directory",
        ),
    ];
    for (what, make, kind) in cases {
        let socket = make(&dir);
        let why = format!("{} is {kind}, not a socket", socket.display());
        let run = gevo(&dir, &["--socket", s(&socket), "status"]);
        assert_eq!(run.code, 2, "{what}");
        assert_eq!(run.stderr, format!("gevo-client: {why}\n"), "{what}");
        // `best` still falls back on the export, and says why.
        let args = [
            "--socket",
            s(&socket),
            "--state",
            s(&state),
            "best",
            "stencil",
        ];
        let run = gevo(&dir, &args);
        assert_eq!(run.code, 0, "{what}: {}", run.stderr);
        assert!(
            run.stderr
                .ends_with(&format!("daemon unreachable: {why})\n")),
            "{what}: {}",
            run.stderr
        );
    }
}

#[test]
fn best_refuses_an_output_that_is_not_a_regular_file() {
    let dir = scratch("best-special-output");
    let fifo = dir.join("k.fifo");
    mkfifo(&fifo);
    let subdir = dir.join("k.dir");
    std::fs::create_dir(&subdir).unwrap();
    for (i, (out, kind)) in [(&fifo, "a FIFO"), (&subdir, "a directory")]
        .into_iter()
        .enumerate()
    {
        let socket = dir.join(format!("d{i}.sock"));
        let _daemon = FakeDaemon::replying(
            &socket,
            vec![ok(Reply::Best(best("app/k", "sm_90", 1.2, PTX)))],
        );
        let args = ["--socket", s(&socket), "best", "app/k", "-o", s(out)];
        let run = gevo_within(&dir, &args, Duration::from_secs(2))
            .unwrap_or_else(|| panic!("{kind}: still running after 2 s"));
        assert_eq!(run.code, 1, "{kind}: {}", run.stderr);
        assert_eq!(
            run.stderr,
            format!(
                "gevo-client: cannot write the PTX: {}: {kind}, not a regular file\n",
                out.display()
            )
        );
    }
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
}
