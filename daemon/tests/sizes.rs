//! The house rules on size (ARCHITECTURE.md, "Crates"): no Rust source file
//! over 700 lines, tests included, and at most 10 functions over 100 lines
//! outside tests. Long functions split where their parts have names; the
//! few left are listed when the count is exceeded.

use proc_macro2::Span;
use std::path::{Path, PathBuf};
use syn::spanned::Spanned;
use syn::visit::{self, Visit};

const MAX_FILE_LINES: usize = 700;
const LONG_FUNCTION_LINES: usize = 100;
const MAX_LONG_FUNCTIONS: usize = 10;

fn repo_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `path` from the repository's root, as the messages name it.
fn relative(path: &Path) -> String {
    let root = repo_dir();
    path.strip_prefix(&root)
        .unwrap_or(path)
        .display()
        .to_string()
}

/// Every `.rs` file of the workspace's packages (sources, tests, benches).
fn workspace_sources() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let root = repo_dir();
    let mut files = Vec::new();
    for package in [
        "crates/model",
        "crates/ir",
        "crates/search",
        "daemon",
        "client",
    ] {
        for part in ["src", "tests", "benches"] {
            let dir = root.join(package).join(part);
            if dir.is_dir() {
                walk(&dir, &mut files);
            }
        }
    }
    files
}

/// `#[test]`, or `#[cfg(test)]` (and any `cfg` naming `test`).
fn is_test_code(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| match &a.meta {
        syn::Meta::Path(path) => path.is_ident("test"),
        syn::Meta::List(list) => {
            list.path.is_ident("cfg") && list.tokens.to_string().contains("test")
        }
        syn::Meta::NameValue(_) => false,
    })
}

/// Functions with bodies outside test code, and their lengths in lines
/// (from the signature to the closing brace).
struct Functions {
    found: Vec<(String, usize)>,
}

impl Functions {
    fn record(&mut self, name: &syn::Ident, span: Span) {
        let lines = span.end().line - span.start().line + 1;
        self.found.push((name.to_string(), lines));
    }
}

impl<'ast> Visit<'ast> for Functions {
    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        if !is_test_code(&item.attrs) {
            visit::visit_item_mod(self, item);
        }
    }
    fn visit_item_fn(&mut self, item: &'ast syn::ItemFn) {
        if !is_test_code(&item.attrs) {
            self.record(&item.sig.ident, item.span());
            visit::visit_item_fn(self, item);
        }
    }
    fn visit_impl_item_fn(&mut self, item: &'ast syn::ImplItemFn) {
        if !is_test_code(&item.attrs) {
            self.record(&item.sig.ident, item.span());
            visit::visit_impl_item_fn(self, item);
        }
    }
    fn visit_trait_item_fn(&mut self, item: &'ast syn::TraitItemFn) {
        if item.default.is_some() {
            self.record(&item.sig.ident, item.span());
        }
        visit::visit_trait_item_fn(self, item);
    }
}

/// Whether a file is a test file as a whole: an integration test or bench,
/// or a `tests.rs`/`tests/` module of a source tree.
fn is_test_file(path: &Path) -> bool {
    path.components().any(|c| {
        let c = c.as_os_str();
        c == "tests" || c == "benches" || c == "tests.rs"
    })
}

#[test]
fn no_source_file_is_over_700_lines() {
    let long: Vec<String> = workspace_sources()
        .into_iter()
        .filter_map(|path| {
            let lines = std::fs::read_to_string(&path).unwrap().lines().count();
            (lines > MAX_FILE_LINES).then(|| format!("{} ({lines} lines)", relative(&path)))
        })
        .collect();
    assert!(
        long.is_empty(),
        "files over {MAX_FILE_LINES} lines: {long:?}"
    );
}

#[test]
fn at_most_ten_functions_are_over_100_lines_outside_tests() {
    let mut long = Vec::new();
    for path in workspace_sources().iter().filter(|p| !is_test_file(p)) {
        let source = std::fs::read_to_string(path).unwrap();
        let parsed = syn::parse_file(&source).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let mut functions = Functions { found: Vec::new() };
        functions.visit_file(&parsed);
        for (name, lines) in functions.found {
            if lines > LONG_FUNCTION_LINES {
                long.push(format!("{}: {name} ({lines} lines)", relative(path)));
            }
        }
    }
    assert!(
        long.len() <= MAX_LONG_FUNCTIONS,
        "{} functions over {LONG_FUNCTION_LINES} lines outside tests (at most {MAX_LONG_FUNCTIONS}): {long:#?}",
        long.len()
    );
}

/// The counter itself: a long function is counted, test code is not.
#[test]
fn the_function_count_sees_long_functions_and_skips_tests() {
    let body = "    let x = 1;\n".repeat(LONG_FUNCTION_LINES);
    let source = format!(
        "fn long() {{\n{body}}}\nfn short() {{}}\n#[cfg(test)]\nmod tests {{ fn long_test() {{\n{body}}} }}\n\
         #[test]\nfn long_case() {{\n{body}}}\nimpl S {{ fn method() {{\n{body}}} }}\n"
    );
    let parsed = syn::parse_file(&source).unwrap();
    let mut functions = Functions { found: Vec::new() };
    functions.visit_file(&parsed);
    let long: Vec<&str> = functions
        .found
        .iter()
        .filter(|(_, lines)| *lines > LONG_FUNCTION_LINES)
        .map(|(name, _)| name.as_str())
        .collect();
    assert_eq!(long, ["long", "method"]);
}
