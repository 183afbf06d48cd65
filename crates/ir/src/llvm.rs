//! Thin safe wrappers over the llvm-sys calls of `ir`. Every `unsafe` block
//! of `ir` is in this folder, each after a `// SAFETY:` comment saying why
//! it is sound (`clippy::undocumented_unsafe_blocks` is denied here). This
//! file: walking a function, operands and uses, editing, names and the
//! kernel list; `types`: types and the data layout; `consts`: constants and
//! globals; `inst`: what particular instructions hold.
//!
//! The handle contract, the one thing these functions cannot check: every
//! handle passed in (value, block, type, module) is live, that is, it comes
//! from a module whose LLVM context still exists and it has not been erased.
//! `ir` keeps it by working on one module inside `KernelIr::with_patched` or
//! `explain`, which own the context and the module for the whole time their
//! handles are used, and by forgetting an instruction's handle as it erases
//! it (`LiveFunction::erase`).
//!
//! Everything else LLVM's C API assumes of its arguments (a value or type of
//! a certain kind, an index in range, an instruction in a block or not) the
//! wrappers check themselves, with an `assert!`: a caller that breaks it has
//! a bug, and gets a panic where LLVM would have read out of bounds or
//! returned a value no Rust enum has.

#![deny(clippy::undocumented_unsafe_blocks)]

mod consts;
mod guarding;
mod inst;
mod types;

pub use consts::*;
pub use guarding::*;
pub use inst::*;
pub use types::*;

use llvm_sys::core::*;
use llvm_sys::prelude::*;
use llvm_sys::LLVMOpcode;
use std::ffi::CStr;

pub type Value = LLVMValueRef;
pub type Block = LLVMBasicBlockRef;
pub type Type = LLVMTypeRef;
pub type Module = LLVMModuleRef;

fn non_null<T>(p: *mut T) -> Option<*mut T> {
    (!p.is_null()).then_some(p)
}

/// Whether `v` is a function (a definition or a declaration).
pub fn is_function(v: Value) -> bool {
    // SAFETY: `v` is live (the handle contract); LLVMIsA* accept any value.
    unsafe { !LLVMIsAFunction(v).is_null() }
}

pub fn blocks(func: Value) -> Vec<Block> {
    assert!(is_function(func), "blocks of a non-function");
    let mut out = Vec::new();
    // SAFETY: `func` is a live function (asserted), as LLVMGetFirstBasicBlock needs.
    let mut b = unsafe { LLVMGetFirstBasicBlock(func) };
    while let Some(block) = non_null(b) {
        out.push(block);
        // SAFETY: `block` is a live block of `func`, so it has the parent
        // function LLVMGetNextBasicBlock steps through.
        b = unsafe { LLVMGetNextBasicBlock(block) };
    }
    out
}

pub fn instructions(block: Block) -> Vec<Value> {
    let mut out = Vec::new();
    // SAFETY: `block` is live; any block has a (possibly empty) instruction list.
    let mut i = unsafe { LLVMGetFirstInstruction(block) };
    while let Some(inst) = non_null(i) {
        out.push(inst);
        // SAFETY: `inst` is an instruction of `block`, so it has the parent
        // LLVMGetNextInstruction steps through.
        i = unsafe { LLVMGetNextInstruction(inst) };
    }
    out
}

/// The block `inst` is in; None for an unlinked instruction.
pub fn parent(inst: Value) -> Option<Block> {
    assert!(is_instruction(inst), "parent of a non-instruction");
    // SAFETY: `inst` is a live instruction (asserted), which
    // LLVMGetInstructionParent casts it to; it answers null when unlinked.
    non_null(unsafe { LLVMGetInstructionParent(inst) })
}

pub fn next_instruction(inst: Value) -> Option<Value> {
    assert!(parent(inst).is_some(), "next of an unlinked instruction");
    // SAFETY: `inst` is a live instruction in a block (asserted): the
    // iterator LLVMGetNextInstruction advances is that block's.
    non_null(unsafe { LLVMGetNextInstruction(inst) })
}

