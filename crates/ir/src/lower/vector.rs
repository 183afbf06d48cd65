//! Element and field moves: `extractelement`/`insertelement` (constant or
//! variable index), shuffles, bitcasts that regroup bits between vectors,
//! `extractvalue`/`insertvalue`.

use super::types::{is_aggregate, lane_count, scalar_type};
use super::Lowering;
use crate::error::IrError;
use crate::llvm::{self, Value};
use gevo_model::sim::code::*;
use llvm_sys::LLVMTypeKind;

impl Lowering {
    /// `extractelement`: a copy for a constant index (an index past the end
    /// is poison: 0); a compare-and-select chain for a variable one.
    pub(super) fn lower_extract_element(&mut self, inst: Value, dst: Reg) -> Result<(), IrError> {
        let start = self.out.len();
        let lanes = self.lanes(llvm::operand(inst, 0))?;
        let index = llvm::operand(inst, 1);
        if let Some(i) = llvm::const_int(index) {
            let src = match lanes.get(i as usize) {
                Some(&r) => r,
                None => self.const_reg(0),
            };
            self.copy(dst, src);
            self.cost_as_one(start);
            return Ok(());
        }
        let bits = self.bits_of(llvm::type_of(index))?;
        let index = self.reg(index)?;
        let mut acc = self.const_reg(0);
        let last = reachable_lanes(lanes.len(), bits);
        for (i, &lane) in lanes.iter().enumerate().take(last) {
            let hit = self.fresh();
            let i_reg = self.const_reg(i as u64);
            self.emit(
                Op::ICmp {
                    pred: ICmp::Eq,
                    bits,
                    a: index,
                    b: i_reg,
                },
                hit,
            );
            let next = if i + 1 == last { dst } else { self.fresh() };
            self.emit(
                Op::Select {
                    cond: hit,
                    a: lane,
                    b: acc,
                },
                next,
            );
            acc = next;
        }
        Ok(())
    }

    /// `insertelement`: copies of the vector with one element replaced (a
    /// constant index past the end gives the vector unchanged); with a
    /// variable index, a compare-and-select per element.
    pub(super) fn lower_insert_element(&mut self, inst: Value, dst: Reg) -> Result<(), IrError> {
        let start = self.out.len();
        let lanes = self.lanes(llvm::operand(inst, 0))?;
        let value = self.reg(llvm::operand(inst, 1))?;
        let index = llvm::operand(inst, 2);
        if let Some(i) = llvm::const_int(index) {
            for (k, &lane) in (0..).zip(&lanes) {
                self.copy(dst + k, if u64::from(k) == i { value } else { lane });
            }
            self.cost_as_one(start);
            return Ok(());
        }
        let bits = self.bits_of(llvm::type_of(index))?;
        let index = self.reg(index)?;
        let reachable = reachable_lanes(lanes.len(), bits);
        for (k, &lane) in (0..).zip(&lanes) {
            if k as usize >= reachable {
                self.copy(dst + k, lane);
                continue;
            }
            let hit = self.fresh();
            let k_reg = self.const_reg(u64::from(k));
            self.emit(
                Op::ICmp {
                    pred: ICmp::Eq,
                    bits,
                    a: index,
                    b: k_reg,
                },
                hit,
            );
            self.emit(
                Op::Select {
                    cond: hit,
                    a: value,
                    b: lane,
                },
                dst + k,
            );
        }
        Ok(())
    }

    /// `shufflevector`: one copy per result element. Undefined mask entries
    /// are not written: no other instruction writes those registers, so they
    /// keep the register file's initial 0.
    pub(super) fn lower_shuffle(&mut self, inst: Value, dst: Reg) -> Result<(), IrError> {
        let first = self.lanes(llvm::operand(inst, 0))?;
        let second = self.lanes(llvm::operand(inst, 1))?;
        for (k, m) in (0u32..).zip(llvm::shuffle_mask(inst)) {
            let Ok(m) = usize::try_from(m) else {
                continue; // undef or poison entry
            };
            let src = match m.checked_sub(first.len()) {
                None => first.get(m),
                Some(j) => second.get(j),
            };
            if let Some(&src) = src {
                self.copy(dst + k, src);
            }
        }
        Ok(())
    }

