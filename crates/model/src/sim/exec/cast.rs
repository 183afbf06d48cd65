//! Conversions (`trunc`, `zext`, `sext`, bitcasts, and between integers
//! and floats): float-to-integer conversions saturate and map NaN to 0.

use super::float::f32b;
use crate::sim::code::*;

fn to_float(v: f64, bits: u32) -> u64 {
    if bits == 32 {
        u64::from((v as f32).to_bits())
    } else {
        v.to_bits()
    }
}

fn from_float(v: u64, bits: u32) -> f64 {
    if bits == 32 {
        f64::from(f32b(v))
    } else {
        f64::from_bits(v)
    }
}

/// Float-to-integer conversions saturate and map NaN to 0, as PTX's `cvt.rzi` does.
#[inline] // the interpreter loop (`interp`) inlines it, as when they shared one file
pub(super) fn cast_value(cast: Cast, from_bits: u32, to_bits: u32, a: u64) -> u64 {
    let m = mask(to_bits);
    match cast {
        Cast::Trunc | Cast::ZExt | Cast::Bits => a & m,
        Cast::SExt => (sign_extend(a, from_bits) as u64) & m,
        Cast::FpToSi => {
            let v = from_float(a, from_bits);
            let lo = -(2f64.powi(to_bits as i32 - 1));
            (v.clamp(lo, -lo - 1.0) as i64 as u64) & m
        }
        Cast::FpToUi => {
            let v = from_float(a, from_bits);
            (v.clamp(0.0, m as f64) as u64) & m
        }
        Cast::UiToFp => {
            if to_bits == 32 {
                u64::from((a as f32).to_bits())
            } else {
                (a as f64).to_bits()
            }
        }
        Cast::SiToFp => {
            let s = sign_extend(a, from_bits);
            if to_bits == 32 {
                u64::from((s as f32).to_bits())
            } else {
                (s as f64).to_bits()
            }
        }
        Cast::FpTrunc | Cast::FpExt => to_float(from_float(a, from_bits), to_bits),
    }
}
