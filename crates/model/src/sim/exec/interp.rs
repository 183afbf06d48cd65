//! The interpreter loop: runs one thread until it reaches a barrier, a
//! warp-collective instruction or its end, counting steps and cost against
//! the block's budget. Branches take their edge's phi copies here; the
//! instruction families live in their own files (`access`, `atomic`, `int`,
//! `float`, `cast`), and rare instructions go through `run_rare`.

use super::atomic::rmw;
use super::block::{BlockRun, Status};
use super::cast::cast_value;
use super::float::{f32b, fcmp, float_fn, float_op};
use super::int::{icmp, int_fn, int_op, prmt};
use crate::sim::code::*;
use crate::sim::pointer;
use crate::sim::verdict::{Fault, Verdict};

impl BlockRun<'_> {
    fn take_edge(&mut self, t: usize, edge: u32) {
        let e = &self.program.edges[edge as usize];
        let th = &mut self.threads[t];
        if !e.copies.is_empty() {
            self.copy_buffer.clear();
            self.copy_buffer
                .extend(e.copies.iter().map(|&(_, src)| th.regs[src as usize]));
            for (&(dst, _), &v) in e.copies.iter().zip(&self.copy_buffer) {
                th.regs[dst as usize] = v;
            }
        }
        th.block = e.target;
        th.pc = 0;
    }

    pub(super) fn run_thread(&mut self, t: usize) -> Result<(), Verdict> {
        let program = self.program;
        loop {
            let th = &mut self.threads[t];
            let inst = &program.blocks[th.block as usize].insts[th.pc as usize];
            th.pc += 1;
            self.steps += 1;
            self.cost += u64::from(inst.cost);
            if self.steps > self.limits.block_step_budget {
                return Err(self.step_budget_fault(t, inst));
            }
            let r = |reg: Reg| th.regs[reg as usize];
            let value = match &inst.op {
                Op::Int { op, bits, a, b } => int_op(*op, *bits, r(*a), r(*b)),
                Op::Float { op, width, a, b } => float_op(*op, *width, r(*a), r(*b)),
                Op::FloatUnary { f, width, a } => float_fn(*f, *width, r(*a)),
                Op::Fma { width, a, b, c } => fma(*width, r(*a), r(*b), r(*c)),
                Op::IntAbs { bits, a } => {
                    (sign_extend(r(*a), *bits).wrapping_abs() as u64) & mask(*bits)
                }
                Op::ICmp { pred, bits, a, b } => u64::from(icmp(*pred, *bits, r(*a), r(*b))),
                Op::FCmp { pred, width, a, b } => u64::from(fcmp(*pred, *width, r(*a), r(*b))),
                Op::Cast {
                    cast,
                    from_bits,
                    to_bits,
                    a,
                } => cast_value(*cast, *from_bits, *to_bits, r(*a)),
                Op::Select { cond, a, b } => r(if r(*cond) & 1 == 1 { *a } else { *b }),
                Op::Gep {
                    base,
                    offset,
                    terms,
                } => gep(&th.regs, *base, *offset, terms),
                Op::Special(s) => u64::from(self.special(t, *s)),
                Op::Load { ptr, bytes } => {
                    let p = r(*ptr);
                    self.load(t, inst, p, *bytes)?
                }
                Op::Store { ptr, value, bytes } => {
                    let (p, v) = (r(*ptr), r(*value));
                    self.store(t, inst, p, v, *bytes)?;
                    continue;
                }
                Op::IntUnary { .. }
                | Op::Prmt { .. }
                | Op::VecLoad { .. }
                | Op::VecStore { .. } => {
                    self.run_rare(t, inst)?;
                    continue;
                }
                Op::AtomicRmw { .. } | Op::CmpXchg { .. } => self.run_atomic(t, inst)?,
                Op::Alloca { offset } => pointer::make(pointer::LOCAL, 0, *offset),
                Op::Barrier => {
                    self.threads[t].status = Status::AtBarrier;
                    self.threads[t].barrier = inst.id;
                    return Ok(());
                }
                Op::Warp { .. } => {
                    self.park_at_warp_op(t, inst);
                    return Ok(());
                }
                Op::Fence | Op::Nop => continue,
                Op::Br { edge } => {
                    self.take_edge(t, *edge);
                    continue;
                }
                Op::CondBr {
                    cond,
                    if_true,
                    if_false,
                } => {
                    let edge = if r(*cond) & 1 == 1 { if_true } else { if_false };
                    self.take_edge(t, *edge);
                    continue;
                }
                Op::Switch {
                    value,
                    bits,
                    cases,
                    default,
                } => {
                    let edge = switch_edge(r(*value) & mask(*bits), cases, *default);
                    self.take_edge(t, edge);
                    continue;
                }
                Op::Ret => {
                    self.threads[t].status = Status::Exited;
                    return Ok(());
                }
                Op::Unreachable | Op::Unsupported(_) => return Err(self.instruction_fault(t, inst)),
            };
            self.threads[t].regs[inst.dst as usize] = value;
        }
    }

    /// Builds the fault for a block that ran past its step budget.
    #[cold]
    #[inline(never)]
    fn step_budget_fault(&self, t: usize, inst: &Inst) -> Verdict {
        self.verdict(
            t,
            inst,
            Fault::StepBudget {
                budget: self.limits.block_step_budget,
            },
        )
    }

    /// Builds the fault for reaching `unreachable` or an unsupported instruction.
    #[cold]
    #[inline(never)]
    fn instruction_fault(&self, t: usize, inst: &Inst) -> Verdict {
        let fault = match &inst.op {
            Op::Unsupported(what) => Fault::Unsupported { what: what.clone() },
            _ => Fault::Unreachable,
        };
        self.verdict(t, inst, fault)
    }

    /// Parks the thread before a warp-collective instruction, undoing its
    /// count: it is executed with the rest of its warp (`resolve_warp_ops`).
    #[inline]
    fn park_at_warp_op(&mut self, t: usize, inst: &Inst) {
        let th = &mut self.threads[t];
        th.pc -= 1;
        th.status = Status::AtWarpOp;
        self.steps -= 1;
        self.cost -= u64::from(inst.cost);
    }

    /// Runs `atomicrmw` or `cmpxchg`, returning the old value.
    #[inline]
    fn run_atomic(&mut self, t: usize, inst: &Inst) -> Result<u64, Verdict> {
        let r = |reg: Reg| self.threads[t].regs[reg as usize];
        match &inst.op {
            Op::AtomicRmw {
                op,
                ptr,
                value,
                bytes,
            } => {
                let (p, v) = (r(*ptr), r(*value));
                self.atomic(t, inst, p, *bytes, |old| rmw(*op, *bytes, old, v))
            }
            Op::CmpXchg {
                ptr,
                expected,
                new,
                bytes,
            } => {
                let (p, e, n) = (r(*ptr), r(*expected), r(*new));
                // The result is { old, success }; only `old` is modelled.
                self.atomic(t, inst, p, *bytes, |old| if old == e { n } else { old })
            }
            _ => unreachable!("run_atomic on a non-atomic instruction"),
        }
    }

    /// Instructions that kernels seldom execute, with one call site in the
    /// interpreter loop so they do not weigh on its code.
    #[inline(never)]
    fn run_rare(&mut self, t: usize, inst: &Inst) -> Result<(), Verdict> {
        let r = |reg: Reg| self.threads[t].regs[reg as usize];
        let value = match &inst.op {
            Op::IntUnary { f, bits, a } => int_fn(*f, *bits, r(*a)),
            Op::Prmt { a, b, c } => prmt(r(*a), r(*b), r(*c)),
            Op::VecLoad {
                ptr,
                elem_bytes,
                lanes,
            } => return self.load_vector(t, inst, r(*ptr), *elem_bytes, *lanes),
            Op::VecStore {
                ptr,
                value,
                elem_bytes,
                lanes,
            } => return self.store_vector(t, inst, r(*ptr), *value, *elem_bytes, *lanes),
            _ => return Ok(()),
        };
        self.threads[t].regs[inst.dst as usize] = value;
        Ok(())
    }
}

/// Fused multiply-add at the given width, on raw register bits.
#[inline]
fn fma(width: FloatWidth, a: u64, b: u64, c: u64) -> u64 {
    match width {
        FloatWidth::F32 => u64::from(f32b(a).mul_add(f32b(b), f32b(c)).to_bits()),
        FloatWidth::F64 => f64::from_bits(a)
            .mul_add(f64::from_bits(b), f64::from_bits(c))
            .to_bits(),
    }
}

/// The address a `getelementptr` computes: base, constant offset and
/// each scaled, sign-extended index.
#[inline]
fn gep(regs: &[u64], base: Reg, offset: i64, terms: &[GepTerm]) -> u64 {
    let mut p = regs[base as usize].wrapping_add(offset as u64);
    for &(idx, bits, scale) in terms {
        p = p.wrapping_add(sign_extend(regs[idx as usize], bits).wrapping_mul(scale) as u64);
    }
    p
}

/// The edge a `switch` on the (masked) value takes.
#[inline]
fn switch_edge(v: u64, cases: &[(u64, u32)], default: u32) -> u32 {
    cases
        .iter()
        .find(|(c, _)| *c == v)
        .map_or(default, |&(_, e)| e)
}
