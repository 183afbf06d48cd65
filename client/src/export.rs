//! The exported best variants: files in the state directory that answer
//! `gevo-client best` while the daemon is down.
//!
//! Layout: `<state>/exports/<project>/<name>/<target>.ptx` and, beside it,
//! `<target>.json` (a [`BestRecord`]). The daemon writes the PTX first and
//! the record second, each atomically (temporary file and rename), and the
//! record carries the PTX's hash, so a reader never takes a PTX that does
//! not belong to its record.
//!
//! Kernel names and targets become path components here, so each is
//! checked first ([`check_kernel_name`], [`check_target`]): a name never
//! leaves `<state>/exports`. A reader also checks who could have written
//! what it reads ([`read`], [`read_report`]): the directories from
//! `exports` down and the file itself must be owned by the state
//! directory's owner or root and not writable by everyone; anything else is
//! [`ExportError::Untrusted`], and the export is not used.

use crate::files::{self, FileError};
use crate::proto::{Best, BestRecord};
use sha2::{Digest, Sha256};
use std::ffi::OsString;
use std::fs::Metadata;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

mod names;
mod trust;

pub use names::{check_kernel_name, check_target};
use trust::{trusted_kernel_dir, Writer};

pub const EXPORTS_DIR: &str = "exports";

#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A record, PTX or report that is not a regular file within its cap.
    #[error(transparent)]
    File(FileError),
    #[error("{}: unreadable record: {source}", path.display())]
    Record {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    /// A kernel name or target that cannot name a directory or file of the
    /// export (`..`, an absolute path, an empty component, a character
    /// outside `[A-Za-z0-9._-]`).
    #[error("bad {what} {name:?}: {why} ({rule})")]
    BadName {
        /// "kernel name" or "target".
        what: &'static str,
        name: String,
        why: String,
        rule: &'static str,
    },
    /// A file or directory of the export that someone other than the state
    /// directory's owner or root owns, or that everyone may write: someone
    /// else could have planted it.
    #[error("{}: {why}", path.display())]
    Untrusted { path: PathBuf, why: String },
    #[error("{}: the PTX does not match its record's hash (a write was cut short?)", path.display())]
    HashMismatch { path: PathBuf },
    #[error("no exported variant of {kernel} in {}", dir.display())]
    NotFound { kernel: String, dir: PathBuf },
    #[error("{name} is ambiguous; name one of: {}", candidates.join(", "))]
    Ambiguous {
        name: String,
        candidates: Vec<String>,
    },
    #[error("{kernel}: no exported variant for {arch} (exported: {})", have.join(", "))]
    NoArch {
        kernel: String,
        arch: String,
        have: Vec<String>,
    },
}

/// SHA-256 (hex) of a PTX text, as records carry it.
pub fn ptx_hash(ptx: &str) -> String {
    sha256_hex(ptx.as_bytes())
}

/// SHA-256 of `bytes` in lower-case hex: every content hash gevo writes
/// (PTX, IR, spec text, a harness file's identity) is this.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn kernel_dir(state: &Path, kernel: &str) -> Result<PathBuf, ExportError> {
    check_kernel_name(kernel)?;
    Ok(state.join(EXPORTS_DIR).join(kernel))
}

/// Who may read the files the daemon writes in its state directory (the
/// exports, the job snapshots) and the directories it makes for them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Readers {
    /// Everyone: files 0664 and directories 0775, less the umask (0644 and
    /// 0755 with the usual 022), as `File::create` and `mkdir` would but
    /// never writable by others, even with umask 0 (a reader refuses an
    /// export everyone may write).
    #[default]
    Everyone,
    /// The owner and the members of the file's group (the daemon's):
    /// files 0640, directories 0750, less the umask (`[daemon] private`).
    Group,
}

impl Readers {
    pub fn file_mode(self) -> u32 {
        match self {
            Readers::Everyone => 0o664,
            Readers::Group => 0o640,
        }
    }

    pub fn dir_mode(self) -> u32 {
        match self {
            Readers::Everyone => 0o775,
            Readers::Group => 0o750,
        }
    }
}

/// Writes `text` to `path` through a temporary file in the same directory
/// and a rename, so readers see the old content or the new, never a part;
/// readable by everyone (less the umask).
///
/// The temporary file gets a random name and is created exclusively
/// (`O_EXCL`), so a symlink planted beside `path`, in a directory others
/// can write, is never followed: a predictable name would let it redirect
/// the write to any file the caller may write.
pub fn write_atomic(path: &Path, text: &[u8]) -> Result<(), ExportError> {
    write_atomic_for(path, text, Readers::Everyone)
}

