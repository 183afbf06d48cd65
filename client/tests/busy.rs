//! A daemon that turns the client away ("too many connections", in all or
//! for its uid) or drops the connection before an answer is, for `best`
//! and `report`, like a daemon that is down: they fall back on the export
//! (exit 0) and say so on stderr; other commands exit 2. Against the real
//! `gevo-client` and a fake gevod.

use gevo_client::export;
use gevo_client::proto::{ErrorCode, Response};
use std::io::{Read, Write};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

mod common;

use common::*;

const PER_UID: &str = "too many connections from uid 1000 (at most 16 at once per uid); try again";
const ALL: &str = "too many connections (64); try again";
const REPORT: &str = "<html>the exported report</html>";

/// A state directory holding an export of app/stencil for sm_90 with its
/// report.
fn exported(dir: &Path) -> PathBuf {
    let state = dir.join("state");
    export::write(
        &state,
        &best("app/stencil", "sm_90", 1.5, PTX),
        export::Readers::Everyone,
    )
    .unwrap();
    export::write_report(&state, "app/stencil", REPORT, export::Readers::Everyone).unwrap();
    state
}

/// A daemon at `socket` that answers every connection `line` at once and
/// closes it, reading nothing (as a daemon turning clients away may).
fn answering_unread(socket: &Path, line: Vec<u8>) {
    let listener = UnixListener::bind(socket).unwrap();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let _ = conn.unwrap().write_all(&line);
        }
    });
}

/// A daemon at `socket` that reads each request and closes the connection
/// without answering.
fn closing_unanswered(socket: &Path) {
    let listener = UnixListener::bind(socket).unwrap();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let mut conn = conn.unwrap();
            let _ = conn.read(&mut [0u8; 4096]);
        }
    });
}

fn line_of(response: &Response) -> Vec<u8> {
    let mut line = serde_json::to_vec(response).unwrap();
    line.push(b'\n');
    line
}

/// `best` and `report` at `socket` fall back on the export, saying the
/// daemon was `why` (a prefix of the reason).
fn assert_falls_back(dir: &Path, socket: &Path, state: &Path, why: &str) {
    let base = ["--socket", s(socket), "--state", s(state)];
    let mut args = base.to_vec();
    args.extend(["best", "stencil", "--arch", "sm_90"]);
    let run = gevo(dir, &args);
    assert_eq!(run.code, 0, "best: {}", run.stderr);
    assert_eq!(run.stdout, PTX);
    let from = format!("(from the export in {}, {why}", state.display());
    assert!(
        run.stderr
            .starts_with("gevo-client: app/stencil sm_90: validated variant")
            && run.stderr.contains(&from),
        "best: {}",
        run.stderr
    );

    let mut args = base.to_vec();
    args.extend(["report", "app/stencil"]);
    let run = gevo(dir, &args);
    assert_eq!(run.code, 0, "report: {}", run.stderr);
    assert_eq!(run.stdout, REPORT);
    assert!(
        run.stderr
            .contains("the report exported with the best variant")
            && run.stderr.contains(why),
        "report: {}",
        run.stderr
    );
}

#[test]
fn best_and_report_fall_back_when_the_daemon_turns_them_away() {
    let dir = scratch("busy-fallback");
    let state = exported(&dir);
    for (i, message) in [PER_UID, ALL].into_iter().enumerate() {
        let busy = Response::error(ErrorCode::Internal, message);
        // Read as an answer to the request...
        let socket = dir.join(format!("busy{i}.sock"));
        let _daemon = FakeDaemon::replying(&socket, vec![busy.clone(), busy.clone()]);
        let exact = format!("daemon busy: {message})\n");
        assert_falls_back(&dir, &socket, &state, &exact);

        // ...and when the daemon closed before taking it (the write may
        // fail with EPIPE; the answer is read all the same).
        let socket = dir.join(format!("unread{i}.sock"));
        answering_unread(&socket, line_of(&busy));
        assert_falls_back(&dir, &socket, &state, &exact);

        // The other commands: exit 2, naming the limit.
        let run = gevo(&dir, &["--socket", s(&socket), "status"]);
        assert_eq!(run.code, 2, "{}", run.stderr);
        assert_eq!(
            run.stderr,
            format!(
                "gevo-client: gevod at {} turned this client away: {message}\n",
                socket.display()
            )
        );
    }
}

#[test]
fn best_and_report_fall_back_when_the_connection_ends_before_an_answer() {
    let dir = scratch("busy-closed");
    let state = exported(&dir);
    let socket = dir.join("closing.sock");
    closing_unanswered(&socket);
    assert_falls_back(&dir, &socket, &state, "daemon unreachable: the daemon ");
}

#[test]
fn turned_away_without_an_export_exits_2_saying_both_why() {
    let dir = scratch("busy-nothing");
    let socket = dir.join("busy.sock");
    answering_unread(
        &socket,
        line_of(&Response::error(ErrorCode::Internal, PER_UID)),
    );
    let state = dir.join("empty-state");
    std::fs::create_dir_all(&state).unwrap();
    let run = gevo(
        &dir,
        &[
            "--socket",
            s(&socket),
            "--state",
            s(&state),
            "best",
            "app/stencil",
        ],
    );
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert_eq!(
        run.stderr,
        format!(
            "gevo-client: gevod at {} turned this client away: {PER_UID}; no exported variant of app/stencil in {}\n",
            socket.display(),
            state.join("exports").display()
        )
    );
}
