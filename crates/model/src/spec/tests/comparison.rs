//! Output comparison: every metric on equal, close and failing buffers,
//! NaN and infinity handling, the reported error and first mismatch.

use super::*;

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
