//! One block's run: its threads and the loop that schedules them.
//!
//! Threads run one after another (`interp`), each until it reaches a
//! barrier, a warp-collective instruction or its end. `BlockRun::run` is the
//! block's scheduling loop and the place of barrier handling: once no thread
//! can run, waiting warp collectives execute (`warp`); when every live thread
//! waits at the same barrier, a new barrier interval starts and all
//! continue; a barrier that some threads reach while others exited or wait
//! at another one is a `divergent_barrier` verdict.

use super::cta_of;
use super::shared::{Shadow, NO_THREAD};
use super::{LaunchDims, Limits, RunStats};
use crate::sim::code::*;
use crate::sim::memory::{GlobalMemory, Writers};
use crate::sim::verdict::{Context, Fault, Verdict};

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Status {
    Running,
    AtBarrier,
    /// Stopped at a warp-collective instruction (`pc` points at it).
    AtWarpOp,
    Exited,
}

pub(super) struct Thread {
    pub(super) regs: Vec<u64>,
    pub(super) block: u32,
    pub(super) pc: u32,
    pub(super) status: Status,
    pub(super) local: Vec<u8>,
    pub(super) tid: [u32; 3],
    /// The barrier instruction it waits at (while `AtBarrier`).
    pub(super) barrier: u32,
}

pub(super) struct BlockRun<'a> {
    pub(super) program: &'a Program,
    pub(super) dims: &'a LaunchDims,
    cta: [u32; 3],
    pub(super) memory: &'a GlobalMemory,
    pub(super) writers: &'a Writers,
    /// This block's linear index + 1, as `Writers` records it (0: too many
    /// blocks to record, never the case in practice).
    pub(super) writer: u32,
    pub(super) limits: Limits,
    pub(super) threads: Vec<Thread>,
    pub(super) shared: Vec<u8>,
    pub(super) shadow: Vec<Shadow>,
    pub(super) epoch: u32,
    pub(super) steps: u64,
    pub(super) cost: u64,
    pub(super) copy_buffer: Vec<u64>,
}

impl<'a> BlockRun<'a> {
    pub(super) fn new(
        program: &'a Program,
        dims: &'a LaunchDims,
        block: usize,
        args: &[u64],
        memory: &'a GlobalMemory,
        writers: &'a Writers,
        limits: Limits,
    ) -> Self {
        let cta = cta_of(dims, block);
        let mut template = vec![0u64; program.registers as usize];
        for &(r, bits) in &program.constants {
            template[r as usize] = bits;
        }
        for (slot, &value) in program.params.iter().zip(args) {
            template[slot.reg as usize] = value;
        }
        let [bx, by, bz] = dims.block;
        let mut threads = Vec::with_capacity((bx * by * bz) as usize);
        for z in 0..bz {
            for y in 0..by {
                for x in 0..bx {
                    threads.push(Thread {
                        regs: template.clone(),
                        block: 0,
                        pc: 0,
                        status: Status::Running,
                        local: vec![0; program.local_bytes as usize],
                        tid: [x, y, z],
                        barrier: 0,
                    });
                }
            }
        }
        let shared_bytes = (program.static_shared_bytes + dims.dynamic_shared_bytes) as usize;
        BlockRun {
            program,
            dims,
            cta,
            memory,
            writers,
            writer: u32::try_from(block + 1).unwrap_or(0),
            limits,
            threads,
            shared: vec![0; shared_bytes],
            shadow: vec![
                Shadow {
                    written: false,
                    write_epoch: 0,
                    writer: NO_THREAD,
                    read_epoch: 0,
                    reader: NO_THREAD,
                };
                shared_bytes
            ],
            epoch: 1,
            steps: 0,
            cost: 0,
            copy_buffer: Vec::new(),
        }
    }

    pub(super) fn run(mut self) -> Result<RunStats, Verdict> {
        loop {
            for t in 0..self.threads.len() {
                if self.threads[t].status == Status::Running {
                    self.run_thread(t)?;
                }
            }
            if self.threads.iter().any(|t| t.status == Status::AtWarpOp) {
                self.resolve_warp_ops()?;
                continue;
            }
            let waiting = self
                .threads
                .iter()
                .filter(|t| t.status == Status::AtBarrier)
                .count();
            if waiting == 0 {
                break;
            }
            self.check_convergence()?;
            // Every thread is at the same barrier: start a new interval.
            self.epoch += 1;
            for t in &mut self.threads {
                if t.status == Status::AtBarrier {
                    t.status = Status::Running;
                }
            }
        }
        Ok(RunStats {
            steps: self.steps,
            cost: self.cost,
            max_block_steps: self.steps,
        })
    }

    /// An aligned barrier (`bar.sync` without a count) must be reached by
    /// every thread of the block at the same instruction: one that some
    /// threads reach while others have exited or wait at another barrier is
    /// undefined behaviour on a GPU (it may hang, or release early), even
    /// where a given GPU happens to tolerate it.
    fn check_convergence(&self) -> Result<(), Verdict> {
        let Some(first) = self
            .threads
            .iter()
            .position(|t| t.status == Status::AtBarrier)
        else {
            return Ok(());
        };
        let at = self.threads[first].barrier;
        let other = self.threads.iter().find_map(|t| match t.status {
            Status::Exited => Some((t.tid, None)),
            Status::AtBarrier if t.barrier != at => Some((t.tid, Some(t.barrier))),
            _ => None,
        });
        let Some((other_thread, other_barrier)) = other else {
            return Ok(());
        };
        let th = &self.threads[first];
        Err(Verdict {
            fault: Fault::DivergentBarrier {
                other_thread,
                other_barrier,
            },
            instruction: at,
            block: self.program.blocks[th.block as usize].name.clone(),
            cta: self.cta,
            thread: th.tid,
            context: Box::default(),
        })
    }

    pub(super) fn verdict(&self, t: usize, inst: &Inst, fault: Fault) -> Verdict {
        let th = &self.threads[t];
        let shared_offset = match &fault {
            Fault::SharedRace { offset, .. } | Fault::UninitializedShared { offset } => {
                Some(*offset)
            }
            Fault::OutOfBounds {
                space: "shared",
                offset,
                ..
            } => Some(*offset),
            _ => None,
        };
        let shared = shared_offset
            .and_then(|o| self.program.shared_var_at(o))
            .map(|(name, at)| (name.to_string(), at));
        Verdict {
            fault,
            instruction: inst.id,
            block: self.program.blocks[th.block as usize].name.clone(),
            cta: self.cta,
            thread: th.tid,
            context: Box::new(Context {
                shared,
                ..Context::default()
            }),
        }
    }

    pub(super) fn special(&self, t: usize, s: SpecialReg) -> u32 {
        let tid = self.threads[t].tid;
        let (b, g, c) = (self.dims.block, self.dims.grid, self.cta);
        match s {
            SpecialReg::TidX => tid[0],
            SpecialReg::TidY => tid[1],
            SpecialReg::TidZ => tid[2],
            SpecialReg::NtidX => b[0],
            SpecialReg::NtidY => b[1],
            SpecialReg::NtidZ => b[2],
            SpecialReg::CtaidX => c[0],
            SpecialReg::CtaidY => c[1],
            SpecialReg::CtaidZ => c[2],
            SpecialReg::NctaidX => g[0],
            SpecialReg::NctaidY => g[1],
            SpecialReg::NctaidZ => g[2],
            SpecialReg::WarpSize => 32,
            SpecialReg::LaneId => (t as u32) % 32,
        }
    }
}
