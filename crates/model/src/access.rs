//! Opening the files a spec names, on behalf of whoever wrote the spec.
//!
//! The daemon runs as its own user (or root) and reads specs that other
//! users drop into watched build directories. A spec may name any path, so
//! every file it names is opened through a [`Reader`]: `Caller` (the command
//! line: the user runs gevod as themselves) only refuses what is not a
//! regular file; `OnBehalf` also refuses a file the spec's owner could not
//! be trusted to read (docs/daemon.md, "Files a spec names"):
//!
//! - the file, symlinks followed, lies under the watch root holding the spec;
//! - or it is owned by the spec file's owner;
//! - or it is owned by root and readable by everyone (system headers,
//!   libdevice, a toolkit's files).
//!
//! A file that decides what the daemon runs or computes (the spec, its IR,
//! fill files, a harness program and the scripts its command names) must
//! also be safe from everyone else's writes ([`Reader::open`]): owned by
//! the spec's owner or root, not group- or world-writable, and every
//! directory above it (up to the watch root for a file inside it, up to `/`
//! otherwise) likewise, sticky directories (like /tmp) excepted: the rule
//! sshd and sudo apply to the files they trust. Source files, read only to
//! quote lines in explanations, need only the read rule
//! ([`Reader::read_for_display`]).
//!
//! Errors name the path and say why; they never hold a byte of the file.
//! A non-regular file (FIFO, device, directory, socket) is refused before it
//! is opened for reading, and opened with `O_NONBLOCK` so that a FIFO
//! swapped in afterwards cannot hang the daemon; the type is checked again
//! on the open descriptor.

use std::fs::{File, Metadata};
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Who a file is read for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reader {
    /// The user running gevod: any regular file they can open.
    Caller,
    /// The owner of a spec in a watched directory.
    OnBehalf {
        /// The spec file's owner.
        uid: u32,
        /// The watch root holding the spec, symlinks resolved.
        root: PathBuf,
    },
}

/// Why a file was not read. The message never quotes the file.
#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    #[error("{} does not exist", path.display())]
    NotFound { path: PathBuf },
    #[error("{} is {what}, not a regular file", path.display())]
    NotRegular { path: PathBuf, what: &'static str },
    #[error("{} refused: {}", path.display(), outside_root(root, *uid))]
    Refused {
        path: PathBuf,
        root: PathBuf,
        uid: u32,
    },
    /// Someone besides the spec's owner and root could change the file.
    #[error("{} refused: {why}", path.display())]
    Writable { path: PathBuf, why: String },
    #[error("cannot read {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} is not UTF-8 text", path.display())]
    NotUtf8 { path: PathBuf },
}

fn outside_root(root: &Path, uid: u32) -> String {
    format!(
        "it is outside the watch root {} and not owned by the spec's owner (uid {uid}) or a world-readable root file",
        root.display()
    )
}

impl AccessError {
    /// The file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            AccessError::NotFound { path }
            | AccessError::NotRegular { path, .. }
            | AccessError::Refused { path, .. }
            | AccessError::Writable { path, .. }
            | AccessError::Io { path, .. }
            | AccessError::NotUtf8 { path } => path,
        }
    }

    /// What is wrong, for a message that names `path` already (`x.gevo.toml:
    /// cannot read spec file: not UTF-8 text`): without the path when the
    /// error is about that file, the whole message when about another.
    pub fn about(&self, path: &Path) -> String {
        if self.path() != path {
            return self.to_string();
        }
        match self {
            AccessError::NotFound { .. } => "it does not exist".into(),
            AccessError::NotRegular { what, .. } => format!("it is {what}, not a regular file"),
            AccessError::Refused { root, uid, .. } => {
                format!("refused: {}", outside_root(root, *uid))
            }
            AccessError::Writable { why, .. } => format!("refused: {why}"),
            AccessError::Io { source, .. } => source.to_string(),
            AccessError::NotUtf8 { .. } => "not UTF-8 text".into(),
        }
    }
}

impl Reader {
    /// The reader for a spec file found under `root`: its owner's. A spec
    /// that is a symlink belongs to whoever made the link, so a link to a
    /// file someone else owns reads as the link's maker, not the target's.
    pub fn for_spec(spec: &Path, root: &Path) -> Result<Reader, AccessError> {
        let uid = std::fs::symlink_metadata(spec)
            .map_err(|e| io_error(spec, e))?
            .uid();
        let root = std::fs::canonicalize(root).map_err(|e| io_error(root, e))?;
        Ok(Reader::OnBehalf { uid, root })
    }

