//! A pipeline's guarded build assembled a kernel at a time: its PTX split
//! into one relocatable part per kernel and a common part with the
//! module's visible variables, each part assembled by `ptxas -c` once and
//! kept by its text's hash, the parts linked by nvlink. A patch edits one
//! kernel or two, so a variant of a four-kernel module re-assembles only
//! those (issue "Every GPU busy": lu's compile workers spent most of their
//! time in ptxas on the whole module). Only the guarded build is assembled
//! this way; what is timed is assembled whole, as a user's build would.
//!
//! The split reads the PTX as LLVM's NVPTX back end writes it; a module it
//! does not understand (an unknown directive, a weak symbol, a mutable
//! internal variable two kernels could share) is assembled whole.

use super::ptx_items::{function_name, items, mentions, variable_name, Item};
use super::toolkit::{AssembleError, Assembler, Assembling, Cubin};
use gevo_ir::content_hash;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The runtime's scratch: an internal variable each part may hold a copy
/// of (refused accesses land there; nothing reads it back).
const PART_LOCAL_GLOBALS: [&str; 1] = ["__gevo_scratch"];

/// Parts kept per compile worker before the cache starts again.
const CACHE_LIMIT: usize = 512;

/// A module's PTX split for separate assembly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parts {
    /// The module's visible variables, defined once.
    pub common: String,
    /// Per kernel, in the module's order: the kernel, and the functions
    /// (made internal) and variables (visible ones declared `.extern`) it
    /// uses.
    pub kernels: Vec<(String, String)>,
}

/// `ptx` split into parts, or `None` where it has fewer than two kernels
/// or holds what the split does not handle.
pub fn split(ptx: &str) -> Option<Parts> {
    let items = items(ptx)?;
    let entries = items
        .iter()
        .filter(|i| matches!(i, Item::Entry { .. }))
        .count();
    if entries < 2 {
        return None;
    }
    let (mut head, mut common) = (String::new(), String::new());
    // What each kernel's part may hold besides the kernel, by name:
    // variables, then functions in the module's order.
    let mut variables: Vec<(String, String)> = Vec::new();
    let mut functions: Vec<(String, String)> = Vec::new();
    for item in &items {
        match item {
            Item::Preamble(text) => {
                head += text;
                common += text;
            }
            Item::Prototype(text) => functions.push((function_name(text)?, text.clone())),
            Item::Function(text) => functions.push((
                function_name(text)?,
                function_numbers_dropped(&internal(text)),
            )),
            Item::Variable(text) => match text.strip_prefix(".visible ") {
                Some(rest) => {
                    common += text;
                    variables.push((
                        variable_name(rest)?,
                        format!(".extern {}", declaration(rest)),
                    ));
                }
                None if mutable_and_shared(text) => return None,
                None => variables.push((variable_name(text)?, text.clone())),
            },
            Item::Entry { .. } => {}
        }
    }
    // By name, where no variable's initializer names another: where an
    // edit moves a variable in the module, other kernels' parts stay.
    let independent = variables.iter().all(|(_, text)| {
        variables
            .iter()
            .all(|(other, _)| !text.contains('=') || !mentions(text, other))
    });
    if independent {
        variables.sort();
    }
    let mut shared = variables;
    shared.extend(functions);
    let kernels = items
        .iter()
        .filter_map(|item| match item {
            Item::Entry { name, text } => {
                let text = &function_numbers_dropped(text);
                let used = used_by(text, &shared);
                let held: String = shared
                    .iter()
                    .filter(|(name, _)| used.contains(name))
                    .map(|(_, text)| text.as_str())
                    .collect();
                Some((name.clone(), format!("{head}{held}{text}")))
            }
            _ => None,
        })
        .collect();
    Some(Parts { common, kernels })
}

