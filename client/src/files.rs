//! Reading a file whose path someone else may have chosen or planted: a
//! `--config`, a mode's gevod.toml, a record, PTX or report in a state
//! directory, the old content of a `best -o` target. A FIFO there would
//! block the read for good, `/dev/zero` would eat memory, a terminal could
//! become the client's controlling one. Every such read goes through
//! [`read_capped`]: regular files only, at most a cap. Every output a
//! command replaces (`-o FILE`) is checked by [`check_output`] first.

use std::fs::{File, FileType, Metadata, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// A gevod.toml: the client reads two keys of it.
pub const CONFIG_CAP: u64 = 1 << 20;
/// An export's JSON record in a state directory.
pub const RECORD_CAP: u64 = 1 << 20;
/// An exported PTX, and the old content of a `best -o` file.
pub const PTX_CAP: u64 = 256 << 20;
/// An exported HTML report: no larger than the daemon may send one.
pub const REPORT_CAP: u64 = crate::proto::MAX_MESSAGE_BYTES as u64;

/// Why a file could not be read. Each message starts with the path.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    // `error`, not `source`: the message already says it, and a source
    // would print it twice in an `anyhow` chain.
    #[error("{}: {error}", path.display())]
    Io { path: PathBuf, error: io::Error },
    #[error("{}: {kind}, not a regular file", path.display())]
    NotRegular { path: PathBuf, kind: &'static str },
    #[error("{}: larger than {cap} bytes", path.display())]
    TooLarge { path: PathBuf, cap: u64 },
    #[error("{}: not UTF-8 text", path.display())]
    NotText { path: PathBuf },
}

impl FileError {
    /// True when nothing is at the path (callers treat that as "absent").
    pub fn is_not_found(&self) -> bool {
        matches!(self, FileError::Io { error, .. } if error.kind() == io::ErrorKind::NotFound)
    }

    pub fn path(&self) -> &Path {
        match self {
            FileError::Io { path, .. }
            | FileError::NotRegular { path, .. }
            | FileError::TooLarge { path, .. }
            | FileError::NotText { path } => path,
        }
    }
}

/// What kind of file this is, for messages: "a FIFO", "a directory", ...
pub fn kind_name(file_type: FileType) -> &'static str {
    if file_type.is_file() {
        "a regular file"
    } else if file_type.is_dir() {
        "a directory"
    } else if file_type.is_symlink() {
        "a symbolic link"
    } else if file_type.is_fifo() {
        "a FIFO"
    } else if file_type.is_socket() {
        "a socket"
    } else if file_type.is_char_device() {
        "a character device"
    } else if file_type.is_block_device() {
        "a block device"
    } else {
        "a file of unknown kind"
    }
}

/// The content of the regular file at `path`, at most `cap` bytes (the
/// caps: [`CONFIG_CAP`] 1 MiB for configs, [`RECORD_CAP`] 1 MiB for
/// state-dir records, [`PTX_CAP`] 256 MiB for PTX, [`REPORT_CAP`] 64 MiB
/// for reports). Anything else at the path (a FIFO, a directory, a device)
/// is an error naming its kind, and so is a file over the cap
/// ("PATH: larger than N bytes"); neither blocks nor reads past the cap.
pub fn read_capped(path: &Path, cap: u64) -> Result<Vec<u8>, FileError> {
    let (file, meta) = open_regular(path)?;
    read_open_capped(path, file, &meta, cap)
}

/// [`read_capped`] of a file [`open_regular`] opened (`meta` its
/// metadata), for a caller that judges the file before reading it.
pub fn read_open_capped(
    path: &Path,
    file: File,
    meta: &Metadata,
    cap: u64,
) -> Result<Vec<u8>, FileError> {
    let io = |error| FileError::Io {
        path: path.to_path_buf(),
        error,
    };
    let too_large = || FileError::TooLarge {
        path: path.to_path_buf(),
        cap,
    };
    if meta.len() > cap {
        return Err(too_large());
    }
    // The file may grow while it is read: one byte past the cap tells.
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(cap.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > cap {
        return Err(too_large());
    }
    Ok(bytes)
}

/// Opens the regular file at `path` for reading, with its metadata from
/// the open descriptor; anything else there is an error naming its kind.
/// Every file gevo reads from a path goes through here (`gevod`'s
/// `access::Reader` too), so a FIFO never blocks and a device is never
/// read.
pub fn open_regular(path: &Path) -> Result<(File, Metadata), FileError> {
    let not_regular = |file_type| FileError::NotRegular {
        path: path.to_path_buf(),
        kind: kind_name(file_type),
    };
    let io = |error| FileError::Io {
        path: path.to_path_buf(),
        error,
    };
    // Opening some devices acts (a tape rewinds, a line hangs up): refuse
    // what the path names now. The check on the descriptor below is the
    // one that holds if the path changes in between.
    if let Ok(meta) = std::fs::metadata(path) {
        if !meta.is_file() {
            return Err(not_regular(meta.file_type()));
        }
    }
    let file = OpenOptions::new()
        .read(true)
        // O_NONBLOCK: a FIFO's open would wait for a writer. O_NOCTTY: a
        // terminal must not become the controlling terminal.
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(not_regular(meta.file_type()));
    }
    Ok((file, meta))
}

