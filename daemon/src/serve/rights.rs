//! Who may do what over the socket (docs/daemon.md, "Who may do what"),
//! and the changes to the watch roots it allows. Rights follow the
//! requester: any allowed client may read (status, jobs, best, explain,
//! report); adding a watch root takes a directory the requester owns or may
//! list and search, and the root then adopts only the specs of those who
//! added it (everyone's when an administrator did); a root is unwatched by
//! its adders; a job is paused and resumed by its spec's owner; what
//! concerns the whole daemon (every job at once, shutdown) is for the
//! daemon's own user and root, who may also do all of the above.

use super::registry::{daemon_or_root, daemon_uid, JobEntry, Root};
use gevo_client::proto::ErrorCode;
use gevo_model::access::Identity;
use std::path::Path;

/// A refused request: its error code and the rule, in a line.
pub(super) type Refusal = (ErrorCode, String);

/// `the daemon's user (uid N) or root`.
fn admins() -> String {
    match daemon_uid() {
        0 => "root".into(),
        uid => format!("the daemon's user (uid {uid}) or root"),
    }
}

/// Whether `uid` may add `dir` as a watch root: root and the daemon's user
/// any directory; anyone else a directory they own, or one they may list
/// and search themselves (read and search on it, search on every directory
/// above it).
pub(super) fn may_add_root(uid: u32, dir: &Path) -> Result<(), Refusal> {
    use std::os::unix::fs::MetadataExt;
    if daemon_or_root(uid) || std::fs::metadata(dir).is_ok_and(|m| m.is_dir() && m.uid() == uid) {
        return Ok(());
    }
    Identity::of(uid).may_list(dir).map_err(|denial| {
        let why = match denial {
            gevo_model::access::Denial::Read => format!("uid {uid} may not list it"),
            other => other.describe(&format!("uid {uid}")),
        };
        (
            ErrorCode::BadDirectory,
            format!(
                "{}: refused: {why} (a client may watch only a directory it owns or may list and search)",
                crate::api::limits::quote_path(dir)
            ),
        )
    })
}

/// What `unwatch` of a root a client added does for `uid`.
pub(super) enum Unwatch {
    /// The root goes: an administrator's, or its last adder's.
    Root,
    /// They stop being one of its adders; the others keep it.
    Adder,
}

/// Whether `uid` may unwatch `root`, a root clients added, and what it
/// does: its adders and an administrator may.
pub(super) fn unwatch(uid: u32, root: &Root) -> Result<Unwatch, Refusal> {
    if daemon_or_root(uid) || root.added_by == [uid] {
        return Ok(Unwatch::Root);
    }
    if root.added_by.contains(&uid) {
        return Ok(Unwatch::Adder);
    }
    let adders: Vec<String> = root.added_by.iter().map(|u| u.to_string()).collect();
    Err((
        ErrorCode::Refused,
        format!(
            "refused: {} was added by uid {}; only they or {} may unwatch it",
            root.path.display(),
            adders.join(", "),
            admins()
        ),
    ))
}

/// Whether `uid` may pause or resume `jobs`, the current jobs of `kernel`:
/// each job's spec owner may, and the daemon's user and root.
pub(super) fn may_control<'a>(
    uid: u32,
    kernel: &str,
    mut jobs: impl Iterator<Item = &'a JobEntry>,
) -> Result<(), Refusal> {
    if daemon_or_root(uid) {
        return Ok(());
    }
    match jobs.find(|j| j.owner != Some(uid)) {
        None => Ok(()),
        Some(job) => Err((
            ErrorCode::Refused,
            format!(
                "refused: only the owner of a job's spec file or {} may pause or resume it; {kernel}'s spec is {}",
                admins(),
                job.owner
                    .map_or("no longer seen".into(), |o| format!("uid {o}'s"))
            ),
        )),
    }
}

/// Whether `uid` may `what` (shut gevod down, pause or resume every job):
/// the daemon's user and root only.
pub(super) fn may_run_the_daemon(uid: u32, what: &str) -> Result<(), Refusal> {
    if daemon_or_root(uid) {
        return Ok(());
    }
    Err((
        ErrorCode::Refused,
        format!("refused: only {} may {what} (uid {uid} asked)", admins()),
    ))
}

/// Adds `dir` to `roots` for `uid`, or removes it: what was done, and
/// whether a root went away.
pub(super) fn change_roots(
    roots: &mut Vec<Root>,
    dir: &Path,
    add: bool,
    uid: u32,
) -> Result<(String, bool), Refusal> {
    let shown = dir.display();
    let existing = roots.iter().position(|r| r.path == dir);
    match (add, existing) {
        (true, Some(i)) => Ok((already_watching(&mut roots[i], uid), false)),
        (true, None) => {
            roots.push(Root {
                path: dir.to_path_buf(),
                from_client: true,
                added_by: vec![uid],
            });
            let only = match daemon_or_root(uid) {
                true => String::new(),
                false => format!(" (the specs of uid {uid} only)"),
            };
            Ok((format!("watching {shown}{only}"), false))
        }
        (false, Some(i)) if !roots[i].from_client => Err((
            ErrorCode::BadDirectory,
            format!("{shown} is watched by the configuration; remove it there and reload"),
        )),
        (false, Some(i)) => match unwatch(uid, &roots[i])? {
            Unwatch::Root => {
                roots.remove(i);
                let message = format!(
                    "no longer watching {shown}: the jobs of its specs stop, unless another \
                     watched directory holds them, and stay listed as removed"
                );
                Ok((message, true))
            }
            Unwatch::Adder => {
                roots[i].added_by.retain(|&u| u != uid);
                let message = format!(
                    "no longer watching {shown} for the specs of uid {uid} (others watch it for \
                     theirs): your jobs there stop, unless another watched directory holds their \
                     specs, and stay listed as removed"
                );
                Ok((message, false))
            }
        },
        (false, None) => Err((
            ErrorCode::BadDirectory,
            format!("{} is not watched", crate::api::limits::quote_path(dir)),
        )),
    }
}

/// What `watch` of a directory already watched does for `uid`: nothing
/// when the root adopts their specs already; else they become one of its
/// adders (root or the daemon's user: it adopts every owner's specs).
fn already_watching(root: &mut Root, uid: u32) -> String {
    let path = root.path.display();
    let everyone = root.adopts().contains(&crate::watch::Adopts::Everyone);
    if everyone || root.added_by.contains(&uid) {
        return format!("already watching {path}");
    }
    root.added_by.push(uid);
    match daemon_or_root(uid) {
        true => format!("already watching {path}; now for every owner's specs"),
        false => format!("watching {path} (the specs of uid {uid} only)"),
    }
}
