//! The comparison kernels run on the simulator (no GPU needed) must say
//! what `spec::compare` says, for every element type and metric, on buffers
//! full of the cases its rules single out.

use super::*;
use crate::sim::{self, GlobalMemory, LaunchDims, Limits};
use rand::{Rng, SeedableRng};

/// Elements the rules treat apart, as little-endian bytes of `elem`.
fn specials(elem: ElemType) -> Vec<Vec<u8>> {
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
fn buffers(elem: ElemType, rng: &mut rand_chacha::ChaCha8Rng) -> (Vec<u8>, Vec<u8>) {
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

fn programs() -> Vec<(ElemType, sim::code::Program)> {
    let names: Vec<String> = ElemType::ALL.into_iter().map(kernel_name).collect();
    ElemType::ALL
        .into_iter()
        .map(|elem| {
            let ir = KernelIr::parse_kernels(
                "comparison kernels",
                module_ir().as_bytes(),
                &[kernel_name(elem)],
            )
            .unwrap();
            assert!(names.contains(&kernel_name(elem)));
            (elem, ir.lower(&ir.empty_patch()).unwrap())
        })
        .collect()
}

/// Runs `program` on the simulator over `blocks` blocks as the GPU would.
fn on_simulator(
    program: &sim::code::Program,
    acceptance: &Acceptance,
    elem: ElemType,
    reference: &[u8],
    actual: &[u8],
    blocks: u32,
) -> Comparison {
    let mut words = Vec::new();
    for w in [0u64, 0, NO_FAILURE] {
        words.extend(w.to_le_bytes());
    }
    let memory = GlobalMemory::new(&[reference, actual, &words]);
    let pointer = |i| sim::pointer::make(sim::pointer::GLOBAL, i, 0);
    let args = [
        pointer(0),
        pointer(1),
        (reference.len() / elem.size()) as u64,
        metric_code(acceptance.metric),
        acceptance.tolerance.to_bits(),
        pointer(2),
    ];
    let dims = LaunchDims {
        grid: [blocks, 1, 1],
        block: [64, 1, 1],
        dynamic_shared_bytes: 0,
    };
    let limits = Limits {
        block_step_budget: 100_000_000,
    };
    sim::run(program, &dims, &args, &memory, limits, 1).unwrap();
    let out = memory.contents(2);
    let word = |k: usize| u64::from_le_bytes(out[8 * k..8 * k + 8].try_into().unwrap());
    comparison_from(acceptance.metric, [word(0), word(1), word(2)])
}

fn same(a: &Comparison, b: &Comparison) -> bool {
    a.passed == b.passed
        && a.first_mismatch == b.first_mismatch
        && (a.error == b.error || (a.error.is_nan() && b.error.is_nan()))
}

#[test]
fn the_kernels_say_what_spec_compare_says_for_every_type_and_metric() {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    for (elem, program) in programs() {
        let (reference, actual) = buffers(elem, &mut rng);
        let float = matches!(elem, ElemType::F32 | ElemType::F64);
        for metric in [Metric::Exact, Metric::MaxAbs, Metric::MaxRel, Metric::Ulp] {
            let tolerances: &[f64] = match metric {
                Metric::Exact => &[0.0],
                Metric::MaxAbs if float => &[0.0, 1e-6, 1.0],
                Metric::MaxRel => &[0.0, 1e-7, 0.5],
                _ => &[0.0, 1.0, 2.0, 3.0],
            };
            for &tolerance in tolerances {
                let acceptance = Acceptance { metric, tolerance };
                let expected = crate::spec::compare(&acceptance, elem, &reference, &actual);
                // One block of 64 threads, and several: the grid-stride loop
                // and the atomics across blocks.
                for blocks in [1, 5] {
                    let got =
                        on_simulator(&program, &acceptance, elem, &reference, &actual, blocks);
                    assert!(
                        same(&got, &expected),
                        "{elem:?} {metric:?} tol {tolerance} on {blocks} block(s): kernel {got:?}, spec::compare {expected:?}"
                    );
                }
                // And the cases pass and fail alike: agreement on equal
                // buffers too.
                let equal = on_simulator(&program, &acceptance, elem, &reference, &reference, 3);
                let expected = crate::spec::compare(&acceptance, elem, &reference, &reference);
                assert!(same(&equal, &expected), "{elem:?} {metric:?}: {equal:?} {expected:?}");
            }
        }
    }
}

#[test]
fn the_module_compiles_to_ptx_with_a_kernel_per_element_type() {
    let names: Vec<String> = ElemType::ALL.into_iter().map(kernel_name).collect();
    let ir = KernelIr::parse_kernels("comparison kernels", module_ir().as_bytes(), &names).unwrap();
    let options = CodegenOptions {
        arch: "sm_90".into(),
        ..CodegenOptions::default()
    };
    let ptx = ir.compile(&ir.empty_patch(), &options).unwrap().ptx;
    for name in names {
        assert!(ptx.contains(&format!(".entry {name}(")), "{name} missing");
    }
}

#[test]
fn each_pair_of_special_values_alone_gets_spec_compares_verdict() {
    // One element each: a rule that the buffers' other elements would hide
    // (a maximum taken elsewhere, an earlier first failure) shows here.
    for (elem, program) in programs() {
        let specials = specials(elem);
        for metric in [Metric::Exact, Metric::MaxAbs, Metric::MaxRel, Metric::Ulp] {
            let tolerance = match metric {
                Metric::Exact => 0.0,
                Metric::MaxAbs => 1e-6,
                Metric::MaxRel => 1e-7,
                Metric::Ulp => 1.0,
            };
            let acceptance = Acceptance { metric, tolerance };
            for r in &specials {
                for a in &specials {
                    let expected = crate::spec::compare(&acceptance, elem, r, a);
                    let got = on_simulator(&program, &acceptance, elem, r, a, 1);
                    assert!(
                        same(&got, &expected),
                        "{elem:?} {metric:?} {r:?} against {a:?}: kernel {got:?}, spec::compare {expected:?}"
                    );
                }
            }
        }
    }
}
