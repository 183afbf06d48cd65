//! Floating-point instructions at f32 and f64: binary operations, unary
//! functions and `fcmp`. Operations that kernels seldom use sit behind
//! `#[inline(never)]` functions, out of the interpreter loop's inlined code.

use crate::sim::code::*;

pub(super) fn f32b(v: u64) -> f32 {
    f32::from_bits(v as u32)
}

/// `$a` and `$raw_b` are the operands' registers (`$raw_b` is an integer
/// for `PowI`).
macro_rules! apply_float_op {
    ($op:expr, $x:expr, $y:expr, $width:expr, $a:expr, $raw_b:expr) => {
        match $op {
            FloatOp::Add => $x + $y,
            FloatOp::Sub => $x - $y,
            FloatOp::Mul => $x * $y,
            FloatOp::Div => $x / $y,
            FloatOp::Rem => $x % $y,
            FloatOp::Min => $x.min($y),
            FloatOp::Max => $x.max($y),
            FloatOp::CopySign => $x.copysign($y),
            FloatOp::Pow => $x.powf($y),
            FloatOp::Minimum
            | FloatOp::Maximum
            | FloatOp::PowI
            | FloatOp::Atan2
            | FloatOp::Hypot => return rare_float_op($op, $width, $a, $raw_b),
        }
    };
}

/// The float operations intrinsics bring, kept out of the interpreter
/// loop's inlined code.
macro_rules! apply_rare_float_op {
    ($op:expr, $x:expr, $y:expr, $width:expr, $a:expr, $raw_b:expr) => {
        match $op {
            // NaN in, NaN out (a quiet NaN from the sum); -0 orders below +0.
            FloatOp::Minimum => {
                if $x.is_nan() || $y.is_nan() {
                    $x + $y
                } else if $x == $y {
                    if $x.is_sign_negative() {
                        $x
                    } else {
                        $y
                    }
                } else {
                    $x.min($y)
                }
            }
            FloatOp::Maximum => {
                if $x.is_nan() || $y.is_nan() {
                    $x + $y
                } else if $x == $y {
                    if $x.is_sign_positive() {
                        $x
                    } else {
                        $y
                    }
                } else {
                    $x.max($y)
                }
            }
            FloatOp::PowI => $x.powi(sign_extend($raw_b, 32) as i32),
            FloatOp::Atan2 => $x.atan2($y),
            FloatOp::Hypot => $x.hypot($y),
            // Never passed here (`float_op` computes the others).
            _ => $x,
        }
    };
}

#[inline] // the interpreter loop (`interp`) inlines it, as when they shared one file
pub(super) fn float_op(op: FloatOp, width: FloatWidth, a: u64, b: u64) -> u64 {
    match width {
        FloatWidth::F32 => u64::from(apply_float_op!(op, f32b(a), f32b(b), width, a, b).to_bits()),
        FloatWidth::F64 => {
            apply_float_op!(op, f64::from_bits(a), f64::from_bits(b), width, a, b).to_bits()
        }
    }
}

#[inline(never)]
fn rare_float_op(op: FloatOp, width: FloatWidth, a: u64, b: u64) -> u64 {
    match width {
        FloatWidth::F32 => {
            u64::from(apply_rare_float_op!(op, f32b(a), f32b(b), width, a, b).to_bits())
        }
        FloatWidth::F64 => {
            apply_rare_float_op!(op, f64::from_bits(a), f64::from_bits(b), width, a, b).to_bits()
        }
    }
}

macro_rules! apply_float_fn {
    ($f:expr, $x:expr, $width:expr, $a:expr) => {
        match $f {
            FloatFn::Neg => -$x,
            FloatFn::Abs => $x.abs(),
            FloatFn::Sqrt => $x.sqrt(),
            FloatFn::Exp => $x.exp(),
            FloatFn::Exp2 => $x.exp2(),
            FloatFn::Log => $x.ln(),
            FloatFn::Log2 => $x.log2(),
            FloatFn::Sin => $x.sin(),
            FloatFn::Cos => $x.cos(),
            FloatFn::Floor => $x.floor(),
            FloatFn::Ceil => $x.ceil(),
            FloatFn::Trunc => $x.trunc(),
            FloatFn::Round => $x.round(),
            FloatFn::Rsqrt => 1.0 / $x.sqrt(),
            FloatFn::RoundEven
            | FloatFn::Saturate
            | FloatFn::Log10
            | FloatFn::Exp10
            | FloatFn::Tan
            | FloatFn::Asin
            | FloatFn::Acos
            | FloatFn::Atan
            | FloatFn::Sinh
            | FloatFn::Cosh
            | FloatFn::Tanh
            | FloatFn::Cbrt
            | FloatFn::Expm1
            | FloatFn::Log1p => return rare_float_fn($f, $width, $a),
        }
    };
}

/// The float functions intrinsics bring, kept out of the interpreter loop's
/// inlined code.
macro_rules! apply_rare_float_fn {
    ($f:expr, $x:expr, $t:ty, $width:expr, $a:expr) => {
        match $f {
            FloatFn::RoundEven => $x.round_ties_even(),
            FloatFn::Saturate => {
                if $x > 0.0 {
                    $x.min(1.0)
                } else {
                    0.0
                }
            }
            FloatFn::Log10 => $x.log10(),
            FloatFn::Exp10 => <$t>::powf(10.0, $x),
            FloatFn::Tan => $x.tan(),
            FloatFn::Asin => $x.asin(),
            FloatFn::Acos => $x.acos(),
            FloatFn::Atan => $x.atan(),
            FloatFn::Sinh => $x.sinh(),
            FloatFn::Cosh => $x.cosh(),
            FloatFn::Tanh => $x.tanh(),
            FloatFn::Cbrt => $x.cbrt(),
            FloatFn::Expm1 => $x.exp_m1(),
            FloatFn::Log1p => $x.ln_1p(),
            // Never passed here (`float_fn` computes the others).
            _ => $x,
        }
    };
}

#[inline] // the interpreter loop (`interp`) inlines it, as when they shared one file
pub(super) fn float_fn(f: FloatFn, width: FloatWidth, a: u64) -> u64 {
    match width {
        FloatWidth::F32 => u64::from(apply_float_fn!(f, f32b(a), width, a).to_bits()),
        FloatWidth::F64 => apply_float_fn!(f, f64::from_bits(a), width, a).to_bits(),
    }
}

#[inline(never)]
fn rare_float_fn(f: FloatFn, width: FloatWidth, a: u64) -> u64 {
    match width {
        FloatWidth::F32 => u64::from(apply_rare_float_fn!(f, f32b(a), f32, width, a).to_bits()),
        FloatWidth::F64 => apply_rare_float_fn!(f, f64::from_bits(a), f64, width, a).to_bits(),
    }
}

pub(super) fn fcmp(pred: FCmp, width: FloatWidth, a: u64, b: u64) -> bool {
    let (x, y) = match width {
        FloatWidth::F32 => (f64::from(f32b(a)), f64::from(f32b(b))),
        FloatWidth::F64 => (f64::from_bits(a), f64::from_bits(b)),
    };
    if x.is_nan() || y.is_nan() {
        return pred.unordered_result;
    }
    match pred.cond {
        FCond::False => false,
        FCond::True | FCond::Ord => true,
        FCond::Eq => x == y,
        FCond::Ne => x != y,
        FCond::Lt => x < y,
        FCond::Le => x <= y,
        FCond::Gt => x > y,
        FCond::Ge => x >= y,
    }
}
