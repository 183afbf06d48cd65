//! gevo-client: the daemon's wire protocol types and the command-line client.
//! It has no LLVM dependency, so build scripts can call it anywhere.
//!
//! The request and response types arrive with the daemon's socket API; until
//! then the crate fixes the protocol version both sides will check.

/// Version of the request/response protocol between `gevo-client` and `gevod`.
pub const PROTOCOL_VERSION: u32 = 1;
