//! Lowers a (patched, verified) kernel function to the simulator's plain
//! `Program`: registers for every value, constants folded to raw bits
//! (constant expressions included), GEPs to byte offsets, phis to edge copies.
//! What the simulator does not model becomes `Op::Unsupported` (a verdict when
//! reached) or, for module-level features, `IrError::Unsupported`.

use super::error::IrError;
use super::live::LiveFunction;
use super::llvm::{self, Value};
use crate::sim::code::*;
use crate::sim::{cost, pointer};
use llvm_sys::core::*;
use llvm_sys::prelude::*;
use llvm_sys::target::*;
use llvm_sys::{LLVMIntPredicate, LLVMOpcode, LLVMRealPredicate, LLVMTypeKind};
use std::collections::HashMap;

/// The GPU's limits: 228 KiB of shared memory per block on sm_90, and a
/// generous bound on per-thread stack.
const MAX_SHARED_BYTES: u64 = 228 * 1024;
const MAX_LOCAL_BYTES: u64 = 64 * 1024;

struct Lowering {
    layout: LLVMTargetDataRef,
    regs: HashMap<Value, Reg>,
    const_regs: HashMap<u64, Reg>,
    constants: Vec<(Reg, u64)>,
    next_reg: Reg,
    block_index: HashMap<LLVMBasicBlockRef, u32>,
    globals: HashMap<Value, u64>,
    edges: Vec<Edge>,
    local_bytes: u64,
}

fn unsupported(what: impl Into<String>) -> IrError {
    IrError::Unsupported { what: what.into() }
}

/// Lowers the function `live` edits (in `module`); `live` supplies instruction ids.
pub fn lower(module: LLVMModuleRef, live: &LiveFunction) -> Result<Program, IrError> {
    let func = live.function();
    let layout = unsafe { LLVMGetModuleDataLayout(module) };
    let blocks = llvm::blocks(func);
    let mut l = Lowering {
        layout,
        regs: HashMap::new(),
        const_regs: HashMap::new(),
        constants: Vec::new(),
        next_reg: 0,
        block_index: blocks
            .iter()
            .enumerate()
            .map(|(i, &b)| (b, i as u32))
            .collect(),
        globals: HashMap::new(),
        edges: Vec::new(),
        local_bytes: 0,
    };
    let (static_shared_bytes, constant_globals) = l.lay_out_globals(module)?;
    if static_shared_bytes > MAX_SHARED_BYTES {
        return Err(unsupported(format!(
            "{static_shared_bytes} bytes of static shared memory"
        )));
    }

    let mut params = Vec::new();
    for p in llvm::params(func) {
        let reg = l.fresh();
        l.regs.insert(p, reg);
        let ty = llvm::type_of(p);
        let is_pointer = llvm::type_kind(ty) == LLVMTypeKind::LLVMPointerTypeKind;
        let bits = if is_pointer { 64 } else { l.bits_of(ty)? };
        params.push(ParamSlot {
            reg,
            is_pointer,
            bits,
        });
    }
    for &b in &blocks {
        for inst in llvm::instructions(b) {
            if !llvm::is_void(llvm::type_of(inst)) {
                let reg = l.fresh();
                l.regs.insert(inst, reg);
            }
        }
    }
    let mut out_blocks = Vec::new();
    for (index, &b) in blocks.iter().enumerate() {
        let mut insts = Vec::new();
        for inst in llvm::instructions(b) {
            if llvm::is_phi(inst) {
                continue; // phis are copies on the edges into this block
            }
            let op = l.lower_inst(inst, b)?;
            insts.push(Inst {
                cost: cost::weight(&op),
                dst: l.regs.get(&inst).copied().unwrap_or(0),
                id: live.id_of(inst).0,
                op,
            });
        }
        // Unnamed blocks (clang numbers them) are called by their position.
        let name = llvm::value_name(unsafe { LLVMBasicBlockAsValue(b) });
        out_blocks.push(Block {
            name: if name.is_empty() {
                format!("bb{index}")
            } else {
                name
            },
            insts,
        });
    }
    Ok(Program {
        kernel: llvm::value_name(func),
        registers: l.next_reg,
        constants: l.constants,
        params,
        blocks: out_blocks,
        edges: l.edges,
        static_shared_bytes,
        constant_globals,
        local_bytes: l.local_bytes,
    })
}

