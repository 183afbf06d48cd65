//! Accesses whose alignment the guard need not test: the pointer is its
//! root plus offsets that are all multiples of the access's alignment
//! (GEPs over types whose sizes are, the usual `a[i]`: `plan::root_of`
//! takes the least of [`gep_offset_alignment`] on its way to the root),
//! and the root is at least that aligned. A test buffer's address, which a kernel's pointer
//! parameter holds, is aligned to [`BUFFER_ALIGNMENT`] (the driver's
//! allocations are, and `cuda::guarded` refuses a table whose ranges are
//! not); a module variable is aligned as it declares.
//!
//! Only the alignment test goes: the range test stays on every access.

use super::super::llvm;
use llvm_sys::LLVMTypeKind;

/// The alignment every test buffer's address has.
pub const BUFFER_ALIGNMENT: u64 = 256;

/// The largest power of two every offset `gep` can add is a multiple of:
/// an index's element size (or a constant index times it), a struct
/// field's offset, the least of them. [`NO_OFFSET`] where it adds none.
pub(super) fn gep_offset_alignment(gep: llvm::Value, layout: llvm::DataLayout) -> u64 {
    let term = |index: llvm::Value, scale: u64| match llvm::const_int(index) {
        Some(c) => power_dividing(c.wrapping_mul(scale)),
        None => power_dividing(scale),
    };
    let mut ty = llvm::gep_source_type(gep);
    let mut alignment = term(llvm::operand(gep, 1), layout.alloc_size(ty));
    for k in 2..llvm::num_operands(gep) {
        let index = llvm::operand(gep, k);
        let next = match llvm::type_kind(ty) {
            LLVMTypeKind::LLVMArrayTypeKind | LLVMTypeKind::LLVMVectorTypeKind => {
                ty = llvm::element_type(ty);
                term(index, layout.alloc_size(ty))
            }
            LLVMTypeKind::LLVMStructTypeKind => {
                let Some(field) = llvm::const_int(index) else {
                    return 1;
                };
                let offset = layout.field_offset(ty, field as u32);
                ty = llvm::struct_field_type(ty, field as u32);
                power_dividing(offset)
            }
            _ => return 1,
        };
        alignment = alignment.min(next);
    }
    alignment
}

/// An offset alignment that constrains nothing: an offset of 0.
pub(super) const NO_OFFSET: u64 = 1 << 63;

/// The largest power of two that divides `bytes` ([`NO_OFFSET`] for 0).
fn power_dividing(bytes: u64) -> u64 {
    match bytes {
        0 => NO_OFFSET,
        _ => 1 << bytes.trailing_zeros(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::parse_bitcode;
    use super::super::plan::root_of;
    use super::*;
    use inkwell::context::Context;
    use inkwell::values::AsValueRef;
    use llvm_sys::LLVMOpcode;

    /// Each case's load, by the prefix of its function's name
    /// (aligned_cases.ll), against its root's declared or buffer alignment.
    #[test]
    fn loads_proven_aligned_match_the_cases() {
        let context = Context::create();
        let text = include_str!("aligned_cases.ll");
        let module = parse_bitcode(&context, text.as_bytes()).unwrap();
        let layout = llvm::DataLayout::of(module.as_mut_ptr());
        let mut cases = 0;
        for function in module.get_functions() {
            let name = function.get_name().to_string_lossy().into_owned();
            let load = llvm::blocks(function.as_value_ref())
                .into_iter()
                .flat_map(llvm::instructions)
                .find(|&i| llvm::opcode(i) == LLVMOpcode::LLVMLoad)
                .unwrap();
            let pointer = llvm::operand(load, 0);
            let rooted = root_of(pointer, layout).unwrap();
            let root_alignment = match llvm::globals(module.as_mut_ptr())
                .into_iter()
                .find(|g| g.value == rooted.root)
            {
                Some(g) => u64::from(g.alignment),
                None => BUFFER_ALIGNMENT,
            };
            let align = u64::from(llvm::alignment(load));
            let proven = root_alignment.min(rooted.offset_alignment) >= align;
            let expected = name.starts_with("aligned_");
            assert!(expected || name.starts_with("tested_"), "{name}");
            assert_eq!(proven, expected, "{name}");
            cases += 1;
        }
        assert_eq!(cases, 10);
    }
}
