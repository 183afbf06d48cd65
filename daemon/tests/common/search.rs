//! The search engine through the library, on the in-process simulator
//! backend: shared by the evolve tests.

use gevo_ir::KernelIr;
use gevo_model::spec;
use gevo_search::evolve::{Backend, Config, Engine, GenerationReport};
use gevod::worker::InProcess;

/// A kernel fixture's IR, and an in-process simulator backend for its spec.
pub fn backend(name: &str) -> (KernelIr, InProcess) {
    let spec = spec::load(&super::spec_fixture(name)).unwrap();
    let ir = KernelIr::load(&spec.ir, Some(&spec.kernel)).unwrap();
    let backend = InProcess::new(spec, super::codegen_options()).unwrap();
    (ir, backend)
}

/// `generations` steps of `engine`, and their reports.
pub fn run(
    engine: &mut Engine,
    ir: &KernelIr,
    backend: &mut dyn Backend,
    generations: u64,
) -> Vec<GenerationReport> {
    (0..generations)
        .map(|_| engine.step(ir, backend).unwrap())
        .collect()
}

/// Searches fixture `name` with `config` and `seed` for 6 generations
/// straight, and again for 3, through a serialized checkpoint, then 3 more
/// on a new backend (nothing may carry over but the checkpoint); asserts
/// that both end equal. Returns the straight search and its reports.
pub fn assert_resume_is_exact(
    name: &str,
    config: Config,
    seed: u64,
) -> (Engine, Vec<GenerationReport>) {
    let (ir, mut b) = backend(name);
    let mut straight = Engine::new(config.clone(), seed).unwrap();
    let reports = run(&mut straight, &ir, &mut b, 6);

    let mut first = Engine::new(config, seed).unwrap();
    run(&mut first, &ir, &mut b, 3);
    let checkpoint = serde_json::to_vec(&first).unwrap();
    drop(first);
    let (ir2, mut b2) = backend(name);
    let mut resumed: Engine = serde_json::from_slice(&checkpoint).unwrap();
    run(&mut resumed, &ir2, &mut b2, 3);

    assert_eq!(resumed.generations(), 6);
    assert_eq!(
        resumed, straight,
        "3 + checkpoint + 3 generations differ from 6"
    );
    (straight, reports)
}
