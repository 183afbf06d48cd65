//! Data-driven tests of each edit kind. Every `tests/edits/*.test` file holds:
//!
//! ```text
//! ; <what the case shows>
//! ; patch: <JSON array of edits>
//! <an NVPTX module>
//! ; === expected
//! <the IR text the patch yields, or `error: <message>`>
//! ```
//!
//! `BLESS=1 cargo test --test edit_fixtures` rewrites the expected sections;
//! review the diff before committing it.

use crate::common;

use gevo_ir::{Edit, KernelIr};
use std::path::Path;

const EXPECTED_MARKER: &str = "; === expected\n";

fn run_case(path: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(path).unwrap();
    let (input, expected) = text
        .split_once(EXPECTED_MARKER)
        .unwrap_or((text.as_str(), ""));
    let edits_json = input
        .lines()
        .find_map(|l| l.strip_prefix("; patch:"))
        .unwrap_or_else(|| panic!("{}: no '; patch:' line", path.display()));
    let edits: Vec<Edit> = serde_json::from_str(edits_json)
        .unwrap_or_else(|e| panic!("{}: patch: {e}", path.display()));

    let actual = match KernelIr::parse(&path.display().to_string(), input.as_bytes(), None) {
        Err(e) => format!("error: {e}\n"),
        Ok(ir) => {
            let mut patch = ir.empty_patch();
            patch.edits = edits;
            match ir.apply(&patch) {
                Ok(out) => {
                    // Replay must be exact: a second application gives the same bytes.
                    assert_eq!(
                        ir.apply(&patch).ok().as_ref(),
                        Some(&out),
                        "{}",
                        path.display()
                    );
                    out
                }
                Err(e) => format!("error: {e}\n"),
            }
        }
    };
    if actual == expected {
        return Ok(());
    }
    if std::env::var_os("BLESS").is_some() {
        std::fs::write(path, format!("{input}{EXPECTED_MARKER}{actual}")).unwrap();
        return Ok(());
    }
    let diff = similar::TextDiff::from_lines(expected, &actual)
        .unified_diff()
        .header("expected", "actual")
        .to_string();
    Err(format!("{}:\n{diff}", path.display()))
}

#[test]
fn edit_fixtures() {
    let dir = common::repo_root().join("daemon/tests/edits");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "test"))
        .collect();
    paths.sort();
    assert!(
        paths.len() >= 12,
        "expected the edit fixtures in {}",
        dir.display()
    );
    let failures: Vec<String> = paths.iter().filter_map(|p| run_case(p).err()).collect();
    assert!(
        failures.is_empty(),
        "{} of {} cases differ (BLESS=1 rewrites):\n{}",
        failures.len(),
        paths.len(),
        failures.join("\n")
    );
}
