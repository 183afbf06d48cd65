//! Which CUDA source `gevod spec init` reads the kernel's launches from
//! (docs/spec.md, "Launches from the source"): the files given with
//! `--source`, else the file the IR's debug info names for the kernel,
//! then the other `.cu` files beside it. The host code usually launches a
//! kernel from the file that defines it; CMake passes the target's sources.

use anyhow::{Context, Result};
use gevo_ir::KernelIr;
use gevo_model::spec::skeleton::{find_launches, LaunchSource};
use std::path::{Path, PathBuf};

/// Files larger than this are not read for launches.
const MAX_SOURCE_BYTES: u64 = 4 << 20;
/// At most this many files beside the kernel's are read.
const MAX_NEIGHBOURS: usize = 64;

/// The kernel's launches as the sources show them.
pub(super) fn launches(ir: &KernelIr, given: &[PathBuf]) -> Result<LaunchSource> {
    let name = launched_name(ir.kernel());
    if !given.is_empty() {
        let mut sources = Vec::new();
        for path in given {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("--source {}", path.display()))?;
            sources.push((path.display().to_string(), text));
        }
        return Ok(found(&name, &sources));
    }
    let Some(own) = ir.kernel_source() else {
        return Ok(LaunchSource::NoSource);
    };
    let mut sources: Vec<(String, String)> = read(&own).into_iter().collect();
    if sources.is_empty() {
        return Ok(LaunchSource::NoSource);
    }
    if let LaunchSource::Found(f) = found(&name, &sources) {
        return Ok(LaunchSource::Found(f));
    }
    sources.extend(neighbours(&own).iter().filter_map(|p| read(p)));
    Ok(found(&name, &sources))
}

fn found(name: &str, sources: &[(String, String)]) -> LaunchSource {
    match find_launches(name, sources) {
        Some(f) => LaunchSource::Found(f),
        None => LaunchSource::NotFound {
            searched: sources.iter().map(|(f, _)| f.clone()).collect(),
        },
    }
}

/// A regular file's text, if it is not too large to be a source.
fn read(path: &Path) -> Option<(String, String)> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() || meta.len() > MAX_SOURCE_BYTES {
        return None;
    }
    let text = std::fs::read_to_string(path).ok()?;
    Some((path.display().to_string(), text))
}

/// The other `.cu` files in the directory of `own`, by name.
fn neighbours(own: &Path) -> Vec<PathBuf> {
    let dir = match own.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "cu"))
        .filter(|p| p.file_name() != own.file_name())
        .collect();
    out.sort();
    out.truncate(MAX_NEIGHBOURS);
    out.into_iter()
        .map(|p| match own.parent() {
            Some(d) if d.as_os_str().is_empty() => PathBuf::from(p.file_name().unwrap_or_default()),
            _ => p,
        })
        .collect()
}

/// The name a launch writes for the kernel `symbol`: demangled, without
/// its namespace, template arguments, return type and parameters
/// (`_Z9transposeIfEvPT_PKS0_ii` is launched as `transpose<float>`, read as
/// `transpose`).
fn launched_name(symbol: &str) -> String {
    let shown = gevo_ir::display_name(symbol);
    let head = shown.split('(').next().unwrap_or(&shown).trim_end();
    let mut end = head.len();
    if head.ends_with('>') {
        let mut depth = 0;
        for (i, c) in head.char_indices().rev() {
            match c {
                '>' => depth += 1,
                '<' => depth -= 1,
                _ => {}
            }
            if depth == 0 {
                end = i;
                break;
            }
        }
    }
    let name = head[..end]
        .rsplit(char::is_whitespace)
        .next()
        .unwrap_or(&head[..end]);
    name.rsplit("::").next().unwrap_or(name).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launches_name_kernels_without_their_decorations() {
        for (symbol, name) in [
            ("stencil5", "stencil5"),
            ("_Z6scaledPKfPffi", "scaled"),
            ("_Z9transposeIfEvPT_PKS0_ii", "transpose"),
            ("_ZN3app4stepEPfi", "step"),
        ] {
            assert_eq!(launched_name(symbol), name, "{symbol}");
        }
    }
}
