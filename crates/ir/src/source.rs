//! Edits in CUDA source terms. IR compiled with line tables
//! (`-gline-tables-only` or `-g`) gives every instruction a file and line;
//! edits keep them (LLVM copies a cloned instruction's location, and moves
//! carry theirs), so each edit can be told as a CUDA developer reads it:
//! `delete the __syncthreads() at stencil.cu:60`. Without line tables the
//! same sentences name IR ids instead.

use super::llvm;
use super::module::LiveModule;
use super::patch::{ConstKind, Edit, EditKind, InstId, Patch, ValueRef};
use super::{parse_bitcode, IrError, KernelIr};
use gevo_model::access::Reader;
use inkwell::context::Context;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// Where an instruction comes from in the CUDA source, as the line table
/// records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Location {
    /// The file name as compiled (relative to `directory`, or absolute).
    pub file: String,
    /// The compilation directory (may be empty or `.`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub directory: String,
    pub line: u32,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.file.is_empty() {
            write!(f, "line {}", self.line)
        } else {
            write!(f, "{}:{}", self.file, self.line)
        }
    }
}

/// One instruction an edit names, as it read when the edit was made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Named {
    pub id: InstId,
    /// Its IR text.
    pub ir: String,
    /// What it is in words (`__syncthreads()`, `shared-memory store`).
    pub what: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<Location>,
}

impl Named {
    /// `the __syncthreads() at stencil.cu:60`, or with the IR id when the
    /// instruction has no location.
    pub fn phrase(&self) -> String {
        match &self.location {
            Some(at) => format!("the {} at {at}", self.what),
            None => format!("the {} {}", self.what, self.id),
        }
    }

    /// Where it is: `stencil.cu:60`, or the phrase when there is no location.
    fn place(&self) -> String {
        match &self.location {
            Some(at) => at.to_string(),
            None => self.phrase(),
        }
    }
}

/// One edit of a patch told in source terms, with the instructions it names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EditStory {
    pub edit: Edit,
    /// The edit in words: `copy the __syncthreads() at lud.cu:17 to before lud.cu:22`.
    pub summary: String,
    /// Each operand SSA repair changed, in words.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub repairs: Vec<String>,
    /// The kernel it edits, in a module of several chosen kernels (a
    /// pipeline); `None` for a single kernel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<String>,
    /// The instructions the edit and its repairs name, first mention first.
    pub named: Vec<Named>,
}

impl EditStory {
    /// The distinct source locations the edit names, in order.
    pub fn locations(&self) -> Vec<&Location> {
        let mut out: Vec<&Location> = Vec::new();
        for loc in self.named.iter().filter_map(|n| n.location.as_ref()) {
            if !out.contains(&loc) {
                out.push(loc);
            }
        }
        out
    }
}

impl KernelIr {
    /// Whether the kernel's instructions carry source locations.
    pub fn has_line_tables(&self) -> bool {
        !self.source_lines.is_empty()
    }

    /// Replays `patch` edit by edit and tells each in source terms.
    pub fn describe(&self, patch: &Patch) -> Result<Vec<EditStory>, IrError> {
        self.check_patch(patch)?;
        let context = Context::create();
        let module = parse_bitcode(&context, &self.bitcode)?;
        let mut live = self.live(&module);
        let mut out = Vec::new();
        for (i, e) in patch.edits.iter().enumerate() {
            // Deleted instructions are named before the edit, created ones
            // (clones) after it.
            let mut named: BTreeMap<InstId, Named> = BTreeMap::new();
            collect(&live, e, &mut named);
            // Named only where the patch spans several kernels.
            let kernel = live
                .edit_owner(e)
                .ok()
                .filter(|_| self.parts.len() > 1)
                .map(|k| self.parts[k].symbol.clone());
            live.apply_edit(e)
                .map_err(|reason| IrError::InvalidEdit { edit: i, reason })?;
            collect(&live, e, &mut named);
            out.push(EditStory {
                kernel,
                ..story(e, &named)
            });
        }
        Ok(out)
    }
}

