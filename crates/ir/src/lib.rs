//! The LLVM-IR edit engine: the only code that calls inkwell or llvm-sys.
//!
//! `KernelIr` holds one kernel's original IR. A `Patch` (an ordered list of
//! GEVO edits) is always replayed on that original, in a fresh LLVM context,
//! so the same patch yields byte-identical IR text and PTX in any process.
//! See ARCHITECTURE.md for the invariants.

pub mod bounds;
mod canonical;
pub mod codegen;
mod dom;
mod edit;
mod error;
pub mod guard;
mod live;
mod llvm;
#[forbid(unsafe_code)]
mod lower;
mod module;
mod mutate;
pub mod patch;
mod signature;
pub mod source;
pub mod transplant;
mod variant;

pub use canonical::hash_without_build_directories;
pub use codegen::{libdevice_candidates, CodegenOptions, DEFAULT_ARCH};
pub use dom::DomTree;
pub use error::{EditError, IrError};
pub use guard::{BlockBounds, GuardSite, Guarded};
pub use patch::{
    ConstKind, Edit, EditKind, InstId, Patch, PatchFormatError, Repair, ValueRef, PATCH_FORMAT,
};
pub use signature::{display_name, source_parameter_types, Param};
pub use source::{EditStory, Location, Named, SourceFiles};
pub use variant::Variant;

use inkwell::context::Context;
use inkwell::memory_buffer::MemoryBuffer;
use inkwell::module::Module;
use inkwell::values::AsValueRef;
use live::LiveFunction;
pub use module::LiveModule;
use module::Part;
use rand::Rng;
use std::path::Path;

/// Hex SHA-256 of `bytes`: IR hashes in patches and the PTX hash the fitness
/// cache keys on.
pub fn content_hash(bytes: &[u8]) -> String {
    gevo_client::export::sha256_hex(bytes)
}

/// Module identifier used for every parse, so printed IR never depends on
/// where the file was read from.
const MODULE_ID: &str = "kernel";

/// One kernel of an NVPTX module, ready to have patches applied.
#[derive(Debug, Clone)]
pub struct KernelIr {
    source: String,
    bitcode: Vec<u8>,
    text: String,
    ir_hash: String,
    kernel: String,
    kernels: Vec<String>,
    /// The chosen kernels (one, or a pipeline's), ids numbered on across them.
    parts: Vec<Part>,
    instruction_count: u32,
    /// Instruction id -> `file:line`, for the instructions that have one.
    source_lines: std::collections::BTreeMap<u32, String>,
    /// Per chosen kernel, its blocks' bounds where known
    /// (`KernelIr::with_block_bounds`); none by default.
    block_bounds: Vec<Option<guard::BlockBounds>>,
}

/// A patched kernel: verified IR text and its PTX.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compiled {
    pub ir: String,
    pub ptx: String,
    pub ptx_hash: String,
}

/// One edit of a patch as `gevod edits` shows it.
#[derive(Debug, Clone)]
pub struct ExplainedEdit {
    pub edit: Edit,
    /// The kernel the edit works in (its symbol).
    pub kernel: Option<String>,
    /// The instructions the edit names, as they read just before it.
    pub operands: Vec<(InstId, String)>,
    /// IR text after this edit (not verified: a later edit may be needed).
    pub ir_after: String,
}

impl KernelIr {
    /// Loads `.ll` or `.bc` from `path` and picks `kernel` (mangled or
    /// demangled name; may be omitted when the module has one kernel).
    pub fn load(path: &Path, kernel: Option<&str>) -> Result<Self, IrError> {
        let bytes = read_ir(path)?;
        Self::parse(&path.display().to_string(), &bytes, kernel)
    }

    /// `spec`'s IR with its kernels, and their block bounds from its
    /// launches (`Spec::block_bounds`, `KernelIr::with_block_bounds`): as
    /// a GPU check's guarded build takes it.
    pub fn load_spec(spec: &gevo_model::spec::Spec) -> Result<Self, IrError> {
        Ok(Self::load_kernels(&spec.ir, &spec.kernels)?.with_block_bounds(spec.block_bounds()))
    }

