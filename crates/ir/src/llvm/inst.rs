//! What particular instructions hold: compare predicates, atomic
//! operations, allocas, branch targets, shuffle masks, aggregate indices,
//! callees, phi entries and GEP source types. Each function checks the
//! instruction's kind before asking LLVM, which casts without checking.

use super::{const_expr_opcode, is_terminator, non_null, opcode, Block, Type, Value};
use llvm_sys::core::*;
use llvm_sys::{LLVMAtomicRMWBinOp, LLVMIntPredicate, LLVMOpcode, LLVMRealPredicate};

fn assert_opcode(inst: Value, opcodes: &[LLVMOpcode], what: &str) {
    let op = opcode(inst);
    assert!(opcodes.contains(&op), "{what} of a {op:?}");
}

/// The predicate of an `icmp`.
pub fn icmp_predicate(inst: Value) -> LLVMIntPredicate {
    assert_opcode(inst, &[LLVMOpcode::LLVMICmp], "icmp predicate");
    // SAFETY: `inst` is a live `icmp` (asserted): LLVMGetICmpPredicate then
    // answers its predicate (for anything else it would answer 0, which is
    // no `LLVMIntPredicate`).
    unsafe { LLVMGetICmpPredicate(inst) }
}

/// The predicate of an `fcmp`.
pub fn fcmp_predicate(inst: Value) -> LLVMRealPredicate {
    assert_opcode(inst, &[LLVMOpcode::LLVMFCmp], "fcmp predicate");
    // SAFETY: `inst` is a live `fcmp` (asserted), so LLVMGetFCmpPredicate
    // answers its predicate.
    unsafe { LLVMGetFCmpPredicate(inst) }
}

/// The operation of an `atomicrmw`.
pub fn atomic_rmw_op(inst: Value) -> LLVMAtomicRMWBinOp {
    assert_opcode(inst, &[LLVMOpcode::LLVMAtomicRMW], "atomicrmw operation");
    // SAFETY: `inst` is a live `atomicrmw` (asserted), which
    // LLVMGetAtomicRMWBinOp casts it to; it maps every LLVM 19 operation to
    // one of `LLVMAtomicRMWBinOp`'s values.
    unsafe { LLVMGetAtomicRMWBinOp(inst) }
}

/// The type an `alloca` allocates (per element of its count).
pub fn allocated_type(inst: Value) -> Type {
    assert_opcode(inst, &[LLVMOpcode::LLVMAlloca], "allocated type");
    // SAFETY: `inst` is a live `alloca` (asserted), which
    // LLVMGetAllocatedType casts it to.
    unsafe { LLVMGetAllocatedType(inst) }
}

/// The alignment, in bytes, of an `alloca`, load, store or atomic.
pub fn alignment(inst: Value) -> u32 {
    use LLVMOpcode::*;
    let kinds = [
        LLVMAlloca,
        LLVMLoad,
        LLVMStore,
        LLVMAtomicRMW,
        LLVMAtomicCmpXchg,
    ];
    assert_opcode(inst, &kinds, "alignment");
    // SAFETY: `inst` is a live instruction of a kind LLVMGetAlignment
    // handles (asserted); for others it would reach `llvm_unreachable`.
    unsafe { LLVMGetAlignment(inst) }
}

/// The condition of a conditional `br`; None for an unconditional one.
pub fn branch_condition(inst: Value) -> Option<Value> {
    assert_opcode(inst, &[LLVMOpcode::LLVMBr], "branch condition");
    // SAFETY: `inst` is a live `br` (asserted), which LLVMIsConditional and
    // LLVMGetCondition cast it to; the condition is read only when it has one.
    unsafe { (LLVMIsConditional(inst) != 0).then(|| LLVMGetCondition(inst)) }
}

/// The blocks a terminator may branch to, in operand order (for a
/// `switch`, the default first, then one per case; for a `br`, the true
/// target first).
pub fn terminator_successors(term: Value) -> Vec<Block> {
    assert!(is_terminator(term), "successors of a non-terminator");
    // SAFETY: `term` is a live terminator (asserted), and every index is
    // below the count LLVMGetNumSuccessors gives for it.
    unsafe {
        (0..LLVMGetNumSuccessors(term))
            .map(|i| LLVMGetSuccessor(term, i))
            .collect()
    }
}

/// The mask of a `shufflevector`: per result element, the index of the
/// source element (the second vector's numbered after the first's), or a
/// negative number for an undefined one.
pub fn shuffle_mask(inst: Value) -> Vec<i32> {
    assert_opcode(inst, &[LLVMOpcode::LLVMShuffleVector], "shuffle mask");
    // SAFETY: `inst` is a live `shufflevector` (asserted), which both calls
    // cast it to, and every index is below its mask's length.
    unsafe {
        (0..LLVMGetNumMaskElements(inst))
            .map(|k| LLVMGetMaskValue(inst, k))
            .collect()
    }
}

