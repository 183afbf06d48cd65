//! A patch's edits in CUDA source terms, as the terminal, the API and the
//! HTML report show them: words, the source lines with their text, the IR.

use gevo_client::explain::{SourceEdit, SourceLine};
use gevo_ir::{IrError, KernelIr, Location, Patch, SourceFiles};

/// Lines of source shown around each edited line in the HTML report.
pub const CONTEXT_LINES: u32 = 3;

/// Each edit of `patch` in source terms, with the text of the lines it
/// names where `files` can read them.
pub fn source_edits(
    ir: &KernelIr,
    patch: &Patch,
    files: &mut SourceFiles,
) -> Result<Vec<SourceEdit>, IrError> {
    Ok(ir
        .describe(patch)?
        .into_iter()
        .map(|story| {
            let lines = story
                .locations()
                .into_iter()
                .map(|at| SourceLine {
                    location: at.to_string(),
                    text: files.line(at),
                })
                .collect();
            SourceEdit {
                summary: story.summary.clone(),
                ir: story.edit.to_string(),
                lines,
                repairs: story.repairs.clone(),
                kernel: story.kernel.clone(),
            }
        })
        .collect())
}

/// One excerpt of a source file around a line an edit names.
#[derive(Debug, Clone, PartialEq)]
pub struct Excerpt {
    /// `stencil.cu:60`.
    pub location: String,
    /// The edited line's number.
    pub line: u32,
    /// Numbered lines around it.
    pub lines: Vec<(u32, String)>,
}

/// The source around every distinct line `patch`'s edits name, in the
/// order first named; a location whose file cannot be read has none.
pub fn excerpts(
    ir: &KernelIr,
    patch: &Patch,
    files: &mut SourceFiles,
) -> Result<Vec<Excerpt>, IrError> {
    let mut seen: Vec<Location> = Vec::new();
    for story in ir.describe(patch)? {
        for at in story.locations() {
            if !seen.contains(at) {
                seen.push(at.clone());
            }
        }
    }
    Ok(seen
        .into_iter()
        .filter_map(|at| {
            let lines = files.context(&at, CONTEXT_LINES);
            (!lines.is_empty()).then(|| Excerpt {
                location: at.to_string(),
                line: at.line,
                lines,
            })
        })
        .collect())
}

/// The edits as text lines (numbered, indented), for terminal output.
pub fn text(
    ir: &KernelIr,
    patch: &Patch,
    files: &mut SourceFiles,
    indent: &str,
) -> Result<String, IrError> {
    let edits = source_edits(ir, patch, files)?;
    Ok(gevo_client::explain::render_edits(
        &edits,
        ir.has_line_tables(),
        indent,
    ))
}

/// Source files for a kernel read by the user running gevod, looked up near
/// the spec and the IR.
pub fn files_near(spec: &std::path::Path, ir: &std::path::Path) -> SourceFiles {
    SourceFiles::near(gevo_model::access::Reader::Caller, &[ir, spec])
}
