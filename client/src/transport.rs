//! One request, one response over the daemon's Unix socket.
//!
//! Framing (see [`crate::proto`]): the client writes one JSON line and shuts
//! down its write half; the daemon answers with one JSON line and closes.
//! The whole exchange runs against one deadline, so a daemon that accepts
//! and then stalls cannot hold a build script longer than the timeout.

use crate::proto::{Body, ErrorCode, Request, Response, MAX_MESSAGE_BYTES, PROTOCOL_VERSION};
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

/// How the daemon's answer to a connection beyond its caps (connections in
/// all, or of one uid) begins; its code is `internal`. Such a daemon did
/// not read the request: [`CallError::Busy`].
pub const TURNED_AWAY: &str = "too many connections";

/// The message of `response` when it is the daemon turning the connection
/// away ([`TURNED_AWAY`]), not an answer to the request.
pub fn turned_away(response: &Response) -> Option<&str> {
    match &response.body {
        Body::Error(e) if e.code == ErrorCode::Internal && e.message.starts_with(TURNED_AWAY) => {
            Some(&e.message)
        }
        _ => None,
    }
}

/// What went wrong with a call. The first three and the last two mean no
/// usable daemon answered ([`CallError::is_unreachable`]); the first three's
/// messages read "cannot reach gevod at <socket>: <reason>", except for a
/// path that is not a socket: "<socket> is a FIFO, not a socket".
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
    /// The daemon turned the connection away without reading the request:
    /// it serves as many connections as it will (in all, or of this uid).
    /// Like a daemon that is down, for what falls back on the export.
    #[error("gevod at {} turned this client away: {message}", socket.display())]
    Busy { socket: PathBuf, message: String },
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
    /// True when no usable daemon answered at all (none listens, the
    /// connection broke or timed out before an answer, or the daemon turned
    /// it away as busy), as opposed to a daemon that answered something this
    /// client cannot use. `best` and `report` fall back on the export in the
    /// first case.
    pub fn is_unreachable(&self) -> bool {
        matches!(
            self,
            CallError::Unreachable { .. }
                | CallError::Io { .. }
                | CallError::Timeout { .. }
                | CallError::Nowhere { .. }
                | CallError::Busy { .. }
        )
    }

    /// True when the daemon turned the connection away: it runs, and
    /// serves as many connections as it will.
    pub fn is_busy(&self) -> bool {
        matches!(self, CallError::Busy { .. })
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
            CallError::Busy { message, .. } => message.clone(),
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
    let answer = match send(stream, &line, deadline) {
        Ok(()) => receive(stream, deadline).map_err(fail)?,
        Err(e) if is_timeout(&e) => return Err(fail(e)),
        // The daemon may have answered before closing (a turned-away
        // connection): that answer says more than the broken pipe.
        Err(e) => match receive(stream, deadline) {
            Ok(Some(answer)) if parse(&answer).is_ok() => Some(answer),
            _ => return Err(fail(e)),
        },
    };
    let Some(answer) = answer else {
        return Err(CallError::TooLong {
            socket: socket.to_path_buf(),
            limit: MAX_MESSAGE_BYTES,
        });
    };
    let response = parse(&answer)?;
    if let Some(message) = turned_away(&response) {
        return Err(CallError::Busy {
            socket: socket.to_path_buf(),
            message: message.to_string(),
        });
    }
    Ok(response)
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
mod tests;
