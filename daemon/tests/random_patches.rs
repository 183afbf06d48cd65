//! For every fixture, many seeds of random patches (1 to 20 edits): each
//! applies to verified IR or is rejected with a typed error, the process never
//! aborts, and every verified variant emits PTX.
//!
//! Two kinds of patch per seed: one from the mutation generator (which must
//! always verify and compile) and one of raw random edits naming arbitrary ids
//! and repairs (most are rejected; none may crash).

use crate::common;

use gevo_ir::{ConstKind, Edit, EditKind, InstId, IrError, KernelIr, Patch, Repair, ValueRef};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Seeds per fixture; `GEVO_FUZZ_SEEDS` overrides for a longer local run.
/// 500 keeps this test under a minute on CI's two cores (2,000 took three
/// and a half, most of the suite's longest test); run 2,000 or more before
/// changing the edit engine.
fn seeds() -> u64 {
    std::env::var("GEVO_FUZZ_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(500)
}

fn random_value(rng: &mut ChaCha8Rng, ids: u32) -> ValueRef {
    match rng.gen_range(0..4) {
        0 => ValueRef::Arg(rng.gen_range(0..6)),
        1 => ValueRef::Const(ConstKind::Zero),
        2 => ValueRef::Const(ConstKind::One),
        _ => ValueRef::Inst(InstId(rng.gen_range(0..ids))),
    }
}

/// Edits that name random (possibly absent, pinned or ill-typed) instructions.
fn raw_patch(ir: &KernelIr, rng: &mut ChaCha8Rng) -> Patch {
    let n = ir.instruction_count() + 4;
    let mut patch = ir.empty_patch();
    let mut fresh = ir.instruction_count();
    for _ in 0..rng.gen_range(1..=20) {
        let id = |rng: &mut ChaCha8Rng| InstId(rng.gen_range(0..n));
        let kind = match rng.gen_range(0..6) {
            0 => {
                fresh += 1;
                EditKind::Copy {
                    src: id(rng),
                    before: id(rng),
                    clone: InstId(fresh),
                }
            }
            1 => EditKind::Delete { target: id(rng) },
            2 => EditKind::Move {
                src: id(rng),
                before: id(rng),
            },
            3 => {
                fresh += 1;
                EditKind::Replace {
                    target: id(rng),
                    with: id(rng),
                    clone: InstId(fresh),
                }
            }
            4 => EditKind::Swap {
                a: id(rng),
                b: id(rng),
            },
            _ => EditKind::OperandReplace {
                user: id(rng),
                operand: rng.gen_range(0..4),
                value: random_value(rng, n),
            },
        };
        let repair_count = if rng.gen_bool(0.5) {
            0
        } else {
            rng.gen_range(1..3)
        };
        let repairs = (0..repair_count)
            .map(|_| Repair {
                user: id(rng),
                operand: rng.gen_range(0..3),
                value: random_value(rng, n),
            })
            .collect();
        patch.edits.push(Edit { kind, repairs });
    }
    patch
}

struct Tally {
    generated: u64,
    raw_verified: u64,
    raw_rejected: u64,
}

fn fuzz_fixture(name: &str, seed_range: std::ops::Range<u64>) -> Tally {
    let ir = common::load(name);
    let options = common::codegen_options();
    let mut tally = Tally {
        generated: 0,
        raw_verified: 0,
        raw_rejected: 0,
    };
    for seed in seed_range {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let edits = rng.gen_range(1..=20);
        match ir.mutate(&mut rng, edits) {
            Ok(patch) => {
                assert_eq!(patch.edits.len(), edits);
                if let Err(e) = ir.compile(&patch, &options) {
                    panic!(
                        "{name} seed {seed}: generated patch does not compile: {e}\n{}",
                        patch.to_json()
                    );
                }
                tally.generated += 1;
            }
            Err(IrError::MutationExhausted { .. }) => {}
            Err(e) => panic!("{name} seed {seed}: mutation failed unexpectedly: {e}"),
        }

        let raw = raw_patch(&ir, &mut rng);
        match ir.compile(&raw, &options) {
            Ok(compiled) => {
                assert!(
                    compiled.ptx.contains(".entry"),
                    "{name} seed {seed}: PTX without an entry"
                );
                tally.raw_verified += 1;
            }
            Err(IrError::InvalidEdit { .. } | IrError::Verify { .. }) => tally.raw_rejected += 1,
            Err(e) => panic!("{name} seed {seed}: raw patch failed with an unexpected error: {e}"),
        }
    }
    tally
}

#[test]
fn random_patches_verify_or_are_rejected() {
    let seeds = seeds();
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get()) as u64;
    for name in common::KERNEL_FIXTURES {
        let tallies: Vec<Tally> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let range = (seeds * t / threads)..(seeds * (t + 1) / threads);
                    s.spawn(move || fuzz_fixture(name, range))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("fuzz thread"))
                .collect()
        });
        let generated: u64 = tallies.iter().map(|t| t.generated).sum();
        let raw_verified: u64 = tallies.iter().map(|t| t.raw_verified).sum();
        let raw_rejected: u64 = tallies.iter().map(|t| t.raw_rejected).sum();
        println!("{name}: {generated}/{seeds} generated patches compiled; raw: {raw_verified} verified, {raw_rejected} rejected");
        assert_eq!(raw_verified + raw_rejected, seeds);
        // The generator gives up only when a kernel offers almost no valid edit.
        assert!(
            generated * 100 >= seeds * 95,
            "{name}: only {generated} of {seeds} seeds gave a patch"
        );
    }
}