fn collect(live: &LiveModule, e: &Edit, named: &mut BTreeMap<InstId, Named>) {
    for id in e.ids() {
        if named.contains_key(&id) {
            continue;
        }
        // The kernel holding it, in a patch spanning several.
        let Some(k) = live.owner(id) else { continue };
        let Ok(inst) = live.parts[k].inst(id) else {
            continue;
        };
        let ir = llvm::value_to_string(inst).trim().to_string();
        let location = llvm::debug_location(inst).map(|(file, directory, line)| Location {
            file,
            directory,
            line,
        });
        named.insert(
            id,
            Named {
                id,
                what: what(&ir),
                ir,
                location,
            },
        );
    }
}

fn story(e: &Edit, named: &BTreeMap<InstId, Named>) -> EditStory {
    let unknown = |id: InstId| Named {
        id,
        ir: String::new(),
        what: "instruction".into(),
        location: None,
    };
    let n = |id: InstId| named.get(&id).cloned().unwrap_or_else(|| unknown(id));
    let value = |v: ValueRef| match v {
        ValueRef::Inst(id) => format!("the value of {}", n(id).phrase()),
        ValueRef::Arg(k) => format!("kernel parameter {k}"),
        ValueRef::Const(ConstKind::Zero) => "0".into(),
        ValueRef::Const(ConstKind::One) => "1".into(),
    };
    let summary = match e.kind {
        EditKind::Copy { src, before, .. } => {
            format!("copy {} to before {}", n(src).phrase(), n(before).place())
        }
        EditKind::Delete { target } => format!("delete {}", n(target).phrase()),
        EditKind::Move { src, before } => {
            format!("move {} to before {}", n(src).phrase(), n(before).place())
        }
        EditKind::Replace { target, with, .. } => format!(
            "replace {} with a copy of {}",
            n(target).phrase(),
            n(with).phrase()
        ),
        EditKind::Swap { a, b } => format!("swap {} and {}", n(a).phrase(), n(b).phrase()),
        EditKind::OperandReplace {
            user,
            operand,
            value: v,
        } => format!(
            "set operand {operand} of {} to {}",
            n(user).phrase(),
            value(v)
        ),
    };
    let repairs = e
        .repairs
        .iter()
        .map(|r| {
            format!(
                "operand {} of {} now takes {}",
                r.operand,
                n(r.user).phrase(),
                value(r.value)
            )
        })
        .collect();
    let mut order: Vec<InstId> = Vec::new();
    for id in e.ids() {
        if named.contains_key(&id) && !order.contains(&id) {
            order.push(id);
        }
    }
    EditStory {
        edit: e.clone(),
        summary,
        repairs,
        kernel: None,
        named: order.into_iter().map(n).collect(),
    }
}

/// What an instruction is, in a CUDA developer's words, read from its IR
/// text (`%5 = tail call void @llvm.nvvm.barrier0()` is `__syncthreads()`).
pub fn what(ir: &str) -> String {
    let body = match ir.split_once(" = ") {
        Some((lhs, rhs)) if lhs.starts_with('%') => rhs,
        _ => ir,
    };
    let mut words = body
        .split_whitespace()
        .skip_while(|w| matches!(*w, "tail" | "musttail" | "notail"));
    let opcode = words.next().unwrap_or("");
    let space = if body.contains("addrspace(3)") {
        "shared-memory "
    } else if body.contains("addrspace(1)") {
        "global-memory "
    } else {
        ""
    };
    match opcode {
        "call" => call_words(body),
        "load" => format!("{space}load"),
        "store" => format!("{space}store"),
        "atomicrmw" => format!("atomic {}", words.find(|w| *w != "volatile").unwrap_or("")),
        "cmpxchg" => "atomic compare-and-swap".into(),
        "getelementptr" => "address computation".into(),
        "icmp" | "fcmp" => "comparison".into(),
        "select" => "select (?:)".into(),
        "phi" => "phi".into(),
        "br" | "switch" => "branch".into(),
        "ret" => "return".into(),
        "alloca" => "local variable".into(),
        "add" | "fadd" => "addition".into(),
        "sub" | "fsub" => "subtraction".into(),
        "mul" | "fmul" => "multiplication".into(),
        "sdiv" | "udiv" | "fdiv" => "division".into(),
        "srem" | "urem" | "frem" => "remainder".into(),
        "fneg" => "negation".into(),
        "shl" | "lshr" | "ashr" => "shift".into(),
        "and" | "or" | "xor" => format!("bitwise {opcode}"),
        "sext" | "zext" | "trunc" | "fptosi" | "fptoui" | "sitofp" | "uitofp" | "fpext"
        | "fptrunc" => "conversion".into(),
        "bitcast" | "addrspacecast" | "ptrtoint" | "inttoptr" => "cast".into(),
        "extractelement" | "insertelement" | "shufflevector" | "extractvalue" | "insertvalue" => {
            "element access".into()
        }
        "" => "instruction".into(),
        other => format!("`{other}`"),
    }
}

