//! Calls: special registers, warp shuffles and votes, barriers and fences,
//! calls that do nothing here, vector reductions and `*.with.overflow`
//! pairs; every other known function goes through `recipes`.

use super::types::is_aggregate;
use super::Lowering;
use crate::error::IrError;
use crate::llvm::{self, Value};
use gevo_model::sim::code::*;
use llvm_sys::LLVMTypeKind;

impl Lowering {
    /// Calls whose result is not elementwise: vector reductions and the
    /// `*.with.overflow` pairs. False when `call` is neither.
    pub(super) fn lower_aggregate_call(&mut self, call: Value, dst: Reg) -> Result<bool, IrError> {
        let Some(callee) = llvm::called_function(call) else {
            return Ok(false);
        };
        let name = llvm::value_name(callee);
        let base = intrinsic_base(&name);
        if let Some(kind) = base.strip_prefix("llvm.vector.reduce.") {
            self.lower_reduce(call, &name, kind, dst)?;
            return Ok(true);
        }
        let Some(kind) = base.strip_suffix(".with.overflow") else {
            return Ok(false);
        };
        self.lower_with_overflow(call, &name, kind, dst)?;
        Ok(true)
    }

    /// A `llvm.vector.reduce.<kind>`, as a chain of binary operations in
    /// element order (fadd/fmul from their start value), so the result
    /// does not depend on reassociation.
    fn lower_reduce(
        &mut self,
        call: Value,
        name: &str,
        kind: &str,
        dst: Reg,
    ) -> Result<(), IrError> {
        let ty = llvm::type_of(call);
        let (ordered, vector) = match kind {
            "fadd" | "fmul" => (true, llvm::operand(call, 1)),
            _ => (false, llvm::operand(call, 0)),
        };
        let lanes = self.lanes(vector)?;
        let Some(op) = reduce_step(kind) else {
            self.emit(Op::Unsupported(format!("call to @{name}")), dst);
            return Ok(());
        };
        let mut operands = Vec::new();
        if ordered {
            operands.push(self.reg(llvm::operand(call, 0))?);
        }
        operands.extend(lanes);
        let mut acc = operands[0];
        if operands.len() == 1 {
            self.copy(dst, acc);
        }
        for (k, &next) in operands.iter().enumerate().skip(1) {
            let t = if k + 1 == operands.len() {
                dst
            } else {
                self.fresh()
            };
            let op = match op {
                ReduceStep::Int(op) => Op::Int {
                    op,
                    bits: self.bits_of(ty)?,
                    a: acc,
                    b: next,
                },
                ReduceStep::Float(op) => Op::Float {
                    op,
                    width: self.float_width(ty)?,
                    a: acc,
                    b: next,
                },
            };
            self.emit(op, t);
            acc = t;
        }
        Ok(())
    }

