//! Accesses whose alignment the guard need not test: the pointer is its
//! root plus offsets that are all multiples of the access's alignment
//! (GEPs over types whose sizes are, the usual `a[i]`), and the root is at
//! least that aligned. A test buffer's address, which a kernel's pointer
//! parameter holds, is aligned to [`BUFFER_ALIGNMENT`] (the driver's
//! allocations are, and `cuda::guarded` refuses a table whose ranges are
//! not); a module variable is aligned as it declares.
//!
//! Only the alignment test goes: the range test stays on every access.

use super::super::llvm;
use llvm_sys::LLVMOpcode;
use llvm_sys::LLVMTypeKind;

/// The alignment every test buffer's address has.
pub const BUFFER_ALIGNMENT: u64 = 256;

/// Whether every way `pointer` is computed from `root` (through GEPs,
/// casts, phis and selects, as `plan::root_of` walks them) adds a multiple
/// of `align` bytes.
pub(super) fn offset_aligned(
    pointer: llvm::Value,
    root: llvm::Value,
    align: u64,
    layout: llvm::DataLayout,
) -> bool {
    use LLVMOpcode::*;
    let mut seen = Vec::new();
    let mut work = vec![pointer];
    while let Some(v) = work.pop() {
        if v == root || seen.contains(&v) {
            continue;
        }
        // Bounded as root_of is.
        if seen.len() == 256 {
            return false;
        }
        seen.push(v);
        let opcode = if llvm::is_instruction(v) {
            Some(llvm::opcode(v))
        } else {
            llvm::const_expr_opcode(v)
        };
        match opcode {
            Some(LLVMGetElementPtr) if gep_offset_aligned(v, align, layout) => {
                work.push(llvm::operand(v, 0))
            }
            Some(LLVMAddrSpaceCast | LLVMBitCast) => work.push(llvm::operand(v, 0)),
            Some(LLVMPHI) => work.extend((0..llvm::incoming_count(v)).map(|i| llvm::operand(v, i))),
            Some(LLVMSelect) => work.extend([llvm::operand(v, 1), llvm::operand(v, 2)]),
            _ => return false,
        }
    }
    true
}

/// Whether each index of `gep` moves the address by a multiple of `align`.
fn gep_offset_aligned(gep: llvm::Value, align: u64, layout: llvm::DataLayout) -> bool {
    let multiple = |index: llvm::Value, scale: u64| match llvm::const_int(index) {
        Some(c) => c.wrapping_mul(scale) % align == 0,
        None => scale % align == 0,
    };
    let mut ty = llvm::gep_source_type(gep);
    if !multiple(llvm::operand(gep, 1), layout.alloc_size(ty)) {
        return false;
    }
    for k in 2..llvm::num_operands(gep) {
        let index = llvm::operand(gep, k);
        match llvm::type_kind(ty) {
            LLVMTypeKind::LLVMArrayTypeKind | LLVMTypeKind::LLVMVectorTypeKind => {
                ty = llvm::element_type(ty);
                if !multiple(index, layout.alloc_size(ty)) {
                    return false;
                }
            }
            LLVMTypeKind::LLVMStructTypeKind => {
                let Some(field) = llvm::const_int(index) else {
                    return false;
                };
                if layout.field_offset(ty, field as u32) % align != 0 {
                    return false;
                }
                ty = llvm::struct_field_type(ty, field as u32);
            }
            _ => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::super::plan::root_of;
    use super::*;
    use inkwell::context::Context;
    use inkwell::memory_buffer::MemoryBuffer;
    use inkwell::values::AsValueRef;

    /// Each case's load, by the prefix of its function's name
    /// (aligned_cases.ll), against its root's declared or buffer alignment.
    #[test]
    fn loads_proven_aligned_match_the_cases() {
        let context = Context::create();
        let text = include_str!("aligned_cases.ll");
        let buffer = MemoryBuffer::create_from_memory_range_copy(text.as_bytes(), "cases");
        let module = context.create_module_from_ir(buffer).unwrap();
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
            let root = root_of(pointer).unwrap();
            let root_alignment = match llvm::globals(module.as_mut_ptr())
                .into_iter()
                .find(|g| g.value == root)
            {
                Some(g) => u64::from(g.alignment),
                None => BUFFER_ALIGNMENT,
            };
            let align = u64::from(llvm::alignment(load));
            let proven = root_alignment >= align && offset_aligned(pointer, root, align, layout);
            let expected = name.starts_with("aligned_");
            assert!(expected || name.starts_with("tested_"), "{name}");
            assert_eq!(proven, expected, "{name}");
            cases += 1;
        }
        assert_eq!(cases, 10);
    }
}