/// The functions and variables among `shared` that `kernel` uses,
/// directly or through each other: a kernel's part holds only those, so
/// that what an edit of another kernel adds or moves (a function of the
/// guard runtime, a kernel's shared array) leaves it as it was.
fn used_by(kernel: &str, shared: &[(String, String)]) -> Vec<String> {
    let mut used: Vec<String> = Vec::new();
    let mut reached = vec![kernel];
    while let Some(text) = reached.pop() {
        for (name, _) in shared {
            if !used.contains(name) && mentions(text, name) {
                used.push(name.clone());
                // A function's prototype and its body share the name.
                reached.extend(
                    shared
                        .iter()
                        .filter(|(n, _)| n == name)
                        .map(|(_, t)| t.as_str()),
                );
            }
        }
    }
    used
}

/// A function's text with the function's number in the module taken out
/// of its labels and local depot (`$L__BB9_1` -> `$L__BB_1`,
/// `__local_depot9` -> `__local_depot`): both are scoped to the function,
/// and the number moves when the guard runtime adds a function before it.
fn function_numbers_dropped(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = ["$L__BB", "__local_depot"]
        .iter()
        .filter_map(|prefix| rest.find(prefix).map(|at| (at, prefix.len())))
        .min()
    {
        let (at, len) = at;
        out += &rest[..at + len];
        rest = rest[at + len..].trim_start_matches(|c: char| c.is_ascii_digit());
    }
    out += rest;
    out
}

/// A function made internal to its part: each part holds its own copy.
fn internal(text: &str) -> String {
    match text.strip_prefix(".visible ") {
        Some(rest) => rest.to_string(),
        None => text.to_string(),
    }
}

/// A variable's definition as a declaration: its initializer dropped.
fn declaration(definition: &str) -> String {
    let text = definition.trim_end();
    match text.find(" = ") {
        Some(at) => format!("{};\n", &text[..at]),
        None => format!("{text}\n"),
    }
}

/// An internal `.global` other than the runtime's scratch: kernels of the
/// module may share it, which parts' copies would not.
fn mutable_and_shared(text: &str) -> bool {
    text.trim_start().starts_with(".global")
        && !PART_LOCAL_GLOBALS.iter().any(|name| {
            text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .any(|word| word == *name)
        })
}

/// ptxas for guarded builds, a kernel at a time where the module splits,
/// with the parts it assembled kept by their text's hash.
#[derive(Debug)]
pub struct PartAssembler {
    assembler: Assembler,
    nvlink: Option<PathBuf>,
    cache: HashMap<String, Cubin>,
    /// ptxas runs on parts so far (cache misses).
    pub parts_assembled: u64,
}

impl PartAssembler {
    pub fn new(assembler: Assembler) -> Self {
        PartAssembler {
            nvlink: assembler.linker(),
            assembler,
            cache: HashMap::new(),
            parts_assembled: 0,
        }
    }

    /// `ptx` assembled for `arch`: its parts (those not assembled before,
    /// at once) linked where it splits and nvlink is found, else whole (and
    /// whole where the parts fail: ptxas says then what is wrong).
    pub fn assemble(&mut self, ptx: &str, arch: &str) -> Result<Cubin, AssembleError> {
        self.assemble_linked(ptx, arch).or_else(|e| {
            tracing::debug!("assembling the module whole: {e}");
            self.assembler.assemble(ptx, arch)
        })
    }

    /// `ptx` assembled from its parts and linked, with no fallback: an
    /// error where it does not split, nvlink is missing or a part fails
    /// (the GPU suite's check of linked builds).
    pub fn assemble_linked(&mut self, ptx: &str, arch: &str) -> Result<Cubin, AssembleError> {
        let unsplit = |why: &str| AssembleError::Rejected {
            ptxas: self.assembler.program().to_path_buf(),
            arch: arch.to_string(),
            log: why.to_string(),
        };
        let nvlink = self
            .nvlink
            .clone()
            .ok_or_else(|| unsplit("no nvlink found"))?;
        let parts = split(ptx).ok_or_else(|| unsplit("the module does not split into parts"))?;
        self.assemble_parts(&nvlink, &parts, arch)
    }

