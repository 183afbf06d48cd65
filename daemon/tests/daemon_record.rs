//! The record `gevod serve` leaves beside its socket: the daemon's state
//! directory, kept after it stops, through which `gevo-client best` (no
//! `--state`) finds the export of a daemon that ran with `--state`; and
//! `gevod serve --help` naming the default socket and state directory.

use crate::common;

use common::daemon::{client_binary, Daemon};
use common::s;
use gevo_client::proto::{Best, BestRecord};

#[test]
fn best_finds_the_export_of_a_stopped_daemon_that_ran_with_state() {
    let dir = tempfile::tempdir().unwrap();
    // The test daemon runs with --state <dir>/state and --socket <dir>/gevod.sock.
    let mut d = Daemon::start(dir.path(), &[]);
    let record = gevo_client::record::read(&d.socket).unwrap();
    assert_eq!(record.state_dir, d.state.canonicalize().unwrap());
    assert_eq!(record.socket, d.socket);
    let (status, _) = d.signal(libc::SIGTERM);
    assert!(status.success(), "{}", d.log_text());
    assert!(!d.socket.exists(), "the socket is removed");

    let ptx = ".version 8.0\n.target sm_90\n.entry stencil() { ret; }\n".to_string();
    let best = Best {
        record: BestRecord {
            configuration: None,
            kernel: "app/stencil".into(),
            job: "planted".into(),
            version: 1,
            target: "sm_90".into(),
            backend: "sim".into(),
            speedup: 1.5,
            interval: (1.4, 1.6),
            generation: 3,
            ptx_hash: gevo_client::export::ptx_hash(&ptx),
            spec_hash: String::new(),
            ir_hash: String::new(),
            validated_at: 0,
        },
        ptx: ptx.clone(),
    };
    gevo_client::export::write(&d.state, &best, Default::default()).unwrap();
    // The client as a build runs it: the daemon's socket named, no --state,
    // its default state directories empty.
    let home = dir.path().join("home");
    let out = std::process::Command::new(client_binary())
        .args(["--socket", s(&d.socket), "best", "app/stencil"])
        .env("HOME", &home)
        .env("XDG_STATE_HOME", home.join("state"))
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("XDG_RUNTIME_DIR", home.join("run"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), ptx);
    assert!(
        stderr.contains(&format!(
            "from the export in {} (the state directory {} names)",
            d.state.canonicalize().unwrap().display(),
            gevo_client::record::path_for(&d.socket).display()
        )),
        "{stderr}"
    );
}

#[test]
fn serve_help_names_the_default_socket_and_state_directory() {
    let home = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gevod"))
        .args(["serve", "--help"])
        .env("HOME", home.path())
        .env("XDG_STATE_HOME", home.path().join("state"))
        .env("XDG_RUNTIME_DIR", home.path().join("run"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let help = String::from_utf8_lossy(&out.stdout);
    let flat = help.split_whitespace().collect::<Vec<_>>().join(" ");
    // SAFETY: geteuid cannot fail.
    let (socket, state) = if unsafe { libc::geteuid() } == 0 {
        (
            "/run/gevod/gevod.sock, the system daemon's (run as root)".to_string(),
            "/var/lib/gevod, the system daemon's (run as root)".to_string(),
        )
    } else {
        (
            format!(
                "{}, your user daemon's; as root /run/gevod/gevod.sock",
                home.path().join("run/gevo/gevod.sock").display()
            ),
            format!(
                "{}, your user daemon's; as root /var/lib/gevod",
                home.path().join("state/gevo").display()
            ),
        )
    };
    for wanted in [socket, state] {
        assert!(
            flat.contains(&format!("[default: {wanted}]")),
            "{wanted}:\n{help}"
        );
    }
}
