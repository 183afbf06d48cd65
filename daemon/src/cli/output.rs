//! What several commands read and write: patches, kernels, output files.

use anyhow::{Context as _, Result};
use gevo_ir::{IrError, KernelIr, Patch};
use std::io::Write;
use std::path::Path;

/// Worker threads or processes when none are asked for: one per core.
pub fn default_workers() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Loads the named kernels (several for a pipeline, in order); when none is
/// named and the module has several, the patch's kernels are taken. Library
/// errors already name the file.
pub fn load_kernel(path: &Path, kernels: &[String], patch: Option<&Patch>) -> Result<KernelIr> {
    match (KernelIr::load_kernels(path, kernels), patch) {
        (Err(IrError::KernelRequired { .. }), Some(patch)) if kernels.is_empty() => {
            let named: Vec<String> = patch.kernel_list().iter().map(|k| k.to_string()).collect();
            Ok(KernelIr::load_kernels(path, &named)?)
        }
        (result, _) => Ok(result?),
    }
}

/// The most a patch file may hold: a patch of a hundred thousand edits is
/// a few megabytes.
pub const PATCH_CAP: u64 = 64 << 20;

pub fn read_patch(path: &Path) -> Result<Patch> {
    let text = gevo_client::files::read_text_capped(path, PATCH_CAP)?;
    Patch::from_json(&text).with_context(|| path.display().to_string())
}

/// Writes `text` to `path` atomically (nothing is left behind on failure), or
/// to stdout. Every `-o` of gevod comes here.
///
/// Only a missing path or a regular file is replaced: a symlink, FIFO,
/// socket, directory or device at `path` is refused with one line naming
/// the path and its kind, and left as it is (the rename would replace the
/// node itself: as root, `-o /dev/zero` used to leave an HTML file in its
/// place). The check is `gevo-client`'s (`files::check_output`). The text
/// goes to a temporary file beside `path`, created exclusively under a
/// random name (`O_EXCL`: a link planted there is never followed), and is
/// renamed over `path`.
pub fn write_output(path: Option<&Path>, text: &str) -> Result<()> {
    let Some(path) = path else {
        // Source lines and names in it may carry others' control bytes.
        let shown = gevo_client::text::escape_terminal(text);
        std::io::stdout().write_all(shown.as_bytes())?;
        return Ok(());
    };
    gevo_client::files::check_output(path)?;
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut tmp =
        tempfile::NamedTempFile::new_in(dir).with_context(|| path.display().to_string())?;
    tmp.write_all(text.as_bytes())
        .and_then(|_| tmp.as_file().sync_all())
        .with_context(|| path.display().to_string())?;
    tmp.persist(path)
        .with_context(|| path.display().to_string())?;
    Ok(())
}
