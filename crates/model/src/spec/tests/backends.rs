//! Per-backend test sets: `[tests.sim]` and `[tests.gpu]` replace `[tests]`'
//! train or heldout set for one backend ([`Spec::for_backend`]).

use super::*;

/// A one-buffer spec (`len = "n"`) whose `[tests]` table is `tests`.
fn with_tests(dir: &std::path::Path, tests: &str) -> Result<Spec, SpecError> {
    let text = format!(
        "version = 1\nir = \"k.ll\"\nkernel = \"k\"\n[launch]\ngrid = [\"cdiv(n, 64)\"]\nblock = [64]\n\
         {OUT}\n{tests}\n[acceptance]\nmetric = \"max_abs\"\ntolerance = 0.001\n"
    );
    parse(&dir.join("k.gevo.toml"), &text)
}

const BASE: &str = "[tests]\ntrain = [{ n = 100, seed = 1 }]\nheldout = [{ n = 300, seed = 2 }]\n";

/// `name:n` per test of a set, e.g. `train[0]:100`.
fn sizes(spec: &Spec, set: TestSet) -> Vec<String> {
    spec.tests(set)
        .iter()
        .map(|t| format!("{}:{}", t.name, t.params["n"]))
        .collect()
}

#[test]
fn each_backend_gets_its_sets_and_the_others_from_tests() {
    let dir = ir_dir();
    let tests = format!(
        "{BASE}[tests.sim]\ntrain = [{{ n = 10, seed = 3 }}, {{ n = 20, seed = 4 }}]\n\
         [tests.gpu]\nheldout = [{{ n = 100000, seed = 5 }}, {{ n = 300001, seed = 6 }}]\n"
    );
    let spec = with_tests(dir.path(), &tests).unwrap();
    // As loaded: `[tests]`'s sets.
    assert_eq!(
        sizes(&spec, TestSet::All),
        ["train[0]:100", "heldout[0]:300"]
    );
    let sim = spec.for_backend(TestTarget::Sim);
    assert_eq!(
        sizes(&sim, TestSet::All),
        ["train[0]:10", "train[1]:20", "heldout[0]:300"]
    );
    let gpu = spec.for_backend(TestTarget::Gpu);
    assert_eq!(
        sizes(&gpu, TestSet::All),
        ["train[0]:100", "heldout[0]:100000", "heldout[1]:300001"]
    );
    // Chosen from the file's sets, whatever was chosen before.
    assert_eq!(sim.for_backend(TestTarget::Gpu).heldout, gpu.heldout);
    assert_eq!(gpu.for_backend(TestTarget::Sim).train, sim.train);
    // Each test instantiates (sizes from its own parameters).
    let inst = gpu.instantiate(gpu.tests(TestSet::Heldout)[1]).unwrap();
    assert_eq!(inst.launches[0].grid, [4688, 1, 1]);
}

#[test]
fn test_set_hashes_follow_the_backend_sets() {
    let dir = ir_dir();
    let tests = format!("{BASE}[tests.gpu]\nheldout = [{{ n = 100000, seed = 5 }}]\n");
    let spec = with_tests(dir.path(), &tests).unwrap();
    let plain = with_tests(dir.path(), BASE).unwrap();
    let (sim, gpu) = (
        spec.for_backend(TestTarget::Sim),
        spec.for_backend(TestTarget::Gpu),
    );
    for set in [TestSet::Heldout, TestSet::All] {
        assert_ne!(sim.test_set_hash(set), gpu.test_set_hash(set), "{set:?}");
    }
    assert_eq!(
        sim.test_set_hash(TestSet::Train),
        gpu.test_set_hash(TestSet::Train)
    );
    // A sub-table changes nothing for the other backend, nor without one.
    assert_eq!(
        sim.test_set_hash(TestSet::All),
        plain.test_set_hash(TestSet::All)
    );
    for target in TestTarget::ALL {
        let p = plain.for_backend(target);
        assert_eq!(
            p.test_set_hash(TestSet::All),
            plain.test_set_hash(TestSet::All)
        );
    }
}

#[test]
fn sub_tables_in_other_spellings_are_the_same_sets() {
    let dir = ir_dir();
    let inline = format!("{BASE}gpu = {{ heldout = [{{ n = 7, seed = 5 }}] }}\n");
    let dotted = format!("{BASE}gpu.heldout = [{{ n = 7, seed = 5 }}]\n");
    let arrays = format!("{BASE}[[tests.gpu.heldout]]\nn = 7\nseed = 5\n");
    for text in [inline, dotted, arrays] {
        let spec = with_tests(dir.path(), &text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let gpu = spec.for_backend(TestTarget::Gpu);
        assert_eq!(sizes(&gpu, TestSet::Heldout), ["heldout[0]:7"], "{text}");
    }
}

/// Bad sub-tables: each is refused naming its field, with the message.
#[test]
fn bad_sub_tables_are_refused_naming_the_field() {
    let dir = ir_dir();
    let check = |extra: &str, field: &str, message: &str| {
        let e = with_tests(dir.path(), &format!("{BASE}{extra}")).unwrap_err();
        assert_eq!(e.field, field, "{e}");
        assert!(e.to_string().contains(message), "{e}");
        assert!(e.line.is_some(), "{e}");
    };
    check(
        "[tests.gpu]\nheldout = [{ n = 1, seed = 1 }]\nrepeats = 3\n",
        "tests.gpu.repeats",
        "unknown key `repeats`; expected one of train, heldout",
    );
    check(
        "[tests.cuda]\ntrain = [{ n = 1, seed = 1 }]\n",
        "tests.cuda",
        "expected one of train, heldout, sim, gpu",
    );
    check("sim = 3\n", "tests.sim", "expected a table, found");
    check(
        "[tests.sim]\n",
        "tests.sim",
        "empty; expected train and/or heldout",
    );
    check(
        "[tests.sim]\ntrain = []\n",
        "tests.sim.train",
        "empty; expected a non-empty array",
    );
    check(
        "[tests.gpu]\ntrain = [{ n = 1, seed = -4 }]\n",
        "tests.gpu.train[0].seed",
        "expected a non-negative integer, found -4",
    );
    check(
        "[tests.gpu]\nheldout = [{ n = \"big\", seed = 4 }]\n",
        "tests.gpu.heldout[0].n",
        "expected a number, found",
    );
    // Per-test checks run for the backend sets too, naming the test.
    check(
        "[tests.gpu]\nheldout = [{ n = 1, seed = 1 }, { m = 1, seed = 2 }]\n",
        "launch.grid[0]",
        "unknown parameter `n` (parameters: m) in test tests.gpu.heldout[1]",
    );
    check(
        "[tests.sim]\ntrain = [{ n = 0, seed = 1 }]\n",
        "launch.grid[0]",
        "in test tests.sim.train[0]",
    );
}
