//! The Unix-socket API: binding the socket (mode 0660, refusing to steal
//! one a live daemon listens on), checking each peer's uid and gids, and
//! the framing of `gevo_client::proto` (one request line, one response
//! line), within the bounds of [`limits`]. What a request does is the
//! [`Handler`]'s business.

pub mod limits;

pub use limits::{
    ANSWER_DEADLINE, MAX_CONNECTIONS, MAX_CONNECTIONS_PER_UID, MAX_REQUEST_BYTES, REQUEST_DEADLINE,
};

use gevo_client::proto::{ErrorCode, Request, Response, MAX_MESSAGE_BYTES, PROTOCOL_VERSION};
use gevo_client::transport::TURNED_AWAY;
use limits::{Full, RequestError};
use serde::Deserialize;
use std::io;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{}: another gevod is already listening there", path.display())]
    InUse { path: PathBuf },
    /// Something other than a socket is at the socket's path: it is left
    /// alone.
    #[error(
        "{}: {kind}, not a socket; gevod replaces only a stale socket, so it leaves this alone (move it away or choose another socket path)",
        path.display()
    )]
    NotASocket { path: PathBuf, kind: &'static str },
    #[error("{}: {what}: {source}", path.display())]
    Io {
        path: PathBuf,
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
}

/// Who is on the other end of a connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    pub pid: u32,
    pub uid: u32,
    /// Primary and supplementary groups.
    pub gids: Vec<u32>,
}

/// Who may talk to the daemon: root, its own user, members of its own
/// group, and the configured extra users and groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Access {
    pub uid: u32,
    pub gid: u32,
    pub extra_uids: Vec<u32>,
    pub extra_gids: Vec<u32>,
}

impl Access {
    pub fn own(extra_uids: Vec<u32>, extra_gids: Vec<u32>) -> Access {
        // SAFETY: geteuid/getegid have no preconditions and cannot fail.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        Access {
            uid,
            gid,
            extra_uids,
            extra_gids,
        }
    }

    pub fn allows(&self, peer: &Peer) -> bool {
        peer.uid == 0
            || peer.uid == self.uid
            || self.extra_uids.contains(&peer.uid)
            || peer
                .gids
                .iter()
                .any(|g| *g == self.gid || self.extra_gids.contains(g))
    }
}

pub trait Handler: Send + Sync + 'static {
    fn handle(&self, request: Request, peer: &Peer) -> Response;
    /// The access rule in force (it may change on reload).
    fn access(&self) -> Access;
}

/// Binds `path`: creates its directory, removes a stale socket file (one no
/// process accepts on) and makes the socket 0660.
///
/// Only a socket is ever removed, and only when connecting to it is refused
/// (nobody listens): a live one is [`ApiError::InUse`]; a regular file, a
/// directory, a symlink (even to a socket), a FIFO or a device at `path` is
/// [`ApiError::NotASocket`] naming what it is, and nothing is removed.
pub fn bind(path: &Path) -> Result<UnixListener, ApiError> {
    let io = |what| {
        move |source| ApiError::Io {
            path: path.to_path_buf(),
            what,
            source,
        }
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        if !dir.exists() {
            std::fs::create_dir_all(dir).map_err(io("cannot create the socket's directory"))?;
            // Only the owner's group needs to reach the socket through it.
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o750))
                .map_err(io("cannot set the socket directory's mode"))?;
        }
    }
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(io("cannot look at the socket's path")(e)),
        Ok(meta) if !meta.file_type().is_socket() => {
            return Err(ApiError::NotASocket {
                path: path.to_path_buf(),
                kind: gevo_client::files::kind_name(meta.file_type()),
            })
        }
        Ok(_) => match UnixStream::connect(path) {
            Ok(_) => {
                return Err(ApiError::InUse {
                    path: path.to_path_buf(),
                })
            }
            // Nobody listens: a daemon that ended without removing it.
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                std::fs::remove_file(path).map_err(io("cannot remove the stale socket"))?;
            }
            // A full backlog (a live daemon), no permission: not known
            // to be stale, so not removed.
            Err(e) => {
                return Err(io(
                    "a socket is there and connecting to it failed; not removed",
                )(e))
            }
        },
    }
    let listener = UnixListener::bind(path).map_err(io("cannot listen"))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660))
        .map_err(io("cannot set the socket's mode"))?;
    Ok(listener)
}