    /// Loads `.ll` or `.bc` and picks several kernels (a pipeline's), in
    /// order; their instruction ids continue from one kernel to the next.
    pub fn load_kernels(path: &Path, kernels: &[String]) -> Result<Self, IrError> {
        let bytes = read_ir(path)?;
        Self::parse_kernels(&path.display().to_string(), &bytes, kernels)
    }

    /// Like `load`, from bytes; `source` names them in messages.
    pub fn parse(source: &str, bytes: &[u8], kernel: Option<&str>) -> Result<Self, IrError> {
        let wanted: Vec<String> = kernel.into_iter().map(str::to_string).collect();
        Self::parse_kernels(source, bytes, &wanted)
    }

    /// The IR with the kernels `patch` was made for (one, or a pipeline's).
    pub fn parse_for_patch(source: &str, bytes: &[u8], patch: &Patch) -> Result<Self, IrError> {
        let kernels: Vec<String> = patch.kernel_list().iter().map(|k| k.to_string()).collect();
        Self::parse_kernels(source, bytes, &kernels)
    }

    /// Like `load_kernels`, from bytes; no names means the module's only kernel.
    /// The bytes are untrusted: over a limit of `bounds` (size, and for
    /// text nesting and chains of definitions) they are refused before
    /// LLVM reads them.
    pub fn parse_kernels(source: &str, bytes: &[u8], wanted: &[String]) -> Result<Self, IrError> {
        bounds::check(source, bytes)?;
        let context = Context::create();
        let buffer = MemoryBuffer::create_from_memory_range_copy(bytes, source);
        let module = context
            .create_module_from_ir(buffer)
            .map_err(|e| IrError::Parse {
                message: one_line(&e.to_string()),
            })?;
        let triple = module.get_triple();
        let triple = triple.as_str().to_string_lossy().into_owned();
        if !triple.starts_with("nvptx") {
            return Err(IrError::NotNvptx {
                name: source.to_string(),
                triple,
            });
        }
        let kernels = llvm::kernel_functions(module.as_mut_ptr());
        let chosen = match wanted {
            [] => vec![choose_kernel(source, &kernels, None)?],
            _ => {
                let mut chosen: Vec<String> = Vec::new();
                for w in wanted {
                    let k = choose_kernel(source, &kernels, Some(w))?;
                    if chosen.contains(&k) {
                        return Err(IrError::AmbiguousKernel {
                            name: source.to_string(),
                            wanted: w.clone(),
                            matches: vec![k],
                        });
                    }
                    chosen.push(k);
                }
                chosen
            }
        };
        module.set_name(MODULE_ID);
        // Without a `source_filename` line LLVM names the module after the
        // buffer, i.e. the path it was read from: canonical IR must not
        // depend on that.
        if module.get_source_file_name().to_bytes() == source.as_bytes() {
            module.set_source_file_name(MODULE_ID);
        }
        if let Err(e) = module.verify() {
            return Err(IrError::Verify {
                message: format!("{source}: {}", one_line(&e.to_string())),
            });
        }
        let bitcode = module.write_bitcode_to_memory().as_slice().to_vec();
        drop(module);

        // Canonical form: what every replay starts from.
        let module = parse_bitcode(&context, &bitcode)?;
        let text = module.print_to_string().to_string();
        let mut parts = Vec::with_capacity(chosen.len());
        let mut source_lines = std::collections::BTreeMap::new();
        let mut first = 0u32;
        for symbol in &chosen {
            let function = module
                .get_function(symbol)
                .expect("kernel found above is in the module");
            let blocks = llvm::blocks(function.as_value_ref());
            // Instruction ids count each kernel's instructions in block
            // order, the kernels one after another.
            let mut count = 0u32;
            for inst in blocks.iter().flat_map(|&b| llvm::instructions(b)) {
                if let Some(line) = llvm::source_line(inst) {
                    source_lines.insert(first + count, line);
                }
                count += 1;
            }
            parts.push(Part {
                symbol: symbol.clone(),
                dom: DomTree::of_function(function.as_value_ref()),
                first,
                count,
            });
            first += count;
        }
        Ok(KernelIr {
            source: source.to_string(),
            ir_hash: content_hash(text.as_bytes()),
            bitcode,
            text,
            kernel: chosen[0].clone(),
            kernels,
            parts,
            instruction_count: first,
            source_lines,
            block_bounds: Vec::new(),
        })
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    /// The chosen kernel's symbol (a pipeline's first kernel).
    pub fn kernel(&self) -> &str {
        &self.kernel
    }

    /// The chosen kernels' symbols, in id order (one unless a pipeline).
    pub fn chosen_kernels(&self) -> Vec<&str> {
        self.parts.iter().map(|p| p.symbol.as_str()).collect()
    }

    /// Which chosen kernel an original instruction is in (by index), and
    /// its range of ids.
    pub fn kernel_of(&self, id: InstId) -> Option<usize> {
        self.parts
            .iter()
            .position(|p| (p.first..p.first + p.count).contains(&id.0))
    }

    /// Every kernel in the module.
    pub fn kernels(&self) -> &[String] {
        &self.kernels
    }

    /// `file:line` in the CUDA source of an original instruction, when the
    /// IR has line tables.
    pub fn source_line(&self, id: u32) -> Option<&str> {
        self.source_lines.get(&id).map(String::as_str)
    }

    /// Instructions of the chosen kernels on load; their ids are 0..count.
    pub fn instruction_count(&self) -> u32 {
        self.instruction_count
    }

    /// Hash of the canonical original IR text; patches carry it.
    pub fn ir_hash(&self) -> &str {
        &self.ir_hash
    }

    /// Canonical original IR text (what an empty patch yields).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// An empty patch for this kernel.
    pub fn empty_patch(&self) -> Patch {
        let mut p = Patch::new(&self.ir_hash, &self.kernel);
        if self.parts.len() > 1 {
            p.kernels = self.parts.iter().map(|k| k.symbol.clone()).collect();
        }
        p
    }

    /// Replays `patch` and returns the verified IR text.
    pub fn apply(&self, patch: &Patch) -> Result<String, IrError> {
        self.with_patched(patch, |_, module, _| {
            Ok(module.print_to_string().to_string())
        })
    }

    /// Replays `patch` and verifies it, producing nothing: is it a valid variant?
    pub fn check(&self, patch: &Patch) -> Result<(), IrError> {
        self.with_patched(patch, |_, _, _| Ok(()))
    }

    /// Replays `patch`, verifies, and emits PTX.
    pub fn compile(&self, patch: &Patch, options: &CodegenOptions) -> Result<Compiled, IrError> {
        self.with_variant(patch, |variant| variant.compile(options))?
    }

    /// Every instruction of the original kernel with its id, as IR text.
    pub fn listing(&self) -> Result<Vec<(InstId, String)>, IrError> {
        self.with_patched(&self.empty_patch(), |_, _, live| {
            Ok(live
                .parts
                .iter()
                .flat_map(|f| {
                    f.live_instructions()
                        .into_iter()
                        .map(|inst| (f.id_of(inst), llvm::value_to_string(inst)))
                })
                .collect())
        })
    }

    /// Replays `patch`, verifies, and lowers the (first) kernel for the simulator.
    pub fn lower(&self, patch: &Patch) -> Result<gevo_model::sim::code::Program, IrError> {
        self.with_variant(patch, |variant| variant.lower_first())?
    }

    /// Replays `patch`, verifies, and lowers every chosen kernel, in order.
    pub fn lower_all(&self, patch: &Patch) -> Result<Vec<gevo_model::sim::code::Program>, IrError> {
        self.with_variant(patch, |variant| variant.lower_all())?
    }

    /// Replays `patch` edit by edit, recording what each does.
    pub fn explain(&self, patch: &Patch) -> Result<Vec<ExplainedEdit>, IrError> {
        self.check_patch(patch)?;
        let context = Context::create();
        let module = parse_bitcode(&context, &self.bitcode)?;
        let mut live = self.live(&module);
        let mut out = Vec::new();
        for (i, e) in patch.edits.iter().enumerate() {
            let operands = named_instructions(&e.kind)
                .into_iter()
                .map(|id| {
                    let text = live
                        .owner(id)
                        .ok_or(EditError::UnknownInstruction(id))
                        .and_then(|k| live.parts[k].inst(id))
                        .map(llvm::value_to_string)
                        .unwrap_or_else(|err| format!("<{err}>"));
                    (id, text)
                })
                .collect();
            let kernel = live.edit_owner(e).ok();
            live.apply_edit(e)
                .map_err(|reason| IrError::InvalidEdit { edit: i, reason })?;
            out.push(ExplainedEdit {
                edit: e.clone(),
                kernel: kernel.map(|k| self.parts[k].symbol.clone()),
                operands,
                ir_after: module.print_to_string().to_string(),
            });
        }
        Ok(out)
    }

    /// `count` random edits, each valid (the IR verifies after every one),
    /// drawn from `rng`: the same seed gives the same patch.
    pub fn mutate<R: Rng>(&self, rng: &mut R, count: usize) -> Result<Patch, IrError> {
        self.extend(self.empty_patch(), rng, count)
    }

    /// Appends `count` random valid edits to `patch`.
    pub fn extend<R: Rng>(
        &self,
        patch: Patch,
        rng: &mut R,
        count: usize,
    ) -> Result<Patch, IrError> {
        const TRIES_PER_EDIT: usize = 200;
        self.extend_within(patch, rng, count, TRIES_PER_EDIT)
    }

    /// Appends `count` random valid edits to `patch`, drawing at most
    /// `tries_per_edit` candidate edits per edit wanted.
    pub fn extend_within<R: Rng>(
        &self,
        mut patch: Patch,
        rng: &mut R,
        count: usize,
        tries_per_edit: usize,
    ) -> Result<Patch, IrError> {
        self.check_patch(&patch)?;
        let target = patch.edits.len() + count;
        let max_tries = tries_per_edit.max(1) * count.max(1);
        let mut tries = 0;
        let context = Context::create();
        'rebuild: loop {
            // A failed attempt may leave the function half-edited: start over
            // from the original and replay what was accepted.
            let module = parse_bitcode(&context, &self.bitcode)?;
            let mut live = self.live(&module);
            live.replay(&patch.edits)?;
            let weights: Vec<u32> = self.parts.iter().map(|p| p.count).collect();
            while patch.edits.len() < target {
                tries += 1;
                if tries > max_tries {
                    return Err(IrError::MutationExhausted { tries: max_tries });
                }
                let Some((k, kind)) = live.random_edit_kind(&weights, rng) else {
                    continue;
                };
                match edit::perform_edit(live.part_mut(k), kind, rng) {
                    Ok(e) if module.verify().is_ok() => patch.edits.push(e),
                    _ => continue 'rebuild,
                }
            }
            return Ok(patch);
        }
    }