impl Lowering {
    fn fresh(&mut self) -> Reg {
        let r = self.next_reg;
        self.next_reg += 1;
        r
    }

    fn alloc_size(&self, ty: LLVMTypeRef) -> u64 {
        unsafe { LLVMABISizeOfType(self.layout, ty) }
    }

    fn store_size(&self, ty: LLVMTypeRef) -> u64 {
        unsafe { LLVMStoreSizeOfType(self.layout, ty) }
    }

    /// Bit width of a scalar integer or float type (pointers: 64).
    fn bits_of(&self, ty: LLVMTypeRef) -> Result<u32, IrError> {
        use LLVMTypeKind::*;
        Ok(match llvm::type_kind(ty) {
            LLVMIntegerTypeKind => {
                let w = unsafe { LLVMGetIntTypeWidth(ty) };
                if w > 64 {
                    return Err(unsupported(format!("i{w} values")));
                }
                w
            }
            LLVMFloatTypeKind => 32,
            LLVMDoubleTypeKind => 64,
            LLVMPointerTypeKind => 64,
            LLVMHalfTypeKind | LLVMBFloatTypeKind => return Err(unsupported("16-bit floats")),
            LLVMVectorTypeKind => return Err(unsupported("vector values")),
            _ => {
                return Err(unsupported(format!(
                    "values of type {}",
                    llvm::type_to_string(ty)
                )))
            }
        })
    }

    fn float_width(&self, ty: LLVMTypeRef) -> Result<FloatWidth, IrError> {
        match llvm::type_kind(ty) {
            LLVMTypeKind::LLVMFloatTypeKind => Ok(FloatWidth::F32),
            LLVMTypeKind::LLVMDoubleTypeKind => Ok(FloatWidth::F64),
            _ => Err(unsupported(format!(
                "float type {}",
                llvm::type_to_string(ty)
            ))),
        }
    }

    /// Shared (`addrspace(3)`) globals get offsets in the block's shared
    /// memory; read-only globals with initializers get constant-space ids.
    fn lay_out_globals(&mut self, module: LLVMModuleRef) -> Result<(u64, Vec<Vec<u8>>), IrError> {
        let mut shared = 0u64;
        let mut constant_globals = Vec::new();
        let mut g = unsafe { LLVMGetFirstGlobal(module) };
        while !g.is_null() {
            let value_ty = unsafe { LLVMGlobalGetValueType(g) };
            let space = unsafe { LLVMGetPointerAddressSpace(llvm::type_of(g)) };
            let size = self.alloc_size(value_ty);
            let align = u64::from(unsafe { LLVMGetAlignment(g) }.max(1));
            if space == 3 {
                shared = shared.div_ceil(align) * align;
                self.globals
                    .insert(g, pointer::make(pointer::SHARED, 0, shared));
                shared += size;
            } else {
                let init = unsafe { LLVMGetInitializer(g) };
                let bytes = if init.is_null() {
                    None
                } else {
                    self.constant_bytes(init, size)
                };
                if let Some(bytes) = bytes {
                    let id = constant_globals.len() as u64;
                    self.globals
                        .insert(g, pointer::make(pointer::CONSTANT, id, 0));
                    constant_globals.push(bytes);
                }
                // Other globals stay unmapped; a use of one is unsupported.
            }
            g = unsafe { LLVMGetNextGlobal(g) };
        }
        Ok((shared, constant_globals))
    }

