//! Atomics: read-modify-write and compare-and-swap in the global, shared
//! and local spaces, and the value semantics of each `atomicrmw` operation.
//! Atomics never race.

use super::access::{read_le, write_le};
use super::block::BlockRun;
use super::float::float_op;
use super::int::int_op;
use crate::sim::code::*;
use crate::sim::cost;
use crate::sim::pointer;
use crate::sim::verdict::Verdict;

impl BlockRun<'_> {
    /// Read-modify-write; atomics never race, so shared ones skip the shadow
    /// checks (but mark the bytes written).
    pub(super) fn atomic(
        &mut self,
        t: usize,
        inst: &Inst,
        p: u64,
        bytes: u32,
        f: impl Fn(u64) -> u64,
    ) -> Result<u64, Verdict> {
        let (space, index, offset) = pointer::split(p);
        self.cost += cost::memory_weight(space);
        let end = offset + u64::from(bytes);
        let old = match space {
            pointer::GLOBAL
                if self.memory.read_only(index) && self.memory.in_bounds(index, offset, bytes) =>
            {
                return Err(self.input_written(t, inst, index, offset, bytes))
            }
            pointer::GLOBAL => self.memory.update(index, offset, bytes, &f),
            pointer::SHARED if end <= self.shared.len() as u64 => {
                let range = offset as usize..end as usize;
                let old = read_le(&self.shared[range.clone()]);
                write_le(&mut self.shared[range.clone()], f(old));
                for s in &mut self.shadow[range] {
                    s.written = true;
                }
                Some(old)
            }
            pointer::LOCAL if end <= self.threads[t].local.len() as u64 => {
                let range = offset as usize..end as usize;
                let local = &mut self.threads[t].local;
                let old = read_le(&local[range.clone()]);
                write_le(&mut local[range], f(old));
                Some(old)
            }
            _ => None,
        };
        old.ok_or_else(|| self.out_of_bounds(t, inst, p, bytes))
    }
}

pub(super) fn rmw(op: RmwOp, bytes: u32, old: u64, v: u64) -> u64 {
    let bits = bytes * 8;
    match op {
        RmwOp::Xchg => v,
        RmwOp::Add => int_op(IntOp::Add, bits, old, v),
        RmwOp::Sub => int_op(IntOp::Sub, bits, old, v),
        RmwOp::And => old & v,
        RmwOp::Or => old | v,
        RmwOp::Xor => old ^ v,
        RmwOp::Max => int_op(IntOp::SMax, bits, old, v),
        RmwOp::Min => int_op(IntOp::SMin, bits, old, v),
        RmwOp::UMax => int_op(IntOp::UMax, bits, old, v),
        RmwOp::UMin => int_op(IntOp::UMin, bits, old, v),
        RmwOp::FAdd => float_op(
            FloatOp::Add,
            if bits == 32 {
                FloatWidth::F32
            } else {
                FloatWidth::F64
            },
            old,
            v,
        ),
    }
}
