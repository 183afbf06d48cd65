//! One request, one response over the daemon's Unix socket.
//!
//! Framing (see [`crate::proto`]): the client writes one JSON line and shuts
//! down its write half; the daemon answers with one JSON line and closes.
//! The whole exchange runs against one deadline, so a daemon that accepts
//! and then stalls cannot hold a build script longer than the timeout.

use crate::proto::{Request, Response, MAX_MESSAGE_BYTES, PROTOCOL_VERSION};
use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Long enough for a `best` answer carrying megabytes of PTX; the daemon
/// answers from memory, so a healthy one replies in milliseconds.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// How many characters of an unparsable response an error quotes.
const PREFIX_CHARS: usize = 80;

/// What went wrong with a call. The first three mean no usable daemon
/// answered ([`CallError::is_unreachable`]); their messages all read
/// "cannot reach gevod at <socket>: <reason>", except for a path that is
/// not a socket: "<socket> is a FIFO, not a socket".
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// Nothing answered: no socket, a stale one, no permission, or a file
    /// of another kind at the path.
    #[error("{}", unreachable_at(&socket.display().to_string(), socket, source))]
    Unreachable {
        socket: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The connection broke after it was made (the daemon died mid-answer).
    #[error("cannot reach gevod at {}: {}", socket.display(), self.reason())]
    Io {
        socket: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot reach gevod at {}: {}", socket.display(), self.reason())]
    Timeout { socket: PathBuf, after: Duration },
    #[error("gevod at {}: its answer is longer than {limit} bytes", socket.display())]
    TooLong { socket: PathBuf, limit: usize },
    #[error("malformed answer from gevod ({source}), starting: {prefix:?}")]
    Malformed {
        prefix: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("protocol version mismatch: this client speaks {ours}, gevod {theirs} (upgrade the older one)")]
    Version { ours: u32, theirs: u32 },
    /// Nothing accepted a connection at any of the places searched (or at
    /// the one named by `GEVO_SOCKET` or a config): each with why.
    #[error("{}", nowhere(tried))]
    Nowhere { tried: Vec<Tried> },
}

/// A socket that did not accept a connection, and why.
#[derive(Debug)]
pub struct Tried {
    pub socket: PathBuf,
    /// What the place is ("your user daemon", "GEVO_SOCKET", ...).
    pub label: Option<String>,
    pub source: io::Error,
}

impl Tried {
    fn named(&self) -> String {
        match &self.label {
            Some(label) => format!("{} ({label})", self.socket.display()),
            None => self.socket.display().to_string(),
        }
    }
}

fn nowhere(tried: &[Tried]) -> String {
    match tried {
        [one] => unreachable_at(&one.named(), &one.socket, &one.source),
        _ => format!(
            "cannot reach gevod at any of {} places: {}",
            tried.len(),
            each_why(tried)
        ),
    }
}

/// Each place with why it did not answer, `; `-separated.
fn each_why(tried: &[Tried]) -> String {
    let each: Vec<String> = tried
        .iter()
        .map(|t| match not_a_socket(&t.source) {
            Some(kind) => format!("{} is {kind}, not a socket", t.named()),
            None => format!("{}: {}", t.named(), describe_connect(&t.socket, &t.source)),
        })
        .collect();
    each.join("; ")
}

/// "cannot reach gevod at PLACE: why", or "PLACE is a FIFO, not a socket"
/// (a mistyped path, not a daemon that is down).
fn unreachable_at(named: &str, socket: &Path, source: &io::Error) -> String {
    match not_a_socket(source) {
        Some(kind) => format!("{named} is {kind}, not a socket"),
        None => format!(
            "cannot reach gevod at {named}: {}",
            describe_connect(socket, source)
        ),
    }
}

/// What [`connect`] found at a path that is there but is not a socket.
#[derive(Debug)]
struct NotASocket(&'static str);

impl std::fmt::Display for NotASocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}, not a socket", self.0)
    }
}

impl std::error::Error for NotASocket {}

/// The kind of file ("a FIFO") when `e` says the path is not a socket.
fn not_a_socket(e: &io::Error) -> Option<&'static str> {
    e.get_ref()?.downcast_ref::<NotASocket>().map(|n| n.0)
}

impl CallError {
    /// True when no usable daemon answered at all, as opposed to a daemon
    /// that answered something this client cannot use. `best` falls back
    /// on the exported variant in the first case.
    pub fn is_unreachable(&self) -> bool {
        matches!(
            self,
            CallError::Unreachable { .. }
                | CallError::Io { .. }
                | CallError::Timeout { .. }
                | CallError::Nowhere { .. }
        )
    }

    /// True when connecting failed (nothing listens), as opposed to a
    /// daemon that accepted and then did not answer.
    pub fn is_connect_failure(&self) -> bool {
        matches!(
            self,
            CallError::Unreachable { .. } | CallError::Nowhere { .. }
        )
    }

