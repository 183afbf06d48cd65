//! Accesses proven inside their variable (`ir::guard::in_bounds`): in each
//! kernel of tests/fixtures/guard/in_bounds.ll, named `checks_<N>_<case>`,
//! the guarded build with blocks of at most 8 x 4 x 1 makes N checks, and
//! one per access with no bounds; on the fixtures, with their specs'
//! bounds, what it spares.

use crate::common;
use crate::guard_text::{check_cases, checks_and_guarded, guarded_access_count, guarded_function};
use gevo_ir::{BlockBounds, KernelIr};

/// The checks the guarded build of `ir` makes in the function `name`.
fn checks_in(ir: &KernelIr, name: &str) -> usize {
    checks_and_guarded(&guarded_function(ir, name)).0
}

#[test]
fn accesses_that_thread_indices_keep_inside_their_variable_are_not_checked() {
    let path = common::repo_root().join("tests/fixtures/guard/in_bounds.ll");
    let bounds: Option<BlockBounds> = Some([8, 4, 1]);
    let mut cases = 0;
    for (name, expected) in check_cases(&path) {
        let ir = KernelIr::load_kernels(&path, std::slice::from_ref(&name)).unwrap();
        let accesses = guarded_access_count(&ir);
        assert_eq!(checks_in(&ir, &name), accesses, "{name}: no bounds");
        let bounded = ir.with_block_bounds(vec![bounds]);
        let checks = checks_in(&bounded, &name);
        assert_eq!(checks, expected, "{name}: checks for {accesses} accesses");
        cases += 1;
    }
    assert_eq!(cases, 13);
}

/// With their specs' block bounds, lu's and the stencil's shared tiles,
/// indexed by thread indices, go unchecked: more than half their checks.
#[test]
fn the_fixtures_tiles_go_unchecked_within_their_specs_blocks() {
    for (name, spec) in [
        ("stencil", common::spec_fixture("stencil")),
        ("lu", common::pipeline_fixture("lu")),
        ("pyramid", common::pipeline_fixture("pyramid")),
    ] {
        let spec = gevo_model::spec::load(&spec).unwrap();
        let ir = KernelIr::load_kernels(&spec.ir, &spec.kernels).unwrap();
        let count = |ir: &KernelIr| {
            let (text, _) = ir
                .guarded_ir(&ir.empty_patch(), &common::codegen_options())
                .unwrap();
            checks_and_guarded(&text).0
        };
        let unbounded = count(&ir);
        let bounded = count(&ir.with_block_bounds(spec.block_bounds()));
        println!("{name}: {unbounded} checks without block bounds, {bounded} with");
        assert!(bounded < unbounded, "{name}: {bounded} of {unbounded}");
        if name != "pyramid" {
            assert!(2 * bounded < unbounded, "{name}: {bounded} of {unbounded}");
        }
    }
}
