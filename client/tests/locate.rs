//! Where the real `gevo-client` looks for the daemon (docs/client.md, "Where
//! the daemon is"): a named socket (`--socket`, `GEVO_SOCKET`, a config's)
//! is the only place; without one, your user daemon's socket and then the
//! system daemon's, the first that accepts; when none does, every place is
//! named. The user-mode search runs the client as uid 65534 when the tests
//! run as root (root's client knows only the system daemon).

use gevo_client::export;
use gevo_client::paths::SYSTEM_SOCKET;
use gevo_client::proto::{Best, BestRecord, Command, Reply, Response};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

mod common;

use common::{s, FakeDaemon, Run};

/// A fresh directory for one test, open to every user (the client may run
/// as another one).
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("gevo-locate-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    dir
}

/// A daemon that answers one connection with `Done(name)` and reports the
/// request; its socket is open to every user.
fn fake_daemon(socket: &Path, name: &str) -> FakeDaemon {
    std::fs::create_dir_all(socket.parent().unwrap()).unwrap();
    let daemon = FakeDaemon::replying(socket, vec![Response::ok(Reply::Done(name.into()))]);
    std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o777)).unwrap();
    daemon
}

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Runs the client in `dir` with a user environment inside `dir` and `env`
/// on top. With `as_user`, a root test runs it as uid 65534 (from a copy
/// that user can execute), so that it searches as a user's client does.
fn gevo(dir: &Path, as_user: bool, env: &[(&str, &Path)], args: &[&str]) -> Run {
    let mut binary = PathBuf::from(env!("CARGO_BIN_EXE_gevo-client"));
    let mut command = if as_user && is_root() {
        let copy = dir.join("gevo-client");
        if !copy.exists() {
            std::fs::copy(&binary, &copy).unwrap();
            std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        binary = copy;
        let mut command = std::process::Command::new(&binary);
        command.uid(65534).gid(65534);
        command
    } else {
        std::process::Command::new(&binary)
    };
    command
        .args(args)
        .current_dir(dir)
        .env_remove("GEVO_SOCKET")
        .env("HOME", dir)
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .env("XDG_STATE_HOME", dir.join("xdg-state"))
        .env("XDG_RUNTIME_DIR", dir.join("run"));
    for (key, value) in env {
        command.env(key, value);
    }
    // A copy just written may still be open in a child another test thread
    // forked meanwhile (until that child execs): exec then fails with ETXTBSY.
    let mut tries = 0;
    let out = loop {
        match command.output() {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && tries < 100 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            result => break result.unwrap(),
        }
    };
    Run {
        code: out.status.code().expect("exited, not killed"),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

/// Whether a system daemon's socket is on this machine: then a search
/// without a named socket may reach it, and "nothing answered" cannot be
/// checked here.
fn system_socket_present() -> bool {
    let present = Path::new(SYSTEM_SOCKET).exists();
    if present {
        println!("{SYSTEM_SOCKET} exists here: the checks that nothing answers are left out");
    }
    present
}

#[test]
fn gevo_socket_names_the_daemon_between_the_flag_and_the_config() {
    let dir = scratch("env");
    let env_socket = dir.join("env.sock");
    std::fs::create_dir_all(dir.join("etc")).unwrap();
    let config = dir.join("etc/gevod.toml");
    std::fs::write(&config, "[daemon]\nsocket = \"config.sock\"\n").unwrap();

    // GEVO_SOCKET wins over the config's socket...
    let from_env = fake_daemon(&env_socket, "env daemon");
    let env = [("GEVO_SOCKET", env_socket.as_path())];
    let run = gevo(&dir, false, &env, &["--config", s(&config), "jobs"]);
    assert_eq!(
        (run.code, run.stdout.as_str()),
        (0, "env daemon\n"),
        "{}",
        run.stderr
    );
    assert_eq!(from_env.received(), Command::Jobs { kernel: None });

    // ...and --socket over GEVO_SOCKET.
    let flag = dir.join("flag.sock");
    let from_flag = fake_daemon(&flag, "flag daemon");
    let run = gevo(&dir, false, &env, &["--socket", s(&flag), "status"]);
    assert_eq!(
        (run.code, run.stdout.as_str()),
        (0, "flag daemon\n"),
        "{}",
        run.stderr
    );
    assert_eq!(from_flag.received(), Command::Status);

    // A named socket is the only place: a live daemon elsewhere (the
    // config's) is not asked, and the error says where the name came from.
    let from_config = fake_daemon(&dir.join("etc/config.sock"), "config daemon");
    let run = gevo(&dir, false, &env, &["--config", s(&config), "pause"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert_eq!(
        run.stderr,
        format!(
            "gevo-client: cannot reach gevod at {} (GEVO_SOCKET): connection refused (a stale \
             socket?) (is it running? start it with: gevod serve)\n",
            env_socket.display()
        )
    );
    assert!(
        from_config.received_nothing(),
        "the config's daemon was asked"
    );
    let run = gevo(&dir, false, &[], &["--config", s(&config), "resume"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(from_config.received(), Command::Resume { kernel: None });
    let run = gevo(&dir, false, &[], &["--config", s(&config), "jobs"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.starts_with(&format!(
            "gevo-client: cannot reach gevod at {} (from {}): ",
            dir.join("etc/config.sock").display(),
            config.display()
        )),
        "{}",
        run.stderr
    );
}

fn best_record(ptx: &str) -> Best {
    Best {
        record: BestRecord {
            configuration: None,
            kernel: "app/k".into(),
            job: "j1".into(),
            version: 1,
            target: "sm_90".into(),
            backend: "sim".into(),
            speedup: 1.5,
            interval: (1.4, 1.6),
            generation: 3,
            ptx_hash: export::ptx_hash(ptx),
            spec_hash: "spec".into(),
            ir_hash: "ir".into(),
            validated_at: 1_700_000_000,
        },
        ptx: ptx.into(),
    }
}

#[test]
fn a_user_client_tries_its_own_daemon_then_the_system_daemon_and_names_both() {
    let dir = scratch("user-search");
    let user_socket = dir.join("run/gevo/gevod.sock");
    std::fs::create_dir_all(dir.join("run/gevo")).unwrap();
    std::fs::set_permissions(dir.join("run"), std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::set_permissions(dir.join("run/gevo"), std::fs::Permissions::from_mode(0o777)).unwrap();

    // Your own daemon answers first.
    let own = fake_daemon(&user_socket, "user daemon");
    let run = gevo(&dir, true, &[], &["jobs"]);
    assert_eq!(
        (run.code, run.stdout.as_str()),
        (0, "user daemon\n"),
        "{}",
        run.stderr
    );
    assert_eq!(own.received(), Command::Jobs { kernel: None });

    // Gone (a stale socket): the system daemon is next; with none there
    // either, both places are named, and `best` reads your exports.
    if system_socket_present() {
        return;
    }
    let run = gevo(&dir, true, &[], &["status"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert_eq!(
        run.stderr,
        format!(
            "gevo-client: cannot reach gevod at any of 2 places: {} (your user daemon): \
             connection refused (a stale socket?); {SYSTEM_SOCKET} (the system daemon): no socket \
             there (is it running? start it with: gevod serve)\n",
            user_socket.display()
        )
    );

    let ptx = ".version 8.0\n.target sm_90\n";
    let state = dir.join("xdg-state/gevo");
    export::write(&state, &best_record(ptx), export::Readers::Everyone).unwrap();
    // Readable by the client's user; not writable by everyone, or the
    // client would not trust the export.
    for entry in walk(&dir.join("xdg-state")) {
        let mode = if entry.is_dir() { 0o755 } else { 0o644 };
        std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let run = gevo(&dir, true, &[], &["best", "app/k", "--arch", "sm_90"]);
    assert_eq!((run.code, run.stdout.as_str()), (0, ptx), "{}", run.stderr);
    assert_eq!(
        run.stderr,
        format!(
            "gevo-client: app/k sm_90: validated variant, speedup 1.500x [1.40, 1.60] on the \
             simulator (a cost-model ratio, not a GPU speedup) (from the export in {}, daemon unreachable: nothing answered at {} (your user daemon): \
             connection refused (a stale socket?); {SYSTEM_SOCKET} (the system daemon): no socket \
             there)\n",
            state.display(),
            user_socket.display()
        )
    );
    let run = gevo(&dir, true, &[], &["best", "app/other"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains(&format!(
            "no exported variant of app/other in {}/exports; no exported variant of app/other in \
             /var/lib/gevod/exports",
            state.display()
        )),
        "{}",
        run.stderr
    );
}

/// Every file and directory under `dir`, `dir` included.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut all = vec![dir.to_path_buf()];
    if dir.is_dir() {
        for entry in std::fs::read_dir(dir).unwrap() {
            all.extend(walk(&entry.unwrap().path()));
        }
    }
    all
}

#[test]
fn root_knows_only_the_system_daemon() {
    if !is_root() {
        println!("skipped: the test runs as a user, not root");
        return;
    }
    if system_socket_present() {
        return;
    }
    let dir = scratch("root");
    // A user daemon's socket in root's runtime dir is not root's daemon.
    let _user = fake_daemon(&dir.join("run/gevo/gevod.sock"), "user daemon");
    let run = gevo(&dir, false, &[], &["status"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert_eq!(
        run.stderr,
        format!(
            "gevo-client: cannot reach gevod at {SYSTEM_SOCKET} (the system daemon): no socket \
             there (is it running? start it with: gevod serve)\n"
        )
    );
}
