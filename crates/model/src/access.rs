//! Opening the files a spec names, on behalf of whoever wrote the spec.
//!
//! The daemon runs as its own user (or root) and reads specs that other
//! users drop into watched build directories. A spec may name any path, so
//! every file it names is opened through a [`Reader`]: `Caller` (the command
//! line: the user runs gevod as themselves) only refuses what is not a
//! regular file; `OnBehalf` also refuses a file the spec's owner could not
//! read themselves (docs/daemon.md, "Files a spec names"): the kernel's
//! permission check, emulated for their uid and groups ([`Identity`]):
//! search permission on every directory of the path as named (checked
//! before opening, so "does not exist" is said only where they could look)
//! and as the kernel resolved it (on the open descriptor), and read
//! permission on the file. Where the file lies (inside the watch root or
//! not) grants nothing: anyone with the socket may add a watch root.
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
//! [`Reader::read_capped`] refuses a file over a cap from its size before
//! reading it, and reads no more than the cap should it grow meanwhile;
//! [`Reader::read_to_string`] (spec texts) is capped at [`TEXT_CAP`].
//! A non-regular file (FIFO, device, directory, socket) is refused before it
//! is opened for reading, and opened with `O_NONBLOCK` so that a FIFO
//! swapped in afterwards cannot hang the daemon; the type is checked again
//! on the open descriptor.

use std::fs::{File, Metadata};
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

mod identity;
pub use identity::{Denial, Identity, READ, SEARCH};

/// The most [`Reader::read_to_string`] reads: the texts gevo reads whole
/// through a reader are specs, a few KiB each (16 MiB).
pub const TEXT_CAP: u64 = 16 << 20;