    fn live<'m>(&'m self, module: &Module<'_>) -> LiveModule<'m> {
        LiveModule::new(
            self.parts
                .iter()
                .map(|p| {
                    let function = module
                        .get_function(&p.symbol)
                        .expect("the canonical module holds the kernel");
                    LiveFunction::numbered_from(function.as_value_ref(), &p.dom, p.first)
                })
                .collect(),
        )
    }

    fn check_patch(&self, patch: &Patch) -> Result<(), IrError> {
        if patch.format > PATCH_FORMAT {
            return Err(PatchFormatError::TooNew {
                found: patch.format,
                supported: PATCH_FORMAT,
            }
            .into());
        }
        if patch.ir_hash != self.ir_hash {
            return Err(IrError::PatchIrMismatch {
                patch: patch.ir_hash.clone(),
                ir: self.ir_hash.clone(),
            });
        }
        if patch.kernel_list() != self.chosen_kernels() {
            return Err(IrError::PatchKernelMismatch {
                patch: patch.kernel_list().join(", "),
                kernel: self.chosen_kernels().join(", "),
            });
        }
        Ok(())
    }

    fn with_patched<T>(
        &self,
        patch: &Patch,
        then: impl for<'c> FnOnce(&'c Context, &Module<'c>, &LiveModule) -> Result<T, IrError>,
    ) -> Result<T, IrError> {
        self.check_patch(patch)?;
        let context = Context::create();
        let module = parse_bitcode(&context, &self.bitcode)?;
        let mut live = self.live(&module);
        live.replay(&patch.edits)?;
        module.verify().map_err(|e| IrError::Verify {
            message: one_line(&e.to_string()),
        })?;
        then(&context, &module, &live)
    }
}

