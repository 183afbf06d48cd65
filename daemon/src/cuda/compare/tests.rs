//! The comparison kernels run on the simulator (no GPU needed) must say
//! what `spec::compare` says, for every element type and metric, on buffers
//! full of the cases its rules single out.

use super::cases::{buffers, specials, tolerances};
use super::*;
use gevo_model::sim::{self, GlobalMemory, LaunchDims, Limits};
use rand::SeedableRng;

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
            for &tolerance in tolerances(metric, float) {
                let acceptance = Acceptance { metric, tolerance };
                let expected = gevo_model::spec::compare(&acceptance, elem, &reference, &actual);
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
                let expected = gevo_model::spec::compare(&acceptance, elem, &reference, &reference);
                assert!(
                    same(&equal, &expected),
                    "{elem:?} {metric:?}: {equal:?} {expected:?}"
                );
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
            // The first tolerance above none (exact has only none).
            let tolerance = tolerances(metric, true).get(1).copied().unwrap_or(0.0);
            let acceptance = Acceptance { metric, tolerance };
            for r in &specials {
                for a in &specials {
                    let expected = gevo_model::spec::compare(&acceptance, elem, r, a);
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
