//! Accesses the guard need not check at all: the pointer is a module
//! variable plus offsets whose ranges are known, and every offset it may
//! take keeps the whole access inside the variable. An index is known when
//! it is computed from constants and thread indices by arithmetic that
//! cannot wrap; a thread index is below its kernel's block size, known
//! where the spec launches the kernel with constant blocks only
//! (`KernelIr::with_block_bounds`). So `tile[threadIdx.y][threadIdx.x]`
//! in a kernel launched with 8x8 blocks goes unchecked; an index from a
//! load, a block index, a loop's phi or a size parameter keeps its check.
//!
//! Soundness: each value's interval is computed with 128-bit arithmetic
//! and refused where it leaves the signed range of the instruction's own
//! type, so no wrap the hardware would make is missed.

use super::super::llvm;
use super::BlockBounds;
use llvm_sys::{LLVMOpcode, LLVMTypeKind};

/// How far back through a value's operands the interval is sought:
/// address arithmetic is a few instructions deep.
const MOST_DEPTH: u32 = 24;

/// An inclusive range of integer values.
type Interval = (i128, i128);

/// Whether an access of `bytes` through `pointer` stays within the
/// `variable_bytes` of `variable`, its root, for every thread of a block no
/// larger than `block`.
pub(super) fn proven_inside(
    pointer: llvm::Value,
    variable: llvm::Value,
    variable_bytes: u64,
    bytes: u64,
    block: BlockBounds,
    layout: llvm::DataLayout,
) -> bool {
    let ranges = Ranges { block, layout };
    ranges
        .offset(pointer, variable, 0)
        .is_some_and(|(low, high)| {
            let end = high.checked_add(i128::from(bytes));
            low >= 0 && end.is_some_and(|end| end <= i128::from(variable_bytes))
        })
}

struct Ranges {
    block: BlockBounds,
    layout: llvm::DataLayout,
}

impl Ranges {
    /// The byte offsets `pointer - variable` may take, where `pointer` is
    /// `variable` through GEPs and casts.
    fn offset(&self, pointer: llvm::Value, variable: llvm::Value, depth: u32) -> Option<Interval> {
        if pointer == variable {
            return Some((0, 0));
        }
        if depth == MOST_DEPTH {
            return None;
        }
        match opcode_of(pointer)? {
            LLVMOpcode::LLVMAddrSpaceCast | LLVMOpcode::LLVMBitCast => {
                self.offset(llvm::operand(pointer, 0), variable, depth + 1)
            }
            LLVMOpcode::LLVMGetElementPtr => {
                let base = self.offset(llvm::operand(pointer, 0), variable, depth + 1)?;
                sum(base, self.gep_offset(pointer, depth)?)
            }
            _ => None,
        }
    }

    /// What a GEP's indices add to its base, in bytes.
    fn gep_offset(&self, gep: llvm::Value, depth: u32) -> Option<Interval> {
        let mut ty = llvm::gep_source_type(gep);
        let scaled = |index: llvm::Value, size: u64| {
            let (low, high) = self.value(index, depth + 1)?;
            let size = i128::from(size);
            Some((low.checked_mul(size)?, high.checked_mul(size)?))
        };
        let mut offset = scaled(llvm::operand(gep, 1), self.layout.alloc_size(ty))?;
        for k in 2..llvm::num_operands(gep) {
            let index = llvm::operand(gep, k);
            let term = match llvm::type_kind(ty) {
                LLVMTypeKind::LLVMArrayTypeKind => {
                    ty = llvm::element_type(ty);
                    scaled(index, self.layout.alloc_size(ty))?
                }
                LLVMTypeKind::LLVMStructTypeKind => {
                    let field = llvm::const_int(index)? as u32;
                    let offset = i128::from(self.layout.field_offset(ty, field));
                    ty = llvm::struct_field_type(ty, field);
                    (offset, offset)
                }
                _ => return None,
            };
            offset = sum(offset, term)?;
        }
        Some(offset)
    }

