//! Runs a lowered kernel over its whole grid.
//!
//! Blocks are independent and run in parallel on worker threads. Inside a
//! block, threads run one after another, each until it reaches a barrier or
//! exits; when every live thread waits at the barrier, all continue. Shared
//! memory carries a shadow per byte that catches races between two barriers
//! and reads of bytes never written; global memory records which block wrote
//! each word (`Writers`), which catches blocks writing the same bytes.
//!
//! This file owns the public entry point (`run`) and the launch loop: blocks
//! handed out to worker threads, the lowest failure kept, and the rerun on
//! one worker after a global write conflict. The rest, by concern:
//! - `block`: one block's threads and its scheduling loop, where barriers
//!   are released and warp collectives resolved;
//! - `interp`: the interpreter loop, one thread to its next stop;
//! - `warp`: the warp-collective instructions (shuffle, vote, activemask);
//! - `access`: loads and stores in every memory space, bounds checks, the
//!   cross-block write claims on global memory;
//! - `shared`: the shared-memory shadow (races within a barrier interval,
//!   reads of bytes never written);
//! - `atomic`: atomic read-modify-write and compare-and-swap;
//! - `int`, `float`, `cast`: the value semantics of the arithmetic,
//!   comparison and conversion instructions.

mod access;
mod atomic;
mod block;
mod cast;
mod float;
mod int;
mod interp;
mod shared;
mod warp;

use super::code::*;
use super::memory::{GlobalMemory, Writers};
use super::verdict::{Fault, Verdict};
use block::BlockRun;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchDims {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub dynamic_shared_bytes: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RunStats {
    /// Instructions executed (phi copies not counted).
    pub steps: u64,
    pub cost: u64,
    /// The most steps any one block took.
    pub max_block_steps: u64,
}

impl RunStats {
    /// Accumulates another run (of a block, or of a launch).
    pub fn add(&mut self, other: &RunStats) {
        self.steps += other.steps;
        self.cost += other.cost;
        self.max_block_steps = self.max_block_steps.max(other.max_block_steps);
    }
}

/// Each block may execute at most this many instructions.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub block_step_budget: u64,
}

/// Runs `program` once over the grid. `args` are the raw parameter values
/// (global pointers already tagged). Results do not depend on `workers`:
/// they are those of running the blocks one after another in order, where a
/// failure is reported for the lowest failing block and two blocks writing
/// the same global bytes are a `GlobalRace` of the later one.
pub fn run(
    program: &Program,
    dims: &LaunchDims,
    args: &[u64],
    memory: &GlobalMemory,
    limits: Limits,
    workers: usize,
) -> Result<RunStats, Verdict> {
    let [gx, gy, gz] = dims.grid;
    let blocks = gx as usize * gy as usize * gz as usize;
    let workers = workers.clamp(1, blocks.max(1));
    // Stores narrower than a word can be two blocks writing neighbouring
    // bytes of one word, which is no conflict: track bytes then.
    let narrow = program
        .blocks
        .iter()
        .flat_map(|b| &b.insts)
        .any(|i| match i.op {
            Op::Store { bytes, .. } => bytes < 4,
            Op::VecStore {
                elem_bytes, lanes, ..
            } => elem_bytes.saturating_mul(lanes) < 4,
            _ => false,
        });
    let shift = if narrow { 0 } else { 2 };
    if workers == 1 {
        return run_blocks(program, dims, args, memory, limits, 1, shift).0;
    }
    let start = memory.snapshot();
    let (result, conflict) = run_blocks(program, dims, args, memory, limits, workers, shift);
    if !conflict {
        return result;
    }
    // Blocks wrote the same bytes; which of them noticed depended on timing.
    // Run again, in block order, from the launch's starting memory.
    memory.restore(&start);
    run_blocks(program, dims, args, memory, limits, 1, shift).0
}

/// One pass over the grid on `workers` threads; also whether a block saw a
/// global write conflict (the pass then stops early).
fn run_blocks(
    program: &Program,
    dims: &LaunchDims,
    args: &[u64],
    memory: &GlobalMemory,
    limits: Limits,
    workers: usize,
    shift: u32,
) -> (Result<RunStats, Verdict>, bool) {
    let [gx, gy, gz] = dims.grid;
    let blocks = gx as usize * gy as usize * gz as usize;
    let writers = Writers::new(memory, shift, workers == 1);
    let next = AtomicUsize::new(0);
    // Lowest failing block index so far: later blocks need not run.
    let first_failure = AtomicUsize::new(usize::MAX);
    let conflict = AtomicBool::new(false);
    let worker_results: Vec<Vec<(usize, Result<RunStats, Verdict>)>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                s.spawn(|| {
                    let mut results = Vec::new();
                    loop {
                        let b = next.fetch_add(1, Ordering::Relaxed);
                        if b >= blocks
                            || b > first_failure.load(Ordering::Relaxed)
                            || conflict.load(Ordering::Relaxed)
                        {
                            break;
                        }
                        let r =
                            BlockRun::new(program, dims, b, args, memory, &writers, limits).run();
                        if let Err(v) = &r {
                            first_failure.fetch_min(b, Ordering::Relaxed);
                            if matches!(v.fault, Fault::GlobalRace { .. }) {
                                conflict.store(true, Ordering::Relaxed);
                            }
                        }
                        results.push((b, r));
                    }
                    results
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("simulator worker"))
            .collect()
    });
    let mut results: Vec<(usize, Result<RunStats, Verdict>)> =
        worker_results.into_iter().flatten().collect();
    results.sort_by_key(|(b, _)| *b);
    let mut total = RunStats::default();
    for (_, r) in results {
        match r {
            Ok(stats) => total.add(&stats),
            Err(v) => return (Err(v), conflict.into_inner()),
        }
    }
    (Ok(total), conflict.into_inner())
}

/// The CTA coordinates of the block with linear index `b`.
fn cta_of(dims: &LaunchDims, b: usize) -> [u32; 3] {
    // In 64 bits: a grid's x * y can pass u32::MAX.
    let (gx, gy) = (
        u64::from(dims.grid[0].max(1)),
        u64::from(dims.grid[1].max(1)),
    );
    let b = b as u64;
    [
        (b % gx) as u32,
        ((b / gx) % gy) as u32,
        (b / (gx * gy)) as u32,
    ]
}