fn call_words(body: &str) -> String {
    let Some(callee) = body
        .split('@')
        .nth(1)
        .and_then(|rest| rest.split('(').next())
    else {
        return "call".into();
    };
    if let Some(rest) = callee.strip_prefix("llvm.nvvm.barrier0") {
        return match rest {
            ".and" => "__syncthreads_and()",
            ".or" => "__syncthreads_or()",
            ".popc" => "__syncthreads_count()",
            _ => "__syncthreads()",
        }
        .into();
    }
    if callee.starts_with("llvm.nvvm.barrier.sync")
        || callee.starts_with("llvm.nvvm.barrier.cta.sync")
    {
        return "__syncthreads()".into();
    }
    if let Some(reg) = callee.strip_prefix("llvm.nvvm.read.ptx.sreg.") {
        let (name, axis) = reg.split_once('.').unwrap_or((reg, ""));
        let builtin = match name {
            "tid" => "threadIdx",
            "ctaid" => "blockIdx",
            "ntid" => "blockDim",
            "nctaid" => "gridDim",
            _ => return format!("read of %{reg}"),
        };
        return format!("read of {builtin}.{axis}");
    }
    if let Some(f) = callee.strip_prefix("__nv_") {
        return format!("call to {f}()");
    }
    if callee.starts_with("llvm.") {
        return format!("{callee} intrinsic");
    }
    let name = cpp_demangle::Symbol::new(callee)
        .ok()
        .map(|s| s.to_string())
        .unwrap_or_else(|| callee.to_string());
    format!("call to {}", name.split('(').next().unwrap_or(&name))
}

/// The CUDA sources a kernel's line tables name, read through a [`Reader`]
/// and looked up near the kernel's files: a relative name is tried against
/// the recorded compilation directory, then each base directory and its
/// parents (the IR may sit below the directory it was compiled in), then
/// by its file name alone in each base.
pub struct SourceFiles {
    reader: Option<Reader>,
    bases: Vec<PathBuf>,
    files: BTreeMap<(String, String), Option<Vec<String>>>,
}

/// Parents above a base that are tried.
const PARENTS: usize = 4;

impl SourceFiles {
    /// Looks for sources near `near` (files or directories: the IR, the
    /// spec), reading them as `reader`.
    pub fn near(reader: Reader, near: &[&Path]) -> Self {
        let mut bases: Vec<PathBuf> = Vec::new();
        for path in near {
            let dir = if path.is_dir() {
                path.to_path_buf()
            } else {
                match path.parent() {
                    Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
                    _ => PathBuf::from("."),
                }
            };
            if !bases.contains(&dir) {
                bases.push(dir);
            }
        }
        SourceFiles {
            reader: Some(reader),
            bases,
            files: BTreeMap::new(),
        }
    }

    /// Reads nothing: locations are named, their text is not shown.
    pub fn none() -> Self {
        SourceFiles {
            reader: None,
            bases: Vec::new(),
            files: BTreeMap::new(),
        }
    }

    /// The text of the location's line, trimmed, when its file is readable.
    pub fn line(&mut self, at: &Location) -> Option<String> {
        let lines = self.lines(at)?;
        let text = lines.get(at.line.checked_sub(1)? as usize)?;
        Some(text.trim().to_string())
    }

    /// The location's line with `radius` lines either side, numbered.
    pub fn context(&mut self, at: &Location, radius: u32) -> Vec<(u32, String)> {
        let Some(lines) = self.lines(at) else {
            return Vec::new();
        };
        let first = at.line.saturating_sub(radius).max(1);
        let last = at.line.saturating_add(radius);
        (first..=last)
            .filter_map(|n| Some((n, lines.get(n as usize - 1)?.trim_end().to_string())))
            .collect()
    }