    fn assemble_parts(
        &mut self,
        nvlink: &Path,
        parts: &Parts,
        arch: &str,
    ) -> Result<Cubin, AssembleError> {
        let texts: Vec<&str> = std::iter::once(parts.common.as_str())
            .chain(parts.kernels.iter().map(|(_, text)| text.as_str()))
            .collect();
        let keys: Vec<String> = texts
            .iter()
            .map(|t| format!("{arch} {}", content_hash(t.as_bytes())))
            .collect();
        let started: Vec<(usize, Assembling)> = texts
            .iter()
            .enumerate()
            .filter(|(i, _)| !self.cache.contains_key(&keys[*i]))
            .map(|(i, text)| Ok((i, self.assembler.start_relocatable(text, arch)?)))
            .collect::<Result<_, AssembleError>>()?;
        if self.cache.len() + started.len() > CACHE_LIMIT {
            self.cache.clear();
        }
        let mut fresh = HashMap::new();
        for (i, assembling) in started {
            self.parts_assembled += 1;
            fresh.insert(i, assembling.finish()?);
        }
        let objects: Vec<&Cubin> = (0..texts.len())
            .map(|i| fresh.get(&i).or_else(|| self.cache.get(&keys[i])))
            .collect::<Option<_>>()
            .expect("every part assembled or cached");
        let linked = Assembler::link(nvlink, &objects, arch)?;
        for (i, cubin) in fresh {
            self.cache.insert(keys[i].clone(), cubin);
        }
        Ok(linked)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MODULE: &str = "//
// Generated by LLVM NVPTX Back-End
//

.version 7.8
.target sm_90
.address_size 64

\t// .globl\tfirst
.func __gevo_record
(
\t.param .b64 __gevo_record_param_0
)
;
.visible .global .align 8 .b8 __gevo_guard_state[64];
.visible .const .align 4 .b8 table[8] = {1, 0, 0, 0, 2, 0, 0, 0};
.global .align 16 .b8 __gevo_scratch[256];
.shared .align 16 .b8 __gevo_scratch_shared[64];

.visible .entry first(
\t.param .u64 first_param_0
)
{
\t.reg .b32 \t%r<2>;
\t.reg .b64 \t%rd<2>;
\tld.const.u32 \t%r1, [table+4];
\t{ // callseq 7, 0
\t.param .b64 param0;
\tmov.u64 \t%rd1, 0;
\tst.param.b64 \t[param0], %rd1;
\tcall.uni __gevo_record, (param0);
\t} // callseq 7
$L__BB3_1:
\tret;
}
\t// .globl\tsecond
.visible .entry second()
{
\t{
\tret;
\t}
}
.visible .func __gevo_record(
\t.param .b64 __gevo_record_param_0
)
{
\t.local .align 8 .b8 \t__local_depot4[8];
\t.reg .b64 \t%SPL;
\t.reg .b64 \t%rd<2>;
\t.reg .b16 \t%rs<2>;
\tmov.u64 \t%SPL, __local_depot4;
\tmov.u64 \t%rd1, 1;
\tst.global.u64 \t[__gevo_guard_state], %rd1;
\tmov.u16 \t%rs1, 0;
\tst.global.u8 \t[__gevo_scratch], %rs1;
\tst.shared.u8 \t[__gevo_scratch_shared], %rs1;
\tret;
}";

    /// Each kernel gets a part of its own with the functions it calls
    /// (made internal, with their prototypes) and the variables they use,
    /// visible ones declared `.extern` without their initializer; the
    /// common part defines those once. What the code generator numbers
    /// across the module (call sequences, a function's labels and local
    /// depot) is left out of the parts.
    #[test]
    fn a_module_splits_into_a_part_per_kernel_and_a_common_part() {
        let parts = split(MODULE).expect("splits");
        assert_eq!(
            parts.common,
            ".version 7.8\n.target sm_90\n.address_size 64\n\
             .visible .global .align 8 .b8 __gevo_guard_state[64];\n\
             .visible .const .align 4 .b8 table[8] = {1, 0, 0, 0, 2, 0, 0, 0};\n"
        );
        let names: Vec<&str> = parts.kernels.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["first", "second"]);
        let used = [
            ".extern .global .align 8 .b8 __gevo_guard_state[64];",
            ".extern .const .align 4 .b8 table[8];",
            ".global .align 16 .b8 __gevo_scratch[256];",
            ".shared .align 16 .b8 __gevo_scratch_shared[64];",
            ".func __gevo_record",
            ".func __gevo_record(",
            "\t} // callseq 7",
            "$L__BB_1:",
            "\t.local .align 8 .b8 \t__local_depot[8];",
        ];
        for (name, text) in &parts.kernels {
            assert_eq!(text.matches(".entry").count(), 1, "{text}");
            assert!(text.contains(&format!(".visible .entry {name}(")), "{text}");
            assert!(!text.contains(".visible .func"), "{text}");
            assert!(!text.contains("callseq 7,"), "{text}");
            for line in used {
                let held = text.lines().any(|l| l == line);
                let wanted = *name == "first" && line != "\t} // callseq 7";
                assert_eq!(held, wanted, "{line} in {name}'s part: {text}");
            }
        }
        assert!(parts.kernels[1].1.ends_with("\t}\n}\n"), "nested braces");
    }