pub fn successors(block: Block) -> Vec<Block> {
    // SAFETY: `block` is live; LLVMGetBasicBlockTerminator answers null when
    // the block does not end in a terminator.
    let term = unsafe { LLVMGetBasicBlockTerminator(block) };
    match non_null(term) {
        Some(term) => terminator_successors(term),
        None => Vec::new(),
    }
}

pub fn params(func: Value) -> Vec<Value> {
    assert!(is_function(func), "params of a non-function");
    // SAFETY: `func` is a live function (asserted), which LLVMCountParams
    // and LLVMGetParam cast it to; every index is below the count.
    unsafe {
        let n = LLVMCountParams(func);
        (0..n).map(|i| LLVMGetParam(func, i)).collect()
    }
}

/// The opcode of an instruction.
pub fn opcode(inst: Value) -> LLVMOpcode {
    assert!(is_instruction(inst), "opcode of a non-instruction");
    // SAFETY: `inst` is a live instruction (asserted): LLVMGetInstructionOpcode
    // then answers one of LLVM's opcodes, which `LLVMOpcode` lists (for
    // anything else it would answer 0, which is no `LLVMOpcode`).
    unsafe { LLVMGetInstructionOpcode(inst) }
}

pub fn is_instruction(v: Value) -> bool {
    // SAFETY: `v` is live (the handle contract); LLVMIsA* accept any value.
    unsafe { !LLVMIsAInstruction(v).is_null() }
}

pub fn is_constant(v: Value) -> bool {
    // SAFETY: `v` is live (the handle contract); LLVMIsA* accept any value.
    unsafe { !LLVMIsAConstant(v).is_null() }
}

pub fn is_terminator(inst: Value) -> bool {
    // SAFETY: `inst` is live (the handle contract); LLVMIsATerminatorInst
    // accepts any value.
    unsafe { !LLVMIsATerminatorInst(inst).is_null() }
}

pub fn is_phi(inst: Value) -> bool {
    opcode(inst) == LLVMOpcode::LLVMPHI
}

fn is_user(v: Value) -> bool {
    // SAFETY: `v` is live (the handle contract); LLVMIsA* accept any value.
    unsafe { !LLVMIsAUser(v).is_null() }
}

pub fn num_operands(user: Value) -> u32 {
    assert!(is_user(user), "operands of a non-user");
    // SAFETY: `user` is a live User (asserted), which LLVMGetNumOperands
    // casts it to.
    unsafe { LLVMGetNumOperands(user).max(0) as u32 }
}

pub fn operand(user: Value, index: u32) -> Value {
    assert!(index < num_operands(user), "operand {index} out of range");
    // SAFETY: `user` is a live User and `index` is below its operand count
    // (asserted), so LLVMGetOperand reads inside the operand list.
    unsafe { LLVMGetOperand(user, index) }
}

pub fn set_operand(user: Value, index: u32, value: Value) {
    assert!(index < num_operands(user), "operand {index} out of range");
    // SAFETY: `user` is a live User and `index` is below its operand count
    // (asserted); `value` is live. A value of the wrong type makes invalid
    // IR, which the verifier reports, not unsound memory.
    unsafe { LLVMSetOperand(user, index, value) }
}

/// The instructions that use `v` (each once, in use-list order).
pub fn users(v: Value) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    // SAFETY: `v` is live; LLVMGetFirstUse/LLVMGetNextUse walk its use list
    // until null, and LLVMGetUser reads a use the walk just produced.
    unsafe {
        let mut u = LLVMGetFirstUse(v);
        while !u.is_null() {
            let user = LLVMGetUser(u);
            if !out.contains(&user) {
                out.push(user);
            }
            u = LLVMGetNextUse(u);
        }
    }
    out
}

pub fn has_uses(v: Value) -> bool {
    // SAFETY: `v` is live; LLVMGetFirstUse answers null for an empty use list.
    unsafe { !LLVMGetFirstUse(v).is_null() }
}