/// Accepts connections until the listener fails: one thread per connection,
/// so a slow client never holds up the others, up to [`MAX_CONNECTIONS`] in
/// all and [`MAX_CONNECTIONS_PER_UID`] per peer uid (root and the daemon's
/// own user too), so that one user's idle connections leave the others
/// room; the ones beyond get an answer ([`turned_away`]) and are closed.
pub fn serve(listener: UnixListener, handler: Arc<dyn Handler>) {
    let all_taken: Arc<[u8]> = line_of(&turned_away(Full::All, 0)).into();
    let turn_away = match limits::TurnAway::start() {
        Ok(t) => t,
        Err(e) => {
            tracing::error!(error = %e, "cannot start the API's thread for turned-away clients");
            return;
        }
    };
    let connections = limits::Connections::new(MAX_CONNECTIONS, MAX_CONNECTIONS_PER_UID);
    // When each kind of turning away was last logged.
    let (mut warned_all, mut warned_uid): (Option<Instant>, Option<Instant>) = (None, None);
    for stream in listener.incoming() {
        let stream = match stream {
            Ok(stream) => stream,
            Err(e) => {
                tracing::warn!(error = %e, "accepting a client");
                // Out of descriptors, say: retrying at once would spin.
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        let accepted = Instant::now();
        // The uid only (no /proc read here): the accept loop stays quick.
        let cred = match peer_cred(&stream) {
            Ok(cred) => cred,
            Err(e) => {
                tracing::debug!(error = %e, "a client's credentials");
                continue;
            }
        };
        let permit = match connections.take(cred.uid) {
            Ok(permit) => permit,
            Err(full) => {
                // Once a minute at most: a flood must not fill the log either.
                let (warned, answer) = match full {
                    Full::All => (&mut warned_all, all_taken.clone()),
                    Full::Uid => (
                        &mut warned_uid,
                        line_of(&turned_away(full, cred.uid)).into(),
                    ),
                };
                if warned.is_none_or(|w| w.elapsed() > Duration::from_secs(60)) {
                    match full {
                        Full::All => tracing::warn!(
                            max = MAX_CONNECTIONS,
                            "turning clients away: too many connections"
                        ),
                        Full::Uid => tracing::warn!(
                            uid = cred.uid,
                            max = MAX_CONNECTIONS_PER_UID,
                            "turning clients away: too many connections from one uid"
                        ),
                    }
                    *warned = Some(accepted);
                }
                turn_away.hand_over(stream, answer);
                continue;
            }
        };
        let handler = handler.clone();
        let spawned = std::thread::Builder::new()
            .name("gevod-api".into())
            .spawn(move || {
                let _permit = permit;
                let peer = with_groups(cred);
                if let Err(e) = connection(stream, &peer, accepted, handler.as_ref()) {
                    tracing::debug!(error = %e, "client connection");
                }
            });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "cannot start a thread for a client");
        }
    }
}

/// The answer to a connection beyond a cap (code `internal`). It starts
/// with [`TURNED_AWAY`], by which the client tells "busy, try again" (it
/// falls back on the export) from the daemon's other errors.
fn turned_away(full: Full, uid: u32) -> Response {
    let message = match full {
        Full::All => format!("{TURNED_AWAY} ({MAX_CONNECTIONS}); try again"),
        Full::Uid => format!(
            "{TURNED_AWAY} from uid {uid} (at most {MAX_CONNECTIONS_PER_UID} at once per uid); try again"
        ),
    };
    Response::error(ErrorCode::Internal, message)
}

