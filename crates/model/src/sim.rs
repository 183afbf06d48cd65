//! The SIMT simulator backend: runs a kernel's lowered IR on the CPU, whole
//! grid, with bounds and shared-memory race checks and a deterministic cost.
//! `ir::lower` produces the `code::Program`; nothing here calls LLVM.

pub mod code;
pub mod cost;
mod exec;
mod memory;
pub mod pointer;
mod verdict;

pub use exec::{run, LaunchDims, Limits, RunStats};
pub use memory::GlobalMemory;
pub use verdict::{BufferName, Context, Fault, Verdict};
