//! Memory: globals laid out (shared-memory offsets, constant-space bytes),
//! GEPs as byte offsets, loads and stores (a vector one is one access),
//! atomics, and allocas in the thread's local frame.

use super::types::{lane_count, scalar_type};
use super::Lowering;
use super::{unsupported, MAX_LOCAL_BYTES};
use crate::error::IrError;
use crate::llvm::{self, Value};
use gevo_model::sim::code::*;
use gevo_model::sim::pointer;
use llvm_sys::{LLVMAtomicRMWBinOp, LLVMTypeKind};

/// Where the module's globals live for the simulator.
pub(super) struct GlobalLayout {
    /// Bytes of static shared memory.
    pub(super) shared_bytes: u64,
    pub(super) shared_vars: Vec<SharedVar>,
    /// Read-only globals' bytes, by constant-space id.
    pub(super) constant_globals: Vec<Vec<u8>>,
}

impl Lowering {
    /// Shared (`addrspace(3)`) globals get offsets in the block's shared
    /// memory; read-only globals with initializers get constant-space ids.
    pub(super) fn lay_out_globals(
        &mut self,
        module: llvm::Module,
    ) -> Result<GlobalLayout, IrError> {
        let mut shared = 0u64;
        let mut shared_vars = Vec::new();
        let mut constant_globals = Vec::new();
        for global in llvm::globals(module) {
            let g = global.value;
            let size = self.alloc_size(global.value_type);
            let align = u64::from(global.alignment.max(1));
            if global.address_space == 3 {
                shared = shared.div_ceil(align) * align;
                self.globals
                    .insert(g, pointer::make(pointer::SHARED, 0, shared));
                shared_vars.push(SharedVar {
                    name: source_name(&llvm::value_name(g)),
                    offset: shared,
                    size,
                    dims: array_dims(global.value_type),
                });
                shared += size;
            } else {
                let bytes = global
                    .initializer
                    .and_then(|init| self.constant_bytes(init, size));
                if let Some(bytes) = bytes {
                    let id = constant_globals.len() as u64;
                    self.globals
                        .insert(g, pointer::make(pointer::CONSTANT, id, 0));
                    constant_globals.push(bytes);
                }
                // Other globals stay unmapped; a use of one is unsupported.
            }
        }
        Ok(GlobalLayout {
            shared_bytes: shared,
            shared_vars,
            constant_globals,
        })
    }

    /// Raw bytes of a constant initializer we can read: zero, scalars, and
    /// arrays of them.
    fn constant_bytes(&self, c: Value, size: u64) -> Option<Vec<u8>> {
        if llvm::is_null_or_undef(c) {
            return Some(vec![0; size as usize]);
        }
        let ty = llvm::type_of(c);
        let kind = llvm::type_kind(ty);
        if kind == LLVMTypeKind::LLVMArrayTypeKind || kind == LLVMTypeKind::LLVMVectorTypeKind {
            let elem_ty = llvm::element_type(ty);
            let n = if kind == LLVMTypeKind::LLVMArrayTypeKind {
                llvm::array_length(ty)
            } else {
                // Vector elements are packed; only whole-byte ones are read.
                if self.bits_of(elem_ty).ok()? % 8 != 0 {
                    return None;
                }
                u64::from(llvm::vector_size(ty))
            };
            let elem_size = if kind == LLVMTypeKind::LLVMArrayTypeKind {
                self.alloc_size(elem_ty)
            } else {
                self.store_size(elem_ty)
            };
            let mut out = Vec::with_capacity(size as usize);
            for i in 0..n {
                let e = llvm::aggregate_element(c, i as u32)?;
                out.extend(self.constant_bytes(e, elem_size)?);
            }
            out.resize(size as usize, 0);
            return Some(out);
        }
        let bits = self.const_bits(c).ok()?;
        let store = self.store_size(ty) as usize;
        let mut out = bits.to_le_bytes()[..store.min(8)].to_vec();
        out.resize(size as usize, 0);
        Some(out)
    }