fn connection(
    stream: UnixStream,
    peer: &Peer,
    accepted: Instant,
    handler: &dyn Handler,
) -> io::Result<()> {
    // The request is read even from a refused peer: closing before the
    // client finished writing would cost it our answer (its write fails).
    let deadline = accepted + REQUEST_DEADLINE;
    let line = limits::read_line(&stream, MAX_REQUEST_BYTES, deadline, REQUEST_DEADLINE);
    let too_long = matches!(line, Err(RequestError::TooLong { .. }));
    let response = if !handler.access().allows(peer) {
        tracing::warn!(uid = peer.uid, pid = peer.pid, "refused a client");
        Response::error(
            ErrorCode::Refused,
            format!(
                "uid {} is not allowed to use this gevod (allowed: root, the daemon's user and group, [api] allowed_uids/allowed_gids)",
                peer.uid
            ),
        )
    } else {
        match line {
            Ok(line) => match parse(line) {
                Ok(request) => handler.handle(request, peer),
                Err((code, message)) => Response::error(code, message),
            },
            Err(RequestError::Io(e)) => return Err(e),
            Err(e) => Response::error(ErrorCode::BadRequest, e.to_string()),
        }
    };
    limits::write_all_by(
        &stream,
        &line_of(&response),
        Instant::now() + ANSWER_DEADLINE,
    )?;
    if too_long {
        limits::discard_line(&stream, MAX_MESSAGE_BYTES, deadline);
    }
    Ok(())
}

/// `response` as its line on the wire.
fn line_of(response: &Response) -> Vec<u8> {
    let mut line = serde_json::to_vec(response).expect("responses serialize");
    line.push(b'\n');
    line
}

/// The request in `line`, or the error saying what is wrong with it. What
/// the client sent is quoted only as a short prefix.
fn parse(line: Vec<u8>) -> Result<Request, (ErrorCode, String)> {
    use serde_json::Value;
    let bad = |message: String| (ErrorCode::BadRequest, message);
    let line = String::from_utf8(line).map_err(|e| {
        bad(format!(
            "the request is not UTF-8 text (byte {} is not); send one JSON line",
            e.utf8_error().valid_up_to()
        ))
    })?;
    let value: Value =
        serde_json::from_str(&line).map_err(|e| bad(format!("not a JSON request: {e}")))?;
    let Some(object) = value.as_object() else {
        return Err(bad(format!(
            "the request is {}, not a JSON object",
            json_kind(&value)
        )));
    };
    let mismatch = |message: String| (ErrorCode::VersionMismatch, message);
    match object.get("version") {
        Some(v) if v.as_u64() == Some(u64::from(PROTOCOL_VERSION)) => {}
        Some(Value::Number(n)) => {
            return Err(mismatch(format!(
                "request speaks protocol {}, this gevod speaks {PROTOCOL_VERSION}",
                limits::quote(&n.to_string())
            )))
        }
        Some(other) => {
            let sent = match other {
                Value::String(s) => format!("{:?} (a string)", limits::quote(s)),
                Value::Bool(b) => format!("{b} (a boolean)"),
                other => json_kind(other).to_string(),
            };
            return Err(mismatch(format!(
                "request's \"version\" is {sent}; this gevod speaks protocol {PROTOCOL_VERSION} (\"version\": {PROTOCOL_VERSION}, a number)"
            )));
        }
        None => {
            return Err(mismatch(format!(
                "request has no \"version\"; this gevod speaks protocol {PROTOCOL_VERSION} (\"version\": {PROTOCOL_VERSION})"
            )))
        }
    }
    Request::deserialize(&value).map_err(|_| {
        // serde quotes what it could not use: say it of the value cut short.
        let message = Request::deserialize(&limits::quoted_value(&value))
            .err()
            .map_or_else(
                || "not a request this gevod understands".into(),
                |e| e.to_string(),
            );
        bad(message)
    })
}

/// "a string", "an array", ...: what a JSON value is, for messages.
fn json_kind(value: &serde_json::Value) -> &'static str {
    use serde_json::Value;
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The peer's credentials (SO_PEERCRED: as the kernel took them when it
/// connected).
fn peer_cred(stream: &UnixStream) -> std::io::Result<libc::ucred> {
    use std::os::fd::AsRawFd;
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are valid for writes of the sizes passed.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(cred)
}