/// The indices of an `extractvalue` or `insertvalue`.
pub fn aggregate_indices(inst: Value) -> Vec<u32> {
    use LLVMOpcode::*;
    assert_opcode(inst, &[LLVMExtractValue, LLVMInsertValue], "indices");
    // SAFETY: `inst` is a live `extractvalue` or `insertvalue` (asserted),
    // the kinds LLVMGetNumIndices and LLVMGetIndices handle; the pointer is
    // to the instruction's own index array of that length, copied at once
    // (and not touched when the length is 0, where it may be null).
    unsafe {
        let n = LLVMGetNumIndices(inst) as usize;
        if n == 0 {
            return Vec::new();
        }
        std::slice::from_raw_parts(LLVMGetIndices(inst), n).to_vec()
    }
}

/// The function a call calls; None for an indirect call (through a pointer
/// or inline assembly).
pub fn called_function(call: Value) -> Option<Value> {
    use LLVMOpcode::*;
    assert_opcode(call, &[LLVMCall, LLVMInvoke, LLVMCallBr], "callee");
    // SAFETY: `call` is a live call, invoke or callbr (asserted): a CallBase,
    // which LLVMGetCalledValue casts it to; LLVMIsAFunction accepts any value.
    unsafe {
        let callee = LLVMGetCalledValue(call);
        non_null(LLVMIsAFunction(callee))
    }
}

/// The number of arguments of a call (its operands without the callee).
pub fn call_arg_count(call: Value) -> u32 {
    use LLVMOpcode::*;
    assert_opcode(call, &[LLVMCall, LLVMInvoke, LLVMCallBr], "arguments");
    // SAFETY: `call` is a live CallBase (asserted), which
    // LLVMGetNumArgOperands casts it to.
    unsafe { LLVMGetNumArgOperands(call) }
}

/// The number of (value, block) entries of a phi.
pub fn incoming_count(phi: Value) -> u32 {
    assert_opcode(phi, &[LLVMOpcode::LLVMPHI], "incoming count");
    // SAFETY: `phi` is a live phi (asserted), which LLVMCountIncoming casts to.
    unsafe { LLVMCountIncoming(phi) }
}

/// The source element type of a GEP instruction or constant expression.
pub fn gep_source_type(gep: Value) -> Type {
    let is_gep = match const_expr_opcode(gep) {
        Some(op) => op == LLVMOpcode::LLVMGetElementPtr,
        None => opcode(gep) == LLVMOpcode::LLVMGetElementPtr,
    };
    assert!(is_gep, "source type of a non-GEP");
    // SAFETY: `gep` is a live GEP, instruction or constant expression
    // (asserted): a GEPOperator, which LLVMGetGEPSourceElementType casts to.
    unsafe { LLVMGetGEPSourceElementType(gep) }
}

/// The instruction's CUDA source location as `file:line`, when the IR has
/// line tables (`-g` or `-gline-tables-only`) and the instruction has one.
pub fn source_line(inst: Value) -> Option<String> {
    let (file, _, line) = debug_location(inst)?;
    Some(if file.is_empty() {
        format!("line {line}")
    } else {
        format!("{file}:{line}")
    })
}

/// The instruction's debug location: file name and compilation directory as
/// the line table records them (either may be empty), and the line.
pub fn debug_location(inst: Value) -> Option<(String, String, u32)> {
    // SAFETY: `inst` is a live value; for an instruction without a debug
    // location LLVMGetDebugLocLine answers 0.
    let line = unsafe { LLVMGetDebugLocLine(inst) };
    if line == 0 {
        return None;
    }
    let text = |p: *const std::ffi::c_char, len: u32| {
        if p.is_null() || len == 0 {
            String::new()
        } else {
            // SAFETY: LLVM answered `p` with `len` bytes the module owns (the
            // line table's strings), copied before the module can change.
            String::from_utf8_lossy(unsafe {
                std::slice::from_raw_parts(p.cast::<u8>(), len as usize)
            })
            .into_owned()
        }
    };
    let (mut file_len, mut dir_len) = (0u32, 0u32);
    // SAFETY: as above; both answer a pointer into the module and set the length.
    let (file, dir) = unsafe {
        (
            LLVMGetDebugLocFilename(inst, &mut file_len),
            LLVMGetDebugLocDirectory(inst, &mut dir_len),
        )
    };
    Some((text(file, file_len), text(dir, dir_len), line))
}