    /// The whole file, when this reader may have it and may trust it.
    pub fn read(&self, path: &Path) -> Result<Vec<u8>, AccessError> {
        read_all(path, self.open(path)?)
    }

    /// The whole file, when this reader may have it, for showing (source
    /// lines in explanations): not trusted to decide anything.
    pub fn read_for_display(&self, path: &Path) -> Result<Vec<u8>, AccessError> {
        read_all(path, self.open_readable(path)?)
    }

    /// The file as text: bytes that are not UTF-8 are an error.
    pub fn read_to_string(&self, path: &Path) -> Result<String, AccessError> {
        let bytes = self.read(path)?;
        String::from_utf8(bytes).map_err(|_| AccessError::NotUtf8 {
            path: path.to_path_buf(),
        })
    }

    /// Whether this reader may use the file (a program to run, say), without
    /// reading it.
    pub fn check(&self, path: &Path) -> Result<(), AccessError> {
        self.open(path).map(drop)
    }

    /// Opens a regular file this reader may read and trust: for the
    /// daemon, one that nobody but the spec's owner and root can change.
    /// Checked on the open descriptor, so a file swapped in afterwards is
    /// not the one that was judged.
    pub fn open(&self, path: &Path) -> Result<File, AccessError> {
        let file = self.open_readable(path)?;
        if let Reader::OnBehalf { uid, root } = self {
            trusted(path, &file, *uid, root)?;
        }
        Ok(file)
    }

    /// Identifies the file's content for a job's fingerprint: device,
    /// inode, size, modification time and SHA-256 of the bytes read from
    /// the same descriptor.
    pub fn identity(&self, path: &Path) -> Result<String, AccessError> {
        let file = self.open(path)?;
        let meta = file.metadata().map_err(|e| io_error(path, e))?;
        let hash = gevo_client::export::sha256_hex(&read_all(path, file)?);
        Ok(format!(
            "{}:{}:{}:{}.{}:{hash}",
            meta.dev(),
            meta.ino(),
            meta.size(),
            meta.mtime(),
            meta.mtime_nsec()
        ))
    }

    /// Opens a regular file this reader may read.
    fn open_readable(&self, path: &Path) -> Result<File, AccessError> {
        use gevo_client::files::FileError;
        let (file, meta) = gevo_client::files::open_regular(path).map_err(|e| match e {
            FileError::NotRegular { kind, .. } => AccessError::NotRegular {
                path: path.to_path_buf(),
                what: kind,
            },
            FileError::Io { error, .. } => io_error(path, error),
            // open_regular reads nothing.
            other => AccessError::Io {
                path: path.to_path_buf(),
                source: std::io::Error::other(other.to_string()),
            },
        })?;
        if let Reader::OnBehalf { uid, root } = self {
            let allowed = meta.uid() == *uid
                || (meta.uid() == 0 && meta.mode() & 0o004 != 0)
                || opened_path(&file).is_some_and(|p| p.starts_with(root));
            if !allowed {
                return Err(AccessError::Refused {
                    path: path.to_path_buf(),
                    root: root.clone(),
                    uid: *uid,
                });
            }
        }
        Ok(file)
    }

    /// The command-line form workers get (`--on-behalf-of UID:ROOT`), if any.
    pub fn worker_arg(&self) -> Option<String> {
        match self {
            Reader::Caller => None,
            Reader::OnBehalf { uid, root } => Some(format!("{uid}:{}", root.display())),
        }
    }

    /// Parses [`Reader::worker_arg`]'s form.
    pub fn from_worker_arg(arg: &str) -> Result<Reader, String> {
        let (uid, root) = arg
            .split_once(':')
            .ok_or_else(|| format!("expected UID:ROOT, found `{arg}`"))?;
        Ok(Reader::OnBehalf {
            uid: uid.parse().map_err(|_| format!("`{uid}` is not a uid"))?,
            root: PathBuf::from(root),
        })
    }
}

fn read_all(path: &Path, mut file: File) -> Result<Vec<u8>, AccessError> {
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(|e| io_error(path, e))?;
    Ok(bytes)
}

