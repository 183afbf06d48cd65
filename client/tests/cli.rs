//! The real `gevo-client` binary against a fake gevod: a thread on a temp
//! socket that answers each connection with a canned response and hands
//! the test the request it received.

use gevo_client::export;
use gevo_client::proto::{
    Best, BestRecord, Command, ErrorCode, Explanation, JobInfo, JobState, Pareto, ParetoPoint,
    Reply, Request, Response, SlotInfo, Status, TestRatio, WatchRoot,
};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::mpsc::{self, Receiver};
use std::time::Duration;

/// A fresh directory for one test (or one case of one).
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("gevo-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

struct FakeDaemon {
    requests: Receiver<Request>,
}

impl FakeDaemon {
    /// Serves one connection per reply, in order.
    fn replying(socket: &Path, replies: Vec<Response>) -> FakeDaemon {
        let listener = UnixListener::bind(socket).unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for response in replies {
                let (mut conn, _) = listener.accept().unwrap();
                let mut line = String::new();
                BufReader::new(&conn).read_line(&mut line).unwrap();
                // Reported before answering, so it is there when the client
                // exits; a test that no longer listens does not care.
                let _ = tx.send(serde_json::from_str(&line).unwrap());
                let mut line = serde_json::to_vec(&response).unwrap();
                line.push(b'\n');
                conn.write_all(&line).unwrap();
            }
        });
        FakeDaemon { requests: rx }
    }

    /// Accepts every connection and never answers.
    fn silent(socket: &Path) {
        let listener = UnixListener::bind(socket).unwrap();
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for conn in listener.incoming() {
                held.push(conn);
            }
        });
    }

    fn received(&self) -> Command {
        self.requests
            .recv_timeout(Duration::from_secs(5))
            .expect("the client sent no request")
            .command
    }

    fn received_nothing(&self) -> bool {
        self.requests.try_recv().is_err()
    }
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

/// Runs the client in `dir` with a user environment pointing into `dir`, so
/// that no real config or daemon of the machine takes part.
fn gevo(dir: &Path, args: &[&str]) -> Run {
    let Output {
        status,
        stdout,
        stderr,
    } = std::process::Command::new(env!("CARGO_BIN_EXE_gevo-client"))
        .args(args)
        .current_dir(dir)
        .env("HOME", dir)
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .env("XDG_STATE_HOME", dir.join("xdg-state"))
        .env("XDG_RUNTIME_DIR", dir.join("run"))
        .output()
        .unwrap();
    Run {
        code: status.code().expect("exited, not killed"),
        stdout: String::from_utf8(stdout).unwrap(),
        stderr: String::from_utf8(stderr).unwrap(),
    }
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn best(kernel: &str, target: &str, speedup: f64, ptx: &str) -> Best {
    Best {
        record: BestRecord {
            kernel: kernel.into(),
            job: "j1".into(),
            version: 2,
            target: target.into(),
            backend: "cuda".into(),
            speedup,
            interval: (speedup - 0.034, speedup + 0.026),
            generation: 40,
            ptx_hash: export::ptx_hash(ptx),
            spec_hash: "spec".into(),
            ir_hash: "ir".into(),
            validated_at: 1_700_000_000,
        },
        ptx: ptx.into(),
    }
}

fn ok(reply: Reply) -> Response {
    Response::ok(reply)
}

const PTX: &str = ".version 8.0\n.target sm_90\n.entry stencil() { ret; }\n";

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
        "gevo-client: app/stencil sm_90: validated variant, speedup 1.234x [1.20, 1.26] (from the daemon)\n"
    );
    assert_eq!(
        daemon.received(),
        Command::Best {
            kernel: "app/stencil".into(),
            arch: Some("sm_90".into())
        }
    );
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
    export::write(&state, &exported).unwrap();
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
                "gevo-client: app/stencil sm_90: validated variant, speedup 1.500x [1.47, 1.53] \
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
    export::write(&state, &best("app/stencil", "sm_80", 1.5, PTX)).unwrap();
    export::write(&state, &best("app/torn", "sm_90", 1.5, PTX)).unwrap();
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

fn job(kernel: &str, state: JobState, speedup: Option<f64>, message: Option<&str>) -> JobInfo {
    JobInfo {
        kernel: kernel.into(),
        job: format!("{kernel}#1"),
        version: 1,
        spec: format!("/src/{kernel}.json").into(),
        state,
        message: message.map(str::to_string),
        backend: "sim".into(),
        target: "sm_90".into(),
        generations: 12,
        evaluations: 3400,
        validated: if speedup.is_some() { 2 } else { 0 },
        best_speedup: speedup,
    }
}

