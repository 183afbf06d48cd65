//! One LLVM instruction: the dispatch (`lower_inst`: vector and aggregate
//! forms first, elementwise ones once per element) and the scalar
//! instructions (`lower_lane`: arithmetic, compares, casts, select), with
//! the compare predicates' translation.

use super::types::{is_aggregate, is_vector, lane_count, scalar_type};
use super::Lowering;
use crate::error::IrError;
use crate::llvm::{self, Value};
use gevo_model::sim::code::*;
use llvm_sys::{LLVMIntPredicate, LLVMOpcode, LLVMRealPredicate};

impl Lowering {
    /// Emits the instructions of one LLVM instruction: the vector- and
    /// aggregate-specific ones here, elementwise ones once per element.
    pub(super) fn lower_inst(&mut self, inst: Value, block: llvm::Block) -> Result<(), IrError> {
        use LLVMOpcode::*;
        let opcode = llvm::opcode(inst);
        let ty = llvm::type_of(inst);
        let dst = self.regs.get(&inst).copied().unwrap_or(0);
        let start = self.out.len();
        match opcode {
            LLVMExtractElement => return self.lower_extract_element(inst, dst),
            LLVMInsertElement => return self.lower_insert_element(inst, dst),
            LLVMShuffleVector => {
                self.lower_shuffle(inst, dst)?;
                self.cost_as_one(start);
                return Ok(());
            }
            LLVMExtractValue => {
                self.lower_extract_value(inst, dst)?;
                self.cost_as_one(start);
                return Ok(());
            }
            LLVMInsertValue => {
                self.lower_insert_value(inst, dst)?;
                self.cost_as_one(start);
                return Ok(());
            }
            LLVMLoad if is_vector(ty) => return self.lower_vector_access(inst, None, dst),
            LLVMStore if is_vector(llvm::type_of(llvm::operand(inst, 0))) => {
                let value = llvm::operand(inst, 0);
                return self.lower_vector_access(inst, Some(value), dst);
            }
            LLVMBitCast => {
                let from = llvm::type_of(llvm::operand(inst, 0));
                if (is_vector(ty) || is_vector(from)) && lane_count(ty)? != lane_count(from)? {
                    self.lower_repack(inst, dst)?;
                    self.cost_as_one(start);
                    return Ok(());
                }
            }
            LLVMAtomicCmpXchg => {
                self.lower_cmpxchg(inst, dst)?;
                self.cost_as_one(start);
                return Ok(());
            }
            LLVMCall if self.lower_aggregate_call(inst, dst)? => return Ok(()),
            _ => {}
        }
        if is_aggregate(ty) {
            if !is_elementwise(opcode) {
                let what = format!("{opcode:?} of a vector or struct").replace("LLVM", "");
                self.emit(Op::Unsupported(what), dst);
                return Ok(());
            }
            for lane in 0..lane_count(ty)? {
                self.lower_lane(inst, block, Some(lane), dst + lane)?;
            }
            if matches!(opcode, LLVMBitCast | LLVMFreeze) {
                self.cost_as_one(start);
            }
            return Ok(());
        }
        self.lower_lane(inst, block, None, dst)
    }

