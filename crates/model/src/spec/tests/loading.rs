//! Small inline specs as loaded: hashes, one-line errors with positions, and
//! other TOML spellings of the same data.

use super::*;
use std::path::PathBuf;

#[test]
fn hashes() {
    let dir = ir_dir();
    let args = [buffer("a", "f32", "{ uniform = [0, 1] }"), OUT.to_string()].concat();
    let s1 = spec_with(dir.path(), &args, "").unwrap();
    let s2 = spec_with(dir.path(), &args, "# a comment\n").unwrap();
    assert_ne!(s1.content_hash(), s2.content_hash());
    assert_eq!(s1.content_hash().len(), 64);
    assert_eq!(
        s1.test_set_hash(TestSet::All),
        s2.test_set_hash(TestSet::All)
    );
    assert_ne!(
        s1.test_set_hash(TestSet::Train),
        s1.test_set_hash(TestSet::Heldout)
    );
    assert_ne!(
        s1.test_set_hash(TestSet::Train),
        s1.test_set_hash(TestSet::All)
    );
    let mut s3 = s1.clone();
    s3.train[0].seed = 9;
    assert_ne!(
        s1.test_set_hash(TestSet::Train),
        s3.test_set_hash(TestSet::Train)
    );
    assert_eq!(
        s1.test_set_hash(TestSet::Heldout),
        s3.test_set_hash(TestSet::Heldout)
    );
    assert_eq!(s1.tests(TestSet::All).len(), 2);
    assert_eq!(s1.tests(TestSet::Heldout)[0].name, "heldout[0]");
    assert_eq!(s1.outputs(), vec![1]);
    assert_eq!(s1.arg_index("y"), Some(1));
}

#[test]
fn errors_are_one_line_with_position() {
    let dir = ir_dir();
    let args = [buffer("a", "f32", "{ uniform = [1, 0] }"), OUT.to_string()].concat();
    let e = spec_with(dir.path(), &args, "").unwrap_err();
    let s = e.to_string();
    assert!(!s.contains('\n'));
    assert_eq!(e.field, "args[0].fill.uniform");
    assert_eq!(e.line, Some(13), "{s}");
    assert!(s.contains("k.gevo.toml:13:"), "{s}");
    assert!(s.contains("lo (1) > hi (0)"), "{s}");
    let e = parse(&PathBuf::from("x.gevo.toml"), "a = [\n").unwrap_err();
    assert!(e.to_string().starts_with("x.gevo.toml:"), "{e}");
    assert!(e.to_string().contains("invalid TOML"), "{e}");
    assert!(!e.to_string().contains('\n'));
}

#[test]
fn other_toml_spellings_are_accepted() {
    let dir = ir_dir();
    let text = r#"
version = 1
ir = "k.ll"
kernel = "k"
launch.grid = "cdiv(n, 32)"
launch.block = 32.0
launch.shared_bytes = 128

[[args]]
name = "y"
kind = "buffer"
type = "u64"
len = 8
fill = { constant = 9007199254740993 }
role = "inout"

[[args]]
name = "n"
kind = "scalar"
type = "u16"
value = "n"

[[tests.train]]
n = 100
seed = 0

[[tests.heldout]]
n = 1e3
seed = 18446744073709551
extra_unused_param = -1.5

[acceptance]
metric = "ulp"
"#;
    let spec = parse(&dir.path().join("k.gevo.toml"), text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(spec.train[0].params, params(&[("n", 100.0)]));
    assert_eq!(spec.heldout[0].seed, 18446744073709551);
    assert_eq!(
        spec.acceptance,
        Acceptance {
            metric: Metric::Ulp,
            tolerance: 0.0
        }
    );
    let inst = spec.instantiate(&spec.heldout[0]).unwrap();
    assert_eq!(inst.launches[0].grid, [32, 1, 1]);
    assert_eq!(inst.launches[0].block, [32, 1, 1]);
    assert_eq!(inst.launches[0].shared_bytes, 128);
    assert_eq!(inst.args[1], ArgValue::Scalar(Scalar::U16(1000)));
    // Integer constants are exact even beyond 2^53.
    assert_eq!(&data(&inst, 0)[..8], &9007199254740993u64.to_le_bytes());

    let bad = text.replace("kernel = \"k\"", "kernel = 1979-05-27");
    let e = parse(&dir.path().join("k.gevo.toml"), &bad).unwrap_err();
    assert_eq!(
        e.to_string()
            .split(dir.path().to_str().unwrap())
            .nth(1)
            .unwrap(),
        "/k.gevo.toml:4:10: kernel: expected a string, found a datetime"
    );
    let bad = text.replace("seed = 0", "seed = 0\nm = true");
    let e = parse(&dir.path().join("k.gevo.toml"), &bad).unwrap_err();
    assert!(
        e.to_string()
            .contains("tests.train[0].m: expected a number, found a boolean"),
        "{e}"
    );
    // A TOML duplicate key is a syntax error with its line.
    let bad = text.replace("type = \"u16\"", "type = \"u16\"\ntype = \"u8\"");
    let e = parse(&dir.path().join("k.gevo.toml"), &bad).unwrap_err();
    assert!(
        e.to_string().contains(":21:") && e.to_string().contains("invalid TOML"),
        "{e}"
    );
}

#[test]
fn non_finite_numbers_are_named_as_toml_spells_them() {
    let dir = ir_dir();
    for (block, tolerance, expected) in [
        (
            "64",
            "nan",
            "acceptance.tolerance: expected a finite number >= 0, found nan",
        ),
        (
            "64",
            "inf",
            "acceptance.tolerance: expected a finite number >= 0, found inf",
        ),
        (
            "64",
            "-inf",
            "acceptance.tolerance: expected a finite number >= 0, found -inf",
        ),
        ("64", "-1.0", "acceptance.tolerance: must be >= 0, found -1"),
        (
            "64",
            "true",
            "acceptance.tolerance: expected a number >= 0, found a boolean",
        ),
        ("nan", "0.1", "expected a finite number, found nan"),
    ] {
        let text = format!(
            "version = 1\nir = \"k.ll\"\nkernel = \"k\"\n[launch]\ngrid = [1]\nblock = [{block}]\n{OUT}\n\
             [tests]\ntrain = [{{ n = 100, seed = 1 }}]\nheldout = [{{ n = 300, seed = 2 }}]\n\
             [acceptance]\nmetric = \"max_abs\"\ntolerance = {tolerance}\n"
        );
        let e = parse(&dir.path().join("k.gevo.toml"), &text)
            .unwrap_err()
            .to_string();
        assert!(e.ends_with(expected), "{tolerance}, {block}: {e}");
    }
}
