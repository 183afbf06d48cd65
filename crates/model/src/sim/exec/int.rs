//! Integer instructions: binary operations at any width up to 64 bits with
//! PTX's answers for the cases LLVM leaves undefined, the bit-count and
//! byte-order functions, `prmt`, and `icmp`.

use crate::sim::code::*;

/// Integer semantics at `bits` width. Cases LLVM leaves undefined get PTX's
/// answers: division by zero gives all ones (unsigned) or -1 / the dividend,
/// shifts by the width or more give zero (or the sign for `ashr`).
#[inline] // the interpreter loop (`interp`) inlines it, as when they shared one file
pub(super) fn int_op(op: IntOp, bits: u32, a: u64, b: u64) -> u64 {
    let m = mask(bits);
    let (a, b) = (a & m, b & m);
    let (sa, sb) = (sign_extend(a, bits), sign_extend(b, bits));
    let r = match op {
        IntOp::Add => a.wrapping_add(b),
        IntOp::Sub => a.wrapping_sub(b),
        IntOp::Mul => a.wrapping_mul(b),
        IntOp::UDiv => a.checked_div(b).unwrap_or(m),
        IntOp::SDiv => {
            if sb == 0 {
                m
            } else {
                sa.wrapping_div(sb) as u64
            }
        }
        IntOp::URem => a.checked_rem(b).unwrap_or(a),
        IntOp::SRem => {
            if sb == 0 {
                a
            } else {
                sa.wrapping_rem(sb) as u64
            }
        }
        IntOp::Shl => {
            if b >= u64::from(bits) {
                0
            } else {
                a << b
            }
        }
        IntOp::LShr => {
            if b >= u64::from(bits) {
                0
            } else {
                a >> b
            }
        }
        IntOp::AShr => (sa >> b.min(u64::from(bits) - 1)) as u64,
        IntOp::And => a & b,
        IntOp::Or => a | b,
        IntOp::Xor => a ^ b,
        IntOp::SMax => sa.max(sb) as u64,
        IntOp::SMin => sa.min(sb) as u64,
        IntOp::UMax => a.max(b),
        IntOp::UMin => a.min(b),
        IntOp::MulHiS
        | IntOp::MulHiU
        | IntOp::Mul24S
        | IntOp::Mul24U
        | IntOp::SAddSat
        | IntOp::SSubSat
        | IntOp::UAddSat
        | IntOp::USubSat => rare_int_op(op, bits, a, b),
    };
    r & m
}

/// The integer operations intrinsics bring, kept out of the interpreter
/// loop's inlined code. Operands are already masked to `bits`.
#[inline(never)]
fn rare_int_op(op: IntOp, bits: u32, a: u64, b: u64) -> u64 {
    let (sa, sb) = (sign_extend(a, bits), sign_extend(b, bits));
    let m = mask(bits);
    match op {
        IntOp::MulHiS => ((i128::from(sa) * i128::from(sb)) >> bits) as u64,
        IntOp::MulHiU => ((u128::from(a) * u128::from(b)) >> bits) as u64,
        IntOp::Mul24S => (sign_extend(a & 0xff_ffff, 24) * sign_extend(b & 0xff_ffff, 24)) as u64,
        IntOp::Mul24U => (a & 0xff_ffff) * (b & 0xff_ffff),
        IntOp::SAddSat => saturate_signed(i128::from(sa) + i128::from(sb), bits),
        IntOp::SSubSat => saturate_signed(i128::from(sa) - i128::from(sb), bits),
        IntOp::UAddSat => a.checked_add(b).filter(|&s| s <= m).unwrap_or(m),
        IntOp::USubSat => a.saturating_sub(b),
        // Never passed here (`int_op` computes the others).
        _ => 0,
    }
}

/// `v` clamped to the signed range of `bits` bits.
fn saturate_signed(v: i128, bits: u32) -> u64 {
    let max = i128::from(mask(bits) >> 1);
    v.clamp(-max - 1, max) as u64
}

pub(super) fn int_fn(f: IntFn, bits: u32, a: u64) -> u64 {
    let a = a & mask(bits);
    // Widths above 64 never reach here (`ir::lower` refuses them).
    let unused = 64 - bits.min(64);
    u64::from(match f {
        IntFn::Popcount => a.count_ones(),
        IntFn::Clz => a.leading_zeros() - unused,
        IntFn::Ctz => a.trailing_zeros().min(bits),
        IntFn::Bswap => return a.swap_bytes() >> unused,
        IntFn::BitReverse => return a.reverse_bits() >> unused,
    })
}

/// PTX `prmt.b32` in its default mode: result byte i is byte `c[4i+2:4i]`
/// of the 8 bytes `b:a`, or that byte's sign replicated if `c[4i+3]` is set.
pub(super) fn prmt(a: u64, b: u64, c: u64) -> u64 {
    let source = (b << 32) | (a & 0xffff_ffff);
    (0..4).fold(0, |out, i| {
        let select = (c >> (4 * i)) & 0xf;
        let byte = (source >> (8 * (select & 7))) & 0xff;
        let byte = if select & 8 == 0 {
            byte
        } else if byte & 0x80 != 0 {
            0xff
        } else {
            0
        };
        out | (byte << (8 * i))
    })
}

pub(super) fn icmp(pred: ICmp, bits: u32, a: u64, b: u64) -> bool {
    let m = mask(bits);
    let (a, b) = (a & m, b & m);
    let (sa, sb) = (sign_extend(a, bits), sign_extend(b, bits));
    match pred {
        ICmp::Eq => a == b,
        ICmp::Ne => a != b,
        ICmp::Ugt => a > b,
        ICmp::Uge => a >= b,
        ICmp::Ult => a < b,
        ICmp::Ule => a <= b,
        ICmp::Sgt => sa > sb,
        ICmp::Sge => sa >= sb,
        ICmp::Slt => sa < sb,
        ICmp::Sle => sa <= sb,
    }
}
