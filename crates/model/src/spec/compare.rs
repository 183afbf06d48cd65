//! Comparing an output buffer with the reference output.

use super::model::{Acceptance, Comparison, ElemType, Metric};

/// The floor of the denominator of `max_rel`: `|a - b| / max(|ref|, TINY)`.
pub const REL_TINY: f64 = 1e-30;

#[derive(Clone, Copy)]
enum Elem {
    Float(f64),
    Int(i128),
}

fn decode(elem: ElemType, b: &[u8]) -> Elem {
    let a = |n: usize| -> [u8; 8] {
        let mut out = [0u8; 8];
        out[..n].copy_from_slice(&b[..n]);
        out
    };
    match elem {
        ElemType::F32 => Elem::Float(f32::from_le_bytes(b[..4].try_into().unwrap()) as f64),
        ElemType::F64 => Elem::Float(f64::from_le_bytes(a(8))),
        ElemType::I8 => Elem::Int(b[0] as i8 as i128),
        ElemType::I16 => Elem::Int(i16::from_le_bytes([b[0], b[1]]) as i128),
        ElemType::I32 => Elem::Int(i32::from_le_bytes(b[..4].try_into().unwrap()) as i128),
        ElemType::I64 => Elem::Int(i64::from_le_bytes(a(8)) as i128),
        ElemType::U8 => Elem::Int(b[0] as i128),
        ElemType::U16 => Elem::Int(u16::from_le_bytes([b[0], b[1]]) as i128),
        ElemType::U32 => Elem::Int(u32::from_le_bytes(b[..4].try_into().unwrap()) as i128),
        ElemType::U64 => Elem::Int(u64::from_le_bytes(a(8)) as i128),
    }
}

/// Position of a float on the number line of its bit patterns: adjacent
/// floats differ by 1, and -0.0 and +0.0 are both 0.
fn ordered(elem: ElemType, b: &[u8]) -> i128 {
    match elem {
        ElemType::F32 => {
            let bits = u32::from_le_bytes(b[..4].try_into().unwrap());
            let mag = (bits & 0x7fff_ffff) as i128;
            if bits >> 31 == 1 {
                -mag
            } else {
                mag
            }
        }
        _ => {
            let bits = u64::from_le_bytes(b[..8].try_into().unwrap());
            let mag = (bits & 0x7fff_ffff_ffff_ffff) as i128;
            if bits >> 63 == 1 {
                -mag
            } else {
                mag
            }
        }
    }
}

/// Compares `actual` with `reference` (both little-endian `elem`s) under
/// the acceptance metric. See docs/spec.md, "Comparison".
pub fn compare(
    acceptance: &Acceptance,
    elem: ElemType,
    reference: &[u8],
    actual: &[u8],
) -> Comparison {
    let size = elem.size();
    if reference.len() != actual.len() || reference.len() % size != 0 {
        return Comparison {
            passed: false,
            error: f64::INFINITY,
            first_mismatch: Some(reference.len().min(actual.len()) / size),
        };
    }
    let tol = acceptance.tolerance;
    let mut error = 0.0f64;
    let mut first_mismatch = None;
    for (i, (r, a)) in reference
        .chunks_exact(size)
        .zip(actual.chunks_exact(size))
        .enumerate()
    {
        // The element's value of the metric; `None` for a NaN facing a number.
        let e: Option<f64> = match (decode(elem, r), decode(elem, a)) {
            (Elem::Float(x), Elem::Float(y)) if acceptance.metric == Metric::Exact => {
                Some(if r == a || (x.is_nan() && y.is_nan()) {
                    0.0
                } else {
                    1.0
                })
            }
            (Elem::Float(x), Elem::Float(y)) => {
                if x.is_nan() || y.is_nan() {
                    if x.is_nan() && y.is_nan() {
                        Some(0.0)
                    } else {
                        None
                    }
                } else {
                    match acceptance.metric {
                        Metric::Exact => unreachable!("handled above"),
                        Metric::MaxAbs => Some(if x == y { 0.0 } else { (x - y).abs() }),
                        Metric::MaxRel => Some(if x == y {
                            0.0
                        } else if x.is_infinite() || y.is_infinite() {
                            f64::INFINITY
                        } else {
                            (x - y).abs() / x.abs().max(REL_TINY)
                        }),
                        Metric::Ulp => {
                            Some((ordered(elem, r) - ordered(elem, a)).unsigned_abs() as f64)
                        }
                    }
                }
            }
            (Elem::Int(x), Elem::Int(y)) => {
                let d = (x - y).unsigned_abs() as f64;
                Some(match acceptance.metric {
                    Metric::Exact => {
                        if x == y {
                            0.0
                        } else {
                            1.0
                        }
                    }
                    Metric::MaxAbs | Metric::Ulp => d,
                    Metric::MaxRel => d / (x.unsigned_abs() as f64).max(REL_TINY),
                })
            }
            _ => unreachable!("one element type"),
        };
        let failed = match (acceptance.metric, e) {
            (_, None) => true,
            (Metric::Exact, Some(e)) => e != 0.0,
            (_, Some(e)) => e > tol,
        };
        match (acceptance.metric, e) {
            (_, None) => error = f64::INFINITY,
            (Metric::Exact, Some(e)) => error += e,
            (_, Some(e)) => error = error.max(e),
        }
        if failed && first_mismatch.is_none() {
            first_mismatch = Some(i);
        }
    }
    Comparison {
        passed: first_mismatch.is_none(),
        error,
        first_mismatch,
    }
}
