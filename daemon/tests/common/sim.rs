//! Running lowered kernels on the simulator with hand-built arguments, and
//! the byte conversions the simulator tests share.

use gevo_ir::{KernelIr, Patch};
use gevo_model::sim::{self, pointer, GlobalMemory, LaunchDims, Limits};

pub const LIMITS: Limits = Limits {
    block_step_budget: 100_000_000,
};

pub fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

pub fn u32s(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

pub fn bytes_of(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Runs `patch` of `ir` with the buffers as global memory (the first
/// arguments) followed by the scalars; returns the stats and final buffers.
pub fn run_program(
    ir: &KernelIr,
    patch: &Patch,
    buffers: &[Vec<u8>],
    scalars: &[u64],
    dims: LaunchDims,
    limits: Limits,
) -> Result<(sim::RunStats, Vec<Vec<u8>>), sim::Verdict> {
    let program = ir.lower(patch).unwrap();
    let (stats, mem) = run_on(&program, buffers, scalars, dims, limits, 2);
    Ok((
        stats?,
        (0..buffers.len()).map(|i| mem.contents(i)).collect(),
    ))
}

/// Runs `program` on fresh buffers (the first arguments, then the scalars)
/// with `workers` worker threads; the memory is returned whatever happened.
pub fn run_on(
    program: &sim::code::Program,
    buffers: &[Vec<u8>],
    scalars: &[u64],
    dims: LaunchDims,
    limits: Limits,
    workers: usize,
) -> (Result<sim::RunStats, sim::Verdict>, GlobalMemory) {
    let views: Vec<&[u8]> = buffers.iter().map(Vec::as_slice).collect();
    let mem = GlobalMemory::new(&views);
    let mut args: Vec<u64> = (0..buffers.len())
        .map(|i| pointer::make(pointer::GLOBAL, i as u64, 0))
        .collect();
    args.extend_from_slice(scalars);
    let r = sim::run(program, &dims, &args, &mem, limits, workers);
    (r, mem)
}

/// Runs the one kernel of IR `text` on the buffers.
pub fn run_text(
    text: &str,
    dims: LaunchDims,
    buffers: &[Vec<u8>],
) -> Result<Vec<Vec<u8>>, sim::Verdict> {
    run_text_with(text, dims, buffers, &[])
}

/// [`run_text`], with scalars after the buffers.
pub fn run_text_with(
    text: &str,
    dims: LaunchDims,
    buffers: &[Vec<u8>],
    scalars: &[u64],
) -> Result<Vec<Vec<u8>>, sim::Verdict> {
    let ir = gevo_ir::KernelIr::parse("test.ll", text.as_bytes(), None).unwrap();
    run_program(&ir, &ir.empty_patch(), buffers, scalars, dims, LIMITS).map(|(_, out)| out)
}