/// [`write_atomic`] for `readers`: the file's mode, and the mode of the
/// directories it makes (existing ones keep theirs).
pub fn write_atomic_for(path: &Path, text: &[u8], readers: Readers) -> Result<(), ExportError> {
    use std::os::unix::fs::DirBuilderExt;
    let io = |source| ExportError::Io {
        path: path.to_path_buf(),
        source,
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(readers.dir_mode())
        .create(dir)
        .map_err(io)?;
    let mut prefix = OsString::from(".");
    prefix.push(path.file_name().unwrap_or("file".as_ref()));
    prefix.push(".");
    let mut tmp = tempfile::Builder::new()
        .prefix(&prefix)
        // As `File::create` would (less the umask), or private: tempfile's
        // own 0600 would hide the daemon's exports from the users whose
        // builds fall back on them.
        .permissions(std::fs::Permissions::from_mode(readers.file_mode()))
        .tempfile_in(dir)
        .map_err(io)?;
    tmp.write_all(text).map_err(io)?;
    tmp.as_file().sync_all().map_err(io)?;
    // On failure the temporary file is removed when dropped.
    tmp.persist(path).map_err(|e| io(e.error))?;
    Ok(())
}

/// Exports `best` for its kernel (`<project>/<name>`) and target.
pub fn write(state: &Path, best: &Best, readers: Readers) -> Result<(), ExportError> {
    let dir = kernel_dir(state, &best.record.kernel)?;
    let target = &best.record.target;
    check_target(target)?;
    let ptx = dir.join(format!("{target}.ptx"));
    write_atomic_for(&ptx, best.ptx.as_bytes(), readers)?;
    let record = serde_json::to_string_pretty(&best.record).expect("records serialize") + "\n";
    write_atomic_for(
        &dir.join(format!("{target}.json")),
        record.as_bytes(),
        readers,
    )
}

/// Removes the export of `kernel` for `target`, when there is one: the
/// kernel's code changed and nothing validated for the new code yet.
pub fn remove(state: &Path, kernel: &str, target: &str) -> Result<(), ExportError> {
    let dir = kernel_dir(state, kernel)?;
    check_target(target)?;
    // The record first: without it the PTX is never read.
    for name in [format!("{target}.json"), format!("{target}.ptx")] {
        let path = dir.join(name);
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(ExportError::Io { path, source: e })
            }
            _ => {}
        }
    }
    Ok(())
}

/// The HTML report beside a kernel's exported variants.
pub const REPORT_FILE: &str = "report.html";

/// Writes a kernel's (`<project>/<name>`) HTML report beside its exports.
pub fn write_report(
    state: &Path,
    kernel: &str,
    html: &str,
    readers: Readers,
) -> Result<(), ExportError> {
    let path = kernel_dir(state, kernel)?.join(REPORT_FILE);
    write_atomic_for(&path, html.as_bytes(), readers)
}

/// The exported HTML report of `kernel` (`<project>/<name>` or a unique
/// `<name>`), with its path. Its directories and the file must be the
/// state directory owner's or root's ([`ExportError::Untrusted`]).
pub fn read_report(state: &Path, kernel: &str) -> Result<(String, PathBuf), ExportError> {
    check_kernel_name(kernel)?;
    let writer = Writer::of_state(state)?;
    let (full, dir) = trusted_kernel_dir(state, kernel, writer)?;
    let path = dir.join(REPORT_FILE);
    match writer.read_text(&path, files::REPORT_CAP) {
        Ok(html) => Ok((html, path)),
        Err(ExportError::File(e)) if e.is_not_found() => Err(ExportError::NotFound {
            kernel: full,
            dir: state.join(EXPORTS_DIR),
        }),
        Err(e) => Err(e),
    }
}

