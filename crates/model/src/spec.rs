//! Kernel spec files (`*.gevo.toml`): parse, validate, instantiate test inputs,
//! compare outputs. Plain Rust, no LLVM.
//!
//! The format is documented in docs/spec.md. [`load`] (or [`parse`]) reads a
//! spec and checks everything that can be checked without running the kernel,
//! including every expression against every test's parameters;
//! [`Spec::instantiate`] turns one test case into launch geometry and argument
//! bytes; [`compare`] judges an output buffer against the reference.

mod compare;
mod error;
pub mod expr;
pub mod generate;
mod inputs;
mod load;
mod model;
pub mod npy;
mod pipeline;
pub mod skeleton;
mod tree;
pub mod tune;

pub use compare::{compare, REL_TINY};
pub use error::{Location, SpecError};
pub use expr::{Expr, ExprError};
pub use inputs::{fill_seed, MAX_BLOCK_THREADS, MAX_BUFFER_BYTES};
pub use load::SPEC_VERSION;
pub use model::{
    scalar_bits, Acceptance, ArgKind, ArgSpec, ArgValue, Comparison, ElemType, Fill, Harness,
    HarnessOutput, Instance, Launch, Located, Metric, Number, Repeat, Role, Scalar, Spec, TestCase,
    TestSet, TestTarget, HARNESS_PLACEHOLDERS,
};
pub use pipeline::{
    LaunchArg, LaunchInstance, LaunchParam, LaunchSpec, LoopSpec, Step, MAX_LAUNCHES,
};

use crate::access::Reader;
use std::path::Path;

/// Reads and validates a spec file, as the user running gevod.
pub fn load(path: &Path) -> Result<Spec, SpecError> {
    load_as(path, &Reader::Caller)
}

/// Reads and validates a spec file, reading it and every file it names for
/// `reader` (the daemon reads for the spec's owner).
pub fn load_as(path: &Path, reader: &Reader) -> Result<Spec, SpecError> {
    let text = reader.read_to_string(path).map_err(|e| SpecError {
        file: path.to_path_buf(),
        line: None,
        column: None,
        field: String::new(),
        // The error names the path too: say it once.
        message: format!("cannot read spec file: {}", e.about(path)),
    })?;
    parse_as(path, &text, reader)
}

/// Validates a spec given as text; `path_for_messages` names it in errors,
/// and relative paths (`ir`, data files) are resolved against its directory.
pub fn parse(path_for_messages: &Path, text: &str) -> Result<Spec, SpecError> {
    parse_as(path_for_messages, text, &Reader::Caller)
}

/// [`parse`], reading the files the spec names for `reader`.
pub fn parse_as(path_for_messages: &Path, text: &str, reader: &Reader) -> Result<Spec, SpecError> {
    load::parse_spec(path_for_messages, text, reader)
}

impl Spec {
    /// The test cases of a set: train, heldout, or both (train first).
    pub fn tests(&self, set: TestSet) -> Vec<&TestCase> {
        match set {
            TestSet::Train => self.train.iter().collect(),
            TestSet::Heldout => self.heldout.iter().collect(),
            TestSet::All => self.train.iter().chain(&self.heldout).collect(),
            // Made by the evaluator that runs them (`eval`), not held here.
            TestSet::Generated => Vec::new(),
        }
    }

    /// The spec as `target` runs it: `train` and `heldout` are those of
    /// `[tests.sim]` or `[tests.gpu]` where that table gives them, else
    /// `[tests]`'s. Tests keep their names (`train[0]`, `heldout[1]`).
    /// Chosen from the file's sets whatever this spec's current ones are,
    /// so applying it twice, for either target, is safe.
    pub fn for_backend(&self, target: TestTarget) -> Spec {
        let written = &self.written;
        let o = written.overrides(target);
        Spec {
            train: o.train.clone().unwrap_or_else(|| written.train.clone()),
            heldout: o.heldout.clone().unwrap_or_else(|| written.heldout.clone()),
            ..self.clone()
        }
    }

    /// The text of this spec made to run `config` of its `[tune]` (an
    /// ordinary spec, which workers and the store take like any other);
    /// `None` without `[tune]`, or when the spec chose one already.
    pub fn configured_text(&self, config: &tune::Configuration) -> Option<String> {
        match &self.tune {
            Some(t) if !t.chosen_written => Some(tune::configured_text(&self.text, config)),
            _ => None,
        }
    }

    /// The spec file's text, as read.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// SHA-256 (hex) of the spec file's text, as read.
    pub fn content_hash(&self) -> String {
        gevo_client::export::sha256_hex(self.text.as_bytes())
    }

    /// SHA-256 (hex) of a canonical text of the set's test cases: the line
    /// `gevo-spec-tests-v1`, then per test, in order, one line
    /// `<name> seed=<seed>` followed by ` <param>=<f64 bits as 16 hex digits>`
    /// for each parameter in name order. Formatting of the spec file and
    /// everything outside `[tests]` do not change it.
    pub fn test_set_hash(&self, set: TestSet) -> String {
        let mut text = String::from("gevo-spec-tests-v1\n");
        for t in self.tests(set) {
            text.push_str(&format!("{} seed={}", t.name, t.seed));
            for (k, v) in &t.params {
                text.push_str(&format!(" {k}={:016x}", v.to_bits()));
            }
            text.push('\n');
        }
        gevo_client::export::sha256_hex(text.as_bytes())
    }

    /// Indices of the arguments whose final contents are compared
    /// (`out` and `inout` buffers).
    pub fn outputs(&self) -> Vec<usize> {
        self.args
            .iter()
            .enumerate()
            .filter(|(_, a)| matches!(a.kind, ArgKind::Buffer { role, .. } if role.is_output()))
            .map(|(i, _)| i)
            .collect()
    }

    /// The index of the argument named `name`.
    pub fn arg_index(&self, name: &str) -> Option<usize> {
        self.args.iter().position(|a| a.name == name)
    }
}

#[cfg(test)]
mod tests;
