//! Registers for values: each instruction's and parameter's register, and
//! constants folded to raw bits (constant expressions too) in registers of
//! their own, one per distinct value; the lanes (consecutive registers) of
//! vectors and structs.

use super::types::{is_aggregate, lane_count};
use super::unsupported;
use super::Lowering;
use crate::error::IrError;
use crate::llvm::{self, Value};
use gevo_model::sim::code::*;
use llvm_sys::LLVMOpcode;

impl Lowering {
    /// The raw bits of a constant (integers zero-extended from their width,
    /// floats as IEEE bits, pointers tagged as in `sim::pointer`).
    pub(super) fn const_bits(&self, c: Value) -> Result<u64, IrError> {
        if let Some(&p) = self.globals.get(&c) {
            return Ok(p);
        }
        if llvm::is_global_value(c) {
            return Err(unsupported(format!(
                "use of global @{}",
                llvm::value_name(c)
            )));
        }
        let ty = llvm::type_of(c);
        if llvm::is_null_or_undef(c) {
            return Ok(0);
        }
        if let Some(value) = llvm::const_int(c) {
            let bits = self.bits_of(ty)?;
            return Ok(value & mask(bits));
        }
        if let Some(v) = llvm::const_real(c) {
            return Ok(match self.float_width(ty)? {
                FloatWidth::F32 => u64::from((v as f32).to_bits()),
                FloatWidth::F64 => v.to_bits(),
            });
        }
        if let Some(opcode) = llvm::const_expr_opcode(c) {
            return self.const_expr_bits(c, opcode);
        }
        Err(unsupported(format!(
            "constant {}",
            llvm::value_to_string(c)
        )))
    }

    /// The bits of a constant expression `c` (of `opcode`): casts, and GEPs
    /// with constant indices.
    fn const_expr_bits(&self, c: Value, opcode: LLVMOpcode) -> Result<u64, IrError> {
        match opcode {
            LLVMOpcode::LLVMAddrSpaceCast
            | LLVMOpcode::LLVMBitCast
            | LLVMOpcode::LLVMPtrToInt
            | LLVMOpcode::LLVMIntToPtr => {
                let inner = self.const_bits(llvm::operand(c, 0))?;
                let bits = self.bits_of(llvm::type_of(c))?;
                Ok(inner & mask(bits))
            }
            LLVMOpcode::LLVMGetElementPtr => {
                let base = self.const_bits(llvm::operand(c, 0))?;
                let (offset, terms) = self.gep_terms(c)?;
                if !terms.is_empty() {
                    return Err(unsupported("non-constant index in a constant GEP"));
                }
                Ok(base.wrapping_add(offset as u64))
            }
            _ => Err(unsupported(format!(
                "constant expression {}",
                llvm::value_to_string(c)
            ))),
        }
    }

    /// The register holding `v`: an instruction's or parameter's register, or
    /// a constant register.
    pub(super) fn reg(&mut self, v: Value) -> Result<Reg, IrError> {
        if let Some(&r) = self.regs.get(&v) {
            return Ok(r);
        }
        if llvm::is_instruction(v) || llvm::is_argument(v) {
            return Err(unsupported(format!("value {}", llvm::value_to_string(v))));
        }
        let bits = self.const_bits(v)?;
        Ok(self.const_reg(bits))
    }

    /// A register holding the constant `bits`.
    pub(super) fn const_reg(&mut self, bits: u64) -> Reg {
        if let Some(&r) = self.const_regs.get(&bits) {
            return r;
        }
        let r = self.fresh();
        self.const_regs.insert(bits, r);
        self.constants.push((r, bits));
        r
    }

    /// The registers of every element of `v`: one for a scalar, consecutive
    /// ones for a vector or struct (constants get their own run of registers).
    pub(super) fn lanes(&mut self, v: Value) -> Result<Vec<Reg>, IrError> {
        let ty = llvm::type_of(v);
        if !is_aggregate(ty) {
            return Ok(vec![self.reg(v)?]);
        }
        let n = lane_count(ty)?;
        if let Some(&r) = self.regs.get(&v).or_else(|| self.const_lanes.get(&v)) {
            return Ok((r..r + n).collect());
        }
        if llvm::is_instruction(v) || llvm::is_argument(v) {
            return Err(unsupported(format!("value {}", llvm::value_to_string(v))));
        }
        let mut bits = Vec::with_capacity(n as usize);
        for i in 0..n {
            let element = llvm::aggregate_element(v, i);
            let Some(e) = element.filter(|&e| !is_aggregate(llvm::type_of(e))) else {
                return Err(unsupported(format!(
                    "constant {}",
                    llvm::value_to_string(v)
                )));
            };
            bits.push(self.const_bits(e)?);
        }
        let first = self.fresh_n(n);
        for (r, b) in (first..).zip(bits) {
            self.constants.push((r, b));
        }
        self.const_lanes.insert(v, first);
        Ok((first..first + n).collect())
    }

    /// The register of operand `v` for element `lane` of an elementwise
    /// instruction (scalar operands, such as a select's condition or an
    /// intrinsic's flag, are the same for every element).
    pub(super) fn lane_reg(&mut self, v: Value, lane: Option<u32>) -> Result<Reg, IrError> {
        if !is_aggregate(llvm::type_of(v)) {
            return self.reg(v);
        }
        let lanes = self.lanes(v)?;
        lane.and_then(|i| lanes.get(i as usize).copied())
            .ok_or_else(|| {
                unsupported(format!(
                    "vector or struct operand {} of a scalar instruction",
                    llvm::value_to_string(v)
                ))
            })
    }
}