    /// Raw bytes of a constant initializer we can read: zero, scalars, and
    /// arrays of them.
    fn constant_bytes(&self, c: Value, size: u64) -> Option<Vec<u8>> {
        unsafe {
            if LLVMIsNull(c) != 0 || !LLVMIsAUndefValue(c).is_null() {
                return Some(vec![0; size as usize]);
            }
        }
        let ty = llvm::type_of(c);
        if llvm::type_kind(ty) == LLVMTypeKind::LLVMArrayTypeKind {
            let n = unsafe { LLVMGetArrayLength2(ty) };
            let elem_ty = unsafe { LLVMGetElementType(ty) };
            let elem_size = self.alloc_size(elem_ty);
            let mut out = Vec::with_capacity(size as usize);
            for i in 0..n {
                let e = unsafe { LLVMGetAggregateElement(c, i as u32) };
                if e.is_null() {
                    return None;
                }
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

    /// The raw bits of a constant (integers zero-extended from their width,
    /// floats as IEEE bits, pointers tagged as in `sim::pointer`).
    fn const_bits(&self, c: Value) -> Result<u64, IrError> {
        unsafe {
            if let Some(&p) = self.globals.get(&c) {
                return Ok(p);
            }
            if !LLVMIsAGlobalValue(c).is_null() {
                return Err(unsupported(format!(
                    "use of global @{}",
                    llvm::value_name(c)
                )));
            }
            let ty = llvm::type_of(c);
            if LLVMIsNull(c) != 0 || !LLVMIsAUndefValue(c).is_null() {
                return Ok(0);
            }
            if !LLVMIsAConstantInt(c).is_null() {
                let bits = self.bits_of(ty)?;
                return Ok(LLVMConstIntGetZExtValue(c) & mask(bits));
            }
            if !LLVMIsAConstantFP(c).is_null() {
                let mut lost = 0;
                let v = LLVMConstRealGetDouble(c, &mut lost);
                return Ok(match self.float_width(ty)? {
                    FloatWidth::F32 => u64::from((v as f32).to_bits()),
                    FloatWidth::F64 => v.to_bits(),
                });
            }
            if !LLVMIsAConstantExpr(c).is_null() {
                return self.const_expr_bits(c);
            }
        }
        Err(unsupported(format!(
            "constant {}",
            llvm::value_to_string(c)
        )))
    }

    fn const_expr_bits(&self, c: Value) -> Result<u64, IrError> {
        let opcode = unsafe { LLVMGetConstOpcode(c) };
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
    fn reg(&mut self, v: Value) -> Result<Reg, IrError> {
        if let Some(&r) = self.regs.get(&v) {
            return Ok(r);
        }
        if llvm::is_instruction(v) || unsafe { !LLVMIsAArgument(v).is_null() } {
            return Err(unsupported(format!("value {}", llvm::value_to_string(v))));
        }
        let bits = self.const_bits(v)?;
        if let Some(&r) = self.const_regs.get(&bits) {
            return Ok(r);
        }
        let r = self.fresh();
        self.const_regs.insert(bits, r);
        self.constants.push((r, bits));
        Ok(r)
    }

    /// Byte offset of a GEP: the constant part, and (register, index width,
    /// scale) for each variable index.
    fn gep_terms(&self, gep: Value) -> Result<(i64, Vec<GepTerm>), IrError> {
        let mut ty = unsafe { LLVMGetGEPSourceElementType(gep) };
        let n = llvm::num_operands(gep);
        let mut offset = 0i64;
        let mut terms = Vec::new();
        for i in 1..n {
            let idx = llvm::operand(gep, i);
            let idx_bits = self.bits_of(llvm::type_of(idx))?;
            let constant = unsafe { !LLVMIsAConstantInt(idx).is_null() }
                .then(|| sign_extend(unsafe { LLVMConstIntGetZExtValue(idx) }, idx_bits));
            let scale = if i == 1 {
                self.alloc_size(ty) as i64
            } else {
                match llvm::type_kind(ty) {
                    LLVMTypeKind::LLVMStructTypeKind => {
                        let field = constant.ok_or_else(|| unsupported("variable struct index"))?;
                        offset +=
                            unsafe { LLVMOffsetOfElement(self.layout, ty, field as u32) } as i64;
                        ty = unsafe { LLVMStructGetTypeAtIndex(ty, field as u32) };
                        continue;
                    }
                    LLVMTypeKind::LLVMArrayTypeKind | LLVMTypeKind::LLVMVectorTypeKind => {
                        ty = unsafe { LLVMGetElementType(ty) };
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
            let src = self.reg(llvm::operand(phi, incoming))?;
            copies.push((self.regs[&phi], src));
        }
        self.edges.push(Edge {
            target: self.block_index[&to],
            copies,
        });
        Ok(self.edges.len() as u32 - 1)
    }

    fn lower_inst(&mut self, inst: Value, block: LLVMBasicBlockRef) -> Result<Op, IrError> {
        use LLVMOpcode::*;
        let opcode = llvm::opcode(inst);
        let ty = llvm::type_of(inst);
        let op = |l: &mut Self, i: u32| l.reg(llvm::operand(inst, i));
        Ok(match opcode {
            LLVMAdd | LLVMSub | LLVMMul | LLVMUDiv | LLVMSDiv | LLVMURem | LLVMSRem | LLVMShl
            | LLVMLShr | LLVMAShr | LLVMAnd | LLVMOr | LLVMXor => {
                let int_op = match opcode {
                    LLVMAdd => IntOp::Add,
                    LLVMSub => IntOp::Sub,
                    LLVMMul => IntOp::Mul,
                    LLVMUDiv => IntOp::UDiv,
                    LLVMSDiv => IntOp::SDiv,
                    LLVMURem => IntOp::URem,
                    LLVMSRem => IntOp::SRem,
                    LLVMShl => IntOp::Shl,
                    LLVMLShr => IntOp::LShr,
                    LLVMAShr => IntOp::AShr,
                    LLVMAnd => IntOp::And,
                    LLVMOr => IntOp::Or,
                    _ => IntOp::Xor,
                };
                Op::Int {
                    op: int_op,
                    bits: self.bits_of(ty)?,
                    a: op(self, 0)?,
                    b: op(self, 1)?,
                }
            }
            LLVMFAdd | LLVMFSub | LLVMFMul | LLVMFDiv | LLVMFRem => Op::Float {
                op: match opcode {
                    LLVMFAdd => FloatOp::Add,
                    LLVMFSub => FloatOp::Sub,
                    LLVMFMul => FloatOp::Mul,
                    LLVMFDiv => FloatOp::Div,
                    _ => FloatOp::Rem,
                },
                width: self.float_width(ty)?,
                a: op(self, 0)?,
                b: op(self, 1)?,
            },
            LLVMFNeg => Op::FloatUnary {
                f: FloatFn::Neg,
                width: self.float_width(ty)?,
                a: op(self, 0)?,
            },
            LLVMICmp => Op::ICmp {
                pred: icmp(unsafe { LLVMGetICmpPredicate(inst) }),
                bits: self.bits_of(llvm::type_of(llvm::operand(inst, 0)))?,
                a: op(self, 0)?,
                b: op(self, 1)?,
            },
            LLVMFCmp => Op::FCmp {
                pred: fcmp(unsafe { LLVMGetFCmpPredicate(inst) }),
                width: self.float_width(llvm::type_of(llvm::operand(inst, 0)))?,
                a: op(self, 0)?,
                b: op(self, 1)?,
            },
            LLVMTrunc | LLVMZExt | LLVMSExt | LLVMFPToUI | LLVMFPToSI | LLVMUIToFP | LLVMSIToFP
            | LLVMFPTrunc | LLVMFPExt | LLVMBitCast | LLVMPtrToInt | LLVMIntToPtr
            | LLVMAddrSpaceCast => {
                let from = llvm::type_of(llvm::operand(inst, 0));
                let cast = match opcode {
                    LLVMTrunc => Cast::Trunc,
                    LLVMZExt => Cast::ZExt,
                    LLVMSExt => Cast::SExt,
                    LLVMFPToUI => Cast::FpToUi,
                    LLVMFPToSI => Cast::FpToSi,
                    LLVMUIToFP => Cast::UiToFp,
                    LLVMSIToFP => Cast::SiToFp,
                    LLVMFPTrunc => Cast::FpTrunc,
                    LLVMFPExt => Cast::FpExt,
                    // ptrtoint/inttoptr to narrower or wider integers truncate or zero-extend.
                    LLVMPtrToInt | LLVMIntToPtr => Cast::ZExt,
                    _ => Cast::Bits,
                };
                let (from_bits, to_bits) = (self.bits_of(from)?, self.bits_of(ty)?);
                let cast = if cast == Cast::ZExt && to_bits < from_bits {
                    Cast::Trunc
                } else {
                    cast
                };
                Op::Cast {
                    cast,
                    from_bits,
                    to_bits,
                    a: op(self, 0)?,
                }
            }
            LLVMSelect => Op::Select {
                cond: op(self, 0)?,
                a: op(self, 1)?,
                b: op(self, 2)?,
            },
            LLVMGetElementPtr => {
                let (offset, terms) = self.gep_terms(inst)?;
                Op::Gep {
                    base: op(self, 0)?,
                    offset,
                    terms,
                }
            }
            LLVMLoad => Op::Load {
                ptr: op(self, 0)?,
                bytes: self.access_bytes(ty)?,
            },
            LLVMStore => {
                let value_ty = llvm::type_of(llvm::operand(inst, 0));
                Op::Store {
                    value: op(self, 0)?,
                    ptr: op(self, 1)?,
                    bytes: self.access_bytes(value_ty)?,
                }
            }
            LLVMAtomicRMW => {
                let rmw = match unsafe { LLVMGetAtomicRMWBinOp(inst) } {
                    llvm_sys::LLVMAtomicRMWBinOp::LLVMAtomicRMWBinOpXchg => RmwOp::Xchg,
                    llvm_sys::LLVMAtomicRMWBinOp::LLVMAtomicRMWBinOpAdd => RmwOp::Add,
                    llvm_sys::LLVMAtomicRMWBinOp::LLVMAtomicRMWBinOpSub => RmwOp::Sub,
                    llvm_sys::LLVMAtomicRMWBinOp::LLVMAtomicRMWBinOpAnd => RmwOp::And,
                    llvm_sys::LLVMAtomicRMWBinOp::LLVMAtomicRMWBinOpOr => RmwOp::Or,
                    llvm_sys::LLVMAtomicRMWBinOp::LLVMAtomicRMWBinOpXor => RmwOp::Xor,
                    llvm_sys::LLVMAtomicRMWBinOp::LLVMAtomicRMWBinOpMax => RmwOp::Max,
                    llvm_sys::LLVMAtomicRMWBinOp::LLVMAtomicRMWBinOpMin => RmwOp::Min,
                    llvm_sys::LLVMAtomicRMWBinOp::LLVMAtomicRMWBinOpUMax => RmwOp::UMax,
                    llvm_sys::LLVMAtomicRMWBinOp::LLVMAtomicRMWBinOpUMin => RmwOp::UMin,
                    llvm_sys::LLVMAtomicRMWBinOp::LLVMAtomicRMWBinOpFAdd => RmwOp::FAdd,
                    other => return Ok(Op::Unsupported(format!("atomicrmw {other:?}"))),
                };
                Op::AtomicRmw {
                    op: rmw,
                    ptr: op(self, 0)?,
                    value: op(self, 1)?,
                    bytes: self.access_bytes(ty)?,
                }
            }
            LLVMAtomicCmpXchg => Op::CmpXchg {
                ptr: op(self, 0)?,
                expected: op(self, 1)?,
                new: op(self, 2)?,
                bytes: self.access_bytes(llvm::type_of(llvm::operand(inst, 1)))?,
            },
            LLVMAlloca => {
                let count = llvm::operand(inst, 0);
                if unsafe { LLVMIsAConstantInt(count).is_null() } {
                    return Ok(Op::Unsupported("alloca of a variable size".into()));
                }
                let n = unsafe { LLVMConstIntGetZExtValue(count) };
                let size = self
                    .alloc_size(unsafe { LLVMGetAllocatedType(inst) })
                    .saturating_mul(n);
                if self.local_bytes.saturating_add(size) > MAX_LOCAL_BYTES {
                    return Ok(Op::Unsupported(format!(
                        "{size}-byte alloca (the limit is {MAX_LOCAL_BYTES} bytes per thread)"
                    )));
                }
                let align = u64::from(unsafe { LLVMGetAlignment(inst) }.max(1));
                let offset = self.local_bytes.div_ceil(align) * align;
                self.local_bytes = offset + size;
                Op::Alloca { offset }
            }
            LLVMFence => Op::Fence,
            LLVMCall => self.lower_call(inst)?,
            LLVMBr => {
                if unsafe { LLVMIsConditional(inst) } != 0 {
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
                }
            }
            LLVMSwitch => {
                let value = op(self, 0)?;
                let bits = self.bits_of(llvm::type_of(llvm::operand(inst, 0)))?;
                let default = self.edge(block, unsafe { LLVMGetSwitchDefaultDest(inst) })?;
                let mut cases = Vec::new();
                for k in 1..unsafe { LLVMGetNumSuccessors(inst) } {
                    let case_value = llvm::operand(inst, 2 * k);
                    let v = self.const_bits(case_value)?;
                    let edge = self.edge(block, unsafe { LLVMGetSuccessor(inst, k) })?;
                    cases.push((v, edge));
                }
                Op::Switch {
                    value,
                    bits,
                    cases,
                    default,
                }
            }
            LLVMExtractValue => self.lower_extract(inst)?,
            LLVMRet => Op::Ret,
            LLVMUnreachable => Op::Unreachable,
            other => Op::Unsupported(format!("{other:?} instruction").replace("LLVM", "")),
        })
    }

    /// `extractvalue` of a `cmpxchg` result: its register holds the old
    /// value; the success flag is `old == expected`. Other aggregates are
    /// not modelled.
    fn lower_extract(&mut self, inst: Value) -> Result<Op, IrError> {
        let aggregate = llvm::operand(inst, 0);
        let indices = unsafe {
            std::slice::from_raw_parts(LLVMGetIndices(inst), LLVMGetNumIndices(inst) as usize)
        };
        if !llvm::is_instruction(aggregate)
            || llvm::opcode(aggregate) != LLVMOpcode::LLVMAtomicCmpXchg
            || indices.len() != 1
        {
            return Ok(Op::Unsupported("extractvalue of an aggregate".into()));
        }
        let old = self.reg(aggregate)?;
        let bits = self.bits_of(llvm::type_of(llvm::operand(aggregate, 1)))?;
        Ok(match indices[0] {
            0 => Op::Cast {
                cast: Cast::Bits,
                from_bits: bits,
                to_bits: bits,
                a: old,
            },
            _ => Op::ICmp {
                pred: ICmp::Eq,
                bits,
                a: old,
                b: self.reg(llvm::operand(aggregate, 1))?,
            },
        })
    }

    fn access_bytes(&self, ty: LLVMTypeRef) -> Result<u32, IrError> {
        self.bits_of(ty)?;
        Ok(self.store_size(ty) as u32)
    }

    fn lower_call(&mut self, call: Value) -> Result<Op, IrError> {
        let callee = unsafe { LLVMGetCalledValue(call) };
        if unsafe { LLVMIsAFunction(callee).is_null() } {
            return Ok(Op::Unsupported("indirect call".into()));
        }
        let name = llvm::value_name(callee);
        let ty = llvm::type_of(call);
        let arg = |l: &mut Self, i: u32| l.reg(llvm::operand(call, i));
        if let Some(sreg) = special_register(&name) {
            return Ok(Op::Special(sreg));
        }
        if let Some(warp) = warp_op(&name) {
            let count = unsafe { LLVMGetNumArgOperands(call) };
            let args = (0..count)
                .map(|i| arg(self, i))
                .collect::<Result<Vec<_>, _>>()?;
            return Ok(Op::Warp { op: warp, args });
        }
        let base = intrinsic_base(&name);
        let op = match base {
            "llvm.nvvm.barrier0"
            | "llvm.nvvm.barrier.sync"
            | "llvm.nvvm.bar.sync"
            | "llvm.nvvm.barrier.n" => Op::Barrier,
            "llvm.nvvm.membar.cta" | "llvm.nvvm.membar.gl" | "llvm.nvvm.membar.sys" => Op::Fence,
            "llvm.lifetime.start"
            | "llvm.lifetime.end"
            | "llvm.assume"
            | "llvm.experimental.noalias.scope.decl"
            | "llvm.dbg.value"
            | "llvm.dbg.declare"
            | "llvm.dbg.assign" => Op::Nop,
            "llvm.smax" | "llvm.smin" | "llvm.umax" | "llvm.umin" => Op::Int {
                op: match base {
                    "llvm.smax" => IntOp::SMax,
                    "llvm.smin" => IntOp::SMin,
                    "llvm.umax" => IntOp::UMax,
                    _ => IntOp::UMin,
                },
                bits: self.bits_of(ty)?,
                a: arg(self, 0)?,
                b: arg(self, 1)?,
            },
            "llvm.abs" => Op::IntAbs {
                bits: self.bits_of(ty)?,
                a: arg(self, 0)?,
            },
            "llvm.fma" | "llvm.fmuladd" | "llvm.nvvm.fma.rn.f" | "llvm.nvvm.fma.rn.d" => Op::Fma {
                width: self.float_width(ty)?,
                a: arg(self, 0)?,
                b: arg(self, 1)?,
                c: arg(self, 2)?,
            },
            _ => {
                if let Some(op) = binary_float_fn(base) {
                    Op::Float {
                        op,
                        width: self.float_width(ty)?,
                        a: arg(self, 0)?,
                        b: arg(self, 1)?,
                    }
                } else if let Some(f) = unary_float_fn(base) {
                    Op::FloatUnary {
                        f,
                        width: self.float_width(ty)?,
                        a: arg(self, 0)?,
                    }
                } else {
                    Op::Unsupported(format!("call to @{name}"))
                }
            }
        };
        Ok(op)
    }
}

/// `llvm.smax.i32` -> `llvm.smax`; libdevice and nvvm names are kept whole.
fn intrinsic_base(name: &str) -> &str {
    if !name.starts_with("llvm.") || name.starts_with("llvm.nvvm.") {
        return name;
    }
    let mut end = name.len();
    while let Some(dot) = name[..end].rfind('.') {
        let suffix = &name[dot + 1..end];
        let is_type = (suffix.starts_with('i')
            || suffix.starts_with('f')
            || suffix.starts_with('v')
            || suffix.starts_with('p'))
            && suffix[1..].chars().all(|c| c.is_ascii_alphanumeric())
            && suffix[1..].chars().any(|c| c.is_ascii_digit());
        if !is_type {
            break;
        }
        end = dot;
    }
    &name[..end]
}

fn warp_op(name: &str) -> Option<WarpOp> {
    Some(match name {
        "llvm.nvvm.shfl.sync.idx.i32" | "llvm.nvvm.shfl.sync.idx.f32" => WarpOp::ShflIdx,
        "llvm.nvvm.shfl.sync.up.i32" | "llvm.nvvm.shfl.sync.up.f32" => WarpOp::ShflUp,
        "llvm.nvvm.shfl.sync.down.i32" | "llvm.nvvm.shfl.sync.down.f32" => WarpOp::ShflDown,
        "llvm.nvvm.shfl.sync.bfly.i32" | "llvm.nvvm.shfl.sync.bfly.f32" => WarpOp::ShflBfly,
        "llvm.nvvm.vote.all.sync" => WarpOp::VoteAll,
        "llvm.nvvm.vote.any.sync" => WarpOp::VoteAny,
        "llvm.nvvm.vote.uni.sync" => WarpOp::VoteUni,
        "llvm.nvvm.vote.ballot.sync" => WarpOp::Ballot,
        "llvm.nvvm.activemask" => WarpOp::ActiveMask,
        _ => return None,
    })
}

fn special_register(name: &str) -> Option<SpecialReg> {
    use SpecialReg::*;
    Some(match name.strip_prefix("llvm.nvvm.read.ptx.sreg.")? {
        "tid.x" => TidX,
        "tid.y" => TidY,
        "tid.z" => TidZ,
        "ntid.x" => NtidX,
        "ntid.y" => NtidY,
        "ntid.z" => NtidZ,
        "ctaid.x" => CtaidX,
        "ctaid.y" => CtaidY,
        "ctaid.z" => CtaidZ,
        "nctaid.x" => NctaidX,
        "nctaid.y" => NctaidY,
        "nctaid.z" => NctaidZ,
        "warpsize" => WarpSize,
        "laneid" => LaneId,
        _ => return None,
    })
}

fn unary_float_fn(name: &str) -> Option<FloatFn> {
    use FloatFn::*;
    Some(match name {
        "llvm.fabs" | "llvm.nvvm.fabs.f" | "llvm.nvvm.fabs.d" | "__nv_fabsf" | "__nv_fabs" => Abs,
        "llvm.sqrt"
        | "llvm.nvvm.sqrt.rn.f"
        | "llvm.nvvm.sqrt.f"
        | "llvm.nvvm.sqrt.rn.d"
        | "__nv_sqrtf"
        | "__nv_sqrt" => Sqrt,
        "llvm.exp" | "__nv_expf" | "__nv_exp" => Exp,
        "llvm.exp2"
        | "llvm.nvvm.ex2.approx.f"
        | "llvm.nvvm.ex2.approx.ftz.f"
        | "__nv_exp2f"
        | "__nv_exp2" => Exp2,
        "llvm.log" | "__nv_logf" | "__nv_log" => Log,
        "llvm.log2"
        | "llvm.nvvm.lg2.approx.f"
        | "llvm.nvvm.lg2.approx.ftz.f"
        | "__nv_log2f"
        | "__nv_log2" => Log2,
        "llvm.sin" | "__nv_sinf" | "__nv_sin" => Sin,
        "llvm.cos" | "__nv_cosf" | "__nv_cos" => Cos,
        "llvm.floor" | "__nv_floorf" | "__nv_floor" => Floor,
        "llvm.ceil" | "__nv_ceilf" | "__nv_ceil" => Ceil,
        "llvm.trunc" | "__nv_truncf" | "__nv_trunc" => Trunc,
        "llvm.round" | "__nv_roundf" | "__nv_round" => Round,
        "llvm.nvvm.rsqrt.approx.f" | "llvm.nvvm.rsqrt.approx.d" | "__nv_rsqrtf" | "__nv_rsqrt" => {
            Rsqrt
        }
        _ => return None,
    })
}

fn binary_float_fn(name: &str) -> Option<FloatOp> {
    use FloatOp::*;
    Some(match name {
        "llvm.minnum" | "llvm.minimum" | "llvm.nvvm.fmin.f" | "llvm.nvvm.fmin.d" | "__nv_fminf"
        | "__nv_fmin" => Min,
        "llvm.maxnum" | "llvm.maximum" | "llvm.nvvm.fmax.f" | "llvm.nvvm.fmax.d" | "__nv_fmaxf"
        | "__nv_fmax" => Max,
        "llvm.copysign" | "__nv_copysignf" | "__nv_copysign" => CopySign,
        "llvm.pow" | "__nv_powf" | "__nv_pow" => Pow,
        _ => return None,
    })
}

fn icmp(p: LLVMIntPredicate) -> ICmp {
    use LLVMIntPredicate::*;
    match p {
        LLVMIntEQ => ICmp::Eq,
        LLVMIntNE => ICmp::Ne,
        LLVMIntUGT => ICmp::Ugt,
        LLVMIntUGE => ICmp::Uge,
        LLVMIntULT => ICmp::Ult,
        LLVMIntULE => ICmp::Ule,
        LLVMIntSGT => ICmp::Sgt,
        LLVMIntSGE => ICmp::Sge,
        LLVMIntSLT => ICmp::Slt,
        LLVMIntSLE => ICmp::Sle,
    }
}

fn fcmp(p: LLVMRealPredicate) -> FCmp {
    use LLVMRealPredicate::*;
    let (cond, unordered_result) = match p {
        LLVMRealPredicateFalse => (FCond::False, false),
        LLVMRealOEQ => (FCond::Eq, false),
        LLVMRealOGT => (FCond::Gt, false),
        LLVMRealOGE => (FCond::Ge, false),
        LLVMRealOLT => (FCond::Lt, false),
        LLVMRealOLE => (FCond::Le, false),
        LLVMRealONE => (FCond::Ne, false),
        LLVMRealORD => (FCond::Ord, false),
        LLVMRealUNO => (FCond::False, true),
        LLVMRealUEQ => (FCond::Eq, true),
        LLVMRealUGT => (FCond::Gt, true),
        LLVMRealUGE => (FCond::Ge, true),
        LLVMRealULT => (FCond::Lt, true),
        LLVMRealULE => (FCond::Le, true),
        LLVMRealUNE => (FCond::Ne, true),
        LLVMRealPredicateTrue => (FCond::True, true),
    };
    FCmp {
        cond,
        unordered_result,
    }
}