    /// A bitcast between a vector and a scalar or a vector of another
    /// element count: the bits are regrouped, element 0 lowest (LLVM's
    /// little-endian layout), with shifts, ors and truncations.
    pub(super) fn lower_repack(&mut self, inst: Value, dst: Reg) -> Result<(), IrError> {
        let from = llvm::operand(inst, 0);
        let a = u64::from(self.bits_of(scalar_type(llvm::type_of(from)))?);
        let to_ty = llvm::type_of(inst);
        let b = self.bits_of(scalar_type(to_ty))?;
        let sources = self.lanes(from)?;
        let outputs = lane_count(to_ty)?;
        if sources.len() as u64 * a != u64::from(outputs) * u64::from(b) {
            let what = format!("bitcast to {}", llvm::type_to_string(to_ty));
            self.emit(Op::Unsupported(what), dst);
            return Ok(());
        }
        for j in 0..outputs {
            let lo = u64::from(j) * u64::from(b);
            let hi = lo + u64::from(b);
            let mut acc: Option<Reg> = None;
            for (i, &src) in sources.iter().enumerate() {
                let (start, end) = (i as u64 * a, (i as u64 + 1) * a);
                if end <= lo || start >= hi {
                    continue;
                }
                let (op, shift) = if start >= lo {
                    (IntOp::Shl, start - lo)
                } else {
                    (IntOp::LShr, lo - start)
                };
                let piece = if shift == 0 {
                    src
                } else {
                    let t = self.fresh();
                    let amount = self.const_reg(shift);
                    self.int(op, 64, src, amount, t);
                    t
                };
                acc = Some(match acc {
                    None => piece,
                    Some(prev) => {
                        let t = self.fresh();
                        self.int(IntOp::Or, 64, prev, piece, t);
                        t
                    }
                });
            }
            let a = match acc {
                Some(r) => r,
                None => self.const_reg(0),
            };
            self.emit(
                Op::Cast {
                    cast: Cast::Trunc,
                    from_bits: 64,
                    to_bits: b,
                    a,
                },
                dst + j,
            );
        }
        Ok(())
    }

    /// `extractvalue` of a struct held in registers (a `cmpxchg` or
    /// `*.with.overflow` result, or a phi, select or insertvalue of one).
    pub(super) fn lower_extract_value(&mut self, inst: Value, dst: Reg) -> Result<(), IrError> {
        let aggregate = llvm::operand(inst, 0);
        match self.field_of(inst, aggregate)? {
            Some(i) => match self.lanes(aggregate)?.get(i) {
                Some(&src) => self.copy(dst, src),
                None => self.emit(Op::Unsupported("extractvalue of an aggregate".into()), dst),
            },
            None => self.emit(Op::Unsupported("extractvalue of an aggregate".into()), dst),
        }
        Ok(())
    }

    pub(super) fn lower_insert_value(&mut self, inst: Value, dst: Reg) -> Result<(), IrError> {
        let aggregate = llvm::operand(inst, 0);
        let Some(i) = self.field_of(inst, aggregate)? else {
            self.emit(Op::Unsupported("insertvalue into an aggregate".into()), dst);
            return Ok(());
        };
        let lanes = self.lanes(aggregate)?;
        let value = self.reg(llvm::operand(inst, 1))?;
        for (k, &lane) in (0..).zip(&lanes) {
            self.copy(dst + k, if k as usize == i { value } else { lane });
        }
        Ok(())
    }

    /// The field an `extractvalue`/`insertvalue` names, when it is a scalar
    /// field of a flat struct (one register per field).
    fn field_of(&self, inst: Value, aggregate: Value) -> Result<Option<usize>, IrError> {
        let indices = llvm::aggregate_indices(inst);
        let ty = llvm::type_of(aggregate);
        if indices.len() != 1 || llvm::type_kind(ty) != LLVMTypeKind::LLVMStructTypeKind {
            return Ok(None);
        }
        let i = indices[0];
        let n = llvm::struct_field_count(ty);
        let flat = (0..n).all(|k| !is_aggregate(llvm::struct_field_type(ty, k)));
        Ok((i < n && flat).then_some(i as usize))
    }
}

/// How many of `n` elements an index of `bits` bits can reach.
fn reachable_lanes(n: usize, bits: u32) -> usize {
    if bits >= 32 {
        n
    } else {
        n.min(1 << bits)
    }
}