/// Reads the exported best variant of `kernel` (`<project>/<name>` or a
/// unique `<name>`) for `arch`, or for any target when `arch` is `None`
/// (the highest speedup). The directories from `exports` down, the records
/// and the PTX must be the state directory owner's or root's and not
/// writable by everyone ([`ExportError::Untrusted`]).
pub fn read(state: &Path, kernel: &str, arch: Option<&str>) -> Result<Best, ExportError> {
    check_kernel_name(kernel)?;
    if let Some(arch) = arch {
        check_target(arch)?;
    }
    let writer = Writer::of_state(state)?;
    let (full, dir) = trusted_kernel_dir(state, kernel, writer)?;
    let mut records = Vec::new();
    let entries = std::fs::read_dir(&dir).map_err(|source| ExportError::Io {
        path: dir.clone(),
        source,
    })?;
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "json") {
            let text = writer.read_text(&path, files::RECORD_CAP)?;
            let record: BestRecord =
                serde_json::from_str(&text).map_err(|source| ExportError::Record {
                    path: path.clone(),
                    source,
                })?;
            records.push(record);
        }
    }
    let have: Vec<String> = records.iter().map(|r| r.target.clone()).collect();
    let chosen = match arch {
        Some(a) => records.into_iter().find(|r| r.target == a),
        None => records
            .into_iter()
            .max_by(|a, b| a.speedup.total_cmp(&b.speedup)),
    };
    let Some(record) = chosen else {
        return Err(match arch {
            Some(a) if !have.is_empty() => ExportError::NoArch {
                kernel: full,
                arch: a.to_string(),
                have,
            },
            _ => ExportError::NotFound {
                kernel: full,
                dir: state.join(EXPORTS_DIR),
            },
        });
    };
    // A record names its own target: a file name, never a path.
    check_target(&record.target)?;
    let ptx_path = dir.join(format!("{}.ptx", record.target));
    let ptx = writer.read_text(&ptx_path, files::PTX_CAP)?;
    if ptx_hash(&ptx) != record.ptx_hash {
        return Err(ExportError::HashMismatch { path: ptx_path });
    }
    Ok(Best { record, ptx })
}