    fn lines(&mut self, at: &Location) -> Option<&Vec<String>> {
        let key = (at.file.clone(), at.directory.clone());
        if !self.files.contains_key(&key) {
            let found = self.find(at);
            self.files.insert(key.clone(), found);
        }
        self.files.get(&key)?.as_ref()
    }

    fn find(&self, at: &Location) -> Option<Vec<String>> {
        let reader = self.reader.as_ref()?;
        let file = Path::new(&at.file);
        if at.file.is_empty() {
            return None;
        }
        let mut candidates: Vec<PathBuf> = Vec::new();
        if file.is_absolute() {
            candidates.push(file.to_path_buf());
        } else {
            let dir = Path::new(&at.directory);
            if dir.is_absolute() {
                candidates.push(dir.join(file));
            }
            for base in &self.bases {
                candidates.extend(base.ancestors().take(PARENTS + 1).map(|a| a.join(file)));
            }
        }
        if let Some(name) = file.file_name() {
            candidates.extend(self.bases.iter().map(|b| b.join(name)));
        }
        candidates.into_iter().find_map(|path| {
            let text = String::from_utf8(reader.read_for_display(&path).ok()?).ok()?;
            Some(text.lines().map(str::to_string).collect())
        })
    }
}

/// The edit in one line with the source text of the lines it names:
/// `delete the __syncthreads() at stencil.cu:60` then `stencil.cu:60: __syncthreads();`.
pub fn source_lines(story: &EditStory, files: &mut SourceFiles) -> Vec<(Location, String)> {
    story
        .locations()
        .into_iter()
        .filter_map(|at| Some((at.clone(), files.line(at)?)))
        .collect()
}

/// IR text without debug locations (`, !dbg !12` and the `!DILocation`
/// lines): an edit renumbers them all below it, which would bury an IR diff
/// in noise.
pub fn without_debug_locations(ir: &str) -> String {
    let mut out = String::with_capacity(ir.len());
    for line in ir.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with('!') && line.contains("= !DILocation(") {
            continue;
        }
        let mut rest = line;
        while let Some(at) = rest.find(", !dbg !") {
            out.push_str(&rest[..at]);
            let tail = &rest[at + ", !dbg !".len()..];
            let digits = tail.bytes().take_while(u8::is_ascii_digit).count();
            rest = &tail[digits..];
        }
        out.push_str(rest);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{what, without_debug_locations};

    #[test]
    fn debug_locations_are_left_out_of_diffs() {
        let ir = "  call void @llvm.nvvm.barrier0(), !dbg !69\n  %3 = load float, ptr %2, align 4, !dbg !7, !tbaa !35\n!69 = !DILocation(line: 60, column: 5, scope: !8)\n!8 = distinct !DISubprogram(name: \"k\")\n";
        assert_eq!(
            without_debug_locations(ir),
            "  call void @llvm.nvvm.barrier0()\n  %3 = load float, ptr %2, align 4, !tbaa !35\n!8 = distinct !DISubprogram(name: \"k\")\n"
        );
    }

    #[test]
    fn instructions_are_named_in_cuda_words() {
        for (ir, words) in [
            ("tail call void @llvm.nvvm.barrier0()", "__syncthreads()"),
            (
                "call void @llvm.nvvm.barrier0(), !dbg !7",
                "__syncthreads()",
            ),
            (
                "call void @llvm.nvvm.barrier.sync(i32 0)",
                "__syncthreads()",
            ),
            (
                "%3 = tail call i32 @llvm.nvvm.read.ptx.sreg.tid.x()",
                "read of threadIdx.x",
            ),
            (
                "store float 0.0, ptr addrspace(3) @tile, align 4",
                "shared-memory store",
            ),
            ("%7 = load float, ptr %6, align 4", "load"),
            ("%9 = fadd contract float %7, %8", "addition"),
            ("%2 = call float @__nv_expf(float %1)", "call to expf()"),
            ("%4 = icmp slt i32 %2, %3", "comparison"),
            ("%5 = atomicrmw add ptr %p, i32 1 monotonic", "atomic add"),
        ] {
            assert_eq!(what(ir), words, "{ir}");
        }
    }
}
