//! What the guarded build (`ir::guard`) asks of LLVM beyond the edit
//! engine's needs: a block's function, a pointer type's address space,
//! retargeting a branch, and inkwell's view of an instruction and a block
//! (the guard inserts with inkwell's builder).

use super::{is_instruction, is_terminator, parent, Block, Type, Value};
use inkwell::basic_block::BasicBlock;
use inkwell::values::InstructionValue;
use llvm_sys::core::*;
use llvm_sys::LLVMTypeKind;

/// The function that holds `block`.
pub fn block_function(block: Block) -> Value {
    // SAFETY: `block` is live (the handle contract); a block in a function
    // answers that function, and every block `ir` walks is in one.
    unsafe { LLVMGetBasicBlockParent(block) }
}

/// The address space of the pointer type `t`.
pub fn pointer_address_space(t: Type) -> u32 {
    assert!(
        super::type_kind(t) == LLVMTypeKind::LLVMPointerTypeKind,
        "address space of a non-pointer type"
    );
    // SAFETY: `t` is a live pointer type (asserted), which
    // LLVMGetPointerAddressSpace casts it to.
    unsafe { LLVMGetPointerAddressSpace(t) }
}

/// inkwell's handle of the live instruction `inst`.
pub fn instruction_value<'c>(inst: Value) -> InstructionValue<'c> {
    assert!(
        is_instruction(inst) && parent(inst).is_some(),
        "an inkwell handle of a value that is not a linked instruction"
    );
    // SAFETY: `inst` is a live instruction in a block (asserted), which is
    // all InstructionValue::new requires; its lifetime is the caller's
    // context's (the handle contract).
    unsafe { InstructionValue::new(inst) }
}

/// inkwell's handle of the live block `block`.
pub fn block_value<'c>(block: Block) -> BasicBlock<'c> {
    assert!(!block.is_null(), "an inkwell handle of no block");
    // SAFETY: `block` is a live block (the handle contract), which is all
    // BasicBlock::new requires; its lifetime is the caller's context's.
    unsafe { BasicBlock::new(block) }.expect("a non-null block")
}

/// Makes the terminator `term` branch to `block` where its successor
/// `index` was.
pub fn set_successor(term: Value, index: u32, block: Block) {
    assert!(is_terminator(term), "retargeting a non-terminator");
    // SAFETY: `term` is a live terminator (asserted) and `block` a live
    // block (the handle contract); the index is checked against the count
    // LLVMGetNumSuccessors gives for it before LLVMSetSuccessor writes it.
    unsafe {
        assert!(index < LLVMGetNumSuccessors(term), "no such successor");
        LLVMSetSuccessor(term, index, block)
    }
}
