//! Generality in selection (docs/evolve.md, "Generality in selection"): on
//! a fixture whose train tests are whole blocks only, a search that checks
//! the generated held-out tests in selection ends with no variant in its
//! Pareto front that fails one; the same search without the check keeps
//! such variants there (so the fixture does exercise the rule).

use crate::common;

use gevo_ir::KernelIr;
use gevo_model::spec::{self, TestSet, TestTarget};
use gevo_search::eval::Evaluator;
use gevo_search::evolve::{Config, Engine};
use gevod::worker::InProcess;

const GENERATIONS: u64 = 8;

/// The Pareto front's members that fail a generated test, after a search
/// of tailsum (every train test a whole number of blocks), and how many
/// variants selection rejected for a generated test.
fn front_failures(generality_in_selection: bool) -> (usize, usize, u64) {
    let path = common::repo_root().join("tests/fixtures/general/tailsum.gevo.toml");
    let spec = spec::load(&path).unwrap();
    let ir = KernelIr::load(&spec.ir, Some(&spec.kernel)).unwrap();
    let mut backend = InProcess::new(spec.clone(), common::codegen_options()).unwrap();
    let config = Config {
        population: 32,
        promotions_per_generation: 0,
        generality_in_selection,
        ..Config::default()
    };
    let mut engine = Engine::new(config, 5).unwrap();
    common::search::run(&mut engine, &ir, &mut backend, GENERATIONS);
    let judge = Evaluator::new(spec.for_backend(TestTarget::Sim), 2).unwrap();
    let failing = engine
        .archive()
        .iter()
        .filter(|m| {
            let results = judge.evaluate(&m.patch, TestSet::Generated).unwrap();
            results.iter().any(|r| !r.passed())
        })
        .count();
    let rejected = engine.counters().rejections.get("generated").copied();
    (engine.archive().len(), failing, rejected.unwrap_or(0))
}

#[test]
fn the_pareto_front_holds_no_variant_that_fails_a_generated_test() {
    let (front, failing, rejected) = front_failures(false);
    assert!(
        front > 0 && failing > 0,
        "without the check the front carries variants right only at whole blocks ({failing} of {front})"
    );
    assert_eq!(rejected, 0);

    let (front, failing, rejected) = front_failures(true);
    assert!(front > 0);
    assert_eq!(
        failing, 0,
        "{failing} of {front} front members fail a generated test"
    );
    assert!(rejected > 0, "selection rejected none for a generated test");
}
