//! `gevod serve` and `gevo-client` as users run them: real processes on a
//! temporary socket and state directory, the simulator backend, the fixture
//! kernels copied into watched build directories.

use crate::common;

use common::daemon::{build_dir, build_dir_with, client_binary, Daemon, CONFIG};
use common::{s, text};
use gevo_client::proto::{Command, JobState, Reply};
use std::process::Command as Process;
use std::time::Duration;

/// `gevo-client args` exits 0 and says `words` on stderr.
fn client_says(d: &Daemon, args: &[&str], words: &str) {
    let run = d.client(args);
    assert_eq!(run.status.code(), Some(0), "{run:?}");
    let said = text(&run.stderr);
    assert!(said.contains(words), "{said}");
}

#[test]
fn a_watched_kernel_is_evolved_served_and_exported() {
    let dir = tempfile::tempdir().unwrap();
    let (mut d, _) = Daemon::watching_stencil(dir.path());
    d.wait_for("the job", |d| {
        d.jobs().into_iter().find(|j| j.kernel == "app/stencil")
    });

    // Until a variant is validated, `best` says so with exit 3.
    let out = dir.path().join("kernel.ptx");
    let served = d.wait_for("a validated variant", |d| {
        let run = d.client(&["best", "stencil", "--arch", "sm_90", "-o", s(&out)]);
        match run.status.code() {
            Some(0) => Some(text(&run.stderr)),
            Some(3) => None,
            _ => panic!("best: {run:?}"),
        }
    });
    assert!(served.contains("from the daemon"), "{served}");
    let ptx = std::fs::read_to_string(&out).unwrap();
    let original = Process::new(env!("CARGO_BIN_EXE_gevod"))
        .args([
            "ptx",
            s(&common::kernel_fixture("stencil")),
            "--arch",
            "sm_90",
        ])
        .output()
        .unwrap();
    assert!(original.status.success());
    assert!(ptx.contains(".entry stencil5"));
    assert_ne!(
        ptx,
        text(&original.stdout),
        "the served PTX is the original's"
    );

    let best = d.validated_best("stencil").unwrap();
    assert!(best["speedup"].as_f64().unwrap() > 1.0, "{best}");
    assert_eq!(best["ptx_hash"], gevo_client::export::ptx_hash(&ptx));
    assert_eq!(best["target"], "sm_90");

    let explain = d.client(&["explain", "stencil"]);
    assert!(explain.status.success(), "{explain:?}");
    assert!(
        text(&explain.stdout).contains("@@"),
        "no diff: {}",
        text(&explain.stdout)
    );
    // The edits in source terms: words, then the IR form.
    assert!(
        text(&explain.stdout).contains("     IR: "),
        "{}",
        text(&explain.stdout)
    );

    // The HTML report, from the daemon.
    let page = dir.path().join("report.html");
    client_says(
        &d,
        &["report", "stencil", "-o", s(&page)],
        "from the daemon",
    );
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("x faster on the simulator</span>"), "{html}");
    assert_eq!(html.matches("<svg").count(), 3);

    let pareto = d.client(&["--json", "pareto", "app/stencil"]);
    let pareto: serde_json::Value = serde_json::from_slice(&pareto.stdout).unwrap();
    assert!(!pareto["points"].as_array().unwrap().is_empty(), "{pareto}");

    // SIGTERM: checkpoint, exit 0 well within 10 s, socket gone.
    let (status, took) = d.signal(libc::SIGTERM);
    assert!(status.success(), "{status}\n{}", d.log_text());
    assert!(took < Duration::from_secs(10), "took {took:?}");
    assert!(!d.socket.exists());

    // With the daemon down, `best` answers from the export.
    let again = dir.path().join("again.ptx");
    client_says(&d, &["best", "app/stencil", "-o", s(&again)], "export");
    let exported = std::fs::read_to_string(&again).unwrap();
    // The exported best is at least as new as the one served earlier.
    assert!(exported.contains(".entry stencil5"));
    // ... and so does `report`, with the report exported with the best.
    client_says(
        &d,
        &["report", "stencil", "-o", s(&page)],
        "daemon unreachable",
    );
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("Best validated variant") && html.contains("<svg"));
    std::fs::remove_dir_all(d.state.join("exports")).unwrap();
    let run = d.client(&["report", "stencil"]);
    assert_eq!(run.status.code(), Some(2), "{run:?}");
    let run = d.client(&["best", "stencil"]);
    assert_eq!(run.status.code(), Some(2), "{run:?}");
}

