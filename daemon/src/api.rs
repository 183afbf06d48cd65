//! The Unix-socket API: binding the socket (mode 0660, refusing to steal
//! one a live daemon listens on), checking each peer's uid and gids, and
//! the framing of `gevo_client::proto` (one request line, one response
//! line). What a request does is the [`Handler`]'s business.

use gevo_client::proto::{ErrorCode, Request, Response, MAX_MESSAGE_BYTES, PROTOCOL_VERSION};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// A client is given this long to send its request.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{}: another gevod is already listening there", path.display())]
    InUse { path: PathBuf },
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
    if path.exists() {
        if UnixStream::connect(path).is_ok() {
            return Err(ApiError::InUse {
                path: path.to_path_buf(),
            });
        }
        std::fs::remove_file(path).map_err(io("cannot remove the stale socket"))?;
    }
    let listener = UnixListener::bind(path).map_err(io("cannot listen"))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660))
        .map_err(io("cannot set the socket's mode"))?;
    Ok(listener)
}

/// Accepts connections until the listener fails; one thread per connection,
/// so a slow client never holds up the others.
pub fn serve(listener: UnixListener, handler: Arc<dyn Handler>) {
    for stream in listener.incoming() {
        match stream {
            Ok(stream) => {
                let handler = handler.clone();
                std::thread::spawn(move || {
                    if let Err(e) = connection(stream, handler.as_ref()) {
                        tracing::debug!(error = %e, "client connection");
                    }
                });
            }
            Err(e) => tracing::warn!(error = %e, "accepting a client"),
        }
    }
}

fn connection(stream: UnixStream, handler: &dyn Handler) -> std::io::Result<()> {
    let peer = peer_of(&stream)?;
    // The request is read even from a refused peer: closing before the
    // client finished writing would cost it our answer (its write fails).
    stream.set_read_timeout(Some(READ_TIMEOUT))?;
    let mut line = String::new();
    BufReader::new(&stream)
        .take(MAX_MESSAGE_BYTES as u64)
        .read_line(&mut line)?;
    let response = if !handler.access().allows(&peer) {
        tracing::warn!(uid = peer.uid, pid = peer.pid, "refused a client");
        Response::error(
            ErrorCode::Refused,
            format!(
                "uid {} is not allowed to use this gevod (allowed: root, the daemon's user and group, [api] allowed_uids/allowed_gids)",
                peer.uid
            ),
        )
    } else {
        match serde_json::from_str::<serde_json::Value>(&line) {
            Err(e) => Response::error(ErrorCode::BadRequest, format!("not a JSON request: {e}")),
            Ok(value) => {
                let version = value.get("version").and_then(|v| v.as_u64());
                if version != Some(u64::from(PROTOCOL_VERSION)) {
                    Response::error(
                        ErrorCode::VersionMismatch,
                        format!(
                            "request speaks protocol {}, this gevod speaks {PROTOCOL_VERSION}",
                            version.map_or("(none)".to_string(), |v| v.to_string())
                        ),
                    )
                } else {
                    match serde_json::from_value::<Request>(value) {
                        Ok(request) => handler.handle(request, &peer),
                        Err(e) => Response::error(ErrorCode::BadRequest, e.to_string()),
                    }
                }
            }
        }
    };
    let mut out = serde_json::to_string(&response).expect("responses serialize");
    out.push('\n');
    (&stream).write_all(out.as_bytes())
}

/// The peer's credentials (SO_PEERCRED) and its supplementary groups from
/// /proc (the kernel reports only the primary group).
fn peer_of(stream: &UnixStream) -> std::io::Result<Peer> {
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
    Ok(Peer {
        pid: cred.pid as u32,
        uid: cred.uid,
        gids,
    })
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
        let peer = peer_of(&a).unwrap();
        assert_eq!(peer.pid, std::process::id());
        assert_eq!(peer.uid, unsafe { libc::geteuid() });
        assert!(peer.gids.contains(&unsafe { libc::getegid() }));
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
}
