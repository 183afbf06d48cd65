//! Types: kinds, widths, element and field types, and sizes and offsets
//! from a module's data layout.

use super::{Module, Type, Value};
use llvm_sys::core::*;
use llvm_sys::target::*;
use llvm_sys::LLVMTypeKind;
use std::ffi::CStr;

pub fn type_of(v: Value) -> Type {
    // SAFETY: `v` is live (the handle contract); every value has a type.
    unsafe { LLVMTypeOf(v) }
}

pub fn type_kind(t: Type) -> LLVMTypeKind {
    // SAFETY: `t` is live; LLVMGetTypeKind maps every LLVM 19 type to one of
    // `LLVMTypeKind`'s values.
    unsafe { LLVMGetTypeKind(t) }
}

pub fn is_void(t: Type) -> bool {
    type_kind(t) == LLVMTypeKind::LLVMVoidTypeKind
}

/// Types an operand of which we may rewire: first-class data, not labels,
/// tokens or metadata.
pub fn is_data_type(t: Type) -> bool {
    use LLVMTypeKind::*;
    is_int_or_float(t)
        || matches!(
            type_kind(t),
            LLVMPointerTypeKind | LLVMVectorTypeKind | LLVMStructTypeKind | LLVMArrayTypeKind
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

pub fn type_to_string(t: Type) -> String {
    // SAFETY: `t` is live; LLVMPrintTypeToString returns a NUL-terminated
    // copy that we own, read once and dispose of.
    unsafe {
        let s = LLVMPrintTypeToString(t);
        let out = CStr::from_ptr(s).to_string_lossy().into_owned();
        LLVMDisposeMessage(s);
        out
    }
}

fn assert_kind(t: Type, kinds: &[LLVMTypeKind], what: &str) {
    let kind = type_kind(t);
    assert!(kinds.contains(&kind), "{what} of a {kind:?}");
}

/// The width of an integer type.
pub fn int_width(t: Type) -> u32 {
    assert_kind(t, &[LLVMTypeKind::LLVMIntegerTypeKind], "int width");
    // SAFETY: `t` is a live integer type (asserted), which
    // LLVMGetIntTypeWidth casts it to.
    unsafe { LLVMGetIntTypeWidth(t) }
}

/// The element type of an array or vector type.
pub fn element_type(t: Type) -> Type {
    use LLVMTypeKind::*;
    assert_kind(t, &[LLVMArrayTypeKind, LLVMVectorTypeKind], "element type");
    // SAFETY: `t` is a live array or vector type (asserted), the two kinds
    // LLVMGetElementType casts to.
    unsafe { LLVMGetElementType(t) }
}

/// The number of elements of an array type.
pub fn array_length(t: Type) -> u64 {
    assert_kind(t, &[LLVMTypeKind::LLVMArrayTypeKind], "array length");
    // SAFETY: `t` is a live array type (asserted), which
    // LLVMGetArrayLength2 casts it to.
    unsafe { LLVMGetArrayLength2(t) }
}

/// The number of elements of a vector type (the minimum, if scalable).
pub fn vector_size(t: Type) -> u32 {
    assert_kind(t, &[LLVMTypeKind::LLVMVectorTypeKind], "vector size");
    // SAFETY: `t` is a live vector type (asserted), which LLVMGetVectorSize
    // casts it to.
    unsafe { LLVMGetVectorSize(t) }
}

/// The number of fields of a struct type (0 if opaque).
pub fn struct_field_count(t: Type) -> u32 {
    assert_kind(t, &[LLVMTypeKind::LLVMStructTypeKind], "field count");
    // SAFETY: `t` is a live struct type (asserted), which
    // LLVMCountStructElementTypes casts it to.
    unsafe { LLVMCountStructElementTypes(t) }
}

/// The type of field `index` of a struct type.
pub fn struct_field_type(t: Type, index: u32) -> Type {
    assert!(index < struct_field_count(t), "field {index} out of range");
    // SAFETY: `t` is a live struct type with a field `index` (asserted), so
    // LLVMStructGetTypeAtIndex reads inside its field list.
    unsafe { LLVMStructGetTypeAtIndex(t, index) }
}

/// A module's data layout: sizes and offsets of types.
#[derive(Clone, Copy)]
pub struct DataLayout(LLVMTargetDataRef);

impl DataLayout {
    /// The layout of `module`, which it owns: valid while the module is.
    pub fn of(module: Module) -> DataLayout {
        // SAFETY: `module` is live; LLVMGetModuleDataLayout returns a
        // pointer to the module's own layout, not a new object to dispose of.
        DataLayout(unsafe { LLVMGetModuleDataLayout(module) })
    }

    /// Bytes a value of `t` takes in memory, padding included (an array
    /// element's stride). 0 for a type without a size (an opaque struct:
    /// what LLVM answers too when built without assertions).
    pub fn alloc_size(self, t: Type) -> u64 {
        if !is_sized(t) {
            return 0;
        }
        // SAFETY: the layout and `t` are live and `t` is sized (checked
        // above), which LLVM's size computation assumes.
        unsafe { LLVMABISizeOfType(self.0, t) }
    }

    /// Bytes a store of `t` writes. 0 for a type without a size, as
    /// `alloc_size`.
    pub fn store_size(self, t: Type) -> u64 {
        if !is_sized(t) {
            return 0;
        }
        // SAFETY: the layout and `t` are live and `t` is sized (checked above).
        unsafe { LLVMStoreSizeOfType(self.0, t) }
    }

    /// The byte offset of field `index` of the struct type `t`.
    pub fn field_offset(self, t: Type, index: u32) -> u64 {
        assert!(index < struct_field_count(t), "field {index} out of range");
        // SAFETY: the layout is live; `t` is a live struct type with a field
        // `index` (asserted, and an opaque struct has none), so the struct
        // layout exists and LLVMOffsetOfElement reads inside it.
        unsafe { LLVMOffsetOfElement(self.0, t, index) }
    }
}

fn is_sized(t: Type) -> bool {
    // SAFETY: `t` is live; LLVMTypeIsSized accepts any type.
    unsafe { LLVMTypeIsSized(t) != 0 }
}