#[test]
fn a_killed_daemon_resumes_its_jobs_and_client_watch_roots() {
    let dir = tempfile::tempdir().unwrap();
    let app = build_dir(dir.path(), "proj")
        .parent()
        .unwrap()
        .to_path_buf();
    let mut d = Daemon::start(dir.path(), &[]);
    let watch = d.client(&["watch", s(&app)]);
    assert!(watch.status.success(), "{watch:?}");
    let job = d.wait_for("3 generations", |d| {
        d.jobs().into_iter().find(|j| j.generations >= 3)
    });
    let (status, _) = d.signal(libc::SIGKILL);
    assert!(!status.success());

    // What the store holds is what was committed before the kill.
    let committed = {
        let store = gevo_search::store::Store::open(&d.state).unwrap();
        store.checkpoint(&job.job).unwrap().unwrap().generations()
    };
    assert!(committed >= 4, "{committed}");
    d.spawn(&[]);
    let jobs = d.jobs();
    assert_eq!(jobs.len(), 1, "{jobs:#?}");
    assert_eq!(jobs[0].job, job.job, "the same job, not a new one");
    assert!(
        jobs[0].generations + 1 >= committed,
        "{jobs:#?} vs {committed}"
    );
    // The watch root came back from the store and the job goes on.
    let Reply::Status(status) = d.call(Command::Status) else {
        panic!()
    };
    assert_eq!(status.watch_roots.len(), 1);
    assert_eq!(status.watch_roots[0].source, "client");
    d.wait_for("more generations", |d| {
        d.jobs().into_iter().find(|j| {
            j.job == job.job && j.generations + 1 > committed && j.state == JobState::Running
        })
    });
}

#[test]
fn broken_specs_show_in_status_and_the_good_job_runs() {
    let dir = tempfile::tempdir().unwrap();
    let build = build_dir(dir.path(), "app");
    let spec = std::fs::read_to_string(build.join("stencil.gevo.toml")).unwrap();
    std::fs::write(build.join("malformed.gevo.toml"), "version = 1\nir = \n").unwrap();
    std::fs::write(build.join("garbage.ll"), "this is not LLVM IR\n").unwrap();
    std::fs::write(
        build.join("unparsable.gevo.toml"),
        spec.replace("ir = \"stencil.ll\"", "ir = \"garbage.ll\""),
    )
    .unwrap();
    std::fs::write(
        build.join("nokernel.gevo.toml"),
        spec.replace("kernel = \"stencil5\"", "kernel = \"no_such_kernel\""),
    )
    .unwrap();
    let d = Daemon::start(dir.path(), &["--watch", s(&dir.path().join("app"))]);
    let jobs = d.wait_for("three errors and a running job", |d| {
        let jobs = d.jobs();
        let errors = jobs.iter().filter(|j| j.state == JobState::Error).count();
        let good = jobs
            .iter()
            .any(|j| j.kernel == "app/stencil" && j.generations > 0);
        (errors == 3 && good).then_some(jobs)
    });
    for (kernel, expected) in [
        ("app/malformed", "malformed.gevo.toml"),
        ("app/unparsable", "unparsable.gevo.toml"),
        ("app/nokernel", "no_such_kernel"),
    ] {
        let job = jobs.iter().find(|j| j.kernel == kernel).unwrap();
        let message = job.message.as_deref().unwrap_or_default();
        assert!(message.contains(expected), "{kernel}: {message}");
    }
    let status = d.client(&["status"]);
    assert!(status.status.success());
    let table = text(&status.stdout);
    for kernel in [
        "app/malformed",
        "app/unparsable",
        "app/nokernel",
        "app/stencil",
    ] {
        assert!(table.contains(kernel), "{table}");
    }
}

