//! Expressions: values, precedence, functions, errors and their columns.

use super::*;

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
