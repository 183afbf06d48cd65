//! `[tests]`' generation keys (`fixed`, `allowed`, `generate`), the
//! candidates `spec::generate` derives, and its lint lines.

use super::*;
use crate::spec::generate::{candidates, lints};

/// A spec of one `n`-sized buffer and scalars `a` and `b`, with `tests`
/// (the `[tests]` table's body).
fn spec_tests(dir: &std::path::Path, tests: &str) -> Result<Spec, SpecError> {
    let text = format!(
        "version = 1\nir = \"k.ll\"\nkernel = \"k\"\n[launch]\ngrid = [\"cdiv(n, 64)\"]\nblock = [64]\n{OUT}\
         [[args]]\nname = \"a\"\nkind = \"scalar\"\ntype = \"f32\"\nvalue = \"a\"\n\
         [[args]]\nname = \"b\"\nkind = \"scalar\"\ntype = \"f32\"\nvalue = \"b\"\n\
         [tests]\n{tests}\n[acceptance]\nmetric = \"max_abs\"\ntolerance = 0.001\n"
    );
    parse(&dir.join("k.gevo.toml"), &text)
}

const SQUARE: &str = "train = [{ n = 128, a = 2.5, b = 2.5, seed = 1 }]\nheldout = [{ n = 256, a = 3.0, b = 3.0, seed = 2 }]\n";

fn whys(spec: &Spec) -> Vec<String> {
    candidates(spec).into_iter().map(|c| c.why).collect()
}

#[test]
fn candidates_cover_partial_blocks_unequal_scalars_and_another_seed() {
    let dir = ir_dir();
    let spec = spec_tests(dir.path(), SQUARE).unwrap();
    let expect = [
        "a != b (a = 2.5, b = 3.125)",
        "n = 7: one partial block",
        "n = 1: one element",
        "n = 64: exactly one block",
        "n = 65: one block + 1",
        "n = 127: two blocks - 1",
        // "n = 128: two blocks" is train[0] itself: not repeated.
        "n = 13: a small prime",
        "n = 135: the largest train size + 7",
        "a = 1.25 (varied)",
        "b = 1.25 (varied)",
        "another seed than train[0]'s",
    ];
    assert_eq!(whys(&spec), expect);
    let c = candidates(&spec);
    let seeds: std::collections::BTreeSet<u64> = c.iter().map(|c| c.test.seed).collect();
    assert_eq!(seeds.len(), c.len(), "every candidate has its own seed");
    assert!(c
        .iter()
        .all(|c| c.test.seed > 1000 && c.test.name.starts_with("generated[")));
    assert_eq!(
        lints(&spec),
        [
            "no test has a partial block (n below or off a multiple of the block): add one, or mark them fixed ([tests] fixed = [...])",
            "a and b are equal in every test: add a test where they differ, or mark one fixed ([tests] fixed = [\"b\"])",
        ]
    );
}

/// Two sizes: after every size at once, each alone (the other at the
/// user's value), and each candidate names what it changed.
#[test]
fn two_sizes_are_varied_together_then_one_at_a_time() {
    let dir = ir_dir();
    let text = "version = 1\nir = \"k.ll\"\nkernel = \"k\"\n[launch]\ngrid = [\"cdiv(nx, 16)\", \"cdiv(ny, 16)\"]\nblock = [16, 16]\n\
        [[args]]\nname = \"out\"\nkind = \"buffer\"\ntype = \"f32\"\nlen = \"nx * ny\"\nrole = \"out\"\n\
        [tests]\ntrain = [{ nx = 64, ny = 32, seed = 1 }]\nheldout = [{ nx = 128, ny = 64, seed = 2 }]\n\
        [acceptance]\nmetric = \"max_abs\"\ntolerance = 0.001\n";
    let spec = parse(&dir.path().join("k.gevo.toml"), text).unwrap();
    let c = candidates(&spec);
    let got: Vec<(&str, Vec<&str>)> = c
        .iter()
        .map(|c| {
            (
                c.why.as_str(),
                c.changed.iter().map(String::as_str).collect(),
            )
        })
        .collect();
    let expect: [(&str, &[&str]); 5] = [
        ("nx = 7, ny = 7: one partial block", &["nx", "ny"]),
        ("nx = 7 alone: one partial block", &["nx"]),
        ("nx = 17 alone: one block + 1", &["nx"]),
        ("ny = 7 alone: one partial block", &["ny"]),
        ("ny = 17 alone: one block + 1", &["ny"]),
    ];
    for (why, changed) in expect {
        assert!(
            got.iter().any(|(w, c)| *w == why && c == changed),
            "`{why}` changing {changed:?} missing from {got:?}"
        );
    }
    let at = |why: &str| got.iter().position(|(w, _)| *w == why).unwrap();
    assert!(at("nx = 13, ny = 13: a small prime") < at("nx = 7 alone: one partial block"));
    assert!(
        c.last().unwrap().changed.is_empty(),
        "another seed changes no parameter"
    );
}

