//! Types as the simulator sees them: bit widths of scalars, float widths,
//! byte sizes from the module's data layout, and how many consecutive
//! registers (lanes) a vector or struct value takes.

use super::unsupported;
use super::Lowering;
use crate::error::IrError;
use crate::llvm::{self, Type};
use gevo_model::sim::code::*;
use llvm_sys::LLVMTypeKind;

/// Vectors wider than this are refused (a register per element per thread).
const MAX_LANES: u32 = 64;

impl Lowering {
    pub(super) fn alloc_size(&self, ty: Type) -> u64 {
        self.layout.alloc_size(ty)
    }

    pub(super) fn store_size(&self, ty: Type) -> u64 {
        self.layout.store_size(ty)
    }

    /// Bit width of a scalar integer or float type (pointers: 64).
    pub(super) fn bits_of(&self, ty: Type) -> Result<u32, IrError> {
        use LLVMTypeKind::*;
        Ok(match llvm::type_kind(ty) {
            LLVMIntegerTypeKind => {
                let w = llvm::int_width(ty);
                if w > 64 {
                    return Err(unsupported(format!("i{w} values")));
                }
                w
            }
            LLVMFloatTypeKind => 32,
            LLVMDoubleTypeKind => 64,
            LLVMPointerTypeKind => 64,
            LLVMHalfTypeKind | LLVMBFloatTypeKind => return Err(unsupported("16-bit floats")),
            LLVMVectorTypeKind => return Err(unsupported("vector values")),
            _ => {
                return Err(unsupported(format!(
                    "values of type {}",
                    llvm::type_to_string(ty)
                )))
            }
        })
    }

    pub(super) fn float_width(&self, ty: Type) -> Result<FloatWidth, IrError> {
        match llvm::type_kind(ty) {
            LLVMTypeKind::LLVMFloatTypeKind => Ok(FloatWidth::F32),
            LLVMTypeKind::LLVMDoubleTypeKind => Ok(FloatWidth::F64),
            _ => Err(unsupported(format!(
                "float type {}",
                llvm::type_to_string(ty)
            ))),
        }
    }

    pub(super) fn access_bytes(&self, ty: Type) -> Result<u32, IrError> {
        self.bits_of(ty)?;
        Ok(self.store_size(ty) as u32)
    }
}

pub(super) fn is_vector(ty: Type) -> bool {
    llvm::type_kind(ty) == LLVMTypeKind::LLVMVectorTypeKind
}

/// Values held in several consecutive registers: vectors and structs.
pub(super) fn is_aggregate(ty: Type) -> bool {
    matches!(
        llvm::type_kind(ty),
        LLVMTypeKind::LLVMVectorTypeKind | LLVMTypeKind::LLVMStructTypeKind
    )
}

/// A vector's element type; any other type itself.
pub(super) fn scalar_type(ty: Type) -> Type {
    if is_vector(ty) {
        llvm::element_type(ty)
    } else {
        ty
    }
}

/// Registers a value of type `ty` occupies (see `lanes`).
pub(super) fn lane_count(ty: Type) -> Result<u32, IrError> {
    match llvm::type_kind(ty) {
        LLVMTypeKind::LLVMVectorTypeKind => {
            let n = llvm::vector_size(ty);
            if n == 0 || n > MAX_LANES {
                return Err(unsupported(format!(
                    "vectors of {n} elements (at most {MAX_LANES})"
                )));
            }
            Ok(n)
        }
        LLVMTypeKind::LLVMStructTypeKind => {
            let n = llvm::struct_field_count(ty);
            if n > MAX_LANES {
                return Err(unsupported(format!("structs of {n} fields")));
            }
            Ok(n.max(1))
        }
        _ => Ok(1),
    }
}
