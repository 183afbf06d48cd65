//! Unit tests: expressions, comparison, generation, small inline specs.

use super::*;
use std::collections::BTreeMap;
use std::path::PathBuf;

fn params(list: &[(&str, f64)]) -> BTreeMap<String, f64> {
    list.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

/// (expression, parameters, expected value or Err(substring of the message)).
type ExprCase = (
    &'static str,
    &'static [(&'static str, f64)],
    Result<f64, &'static str>,
);

const EXPR_CASES: &[ExprCase] = &[
    ("42", &[], Ok(42.0)),
    ("1.5", &[], Ok(1.5)),
    (".5", &[], Ok(0.5)),
    ("1e3", &[], Ok(1000.0)),
    ("2.5E-1", &[], Ok(0.25)),
    ("1 + 2 * 3", &[], Ok(7.0)),
    ("(1 + 2) * 3", &[], Ok(9.0)),
    ("10 - 4 - 3", &[], Ok(3.0)),
    ("100 / 10 / 5", &[], Ok(2.0)),
    ("7 / 2", &[], Ok(3.5)),
    ("7 % 3", &[], Ok(1.0)),
    ("-7 % 3", &[], Ok(-1.0)),
    ("-3 * -2", &[], Ok(6.0)),
    ("--3", &[], Ok(3.0)),
    ("+4", &[], Ok(4.0)),
    ("-(2 + 3)", &[], Ok(-5.0)),
    ("2 * -3 + 1", &[], Ok(-5.0)),
    ("nx * ny", &[("nx", 64.0), ("ny", 37.0)], Ok(2368.0)),
    ("nx*ny+nx", &[("nx", 3.0), ("ny", 4.0)], Ok(15.0)),
    ("ceil(nx / 16)", &[("nx", 100.0)], Ok(7.0)),
    ("ceil(nx / 16)", &[("nx", 96.0)], Ok(6.0)),
    ("floor(nx / 16)", &[("nx", 100.0)], Ok(6.0)),
    ("floor(-0.5)", &[], Ok(-1.0)),
    ("cdiv(n, 256)", &[("n", 1000.0)], Ok(4.0)),
    ("cdiv(n, 256)", &[("n", 1024.0)], Ok(4.0)),
    ("cdiv(n, 256)", &[("n", 1.0)], Ok(1.0)),
    ("cdiv(0, 256)", &[], Ok(0.0)),
    ("cdiv(-5, 2)", &[], Ok(-2.0)),
    ("cdiv(9007199254740991, 2)", &[], Ok(4503599627370496.0)),
    ("min(3, 1, 2)", &[], Ok(1.0)),
    ("max(3, 1, 2)", &[], Ok(3.0)),
    ("min(a, b) * max(a, b)", &[("a", 4.0), ("b", 5.0)], Ok(20.0)),
    ("max(1, min(n, 1024))", &[("n", 5000.0)], Ok(1024.0)),
    (
        "  tiles * ( n + 1 ) * ( n + 1 )  ",
        &[("tiles", 2.0), ("n", 3.0)],
        Ok(32.0),
    ),
    ("n_2 + _x", &[("n_2", 1.0), ("_x", 2.0)], Ok(3.0)),
    ("scale", &[("scale", 0.5)], Ok(0.5)),
    ("9007199254740992 - 1", &[], Ok(9007199254740991.0)),
    // Errors.
    ("", &[], Err("empty expression")),
    ("   ", &[], Err("empty expression")),
    (
        "nz",
        &[("nx", 1.0)],
        Err("unknown parameter `nz` (parameters: nx)"),
    ),
    (
        "n + 1",
        &[],
        Err("unknown parameter `n` (parameters: none)"),
    ),
    ("1 / 0", &[], Err("division by zero")),
    ("n % 0", &[("n", 3.0)], Err("division by zero")),
    (
        "cdiv(4, n - n)",
        &[("n", 3.0)],
        Err("cdiv: division by zero"),
    ),
    (
        "1 +",
        &[],
        Err("expected a number, a name or `(`, found end of expression"),
    ),
    ("(1 + 2", &[], Err("expected `)`")),
    ("1 + 2)", &[], Err("unexpected `)`")),
    ("2 3", &[], Err("unexpected number 3")),
    ("n m", &[], Err("unexpected name `m`")),
    ("sqrt(4)", &[], Err("unknown function `sqrt`")),
    ("ceil(1, 2)", &[], Err("`ceil` takes 1 argument, got 2")),
    ("cdiv(1)", &[], Err("`cdiv` takes 2 arguments, got 1")),
    (
        "min(1)",
        &[],
        Err("`min` takes at least 2 arguments, got 1"),
    ),
    ("1.2.3", &[], Err("bad number `1.2.3`")),
    ("2x", &[], Err("bad number `2x`")),
    ("n ^ 2", &[], Err("unexpected character `^`")),
    ("n < 2", &[], Err("unexpected character `<`")),
    ("1e308 * 10", &[], Err("is not finite")),
];

