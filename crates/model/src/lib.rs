//! gevo's model of a kernel job, free of LLVM and of processes: kernel specs
//! and their test inputs, the SIMT simulator, what an evaluation yields, and
//! the leaves they share (ranges, statistics, devices, file access for a
//! spec's owner). See ARCHITECTURE.md, "gevo-model".

pub mod access;
pub mod assessment;
pub mod c_source;
pub mod device;
pub mod own_processes;
pub mod ranges;
pub mod sim;
pub mod spec;
pub mod stats;
pub mod utilization;