/// Whether only `uid` and root can change the open `file` and the
/// directories above it (as the kernel resolved it, and as `path` names it:
/// a symlink's directory could be rewritten too).
fn trusted(path: &Path, file: &File, uid: u32, root: &Path) -> Result<(), AccessError> {
    let refuse = |why: String| AccessError::Writable {
        path: path.to_path_buf(),
        why,
    };
    let meta = file.metadata().map_err(|e| io_error(path, e))?;
    if let Some(exposure) = Exposure::of(&meta, uid, false) {
        return Err(refuse(format!("it is {}", exposure.with_fix(path, uid))));
    }
    let resolved = opened_path(file).unwrap_or_else(|| path.to_path_buf());
    let named = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut seen = std::collections::BTreeSet::new();
    for p in [&resolved, &named] {
        let inside = p.starts_with(root);
        for dir in p.ancestors().skip(1) {
            if seen.insert(dir.to_path_buf()) {
                // A directory that is gone or unreadable was judged by open().
                let exposure = std::fs::metadata(dir)
                    .ok()
                    .and_then(|m| Exposure::of(&m, uid, true));
                if let Some(exposure) = exposure {
                    return Err(refuse(format!(
                        "its directory {} is {}",
                        dir.display(),
                        exposure.with_fix(dir, uid)
                    )));
                }
            }
            if inside && dir == root {
                break;
            }
        }
    }
    Ok(())
}

/// How someone besides the spec's owner and root could change a file or
/// directory.
enum Exposure {
    OwnedBy(u32),
    WorldWritable,
    GroupWritable,
}

impl Exposure {
    /// The exposure of a file or directory with `meta` for owner `uid`.
    fn of(meta: &Metadata, uid: u32, directory: bool) -> Option<Exposure> {
        const STICKY: u32 = 0o1000;
        if meta.uid() != uid && meta.uid() != 0 {
            return Some(Exposure::OwnedBy(meta.uid()));
        }
        // In a sticky directory only a file's owner may replace it.
        if directory && meta.mode() & STICKY != 0 {
            return None;
        }
        match meta.mode() {
            m if m & 0o002 != 0 => Some(Exposure::WorldWritable),
            m if m & 0o020 != 0 => Some(Exposure::GroupWritable),
            _ => None,
        }
    }

    /// What it is and the command that removes it, for `path`.
    fn with_fix(&self, path: &Path, uid: u32) -> String {
        let path = path.display();
        match self {
            Exposure::OwnedBy(owner) => format!(
                "owned by uid {owner}, not the spec's owner (uid {uid}) or root (chown it to the spec's owner)"
            ),
            Exposure::WorldWritable => format!("world-writable (chmod o-w {path})"),
            Exposure::GroupWritable => format!("group-writable (chmod g-w {path})"),
        }
    }
}

/// The path the kernel resolved for an open file: symlinks followed, as it
/// was when opened (not re-resolved from the name, which may have changed).
fn opened_path(file: &File) -> Option<PathBuf> {
    use std::os::fd::AsRawFd;
    std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).ok()
}