pub fn incoming_block(phi: Value, index: u32) -> Block {
    assert!(index < incoming_count(phi), "incoming {index} out of range");
    // SAFETY: `phi` is a live phi and `index` is below its incoming count
    // (asserted), so LLVMGetIncomingBlock reads inside its block list.
    unsafe { LLVMGetIncomingBlock(phi, index) }
}

/// Whether `inst` is a call (the last operand is then the callee).
pub fn is_call(inst: Value) -> bool {
    opcode(inst) == LLVMOpcode::LLVMCall
}

/// Whether a call's callee is an intrinsic or a declaration (whose constant
/// arguments may be `immarg`s or otherwise required to stay constant).
pub fn calls_intrinsic(call: Value) -> bool {
    called_function(call).is_some_and(|callee| {
        // SAFETY: `callee` is a live function; LLVMGetIntrinsicID accepts any value.
        unsafe { LLVMGetIntrinsicID(callee) != 0 }
    })
}

/// A new, unlinked copy of `inst` (same operands, no name).
pub fn clone_instruction(inst: Value) -> Value {
    assert!(is_instruction(inst), "clone of a non-instruction");
    // SAFETY: `inst` is a live instruction (asserted); LLVMInstructionClone
    // returns a new instruction owned by no block.
    unsafe { LLVMInstructionClone(inst) }
}

/// Unlinks `inst` from its block (it stays alive, to be inserted again).
pub fn remove_from_parent(inst: Value) {
    assert!(parent(inst).is_some(), "unlinking an unlinked instruction");
    // SAFETY: `inst` is a live instruction in a block (asserted), the list
    // LLVMInstructionRemoveFromParent takes it out of.
    unsafe { LLVMInstructionRemoveFromParent(inst) }
}

/// Erases `inst`, which must have no uses left; its handle is dead after
/// this, so callers forget it (`LiveFunction::erase`).
pub fn erase(inst: Value) {
    assert!(parent(inst).is_some(), "erasing an unlinked instruction");
    assert!(!has_uses(inst), "erasing an instruction still used");
    // SAFETY: `inst` is a live instruction in a block and nothing uses it
    // (asserted), so deleting it leaves no use pointing at freed memory;
    // by the handle contract no one uses `inst` afterwards.
    unsafe { LLVMInstructionEraseFromParent(inst) }
}

pub fn replace_all_uses(old: Value, new: Value) {
    assert!(old != new, "replacing a value by itself");
    assert!(type_of(old) == type_of(new), "replacing across types");
    // SAFETY: `old` and `new` are live, distinct and of one type (asserted):
    // what replaceAllUsesWith assumes (LLVM checks it only in debug builds).
    unsafe { LLVMReplaceAllUsesWith(old, new) }
}

pub fn value_to_string(v: Value) -> String {
    // SAFETY: `v` is live; LLVMPrintValueToString returns a NUL-terminated
    // copy that we own, read once and dispose of.
    unsafe {
        let s = LLVMPrintValueToString(v);
        let out = CStr::from_ptr(s).to_string_lossy().trim().to_string();
        LLVMDisposeMessage(s);
        out
    }
}

pub fn value_name(v: Value) -> String {
    // SAFETY: `v` is live; LLVMGetValueName2 returns its name's bytes and
    // length (or null), valid while `v` is, and copied here at once.
    unsafe {
        let mut len = 0usize;
        let p = LLVMGetValueName2(v, &mut len);
        if p.is_null() {
            return String::new();
        }
        String::from_utf8_lossy(std::slice::from_raw_parts(p as *const u8, len)).into_owned()
    }
}

/// A block's name ("" when LLVM numbers it).
pub fn block_name(block: Block) -> String {
    // SAFETY: `block` is live; LLVMBasicBlockAsValue accepts any block.
    value_name(unsafe { LLVMBasicBlockAsValue(block) })
}

/// Inserts instructions at positions; owns an LLVM IRBuilder.
pub struct Inserter(LLVMBuilderRef);

impl Inserter {
    pub fn new(func: Value) -> Self {
        // SAFETY: `func` is live; the builder is created in its context and
        // disposed of once, by `Drop`.
        unsafe {
            let ctx = LLVMGetTypeContext(LLVMTypeOf(func));
            Inserter(LLVMCreateBuilderInContext(ctx))
        }
    }

