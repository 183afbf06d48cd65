//! Mutated variants of every fixture through the evaluator: whatever the
//! edits do (endless loops, wild pointers, races), each test ends with a
//! verdict or a result, and the process never panics or hangs.

use crate::common;

use gevo_model::spec::{self, TestSet};
use gevo_search::eval::Evaluator;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;

const SEEDS: u64 = 60;

#[test]
fn mutants_end_with_a_verdict_or_a_result() {
    let mut total: BTreeMap<&'static str, u64> = BTreeMap::new();
    for name in common::KERNEL_FIXTURES {
        let spec = spec::load(&common::spec_fixture(name)).unwrap();
        let evaluator = Evaluator::new(spec, 2).unwrap();
        let mut tally: BTreeMap<&'static str, u64> = BTreeMap::new();
        for seed in 0..SEEDS {
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
            let edits = rng.gen_range(1..=6);
            let patch = evaluator.ir().mutate(&mut rng, edits).unwrap();
            let results = evaluator.evaluate(&patch, TestSet::Train).unwrap();
            assert_eq!(results.len(), evaluator.spec().train.len());
            // One verdict per variant: its first failing test's, or pass.
            let kind = results
                .iter()
                .find_map(|r| r.failure.as_ref().map(|f| f.kind()))
                .unwrap_or("pass");
            *tally.entry(kind).or_default() += 1;
        }
        println!("{name}: {tally:?}");
        for (k, v) in tally {
            *total.entry(k).or_default() += v;
        }
    }
    // The runs were real: some variants survive, and several kinds of fault appear.
    assert!(total.get("pass").copied().unwrap_or(0) > 0, "{total:?}");
    assert!(total.len() >= 3, "{total:?}");
}