#[test]
fn a_rebuilt_kernel_is_a_new_version_and_best_waits_for_its_own_variant() {
    let dir = tempfile::tempdir().unwrap();
    let (d, build) = Daemon::watching_stencil(dir.path());
    let v1 = d.wait_for("version 1's variant", |d| d.validated_best("stencil"));
    let paused = d.client(&["pause", "stencil"]);
    assert!(paused.status.success(), "{paused:?}");

    // A rebuild from another source: different IR bytes.
    let ir = build.join("stencil.ll");
    let mut text_ir = std::fs::read_to_string(&ir).unwrap();
    text_ir.push_str("\n; rebuilt from another revision of stencil.cu\n");
    std::fs::write(&ir, text_ir).unwrap();
    let v2 = d.wait_for("version 2", |d| {
        d.jobs().into_iter().find(|j| j.version == 2)
    });
    assert_eq!(
        v2.state,
        JobState::Paused,
        "a rebuild keeps the client's pause"
    );
    let jobs = d.jobs();
    let old = jobs.iter().find(|j| j.version == 1).unwrap();
    assert_eq!(old.state, JobState::Superseded);
    // The old version's variant was evolved from other code: meanwhile
    // there is no answer, and the build uses the original.
    assert_eq!(d.validated_best("stencil"), None);

    assert!(d.client(&["resume", "stencil"]).status.success());
    let newer = d.wait_for("version 2's own variant", |d| {
        d.validated_best("stencil").filter(|b| b["version"] == 2)
    });
    assert_eq!(newer["job"], serde_json::Value::from(v2.job.clone()));

    // Reverting the rebuild makes version 1 current again, and its variant
    // the answer, although version 2 has a newer number.
    std::fs::copy(common::kernel_fixture("stencil"), &ir).unwrap();
    d.wait_for("version 1 current again", |d| {
        let jobs = d.jobs();
        let superseded = |v| {
            jobs.iter()
                .any(|j| j.version == v && j.state == JobState::Superseded)
        };
        (superseded(2) && !superseded(1)).then_some(())
    });
    assert_eq!(d.validated_best("stencil").unwrap()["job"], v1["job"]);
}

#[test]
fn sighup_reloads_the_config_and_shutdown_stops_the_daemon() {
    let dir = tempfile::tempdir().unwrap();
    build_dir(dir.path(), "app");
    let mut d = Daemon::start(dir.path(), &[]);
    assert!(d.jobs().is_empty());
    // A bad config is refused on reload; the daemon keeps its own.
    std::fs::write(&d.config, "[daemon]\nwatch = 3\n").unwrap();
    unsafe { libc::kill(d.child.as_ref().unwrap().id() as i32, libc::SIGHUP) };
    std::thread::sleep(Duration::from_millis(500));
    assert!(d.try_call(Command::Status).is_some());
    std::fs::write(
        &d.config,
        format!("{CONFIG}\n").replace("[daemon]\n", "[daemon]\nwatch = [\"app\"]\n"),
    )
    .unwrap();
    unsafe { libc::kill(d.child.as_ref().unwrap().id() as i32, libc::SIGHUP) };
    d.wait_for("the job from the reloaded roots", |d| {
        d.jobs().into_iter().find(|j| j.kernel == "app/stencil")
    });
    assert!(d.log_text().contains("reload refused"), "{}", d.log_text());
    let out = d.client(&["shutdown"]);
    assert!(out.status.success(), "{out:?}");
    let status = d.child.take().unwrap().wait().unwrap();
    assert!(status.success(), "{status}");
}