fn status() -> Status {
    Status {
        pid: 4242,
        daemon_version: "0.1.0".into(),
        uptime_s: 3723.9,
        socket: "/run/gevod/gevod.sock".into(),
        state_dir: "/var/lib/gevod".into(),
        watch_roots: vec![
            WatchRoot {
                path: "/home/u/app/build".into(),
                source: "config".into(),
                exists: true,
            },
            WatchRoot {
                path: "/tmp/gone".into(),
                source: "client".into(),
                exists: false,
            },
        ],
        slots: vec![
            SlotInfo {
                name: "sim".into(),
                state: "running app/stencil".into(),
            },
            SlotInfo {
                name: "NVIDIA H200 GPU-1234".into(),
                state: "waiting: busy (another process uses it)".into(),
            },
        ],
        jobs: vec![
            job("app/stencil", JobState::Running, Some(1.2345), None),
            job(
                "app/broken",
                JobState::Error,
                None,
                Some("spec: missing field `grid`"),
            ),
        ],
    }
}

const JOBS_TABLE: &str = "\
KERNEL       VERSION  STATE    GENERATIONS  EVALUATIONS  VALIDATED  BEST    BACKEND/TARGET  MESSAGE
app/stencil  1        running  12           3400         2          1.234x  sim/sm_90
app/broken   1        error    12           3400         0          -       sim/sm_90       spec: missing field `grid`
";

#[test]
fn status_and_jobs_print_tables() {
    let dir = scratch("tables");
    let socket = dir.join("d.sock");
    let pareto = Pareto {
        kernel: "app/stencil".into(),
        job: "j1".into(),
        points: vec![
            ParetoPoint {
                cost: 1.0,
                error: 0.0,
                edits: 0,
            },
            ParetoPoint {
                cost: 0.81234,
                error: 2.5e-7,
                edits: 3,
            },
        ],
    };
    let explanation = Explanation {
        kernel: "app/stencil".into(),
        job: "j1".into(),
        speedup: 1.25,
        edits: vec!["delete %12".into(), "swap %3 %4".into()],
        diff: "--- original\n+++ variant\n-  %12 = add i32 %a, 0\n".into(),
        tests: vec![
            TestRatio {
                test: "heldout[0]".into(),
                ratio: 0.8,
                lo: 0.79,
                hi: 0.81,
            },
            TestRatio {
                test: "heldout[1]".into(),
                ratio: 0.95,
                lo: 0.95,
                hi: 0.95,
            },
        ],
        rejections: vec!["heldout[1]: slower with confidence on this test".into()],
    };
    let cases: Vec<(&str, Reply, String)> = vec![
        (
            "status",
            Reply::Status(status()),
            format!(
                "\
gevod 0.1.0 (pid 4242), up 1h 02m 03s
socket:    /run/gevod/gevod.sock
state dir: /var/lib/gevod

WATCH ROOT         SOURCE  EXISTS
/home/u/app/build  config  yes
/tmp/gone          client  no

SLOT                  STATE
sim                   running app/stencil
NVIDIA H200 GPU-1234  waiting: busy (another process uses it)

{JOBS_TABLE}"
            ),
        ),
        ("jobs", Reply::Jobs(status().jobs), JOBS_TABLE.into()),
        ("jobs", Reply::Jobs(vec![]), "no jobs\n".into()),
        (
            "pareto",
            Reply::Pareto(pareto),
            "\
app/stencil (job j1): 2 points on the Pareto front
COST    ERROR     EDITS
1.0000  0         0
0.8123  2.500e-7  3
"
            .into(),
        ),
        (
            "explain",
            Reply::Explain(explanation),
            "\
app/stencil (job j1): speedup 1.250x with 2 edits
  1. delete %12
  2. swap %3 %4
held-out tests (cost ratio, variant over original, 95% interval):
  heldout[0]   0.8000  [0.7900, 0.8100]
  heldout[1]   0.9500  [0.9500, 0.9500]
latest rejected candidates:
  - heldout[1]: slower with confidence on this test

--- original
+++ variant
-  %12 = add i32 %a, 0
"
            .into(),
        ),
    ];
    for (i, (command, reply, expect)) in cases.into_iter().enumerate() {
        let socket = socket.with_extension(i.to_string());
        let _daemon = FakeDaemon::replying(&socket, vec![ok(reply)]);
        let mut args = vec!["--socket", s(&socket), command];
        if matches!(command, "pareto" | "explain") {
            args.push("stencil");
        }
        let run = gevo(&dir, &args);
        assert_eq!(run.code, 0, "{command}: {}", run.stderr);
        assert_eq!(run.stdout, expect, "{command}");
    }
}

