//! Thin safe wrappers over the llvm-sys calls the edit engine needs. Every
//! `unsafe` block of the edit engine lives here; callers only pass handles
//! obtained from a live module whose context outlives them.

use llvm_sys::core::*;
use llvm_sys::prelude::*;
use llvm_sys::{LLVMOpcode, LLVMTypeKind};
use std::ffi::CStr;

pub type Value = LLVMValueRef;
pub type Block = LLVMBasicBlockRef;
pub type Type = LLVMTypeRef;

fn non_null<T>(p: *mut T) -> Option<*mut T> {
    (!p.is_null()).then_some(p)
}

pub fn blocks(func: Value) -> Vec<Block> {
    let mut out = Vec::new();
    let mut b = unsafe { LLVMGetFirstBasicBlock(func) };
    while let Some(block) = non_null(b) {
        out.push(block);
        b = unsafe { LLVMGetNextBasicBlock(block) };
    }
    out
}

pub fn instructions(block: Block) -> Vec<Value> {
    let mut out = Vec::new();
    let mut i = unsafe { LLVMGetFirstInstruction(block) };
    while let Some(inst) = non_null(i) {
        out.push(inst);
        i = unsafe { LLVMGetNextInstruction(inst) };
    }
    out
}

pub fn next_instruction(inst: Value) -> Option<Value> {
    non_null(unsafe { LLVMGetNextInstruction(inst) })
}

pub fn successors(block: Block) -> Vec<Block> {
    unsafe {
        let term = LLVMGetBasicBlockTerminator(block);
        if term.is_null() {
            return Vec::new();
        }
        (0..LLVMGetNumSuccessors(term))
            .map(|i| LLVMGetSuccessor(term, i))
            .collect()
    }
}

pub fn params(func: Value) -> Vec<Value> {
    unsafe {
        let n = LLVMCountParams(func);
        (0..n).map(|i| LLVMGetParam(func, i)).collect()
    }
}

pub fn opcode(inst: Value) -> LLVMOpcode {
    unsafe { LLVMGetInstructionOpcode(inst) }
}

pub fn is_instruction(v: Value) -> bool {
    unsafe { !LLVMIsAInstruction(v).is_null() }
}

pub fn is_constant(v: Value) -> bool {
    unsafe { !LLVMIsAConstant(v).is_null() }
}

pub fn is_terminator(inst: Value) -> bool {
    unsafe { !LLVMIsATerminatorInst(inst).is_null() }
}

pub fn is_phi(inst: Value) -> bool {
    opcode(inst) == LLVMOpcode::LLVMPHI
}

pub fn type_of(v: Value) -> Type {
    unsafe { LLVMTypeOf(v) }
}

pub fn type_kind(t: Type) -> LLVMTypeKind {
    unsafe { LLVMGetTypeKind(t) }
}

pub fn is_void(t: Type) -> bool {
    type_kind(t) == LLVMTypeKind::LLVMVoidTypeKind
}

/// Types an operand of which we may rewire: first-class data, not labels,
/// tokens or metadata.
pub fn is_data_type(t: Type) -> bool {
    use LLVMTypeKind::*;
    matches!(
        type_kind(t),
        LLVMHalfTypeKind
            | LLVMBFloatTypeKind
            | LLVMFloatTypeKind
            | LLVMDoubleTypeKind
            | LLVMIntegerTypeKind
            | LLVMPointerTypeKind
            | LLVMVectorTypeKind
            | LLVMStructTypeKind
            | LLVMArrayTypeKind
    )
}

pub fn is_int_or_float(t: Type) -> bool {
    use LLVMTypeKind::*;
    matches!(
        type_kind(t),
        LLVMHalfTypeKind
            | LLVMBFloatTypeKind
            | LLVMFloatTypeKind
            | LLVMDoubleTypeKind
            | LLVMIntegerTypeKind
    )
}

pub fn num_operands(user: Value) -> u32 {
    unsafe { LLVMGetNumOperands(user).max(0) as u32 }
}

pub fn operand(user: Value, index: u32) -> Value {
    unsafe { LLVMGetOperand(user, index) }
}

pub fn set_operand(user: Value, index: u32, value: Value) {
    unsafe { LLVMSetOperand(user, index, value) }
}

