//! Edits in CUDA source terms as the daemon sends them and both programs
//! print them: what the edit does in words, the source lines it names (with
//! their text when the daemon could read the file), and the IR form.

use serde::{Deserialize, Serialize};

/// One edit of a patch in source terms.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SourceEdit {
    /// `delete the __syncthreads() at stencil.cu:60`.
    pub summary: String,
    /// The edit as IR (`delete i87`), repairs included.
    pub ir: String,
    /// The source lines the edit names, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lines: Vec<SourceLine>,
    /// Each operand SSA repair changed, in words.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub repairs: Vec<String>,
    /// The kernel it edits, in a pipeline of several; absent for a single
    /// kernel (and from older daemons).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<String>,
}

/// A source location and, when readable, its text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SourceLine {
    /// `stencil.cu:60`.
    pub location: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

/// Said once when the IR has no line tables.
pub const NO_LINE_TABLES: &str = "the kernel's IR has no line tables, so edits name IR \
     instructions (compile it with -gline-tables-only to see CUDA source lines)";

/// The edits numbered from 1, each with its source lines and IR form,
/// indented by `indent`; the note about missing line tables first when
/// there are none.
pub fn render_edits(edits: &[SourceEdit], line_tables: bool, indent: &str) -> String {
    let mut out = String::new();
    if !line_tables && !edits.is_empty() {
        out += &format!("{indent}({NO_LINE_TABLES})\n");
    }
    for (i, e) in edits.iter().enumerate() {
        match &e.kernel {
            Some(k) => out += &format!("{indent}{}. (in {k}) {}\n", i + 1, e.summary),
            None => out += &format!("{indent}{}. {}\n", i + 1, e.summary),
        }
        for line in &e.lines {
            match &line.text {
                Some(text) => out += &format!("{indent}     {} | {text}\n", line.location),
                None => out += &format!("{indent}     {} | (source not readable)\n", line.location),
            }
        }
        for r in &e.repairs {
            out += &format!("{indent}     repair: {r}\n");
        }
        out += &format!("{indent}     IR: {}\n", e.ir);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edits_show_words_source_and_ir() {
        let edit = SourceEdit {
            summary: "delete the __syncthreads() at stencil.cu:60".into(),
            ir: "delete i87".into(),
            lines: vec![SourceLine {
                location: "stencil.cu:60".into(),
                text: Some("__syncthreads();".into()),
            }],
            repairs: vec![],
            kernel: None,
        };
        assert_eq!(
            render_edits(std::slice::from_ref(&edit), true, "  "),
            "  1. delete the __syncthreads() at stencil.cu:60\n       stencil.cu:60 | __syncthreads();\n       IR: delete i87\n"
        );
        let text = render_edits(&[edit], false, "");
        assert!(text.starts_with(&format!("({NO_LINE_TABLES})\n")), "{text}");
    }
}