    /// True when a place refused this user (EACCES): the daemon may well be
    /// running there, so "is it running?" is the wrong question too.
    pub fn is_permission_denied(&self) -> bool {
        let denied = |e: &io::Error| e.kind() == io::ErrorKind::PermissionDenied;
        match self {
            CallError::Unreachable { source, .. } => denied(source),
            CallError::Nowhere { tried } => tried.iter().any(|t| denied(&t.source)),
            _ => false,
        }
    }

    /// True when every place tried is a file of another kind than a socket
    /// (so "is the daemon running?" is the wrong question).
    pub fn is_not_a_socket(&self) -> bool {
        match self {
            CallError::Unreachable { source, .. } => not_a_socket(source).is_some(),
            CallError::Nowhere { tried } => tried.iter().all(|t| not_a_socket(&t.source).is_some()),
            _ => false,
        }
    }

    /// Why the call failed, without the socket's name, except where the
    /// reason is the path itself ("PATH is a FIFO, not a socket").
    pub fn reason(&self) -> String {
        match self {
            CallError::Unreachable { socket, source } if not_a_socket(source).is_some() => {
                unreachable_at(&socket.display().to_string(), socket, source)
            }
            CallError::Unreachable { socket, source } => describe_connect(socket, source),
            CallError::Io { source, .. } => describe_io(source),
            CallError::Timeout { after, .. } => {
                format!("no answer within {} s", after.as_secs_f64())
            }
            CallError::Nowhere { tried } => match &tried[..] {
                [one] if not_a_socket(&one.source).is_some() => {
                    unreachable_at(&one.named(), &one.socket, &one.source)
                }
                [one] => describe_connect(&one.socket, &one.source),
                _ => format!("nothing answered at {}", each_why(tried)),
            },
            other => other.to_string(),
        }
    }
}

/// Sends `request` to the daemon at `socket` and returns its response.
///
/// The response's protocol version is checked before its body is parsed,
/// so a daemon of another version is reported as such even when its body
/// has a shape this client does not know.
pub fn call(socket: &Path, request: &Request, timeout: Duration) -> Result<Response, CallError> {
    let deadline = Instant::now() + timeout;
    let stream = connect(socket, timeout).map_err(|source| {
        if is_timeout(&source) {
            CallError::Timeout {
                socket: socket.to_path_buf(),
                after: timeout,
            }
        } else {
            CallError::Unreachable {
                socket: socket.to_path_buf(),
                source,
            }
        }
    })?;
    exchange(&stream, socket, request, timeout, deadline)
}

/// Sends `request` to the first of `places` (a socket and how to name it)
/// that accepts a connection, and returns its index and response. One place
/// without a name fails as [`call`] does; otherwise, when none accepts,
/// [`CallError::Nowhere`] names each with why. Once a daemon has accepted,
/// its failures are its own: the next place is not tried, since the daemon
/// may have acted on the request.
pub fn call_first(
    places: &[(PathBuf, Option<String>)],
    request: &Request,
    timeout: Duration,
) -> Result<(usize, Response), CallError> {
    if let [(socket, None)] = places {
        return call(socket, request, timeout).map(|r| (0, r));
    }
    let deadline = Instant::now() + timeout;
    let mut tried = Vec::new();
    for (i, (socket, label)) in places.iter().enumerate() {
        let left = remaining(deadline).map_err(|_| CallError::Timeout {
            socket: socket.clone(),
            after: timeout,
        })?;
        match connect(socket, left) {
            Ok(stream) => {
                return exchange(&stream, socket, request, timeout, deadline).map(|r| (i, r))
            }
            Err(source) if is_timeout(&source) => {
                return Err(CallError::Timeout {
                    socket: socket.clone(),
                    after: timeout,
                })
            }
            Err(source) => tried.push(Tried {
                socket: socket.clone(),
                label: label.clone(),
                source,
            }),
        }
    }
    Err(CallError::Nowhere { tried })
}

/// The exchange over a connected stream: one request line out, one answer
/// line back, all before `deadline`.
fn exchange(
    stream: &UnixStream,
    socket: &Path,
    request: &Request,
    timeout: Duration,
    deadline: Instant,
) -> Result<Response, CallError> {
    let fail = |source: io::Error| {
        if is_timeout(&source) {
            CallError::Timeout {
                socket: socket.to_path_buf(),
                after: timeout,
            }
        } else {
            CallError::Io {
                socket: socket.to_path_buf(),
                source,
            }
        }
    };

    let mut line = serde_json::to_vec(request).expect("requests serialize");
    line.push(b'\n');
    send(stream, &line, deadline).map_err(fail)?;

    let answer = receive(stream, deadline).map_err(fail)?;
    let Some(answer) = answer else {
        return Err(CallError::TooLong {
            socket: socket.to_path_buf(),
            limit: MAX_MESSAGE_BYTES,
        });
    };
    parse(&answer)
}