    /// Byte offset of a GEP: the constant part, and (register, index width,
    /// scale) for each variable index.
    pub(super) fn gep_terms(&self, gep: Value) -> Result<(i64, Vec<GepTerm>), IrError> {
        let mut ty = llvm::gep_source_type(gep);
        let n = llvm::num_operands(gep);
        let mut offset = 0i64;
        let mut terms = Vec::new();
        for i in 1..n {
            let idx = llvm::operand(gep, i);
            let idx_bits = self.bits_of(llvm::type_of(idx))?;
            let constant = llvm::const_int(idx).map(|v| sign_extend(v, idx_bits));
            let scale = if i == 1 {
                self.alloc_size(ty) as i64
            } else {
                match llvm::type_kind(ty) {
                    LLVMTypeKind::LLVMStructTypeKind => {
                        let field = constant.ok_or_else(|| unsupported("variable struct index"))?;
                        offset += self.layout.field_offset(ty, field as u32) as i64;
                        ty = llvm::struct_field_type(ty, field as u32);
                        continue;
                    }
                    LLVMTypeKind::LLVMArrayTypeKind | LLVMTypeKind::LLVMVectorTypeKind => {
                        ty = llvm::element_type(ty);
                        self.alloc_size(ty) as i64
                    }
                    _ => {
                        return Err(unsupported(format!(
                            "GEP into {}",
                            llvm::type_to_string(ty)
                        )))
                    }
                }
            };
            match constant {
                Some(c) => offset = offset.wrapping_add(c.wrapping_mul(scale)),
                None => {
                    let r = *self.regs.get(&idx).ok_or_else(|| {
                        unsupported(format!("GEP index {}", llvm::value_to_string(idx)))
                    })?;
                    terms.push((r, idx_bits, scale));
                }
            }
        }
        Ok((offset, terms))
    }

    /// A vector load (`value` None) or store: one access of all elements,
    /// whose element size must be whole bytes.
    pub(super) fn lower_vector_access(
        &mut self,
        inst: Value,
        value: Option<Value>,
        dst: Reg,
    ) -> Result<(), IrError> {
        let ty = llvm::type_of(value.unwrap_or(inst));
        let elem = scalar_type(ty);
        let bits = self.bits_of(elem)?;
        if bits % 8 != 0 {
            let what = format!("load or store of {}", llvm::type_to_string(ty));
            self.emit(Op::Unsupported(what), dst);
            return Ok(());
        }
        let (elem_bytes, lanes) = (bits / 8, lane_count(ty)?);
        let op = match value {
            None => Op::VecLoad {
                ptr: self.reg(llvm::operand(inst, 0))?,
                elem_bytes,
                lanes,
            },
            Some(v) => Op::VecStore {
                ptr: self.reg(llvm::operand(inst, 1))?,
                // A vector's registers are consecutive (constants too).
                value: self.lanes(v)?.first().copied().unwrap_or(0),
                elem_bytes,
                lanes,
            },
        };
        self.emit(op, dst);
        Ok(())
    }

    /// `cmpxchg`: the result is { old, success }; the success flag goes in
    /// the second register, as part of the same instruction.
    pub(super) fn lower_cmpxchg(&mut self, inst: Value, dst: Reg) -> Result<(), IrError> {
        let bits = self.bits_of(llvm::type_of(llvm::operand(inst, 1)))?;
        let expected = self.reg(llvm::operand(inst, 1))?;
        let op = Op::CmpXchg {
            ptr: self.reg(llvm::operand(inst, 0))?,
            expected,
            new: self.reg(llvm::operand(inst, 2))?,
            bytes: self.access_bytes(llvm::type_of(llvm::operand(inst, 1)))?,
        };
        self.emit(op, dst);
        self.emit(
            Op::ICmp {
                pred: ICmp::Eq,
                bits,
                a: dst,
                b: expected,
            },
            dst + 1,
        );
        Ok(())
    }

    /// A GEP (or element `lane` of a vector GEP): its base plus byte offsets.
    pub(super) fn gep(&mut self, inst: Value, lane: Option<u32>) -> Result<Op, IrError> {
        let (offset, terms) = self.gep_terms(inst)?;
        Ok(Op::Gep {
            base: self.lane_reg(llvm::operand(inst, 0), lane)?,
            offset,
            terms,
        })
    }

    /// A scalar load.
    pub(super) fn load(&mut self, inst: Value, lane: Option<u32>) -> Result<Op, IrError> {
        let ty = scalar_type(llvm::type_of(inst));
        Ok(Op::Load {
            ptr: self.lane_reg(llvm::operand(inst, 0), lane)?,
            bytes: self.access_bytes(ty)?,
        })
    }

    /// A scalar store.
    pub(super) fn store(&mut self, inst: Value, lane: Option<u32>) -> Result<Op, IrError> {
        let value_ty = llvm::type_of(llvm::operand(inst, 0));
        Ok(Op::Store {
            value: self.lane_reg(llvm::operand(inst, 0), lane)?,
            ptr: self.lane_reg(llvm::operand(inst, 1), lane)?,
            bytes: self.access_bytes(value_ty)?,
        })
    }