/// Whether a command may replace what is at `path` with a file it writes
/// (`-o FILE`): only when nothing is there or a regular file is. A symbolic
/// link, a FIFO, a socket, a directory or a device is an error naming the
/// path and its kind ("PATH: a FIFO, not a regular file"), and the caller
/// writes nothing: the rename that replaces an output would replace the
/// link or the node itself (as root, `-o /dev/null` would leave a regular
/// file where the device was). The link is judged, not what it points to
/// (`lstat`). `gevo-client` and `gevod` check every output path here.
pub fn check_output(path: &Path) -> Result<(), FileError> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_file() => Ok(()),
        Ok(meta) => Err(FileError::NotRegular {
            path: path.to_path_buf(),
            kind: kind_name(meta.file_type()),
        }),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(FileError::Io {
            path: path.to_path_buf(),
            error,
        }),
    }
}

/// [`read_capped`] for a text file: its content must be UTF-8.
pub fn read_text_capped(path: &Path, cap: u64) -> Result<String, FileError> {
    String::from_utf8(read_capped(path, cap)?).map_err(|_| FileError::NotText {
        path: path.to_path_buf(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("gevo-files-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn only_regular_files_within_the_cap_are_read() {
        let dir = scratch("kinds");
        let fifo = dir.join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        std::fs::write(dir.join("small"), "0123456789").unwrap();
        std::fs::write(dir.join("latin1"), b"caf\xe9").unwrap();
        let cases: [(&str, u64, Result<&str, String>); 7] = [
            ("small", 10, Ok("0123456789")),
            (
                "small",
                9,
                Err(format!("{}/small: larger than 9 bytes", dir.display())),
            ),
            (
                "fifo",
                10,
                Err(format!(
                    "{}/fifo: a FIFO, not a regular file",
                    dir.display()
                )),
            ),
            (
                "",
                10,
                Err(format!(
                    "{}/: a directory, not a regular file",
                    dir.display()
                )),
            ),
            (
                "/dev/zero",
                10,
                Err("/dev/zero: a character device, not a regular file".into()),
            ),
            (
                "latin1",
                10,
                Err(format!("{}/latin1: not UTF-8 text", dir.display())),
            ),
            (
                "missing",
                10,
                Err(format!("{}/missing: No such file", dir.display())),
            ),
        ];
        for (name, cap, expect) in cases {
            let got = read_text_capped(&dir.join(name), cap).map_err(|e| e.to_string());
            match (&got, &expect) {
                (Ok(text), Ok(want)) => assert_eq!(text, want),
                (Err(err), Err(want)) => assert!(err.starts_with(want.as_str()), "{err}"),
                _ => panic!("{name}: {got:?}, expected {expect:?}"),
            }
        }
        assert!(read_capped(&dir.join("missing"), 1)
            .unwrap_err()
            .is_not_found());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn only_a_missing_path_or_a_regular_file_may_be_replaced() {
        let dir = scratch("outputs");
        let fifo = dir.join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        std::fs::write(dir.join("file"), "old").unwrap();
        std::fs::create_dir(dir.join("dir")).unwrap();
        std::os::unix::fs::symlink(dir.join("file"), dir.join("link")).unwrap();
        std::os::unix::fs::symlink("/dev/null", dir.join("null")).unwrap();
        let _socket = std::os::unix::net::UnixListener::bind(dir.join("sock")).unwrap();
        check_output(&dir.join("file")).unwrap();
        check_output(&dir.join("missing")).unwrap();
        for (name, kind) in [
            ("fifo", "a FIFO"),
            ("dir", "a directory"),
            ("link", "a symbolic link"),
            ("null", "a symbolic link"),
            ("sock", "a socket"),
            ("/dev/null", "a character device"),
        ] {
            let path = dir.join(name);
            let err = check_output(&path).unwrap_err().to_string();
            assert_eq!(
                err,
                format!("{}: {kind}, not a regular file", path.display())
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