#[test]
fn a_client_of_another_user_is_refused() {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        println!("skipped: switching users needs root");
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let d = Daemon::start(dir.path(), &[]);
    // The checkout may sit where uid 65534 cannot reach (/root): run a copy.
    let client = dir.path().join("gevo-client");
    std::fs::copy(client_binary(), &client).unwrap();
    std::fs::set_permissions(&client, std::fs::Permissions::from_mode(0o755)).unwrap();
    let as_nobody = || {
        Process::new(&client)
            .args(["--socket", s(&d.socket), "--state", s(&d.state), "status"])
            .uid(65534)
            .gid(65534)
            .output()
            .unwrap()
    };
    // The socket's mode (0660) keeps others out, and they are told which
    // group would let them in (not that the daemon may be down)...
    let run = as_nobody();
    assert_eq!(run.status.code(), Some(2), "{run:?}");
    let err = text(&run.stderr);
    assert!(
        err.contains("permission denied: only user root and group root (mode 0660)")
            && err.contains("join group root"),
        "{run:?}"
    );
    assert!(!err.contains("is it running"), "{err}");
    // (A warning may come first: nobody cannot read the HOME it inherited.)
    let lines = err.lines().filter(|l| !l.contains(": warning: "));
    assert_eq!(lines.count(), 1, "{err}");
    // ...and so does the daemon's own peer check when the mode is opened.
    std::fs::set_permissions(&d.socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    let run = as_nobody();
    assert_eq!(run.status.code(), Some(1), "{run:?}");
    assert!(
        text(&run.stderr).contains("uid 65534 is not allowed"),
        "{run:?}"
    );
    assert!(d.client(&["status"]).status.success());
}

#[test]
fn systemd_hears_ready_watchdog_pings_and_stopping() {
    use std::os::unix::net::UnixDatagram;
    let dir = tempfile::tempdir().unwrap();
    let notify_path = dir.path().join("notify.sock");
    let notify = UnixDatagram::bind(&notify_path).unwrap();
    notify
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    // Pings are due every half of WATCHDOG_USEC: 0.2 s here.
    let mut d = Daemon::start_with_env(
        dir.path(),
        &[],
        &[
            ("NOTIFY_SOCKET", s(&notify_path)),
            ("WATCHDOG_USEC", "400000"),
        ],
    );
    let mut buf = [0u8; 256];
    let mut next = || {
        let n = notify.recv(&mut buf).expect("a notification");
        String::from_utf8_lossy(&buf[..n]).into_owned()
    };
    assert_eq!(next(), "READY=1\n");
    for _ in 0..3 {
        assert_eq!(next(), "WATCHDOG=1\n");
    }
    let (status, _) = d.signal(libc::SIGTERM);
    assert!(status.success());
    let mut rest = Vec::new();
    notify
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    while let Ok(n) = notify.recv(&mut buf) {
        rest.push(String::from_utf8_lossy(&buf[..n]).into_owned());
    }
    assert!(rest.iter().any(|m| m == "STOPPING=1\n"), "{rest:?}");
}

#[test]
fn two_specs_of_one_kernel_name_collide_once_and_unwatching_one_frees_the_other() {
    let dir = tempfile::tempdir().unwrap();
    for project in ["debug", "release"] {
        let build = build_dir(dir.path(), project);
        let spec = build.join("stencil.gevo.toml");
        let text = std::fs::read_to_string(&spec).unwrap();
        std::fs::write(&spec, format!("project = \"app\"\n{text}")).unwrap();
    }
    let (debug, release) = (dir.path().join("debug"), dir.path().join("release"));
    let d = Daemon::start(dir.path(), &[]);
    for root in [&debug, &release] {
        let out = d.client(&["watch", s(root)]);
        assert!(out.status.success(), "{out:?}");
    }
    let jobs = d.wait_for("one job running and one collision", |d| {
        let jobs = d.jobs();
        let running = jobs.iter().any(|j| j.generations > 0);
        let collided = jobs.iter().any(|j| {
            j.state == JobState::Error
                && j.message
                    .as_deref()
                    .is_some_and(|m| m.contains("is already defined by"))
        });
        (running && collided).then_some(jobs)
    });
    let winner = jobs.iter().find(|j| j.generations > 0).unwrap();
    let (winner_dir, loser_dir) = if winner.spec.starts_with(&debug) {
        (&debug, &release)
    } else {
        (&release, &debug)
    };
    // Several rescans later the collision is still logged once.
    std::thread::sleep(Duration::from_secs(3));
    let log = d.log_text();
    let warnings = log.matches("is already defined by").count();
    assert_eq!(warnings, 1, "{log}");

    let out = d.client(&["unwatch", s(winner_dir)]);
    assert!(out.status.success(), "{out:?}");
    let before = d.jobs().iter().map(|j| j.generations).max().unwrap();
    // Same kernel, same content: the job moves to the other spec and goes on.
    d.wait_for("the other build directory's job running", |d| {
        d.jobs().into_iter().find(|j| {
            j.spec.starts_with(loser_dir) && j.state != JobState::Removed && j.generations > before
        })
    });
}

#[test]
fn a_watched_pipeline_is_evolved_and_served_as_one_module() {
    // The pyramid fixture (three kernels, a loop of launches) in a build
    // directory, named after it.
    let dir = tempfile::tempdir().unwrap();
    build_dir_with(
        dir.path(),
        "pipe",
        &common::pipeline_fixture("pyramid"),
        &common::repo_root().join("tests/fixtures/pipelines/pyramid.ll"),
    );
    let watched = dir.path().join("pipe");
    let d = Daemon::start(dir.path(), &["--watch", s(&watched)]);
    d.wait_for("the job", |d| {
        d.jobs().into_iter().find(|j| j.kernel == "pipe/pyramid")
    });
    let out = dir.path().join("pyramid.ptx");
    d.wait_for("a validated variant", |d| {
        let run = d.client(&["best", "pipe/pyramid", "--arch", "sm_90", "-o", s(&out)]);
        match run.status.code() {
            Some(0) => Some(()),
            Some(3) => None,
            _ => panic!("best: {run:?}"),
        }
    });
    let ptx = std::fs::read_to_string(&out).unwrap();
    for kernel in ["pyr_step", "pyr_partial", "pyr_final"] {
        assert!(
            ptx.contains(&format!(".entry {kernel}(")),
            "{kernel} missing"
        );
    }
}
