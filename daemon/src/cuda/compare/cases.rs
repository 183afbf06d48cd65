//! Buffers that exercise every rule of `spec::compare`, for checking the
//! comparison kernels against it: on the simulator in the unit tests, on a
//! GPU in the GPU suite (`gevod gpu-compare-check`).

use gevo_model::spec::{ElemType, Metric};
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

/// What [`check_on_device`] found: cases compared, and each disagreement
/// between the kernels and `spec::compare`, in words.
#[derive(Debug, Default)]
pub struct Agreement {
    pub cases: usize,
    pub disagreements: Vec<String>,
}

/// Compares [`buffers`] of every element type under every metric and
/// [`tolerances`], and each pair of [`specials`] alone, with the comparison
/// kernels on `device` and with `spec::compare` on the host.
pub fn check_on_device(
    device: &gevo_model::device::DeviceInfo,
    codegen: &gevo_ir::CodegenOptions,
    seed: u64,
) -> Result<Agreement, crate::cuda::CudaError> {
    use super::{module_ptx, DeviceComparison, Pair};
    use crate::cuda::driver::{Context, DeviceBuffer};
    use gevo_model::spec::{compare, Acceptance};
    use rand::SeedableRng;

    let _context = Context::new(device.ordinal)?;
    let ptx = module_ptx(codegen)
        .map_err(|e| crate::cuda::CudaError::InvalidPtx { log: e.to_string() })?;
    let comparison = DeviceComparison::load(&ptx, 1)?;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut found = Agreement::default();
    let upload = |bytes: &[u8]| -> Result<DeviceBuffer, crate::cuda::CudaError> {
        let buffer = DeviceBuffer::new(bytes.len())?;
        buffer.upload(bytes)?;
        Ok(buffer)
    };
    for elem in ElemType::ALL {
        let float = matches!(elem, ElemType::F32 | ElemType::F64);
        let (reference, actual) = buffers(elem, &mut rng);
        let mut cases = vec![(reference, actual)];
        let specials = specials(elem);
        for r in &specials {
            for a in &specials {
                cases.push((r.clone(), a.clone()));
            }
        }
        for (reference, actual) in &cases {
            let on_device = (upload(reference)?, upload(actual)?);
            for metric in [Metric::Exact, Metric::MaxAbs, Metric::MaxRel, Metric::Ulp] {
                for &tolerance in tolerances(metric, float) {
                    let acceptance = Acceptance { metric, tolerance };
                    let pair = Pair {
                        elem,
                        reference: &on_device.0,
                        actual: &on_device.1,
                    };
                    let got = comparison.compare(&acceptance, &[pair])?[0];
                    let expected = compare(&acceptance, elem, reference, actual);
                    found.cases += 1;
                    let same = got.passed == expected.passed
                        && got.first_mismatch == expected.first_mismatch
                        && got.error.to_bits() == expected.error.to_bits();
                    if !same {
                        found.disagreements.push(format!(
                            "{} {} tolerance {tolerance} on {} bytes: device {got:?}, host {expected:?}",
                            elem.name(),
                            metric.name(),
                            reference.len()
                        ));
                    }
                }
            }
        }
    }
    Ok(found)
}