/// The instructions that use `v` (each once, in use-list order).
pub fn users(v: Value) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
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
    unsafe { !LLVMGetFirstUse(v).is_null() }
}

pub fn incoming_block(phi: Value, index: u32) -> Block {
    unsafe { LLVMGetIncomingBlock(phi, index) }
}

/// Whether `inst` is a call (the last operand is then the callee).
pub fn is_call(inst: Value) -> bool {
    opcode(inst) == LLVMOpcode::LLVMCall
}

/// Whether a call's callee is an intrinsic or a declaration (whose constant
/// arguments may be `immarg`s or otherwise required to stay constant).
pub fn calls_intrinsic(call: Value) -> bool {
    unsafe {
        let callee = LLVMGetCalledValue(call);
        !LLVMIsAFunction(callee).is_null() && LLVMGetIntrinsicID(callee) != 0
    }
}

pub fn const_zero(t: Type) -> Value {
    unsafe { LLVMConstNull(t) }
}

pub fn const_one(t: Type) -> Option<Value> {
    use LLVMTypeKind::*;
    unsafe {
        match type_kind(t) {
            LLVMIntegerTypeKind => Some(LLVMConstInt(t, 1, 0)),
            LLVMHalfTypeKind | LLVMBFloatTypeKind | LLVMFloatTypeKind | LLVMDoubleTypeKind => {
                Some(LLVMConstReal(t, 1.0))
            }
            _ => None,
        }
    }
}

/// A new, unlinked copy of `inst` (same operands, no name).
pub fn clone_instruction(inst: Value) -> Value {
    unsafe { LLVMInstructionClone(inst) }
}

pub fn remove_from_parent(inst: Value) {
    unsafe { LLVMInstructionRemoveFromParent(inst) }
}

pub fn erase(inst: Value) {
    unsafe { LLVMInstructionEraseFromParent(inst) }
}

pub fn replace_all_uses(old: Value, new: Value) {
    unsafe { LLVMReplaceAllUsesWith(old, new) }
}

pub fn value_to_string(v: Value) -> String {
    unsafe {
        let s = LLVMPrintValueToString(v);
        let out = CStr::from_ptr(s).to_string_lossy().trim().to_string();
        LLVMDisposeMessage(s);
        out
    }
}

pub fn value_name(v: Value) -> String {
    unsafe {
        let mut len = 0usize;
        let p = LLVMGetValueName2(v, &mut len);
        if p.is_null() {
            return String::new();
        }
        String::from_utf8_lossy(std::slice::from_raw_parts(p as *const u8, len)).into_owned()
    }
}

/// Inserts instructions at positions; owns an LLVM IRBuilder.
pub struct Inserter(LLVMBuilderRef);

impl Inserter {
    pub fn new(func: Value) -> Self {
        unsafe {
            let ctx = LLVMGetTypeContext(LLVMTypeOf(func));
            Inserter(LLVMCreateBuilderInContext(ctx))
        }
    }

    /// Insert the unlinked instruction `inst` just before `position`,
    /// keeping its name (the builder would otherwise clear it).
    pub fn insert_before(&self, inst: Value, position: Value) {
        let name = std::ffi::CString::new(value_name(inst)).unwrap_or_default();
        unsafe {
            LLVMPositionBuilderBefore(self.0, position);
            LLVMInsertIntoBuilderWithName(self.0, inst, name.as_ptr());
        }
    }
}

impl Drop for Inserter {
    fn drop(&mut self) {
        unsafe { LLVMDisposeBuilder(self.0) }
    }
}

/// Functions marked `!{ptr @f, !"kernel", i32 1}` in `!nvvm.annotations`, and
/// functions with the `ptx_kernel` calling convention (newer clang emits that).
pub fn kernel_functions(module: LLVMModuleRef) -> Vec<String> {
    const PTX_KERNEL_CALLCONV: u32 = 71;
    let mut out: Vec<String> = Vec::new();
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

pub fn type_to_string(t: Type) -> String {
    unsafe {
        let s = LLVMPrintTypeToString(t);
        let out = CStr::from_ptr(s).to_string_lossy().into_owned();
        LLVMDisposeMessage(s);
        out
    }
}
