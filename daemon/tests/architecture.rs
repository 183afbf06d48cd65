//! The library's modules form layers: each may use only the modules below
//! it, in the order ARCHITECTURE.md documents (its `module-order` block).
//! This reads every `crate::<module>` path in the sources (comments aside)
//! and fails on one that points up or sideways, and on a module the
//! documented order leaves out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn daemon_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The documented order, lowest first: the words of the fenced block that
/// follows the `module-order` marker in ARCHITECTURE.md.
fn documented_order() -> Vec<String> {
    let text = std::fs::read_to_string(daemon_dir().join("../ARCHITECTURE.md")).unwrap();
    let after = text
        .split("```module-order")
        .nth(1)
        .expect("ARCHITECTURE.md has a ```module-order block");
    let block = after.split("```").next().unwrap();
    block
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .map(String::from)
        .collect()
}

/// The library's top-level modules, from lib.rs.
fn library_modules() -> BTreeSet<String> {
    let lib = std::fs::read_to_string(daemon_dir().join("src/lib.rs")).unwrap();
    lib.lines()
        .filter_map(|l| l.trim().strip_prefix("pub mod "))
        .map(|m| m.trim_end_matches(';').to_string())
        .collect()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every module named as `crate::<name>` in `source`, outside comments.
fn crate_paths(source: &str) -> BTreeSet<String> {
    let mut used = BTreeSet::new();
    for line in source.lines() {
        let code = line.split("//").next().unwrap();
        for rest in code.split("crate::").skip(1) {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                used.insert(name);
            }
        }
    }
    used
}

/// For each module, the modules its files name.
fn module_uses(modules: &BTreeSet<String>) -> BTreeMap<String, BTreeSet<String>> {
    let src = daemon_dir().join("src");
    let mut uses = BTreeMap::new();
    for module in modules {
        let mut files = Vec::new();
        let dir = src.join(module);
        if dir.is_dir() {
            rust_files(&dir, &mut files);
        } else {
            files.push(src.join(format!("{module}.rs")));
        }
        let mut named = BTreeSet::new();
        for file in files {
            let source = std::fs::read_to_string(&file).unwrap();
            named.extend(crate_paths(&source));
        }
        named.retain(|m| m != module && modules.contains(m));
        uses.insert(module.clone(), named);
    }
    uses
}

#[test]
fn the_documented_order_names_every_module_once() {
    let order = documented_order();
    let unique: BTreeSet<String> = order.iter().cloned().collect();
    assert_eq!(
        unique.len(),
        order.len(),
        "a module listed twice: {order:?}"
    );
    assert_eq!(
        unique,
        library_modules(),
        "ARCHITECTURE.md's module-order and lib.rs differ"
    );
}

#[test]
fn modules_use_only_the_layers_below_them() {
    let order = documented_order();
    let rank: BTreeMap<&str, usize> = order
        .iter()
        .enumerate()
        .map(|(i, m)| (m.as_str(), i))
        .collect();
    let mut upward = Vec::new();
    for (module, used) in module_uses(&library_modules()) {
        for other in used {
            if rank[other.as_str()] > rank[module.as_str()] {
                upward.push(format!("{module} uses {other}"));
            }
        }
    }
    assert!(
        upward.is_empty(),
        "modules using a layer above them (ARCHITECTURE.md, module-order): {upward:?}"
    );
}

#[test]
fn the_check_sees_paths_and_skips_comments() {
    let source = "use crate::ir::Patch;\n// crate::serve is only mentioned\nlet x = crate::sim::run(); // crate::api\n";
    let expected: BTreeSet<String> = ["ir", "sim"].map(String::from).into();
    assert_eq!(crate_paths(source), expected);
}
