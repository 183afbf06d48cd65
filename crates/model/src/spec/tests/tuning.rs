//! `[tune]`: configurations, the chosen one's IR and constants, and every
//! error a table can have, one line each.

use super::*;
use std::path::Path;

/// A spec whose launch uses the constant `B`, with `tune` as its `[tune]`
/// tables; `k.ll` and `t/k.8.ll`, `t/k.32.ll` exist.
fn tuned(dir: &Path, tune: &str) -> Result<Spec, SpecError> {
    std::fs::create_dir_all(dir.join("t")).unwrap();
    for b in [8, 32] {
        std::fs::write(dir.join(format!("t/k.{b}.ll")), "; empty\n").unwrap();
    }
    let text = format!(
        "version = 1\nir = \"k.ll\"\nkernel = \"k\"\n[launch]\ngrid = [\"cdiv(n, B)\"]\nblock = [\"B\"]\n{OUT}\
         [tests]\ntrain = [{{ n = 100, seed = 1 }}]\nheldout = [{{ n = 300, seed = 2 }}]\n\
         [acceptance]\nmetric = \"max_abs\"\ntolerance = 0.001\n{tune}"
    );
    parse(&dir.join("k.gevo.toml"), &text)
}

const TUNE: &str = "[tune]\nir = \"t/k.{B}.ll\"\nB = [8, 16, 32]\n[tune.source]\nB = 16\n";

#[test]
fn a_tuned_spec_runs_the_source_configuration_until_one_is_chosen() {
    let dir = ir_dir();
    let spec = tuned(dir.path(), TUNE).unwrap();
    let tune = spec.tune.as_ref().unwrap();
    assert_eq!(spec.ir, dir.path().join("k.ll"));
    assert_eq!(spec.train[0].params, params(&[("n", 100.0), ("B", 16.0)]));
    let inst = spec.instantiate(&spec.train[0]).unwrap();
    assert_eq!(inst.launches[0].block, [16, 1, 1]);
    assert_eq!(inst.launches[0].grid, [7, 1, 1]);
    let configs: Vec<String> = tune.configurations().iter().map(tune::describe).collect();
    assert_eq!(configs, ["B=8", "B=16", "B=32"]);

    let mut b32 = tune::Configuration::new();
    b32.insert("B".into(), 32);
    let text = spec.configured_text(&b32).unwrap();
    let chosen = parse(&dir.path().join("k.gevo.toml"), &text).unwrap();
    assert_eq!(chosen.ir, dir.path().join("t/k.32.ll"));
    let inst = chosen.instantiate(&chosen.heldout[0]).unwrap();
    assert_eq!(inst.launches[0].block, [32, 1, 1]);
    assert_eq!(inst.launches[0].grid, [10, 1, 1]);
    assert_ne!(chosen.content_hash(), spec.content_hash());
    assert_ne!(
        chosen.test_set_hash(TestSet::Train),
        spec.test_set_hash(TestSet::Train)
    );
    // A configured spec is not configured again.
    assert_eq!(chosen.configured_text(&b32), None);
}

#[test]
fn the_source_configuration_is_tried_first_when_not_listed() {
    let dir = ir_dir();
    let spec = tuned(
        dir.path(),
        "[tune]\nir = \"t/k.{B}.ll\"\nB = [8, 32]\n[tune.source]\nB = 16\n",
    )
    .unwrap();
    let configs: Vec<String> = spec
        .tune
        .unwrap()
        .configurations()
        .iter()
        .map(tune::describe)
        .collect();
    assert_eq!(configs, ["B=16", "B=8", "B=32"]);
}

#[test]
fn tune_errors_name_the_field() {
    let cases = [
        ("[tune]\nir = \"t/k.{B}.ll\"\n[tune.source]\n", "tune", "no constants"),
        ("[tune]\nir = \"t/k.{B}.ll\"\nB = [8, 32]\n", "tune.source", "missing"),
        ("[tune]\nir = \"t/k.{B}.ll\"\nB = []\n[tune.source]\nB = 16\n", "tune.B", "expected 1 to 64 values"),
        ("[tune]\nir = \"t/k.{B}.ll\"\nB = [8, 8]\n[tune.source]\nB = 16\n", "tune.B[1]", "listed twice"),
        ("[tune]\nir = \"t/k.{B}.ll\"\nB = [8, 1.5]\n[tune.source]\nB = 16\n", "tune.B[1]", "expected an integer"),
        ("[tune]\nir = \"t/k.{B}.ll\"\nB = [8]\n\"2B\" = [1]\n[tune.source]\nB = 16\n", "tune.2B", "not a preprocessor constant"),
        ("[tune]\nir = \"t/k.{B}.ll\"\nB = [8]\n[tune.source]\nB = 16\nC = 1\n", "tune.source.C", "not a constant of [tune]"),
        ("[tune]\nir = \"t/k.{B}.ll\"\nB = [8]\nC = [1]\n[tune.source]\nB = 16\n", "tune.source", "no value for the constant `C`"),
        ("[tune]\nB = [8, 32]\n[tune.source]\nB = 16\n", "tune.ir", "missing"),
        ("[tune]\nir = \"t/k.ll\"\nB = [8, 32]\n[tune.source]\nB = 16\n", "tune.ir", "does not name {B}"),
        ("[tune]\nir = \"t/k.{B}.{C}.ll\"\nB = [8, 32]\n[tune.source]\nB = 16\n", "tune.ir", "{C} is not a constant"),
        ("[tune]\nir = \"t/k.{B.ll\"\nB = [8, 32]\n[tune.source]\nB = 16\n", "tune.ir", "without its `}`"),
        ("[tune]\nir = \"t/k.{B}.ll\"\nB = [8, 32]\n[tune.source]\nB = 16\n[tune.chosen]\nB = 64\n", "tune.chosen.B", "not among the values"),
        ("[tune]\nir = \"t/q.{B}.ll\"\nB = [8, 32]\n[tune.source]\nB = 16\n[tune.chosen]\nB = 8\n", "tune.ir", "IR of the configuration B=8:"),
        ("[tune]\nir = \"t/k.{n}.ll\"\nn = [8, 32]\n[tune.source]\nn = 16\n", "tune.n", "test train[0] has a parameter `n` too"),
        ("[tune]\nir = \"t/k.{B}.ll\"\nB = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33]\n\
          C = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32]\n[tune.source]\nB = 16\nC = 1\n", "tune", "more than 1024 configurations"),
    ];
    for (tune, field, message) in cases {
        let dir = ir_dir();
        let e = tuned(dir.path(), tune).expect_err(tune);
        assert_eq!(e.field, field, "{tune}: {e}");
        assert!(e.to_string().contains(message), "{tune}: {e}");
        assert!(e.line.is_some(), "{e}");
        assert!(!e.to_string().contains('\n'), "{e}");
    }
}

#[test]
fn a_harness_spec_cannot_be_tuned() {
    let dir = ir_dir();
    let text = format!(
        "version = 1\nir = \"k.ll\"\nkernel = \"k\"\n[harness]\ncommand = [\"./app\", \"{{ptx}}\"]\n\
         [tests]\ntrain = [{{ n = 100, seed = 1 }}]\nheldout = [{{ n = 300, seed = 2 }}]\n\
         [acceptance]\nmetric = \"max_abs\"\ntolerance = 0.001\n{TUNE}"
    );
    let e = parse(&dir.path().join("k.gevo.toml"), &text).unwrap_err();
    assert!(e.to_string().contains("[tune] needs [launch]"), "{e}");
}
