//! The transport's tests: framing, deadlines, and what each failure says.
use super::*;
use crate::proto::{Command, Reply};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixListener;

fn socket_path(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("gevo-transport-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("d.sock")
}

/// Serves one connection: reads the request to end of input, writes
/// `answer` verbatim, returns what it read.
fn serve_once(socket: &Path, answer: Vec<u8>) -> std::thread::JoinHandle<Vec<u8>> {
    let listener = UnixListener::bind(socket).unwrap();
    std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        let mut got = Vec::new();
        conn.read_to_end(&mut got).unwrap();
        let _ = conn.write_all(&answer);
        got
    })
}

#[test]
fn a_request_line_goes_out_and_the_answer_line_comes_back() {
    let socket = socket_path("roundtrip");
    let response = Response::ok(Reply::Done("paused 1 job".into()));
    let mut answer = serde_json::to_vec(&response).unwrap();
    answer.push(b'\n');
    let server = serve_once(&socket, answer);
    let request = Request::new(Command::Pause {
        kernel: Some("app/k".into()),
    });
    let got = call(&socket, &request, DEFAULT_TIMEOUT).unwrap();
    assert_eq!(got, response);
    let sent = server.join().unwrap();
    assert_eq!(sent.last(), Some(&b'\n'), "one newline-terminated line");
    let sent: Request = serde_json::from_slice(&sent).unwrap();
    assert_eq!(sent, request);
}

/// A short form of a call's outcome that a table of cases can spell.
fn outcome(result: &Result<Response, CallError>) -> String {
    match result {
        Ok(r) => format!("ok {}", serde_json::to_string(r).unwrap()),
        Err(CallError::Malformed { prefix, .. }) => format!("malformed {prefix}"),
        Err(CallError::Version { ours, theirs }) => format!("version {ours} {theirs}"),
        Err(CallError::Io { source, .. }) => format!("io {:?}", source.kind()),
        Err(CallError::TooLong { limit, .. }) => format!("too long {limit}"),
        Err(e) => format!("other {e}"),
    }
}

#[test]
fn answers_are_parsed_or_told_apart_by_what_is_wrong() {
    let refused = r#"{"version":1,"error":{"code":"refused","message":"uid 7"}}"#;
    let too_long = vec![b'x'; MAX_MESSAGE_BYTES + 10];
    let cases: [(&str, Vec<u8>, String); 6] = [
        ("garbage", b"hello\n".to_vec(), "malformed hello".into()),
        // Another version is reported as such even with a body we cannot read.
        (
            "version",
            br#"{"version":99,"shiny":{}}"#.to_vec(),
            "version 1 99".into(),
        ),
        (
            "shape",
            b"{\"version\":1,\"ok\":{\"nope\":1}}\n".to_vec(),
            "malformed {\"version\":1,\"ok\":{\"nope\":1}}".into(),
        ),
        ("empty", Vec::new(), "io UnexpectedEof".into()),
        // A last line without its newline is still a complete answer.
        ("unterminated", refused.into(), format!("ok {refused}")),
        (
            "too-long",
            too_long,
            format!("too long {MAX_MESSAGE_BYTES}"),
        ),
    ];
    for (name, answer, expect) in cases {
        let socket = socket_path(name);
        let server = serve_once(&socket, answer);
        let result = call(&socket, &Request::new(Command::Status), DEFAULT_TIMEOUT);
        server.join().unwrap();
        assert_eq!(outcome(&result), expect, "{name}");
    }
}

#[test]
fn a_daemon_that_stopped_accepting_times_out_instead_of_hanging() {
    let socket = socket_path("full-queue");
    let listener = UnixListener::bind(&socket).unwrap();
    // Shrink the listen queue to a single pending connection (a second
    // listen() updates the backlog), then fill it without accepting.
    // SAFETY: listen() on a descriptor the listener owns.
    assert_eq!(unsafe { libc::listen(listener.as_raw_fd(), 0) }, 0);
    let limit = Duration::from_millis(200);
    let mut queued = Vec::new();
    let err = loop {
        match connect(&socket, limit) {
            Ok(stream) => queued.push(stream),
            Err(e) => break e,
        }
        assert!(queued.len() < 8, "the listen queue never filled");
    };
    assert!(is_timeout(&err), "{err:?}");
    let start = Instant::now();
    let err = call(&socket, &Request::new(Command::Status), limit).unwrap_err();
    assert!(matches!(err, CallError::Timeout { .. }), "{err:?}");
    assert!(start.elapsed() < Duration::from_secs(2));
}