/// `UnixStream::connect` with a timeout. A daemon that stopped accepting
/// leaves connections in its listen queue; once that is full, a plain
/// connect blocks for good and would hang every build that asks. Linux
/// bounds a Unix-socket connect by the socket's send timeout, so this sets
/// one before connecting.
fn connect(socket: &Path, timeout: Duration) -> io::Result<UnixStream> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::FileTypeExt;

    // Connecting to a FIFO or a regular file is refused like a stale
    // socket; saying what is there points at the mistyped path instead.
    if let Ok(meta) = std::fs::metadata(socket) {
        if !meta.file_type().is_socket() {
            return Err(io::Error::other(NotASocket(crate::files::kind_name(
                meta.file_type(),
            ))));
        }
    }

    let path = socket.as_os_str().as_bytes();
    // SAFETY: sockaddr_un is plain data; all zeroes is a valid value.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    // One byte stays zero: the path's terminator.
    if path.len() >= addr.sun_path.len() || path.contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a usable socket path (too long?)",
        ));
    }
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (dst, &src) in addr.sun_path.iter_mut().zip(path) {
        *dst = src as libc::c_char;
    }
    let len = std::mem::offset_of!(libc::sockaddr_un, sun_path) + path.len() + 1;

    // SAFETY: socket() has no preconditions; its result is checked.
    let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor that nothing else owns.
    let stream = UnixStream::from(unsafe { OwnedFd::from_raw_fd(fd) });
    stream.set_write_timeout(Some(timeout))?;
    loop {
        // SAFETY: addr is a valid sockaddr_un and len does not exceed its size.
        let rc = unsafe {
            libc::connect(
                stream.as_raw_fd(),
                (&raw const addr).cast::<libc::sockaddr>(),
                len as libc::socklen_t,
            )
        };
        if rc == 0 {
            return Ok(stream);
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

fn send(mut stream: &UnixStream, line: &[u8], deadline: Instant) -> io::Result<()> {
    stream.set_write_timeout(Some(remaining(deadline)?))?;
    stream.write_all(line)?;
    // The daemon may read to end of input; closing our half says "that's all".
    stream.shutdown(Shutdown::Write)
}

/// Reads one line (without its newline), or `None` when it exceeds
/// [`MAX_MESSAGE_BYTES`]. A last line without a newline is accepted; an
/// empty answer is an error.
fn receive(mut stream: &UnixStream, deadline: Instant) -> io::Result<Option<Vec<u8>>> {
    let mut line = Vec::new();
    let mut chunk = vec![0u8; 64 << 10];
    loop {
        // Each read gets what is left of the one deadline, not a fresh timeout.
        stream.set_read_timeout(Some(remaining(deadline)?))?;
        let n = match stream.read(&mut chunk) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if n == 0 {
            if line.is_empty() {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the daemon closed the connection without answering",
                ));
            }
            break;
        }
        if let Some(end) = chunk[..n].iter().position(|&b| b == b'\n') {
            line.extend_from_slice(&chunk[..end]);
            break;
        }
        line.extend_from_slice(&chunk[..n]);
        if line.len() > MAX_MESSAGE_BYTES {
            return Ok(None);
        }
    }
    if line.len() > MAX_MESSAGE_BYTES {
        return Ok(None);
    }
    Ok(Some(line))
}

fn parse(line: &[u8]) -> Result<Response, CallError> {
    let malformed = |source| CallError::Malformed {
        prefix: String::from_utf8_lossy(line)
            .chars()
            .take(PREFIX_CHARS)
            .collect(),
        source,
    };
    #[derive(serde::Deserialize)]
    struct Versioned {
        version: u32,
    }
    let Versioned { version } = serde_json::from_slice(line).map_err(malformed)?;
    if version != PROTOCOL_VERSION {
        return Err(CallError::Version {
            ours: PROTOCOL_VERSION,
            theirs: version,
        });
    }
    serde_json::from_slice(line).map_err(malformed)
}

fn remaining(deadline: Instant) -> io::Result<Duration> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        // set_*_timeout refuses zero; past the deadline is a timeout anyway.
        return Err(io::ErrorKind::TimedOut.into());
    }
    Ok(left)
}

fn is_timeout(e: &io::Error) -> bool {
    // A socket timeout surfaces as WouldBlock on Linux, TimedOut elsewhere.
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// [`describe_io`] for a connect to `socket`: a refusal (EACCES) says who
/// may connect and what would let this user.
fn describe_connect(socket: &Path, e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::PermissionDenied => {
            format!("permission denied: {}", crate::denied::explain(socket))
        }
        _ => describe_io(e),
    }
}

/// The short reason, without the "(os error N)" that adds nothing for a user.
fn describe_io(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::NotFound => "no socket there".into(),
        io::ErrorKind::ConnectionRefused => "connection refused (a stale socket?)".into(),
        io::ErrorKind::PermissionDenied => "permission denied".into(),
        io::ErrorKind::BrokenPipe => "the daemon closed the connection".into(),
        io::ErrorKind::ConnectionReset => "the daemon reset the connection".into(),
        _ => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{Command, Reply};
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixListener;

    fn socket_path(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("gevo-transport-{name}-{}", std::process::id()));
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
}