#[test]
fn expressions() {
    for (src, ps, want) in EXPR_CASES {
        let got = Expr::parse(src).and_then(|e| e.eval(&params(ps)));
        match (want, &got) {
            (Ok(v), Ok(g)) => assert_eq!(g, v, "{src:?}"),
            (Err(sub), Err(e)) => assert!(
                e.to_string().contains(sub),
                "{src:?}: error {e:?} does not contain {sub:?}"
            ),
            _ => panic!("{src:?}: expected {want:?}, got {got:?}"),
        }
    }
}

#[test]
fn expression_error_columns() {
    let e = Expr::parse("nx + (ny *").unwrap_err();
    assert_eq!(e.column, 11);
    let e = Expr::parse("a + b")
        .unwrap()
        .eval(&params(&[("a", 1.0)]))
        .unwrap_err();
    assert_eq!(e.column, 5);
    assert_eq!(Expr::parse("cdiv(n, 4)").unwrap().params(), vec!["n"]);
}

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn f64s(v: &[f64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn i32s(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn acc(metric: Metric, tolerance: f64) -> Acceptance {
    Acceptance { metric, tolerance }
}

struct CmpCase {
    what: &'static str,
    acc: Acceptance,
    elem: ElemType,
    reference: Vec<u8>,
    actual: Vec<u8>,
    passed: bool,
    error: f64,
    first: Option<usize>,
}

fn case(
    what: &'static str,
    acc: Acceptance,
    elem: ElemType,
    reference: Vec<u8>,
    actual: Vec<u8>,
    (passed, error, first): (bool, f64, Option<usize>),
) -> CmpCase {
    CmpCase {
        what,
        acc,
        elem,
        reference,
        actual,
        passed,
        error,
        first,
    }
}

#[test]
fn comparisons() {
    use ElemType::*;
    use Metric::*;
    let nan = f32::NAN;
    let other_nan = f32::from_bits(0xffc0_0001);
    let next = |x: f32| f32::from_bits(x.to_bits() + 1);
    let cases = vec![
        // exact
        case(
            "exact equal",
            acc(Exact, 0.0),
            F32,
            f32s(&[1.0, 2.0]),
            f32s(&[1.0, 2.0]),
            (true, 0.0, None),
        ),
        case(
            "exact counts",
            acc(Exact, 0.0),
            F32,
            f32s(&[1.0, 2.0, 3.0]),
            f32s(&[1.0, 2.5, 3.5]),
            (false, 2.0, Some(1)),
        ),
        case(
            "exact nan both",
            acc(Exact, 0.0),
            F32,
            f32s(&[nan, 1.0]),
            f32s(&[other_nan, 1.0]),
            (true, 0.0, None),
        ),
        case(
            "exact nan vs number",
            acc(Exact, 0.0),
            F32,
            f32s(&[1.0, nan]),
            f32s(&[1.0, 1.0]),
            (false, 1.0, Some(1)),
        ),
        case(
            "exact signed zero",
            acc(Exact, 0.0),
            F32,
            f32s(&[0.0]),
            f32s(&[-0.0]),
            (false, 1.0, Some(0)),
        ),
        case(
            "exact ints",
            acc(Exact, 0.0),
            I32,
            i32s(&[5, -7, 9]),
            i32s(&[5, -7, 8]),
            (false, 1.0, Some(2)),
        ),
        case(
            "exact u8",
            acc(Exact, 0.0),
            U8,
            vec![1, 2, 3],
            vec![1, 2, 3],
            (true, 0.0, None),
        ),
        // max_abs
        case(
            "abs within",
            acc(MaxAbs, 0.5),
            F32,
            f32s(&[1.0, 2.0]),
            f32s(&[1.25, 1.5]),
            (true, 0.5, None),
        ),
        case(
            "abs at tolerance passes",
            acc(MaxAbs, 0.25),
            F64,
            f64s(&[1.0]),
            f64s(&[1.25]),
            (true, 0.25, None),
        ),
        case(
            "abs just over",
            acc(MaxAbs, 0.25),
            F64,
            f64s(&[1.0, 0.0]),
            f64s(&[1.0, 0.25000001]),
            (false, 0.25000001, Some(1)),
        ),
        case(
            "abs zero tolerance",
            acc(MaxAbs, 0.0),
            F32,
            f32s(&[1.0]),
            f32s(&[next(1.0)]),
            (false, f32::EPSILON as f64, Some(0)),
        ),
        case(
            "abs nan both",
            acc(MaxAbs, 0.0),
            F32,
            f32s(&[nan]),
            f32s(&[nan]),
            (true, 0.0, None),
        ),
        case(
            "abs nan vs number",
            acc(MaxAbs, 1e9),
            F32,
            f32s(&[0.0, 1.0]),
            f32s(&[0.0, nan]),
            (false, f64::INFINITY, Some(1)),
        ),
        case(
            "abs number vs nan, infinite tolerance",
            acc(MaxAbs, f64::INFINITY),
            F32,
            f32s(&[nan]),
            f32s(&[1.0]),
            (false, f64::INFINITY, Some(0)),
        ),
        case(
            "abs inf equal",
            acc(MaxAbs, 0.0),
            F32,
            f32s(&[f32::INFINITY]),
            f32s(&[f32::INFINITY]),
            (true, 0.0, None),
        ),
        case(
            "abs inf vs finite",
            acc(MaxAbs, 1e30),
            F32,
            f32s(&[f32::INFINITY]),
            f32s(&[f32::MAX]),
            (false, f64::INFINITY, Some(0)),
        ),
        case(
            "abs ints",
            acc(MaxAbs, 2.0),
            I32,
            i32s(&[10, -10]),
            i32s(&[12, -13]),
            (false, 3.0, Some(1)),
        ),
        case(
            "abs i64 extremes",
            acc(MaxAbs, 0.0),
            I64,
            i64::MIN.to_le_bytes().to_vec(),
            i64::MAX.to_le_bytes().to_vec(),
            (false, 18446744073709551615.0, Some(0)),
        ),
        case(
            "abs u32",
            acc(MaxAbs, 1.0),
            U32,
            7u32.to_le_bytes().to_vec(),
            6u32.to_le_bytes().to_vec(),
            (true, 1.0, None),
        ),
        // max_rel
        case(
            "rel within",
            acc(MaxRel, 0.01),
            F64,
            f64s(&[100.0, -200.0]),
            f64s(&[101.0, -201.0]),
            (true, 0.01, None),
        ),
        case(
            "rel over",
            acc(MaxRel, 0.001),
            F64,
            f64s(&[100.0, -200.0]),
            f64s(&[100.0, -201.0]),
            (false, 0.005, Some(1)),
        ),
        case(
            "rel zero reference uses tiny",
            acc(MaxRel, 1.0),
            F64,
            f64s(&[0.0]),
            f64s(&[1e-31]),
            (true, 1e-31 / REL_TINY, None),
        ),
        case(
            "rel zero reference fails",
            acc(MaxRel, 1e6),
            F64,
            f64s(&[0.0]),
            f64s(&[1e-20]),
            (false, 1e-20 / REL_TINY, Some(0)),
        ),
        case(
            "rel zeros",
            acc(MaxRel, 0.0),
            F32,
            f32s(&[0.0]),
            f32s(&[-0.0]),
            (true, 0.0, None),
        ),
        case(
            "rel nan both",
            acc(MaxRel, 0.0),
            F64,
            f64s(&[f64::NAN]),
            f64s(&[f64::NAN]),
            (true, 0.0, None),
        ),
        case(
            "rel nan vs number",
            acc(MaxRel, 1.0),
            F64,
            f64s(&[1.0]),
            f64s(&[f64::NAN]),
            (false, f64::INFINITY, Some(0)),
        ),
        case(
            "rel inf vs finite",
            acc(MaxRel, 1.0),
            F32,
            f32s(&[f32::INFINITY]),
            f32s(&[1.0]),
            (false, f64::INFINITY, Some(0)),
        ),
        case(
            "rel ints",
            acc(MaxRel, 0.1),
            I32,
            i32s(&[10, 0]),
            i32s(&[11, 0]),
            (true, 0.1, None),
        ),
        // ulp
        case(
            "ulp one",
            acc(Ulp, 1.0),
            F32,
            f32s(&[1.0]),
            f32s(&[next(1.0)]),
            (true, 1.0, None),
        ),
        case(
            "ulp two fails at one",
            acc(Ulp, 1.0),
            F32,
            f32s(&[1.0, 3.0]),
            f32s(&[1.0, next(next(3.0))]),
            (false, 2.0, Some(1)),
        ),
        case(
            "ulp across zero",
            acc(Ulp, 2.0),
            F32,
            f32s(&[f32::from_bits(1)]),
            f32s(&[-f32::from_bits(1)]),
            (true, 2.0, None),
        ),
        case(
            "ulp signed zeros",
            acc(Ulp, 0.0),
            F32,
            f32s(&[0.0]),
            f32s(&[-0.0]),
            (true, 0.0, None),
        ),
        case(
            "ulp f64",
            acc(Ulp, 0.0),
            F64,
            f64s(&[1.0]),
            f64s(&[f64::from_bits(1.0f64.to_bits() + 3)]),
            (false, 3.0, Some(0)),
        ),
        case(
            "ulp nan both",
            acc(Ulp, 0.0),
            F64,
            f64s(&[f64::NAN]),
            f64s(&[f64::NAN]),
            (true, 0.0, None),
        ),
        case(
            "ulp nan vs number",
            acc(Ulp, 1e9),
            F32,
            f32s(&[nan]),
            f32s(&[0.0]),
            (false, f64::INFINITY, Some(0)),
        ),
        case(
            "ulp ints",
            acc(Ulp, 1.0),
            I16,
            [5i16.to_le_bytes(), 7i16.to_le_bytes()].concat(),
            [6i16.to_le_bytes(), 7i16.to_le_bytes()].concat(),
            (true, 1.0, None),
        ),
        // shapes
        case(
            "lengths differ",
            acc(MaxAbs, 1.0),
            F32,
            f32s(&[1.0, 2.0]),
            f32s(&[1.0]),
            (false, f64::INFINITY, Some(1)),
        ),
        case(
            "not whole elements",
            acc(Exact, 0.0),
            F32,
            vec![0; 6],
            vec![0; 6],
            (false, f64::INFINITY, Some(1)),
        ),
        case(
            "empty",
            acc(Exact, 0.0),
            F32,
            vec![],
            vec![],
            (true, 0.0, None),
        ),
    ];
    for c in cases {
        let got = compare(&c.acc, c.elem, &c.reference, &c.actual);
        assert_eq!(got.passed, c.passed, "{}: {got:?}", c.what);
        assert_eq!(got.first_mismatch, c.first, "{}: {got:?}", c.what);
        let close = got.error == c.error || (got.error - c.error).abs() <= 1e-12 * c.error.abs();
        assert!(close, "{}: error {} != {}", c.what, got.error, c.error);
    }
}

/// A directory with an empty `k.ll`, so that inline specs can name it.
fn ir_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("k.ll"), "; empty\n").unwrap();
    dir
}

fn spec_with(dir: &std::path::Path, args: &str, extra: &str) -> Result<Spec, SpecError> {
    let text = format!(
        "version = 1\nir = \"k.ll\"\nkernel = \"k\"\n[launch]\ngrid = [\"cdiv(n, 64)\"]\nblock = [64]\n{extra}\n{args}\n\
         [tests]\ntrain = [{{ n = 100, seed = 1 }}]\nheldout = [{{ n = 300, seed = 2 }}]\n\
         [acceptance]\nmetric = \"max_abs\"\ntolerance = 0.001\n"
    );
    parse(&dir.join("k.gevo.toml"), &text)
}

const OUT: &str =
    "[[args]]\nname = \"y\"\nkind = \"buffer\"\ntype = \"f32\"\nlen = \"n\"\nrole = \"out\"\n";

fn buffer(name: &str, ty: &str, fill: &str) -> String {
    format!("[[args]]\nname = \"{name}\"\nkind = \"buffer\"\ntype = \"{ty}\"\nlen = \"n\"\nfill = {fill}\nrole = \"in\"\n")
}

fn data(inst: &Instance, i: usize) -> &[u8] {
    match &inst.args[i] {
        ArgValue::Buffer { data, .. } => data,
        ArgValue::Scalar(_) => panic!("scalar"),
    }
}

#[test]
fn fills_have_the_documented_values() {
    let dir = ir_dir();
    let args = [
        buffer("u", "f64", "{ uniform = [2.0, 3.0] }"),
        buffer("g", "f64", "{ normal = [10.0, 2.0] }"),
        buffer("r", "i16", "{ int_range = [-3, 3] }"),
        buffer("i", "u32", "{ iota = 7 }"),
        buffer("j", "f32", "\"iota\""),
        buffer("c", "i8", "{ constant = -5 }"),
        buffer("d", "f32", "{ constant = 0.5 }"),
        OUT.to_string(),
    ]
    .concat();
    let spec = spec_with(dir.path(), &args, "").unwrap();
    let test = &spec.train[0];
    let inst = spec.instantiate(test).unwrap();
    let n = 100;
    let u: Vec<f64> = data(&inst, 0)
        .chunks(8)
        .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(u.len(), n);
    assert!(u.iter().all(|&x| (2.0..3.0).contains(&x)));
    // The first value is the documented formula on the first ChaCha8 draw.
    let mut rng = <rand_chacha::ChaCha8Rng as rand_chacha::rand_core::SeedableRng>::from_seed(
        fill_seed(1, "u"),
    );
    let first =
        (rand_chacha::rand_core::RngCore::next_u64(&mut rng) >> 11) as f64 / (1u64 << 53) as f64;
    assert_eq!(u[0], 2.0 + first);
    let g: Vec<f64> = data(&inst, 1)
        .chunks(8)
        .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let mean = g.iter().sum::<f64>() / n as f64;
    assert!((mean - 10.0).abs() < 1.0, "{mean}");
    assert!(g.iter().all(|&x| (0.0..20.0).contains(&x)));
    let r: Vec<i16> = data(&inst, 2)
        .chunks(2)
        .map(|c| i16::from_le_bytes([c[0], c[1]]))
        .collect();
    assert!(r.iter().all(|x| (-3..=3).contains(x)));
    for v in -3..=3 {
        assert!(
            r.contains(&v),
            "int_range is inclusive: {v} missing from {r:?}"
        );
    }
    let i: Vec<u32> = data(&inst, 3)
        .chunks(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(i, (7..107).collect::<Vec<u32>>());
    let j: Vec<f32> = data(&inst, 4)
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(j[99], 99.0);
    assert_eq!(data(&inst, 5), &[(-5i8) as u8; 100][..]);
    assert_eq!(&data(&inst, 6)[..4], &0.5f32.to_le_bytes());
    assert_eq!(data(&inst, 7), &[0u8; 400][..]);
    assert_eq!(inst.grid, [2, 1, 1]);
    assert_eq!(inst.block, [64, 1, 1]);
    assert_eq!((inst.launches, inst.shared_bytes), (1, 0));
}

#[test]
fn seeds_depend_on_test_seed_and_name_only() {
    let dir = ir_dir();
    let a = [buffer("a", "f32", "{ uniform = [0, 1] }"), OUT.to_string()].concat();
    let b = [
        OUT.to_string(),
        "[[args]]\nname = \"n\"\nkind = \"scalar\"\ntype = \"i32\"\nvalue = \"n\"\n".into(),
        buffer("a", "f32", "{ uniform = [0, 1] }"),
    ]
    .concat();
    let sa = spec_with(dir.path(), &a, "").unwrap();
    let sb = spec_with(dir.path(), &b, "").unwrap();
    let ia = sa.instantiate(&sa.train[0]).unwrap();
    let ib = sb.instantiate(&sb.train[0]).unwrap();
    assert_eq!(
        data(&ia, 0),
        data(&ib, 2),
        "moving an argument does not change its data"
    );
    assert_eq!(ib.args[1], ArgValue::Scalar(Scalar::I32(100)));
    assert_ne!(fill_seed(1, "a"), fill_seed(2, "a"));
    assert_ne!(fill_seed(1, "a"), fill_seed(1, "b"));
}

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
    assert_eq!(inst.grid, [32, 1, 1]);
    assert_eq!(inst.block, [32, 1, 1]);
    assert_eq!(inst.shared_bytes, 128);
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