/// The IR file at `path`: FIFOs, devices and directories refused before
/// reading, and a file over `bounds::MAX_IR_BYTES` before it is read whole.
fn read_ir(path: &Path) -> Result<Vec<u8>, IrError> {
    use gevo_model::access::{AccessError, Reader};
    Reader::Caller
        .read_capped(path, bounds::MAX_IR_BYTES)
        .map_err(|e| match e {
            AccessError::TooLarge { .. } => IrError::TooLarge {
                name: path.display().to_string(),
                limit: bounds::MAX_IR_BYTES,
            },
            other => other.into(),
        })
}

fn parse_bitcode<'c>(context: &'c Context, bitcode: &[u8]) -> Result<Module<'c>, IrError> {
    let buffer = MemoryBuffer::create_from_memory_range_copy(bitcode, MODULE_ID);
    context
        .create_module_from_ir(buffer)
        .map_err(|e| IrError::Parse {
            message: one_line(&e.to_string()),
        })
}

/// LLVM messages span lines (the offending source line, a caret); errors are
/// one line.
/// LLVM's multi-line message (location, the offending line, a caret) as
/// one line, capped: the quoted line is the input's, and a message must not
/// carry more of a file than it needs to point at the problem.
fn one_line(message: &str) -> String {
    const MAX_CHARS: usize = 240;
    let joined = message
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.chars().all(|c| c == '^' || c == ' '))
        .collect::<Vec<_>>()
        .join(" | ");
    gevo_client::text::shorten(&joined, MAX_CHARS).into_owned()
}