    /// A `llvm.<kind>.with.overflow`: the result into `dst`, the overflow
    /// flag into `dst + 1`.
    fn lower_with_overflow(
        &mut self,
        call: Value,
        name: &str,
        kind: &str,
        dst: Reg,
    ) -> Result<(), IrError> {
        let ty = llvm::type_of(call);
        let known = matches!(
            kind,
            "llvm.uadd" | "llvm.sadd" | "llvm.usub" | "llvm.ssub" | "llvm.umul" | "llvm.smul"
        );
        let is_struct = llvm::type_kind(ty) == LLVMTypeKind::LLVMStructTypeKind;
        let has_fields = is_struct && llvm::struct_field_count(ty) > 0;
        let field = has_fields.then(|| llvm::struct_field_type(ty, 0));
        let Some(field) = field.filter(|&f| known && !is_aggregate(f)) else {
            self.emit(Op::Unsupported(format!("call to @{name}")), dst);
            return Ok(());
        };
        let bits = self.bits_of(field)?;
        let a = self.reg(llvm::operand(call, 0))?;
        let b = self.reg(llvm::operand(call, 1))?;
        let (result, flag) = (dst, dst + 1);
        let zero = self.const_reg(0);
        let signed_overflow = |l: &mut Self, x: Reg, y: Reg| {
            // The sign bit of x & y: set when the operands' signs say overflow.
            let t = l.fresh();
            l.int(IntOp::And, bits, x, y, t);
            l.emit(
                Op::ICmp {
                    pred: ICmp::Slt,
                    bits,
                    a: t,
                    b: zero,
                },
                flag,
            );
        };
        let op = match kind {
            "llvm.uadd" | "llvm.sadd" => IntOp::Add,
            "llvm.usub" | "llvm.ssub" => IntOp::Sub,
            _ => IntOp::Mul,
        };
        self.int(op, bits, a, b, result);
        match kind {
            "llvm.uadd" => self.icmp(ICmp::Ult, bits, result, a, flag),
            "llvm.usub" => self.icmp(ICmp::Ult, bits, a, b, flag),
            "llvm.sadd" => {
                // Overflow iff the result's sign differs from both operands'.
                let (x, y) = (self.fresh(), self.fresh());
                self.int(IntOp::Xor, bits, a, result, x);
                self.int(IntOp::Xor, bits, b, result, y);
                signed_overflow(self, x, y);
            }
            "llvm.ssub" => {
                // Overflow iff the operands' signs differ and the result's
                // sign differs from the first operand's.
                let (x, y) = (self.fresh(), self.fresh());
                self.int(IntOp::Xor, bits, a, b, x);
                self.int(IntOp::Xor, bits, a, result, y);
                signed_overflow(self, x, y);
            }
            "llvm.umul" => {
                let high = self.fresh();
                self.int(IntOp::MulHiU, bits, a, b, high);
                self.icmp(ICmp::Ne, bits, high, zero, flag);
            }
            _ => {
                // The high half must be the low half's sign extension.
                let (high, sign) = (self.fresh(), self.fresh());
                self.int(IntOp::MulHiS, bits, a, b, high);
                let amount = self.const_reg(u64::from(bits - 1));
                self.int(IntOp::AShr, bits, result, amount, sign);
                self.icmp(ICmp::Ne, bits, high, sign, flag);
            }
        }
        Ok(())
    }

    pub(super) fn lower_call(
        &mut self,
        call: Value,
        lane: Option<u32>,
        dst: Reg,
    ) -> Result<(), IrError> {
        let Some(callee) = llvm::called_function(call) else {
            self.emit(Op::Unsupported("indirect call".into()), dst);
            return Ok(());
        };
        let name = llvm::value_name(callee);
        let count = llvm::call_arg_count(call);
        if let Some(sreg) = special_register(&name) {
            self.emit(Op::Special(sreg), dst);
            return Ok(());
        }
        if let Some(warp) = warp_op(&name) {
            let args = (0..count)
                .map(|i| self.reg(llvm::operand(call, i)))
                .collect::<Result<Vec<_>, _>>()?;
            self.emit(Op::Warp { op: warp, args }, dst);
            return Ok(());
        }
        let op = match intrinsic_base(&name) {
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
            _ => return self.lower_known_call(call, &name, count, lane, dst),
        };
        self.emit(op, dst);
        Ok(())
    }
}

/// One step of a vector reduction: an integer or a float operation.
#[derive(Clone, Copy)]
enum ReduceStep {
    Int(IntOp),
    Float(FloatOp),
}

/// The step of `llvm.vector.reduce.<kind>`; none for an unknown kind.
fn reduce_step(kind: &str) -> Option<ReduceStep> {
    use ReduceStep::{Float, Int};
    Some(match kind {
        "add" => Int(IntOp::Add),
        "mul" => Int(IntOp::Mul),
        "and" => Int(IntOp::And),
        "or" => Int(IntOp::Or),
        "xor" => Int(IntOp::Xor),
        "smax" => Int(IntOp::SMax),
        "smin" => Int(IntOp::SMin),
        "umax" => Int(IntOp::UMax),
        "umin" => Int(IntOp::UMin),
        "fadd" => Float(FloatOp::Add),
        "fmul" => Float(FloatOp::Mul),
        "fmax" => Float(FloatOp::Max),
        "fmin" => Float(FloatOp::Min),
        "fmaximum" => Float(FloatOp::Maximum),
        "fminimum" => Float(FloatOp::Minimum),
        _ => return None,
    })
}

/// `llvm.smax.i32` -> `llvm.smax`; libdevice and nvvm names are kept whole.
pub(super) fn intrinsic_base(name: &str) -> &str {
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
