//! The record a daemon leaves beside its socket (`<socket>.json`): the
//! state directory of the gevod that last listened there. A daemon started
//! with `--state DIR`, or with a config the client does not read, keeps its
//! exports where the client's defaults do not look; when that daemon is
//! down, `best` and `report` find its exports through the record of the
//! socket they tried.
//!
//! A record is read only where it can be trusted as an export is
//! (`export/trust.rs`): written by root, by the user reading it, or by the
//! owner of the socket's directory (the daemon's user), and not writable by
//! everyone; the state directory it names must be owned by the record's
//! writer or root, and the export in it is then judged as every export is.

use crate::export::{self, ExportError};
use crate::files::{self, FileError};
use serde::{Deserialize, Serialize};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// What a daemon records beside its socket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DaemonRecord {
    /// The socket the record is beside (a copied record names another).
    pub socket: PathBuf,
    /// The daemon's state directory, absolute.
    pub state_dir: PathBuf,
    pub pid: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("no daemon record at {}", path.display())]
    NotFound { path: PathBuf },
    /// Not a regular file, too large: the message names the path.
    #[error("not using the daemon record {0}")]
    File(FileError),
    /// Someone other than root, this user or the daemon's user wrote it, or
    /// it names a state directory its writer does not own.
    #[error("not using the daemon record {}: {why}", path.display())]
    Untrusted { path: PathBuf, why: String },
    #[error("not using the daemon record {}: {why}", path.display())]
    Invalid { path: PathBuf, why: String },
    #[error("cannot write the daemon record: {0}")]
    Write(ExportError),
}

/// Where the daemon listening at `socket` records its state directory.
pub fn path_for(socket: &Path) -> PathBuf {
    let mut name = socket.as_os_str().to_owned();
    name.push(".json");
    PathBuf::from(name)
}

/// Records `state_dir` (made absolute) beside `socket`, atomically; returns
/// the record's path.
pub fn write(socket: &Path, state_dir: &Path) -> Result<PathBuf, RecordError> {
    let path = path_for(socket);
    let state_dir = std::fs::canonicalize(state_dir)
        .or_else(|_| std::path::absolute(state_dir))
        .map_err(|source| {
            RecordError::Write(ExportError::Io {
                path: state_dir.to_path_buf(),
                source,
            })
        })?;
    let record = DaemonRecord {
        socket: socket.to_path_buf(),
        state_dir,
        pid: std::process::id(),
    };
    let text = serde_json::to_string_pretty(&record).expect("records serialize") + "\n";
    export::write_atomic(&path, text.as_bytes()).map_err(RecordError::Write)?;
    Ok(path)
}

/// The record beside `socket`, judged as the module says.
pub fn read(socket: &Path) -> Result<DaemonRecord, RecordError> {
    let path = path_for(socket);
    let untrusted = |why: String| RecordError::Untrusted {
        path: path.clone(),
        why,
    };
    let invalid = |why: String| RecordError::Invalid {
        path: path.clone(),
        why,
    };
    let (file, meta) = files::open_regular(&path).map_err(|e| match e {
        e if e.is_not_found() => RecordError::NotFound { path: path.clone() },
        e => RecordError::File(e),
    })?;
    let writer = meta.uid();
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    let dir_owner = path
        .parent()
        .and_then(|d| std::fs::metadata(d).ok())
        .map(|m| m.uid());
    if writer != 0 && writer != me && Some(writer) != dir_owner {
        return Err(untrusted(format!(
            "owned by uid {writer}, not by root, you (uid {me}) or its directory's owner{}",
            dir_owner.map_or(String::new(), |o| format!(" (uid {o})"))
        )));
    }
    if meta.mode() & 0o002 != 0 {
        return Err(untrusted(format!(
            "writable by everyone (mode {:04o})",
            meta.mode() & 0o7777
        )));
    }
    let bytes = files::read_open_capped(&path, file, &meta, files::RECORD_CAP)
        .map_err(RecordError::File)?;
    let record: DaemonRecord =
        serde_json::from_slice(&bytes).map_err(|e| invalid(format!("unreadable: {e}")))?;
    if record.socket != socket {
        return Err(invalid(format!(
            "it is of the daemon at {}",
            record.socket.display()
        )));
    }
    if !record.state_dir.is_absolute() {
        return Err(invalid(format!(
            "the state directory {} is not absolute",
            record.state_dir.display()
        )));
    }
    // A state directory its writer does not own is not where that daemon
    // wrote its exports (a missing one is simply not there: the export
    // read says so).
    if let Ok(state) = std::fs::metadata(&record.state_dir) {
        if state.uid() != writer && state.uid() != 0 {
            return Err(untrusted(format!(
                "it names {}, owned by uid {}, not by the record's writer (uid {writer}) or root",
                record.state_dir.display(),
                state.uid()
            )));
        }
    }
    Ok(record)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_record_reads_back_and_names_its_socket() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("gevod.sock");
        let state = dir.path().join("state");
        std::fs::create_dir(&state).unwrap();
        assert!(matches!(read(&socket), Err(RecordError::NotFound { .. })));
        let path = write(&socket, &state).unwrap();
        assert_eq!(path, dir.path().join("gevod.sock.json"));
        let record = read(&socket).unwrap();
        assert_eq!(record.state_dir, state.canonicalize().unwrap());
        assert_eq!(record.pid, std::process::id());
        // Copied beside another socket, it is not that daemon's.
        let other = dir.path().join("other.sock");
        std::fs::copy(&path, path_for(&other)).unwrap();
        let err = read(&other).unwrap_err().to_string();
        assert!(err.contains("it is of the daemon at"), "{err}");
    }

    #[test]
    fn a_record_everyone_may_write_is_not_used() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("gevod.sock");
        let path = write(&socket, dir.path()).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
        let err = read(&socket).unwrap_err().to_string();
        assert!(err.contains("writable by everyone (mode 0666)"), "{err}");
    }
}