    /// One scalar instruction, or element `lane` of an elementwise vector
    /// instruction (operands then are their `lane`th elements), into `dst`.
    fn lower_lane(
        &mut self,
        inst: Value,
        block: llvm::Block,
        lane: Option<u32>,
        dst: Reg,
    ) -> Result<(), IrError> {
        use LLVMOpcode::*;
        let opcode = llvm::opcode(inst);
        let ty = scalar_type(llvm::type_of(inst));
        let op = |l: &mut Self, i: u32| l.lane_reg(llvm::operand(inst, i), lane);
        let op = match opcode {
            LLVMAdd | LLVMSub | LLVMMul | LLVMUDiv | LLVMSDiv | LLVMURem | LLVMSRem | LLVMShl
            | LLVMLShr | LLVMAShr | LLVMAnd | LLVMOr | LLVMXor => Op::Int {
                op: int_op(opcode),
                bits: self.bits_of(ty)?,
                a: op(self, 0)?,
                b: op(self, 1)?,
            },
            LLVMFAdd | LLVMFSub | LLVMFMul | LLVMFDiv | LLVMFRem => Op::Float {
                op: float_op(opcode),
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
                pred: icmp(llvm::icmp_predicate(inst)),
                bits: self.bits_of(scalar_type(llvm::type_of(llvm::operand(inst, 0))))?,
                a: op(self, 0)?,
                b: op(self, 1)?,
            },
            LLVMFCmp => Op::FCmp {
                pred: fcmp(llvm::fcmp_predicate(inst)),
                width: self.float_width(scalar_type(llvm::type_of(llvm::operand(inst, 0))))?,
                a: op(self, 0)?,
                b: op(self, 1)?,
            },
            LLVMTrunc | LLVMZExt | LLVMSExt | LLVMFPToUI | LLVMFPToSI | LLVMUIToFP | LLVMSIToFP
            | LLVMFPTrunc | LLVMFPExt | LLVMBitCast | LLVMPtrToInt | LLVMIntToPtr
            | LLVMAddrSpaceCast => {
                let from = scalar_type(llvm::type_of(llvm::operand(inst, 0)));
                let cast = cast_of(opcode);
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
            LLVMFreeze => Op::Cast {
                cast: Cast::Bits,
                from_bits: 64,
                to_bits: 64,
                a: op(self, 0)?,
            },
            LLVMGetElementPtr => self.gep(inst, lane)?,
            LLVMLoad => self.load(inst, lane)?,
            LLVMStore => self.store(inst, lane)?,
            LLVMAtomicRMW => self.atomic_rmw(inst, lane)?,
            LLVMAlloca => self.alloca(inst),
            LLVMFence => Op::Fence,
            LLVMCall => return self.lower_call(inst, lane, dst),
            LLVMBr => self.branch(inst, block)?,
            LLVMSwitch => self.switch(inst, block, lane)?,
            LLVMRet => Op::Ret,
            LLVMUnreachable => Op::Unreachable,
            other => Op::Unsupported(format!("{other:?} instruction").replace("LLVM", "")),
        };
        self.emit(op, dst);
        Ok(())
    }
}

/// Whether an instruction of `opcode` on vectors or structs is lowered
/// once per element.
fn is_elementwise(opcode: LLVMOpcode) -> bool {
    use LLVMOpcode::*;
    matches!(
        opcode,
        LLVMAdd
            | LLVMSub
            | LLVMMul
            | LLVMUDiv
            | LLVMSDiv
            | LLVMURem
            | LLVMSRem
            | LLVMShl
            | LLVMLShr
            | LLVMAShr
            | LLVMAnd
            | LLVMOr
            | LLVMXor
            | LLVMFAdd
            | LLVMFSub
            | LLVMFMul
            | LLVMFDiv
            | LLVMFRem
            | LLVMFNeg
            | LLVMICmp
            | LLVMFCmp
            | LLVMTrunc
            | LLVMZExt
            | LLVMSExt
            | LLVMFPToUI
            | LLVMFPToSI
            | LLVMUIToFP
            | LLVMSIToFP
            | LLVMFPTrunc
            | LLVMFPExt
            | LLVMBitCast
            | LLVMPtrToInt
            | LLVMIntToPtr
            | LLVMAddrSpaceCast
            | LLVMSelect
            | LLVMFreeze
            | LLVMCall
    )
}

/// The integer operation of a binary integer instruction.
fn int_op(opcode: LLVMOpcode) -> IntOp {
    use LLVMOpcode::*;
    match opcode {
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
    }
}

/// The float operation of a binary float instruction.
fn float_op(opcode: LLVMOpcode) -> FloatOp {
    use LLVMOpcode::*;
    match opcode {
        LLVMFAdd => FloatOp::Add,
        LLVMFSub => FloatOp::Sub,
        LLVMFMul => FloatOp::Mul,
        LLVMFDiv => FloatOp::Div,
        _ => FloatOp::Rem,
    }
}

/// The cast of a cast instruction, before narrowing picks truncation.
fn cast_of(opcode: LLVMOpcode) -> Cast {
    use LLVMOpcode::*;
    match opcode {
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
    }
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
