//! Barriers in guarded check builds (`ir::guard::barriers`,
//! `ir::guard::uniform`): which are checked for lanes that reach them
//! apart, against the planted fixtures and against the simulator's
//! verdicts on random variants. What the checks do on the GPU is the GPU
//! suite's guards section.

use crate::common;
use crate::guard_builds::{fixtures, load};

use gevo_model::assessment::Failure;
use gevo_model::sim::Fault;
use gevo_model::spec::TestSet;
use gevo_search::eval::Evaluator;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// The barriers of every fixture's original are reached together by the
/// lanes of a warp (`ir::guard::uniform`), so its guarded build checks none;
/// each planted variant that makes a barrier divergent keeps a check there,
/// once, on the poll's slow path (lanes together go on to the barrier with
/// one load of the live lanes), by its own assembly, which calls nothing (a
/// call site costs every check, BENCHMARKS.md). The GPU suite's guards
/// section runs these variants and sees each flagged.
#[test]
fn only_barriers_not_proven_together_are_checked() {
    let options = common::codegen_options();
    for (name, ir) in fixtures() {
        let ptx = ir.compile_guarded(&ir.empty_patch(), &options).unwrap().ptx;
        assert!(!ptx.contains("GEVO_POLL:"), "{name}: a barrier checked");
    }
    let kernels = common::repo_root().join("tests/fixtures/kernels");
    for planted in [
        "reduce.divergent-barrier",
        "reduce.barrier-copied",
        "reduce.lane-loops-alone",
        "reduce.lanes-leave-loop",
        "stencil.barrier-moved",
    ] {
        let fixture = planted.split('.').next().unwrap();
        let (_, ir) = load(fixture, &common::spec_fixture(fixture));
        let text = std::fs::read_to_string(kernels.join(format!("{planted}.patch.json"))).unwrap();
        let patch = gevo_ir::Patch::from_json(&text).unwrap();
        let guarded = ir.compile_guarded(&patch, &options).unwrap().ptx;
        let checks = guarded.matches("GEVO_POLL:").count();
        assert!(checks > 0, "{planted}: no barrier checked");
        assert_eq!(guarded.matches("GEVO_APART:").count(), checks, "{planted}");
        assert!(!guarded.contains("__gevo_barrier_check"), "{planted}");
        for check in guarded.split("GEVO_POLL:").skip(1) {
            let upto_barrier = check.split("barrier.sync").next().unwrap();
            let (fast, _) = upto_barrier.split_once("GEVO_TOGETHER").unwrap();
            assert_eq!(
                fast.matches("ld.volatile.shared.u32").count(),
                1,
                "{planted}"
            );
        }
        println!("{planted}: {checks} barrier checked");
    }
}

/// Random variants of the kernels with barriers, judged by the simulator
/// on their train tests: every variant where lanes of one warp wait at
/// different barriers (the simulator's `divergent_barrier` naming another
/// barrier and a thread of the same warp) has a checked barrier in its
/// guarded build; the divergence analysis never proves such a variant's
/// barriers reached together. The planted variants are among them, so the
/// property is exercised whatever the random ones find.
#[test]
fn no_variant_the_simulator_sees_diverge_within_a_warp_is_proven_together() {
    let options = common::codegen_options();
    let kernels = common::repo_root().join("tests/fixtures/kernels");
    let mut diverging = 0;
    for (fixture, planted) in [
        (
            "reduce",
            &["divergent-barrier", "barrier-copied", "lane-loops-alone"][..],
        ),
        ("stencil", &["barrier-moved"][..]),
    ] {
        let spec = gevo_model::spec::load(&common::spec_fixture(fixture)).unwrap();
        let block = spec
            .instantiate(spec.tests(TestSet::Train)[0])
            .unwrap()
            .launches[0]
            .block;
        let evaluator = Evaluator::new(spec, 2).unwrap();
        let (_, ir) = load(fixture, &common::spec_fixture(fixture));
        let mut patches: Vec<gevo_ir::Patch> = planted
            .iter()
            .map(|p| {
                let path = kernels.join(format!("{fixture}.{p}.patch.json"));
                gevo_ir::Patch::from_json(&std::fs::read_to_string(path).unwrap()).unwrap()
            })
            .collect();
        let mut rng = ChaCha8Rng::seed_from_u64(37);
        patches.extend((0..600).map(|i| ir.mutate(&mut rng, 1 + i % 3).unwrap()));
        let warp = |t: [u32; 3]| (t[0] + block[0] * (t[1] + block[1] * t[2])) / 32;
        for patch in &patches {
            let Ok(results) = evaluator.evaluate(patch, TestSet::Train) else {
                continue;
            };
            let within_warp = results.iter().any(|r| match &r.failure {
                Some(Failure::Verdict(v)) => matches!(
                    v.fault,
                    Fault::DivergentBarrier { other_thread, other_barrier: Some(_) }
                        if warp(other_thread) == warp(v.thread)
                ),
                _ => false,
            });
            if !within_warp {
                continue;
            }
            diverging += 1;
            let Ok(guarded) = ir.compile_guarded(patch, &options) else {
                continue;
            };
            assert!(
                guarded.ptx.contains("GEVO_POLL:"),
                "{fixture}: no barrier checked in {}",
                patch.to_json()
            );
        }
    }
    println!("{diverging} variants diverging within a warp, each with a checked barrier");
    assert!(diverging >= 3, "the planted variants diverge within a warp");
}
