//! Control flow: branches and switches, and the edges between blocks, which
//! carry their target's phis as copies.

use super::unsupported;
use super::Lowering;
use crate::ir::error::IrError;
use crate::ir::llvm::{self, Value};
use crate::sim::code::*;
use llvm_sys::core::*;
use llvm_sys::prelude::*;

impl Lowering {
    /// A new edge `from` -> `to` carrying `to`'s phis as copies (each phi's
    /// value for `from`); its index.
    fn edge(&mut self, from: LLVMBasicBlockRef, to: LLVMBasicBlockRef) -> Result<u32, IrError> {
        let mut copies = Vec::new();
        for phi in llvm::instructions(to)
            .into_iter()
            .take_while(|&i| llvm::is_phi(i))
        {
            let count = unsafe { LLVMCountIncoming(phi) };
            let incoming = (0..count)
                .find(|&k| llvm::incoming_block(phi, k) == from)
                .ok_or_else(|| unsupported("phi without an entry for its predecessor"))?;
            // A vector phi copies every element.
            let sources = self.lanes(llvm::operand(phi, incoming))?;
            let first = self.regs[&phi];
            copies.extend((first..).zip(sources));
        }
        self.edges.push(Edge {
            target: self.block_index[&to],
            copies,
        });
        Ok(self.edges.len() as u32 - 1)
    }

    /// `br`: one edge, or two under a condition.
    pub(super) fn branch(&mut self, inst: Value, block: LLVMBasicBlockRef) -> Result<Op, IrError> {
        Ok(if unsafe { LLVMIsConditional(inst) } != 0 {
            let cond = self.reg(unsafe { LLVMGetCondition(inst) })?;
            let t = unsafe { LLVMGetSuccessor(inst, 0) };
            let f = unsafe { LLVMGetSuccessor(inst, 1) };
            Op::CondBr {
                cond,
                if_true: self.edge(block, t)?,
                if_false: self.edge(block, f)?,
            }
        } else {
            let t = unsafe { LLVMGetSuccessor(inst, 0) };
            Op::Br {
                edge: self.edge(block, t)?,
            }
        })
    }

    /// `switch`: the default edge, then an edge per case value.
    pub(super) fn switch(
        &mut self,
        inst: Value,
        block: LLVMBasicBlockRef,
        lane: Option<u32>,
    ) -> Result<Op, IrError> {
        let value = self.lane_reg(llvm::operand(inst, 0), lane)?;
        let bits = self.bits_of(llvm::type_of(llvm::operand(inst, 0)))?;
        let default = self.edge(block, unsafe { LLVMGetSwitchDefaultDest(inst) })?;
        let mut cases = Vec::new();
        for k in 1..unsafe { LLVMGetNumSuccessors(inst) } {
            let case_value = llvm::operand(inst, 2 * k);
            let v = self.const_bits(case_value)?;
            let edge = self.edge(block, unsafe { LLVMGetSuccessor(inst, k) })?;
            cases.push((v, edge));
        }
        Ok(Op::Switch {
            value,
            bits,
            cases,
            default,
        })
    }
}
