//! `[tune]`: the preprocessor constants a spec lets gevo choose (block and
//! tile sizes), the values to try, the values the source defines, and the
//! configuration a spec runs. A configuration is one value per constant; each
//! has its own IR (the source built with `-D NAME=value`), found by the `ir`
//! pattern. The constants are parameters of every test, so launch and buffer
//! expressions use them like sizes (docs/spec.md, "Tunable constants").

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One value per constant, by name.
pub type Configuration = BTreeMap<String, i64>;

/// At most this many configurations (the product of the value lists): each
/// is compiled and timed before the search.
pub const MAX_CONFIGURATIONS: usize = 1024;

/// The table `[tune.chosen]` that [`Tune::configured_text`] appends.
pub const CHOSEN_TABLE: &str = "tune.chosen";

#[derive(Debug, Clone, PartialEq)]
pub struct Tune {
    /// Each constant with the values to try, in the spec's order.
    pub constants: Vec<(String, Vec<i64>)>,
    /// The values the source defines: what the spec's top-level `ir` was
    /// built with (`[tune.source]`).
    pub source: Configuration,
    /// The configuration this spec runs: `[tune.chosen]`, else the source's.
    pub chosen: Configuration,
    /// Whether `[tune.chosen]` was written (a configured spec).
    pub chosen_written: bool,
    /// The IR of a configuration other than the source's: `{NAME}` stands
    /// for the constant's value; relative to the spec file's directory.
    pub ir_pattern: Option<String>,
}

impl Tune {
    /// Every configuration to try, the first constant varying slowest,
    /// each constant's values in the spec's order; the source's first when
    /// it is not among them.
    pub fn configurations(&self) -> Vec<Configuration> {
        let mut all: Vec<Configuration> = vec![Configuration::new()];
        for (name, values) in &self.constants {
            all = all
                .into_iter()
                .flat_map(|c| {
                    values.iter().map(move |v| {
                        let mut c = c.clone();
                        c.insert(name.clone(), *v);
                        c
                    })
                })
                .collect();
        }
        if !all.contains(&self.source) {
            all.insert(0, self.source.clone());
        }
        all
    }

    /// The IR file of `config`, relative paths against `dir`: the pattern
    /// filled in, or `None` for the source's configuration (the spec's
    /// top-level `ir`).
    pub fn ir_path(&self, dir: &Path, config: &Configuration) -> Option<PathBuf> {
        if *config == self.source {
            return None;
        }
        let pattern = self.ir_pattern.as_deref()?;
        Some(dir.join(fill_pattern(pattern, config)))
    }
}

/// `pattern` with each `{NAME}` replaced by the constant's value.
pub fn fill_pattern(pattern: &str, config: &Configuration) -> String {
    let mut out = pattern.to_string();
    for (name, value) in config {
        out = out.replace(&format!("{{{name}}}"), &value.to_string());
    }
    out
}

/// `NAME=value` pairs in name order, separated by spaces: how messages,
/// tables and the client show a configuration.
pub fn describe(config: &Configuration) -> String {
    config
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The spec text `text` made to run `config`: `[tune.chosen]` appended (a
/// table header after every other table is valid TOML, whatever the
/// spelling above it). The caller checks that `text` has none yet.
pub fn configured_text(text: &str, config: &Configuration) -> String {
    let mut out = text.to_string();
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(&format!("\n[{CHOSEN_TABLE}]\n"));
    for (name, value) in config {
        out.push_str(&format!("{name} = {value}\n"));
    }
    out
}