fn demangled(symbol: &str) -> Option<String> {
    cpp_demangle::Symbol::new(symbol)
        .ok()
        .map(|s| s.to_string())
}

/// Picks the kernel `wanted` names: its symbol, its demangled signature, or
/// its demangled name without parameters.
fn choose_kernel(
    source: &str,
    kernels: &[String],
    wanted: Option<&str>,
) -> Result<String, IrError> {
    if kernels.is_empty() {
        return Err(IrError::NoKernel {
            name: source.to_string(),
        });
    }
    let Some(wanted) = wanted else {
        return match kernels {
            [only] => Ok(only.clone()),
            _ => Err(IrError::KernelRequired {
                name: source.to_string(),
                available: kernels.to_vec(),
            }),
        };
    };
    if let Some(k) = kernels.iter().find(|k| *k == wanted) {
        return Ok(k.clone());
    }
    let matches: Vec<String> = kernels
        .iter()
        .filter(|k| {
            demangled(k).is_some_and(|d| d == wanted || d.split('(').next() == Some(wanted))
        })
        .cloned()
        .collect();
    match matches.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(IrError::UnknownKernel {
            name: source.to_string(),
            wanted: wanted.to_string(),
            available: kernels.to_vec(),
        }),
        _ => Err(IrError::AmbiguousKernel {
            name: source.to_string(),
            wanted: wanted.to_string(),
            matches,
        }),
    }
}

fn named_instructions(kind: &EditKind) -> Vec<InstId> {
    match *kind {
        EditKind::Copy { src, before, .. } => vec![src, before],
        EditKind::Delete { target } => vec![target],
        EditKind::Move { src, before } => vec![src, before],
        EditKind::Replace { target, with, .. } => vec![target, with],
        EditKind::Swap { a, b } => vec![a, b],
        EditKind::OperandReplace { user, .. } => vec![user],
    }
}