fn io_error(path: &Path, source: std::io::Error) -> AccessError {
    if source.kind() == std::io::ErrorKind::NotFound {
        AccessError::NotFound {
            path: path.to_path_buf(),
        }
    } else {
        AccessError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(r: Result<Vec<u8>, AccessError>) -> String {
        r.expect_err("refused").to_string()
    }

    #[test]
    fn non_regular_files_are_named_for_what_they_are() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path; mkfifo touches nothing else.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        for (path, expected) in [
            (fifo.as_path(), "is a FIFO, not a regular file"),
            (Path::new("/dev/zero"), "is a character device"),
            (dir.path(), "is a directory"),
            (&dir.path().join("missing"), "does not exist"),
        ] {
            let text = message(Reader::Caller.read(path));
            assert!(text.contains(expected), "{path:?}: {text}");
        }
    }

    #[test]
    fn on_behalf_of_an_owner_only_their_files_the_root_and_public_system_files() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir(&root).unwrap();
        let inside = root.join("k.ll");
        std::fs::write(&inside, "inside").unwrap();
        let outside = dir.path().join("secret");
        std::fs::write(&outside, "the secret").unwrap();
        // Private: the world-readable root-file rule must not apply.
        std::fs::set_permissions(
            &outside,
            std::os::unix::fs::PermissionsExt::from_mode(0o600),
        )
        .unwrap();
        let link = root.join("link");
        std::os::unix::fs::symlink(&outside, &link).unwrap();
        // SAFETY: geteuid cannot fail and touches no memory.
        let me = unsafe { libc::geteuid() };
        // Root's files are trusted for everyone: as root, give the file
        // inside to another user.
        let inside_owner = if me == 0 {
            std::os::unix::fs::chown(&inside, Some(4242), None).unwrap();
            4242
        } else {
            me
        };
        let stranger = Reader::OnBehalf {
            uid: inside_owner + 1000,
            root: std::fs::canonicalize(&root).unwrap(),
        };
        // Readable for display: it lies inside the root. Not trusted: its
        // owner, not the stranger, could change it.
        assert_eq!(stranger.read_for_display(&inside).unwrap(), b"inside");
        let text = message(stranger.read(&inside));
        assert!(text.contains("not the spec's owner"), "{text}");
        for path in [&outside, &link] {
            let text = message(stranger.read(path));
            assert!(text.contains("refused"), "{text}");
            assert!(!text.contains("secret\""), "{text}");
            assert!(!text.contains("the secret"), "{text}");
        }
        let owner = Reader::OnBehalf {
            uid: me,
            root: std::fs::canonicalize(&root).unwrap(),
        };
        assert_eq!(owner.read(&link).unwrap(), b"the secret");
        // A world-readable file root owns, outside the root.
        assert!(stranger.check(Path::new("/etc/passwd")).is_ok());
    }

    #[test]
    fn files_others_could_change_are_refused_with_the_fix() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        let sub = root.join("sub");
        std::fs::create_dir_all(&sub).unwrap();
        let file = sub.join("k.gevo.toml");
        std::fs::write(&file, "x").unwrap();
        // SAFETY: geteuid cannot fail and touches no memory.
        let me = unsafe { libc::geteuid() };
        let owner = Reader::OnBehalf {
            uid: me,
            root: std::fs::canonicalize(&root).unwrap(),
        };
        let mode =
            |p: &Path, m: u32| std::fs::set_permissions(p, PermissionsExt::from_mode(m)).unwrap();
        let cases: [(&Path, u32, Option<&str>); 6] = [
            (&file, 0o644, None),
            (&file, 0o666, Some("it is world-writable (chmod o-w")),
            (&file, 0o664, Some("it is group-writable (chmod g-w")),
            (&sub, 0o777, Some("/sub is world-writable (chmod o-w")),
            // Sticky, as /tmp: only a file's owner may replace it.
            (&sub, 0o1777, None),
            (&root, 0o775, Some("/root is group-writable (chmod g-w")),
        ];
        for (path, m, expected) in cases {
            mode(path, m);
            let result = owner.read(&file);
            match expected {
                None => assert_eq!(result.unwrap(), b"x", "{path:?} {m:o}"),
                Some(e) => {
                    let text = message(result);
                    assert!(text.contains(e), "{path:?} {m:o}: {text}");
                    assert!(text.starts_with(&file.display().to_string()), "{text}");
                }
            }
            mode(path, if path == file { 0o644 } else { 0o755 });
        }
        // Above the root nothing is judged for a file inside it (the
        // temporary directory's parent is /tmp, sticky anyway).
        mode(dir.path(), 0o777);
        assert_eq!(owner.read(&file).unwrap(), b"x");
        // Outside the root, every directory up to / is: the same file read
        // for a root one level down.
        let inner = Reader::OnBehalf {
            uid: me,
            root: std::fs::canonicalize(&sub).unwrap().join("elsewhere"),
        };
        let text = message(inner.read(&file));
        assert!(text.contains("is world-writable"), "{text}");
        mode(dir.path(), 0o700);
        // The identity changes with the content.
        let before = owner.identity(&file).unwrap();
        std::fs::write(&file, "y").unwrap();
        assert_ne!(owner.identity(&file).unwrap(), before);
    }

    #[test]
    fn the_worker_form_round_trips() {
        let r = Reader::OnBehalf {
            uid: 1000,
            root: PathBuf::from("/home/a/build:x"),
        };
        assert_eq!(
            Reader::from_worker_arg(&r.worker_arg().unwrap()).unwrap(),
            r
        );
        assert!(Reader::from_worker_arg("x").is_err());
        assert_eq!(Reader::Caller.worker_arg(), None);
    }
}
