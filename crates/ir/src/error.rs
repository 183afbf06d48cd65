use super::patch::{InstId, PatchFormatError};
use std::path::PathBuf;

/// Everything that can go wrong between IR on disk and PTX. Never a panic:
/// a mutated kernel is untrusted input.
#[derive(Debug, thiserror::Error)]
pub enum IrError {
    #[error("{}: {error}", path.display())]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error(transparent)]
    Access(#[from] gevo_model::access::AccessError),
    /// IR over [`crate::bounds::MAX_IR_BYTES`], refused before it is read
    /// whole or reaches LLVM.
    #[error("{name}: IR larger than {} MiB (gevo's limit)", limit >> 20)]
    TooLarge { name: String, limit: u64 },
    /// Text IR nesting brackets deeper than [`crate::bounds::MAX_NESTING`]:
    /// LLVM's parser would recurse that deep.
    #[error(
        "{name}:{line}:{column}: nesting deeper than {limit} brackets (gevo's limit for untrusted IR)"
    )]
    TooDeep {
        name: String,
        line: u32,
        column: u32,
        limit: u32,
    },
    /// Text IR whose definitions refer to one another deeper than
    /// [`crate::bounds::MAX_CHAIN`]: LLVM's metadata resolution, verifier
    /// and type layout would recurse that deep.
    #[error(
        "{name}:{line}:{column}: {what} starts a chain of definitions {depth} deep, deeper than {limit} (gevo's limit for untrusted IR)"
    )]
    ChainTooDeep {
        name: String,
        line: u32,
        column: u32,
        what: String,
        depth: u64,
        limit: u64,
    },
    /// Text IR whose aliases refer to aliases so much that LLVM's verifier
    /// would walk more than [`crate::bounds::MAX_ALIAS_WORK`] steps.
    #[error(
        "{name}:{line}:{column}: aliases of aliases, from {what} on, take LLVM's verifier {work} steps, more than {limit} (gevo's limit for untrusted IR)"
    )]
    AliasesTooDeep {
        name: String,
        line: u32,
        column: u32,
        what: String,
        work: u64,
        limit: u64,
    },
    /// LLVM's own message, which names the buffer as `<file>:<line>:<col>`.
    #[error("{message}")]
    Parse { message: String },
    #[error("{name}: not an NVPTX module (target triple {triple:?})")]
    NotNvptx { name: String, triple: String },
    #[error(
        "{name}: no kernel found (no nvvm.annotations \"kernel\" entry and no ptx_kernel function)"
    )]
    NoKernel { name: String },
    #[error("{name}: no kernel named {wanted:?}; kernels: {}", available.join(", "))]
    UnknownKernel {
        name: String,
        wanted: String,
        available: Vec<String>,
    },
    #[error("{name}: {wanted:?} names several kernels ({}); give the mangled name", matches.join(", "))]
    AmbiguousKernel {
        name: String,
        wanted: String,
        matches: Vec<String>,
    },
    #[error("{name}: several kernels ({}); choose one with --kernel", available.join(", "))]
    KernelRequired {
        name: String,
        available: Vec<String>,
    },
    #[error(transparent)]
    PatchFormat(#[from] PatchFormatError),
    #[error("patch was made for other IR (IR hash {patch}, this IR {ir})")]
    PatchIrMismatch { patch: String, ir: String },
    #[error("patch is for kernel {patch:?}, not {kernel:?}")]
    PatchKernelMismatch { patch: String, kernel: String },
    #[error("edit {edit}: {reason}")]
    InvalidEdit { edit: usize, reason: EditError },
    #[error("variant fails verification: {message}")]
    Verify { message: String },
    #[error("kernel calls {function} but no libdevice.10.bc was found (searched: {})", searched.join(", "))]
    LibdeviceNotFound {
        function: String,
        searched: Vec<String>,
    },
    #[error("linking libdevice {path}: {message}")]
    LibdeviceLink { path: String, message: String },
    #[error(
        "kernel calls {function}, which is neither defined in the IR nor provided by libdevice"
    )]
    UnresolvedFunction { function: String },
    #[error("PTX code generation failed: {message}")]
    Codegen { message: String },
    #[error("the simulator does not support {what}")]
    Unsupported { what: String },
    #[error("no valid mutation found in {tries} tries")]
    MutationExhausted { tries: usize },
}

/// Why one edit of a patch cannot be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EditError {
    #[error("no instruction {0}")]
    UnknownInstruction(InstId),
    #[error("instruction {0} was deleted by an earlier edit")]
    Deleted(InstId),
    #[error("id {0} is already taken")]
    IdTaken(InstId),
    #[error("{0} is a terminator or phi, which this edit may not touch")]
    Pinned(InstId),
    #[error("{0} and {1} have different result types")]
    TypeMismatch(InstId, InstId),
    #[error("{user} has no operand {operand} that may be replaced")]
    NoSuchOperand { user: InstId, operand: u32 },
    #[error("operand {operand} of {user}: {value} has another type")]
    OperandType {
        user: InstId,
        operand: u32,
        value: String,
    },
    #[error("no kernel parameter {0}")]
    UnknownArg(u32),
    #[error("constant {0} does not exist for the operand's type")]
    NoConstant(String),
    #[error("{0} is still used after the repairs of its deletion")]
    StillUsed(InstId),
}
