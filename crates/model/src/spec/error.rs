//! `SpecError`: one line naming the file, the line (and column) and the field.

use std::fmt;
use std::path::{Path, PathBuf};

/// A spec that cannot be loaded or instantiated.
///
/// Displays as one line, `<file>:<line>:<column>: <field>: <message>`; the
/// line and column are left out only when the file itself cannot be read.
/// `field` is the path of the offending value (`launch.block`, `args[2].fill`,
/// `tests.train[1].seed`); it is empty for TOML syntax errors.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct SpecError {
    /// The spec file, as it was given to [`load`](super::load) or [`parse`](super::parse).
    pub file: PathBuf,
    /// 1-based line of the offending value (or of its enclosing table).
    pub line: Option<usize>,
    /// 1-based column (in characters) on that line.
    pub column: Option<usize>,
    /// Dotted path of the field, e.g. `args[0].fill`.
    pub field: String,
    /// What is wrong and what was expected.
    pub message: String,
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(column) = self.column {
                write!(f, ":{column}")?;
            }
        }
        if !self.field.is_empty() {
            write!(f, ": {}", self.field)?;
        }
        // Keep the promise of one line even if a message (an OS error, a
        // TOML parser message) carries newlines.
        let message = self
            .message
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        write!(f, ": {message}")
    }
}

/// Maps byte offsets of the spec text to 1-based lines and columns.
#[derive(Debug, Clone)]
pub(crate) struct Locator {
    file: PathBuf,
    text: String,
    line_starts: Vec<usize>,
}

impl Locator {
    pub(crate) fn new(file: &Path, text: &str) -> Self {
        let mut line_starts = vec![0];
        line_starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        Locator {
            file: file.to_path_buf(),
            text: text.to_string(),
            line_starts,
        }
    }

    /// 1-based (line, column) of a byte offset; the column counts characters.
    pub(crate) fn line_col(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        let line = match self.line_starts.binary_search(&offset) {
            Ok(i) => i,
            Err(i) => i - 1,
        };
        let start = self.line_starts[line];
        let column = self
            .text
            .get(start..offset)
            .map_or(offset - start, |s| s.chars().count());
        (line + 1, column + 1)
    }

    pub(crate) fn error(
        &self,
        offset: usize,
        field: &str,
        message: impl Into<String>,
    ) -> SpecError {
        let (line, column) = self.line_col(offset);
        SpecError {
            file: self.file.clone(),
            line: Some(line),
            column: Some(column),
            field: field.to_string(),
            message: message.into(),
        }
    }
}

/// Where a value sits in the spec file: its field path and its position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    pub field: String,
    pub line: usize,
    pub column: usize,
}

impl Location {
    pub(crate) fn at(loc: &Locator, offset: usize, field: &str) -> Self {
        let (line, column) = loc.line_col(offset);
        Location {
            field: field.to_string(),
            line,
            column,
        }
    }

    pub fn error(&self, file: &Path, message: impl Into<String>) -> SpecError {
        SpecError {
            file: file.to_path_buf(),
            line: Some(self.line),
            column: Some(self.column),
            field: self.field.clone(),
            message: message.into(),
        }
    }
}