/// Each case: the generation keys, and what must (not) be among the
/// candidates.
#[test]
fn fixed_allowed_and_generate_are_honoured() {
    let dir = ir_dir();
    let cases: [(&str, &[&str], &[&str]); 4] = [
        // n fixed: no size candidates, no partial-block lint.
        (
            "fixed = [\"n\"]",
            &["a != b (a = 2.5, b = 3.125)"],
            &["n = 7: one partial block"],
        ),
        // b fixed: a and b are not made unequal, nor b varied.
        (
            "fixed = [\"b\"]",
            &["n = 7: one partial block"],
            &["a != b (a = 2.5, b = 3.125)", "b = 1.25 (varied)"],
        ),
        // n limited to listed values: only those, and the allowed one the users lack.
        (
            "allowed = { n = [64, 128, 256, 512] }",
            &["n = 64: exactly one block", "n = 512 (allowed)"],
            &["n = 7: one partial block", "n = 65: one block + 1"],
        ),
        ("generate = 0", &[], &["another seed than train[0]'s"]),
    ];
    for (keys, present, absent) in cases {
        let spec = spec_tests(dir.path(), &format!("{keys}\n{SQUARE}")).unwrap();
        let got = whys(&spec);
        for p in present {
            assert!(
                got.iter().any(|w| w == p),
                "{keys}: `{p}` missing from {got:?}"
            );
        }
        for a in absent {
            assert!(!got.iter().any(|w| w == a), "{keys}: `{a}` in {got:?}");
        }
        for c in candidates(&spec) {
            for (k, v) in &c.test.params {
                if spec.generation().fixed.contains(k) {
                    assert!(spec
                        .train
                        .iter()
                        .chain(&spec.heldout)
                        .any(|t| t.params[k] == *v));
                }
            }
        }
    }
    let fixed_n = spec_tests(dir.path(), &format!("fixed = [\"n\"]\n{SQUARE}")).unwrap();
    assert!(lints(&fixed_n).iter().all(|l| !l.contains("partial block")));
}

#[test]
fn generation_keys_refuse_what_they_do_not_know() {
    let dir = ir_dir();
    let cases = [
        (
            "fixed = [\"m\"]",
            "tests.fixed[0]: unknown parameter `m` (parameters: a, b, n)",
        ),
        (
            "fixed = \"n\"",
            "tests.fixed: expected an array of parameter names",
        ),
        (
            "allowed = { n = [] }",
            "tests.allowed.n: empty; expected a non-empty array of numbers",
        ),
        ("allowed = { n = [\"x\"] }", "tests.allowed.n[0]: expected"),
        ("generate = -1", "tests.generate: expected 0..=64"),
        ("generate = 65", "tests.generate: expected 0..=64"),
    ];
    for (keys, expect) in cases {
        let e = spec_tests(dir.path(), &format!("{keys}\n{SQUARE}")).unwrap_err();
        assert!(e.to_string().contains(expect), "{keys}: {e}");
    }
}

/// A test's sizes in words name the parameters that size a buffer or a
/// grid, not the scalars; where none of its parameters does, all of them.
#[test]
fn a_tests_sizes_name_the_parameters_that_size_something() {
    let dir = ir_dir();
    let spec = spec_tests(dir.path(), SQUARE).unwrap();
    let heldout = &spec.heldout[0];
    assert_eq!(
        crate::spec::generate::sizes(&spec, &heldout.params),
        "n = 256"
    );
    let scalars_only: std::collections::BTreeMap<String, f64> =
        [("a".to_string(), 3.0), ("b".to_string(), 0.5)].into();
    assert_eq!(
        crate::spec::generate::sizes(&spec, &scalars_only),
        "a = 3, b = 0.5"
    );
}
