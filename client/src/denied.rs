//! Why connecting to the daemon's socket failed with EACCES, and what would
//! let this user in. The socket is mode 0660 in a 0750 directory
//! (docs/daemon.md, "API"): only the daemon's user and the members of the
//! socket's group get through the file system, before the daemon's own
//! check (`[api] allowed_uids`/`allowed_gids`) sees them. So the useful
//! advice is the group to join, read from the socket or the directory that
//! stopped the user.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Who owns a file and its permission bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner {
    pub uid: u32,
    pub gid: u32,
    pub mode: u32,
}

impl Owner {
    fn of(path: &Path) -> Option<Owner> {
        let meta = std::fs::metadata(path).ok()?;
        Some(Owner {
            uid: meta.uid(),
            gid: meta.gid(),
            mode: meta.mode() & 0o7777,
        })
    }
}

/// What a connect's EACCES at `socket` means: who may connect, and what
/// would let this user do so. Its words follow "permission denied".
pub fn explain(socket: &Path) -> String {
    let file = Owner::of(socket);
    // The socket's own metadata is out of reach when a directory above
    // stops the user: name the nearest one that is in reach.
    let dir = match file {
        Some(_) => None,
        None => socket
            .ancestors()
            .skip(1)
            .find_map(|d| Owner::of(d).map(|o| (d.to_path_buf(), o))),
    };
    let dir = dir.as_ref().map(|(d, o)| (d.as_path(), *o));
    explain_with(file, dir, &user_name, &group_name)
}

/// [`explain`] over what was found: the socket's owner (when visible), else
/// the nearest visible directory's, with names looked up by `user` and
/// `group`.
pub fn explain_with(
    socket: Option<Owner>,
    dir: Option<(&Path, Owner)>,
    user: &dyn Fn(u32) -> String,
    group: &dyn Fn(u32) -> String,
) -> String {
    let (what, owner) = match (socket, dir) {
        (Some(o), _) => ("only".to_string(), o),
        (None, Some((d, o))) => (format!("its directory {} admits only", d.display()), o),
        (None, None) => {
            return "you may not use this socket (it admits the daemon's user and the members of its group)".into()
        }
    };
    let (u, g) = (user(owner.uid), group(owner.gid));
    format!(
        "{what} user {u} and group {g} (mode {:04o}): to use it, join group {g} (then log in again)",
        owner.mode
    )
}

/// The user's name, else `uid N`.
fn user_name(uid: u32) -> String {
    // SAFETY: passwd is a plain C struct; all zeroes is a valid value.
    let entry: libc::passwd = unsafe { std::mem::zeroed() };
    lookup(
        entry,
        |p| p.pw_name,
        |entry, buf, found| {
            // SAFETY: getpwuid_r writes only into `entry`, `buf` (of the
            // length given) and `found`, which all outlive the call.
            unsafe { libc::getpwuid_r(uid, entry, buf.as_mut_ptr(), buf.len(), found) }
        },
    )
    .unwrap_or_else(|| format!("uid {uid}"))
}

/// The group's name, else `gid N`.
fn group_name(gid: u32) -> String {
    // SAFETY: group is a plain C struct; all zeroes is a valid value.
    let entry: libc::group = unsafe { std::mem::zeroed() };
    lookup(
        entry,
        |g| g.gr_name,
        |entry, buf, found| {
            // SAFETY: as for getpwuid_r in `user_name`.
            unsafe { libc::getgrgid_r(gid, entry, buf.as_mut_ptr(), buf.len(), found) }
        },
    )
    .unwrap_or_else(|| format!("gid {gid}"))
}

/// A `get*id_r` lookup, with a buffer grown while it is too small: the
/// entry's name (`name` of the entry), if there is an entry.
fn lookup<T: Copy>(
    mut entry: T,
    name: impl Fn(&T) -> *mut libc::c_char,
    call: impl Fn(&mut T, &mut [libc::c_char], &mut *mut T) -> libc::c_int,
) -> Option<String> {
    let mut buf: Vec<libc::c_char> = vec![0; 1024];
    loop {
        let mut found: *mut T = std::ptr::null_mut();
        let rc = call(&mut entry, &mut buf, &mut found);
        if rc == libc::ERANGE && buf.len() < 1 << 20 {
            buf.resize(buf.len() * 2, 0);
            continue;
        }
        let name = name(&entry);
        if rc != 0 || found.is_null() || name.is_null() {
            return None;
        }
        // SAFETY: the entry's name points into `buf`, NUL-terminated.
        let name = unsafe { std::ffi::CStr::from_ptr(name) };
        return Some(name.to_string_lossy().into_owned());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_group_that_would_admit_the_user_is_named() {
        let user = |uid: u32| {
            if uid == 990 {
                "gevod".into()
            } else {
                format!("uid {uid}")
            }
        };
        let group = |gid: u32| {
            if gid == 991 {
                "gevod".into()
            } else {
                format!("gid {gid}")
            }
        };
        let socket = Owner {
            uid: 990,
            gid: 991,
            mode: 0o660,
        };
        let dir = Owner {
            uid: 0,
            gid: 991,
            mode: 0o750,
        };
        for (socket, dir, expected) in [
            (
                Some(socket),
                None,
                "only user gevod and group gevod (mode 0660): to use it, join group gevod (then log in again)",
            ),
            (
                None,
                Some((Path::new("/run/gevod"), dir)),
                "its directory /run/gevod admits only user uid 0 and group gevod (mode 0750): to use it, join group gevod (then log in again)",
            ),
            (
                None,
                None,
                "you may not use this socket (it admits the daemon's user and the members of its group)",
            ),
        ] {
            assert_eq!(explain_with(socket, dir, &user, &group), expected);
        }
    }

    /// A refused connect, as the transport reports it: the group to join,
    /// and not a daemon that is down.
    #[test]
    fn a_refused_connect_names_the_socket_s_group() {
        use crate::transport::CallError;
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("gevod.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o660)).unwrap();
        let meta = std::fs::metadata(&socket).unwrap();
        let (u, g) = (user_name(meta.uid()), group_name(meta.gid()));
        let err = CallError::Unreachable {
            socket: socket.clone(),
            source: std::io::ErrorKind::PermissionDenied.into(),
        };
        assert!(err.is_connect_failure() && err.is_permission_denied());
        assert_eq!(
            err.to_string(),
            format!(
                "cannot reach gevod at {}: permission denied: only user {u} and group {g} \
                 (mode 0660): to use it, join group {g} (then log in again)",
                socket.display()
            )
        );
    }

    #[test]
    fn names_are_looked_up_with_a_number_as_fallback() {
        assert_eq!(user_name(0), "root");
        assert_eq!(group_name(0), "root");
        assert_eq!(user_name(4_000_000_000), "uid 4000000000");
    }
}
