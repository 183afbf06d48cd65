//! Within each library crate, modules form layers: each may use only the
//! modules below it, in the order ARCHITECTURE.md documents for that crate
//! (a fenced `module-order <crate directory>` block). Between crates, Cargo
//! enforces the direction. This parses every source file of a crate (syn)
//! and collects the top-level modules it names: every `use` tree (groups,
//! `self`, renames, globs, and `super` chains resolved against the file's
//! module path), every path in the code (`crate::x::f()`,
//! `super::super::x::T`, in expressions, types and patterns), and the paths
//! in macro arguments. It fails on one that points up or sideways, and on a
//! module the documented order leaves out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use syn::punctuated::Punctuated;
use syn::visit::{self, Visit};
use syn::{Expr, ItemMod, ItemUse, Macro, Token, UseTree};

fn repo_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The crates whose modules are layered, by directory.
const LAYERED_CRATES: &[&str] = &["crates/model", "crates/search", "daemon"];

/// Each crate's documented order, lowest first: the words of the fenced
/// block that follows `module-order <crate directory>` in ARCHITECTURE.md.
fn documented_orders() -> BTreeMap<String, Vec<String>> {
    let text = std::fs::read_to_string(repo_dir().join("ARCHITECTURE.md")).unwrap();
    let mut orders = BTreeMap::new();
    for block in text.split("```module-order ").skip(1) {
        let (crate_dir, rest) = block
            .split_once('\n')
            .expect("a module-order block's first line");
        let words = rest.split("```").next().unwrap();
        let order = words
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| !w.is_empty())
            .map(String::from)
            .collect();
        let previous = orders.insert(crate_dir.trim().to_string(), order);
        assert!(
            previous.is_none(),
            "two module-order blocks for {crate_dir}"
        );
    }
    orders
}

fn documented_order(crate_dir: &str) -> Vec<String> {
    documented_orders()
        .remove(crate_dir)
        .unwrap_or_else(|| panic!("ARCHITECTURE.md has no ```module-order {crate_dir} block"))
}

/// A crate's top-level modules, from its lib.rs.
fn library_modules(crate_dir: &str) -> BTreeSet<String> {
    let lib = std::fs::read_to_string(repo_dir().join(crate_dir).join("src/lib.rs")).unwrap();
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

/// The module path of a file, given relative to `src/`: `cuda/measure.rs`
/// is `cuda::measure`, `cuda/mod.rs` is `cuda`.
fn file_module(relative: &Path) -> Vec<String> {
    let mut path: Vec<String> = relative
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if path.last().is_some_and(|last| last == "mod") {
        path.pop();
    }
    path
}

/// Collects the top-level modules that the paths of one file name.
struct Uses {
    /// The module being visited (the file's, then any inline `mod` in it).
    module: Vec<String>,
    used: BTreeSet<String>,
}

impl Uses {
    /// `segments`, a path written in `self.module`: records the top-level
    /// module it names when it starts at `crate`, `self` or `super`. Other
    /// paths start at an external crate or at a name in scope, whose own
    /// `use` is counted where it is.
    fn resolve(&mut self, segments: &[String]) {
        let (mut absolute, mut rest) = match segments.first().map(String::as_str) {
            Some("crate") => (Vec::new(), &segments[1..]),
            Some("self") => (self.module.clone(), &segments[1..]),
            Some("super") => (self.module.clone(), segments),
            _ => return,
        };
        while let Some(("super", after)) = rest.split_first().map(|(s, r)| (s.as_str(), r)) {
            absolute.pop();
            rest = after;
        }
        absolute.extend(rest.iter().cloned());
        if let Some(first) = absolute.into_iter().next() {
            self.used.insert(first);
        }
    }

    /// Every path a `use` tree brings in, `prefix` being the path above it.
    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &UseTree) {
        match tree {
            UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            UseTree::Name(n) => self.use_leaf(prefix, &n.ident),
            UseTree::Rename(r) => self.use_leaf(prefix, &r.ident),
            UseTree::Glob(_) => self.resolve(prefix),
            UseTree::Group(g) => {
                for item in &g.items {
                    self.use_tree(prefix, item);
                }
            }
        }
    }

    /// `prefix::name`; `self` in a group is the prefix itself.
    fn use_leaf(&mut self, prefix: &[String], name: &syn::Ident) {
        let mut path = prefix.to_vec();
        if name != "self" {
            path.push(name.to_string());
        }
        self.resolve(&path);
    }

    /// `crate::name` in a macro's tokens that are not expressions.
    fn macro_tokens(&mut self, tokens: &str) {
        let tokens: String = tokens.split_whitespace().collect();
        let mut pieces = tokens.split("crate::");
        let mut before = pieces.next().unwrap_or_default();
        for rest in pieces {
            let whole_word = !before.ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_');
            before = rest;
            if !whole_word {
                continue;
            }
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                self.used.insert(name);
            }
        }
    }
}

