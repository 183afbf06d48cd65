//! gevo-client: the daemon's wire protocol, default paths, the exported-best
//! file format, and the command-line client. It has no LLVM dependency, so
//! build scripts can call it anywhere.
//!
//! `gevod` depends on this crate for the same three things, so both sides
//! agree on them by construction.

pub mod denied;
pub mod explain;
pub mod export;
pub mod files;
pub mod locate;
pub mod paths;
pub mod proto;
pub mod record;
pub mod text;
pub mod transport;

pub use proto::PROTOCOL_VERSION;
