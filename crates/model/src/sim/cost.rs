//! The simulator's cost: a deterministic weighted count of executed
//! instructions. Same IR and inputs, same number. Weights follow the rough
//! relative costs on an NVIDIA GPU; memory operations add a weight by the
//! address space they actually touched (see `memory_weight`).
//!
//! | instruction | weight |
//! |---|---|
//! | integer and float add/sub/mul/logic/compare, casts, select, GEP, branches | 1 |
//! | bit counts and reversals, min/max, rounding, `prmt` | 1 |
//! | integer division and remainder | 8 |
//! | float division, sqrt, transcendental functions, pow | 4 |
//! | register moves a vector instruction lowers to (`extractelement` and `insertelement` with a constant index, `shufflevector`, vector bitcasts) | 1 per instruction |
//! | special registers, phi copies, no-ops | 0 (special registers 1) |
//! | barrier | 8 |
//! | fence | 4 |
//! | load or store (a vector load or store is one access) | 1 + global 8 / shared 2 / local 2 / constant 1 |
//! | atomic | 16 + the space's weight |

use super::code::{FloatFn, FloatOp, IntOp, Op};

pub fn weight(op: &Op) -> u32 {
    match op {
        Op::Int {
            op: IntOp::UDiv | IntOp::SDiv | IntOp::URem | IntOp::SRem,
            ..
        } => 8,
        Op::Float {
            op:
                FloatOp::Div
                | FloatOp::Rem
                | FloatOp::Pow
                | FloatOp::PowI
                | FloatOp::Atan2
                | FloatOp::Hypot,
            ..
        } => 4,
        Op::FloatUnary { f, .. } => match f {
            FloatFn::Neg
            | FloatFn::Abs
            | FloatFn::Floor
            | FloatFn::Ceil
            | FloatFn::Trunc
            | FloatFn::Round
            | FloatFn::RoundEven
            | FloatFn::Saturate => 1,
            _ => 4,
        },
        Op::Barrier => 8,
        Op::Fence => 4,
        Op::AtomicRmw { .. } | Op::CmpXchg { .. } => 16,
        Op::Nop => 0,
        _ => 1,
    }
}

/// Extra weight of a memory access by space (`pointer::GLOBAL`, ...).
pub fn memory_weight(space: u8) -> u64 {
    match space {
        super::pointer::GLOBAL => 8,
        super::pointer::SHARED | super::pointer::LOCAL => 2,
        _ => 1,
    }
}
