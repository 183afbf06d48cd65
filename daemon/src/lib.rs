//! gevod: evolves faster variants of CUDA kernels by genetic improvement of
//! their LLVM IR (the GEVO method). See ARCHITECTURE.md for the module map.

pub mod access;
pub mod api;
pub mod assessment;
pub mod busy;
pub mod config;
pub mod contrib;
pub mod cuda;
pub mod device;
pub mod drive;
pub mod eval;
pub mod evolve;
pub mod explain_edits;
pub mod harness;
pub mod ir;
pub mod own_processes;
pub mod ranges;
pub mod report;
pub mod sched;
pub mod seed;
pub mod serve;
pub mod sim;
pub mod spec;
pub mod stats;
pub mod store;
pub mod watch;
pub mod worker;