    /// `atomicrmw` with an operation the simulator knows.
    pub(super) fn atomic_rmw(&mut self, inst: Value, lane: Option<u32>) -> Result<Op, IrError> {
        let rmw = match llvm::atomic_rmw_op(inst) {
            LLVMAtomicRMWBinOp::LLVMAtomicRMWBinOpXchg => RmwOp::Xchg,
            LLVMAtomicRMWBinOp::LLVMAtomicRMWBinOpAdd => RmwOp::Add,
            LLVMAtomicRMWBinOp::LLVMAtomicRMWBinOpSub => RmwOp::Sub,
            LLVMAtomicRMWBinOp::LLVMAtomicRMWBinOpAnd => RmwOp::And,
            LLVMAtomicRMWBinOp::LLVMAtomicRMWBinOpOr => RmwOp::Or,
            LLVMAtomicRMWBinOp::LLVMAtomicRMWBinOpXor => RmwOp::Xor,
            LLVMAtomicRMWBinOp::LLVMAtomicRMWBinOpMax => RmwOp::Max,
            LLVMAtomicRMWBinOp::LLVMAtomicRMWBinOpMin => RmwOp::Min,
            LLVMAtomicRMWBinOp::LLVMAtomicRMWBinOpUMax => RmwOp::UMax,
            LLVMAtomicRMWBinOp::LLVMAtomicRMWBinOpUMin => RmwOp::UMin,
            LLVMAtomicRMWBinOp::LLVMAtomicRMWBinOpFAdd => RmwOp::FAdd,
            other => return Ok(Op::Unsupported(format!("atomicrmw {other:?}"))),
        };
        Ok(Op::AtomicRmw {
            op: rmw,
            ptr: self.lane_reg(llvm::operand(inst, 0), lane)?,
            value: self.lane_reg(llvm::operand(inst, 1), lane)?,
            bytes: self.access_bytes(llvm::type_of(inst))?,
        })
    }

    /// An `alloca` of a constant size: an offset in the thread's local
    /// frame, within `MAX_LOCAL_BYTES`.
    pub(super) fn alloca(&mut self, inst: Value) -> Op {
        let count = llvm::operand(inst, 0);
        let Some(n) = llvm::const_int(count) else {
            return Op::Unsupported("alloca of a variable size".into());
        };
        let size = self
            .alloc_size(llvm::allocated_type(inst))
            .saturating_mul(n);
        if self.local_bytes.saturating_add(size) > MAX_LOCAL_BYTES {
            return Op::Unsupported(format!(
                "{size}-byte alloca (the limit is {MAX_LOCAL_BYTES} bytes per thread)"
            ));
        }
        let align = u64::from(llvm::alignment(inst).max(1));
        let offset = self.local_bytes.div_ceil(align) * align;
        self.local_bytes = offset + size;
        Op::Alloca { offset }
    }
}

/// A static local variable's name as the source spells it: the Itanium
/// mangling `_ZZ<function>E<length><name>` ends in the name; any other name
/// is kept as is.
fn source_name(mangled: &str) -> String {
    if let Some(rest) = mangled.strip_prefix("_ZZ") {
        for (i, _) in rest.match_indices('E').rev() {
            let tail = &rest[i + 1..];
            let digits = tail.bytes().take_while(u8::is_ascii_digit).count();
            let name = &tail[digits..];
            if tail[..digits].parse::<usize>().ok() == Some(name.len()) && !name.is_empty() {
                return name.to_string();
            }
        }
    }
    mangled.to_string()
}

/// An array type's dimensions, outermost first; empty for other types.
fn array_dims(mut t: llvm::Type) -> Vec<u64> {
    let mut dims = Vec::new();
    while llvm::type_kind(t) == LLVMTypeKind::LLVMArrayTypeKind {
        dims.push(llvm::array_length(t));
        t = llvm::element_type(t);
    }
    dims
}

#[cfg(test)]
mod tests {
    #[test]
    fn static_locals_are_named_as_in_the_source() {
        for (mangled, name) in [
            ("_ZZ10reduce_sumPKfPfiE5sdata", "sdata"),
            ("_ZZ11srad_cuda_1PfS_iiE5north", "north"),
            ("tile", "tile"),
            ("_ZZ3fooE", "_ZZ3fooE"),
        ] {
            assert_eq!(super::source_name(mangled), name);
        }
    }
}
