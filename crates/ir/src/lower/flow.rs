//! Control flow: branches and switches, and the edges between blocks, which
//! carry their target's phis as copies.

use super::unsupported;
use super::Lowering;
use crate::error::IrError;
use crate::llvm::{self, Value};
use gevo_model::sim::code::*;

impl Lowering {
    /// A new edge `from` -> `to` carrying `to`'s phis as copies (each phi's
    /// value for `from`); its index.
    fn edge(&mut self, from: llvm::Block, to: llvm::Block) -> Result<u32, IrError> {
        let mut copies = Vec::new();
        for phi in llvm::instructions(to)
            .into_iter()
            .take_while(|&i| llvm::is_phi(i))
        {
            let count = llvm::incoming_count(phi);
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
    pub(super) fn branch(&mut self, inst: Value, block: llvm::Block) -> Result<Op, IrError> {
        // The targets in operand order: the true one first.
        let targets = llvm::terminator_successors(inst);
        Ok(match llvm::branch_condition(inst) {
            Some(condition) => {
                let cond = self.reg(condition)?;
                Op::CondBr {
                    cond,
                    if_true: self.edge(block, targets[0])?,
                    if_false: self.edge(block, targets[1])?,
                }
            }
            None => Op::Br {
                edge: self.edge(block, targets[0])?,
            },
        })
    }

    /// `switch`: the default edge, then an edge per case value.
    pub(super) fn switch(
        &mut self,
        inst: Value,
        block: llvm::Block,
        lane: Option<u32>,
    ) -> Result<Op, IrError> {
        let value = self.lane_reg(llvm::operand(inst, 0), lane)?;
        let bits = self.bits_of(llvm::type_of(llvm::operand(inst, 0)))?;
        // The default target first, then one per case (its value is
        // operand 2k, for the k-th target).
        let targets = llvm::terminator_successors(inst);
        let default = self.edge(block, targets[0])?;
        let mut cases = Vec::new();
        for (k, &target) in (0u32..).zip(&targets).skip(1) {
            let case_value = llvm::operand(inst, 2 * k);
            let v = self.const_bits(case_value)?;
            let edge = self.edge(block, target)?;
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