/// Who a file is read for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reader {
    /// The user running gevod: any regular file they can open.
    Caller,
    /// The owner of a spec in a watched directory.
    OnBehalf {
        /// The spec file's owner.
        uid: u32,
        /// The watch root holding the spec, symlinks resolved: where the
        /// write-safety walk ([`Reader::open`]) stops for a file inside it.
        /// It grants no reading.
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
    /// The spec's owner could not read the file themselves.
    #[error("{} refused: {}", path.display(), denial.describe(&owner(*uid)))]
    Refused {
        path: PathBuf,
        uid: u32,
        denial: Denial,
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
    #[error("{} is larger than {} (gevo's limit)", path.display(), size_text(*cap))]
    TooLarge { path: PathBuf, cap: u64 },
}

/// A cap in words: `64 MiB`, else bytes.
fn size_text(bytes: u64) -> String {
    if bytes >= 1 << 20 && bytes % (1 << 20) == 0 {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{bytes} bytes")
    }
}

fn owner(uid: u32) -> String {
    format!("the spec's owner (uid {uid})")
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
            | AccessError::NotUtf8 { path }
            | AccessError::TooLarge { path, .. } => path,
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
            AccessError::Refused { uid, denial, .. } => {
                format!("refused: {}", denial.describe(&owner(*uid)))
            }
            AccessError::Writable { why, .. } => format!("refused: {why}"),
            AccessError::Io { source, .. } => source.to_string(),
            AccessError::NotUtf8 { .. } => "not UTF-8 text".into(),
            AccessError::TooLarge { cap, .. } => {
                format!("it is larger than {} (gevo's limit)", size_text(*cap))
            }
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

    /// The whole file, when this reader may have it and may trust it, and
    /// it holds at most `cap` bytes: a larger one is refused from its size,
    /// before it is read.
    pub fn read_capped(&self, path: &Path, cap: u64) -> Result<Vec<u8>, AccessError> {
        let file = self.open(path)?;
        let too_large = || AccessError::TooLarge {
            path: path.to_path_buf(),
            cap,
        };
        let size = file.metadata().map_err(|e| io_error(path, e))?.len();
        if size > cap {
            return Err(too_large());
        }
        // The file may grow while it is read: one byte past the cap tells.
        let mut bytes = Vec::with_capacity(size as usize);
        file.take(cap.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(|e| io_error(path, e))?;
        if bytes.len() as u64 > cap {
            return Err(too_large());
        }
        Ok(bytes)
    }

    /// The file as text, at most [`TEXT_CAP`]: bytes that are not UTF-8
    /// are an error.
    pub fn read_to_string(&self, path: &Path) -> Result<String, AccessError> {
        let bytes = self.read_capped(path, TEXT_CAP)?;
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
        // The spec's owner, as the kernel would judge them.
        let owner = match self {
            Reader::OnBehalf { uid, .. } => Some(Identity::of(*uid)),
            Reader::Caller => None,
        };
        let refuse = |denial| AccessError::Refused {
            path: path.to_path_buf(),
            uid: owner.as_ref().map_or(0, |o| o.uid),
            denial,
        };
        // Before opening: whether the file exists, or what it is, is told
        // only where they could have looked.
        if let Some(owner) = &owner {
            owner.may_reach(path).map_err(refuse)?;
        }
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
        // On the descriptor: the file the kernel opened, by the path it
        // resolved, whatever the name points to now.
        if let Some(owner) = &owner {
            use std::os::fd::AsRawFd;
            let resolved = opened_path(&file).ok_or_else(|| refuse(Denial::SearchResolved))?;
            let on_descriptor = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
            owner
                .may_open(&resolved, &meta, &on_descriptor, READ)
                .map_err(refuse)?;
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
    fn on_behalf_of_an_owner_only_what_they_could_read_themselves() {
        use std::os::unix::fs::PermissionsExt;
        let mode =
            |p: &Path, m: u32| std::fs::set_permissions(p, PermissionsExt::from_mode(m)).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir(&root).unwrap();
        let inside = root.join("k.ll");
        std::fs::write(&inside, "inside").unwrap();
        let outside = dir.path().join("secret");
        std::fs::write(&outside, "the secret").unwrap();
        // Private: only its owner may read it.
        mode(&outside, 0o600);
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
        // Lying under the watch root grants nothing: the temporary
        // directory (0700) is not the stranger's to search.
        mode(dir.path(), 0o700);
        let text = message(stranger.read_for_display(&inside));
        assert!(text.contains("may not search its directory"), "{text}");
        assert!(
            text.contains(&format!("uid {}", inside_owner + 1000)),
            "{text}"
        );
        // Nor is a missing file's absence told there.
        let text = message(stranger.read_for_display(&root.join("missing")));
        assert!(text.contains("refused"), "{text}");
        mode(dir.path(), 0o755);
        // Readable for display: its mode lets everyone read it. Not
        // trusted: its owner, not the stranger, could change it.
        assert_eq!(stranger.read_for_display(&inside).unwrap(), b"inside");
        let text = message(stranger.read(&inside));
        assert!(text.contains("not the spec's owner"), "{text}");
        mode(&inside, 0o640);
        let text = message(stranger.read_for_display(&inside));
        assert!(text.ends_with("may not read it"), "{text}");
        for path in [&outside, &link] {
            let text = message(stranger.read(path));
            assert!(text.contains("refused"), "{text}");
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
    fn a_capped_read_refuses_a_larger_file_from_its_size() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("k.ll");
        // 3 GiB that take no disk: refused unread.
        std::fs::File::create(&file)
            .unwrap()
            .set_len(3 << 30)
            .unwrap();
        let text = message(Reader::Caller.read_capped(&file, 64 << 20));
        let expected = format!("{} is larger than 64 MiB (gevo's limit)", file.display());
        assert_eq!(text, expected);
        std::fs::write(&file, "0123456789").unwrap();
        assert_eq!(
            Reader::Caller.read_capped(&file, 10).unwrap(),
            b"0123456789"
        );
        let err = Reader::Caller.read_capped(&file, 9).unwrap_err();
        assert_eq!(err.about(&file), "it is larger than 9 bytes (gevo's limit)");
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
