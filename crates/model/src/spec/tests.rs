//! Unit tests of `spec`, by concern: expressions, output comparison, generated
//! fills, and small inline specs as loaded (hashes, error positions, other TOML
//! spellings). This file holds the helpers they share.

mod backends;
mod block_bounds;
mod comparison;
mod expressions;
mod fills;
mod generation;
mod loading;
mod skeleton_launches;
mod tuning;

use super::*;
use std::collections::BTreeMap;

fn params(list: &[(&str, f64)]) -> BTreeMap<String, f64> {
    list.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

/// A directory with an empty `k.ll`, so that inline specs can name it.
fn ir_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("k.ll"), "; empty\n").unwrap();
    dir
}

fn spec_with(dir: &std::path::Path, args: &str, extra: &str) -> Result<Spec, SpecError> {
    let text = format!(
        "version = 1\nir = \"k.ll\"\nkernel = \"k\"\n[launch]\ngrid = [\"cdiv(n, 64)\"]\nblock = [64]\n{extra}\n{args}\n\
         [tests]\ntrain = [{{ n = 100, seed = 1 }}]\nheldout = [{{ n = 300, seed = 2 }}]\n\
         [acceptance]\nmetric = \"max_abs\"\ntolerance = 0.001\n"
    );
    parse(&dir.join("k.gevo.toml"), &text)
}

const OUT: &str =
    "[[args]]\nname = \"y\"\nkind = \"buffer\"\ntype = \"f32\"\nlen = \"n\"\nrole = \"out\"\n";

fn buffer(name: &str, ty: &str, fill: &str) -> String {
    format!("[[args]]\nname = \"{name}\"\nkind = \"buffer\"\ntype = \"{ty}\"\nlen = \"n\"\nfill = {fill}\nrole = \"in\"\n")
}

fn data(inst: &Instance, i: usize) -> &[u8] {
    match &inst.args[i] {
        ArgValue::Buffer { data, .. } => data,
        ArgValue::Scalar(_) => panic!("scalar"),
    }
}