    /// What the split does not handle is assembled whole.
    #[test]
    fn modules_the_split_does_not_handle_are_not_split() {
        let one_kernel = MODULE
            .split("\t// .globl\tsecond")
            .next()
            .unwrap()
            .to_string();
        let cases = [
            ("one kernel", one_kernel),
            (
                "a shared mutable variable",
                MODULE.replace("__gevo_scratch[256]", "counter[4]"),
            ),
            (
                "a weak function",
                MODULE.replace(".visible .func", ".weak .func"),
            ),
            ("a truncated body", MODULE[..MODULE.len() - 4].to_string()),
        ];
        for (what, ptx) in cases {
            assert_eq!(split(&ptx), None, "{what}");
        }
    }

    /// The GPU suite's strict assembly says why it cannot link a module,
    /// instead of assembling it whole.
    #[test]
    fn a_linked_assembly_names_what_stops_it() {
        let one_kernel = MODULE.split("\t// .globl\tsecond").next().unwrap();
        let mut parts = PartAssembler::new(Assembler::new("/nonexistent/ptxas".into()));
        let e = parts
            .assemble_linked(one_kernel, "sm_90")
            .unwrap_err()
            .to_string();
        let why = match parts.nvlink {
            Some(_) => "the module does not split into parts",
            None => "no nvlink found",
        };
        assert!(e.contains(why), "{e}");
        assert_eq!(parts.parts_assembled, 0);
    }

    /// With the toolkit's ptxas and nvlink, a split module links into one
    /// cubin with every kernel; assembling it again with one kernel
    /// changed runs ptxas on that kernel's part only.
    #[test]
    fn parts_link_into_one_cubin_and_only_changed_parts_are_assembled_again() {
        let Some(assembler) = Assembler::find() else {
            eprintln!("skipped: no ptxas");
            return;
        };
        let mut parts = PartAssembler::new(assembler);
        if parts.nvlink.is_none() {
            eprintln!("skipped: no nvlink");
            return;
        }
        let cubin = parts.assemble(MODULE, "sm_90").unwrap();
        assert!(cubin.0.starts_with(b"\x7fELF"));
        for name in ["first", "second"] {
            assert!(cubin.has_code_for(name), "{name} not in the linked cubin");
        }
        assert_eq!(parts.parts_assembled, 3);
        let changed = MODULE.replacen(
            "\tret;\n}\n\t// .globl",
            "\tmembar.gl;\n\tret;\n}\n\t// .globl",
            1,
        );
        assert_ne!(changed, MODULE);
        parts.assemble(&changed, "sm_90").unwrap();
        assert_eq!(parts.parts_assembled, 4, "only the first kernel's part");
        parts.assemble(MODULE, "sm_90").unwrap();
        assert_eq!(parts.parts_assembled, 4, "all cached");
    }
}