    /// The values an integer may take, read as signed at its own width.
    fn value(&self, v: llvm::Value, depth: u32) -> Option<Interval> {
        let width = integer_width(v)?;
        if let Some(constant) = signed_constant(v, width) {
            return Some((constant, constant));
        }
        if depth == MOST_DEPTH {
            return None;
        }
        let operand = |i: u32| self.value(llvm::operand(v, i), depth + 1);
        let interval = match opcode_of(v)? {
            LLVMOpcode::LLVMCall => self.thread_index(v)?,
            LLVMOpcode::LLVMSExt => operand(0)?,
            // Zero-extending a value that may be negative makes it huge.
            LLVMOpcode::LLVMZExt => Some(operand(0)?).filter(|(low, _)| *low >= 0)?,
            LLVMOpcode::LLVMTrunc => operand(0)?,
            LLVMOpcode::LLVMAdd => {
                let ((a, b), (c, d)) = (operand(0)?, operand(1)?);
                (a + c, b + d)
            }
            LLVMOpcode::LLVMSub => {
                let ((a, b), (c, d)) = (operand(0)?, operand(1)?);
                (a - d, b - c)
            }
            LLVMOpcode::LLVMMul => {
                let ((a, b), (c, d)) = (operand(0)?, operand(1)?);
                let products = [a * c, a * d, b * c, b * d];
                (*products.iter().min()?, *products.iter().max()?)
            }
            LLVMOpcode::LLVMShl => {
                let (low, high) = operand(0)?;
                let shift = u32::try_from(llvm::const_int(llvm::operand(v, 1))?).ok()?;
                if low < 0 || shift >= width {
                    return None;
                }
                (low << shift, high << shift)
            }
            // A mask with its sign bit clear keeps at most its own bits.
            LLVMOpcode::LLVMAnd => {
                let mask = [0, 1]
                    .into_iter()
                    .find_map(|i| signed_constant(llvm::operand(v, i), width))
                    .filter(|m| *m >= 0)?;
                (0, mask)
            }
            _ => return None,
        };
        fits(interval, width).then_some(interval)
    }

    /// A read of the thread's index in a dimension whose block size is
    /// known: [0, size - 1].
    fn thread_index(&self, call: llvm::Value) -> Option<Interval> {
        let callee = llvm::value_name(llvm::called_function(call)?);
        let dimension = ["x", "y", "z"]
            .iter()
            .position(|d| callee == format!("llvm.nvvm.read.ptx.sreg.tid.{d}"))?;
        let size = self.block[dimension];
        (size > 0).then(|| (0, i128::from(size) - 1))
    }
}

/// The instruction's or constant expression's opcode.
fn opcode_of(v: llvm::Value) -> Option<LLVMOpcode> {
    match llvm::is_instruction(v) {
        true => Some(llvm::opcode(v)),
        false => llvm::const_expr_opcode(v),
    }
}

/// The width of an integer value, at most 64 bits.
fn integer_width(v: llvm::Value) -> Option<u32> {
    let ty = llvm::type_of(v);
    (llvm::type_kind(ty) == LLVMTypeKind::LLVMIntegerTypeKind)
        .then(|| llvm::int_width(ty))
        .filter(|w| *w <= 64)
}

/// An integer constant of `width` bits (at most 64), read as signed.
fn signed_constant(v: llvm::Value, width: u32) -> Option<i128> {
    let bits = llvm::const_int(v)?;
    let shift = 64 - width;
    Some(i128::from(((bits << shift) as i64) >> shift))
}

/// The sum of two intervals, none where it overflows.
fn sum((a, b): Interval, (c, d): Interval) -> Option<Interval> {
    Some((a.checked_add(c)?, b.checked_add(d)?))
}

/// Whether every value of `interval` is a signed integer of `width` bits.
fn fits((low, high): Interval, width: u32) -> bool {
    let half = 1i128 << (width - 1);
    -half <= low && high < half
}
