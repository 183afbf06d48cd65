//! The GPU backend. Variants are timed on a real GPU by a worker process per
//! device (`gevod gpu-worker`), which owns the CUDA context: an illegal
//! address poisons a context for good and a runaway kernel cannot be
//! stopped, so either costs the worker, never the engine. The driver is
//! loaded at run time (cudarc), so gevod builds and runs without CUDA.
//!
//! - [`driver`]: the checked driver calls (the only `unsafe` code).
//! - `staged`: one test staged on the device: its buffers, restoring its
//!   inputs, its launches; `pace`: at most a few hundred launches queued,
//!   so that a hung run times out at its limit.
//! - [`measure`]: what a worker does per variant: check outputs, then time
//!   it alternately with the original; `checked`: the checked runs;
//!   `timing`: the timed rounds and a pipeline's per-kernel times.
//! - [`guarded`]: guarded check runs: a variant's guarded build armed with
//!   the test's ranges and trip budget, its fault record as a verdict.
//!   [`guard_check`]: the GPU suite's check of them against the simulator.
//! - [`load`]: cubins or the JIT, the same for the original and variants.
//! - [`check`]: one run of a variant on one test, for compute-sanitizer.
//! - [`toolkit`]: the toolkit's programs: finding them, and ptxas, which
//!   assembles variants into cubins in the compile workers.
//! - [`parts`]: a pipeline's guarded build assembled a kernel at a time,
//!   each kernel's part kept, the parts linked by nvlink.
//!
//! The engine's side (compile workers feeding a GPU worker, the simulator
//! pre-screen) lives beside the other worker pools, in `worker::gpu`.

pub mod batch_assembly;
pub mod check;
pub mod compare;
mod device_test;
pub mod driver;
pub mod guard_check;
pub mod guard_cost;
pub mod guarded;
pub mod load;
pub mod measure;
mod output_check;
mod pace;
pub mod part_assembly;
mod ptx_items;
mod timing;
pub mod toolkit;

use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum CudaError {
    #[error("no CUDA driver: libcuda.so cannot be loaded (install the NVIDIA driver, or use --backend sim)")]
    NoDriver,
    #[error("no CUDA device {wanted} (this machine has {count})")]
    NoDevice { wanted: String, count: usize },
    #[error("{call} failed: {name}")]
    Driver { call: &'static str, name: String },
    #[error("the driver rejects the PTX: {log}")]
    InvalidPtx { log: String },
    #[error("the kernel ran past {limit:?}")]
    Timeout { limit: Duration },
}

impl CudaError {
    /// Whether the context is unusable after this error (a sticky launch
    /// error, or a kernel still running): the worker must exit.
    pub fn poisons_context(&self) -> bool {
        match self {
            CudaError::Timeout { .. } => true,
            CudaError::Driver { call, .. } => !call.starts_with("cuModule"),
            _ => false,
        }
    }

    /// The failure kind reported for a variant.
    pub fn kind(&self) -> &'static str {
        match self {
            CudaError::InvalidPtx { .. } => "invalid_ptx",
            CudaError::Timeout { .. } => "timeout",
            _ => "cuda_error",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gevo_model::device::DeviceSelector;

    #[test]
    fn uuids_print_as_nvidia_smi_does() {
        assert_eq!(
            driver::format_uuid(&[0xab; 16]),
            "GPU-abababab-abab-abab-abab-abababababab"
        );
    }

    /// Without a driver (CI), probing fails with the one clear error; with
    /// one, device 0 describes itself.
    #[test]
    fn probing_names_a_missing_driver() {
        match driver::probe(&DeviceSelector::Ordinal(0)) {
            Err(CudaError::NoDriver) => {
                println!("no CUDA driver here: checked the error only")
            }
            Err(CudaError::NoDevice { count: 0, .. }) => println!("a driver but no GPU"),
            Ok(d) => assert!(d.arch().starts_with("sm_"), "{d:?}"),
            Err(e) => panic!("{e}"),
        }
    }
}