impl<'ast> Visit<'ast> for Uses {
    fn visit_item_mod(&mut self, item: &'ast ItemMod) {
        self.module.push(item.ident.to_string());
        visit::visit_item_mod(self, item);
        self.module.pop();
    }

    fn visit_item_use(&mut self, item: &'ast ItemUse) {
        if item.leading_colon.is_none() {
            self.use_tree(&mut Vec::new(), &item.tree);
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        // One segment (`self`, `pub(crate)`, `pub(super)`) names no module.
        if path.leading_colon.is_none() && path.segments.len() > 1 {
            let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
            self.resolve(&segments);
        }
        visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast Macro) {
        visit::visit_macro(self, mac);
        // Expression-like arguments (`format!`, `assert_eq!`, `vec!`) are
        // visited as code; any others are read as tokens.
        match mac.parse_body_with(Punctuated::<Expr, Token![,]>::parse_terminated) {
            Ok(args) => {
                for arg in &args {
                    self.visit_expr(arg);
                }
            }
            Err(_) => self.macro_tokens(&mac.tokens.to_string()),
        }
    }
}

/// The top-level modules that `source`, the file at `file` (relative to
/// `src/`), names.
fn uses_of(file: &Path, source: &str) -> BTreeSet<String> {
    let parsed = syn::parse_file(source).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let mut uses = Uses {
        module: file_module(file),
        used: BTreeSet::new(),
    };
    uses.visit_file(&parsed);
    uses.used
}

/// For each module of a crate, the crate's other modules its files name.
fn module_uses(crate_dir: &str, modules: &BTreeSet<String>) -> BTreeMap<String, BTreeSet<String>> {
    let src = repo_dir().join(crate_dir).join("src");
    let mut uses = BTreeMap::new();
    for module in modules {
        // A module is `name.rs` and the files of `name/`.
        let mut files = vec![src.join(format!("{module}.rs"))];
        let dir = src.join(module);
        if dir.is_dir() {
            rust_files(&dir, &mut files);
        }
        let mut named = BTreeSet::new();
        for file in files {
            let source = std::fs::read_to_string(&file).unwrap();
            named.extend(uses_of(file.strip_prefix(&src).unwrap(), &source));
        }
        named.retain(|m| m != module && modules.contains(m));
        uses.insert(module.clone(), named);
    }
    uses
}

/// `module uses other` for each use of a module above it in `order`.
fn upward_uses(order: &[String], uses: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let rank: BTreeMap<&str, usize> = order
        .iter()
        .enumerate()
        .map(|(i, m)| (m.as_str(), i))
        .collect();
    let mut upward = Vec::new();
    for (module, used) in uses {
        for other in used {
            // A module missing from the order fails the test above.
            let (Some(theirs), Some(ours)) = (rank.get(other.as_str()), rank.get(module.as_str()))
            else {
                continue;
            };
            if theirs > ours {
                upward.push(format!("{module} uses {other}"));
            }
        }
    }
    upward
}

#[test]
fn each_documented_order_names_its_crates_modules_once() {
    let orders = documented_orders();
    assert_eq!(
        orders.keys().map(String::as_str).collect::<Vec<_>>(),
        LAYERED_CRATES,
        "ARCHITECTURE.md's module-order blocks"
    );
    for (crate_dir, order) in orders {
        let unique: BTreeSet<String> = order.iter().cloned().collect();
        assert_eq!(
            unique.len(),
            order.len(),
            "{crate_dir}: a module listed twice: {order:?}"
        );
        assert_eq!(
            unique,
            library_modules(&crate_dir),
            "ARCHITECTURE.md's module-order and {crate_dir}/src/lib.rs differ"
        );
    }
}

#[test]
fn modules_use_only_the_layers_below_them() {
    for crate_dir in LAYERED_CRATES {
        let modules = library_modules(crate_dir);
        let upward = upward_uses(
            &documented_order(crate_dir),
            &module_uses(crate_dir, &modules),
        );
        assert!(
            upward.is_empty(),
            "{crate_dir}: modules using a layer above them (ARCHITECTURE.md, module-order): {upward:?}"
        );
    }
}

/// Snippets, the file each is in (relative to `src/`), and the top-level
/// modules it names.
const SNIPPETS: &[(&str, &str, &[&str])] = &[
    // Groups, nested: each branch counts.
    (
        "eval.rs",
        "use crate::{ir, sim::code::{Op, Program}};",
        &["ir", "sim"],
    ),
    // `self` in a group is the path before it; renames and globs count.
    (
        "eval.rs",
        "use crate::stats::{self, Timing}; use crate::spec::Spec as S; use crate::device::*;",
        &["device", "spec", "stats"],
    ),
    // `super` chains resolve against the file's module path ...
    (
        "cuda/measure.rs",
        "use super::super::stats::Timing;",
        &["stats"],
    ),
    // ... and against modules nested in the file.
    (
        "cuda/measure.rs",
        "mod tests { mod inner { use super::super::super::super::ir::Patch; } }",
        &["ir"],
    ),
    // A top-level file's `super` is the crate.
    ("busy.rs", "use super::device::DeviceInfo;", &["device"]),
    // `super` and `self` within a module's directory stay in the module.
    (
        "cuda/measure.rs",
        "use super::driver::Kernel; use self::inner::X; mod inner {}",
        &["cuda"],
    ),
    // Paths in expressions, types and patterns.
    (
        "eval.rs",
        "fn f(p: crate::ir::Patch) -> Vec<crate::spec::Spec> { crate::sim::run(); \
         let crate::device::D { .. } = make(); Vec::new() }",
        &["device", "ir", "sim", "spec"],
    ),
    (
        "cuda/measure.rs",
        "fn f() { super::super::stats::median(); }",
        &["stats"],
    ),
    // Macro arguments: expressions, and tokens that are not.
    (
        "eval.rs",
        r#"fn f() { println!("{}", crate::report::x()); tracing::info!(n = %crate::api::n(), "x"); }"#,
        &["api", "report"],
    ),
    // Comments, doc comments, strings, external crates and `pub(crate)`
    // name no module.
    (
        "eval.rs",
        "// crate::serve\n/// crate::api\npub(crate) fn f(s: serde_json::Value) { \
         let t = \"crate::watch\"; std::mem::drop((s, t)); }",
        &[],
    ),
];

#[test]
fn the_check_sees_every_use_and_path() {
    for (file, source, expected) in SNIPPETS {
        let expected: BTreeSet<String> = expected.iter().map(|m| m.to_string()).collect();
        assert_eq!(
            uses_of(Path::new(file), source),
            expected,
            "{file}: {source}"
        );
    }
}

/// Snippets whose module uses a layer above it, and what the check says.
const UPWARD: &[(&str, &str, &[&str])] = &[
    (
        "config.rs",
        "use crate::{harness, serve::Daemon};",
        &["config uses harness", "config uses serve"],
    ),
    (
        "cuda/measure.rs",
        "mod tests { fn f() { super::super::super::worker::start(); } }",
        &["cuda uses worker"],
    ),
    ("worker.rs", "use crate::{cuda, harness};", &[]),
];

#[test]
fn an_upward_use_is_reported() {
    let order = documented_order("daemon");
    let modules = library_modules("daemon");
    for (file, source, expected) in UPWARD {
        let module = file_module(Path::new(file))[0].clone();
        let mut used = uses_of(Path::new(file), source);
        used.retain(|m| modules.contains(m));
        let uses = BTreeMap::from([(module, used)]);
        assert_eq!(upward_uses(&order, &uses), *expected, "{file}: {source}");
    }
}
