//! Where a run happens: the scratch files (the variant's PTX and IR, given
//! to the harness's user), the environment the command sees, and that user.

use super::{run, HarnessError, HarnessEvaluator, Runner};
use gevo_ir::Compiled;
use gevo_model::spec::TestCase;
use std::path::{Path, PathBuf};

impl HarnessEvaluator {
    pub(super) fn write_variant(&self, variant: &Compiled) -> Result<VariantFiles, HarnessError> {
        // One directory per evaluation, reused by the next one.
        let dir = self.scratch.path().join("variant");
        if dir.exists() {
            std::fs::remove_dir_all(&dir)
                .map_err(|e| HarnessError::Io(format!("{}: {e}", dir.display())))?;
        }
        write_files(dir, variant, self.user)
    }

    /// The documented variables, and nothing else of the daemon's environment.
    pub(super) fn environment(
        &self,
        test: &TestCase,
        files: &VariantFiles,
        out: &Path,
        tmp: &Path,
    ) -> Vec<(String, String)> {
        let path = |p: &Path| p.display().to_string();
        let mut env = vec![
            ("PATH".to_string(), run::HARNESS_PATH.to_string()),
            ("LANG".to_string(), "C.UTF-8".to_string()),
            ("HOME".to_string(), path(tmp)),
            ("TMPDIR".to_string(), path(tmp)),
            ("GEVO_PTX".to_string(), path(&files.ptx)),
            ("GEVO_OUT".to_string(), path(out)),
            ("GEVO_KERNEL".to_string(), self.ir.kernel().to_string()),
            (
                "GEVO_KERNELS".to_string(),
                self.ir.chosen_kernels().join(" "),
            ),
            ("GEVO_TEST".to_string(), test.name.clone()),
            ("GEVO_SEED".to_string(), test.seed.to_string()),
        ];
        match &self.runner {
            Runner::Simulate { gevod } => {
                env.push(("GEVO_SIMULATOR".to_string(), path(gevod)));
                env.push(("GEVO_IR".to_string(), path(&files.ir)));
            }
            Runner::Gpu { device } => {
                if let Some(uuid) = device {
                    env.push(("CUDA_VISIBLE_DEVICES".to_string(), uuid.clone()));
                }
            }
        }
        env
    }
}

/// Writes a compiled kernel's PTX and IR into `dir` (given to `user`).
pub(super) fn write_files(
    dir: PathBuf,
    compiled: &Compiled,
    user: Option<(u32, u32)>,
) -> Result<VariantFiles, HarnessError> {
    let io = |p: &Path, e: std::io::Error| HarnessError::Io(format!("{}: {e}", p.display()));
    std::fs::create_dir_all(&dir).map_err(|e| io(&dir, e))?;
    let files = VariantFiles::in_dir(dir);
    std::fs::write(&files.ptx, &compiled.ptx).map_err(|e| io(&files.ptx, e))?;
    std::fs::write(&files.ir, &compiled.ir).map_err(|e| io(&files.ir, e))?;
    if let Some((uid, gid)) = user {
        for p in [&files.dir, &files.ptx, &files.ir] {
            chown(p, uid, gid)?;
        }
    }
    Ok(files)
}

/// The variant's files a run reads.
pub(super) struct VariantFiles {
    dir: PathBuf,
    pub(super) ptx: PathBuf,
    pub(super) ir: PathBuf,
}

impl VariantFiles {
    fn in_dir(dir: PathBuf) -> Self {
        VariantFiles {
            ptx: dir.join("kernel.ptx"),
            ir: dir.join("kernel.ll"),
            dir,
        }
    }
}

/// The uid and gid harness commands run as: `user`'s (a name or a number)
/// when this process is root, else `None` (they run as this process's user).
pub fn run_as(user: &str) -> Result<Option<(u32, u32)>, String> {
    // SAFETY: geteuid cannot fail and touches no memory.
    if unsafe { libc::geteuid() } != 0 {
        return Ok(None);
    }
    let not_found = || format!("[harness] user: no user \"{user}\" on this system");
    let name = std::ffi::CString::new(user).map_err(|_| not_found())?;
    // SAFETY: getpwnam/getpwuid return a pointer to static storage or null;
    // it is read at once, before any other call could overwrite it.
    let entry = unsafe {
        match user.parse::<u32>() {
            Ok(uid) => libc::getpwuid(uid),
            Err(_) => libc::getpwnam(name.as_ptr()),
        }
    };
    if entry.is_null() {
        return Err(not_found());
    }
    // SAFETY: non-null, from getpw*.
    let (uid, gid) = unsafe { ((*entry).pw_uid, (*entry).pw_gid) };
    if uid == 0 {
        return Err(format!(
            "[harness] user: \"{user}\" is root; harness commands run unprivileged"
        ));
    }
    Ok(Some((uid, gid)))
}

pub(super) fn chown(path: &Path, uid: u32, gid: u32) -> Result<(), HarnessError> {
    std::os::unix::fs::chown(path, Some(uid), Some(gid))
        .map_err(|e| HarnessError::Io(format!("{}: giving it to uid {uid}: {e}", path.display())))
}