#[test]
fn no_socket_is_unreachable_and_a_silent_daemon_times_out() {
    let socket = socket_path("missing");
    let err = call(&socket, &Request::new(Command::Status), DEFAULT_TIMEOUT).unwrap_err();
    assert!(
        matches!(&err, CallError::Unreachable { source, .. } if source.kind() == io::ErrorKind::NotFound),
        "{err:?}"
    );
    assert!(err.is_unreachable());
    assert!(err.to_string().contains("no socket there"), "{err}");

    let socket = socket_path("silent");
    let listener = UnixListener::bind(&socket).unwrap();
    let server = std::thread::spawn(move || {
        let (conn, _) = listener.accept().unwrap();
        // Hold the connection open past the client's deadline.
        std::thread::sleep(Duration::from_millis(600));
        drop(conn);
    });
    let start = Instant::now();
    let err = call(
        &socket,
        &Request::new(Command::Status),
        Duration::from_millis(200),
    )
    .unwrap_err();
    assert!(matches!(err, CallError::Timeout { .. }), "{err:?}");
    assert!(err.is_unreachable());
    assert!(start.elapsed() < Duration::from_millis(550));
    server.join().unwrap();
}

#[test]
fn the_first_place_that_accepts_answers_and_none_accepting_names_each() {
    let missing = socket_path("first-missing");
    let stale = socket_path("first-stale");
    drop(UnixListener::bind(&stale).unwrap());
    let live = socket_path("first-live");
    let response = Response::ok(Reply::Done("here".into()));
    let mut answer = serde_json::to_vec(&response).unwrap();
    answer.push(b'\n');
    let server = serve_once(&live, answer);
    let label = |l: &str| Some(l.to_string());
    let places = vec![
        (missing.clone(), label("your user daemon")),
        (stale.clone(), label("GEVO_SOCKET")),
        (live.clone(), label("the system daemon")),
    ];
    let request = Request::new(Command::Status);
    let (i, got) = call_first(&places, &request, DEFAULT_TIMEOUT).unwrap();
    assert_eq!((i, got), (2, response));
    // Its daemon is gone now; the socket file stays behind.
    server.join().unwrap();

    let err = call_first(&places, &request, DEFAULT_TIMEOUT).unwrap_err();
    assert!(err.is_unreachable() && err.is_connect_failure(), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!(
            "cannot reach gevod at any of 3 places: {} (your user daemon): no socket there; \
             {} (GEVO_SOCKET): connection refused (a stale socket?); \
             {} (the system daemon): connection refused (a stale socket?)",
            missing.display(),
            stale.display(),
            live.display()
        )
    );
    assert!(err.reason().starts_with("nothing answered at "), "{err}");

    // One named place: its name, then why.
    let err = call_first(&places[1..2], &request, DEFAULT_TIMEOUT).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "cannot reach gevod at {} (GEVO_SOCKET): connection refused (a stale socket?)",
            stale.display()
        )
    );
    assert_eq!(err.reason(), "connection refused (a stale socket?)");
    // One place without a name (--socket) fails exactly as `call`.
    let err = call_first(&[(missing.clone(), None)], &request, DEFAULT_TIMEOUT).unwrap_err();
    assert!(matches!(err, CallError::Unreachable { .. }), "{err:?}");
}

#[test]
fn a_path_that_is_not_a_socket_is_named_with_what_it_is() {
    let fifo = socket_path("not-a-socket");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let missing = socket_path("not-a-socket-missing");
    let label = |l: &str| Some(l.to_string());
    let request = Request::new(Command::Status);
    let cases = [
        (
            vec![(fifo.clone(), None)],
            format!("{} is a FIFO, not a socket", fifo.display()),
            true,
        ),
        (
            vec![(fifo.clone(), label("GEVO_SOCKET"))],
            format!("{} (GEVO_SOCKET) is a FIFO, not a socket", fifo.display()),
            true,
        ),
        (
            vec![
                (fifo.clone(), label("your user daemon")),
                (missing.clone(), label("the system daemon")),
            ],
            format!(
                "cannot reach gevod at any of 2 places: {} (your user daemon) is a FIFO, \
                 not a socket; {} (the system daemon): no socket there",
                fifo.display(),
                missing.display()
            ),
            false,
        ),
    ];
    for (places, expect, not_a_socket) in cases {
        let err = call_first(&places, &request, DEFAULT_TIMEOUT).unwrap_err();
        assert_eq!(err.to_string(), expect);
        assert!(err.is_unreachable(), "{err}");
        assert_eq!(err.is_not_a_socket(), not_a_socket, "{err}");
    }
}