/// The peer of `cred`, with its supplementary groups from /proc (the kernel
/// reports only the primary group).
fn with_groups(cred: libc::ucred) -> Peer {
    let mut gids = vec![cred.gid];
    if let Ok(status) = std::fs::read_to_string(format!("/proc/{}/status", cred.pid)) {
        if let Some(line) = status.lines().find(|l| l.starts_with("Groups:")) {
            gids.extend(
                line[7..]
                    .split_whitespace()
                    .filter_map(|g| g.parse::<u32>().ok()),
            );
        }
    }
    Peer {
        pid: cred.pid as u32,
        uid: cred.uid,
        gids,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_by_uid_and_group() {
        let access = Access {
            uid: 1000,
            gid: 1000,
            extra_uids: vec![1005],
            extra_gids: vec![2000],
        };
        let peer = |uid, gids: &[u32]| Peer {
            pid: 1,
            uid,
            gids: gids.to_vec(),
        };
        for (p, allowed) in [
            (peer(0, &[0]), true),
            (peer(1000, &[1000]), true),
            (peer(1005, &[1005]), true),
            (peer(1001, &[1001, 1000]), true),
            (peer(1002, &[1002, 2000]), true),
            (peer(1003, &[1003, 27]), false),
        ] {
            assert_eq!(access.allows(&p), allowed, "{p:?}");
        }
    }

    #[test]
    fn peer_credentials_are_our_own() {
        let (a, _b) = UnixStream::pair().unwrap();
        let peer = with_groups(peer_cred(&a).unwrap());
        assert_eq!(peer.pid, std::process::id());
        assert_eq!(peer.uid, unsafe { libc::geteuid() });
        assert!(peer.gids.contains(&unsafe { libc::getegid() }));
    }

    /// Both turned-away answers are what the client takes for "busy" (it
    /// then falls back on the export), and name the limit.
    #[test]
    fn turned_away_answers_are_told_apart_by_the_client() {
        for (full, limit) in [
            (Full::All, format!("({MAX_CONNECTIONS})")),
            (
                Full::Uid,
                format!("from uid 1000 (at most {MAX_CONNECTIONS_PER_UID} at once per uid)"),
            ),
        ] {
            let response = turned_away(full, 1000);
            let message = gevo_client::transport::turned_away(&response)
                .unwrap_or_else(|| panic!("{response:?} is not taken for busy"));
            assert!(message.contains(&limit), "{message}");
        }
        let other = Response::error(ErrorCode::Internal, "j1: the store failed");
        assert!(gevo_client::transport::turned_away(&other).is_none());
    }

    /// `parse`'s answer to `line`: `Ok` with the command, or the error's
    /// code and message.
    fn parsed(line: &[u8]) -> Result<String, (ErrorCode, String)> {
        parse(line.to_vec()).map(|request| format!("{:?}", request.command))
    }

    #[test]
    fn bad_requests_are_answered_with_what_was_wrong() {
        use ErrorCode::{BadRequest, VersionMismatch};
        let long = "a".repeat(100_000);
        let cut = format!("{}...", "a".repeat(limits::QUOTE_CHARS));
        let unknown = format!(r#"{{"version":1,"command":"{long}"}}"#);
        let version_string = format!(r#"{{"version":"{long}","command":"status"}}"#);
        let err = |code, message: &str| Err((code, message.to_string()));
        for (line, expected) in [
            (&br#"{"version":1,"command":"status"}"#[..], Ok("Status".to_string())),
            (
                br#"{"version":1,"command":"best","kernel":"k"}"#,
                Ok(r#"Best { kernel: "k", arch: None, spec: None, spec_hash: None }"#.into()),
            ),
            (
                br#"{"version":"1","command":"status"}"#,
                err(VersionMismatch, r#"request's "version" is "1" (a string); this gevod speaks protocol 1 ("version": 1, a number)"#),
            ),
            (
                br#"{"version":[1],"command":"status"}"#,
                err(VersionMismatch, r#"request's "version" is an array; this gevod speaks protocol 1 ("version": 1, a number)"#),
            ),
            (
                br#"{"version":true}"#,
                err(VersionMismatch, r#"request's "version" is true (a boolean); this gevod speaks protocol 1 ("version": 1, a number)"#),
            ),
            (
                br#"{"version":2,"command":"status"}"#,
                err(VersionMismatch, "request speaks protocol 2, this gevod speaks 1"),
            ),
            (
                br#"{"command":"status"}"#,
                err(VersionMismatch, r#"request has no "version"; this gevod speaks protocol 1 ("version": 1)"#),
            ),
            (b"[1,2]", err(BadRequest, "the request is an array, not a JSON object")),
            (
                b"{\"version\":1,\"command\":\"st\xffatus\"}",
                err(BadRequest, "the request is not UTF-8 text (byte 26 is not); send one JSON line"),
            ),
            (b"", err(BadRequest, "not a JSON request: EOF while parsing a value at line 1 column 0")),
            (
                unknown.as_bytes(),
                err(BadRequest, &format!("unknown variant `{cut}`, expected one of `status`, `jobs`, `best`, `pareto`, `explain`, `report`, `patch`, `watch`, `unwatch`, `pause`, `resume`, `shutdown`")),
            ),
            (
                version_string.as_bytes(),
                err(VersionMismatch, &format!(r#"request's "version" is "{cut}" (a string); this gevod speaks protocol 1 ("version": 1, a number)"#)),
            ),
        ] {
            assert_eq!(parsed(line), expected, "{}", String::from_utf8_lossy(line));
        }
    }

    #[test]
    fn a_live_socket_is_not_taken_over_and_a_stale_one_is() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run/gevod.sock");
        let listener = bind(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o660);
        assert!(matches!(bind(&path), Err(ApiError::InUse { .. })));
        drop(listener);
        bind(&path).unwrap();
    }

    /// Only a socket nobody answers on is removed: a regular file, a
    /// directory, a symlink (to a stale socket too) or a FIFO at the path
    /// is an error naming it and what it is, and stays as it was.
    #[test]
    fn what_is_not_a_socket_is_never_removed() {
        let dir = tempfile::tempdir().unwrap();
        let at = |name: &str| dir.path().join(name);
        std::fs::write(at("file"), "precious").unwrap();
        std::fs::create_dir(at("dir")).unwrap();
        std::fs::write(at("dir/inside"), "kept").unwrap();
        drop(UnixListener::bind(at("stale.sock")).unwrap());
        std::os::unix::fs::symlink(at("stale.sock"), at("link")).unwrap();
        std::os::unix::fs::symlink(at("nowhere"), at("dangling")).unwrap();
        let fifo = std::ffi::CString::new(at("fifo").to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        for (name, kind) in [
            ("file", "a regular file"),
            ("dir", "a directory"),
            ("link", "a symbolic link"),
            ("dangling", "a symbolic link"),
            ("fifo", "a FIFO"),
        ] {
            let path = at(name);
            let before = std::fs::symlink_metadata(&path).unwrap();
            let err = bind(&path).unwrap_err();
            assert!(matches!(err, ApiError::NotASocket { .. }), "{name}: {err}");
            let message = err.to_string();
            assert!(
                message.starts_with(&format!("{}: {kind}, not a socket", path.display())),
                "{name}: {message}"
            );
            let after = std::fs::symlink_metadata(&path).unwrap();
            assert_eq!(
                (before.file_type(), before.len()),
                (after.file_type(), after.len()),
                "{name}"
            );
        }
        assert_eq!(std::fs::read_to_string(at("file")).unwrap(), "precious");
        assert_eq!(std::fs::read_to_string(at("dir/inside")).unwrap(), "kept");
        // The stale socket behind the link is still there, and is taken
        // over when named itself.
        assert!(std::fs::symlink_metadata(at("stale.sock"))
            .unwrap()
            .file_type()
            .is_socket());
        drop(bind(&at("stale.sock")).unwrap());
    }
}
