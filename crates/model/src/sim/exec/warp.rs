//! Warp collectives: `shfl.sync` (idx, up, down, bfly), `vote.sync` (all,
//! any, uni, ballot) and `activemask`, executed together by the threads of a
//! warp that wait at them (the active lanes), with PTX's shuffle clamp and
//! segment rules.

use super::block::{BlockRun, Status};
use crate::sim::code::*;
use crate::sim::verdict::{Fault, Verdict};

impl BlockRun<'_> {
    /// Executes the warp-collective instructions that threads wait at, one
    /// warp at a time: the waiting threads of a warp are its active lanes.
    pub(super) fn resolve_warp_ops(&mut self) -> Result<(), Verdict> {
        let program = self.program;
        for warp_start in (0..self.threads.len()).step_by(32) {
            let lanes: Vec<usize> = (warp_start..(warp_start + 32).min(self.threads.len()))
                .filter(|&t| self.threads[t].status == Status::AtWarpOp)
                .collect();
            let Some(&first) = lanes.first() else {
                continue;
            };
            let at = |t: usize| (self.threads[t].block, self.threads[t].pc);
            let inst = &program.blocks[at(first).0 as usize].insts[at(first).1 as usize];
            if lanes.iter().any(|&t| at(t) != at(first)) {
                let what =
                    "threads of one warp at different warp-collective instructions".to_string();
                return Err(self.verdict(first, inst, Fault::Unsupported { what }));
            }
            let Op::Warp { op, args } = &inst.op else {
                unreachable!("threads wait only at warp operations")
            };
            let active: u32 = lanes
                .iter()
                .map(|&t| 1u32 << (t % 32))
                .fold(0, |a, b| a | b);
            let arg = |t: usize, i: usize| self.threads[t].regs[args[i] as usize];
            let results: Vec<u64> = lanes
                .iter()
                .map(|&t| {
                    let lane = (t % 32) as u32;
                    let value_of = |l: u32| {
                        let src = warp_start + l as usize;
                        if active & (1 << l) != 0 {
                            arg(src, 1)
                        } else {
                            arg(t, 1)
                        }
                    };
                    match op {
                        WarpOp::ShflIdx | WarpOp::ShflUp | WarpOp::ShflDown | WarpOp::ShflBfly => {
                            let (b, c) = (arg(t, 2) as u32, arg(t, 3) as u32);
                            let segmask = (c >> 8) & 0x1f;
                            let max_lane = (lane & segmask) | (c & 0x1f & !segmask);
                            let min_lane = lane & segmask;
                            let (j, ok) = match op {
                                WarpOp::ShflUp => {
                                    (lane.wrapping_sub(b), lane >= b && lane - b >= max_lane)
                                }
                                WarpOp::ShflDown => (
                                    lane.wrapping_add(b),
                                    lane.checked_add(b).is_some_and(|j| j <= max_lane),
                                ),
                                WarpOp::ShflBfly => (lane ^ b, (lane ^ b) <= max_lane),
                                _ => (
                                    min_lane | (b & !segmask),
                                    (min_lane | (b & !segmask)) <= max_lane,
                                ),
                            };
                            value_of(if ok && j < 32 { j } else { lane })
                        }
                        WarpOp::VoteAll | WarpOp::VoteAny | WarpOp::VoteUni | WarpOp::Ballot => {
                            let ballot: u32 = lanes
                                .iter()
                                .filter(|&&u| arg(u, 1) & 1 == 1)
                                .map(|&u| 1u32 << (u % 32))
                                .fold(0, |a, b| a | b)
                                & arg(t, 0) as u32;
                            let members = active & arg(t, 0) as u32;
                            u64::from(match op {
                                WarpOp::VoteAll => u32::from(ballot == members),
                                WarpOp::VoteAny => u32::from(ballot != 0),
                                WarpOp::VoteUni => u32::from(ballot == 0 || ballot == members),
                                _ => ballot,
                            })
                        }
                        WarpOp::ActiveMask => u64::from(active),
                    }
                })
                .collect();
            for (&t, value) in lanes.iter().zip(results) {
                let th = &mut self.threads[t];
                th.regs[inst.dst as usize] = value;
                th.pc += 1;
                th.status = Status::Running;
                self.steps += 1;
                self.cost += u64::from(inst.cost);
            }
        }
        Ok(())
    }
}
