//! Constants and globals: making the constants edits use, reading the ones
//! lowering folds, and the globals of a module.

use super::{is_constant, is_data_type, non_null, type_kind, Module, Type, Value};
use llvm_sys::core::*;
use llvm_sys::{LLVMOpcode, LLVMTypeKind};

/// The zero (null) constant of a data type.
pub fn const_zero(t: Type) -> Value {
    assert!(is_data_type(t), "no zero of this type");
    // SAFETY: `t` is a live data type (asserted): all of those have a null
    // value, which LLVMConstNull would otherwise not find.
    unsafe { LLVMConstNull(t) }
}

/// The constant one of an integer or float type; None for other types.
pub fn const_one(t: Type) -> Option<Value> {
    use LLVMTypeKind::*;
    match type_kind(t) {
        // SAFETY: `t` is a live integer type, which LLVMConstInt needs.
        LLVMIntegerTypeKind => Some(unsafe { LLVMConstInt(t, 1, 0) }),
        LLVMHalfTypeKind | LLVMBFloatTypeKind | LLVMFloatTypeKind | LLVMDoubleTypeKind => {
            // SAFETY: `t` is a live float type, which LLVMConstReal needs.
            Some(unsafe { LLVMConstReal(t, 1.0) })
        }
        _ => None,
    }
}

/// Whether `v` is a null (zero) constant, `undef` or `poison`.
pub fn is_null_or_undef(v: Value) -> bool {
    // SAFETY: `v` is live; LLVMIsNull answers false for a non-constant and
    // LLVMIsA* accept any value.
    unsafe { LLVMIsNull(v) != 0 || !LLVMIsAUndefValue(v).is_null() }
}

/// The value of an integer constant, zero-extended to 64 bits; None when
/// `v` is no integer constant. A constant wider than 64 bits whose value
/// does not fit trips an LLVM assertion (an abort), or with assertions off
/// gives the low 64 bits; callers refuse such widths first where it matters.
pub fn const_int(v: Value) -> Option<u64> {
    // SAFETY: `v` is live; LLVMIsAConstantInt accepts any value, and
    // LLVMConstIntGetZExtValue runs only on a ConstantInt, which it casts to.
    unsafe { (!LLVMIsAConstantInt(v).is_null()).then(|| LLVMConstIntGetZExtValue(v)) }
}

/// The value of a floating-point constant as a double (exact for float and
/// double); None when `v` is no floating-point constant.
pub fn const_real(v: Value) -> Option<f64> {
    // SAFETY: `v` is live; LLVMIsAConstantFP accepts any value, and
    // LLVMConstRealGetDouble runs only on a ConstantFP, which it casts to,
    // writing its flag into a local.
    unsafe {
        (!LLVMIsAConstantFP(v).is_null()).then(|| {
            let mut loses_info = 0;
            LLVMConstRealGetDouble(v, &mut loses_info)
        })
    }
}

/// The opcode of a constant expression; None when `v` is none.
pub fn const_expr_opcode(v: Value) -> Option<LLVMOpcode> {
    // SAFETY: `v` is live; LLVMIsAConstantExpr accepts any value, and
    // LLVMGetConstOpcode runs only on a ConstantExpr, which it casts to.
    unsafe { (!LLVMIsAConstantExpr(v).is_null()).then(|| LLVMGetConstOpcode(v)) }
}

/// Element `index` of an aggregate constant (array, vector or struct);
/// None when `v` is no constant or has no such element.
pub fn aggregate_element(v: Value, index: u32) -> Option<Value> {
    if !is_constant(v) {
        return None;
    }
    // SAFETY: `v` is a live constant (checked), which
    // LLVMGetAggregateElement casts it to; it answers null for an index
    // past the end or a constant without elements.
    non_null(unsafe { LLVMGetAggregateElement(v, index) })
}

/// Whether `v` is a global value (a variable, function or alias).
pub fn is_global_value(v: Value) -> bool {
    // SAFETY: `v` is live; LLVMIsA* accept any value.
    unsafe { !LLVMIsAGlobalValue(v).is_null() }
}

/// Whether `v` is a function's parameter.
pub fn is_argument(v: Value) -> bool {
    // SAFETY: `v` is live; LLVMIsA* accept any value.
    unsafe { !LLVMIsAArgument(v).is_null() }
}

/// A global variable of a module, with what lowering reads of it.
pub struct Global {
    pub value: Value,
    /// The type of what it holds.
    pub value_type: Type,
    pub address_space: u32,
    /// In bytes; 0 when unspecified.
    pub alignment: u32,
    pub initializer: Option<Value>,
}

/// The global variables of `module`, in module order.
pub fn globals(module: Module) -> Vec<Global> {
    let mut out = Vec::new();
    // SAFETY: `module` is live; LLVMGetFirstGlobal/LLVMGetNextGlobal walk
    // its list of global variables until null. Each `g` is therefore a
    // GlobalVariable: a GlobalValue (LLVMGlobalGetValueType), of pointer
    // type (LLVMGetPointerAddressSpace), a GlobalObject (LLVMGetAlignment)
    // and a GlobalVariable (LLVMGetInitializer, null without one).
    unsafe {
        let mut g = LLVMGetFirstGlobal(module);
        while !g.is_null() {
            out.push(Global {
                value: g,
                value_type: LLVMGlobalGetValueType(g),
                address_space: LLVMGetPointerAddressSpace(LLVMTypeOf(g)),
                alignment: LLVMGetAlignment(g),
                initializer: non_null(LLVMGetInitializer(g)),
            });
            g = LLVMGetNextGlobal(g);
        }
    }
    out
}
