//! Who could have written what a reader takes from the export: the
//! directories from `exports` down and the file itself must be owned by the
//! state directory's owner or root and not writable by everyone.

use super::*;

/// Who may have written what a reader takes from the export: the state
/// directory's owner (the daemon's user) or root, and not everyone.
#[derive(Debug, Clone, Copy)]
pub(super) struct Writer {
    uid: u32,
}

impl Writer {
    /// The owner of `state`.
    pub(super) fn of_state(state: &Path) -> Result<Writer, ExportError> {
        let meta = std::fs::metadata(state).map_err(|source| ExportError::Io {
            path: state.to_path_buf(),
            source,
        })?;
        Ok(Writer { uid: meta.uid() })
    }

    /// `meta` (of `path`) is owned by the state's owner or root, and not
    /// writable by everyone.
    fn judge(self, path: &Path, meta: &Metadata) -> Result<(), ExportError> {
        let uid = meta.uid();
        let why = if uid != self.uid && uid != 0 {
            format!(
                "owned by uid {uid}, not by the state directory's owner (uid {}) or root",
                self.uid
            )
        } else if meta.mode() & 0o002 != 0 {
            format!("writable by everyone (mode {:04o})", meta.mode() & 0o7777)
        } else {
            return Ok(());
        };
        Err(ExportError::Untrusted {
            path: path.to_path_buf(),
            why,
        })
    }

    /// The directory at `path` (symlinks followed: what it leads to is
    /// judged).
    fn dir(self, path: &Path) -> Result<(), ExportError> {
        let meta = std::fs::metadata(path).map_err(|source| ExportError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        self.judge(path, &meta)
    }

    /// The text of the regular file at `path`, judged on its open
    /// descriptor (the file read is the file judged), at most `cap` bytes.
    pub(super) fn read_text(self, path: &Path, cap: u64) -> Result<String, ExportError> {
        let (file, meta) = files::open_regular(path).map_err(ExportError::File)?;
        self.judge(path, &meta)?;
        let bytes = files::read_open_capped(path, file, &meta, cap).map_err(ExportError::File)?;
        String::from_utf8(bytes).map_err(|_| {
            ExportError::File(FileError::NotText {
                path: path.to_path_buf(),
            })
        })
    }
}

/// The directory of `kernel`'s export with its full name, each directory
/// from `exports` down judged for `writer`.
pub(super) fn trusted_kernel_dir(
    state: &Path,
    kernel: &str,
    writer: Writer,
) -> Result<(String, PathBuf), ExportError> {
    let root = state.join(EXPORTS_DIR);
    let missing = |e: &ExportError, kernel: &str| match e {
        ExportError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
            Some(ExportError::NotFound {
                kernel: kernel.to_string(),
                dir: root.clone(),
            })
        }
        _ => None,
    };
    writer
        .dir(&root)
        .map_err(|e| missing(&e, kernel).unwrap_or(e))?;
    let full = resolve(state, kernel)?;
    let dir = kernel_dir(state, &full)?;
    let project = dir.parent().expect("<project>/<name>");
    for d in [project, &dir] {
        writer.dir(d).map_err(|e| missing(&e, &full).unwrap_or(e))?;
    }
    Ok((full, dir))
}
