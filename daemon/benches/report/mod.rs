//! What every benchmark writes beside its numbers: the machine, the date,
//! and its own section of BENCHMARKS.md; and where it finds the repository
//! and its settings.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository's root (fixtures, BENCHMARKS.md).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The environment variable `name` as a number, else `default`.
pub fn setting(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// CPU model and core count, as read on this machine.
pub fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!("{cpu}, {cores} cores")
}

/// Today's date (UTC), `YYYY-MM-DD`.
pub fn today() -> String {
    let out = Command::new("date").arg("-u").arg("+%Y-%m-%d").output();
    out.ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

/// Replaces the text between `<!-- bench:NAME -->` and its end marker in
/// BENCHMARKS.md (appending the section when it is new), keeping the others.
pub fn write_section(path: &Path, name: &str, body: &str) {
    let begin = format!("<!-- bench:{name} -->");
    let end = format!("<!-- /bench:{name} -->");
    let section = format!("{begin}\n{body}{end}");
    let old = std::fs::read_to_string(path).unwrap_or_else(|_| "# Benchmarks\n".into());
    let new = match (old.find(&begin), old.find(&end)) {
        (Some(b), Some(e)) if e > b => format!("{}{section}{}", &old[..b], &old[e + end.len()..]),
        _ => format!("{}\n\n{section}\n", old.trim_end()),
    };
    std::fs::write(path, new).expect("write BENCHMARKS.md");
}