/// `<project>/<name>` for a kernel given either way (a checked name).
fn resolve(state: &Path, kernel: &str) -> Result<String, ExportError> {
    if kernel.contains('/') {
        return Ok(kernel.to_string());
    }
    let root = state.join(EXPORTS_DIR);
    let mut candidates = Vec::new();
    if let Ok(projects) = std::fs::read_dir(&root) {
        for project in projects.flatten() {
            // Only a directory the daemon could have made is a project.
            let Some(name) = project.file_name().to_str().map(str::to_string) else {
                continue;
            };
            if check_kernel_name(&name).is_ok() && project.path().join(kernel).is_dir() {
                candidates.push(format!("{name}/{kernel}"));
            }
        }
    }
    candidates.sort();
    match candidates.len() {
        0 => Err(ExportError::NotFound {
            kernel: kernel.to_string(),
            dir: root,
        }),
        1 => Ok(candidates.remove(0)),
        _ => Err(ExportError::Ambiguous {
            name: kernel.to_string(),
            candidates,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn best(kernel: &str, target: &str, speedup: f64, ptx: &str) -> Best {
        Best {
            record: BestRecord {
                configuration: None,
                kernel: kernel.into(),
                job: "j".into(),
                version: 1,
                target: target.into(),
                backend: "sim".into(),
                speedup,
                interval: (speedup, speedup),
                generation: 3,
                ptx_hash: ptx_hash(ptx),
                spec_hash: "s".into(),
                ir_hash: "i".into(),
                validated_at: 0,
            },
            ptx: ptx.into(),
        }
    }

    fn temp_dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("gevo-export-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn exports_read_back_by_full_and_short_name_and_arch() {
        let state = temp_dir("roundtrip");
        let a = best("app/stencil", "sm_90", 1.2, ".entry a");
        let b = best("app/stencil", "sm_80", 1.5, ".entry b");
        write(&state, &a, Readers::Everyone).unwrap();
        write(&state, &b, Readers::Everyone).unwrap();
        assert_eq!(read(&state, "app/stencil", Some("sm_90")).unwrap(), a);
        assert_eq!(read(&state, "stencil", Some("sm_80")).unwrap(), b);
        assert_eq!(read(&state, "stencil", None).unwrap(), b, "highest speedup");
        let err = read(&state, "stencil", Some("sm_70")).unwrap_err();
        assert!(matches!(err, ExportError::NoArch { .. }), "{err}");
        write(
            &state,
            &best("other/stencil", "sm_90", 1.1, "x"),
            Readers::Everyone,
        )
        .unwrap();
        let err = read(&state, "stencil", None).unwrap_err().to_string();
        assert!(err.contains("app/stencil, other/stencil"), "{err}");
        assert!(matches!(
            read(&state, "nothing", None),
            Err(ExportError::NotFound { .. })
        ));
        std::fs::remove_dir_all(&state).unwrap();
    }

    #[test]
    fn a_ptx_that_does_not_match_its_record_is_refused() {
        let state = temp_dir("torn");
        write(
            &state,
            &best("p/k", "sm_90", 1.2, ".entry k"),
            Readers::Everyone,
        )
        .unwrap();
        let ptx = state.join("exports/p/k/sm_90.ptx");
        std::fs::write(&ptx, ".entry k (cut").unwrap();
        let err = read(&state, "p/k", Some("sm_90")).unwrap_err();
        assert!(matches!(err, ExportError::HashMismatch { .. }), "{err}");
        std::fs::write(state.join("exports/p/k/sm_90.json"), "{\"kernel\":").unwrap();
        let err = read(&state, "p/k", Some("sm_90")).unwrap_err().to_string();
        assert!(err.contains("sm_90.json: unreadable record"), "{err}");
        std::fs::remove_dir_all(&state).unwrap();
    }

    #[test]
    fn a_symlink_planted_beside_the_target_is_never_written_through() {
        let dir = temp_dir("planted");
        std::fs::create_dir_all(&dir).unwrap();
        let victim = dir.join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let out = dir.join("build");
        std::fs::create_dir_all(&out).unwrap();
        let pid = std::process::id();
        // Every name the old scheme used (`.<name>.tmp-<pid>`) and a few
        // others a writer might pick, each a symlink to the victim.
        let planted = [
            format!(".k.ptx.tmp-{pid}"),
            format!(".k.ptx.tmp-{}", pid + 1),
            ".k.ptx.tmp".to_string(),
            "k.ptx.tmp".to_string(),
            ".k.ptx.swp".to_string(),
            "k.ptx~".to_string(),
        ];
        for name in &planted {
            std::os::unix::fs::symlink(&victim, out.join(name)).unwrap();
        }
        let target = out.join("k.ptx");
        for content in ["first", "second"] {
            write_atomic(&target, content.as_bytes()).unwrap();
            assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
            assert_eq!(std::fs::read_to_string(&target).unwrap(), content);
            assert!(!std::fs::symlink_metadata(&target).unwrap().is_symlink());
            let mut left: Vec<String> = std::fs::read_dir(&out)
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect();
            left.sort();
            let mut expect: Vec<String> = planted.to_vec();
            expect.push("k.ptx".into());
            expect.sort();
            assert_eq!(left, expect, "no temporary file remains");
        }
        // A symlink at the target itself is replaced, not written through.
        std::fs::remove_file(&target).unwrap();
        std::os::unix::fs::symlink(&victim, &target).unwrap();
        write_atomic(&target, b"third").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "third");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn kernel_names_and_targets_never_leave_the_export() {
        for good in ["stencil", "app/stencil", "my-app_2/k.v1", "_x/.y"] {
            check_kernel_name(good).unwrap();
        }
        for (bad, why) in [
            ("", "it is empty"),
            ("../x", "it has a \"..\" component"),
            ("a/../../b", "it has a \"..\" component"),
            ("../../elsewhere/fake", "it has a \"..\" component"),
            ("./k", "it has a \".\" component"),
            ("/abs/x", "it is an absolute path"),
            ("a//b", "it has an empty component"),
            ("a/", "it has an empty component"),
            ("a\0b", "it holds a NUL byte"),
            ("a b", "it holds ' '"),
            ("a/b/c", "it has 3 components"),
        ] {
            let err = check_kernel_name(bad).unwrap_err().to_string();
            let head = format!("bad kernel name {bad:?}: {why} (a kernel is <project>/<name>");
            assert!(err.starts_with(&head), "{bad:?}: {err}");
        }
        check_target("sm_90").unwrap();
        for bad in ["", "..", "../sm_90", "sm/90", "/sm_90"] {
            let err = check_target(bad).unwrap_err().to_string();
            assert!(err.starts_with(&format!("bad target {bad:?}: ")), "{err}");
        }
        // Nothing is read, written or removed under a bad name.
        let state = temp_dir("bad-names");
        let err = write(&state, &best("../k", "sm_90", 1.2, "x"), Readers::Everyone).unwrap_err();
        assert!(matches!(err, ExportError::BadName { .. }), "{err}");
        let err = write(&state, &best("p/k", "../x", 1.2, "x"), Readers::Everyone).unwrap_err();
        assert!(matches!(err, ExportError::BadName { .. }), "{err}");
        assert!(!state.exists());
        assert!(matches!(
            remove(&state, "/abs/k", "sm_90"),
            Err(ExportError::BadName { .. })
        ));
        assert!(matches!(
            read(&state, "a/../../b", None),
            Err(ExportError::BadName { .. })
        ));
        assert!(matches!(
            read_report(&state, "../x",),
            Err(ExportError::BadName { .. })
        ));
    }

    /// A record with a target that is a path is not followed out of the
    /// kernel's directory.
    #[test]
    fn a_record_naming_a_path_as_its_target_is_refused() {
        let state = temp_dir("record-target");
        write(
            &state,
            &best("p/k", "sm_90", 1.2, ".entry k"),
            Readers::Everyone,
        )
        .unwrap();
        let record = state.join("exports/p/k/sm_90.json");
        let text = std::fs::read_to_string(&record).unwrap();
        std::fs::write(
            &record,
            text.replace("\"target\": \"sm_90\"", "\"target\": \"../../../x\""),
        )
        .unwrap();
        let err = read(&state, "p/k", None).unwrap_err().to_string();
        assert!(err.starts_with("bad target \"../../../x\""), "{err}");
        std::fs::remove_dir_all(&state).unwrap();
    }

    /// An export file or directory everyone may write is not used: anyone
    /// could have put it there.
    #[test]
    fn a_world_writable_export_is_not_used() {
        let state = temp_dir("world-writable");
        write(
            &state,
            &best("p/k", "sm_90", 1.2, ".entry k"),
            Readers::Everyone,
        )
        .unwrap();
        write_report(&state, "p/k", "<html>", Readers::Everyone).unwrap();
        read(&state, "p/k", None).unwrap();
        read_report(&state, "k").unwrap();
        let kernel = state.join("exports/p/k");
        let chmod = |p: &Path, mode| {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap()
        };
        for (path, mode, normal) in [
            (kernel.join("sm_90.ptx"), 0o666, 0o644),
            (kernel.join("sm_90.json"), 0o646, 0o644),
            (kernel.clone(), 0o777, 0o755),
            (state.join("exports/p"), 0o757, 0o755),
            (state.join("exports"), 0o1777, 0o755),
        ] {
            chmod(&path, mode);
            let err = read(&state, "p/k", Some("sm_90")).unwrap_err();
            let message = err.to_string();
            assert!(matches!(err, ExportError::Untrusted { .. }), "{message}");
            assert_eq!(
                message,
                format!(
                    "{}: writable by everyone (mode {:04o})",
                    path.display(),
                    mode
                )
            );
            chmod(&path, normal);
        }
        chmod(&kernel.join(REPORT_FILE), 0o666);
        let err = read_report(&state, "p/k").unwrap_err();
        assert!(matches!(err, ExportError::Untrusted { .. }), "{err}");
        std::fs::remove_dir_all(&state).unwrap();
    }

    /// Everyone's by default (0644 in 0755 directories with umask 022, and
    /// never writable by others);
    /// the owner's and the group's when private (0640 in 0750).
    #[test]
    fn exports_are_readable_by_whom_the_daemon_says() {
        // Read, not set: umask is the whole process's, tests run in parallel.
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let umask = status
            .lines()
            .find_map(|l| l.strip_prefix("Umask:"))
            .map(|m| u32::from_str_radix(m.trim(), 8).unwrap())
            .unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        for (readers, file, dirs) in [
            (Readers::Everyone, 0o664, 0o775),
            (Readers::Group, 0o640, 0o750),
        ] {
            let state = temp_dir(&format!("mode-{readers:?}"));
            std::fs::create_dir_all(&state).unwrap();
            write(&state, &best("p/k", "sm_90", 1.2, ".entry k"), readers).unwrap();
            write_report(&state, "p/k", "<html>", readers).unwrap();
            let kernel = state.join("exports/p/k");
            for name in ["sm_90.ptx", "sm_90.json", REPORT_FILE] {
                assert_eq!(
                    mode(&kernel.join(name)),
                    file & !umask,
                    "{readers:?} {name}"
                );
            }
            // Every directory it made, up to the state directory.
            for d in [state.join("exports"), state.join("exports/p"), kernel] {
                assert_eq!(mode(&d), dirs & !umask, "{readers:?} {}", d.display());
            }
            std::fs::remove_dir_all(&state).unwrap();
        }
    }
}