#[test]
fn json_prints_the_reply_payload() {
    let dir = scratch("json");
    let cases: Vec<(&str, Reply)> = vec![
        ("status", Reply::Status(status())),
        ("jobs", Reply::Jobs(status().jobs)),
        ("pause", Reply::Done("paused 2 jobs".into())),
    ];
    for (i, (command, reply)) in cases.into_iter().enumerate() {
        let socket = dir.join(format!("d{i}.sock"));
        let _daemon = FakeDaemon::replying(&socket, vec![ok(reply.clone())]);
        let run = gevo(&dir, &["--socket", s(&socket), command, "--json"]);
        assert_eq!(run.code, 0, "{command}: {}", run.stderr);
        let got: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
        let want = match reply {
            Reply::Status(x) => serde_json::to_value(x),
            Reply::Jobs(x) => serde_json::to_value(x),
            Reply::Done(x) => serde_json::to_value(x),
            _ => unreachable!(),
        }
        .unwrap();
        assert_eq!(got, want, "{command}");
    }
}

#[test]
fn commands_send_what_they_name() {
    let dir = scratch("commands");
    let k = || Some("app/k".to_string());
    let cases: Vec<(Vec<&str>, Command)> = vec![
        (vec!["status"], Command::Status),
        (vec!["jobs"], Command::Jobs),
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
        if args[0] != "best" {
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
fn the_config_supplies_socket_and_state_and_flags_override_it() {
    let dir = scratch("config");
    std::fs::create_dir_all(dir.join("etc")).unwrap();
    let config = dir.join("etc/gevod.toml");
    // Relative paths are relative to the config file; other keys are the daemon's.
    std::fs::write(
        &config,
        "watch = [\"/src\"]\n[daemon]\nsocket = \"config.sock\"\nstate_dir = \"../state\"\n\
         nice = 19\n[search]\npopulation = 64\n",
    )
    .unwrap();
    let from_config = FakeDaemon::replying(
        &dir.join("etc/config.sock"),
        vec![ok(Reply::Done("config daemon".into()))],
    );
    let from_flag = FakeDaemon::replying(
        &dir.join("flag.sock"),
        vec![ok(Reply::Done("flag daemon".into()))],
    );
    let flag_socket = dir.join("flag.sock");

    let run = gevo(&dir, &["--config", s(&config), "jobs"]);
    assert_eq!(
        (run.code, run.stdout.as_str()),
        (0, "config daemon\n"),
        "{}",
        run.stderr
    );
    assert_eq!(from_config.received(), Command::Jobs);

    let run = gevo(
        &dir,
        &["--config", s(&config), "--socket", s(&flag_socket), "jobs"],
    );
    assert_eq!(
        (run.code, run.stdout.as_str()),
        (0, "flag daemon\n"),
        "{}",
        run.stderr
    );
    assert_eq!(from_flag.received(), Command::Jobs);

    // The config's state dir answers best once its daemon is gone.
    export::write(&dir.join("state"), &best("app/k", "sm_90", 1.1, PTX)).unwrap();
    std::fs::remove_file(dir.join("etc/config.sock")).unwrap();
    let run = gevo(&dir, &["--config", s(&config), "best", "app/k"]);
    assert_eq!((run.code, run.stdout.as_str()), (0, PTX), "{}", run.stderr);
    assert!(run.stderr.contains("from the export in "), "{}", run.stderr);
    // ...unless --state says otherwise.
    let run = gevo(
        &dir,
        &["--config", s(&config), "--state", s(&dir), "best", "app/k"],
    );
    assert_eq!(run.code, 2, "{}", run.stderr);
}

#[test]
fn a_config_that_cannot_be_used_is_an_error_naming_it() {
    let dir = scratch("bad-config");
    let socket = dir.join("d.sock");
    let daemon = FakeDaemon::replying(&socket, vec![ok(Reply::Done("x".into()))]);
    let wrong_type = dir.join("wrong.toml");
    std::fs::write(&wrong_type, "[daemon]\nsocket = 5\n").unwrap();
    let unparsable = dir.join("broken.toml");
    std::fs::write(&unparsable, "[daemon\n").unwrap();
    let cases = [
        (
            dir.join("missing.toml"),
            format!(
                "cannot read the config {}",
                dir.join("missing.toml").display()
            ),
        ),
        (
            wrong_type.clone(),
            format!(
                "config {}: [daemon] socket must be a string, not integer",
                wrong_type.display()
            ),
        ),
        (
            unparsable.clone(),
            format!("config {}: ", unparsable.display()),
        ),
    ];
    for (config, expect) in cases {
        let run = gevo(
            &dir,
            &["--config", s(&config), "--socket", s(&socket), "status"],
        );
        assert_eq!(run.code, 1, "{expect}");
        assert!(
            run.stderr.starts_with(&format!("gevo-client: {expect}")),
            "{}",
            run.stderr
        );
        assert!(daemon.received_nothing());
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
