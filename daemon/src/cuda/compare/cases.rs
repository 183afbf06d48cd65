//! Buffers that exercise every rule of `spec::compare`, for checking the
//! comparison kernels against it: on the simulator in the unit tests, on a
//! GPU in the GPU suite (`gevod gpu-compare-check`).

use crate::spec::{ElemType, Metric};
use rand::Rng;

/// Elements the rules treat apart, as little-endian bytes of `elem`.
pub fn specials(elem: ElemType) -> Vec<Vec<u8>> {
    match elem {
        ElemType::F32 => [
            0.0f32,
            -0.0,
            1.0,
            -1.0,
            f32::NAN,
            -f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::MIN_POSITIVE / 4.0, // subnormal
            -f32::MIN_POSITIVE / 8.0,
            f32::MAX,
            1.0 + f32::EPSILON,
            1e-6,
        ]
        .iter()
        .map(|v| v.to_le_bytes().to_vec())
        .collect(),
        ElemType::F64 => [
            0.0f64,
            -0.0,
            1.0,
            -1.0,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::MIN_POSITIVE / 4.0,
            -f64::MIN_POSITIVE / 8.0,
            f64::MAX,
            -f64::MAX,
            1.0 + f64::EPSILON,
            1e-6,
        ]
        .iter()
        .map(|v| v.to_le_bytes().to_vec())
        .collect(),
        _ => {
            let size = elem.size();
            let ones = vec![0xffu8; size];
            let mut top = vec![0u8; size];
            top[size - 1] = 0x80; // i..::MIN, or u..'s upper half
            let mut below_top = vec![0xffu8; size];
            below_top[size - 1] = 0x7f; // i..::MAX
            let mut one = vec![0u8; size];
            one[0] = 1;
            vec![vec![0u8; size], one, ones, top, below_top]
        }
    }
}

/// A reference buffer and an actual one: equal elements, special values
/// against each other, random bits, and values a few units apart (near a
/// tolerance of a few ulp or a small absolute or relative difference).
pub fn buffers(elem: ElemType, rng: &mut rand_chacha::ChaCha8Rng) -> (Vec<u8>, Vec<u8>) {
    let size = elem.size();
    let specials = specials(elem);
    let (mut reference, mut actual) = (Vec::new(), Vec::new());
    for r in &specials {
        for a in &specials {
            reference.extend(r);
            actual.extend(a);
        }
    }
    for _ in 0..700 {
        let mut r = vec![0u8; size];
        rng.fill(&mut r[..]);
        let mut a = r.clone();
        match rng.gen_range(0..4) {
            0 => {}
            1 => rng.fill(&mut a[..]),
            _ => {
                // A few units of the last place apart.
                let step = rng.gen_range(1u64..4);
                let mut v = [0u8; 8];
                v[..size].copy_from_slice(&r);
                let bumped = u64::from_le_bytes(v).wrapping_add(step).to_le_bytes();
                a.copy_from_slice(&bumped[..size]);
            }
        }
        reference.extend(&r);
        actual.extend(&a);
    }
    (reference, actual)
}

/// Tolerances to compare under: none, and values that some of
/// [`buffers`]' near pairs pass and some fail.
pub fn tolerances(metric: Metric, float: bool) -> &'static [f64] {
    match metric {
        Metric::Exact => &[0.0],
        Metric::MaxAbs if float => &[0.0, 1e-6, 1.0],
        Metric::MaxRel => &[0.0, 1e-7, 0.5],
        _ => &[0.0, 1.0, 2.0, 3.0],
    }
}
