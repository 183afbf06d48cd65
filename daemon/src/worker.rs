//! Evaluation workers. Code generation (LLVM can abort) and simulation run
//! in child processes (`gevod eval-worker`), driven by the engine's process
//! through [`pool::WorkerPool`] over JSON lines on stdin/stdout. A crash or a
//! hang costs one variant and a respawn, never the engine.
//!
//! [`InProcess`] is the same backend without processes: the worker's request
//! handler, and a backend for tests. GPU workers (`gevod gpu-worker`) speak
//! the same protocol through their own [`Handler`]; [`gpu`] is the engine's
//! side of them. [`setup`] chooses, for `gevod evolve` and the daemon alike,
//! which of these evaluates a job.

pub mod background_gate;
mod fault;
pub mod gpu;
pub mod gpu_run;
mod in_process;
mod known;
pub mod launch;
pub mod pool;
pub mod priority;
mod process;
mod protocol;
pub mod sanitize;
mod serve;
pub mod setup;

pub use fault::{Fault, FaultKind};
pub use in_process::InProcess;
pub use protocol::{Request, Response, PROTOCOL};
pub use serve::{serve, Handler};
