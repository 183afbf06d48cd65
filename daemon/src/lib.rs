//! gevod: the daemon and the `gevod` command's library: configuration,
//! harness mode, the GPU backend and its worker processes, the report, and
//! the daemon (watching, scheduling, the socket API). The layers below are
//! the crates gevo-model, gevo-ir and gevo-search. See ARCHITECTURE.md.

pub mod api;
pub mod config;
pub mod cuda;
pub mod explain_edits;
pub mod harness;
pub mod report;
pub mod sched;
pub mod serve;
pub mod tune;
pub mod watch;
pub mod worker;
