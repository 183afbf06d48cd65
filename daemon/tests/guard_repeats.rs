//! Checks not repeated (`ir::guard::repeated`): in each kernel of
//! tests/fixtures/guard/repeated.ll, named `checks_<N>_<case>`, every
//! access goes through a guarded pointer, and the guarded build makes N
//! checks; on the fixtures, what it spares.

use crate::common;
use crate::guard_builds::fixtures;
use crate::guard_text::{check_cases, checks_and_guarded, guarded_access_count, guarded_function};

/// The kernel `name`'s guarded IR: (checks made, accesses through a
/// guarded pointer, accesses).
fn checks_of(path: &std::path::Path, name: &str) -> (usize, usize, usize) {
    let ir = gevo_ir::KernelIr::load_kernels(path, &[name.to_string()]).unwrap();
    let (checks, guarded) = checks_and_guarded(&guarded_function(&ir, name));
    (checks, guarded, guarded_access_count(&ir))
}

#[test]
fn an_access_checked_as_strictly_on_every_path_before_is_not_checked_again() {
    let path = common::repo_root().join("tests/fixtures/guard/repeated.ll");
    let mut cases = 0;
    for (name, expected) in check_cases(&path) {
        let (checks, guarded, accesses) = checks_of(&path, &name);
        assert_eq!(guarded, accesses, "{name}: every access is guarded");
        assert_eq!(checks, expected, "{name}: checks for {accesses} accesses");
        cases += 1;
    }
    assert_eq!(cases, 9);
}

/// Read-modify-write code repeats pointers: lu's unrolled kernels most.
#[test]
fn the_fixtures_repeated_pointers_are_checked_once() {
    for (name, ir) in fixtures() {
        let (text, _) = ir
            .guarded_ir(&ir.empty_patch(), &common::codegen_options())
            .unwrap();
        let (checks, guarded) = checks_and_guarded(&text);
        println!("{name}: {checks} checks for {guarded} accesses");
        if name == "lu" {
            assert!(3 * checks < 2 * guarded, "{name}: {checks} of {guarded}");
        }
        if name == "nw" {
            assert_eq!(checks, guarded, "{name}: no pointer repeats");
        }
    }
}