    /// Insert the unlinked instruction `inst` just before `position`,
    /// keeping its name (the builder would otherwise clear it).
    pub fn insert_before(&self, inst: Value, position: Value) {
        assert!(parent(inst).is_none(), "inserting a linked instruction");
        assert!(
            parent(position).is_some(),
            "inserting before an unlinked one"
        );
        let name = std::ffi::CString::new(value_name(inst)).unwrap_or_default();
        // SAFETY: the builder is ours and alive; `position` is a live
        // instruction in a block and `inst` a live unlinked instruction
        // (asserted), of the function the builder was made for (the handle
        // contract), so the insertion links a free node into one list.
        // The builder would also give `inst` the position's debug location:
        // an instruction keeps its own (a clone its source's), so edits stay
        // explainable in source lines. LLVMInstructionGetDebugLoc answers
        // the live `inst`'s location metadata (null for none), which
        // LLVMInstructionSetDebugLoc takes back as is.
        unsafe {
            let location = llvm_sys::debuginfo::LLVMInstructionGetDebugLoc(inst);
            LLVMPositionBuilderBefore(self.0, position);
            LLVMInsertIntoBuilderWithName(self.0, inst, name.as_ptr());
            llvm_sys::debuginfo::LLVMInstructionSetDebugLoc(inst, location);
        }
    }
}

impl Drop for Inserter {
    fn drop(&mut self) {
        // SAFETY: the builder was created in `new` and is disposed of once.
        unsafe { LLVMDisposeBuilder(self.0) }
    }
}

/// Functions marked `!{ptr @f, !"kernel", i32 1}` in `!nvvm.annotations`, and
/// functions with the `ptx_kernel` calling convention (newer clang emits that).
pub fn kernel_functions(module: Module) -> Vec<String> {
    const PTX_KERNEL_CALLCONV: u32 = 71;
    let mut out: Vec<String> = Vec::new();
    // SAFETY: `module` is live. The operand arrays are sized by the counts
    // LLVM reports for the same node, so LLVMGetNamedMetadataOperands and
    // LLVMGetMDNodeOperands write inside them; a named metadata's operands
    // are nodes (what LLVMGetMDNodeNumOperands casts to); null operands are
    // skipped; LLVMIsAFunction and LLVMGetMDString accept any value, and the
    // string they give is read while the module lives. The function list
    // holds functions, as LLVMGetFunctionCallConv and LLVMCountBasicBlocks need.
    unsafe {
        let key = c"nvvm.annotations";
        let n = LLVMGetNamedMetadataNumOperands(module, key.as_ptr());
        let mut nodes = vec![std::ptr::null_mut(); n as usize];
        if n > 0 {
            LLVMGetNamedMetadataOperands(module, key.as_ptr(), nodes.as_mut_ptr());
        }
        for node in nodes {
            let count = LLVMGetMDNodeNumOperands(node);
            if count < 2 {
                continue;
            }
            let mut ops = vec![std::ptr::null_mut(); count as usize];
            LLVMGetMDNodeOperands(node, ops.as_mut_ptr());
            let (target, tag) = (ops[0], ops[1]);
            if target.is_null() || tag.is_null() || LLVMIsAFunction(target).is_null() {
                continue;
            }
            let mut len = 0u32;
            let s = LLVMGetMDString(tag, &mut len);
            if s.is_null() || std::slice::from_raw_parts(s as *const u8, len as usize) != b"kernel"
            {
                continue;
            }
            let name = value_name(target);
            if !out.contains(&name) {
                out.push(name);
            }
        }
        let mut f = LLVMGetFirstFunction(module);
        while !f.is_null() {
            if LLVMGetFunctionCallConv(f) == PTX_KERNEL_CALLCONV && LLVMCountBasicBlocks(f) > 0 {
                let name = value_name(f);
                if !out.contains(&name) {
                    out.push(name);
                }
            }
            f = LLVMGetNextFunction(f);
        }
    }
    out
}
