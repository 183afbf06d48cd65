//! A C expression from a launch site as a spec expression (docs/spec.md,
//! "Expressions"): names resolved through what the source defines,
//! integer division as `floor(a / b)` (the spec's `/` is real division),
//! the ways C rounds a division up as `cdiv(a, b)` (`(n + 255) / 256`,
//! `(n + b - 1) / b`, `n / b + (n % b != 0)`, `(n - 1) / b + 1`,
//! `ceil(n / (float)b)`, `(n + 255) >> 8`, `DIV_UP(n, b)`), `MIN`/`std::max`
//! and `a < b ? a : b` as `min`/`max`, shifts by constants, `sizeof` of
//! built-in types. `None` where the spec cannot say it.

use super::cexpr::{parse, CExpr};
use super::lex::{Kind, Token};

/// What a name in a C expression stands for.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Meaning {
    /// A test parameter or a loop variable: kept as written; `float` when
    /// declared as a floating-point value.
    Keep { float: bool },
    /// This expression (a `#define`, a local set once).
    Is(CExpr),
    /// Something the spec cannot express (set several times, say).
    Unknown,
}

/// The source's definitions, as the translation asks for them.
pub(crate) trait Names {
    fn meaning(&self, name: &str) -> Meaning;
    /// A function-like macro's parameters and body.
    fn macro_fn(&self, name: &str) -> Option<(Vec<String>, Vec<Token>)>;
    /// `name.field` where `name` is a `dim3` the source sets.
    fn member(&self, _name: &str, _field: &str) -> Option<CExpr> {
        None
    }
}

/// The longest expression written into a skeleton: longer ones (locals
/// built from locals, doubling each time) keep a name instead.
const MAX_LEN: usize = 200;

/// `e` as a spec expression, or `None`.
pub(crate) fn to_spec(e: &CExpr, names: &dyn Names) -> Option<String> {
    let resolved = resolve(e, names, 0)?;
    Some(print(&spec(&resolved)?)).filter(|s| s.len() <= MAX_LEN)
}

/// `e` with every name replaced by what it stands for (casts mark names
/// declared as floating-point) and function-like macros expanded.
pub(crate) fn resolve(e: &CExpr, names: &dyn Names, depth: usize) -> Option<CExpr> {
    if depth > 16 {
        return None;
    }
    let r = |x: &CExpr| resolve(x, names, depth).map(Box::new);
    Some(match e {
        CExpr::Name(n) => match names.meaning(n) {
            Meaning::Keep { float: false } => e.clone(),
            Meaning::Keep { float: true } => CExpr::Cast("float".into(), Box::new(e.clone())),
            Meaning::Is(x) => resolve(&x, names, depth + 1)?,
            Meaning::Unknown => return None,
        },
        CExpr::Call(f, args) => match names.macro_fn(f) {
            Some((params, body)) if params.len() == args.len() => {
                let mut tokens = Vec::new();
                for t in body {
                    match params.iter().position(|p| *p == t.text) {
                        Some(i) => {
                            // The argument in parentheses, as the macro's
                            // own parentheses would have it.
                            let at = |text: String, kind| Token {
                                text,
                                kind,
                                line: t.line,
                            };
                            tokens.push(at("(".into(), Kind::Punct));
                            tokens.push(at(format!("__gevo_arg{i}"), Kind::Ident));
                            tokens.push(at(")".into(), Kind::Punct));
                        }
                        None => tokens.push(t),
                    }
                }
                let expanded = substitute(&parse(&tokens)?, args);
                resolve(&expanded, names, depth + 1)?
            }
            _ => CExpr::Call(
                f.clone(),
                args.iter()
                    .map(|a| resolve(a, names, depth))
                    .collect::<Option<_>>()?,
            ),
        },
        CExpr::Unary(op, x) => CExpr::Unary(op.clone(), r(x)?),
        CExpr::Binary(op, a, b) => CExpr::Binary(op.clone(), r(a)?, r(b)?),
        CExpr::Ternary(c, a, b) => CExpr::Ternary(r(c)?, r(a)?, r(b)?),
        CExpr::Cast(t, x) => CExpr::Cast(t.clone(), r(x)?),
        CExpr::Index(a, i) => CExpr::Index(r(a)?, r(i)?),
        CExpr::Member(a, f) => match &**a {
            CExpr::Name(n) => match names.member(n, f) {
                Some(x) => resolve(&x, names, depth + 1)?,
                None => CExpr::Member(r(a)?, f.clone()),
            },
            _ => CExpr::Member(r(a)?, f.clone()),
        },
        CExpr::Num { .. } | CExpr::SizeOf(_) | CExpr::Literal(_) => e.clone(),
    })
}

/// A macro body's `__gevo_arg<i>` placeholders replaced by the arguments.
fn substitute(e: &CExpr, args: &[CExpr]) -> CExpr {
    let s = |x: &CExpr| Box::new(substitute(x, args));
    match e {
        CExpr::Name(n) => n
            .strip_prefix("__gevo_arg")
            .and_then(|i| args.get(i.parse::<usize>().ok()?))
            .cloned()
            .unwrap_or_else(|| e.clone()),
        CExpr::Call(f, xs) => {
            CExpr::Call(f.clone(), xs.iter().map(|x| substitute(x, args)).collect())
        }
        CExpr::Unary(op, x) => CExpr::Unary(op.clone(), s(x)),
        CExpr::Binary(op, a, b) => CExpr::Binary(op.clone(), s(a), s(b)),
        CExpr::Ternary(c, a, b) => CExpr::Ternary(s(c), s(a), s(b)),
        CExpr::Cast(t, x) => CExpr::Cast(t.clone(), s(x)),
        CExpr::Index(a, i) => CExpr::Index(s(a), s(i)),
        CExpr::Member(a, f) => CExpr::Member(s(a), f.clone()),
        CExpr::Num { .. } | CExpr::SizeOf(_) | CExpr::Literal(_) => e.clone(),
    }
}

/// A spec expression.
#[derive(Debug, Clone, PartialEq)]
enum S {
    Num(f64),
    Name(String),
    Neg(Box<S>),
    Bin(char, Box<S>, Box<S>),
    Call(&'static str, Vec<S>),
}

const MIN: &[&str] = &["min", "MIN", "Min", "fmin", "fminf", "umin", "imin"];
const MAX: &[&str] = &["max", "MAX", "Max", "fmax", "fmaxf", "umax", "imax"];
const CDIV: &[&str] = &[
    "cdiv",
    "ceil_div",
    "ceildiv",
    "CEIL_DIV",
    "CEILDIV",
    "div_up",
    "divup",
    "DIV_UP",
    "DIVUP",
    "divUp",
    "DivUp",
    "iDivUp",
    "idivup",
    "div_ceil",
    "DIV_CEIL",
    "round_up_div",
];

fn spec(e: &CExpr) -> Option<S> {
    Some(match e {
        CExpr::Num { value, .. } => S::Num(*value),
        CExpr::Name(n) if spec_name(n) => S::Name(n.clone()),
        CExpr::Cast(t, x) => {
            let inner = spec(x)?;
            if is_float(x) && !float_type(t) {
                floor(inner)
            } else {
                inner
            }
        }
        CExpr::Unary(op, x) if op == "-" => match spec(x)? {
            S::Num(v) => S::Num(-v),
            s => S::Neg(Box::new(s)),
        },
        CExpr::Unary(op, x) if op == "+" => spec(x)?,
        CExpr::Binary(op, a, b) => return binary(op, a, b),
        CExpr::Ternary(c, a, b) => return min_max(c, a, b),
        CExpr::Call(f, args) => return call(f.rsplit("::").next().unwrap_or(f), args),
        CExpr::SizeOf(t) => S::Num(size_of(t)?),
        _ => return None,
    })
}

fn binary(op: &str, a: &CExpr, b: &CExpr) -> Option<S> {
    if let Some((n, d)) = cdiv_parts(op, a, b) {
        return Some(S::Call("cdiv", vec![spec(n)?, spec(d)?]));
    }
    if let Some((n, d)) = (op == ">>").then(|| shifted_cdiv(a, b)).flatten() {
        return Some(S::Call("cdiv", vec![n, d]));
    }
    let (x, y) = (spec(a)?, spec(b)?);
    Some(match op {
        "+" => bin('+', x, y),
        "-" => bin('-', x, y),
        "*" => bin('*', x, y),
        "%" => bin('%', x, y),
        "/" if is_float(a) || is_float(b) => bin('/', x, y),
        "/" => floor(bin('/', x, y)),
        "<<" => bin('*', x, S::Num(2f64.powf(shift(b)?))),
        ">>" => floor(bin('/', x, S::Num(2f64.powf(shift(b)?)))),
        _ => return None,
    })
}

fn shift(b: &CExpr) -> Option<f64> {
    match b {
        CExpr::Num {
            value,
            float: false,
        } if *value < 53.0 => Some(*value),
        _ => None,
    }
}

/// The numerator and divisor of a division C rounds up, written one of
/// the usual ways.
fn cdiv_parts<'e>(op: &str, a: &'e CExpr, b: &'e CExpr) -> Option<(&'e CExpr, &'e CExpr)> {
    use CExpr::Binary as B;
    match op {
        // (n + d - 1) / d, (n + 255) / 256, (n - 1 + d) / d
        "/" if !is_float(a) && !is_float(b) => match a {
            B(o, x, k) if o == "+" && below(k, b) => Some((x, b)),
            B(o, k, x) if o == "+" && below(k, b) => Some((x, b)),
            B(o, s, one) if o == "-" && is_num(one, 1.0) => match &**s {
                B(o, x, d) | B(o, d, x) if o == "+" && same(d, b) => Some((x, b)),
                _ => None,
            },
            B(o, s, d) if o == "+" && same(d, b) => match &**s {
                B(o, x, one) if o == "-" && is_num(one, 1.0) => Some((x, b)),
                _ => None,
            },
            _ => None,
        },
        // n / d + (n % d != 0) and its spellings; (n - 1) / d + 1
        "+" => {
            for (q, r) in [(a, b), (b, a)] {
                if let B(o, n, d) = q {
                    if o == "/" && remainder_nonzero(r, n, d) {
                        return Some((n, d));
                    }
                    if let B(s, x, one) = &**n {
                        if o == "/" && s == "-" && is_num(one, 1.0) && is_num(r, 1.0) {
                            return Some((x, d));
                        }
                    }
                }
            }
            None
        }
        _ => None,
    }
}

/// `(n + 255) >> 8`: the numerator and the power of two.
fn shifted_cdiv(a: &CExpr, b: &CExpr) -> Option<(S, S)> {
    let k = shift(b)?;
    let CExpr::Binary(o, x, y) = a else {
        return None;
    };
    let pow = 2f64.powf(k);
    let n = match (o.as_str(), x, y) {
        ("+", n, m) | ("+", m, n) if is_num(m, pow - 1.0) => n,
        _ => return None,
    };
    Some((spec(n)?, S::Num(pow)))
}

/// `k` is `d - 1`: literally, or as `d - 1` written out.
fn below(k: &CExpr, d: &CExpr) -> bool {
    match (num(k), num(d)) {
        (Some(k), Some(d)) => k == d - 1.0,
        _ => matches!(k, CExpr::Binary(o, x, one) if o == "-" && is_num(one, 1.0) && same(x, d)),
    }
}

/// `r` is 1 exactly when `n % d` is not zero: `n % d != 0`, `n % d > 0`,
/// `n % d ? 1 : 0`, `(n % d == 0) ? 0 : 1`, `(n % d != 0) ? 1 : 0`.
fn remainder_nonzero(r: &CExpr, n: &CExpr, d: &CExpr) -> bool {
    let is_rem =
        |x: &CExpr| matches!(x, CExpr::Binary(o, a, b) if o == "%" && same(a, n) && same(b, d));
    let test = |x: &CExpr, zero_means: bool| match x {
        CExpr::Binary(o, a, z) if is_num(z, 0.0) && is_rem(a) => match o.as_str() {
            "!=" | ">" => Some(!zero_means),
            "==" => Some(zero_means),
            _ => None,
        },
        _ if is_rem(x) => Some(!zero_means),
        _ => None,
    };
    match r {
        CExpr::Ternary(c, one, zero) if is_num(one, 1.0) && is_num(zero, 0.0) => {
            test(c, false) == Some(true)
        }
        CExpr::Ternary(c, zero, one) if is_num(one, 1.0) && is_num(zero, 0.0) => {
            test(c, true) == Some(true)
        }
        _ => {
            matches!(r, CExpr::Binary(o, ..) if o == "!=" || o == ">")
                && test(r, false) == Some(true)
        }
    }
}

fn min_max(c: &CExpr, a: &CExpr, b: &CExpr) -> Option<S> {
    let CExpr::Binary(op, x, y) = c else {
        return None;
    };
    let less = match op.as_str() {
        "<" | "<=" => true,
        ">" | ">=" => false,
        _ => return None,
    };
    let f = if same(a, x) && same(b, y) {
        if less {
            "min"
        } else {
            "max"
        }
    } else if same(a, y) && same(b, x) {
        if less {
            "max"
        } else {
            "min"
        }
    } else {
        return None;
    };
    Some(S::Call(f, vec![spec(x)?, spec(y)?]))
}

fn call(f: &str, args: &[CExpr]) -> Option<S> {
    let all = || args.iter().map(spec).collect::<Option<Vec<S>>>();
    Some(match f {
        _ if MIN.contains(&f) && args.len() >= 2 => S::Call("min", all()?),
        _ if MAX.contains(&f) && args.len() >= 2 => S::Call("max", all()?),
        _ if CDIV.contains(&f) && args.len() == 2 => S::Call("cdiv", all()?),
        "ceil" | "ceilf" if args.len() == 1 => match &args[0] {
            CExpr::Binary(o, n, d) if o == "/" => S::Call("cdiv", vec![spec(n)?, spec(d)?]),
            x => S::Call("ceil", vec![spec(x)?]),
        },
        "floor" | "floorf" if args.len() == 1 => match &args[0] {
            CExpr::Binary(o, n, d) if o == "/" => floor(bin('/', spec(n)?, spec(d)?)),
            x => floor(spec(x)?),
        },
        _ => return None,
    })
}

/// A name the spec's expressions can use (`seed` is not a parameter).
fn spec_name(n: &str) -> bool {
    let mut chars = n.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && n != "seed"
}

/// Whether C computes `e` in floating point.
fn is_float(e: &CExpr) -> bool {
    match e {
        CExpr::Num { float, .. } => *float,
        CExpr::Cast(t, _) => float_type(t),
        CExpr::Unary(_, x) => is_float(x),
        CExpr::Binary(op, a, b) if matches!(op.as_str(), "+" | "-" | "*" | "/") => {
            is_float(a) || is_float(b)
        }
        CExpr::Ternary(_, a, b) => is_float(a) || is_float(b),
        CExpr::Call(f, args) => {
            let f = f.rsplit("::").next().unwrap_or(f);
            matches!(
                f,
                "ceil" | "floor" | "ceilf" | "floorf" | "sqrt" | "sqrtf" | "pow" | "powf"
            ) || ((MIN.contains(&f) || MAX.contains(&f)) && args.iter().any(is_float))
        }
        _ => false,
    }
}

fn float_type(t: &str) -> bool {
    ["float", "double", "half"].iter().any(|f| t.contains(f))
}

fn num(e: &CExpr) -> Option<f64> {
    match e {
        CExpr::Num { value, .. } => Some(*value),
        CExpr::Cast(_, x) => num(x),
        _ => None,
    }
}

fn is_num(e: &CExpr, v: f64) -> bool {
    num(e) == Some(v)
}

/// Structural equality, casts and literal spellings aside.
fn same(a: &CExpr, b: &CExpr) -> bool {
    match (a, b) {
        (CExpr::Cast(_, x), _) => same(x, b),
        (_, CExpr::Cast(_, y)) => same(a, y),
        (CExpr::Num { value: x, .. }, CExpr::Num { value: y, .. }) => x == y,
        _ => a == b,
    }
}

/// The size in bytes of a built-in type.
fn size_of(t: &str) -> Option<f64> {
    let t = t
        .replace("const ", "")
        .replace("unsigned ", "")
        .replace("std::", "");
    Some(match t.trim() {
        "char" | "int8_t" | "uint8_t" | "bool" | "unsigned char" | "signed char" => 1.0,
        "short" | "int16_t" | "uint16_t" | "half" | "__half" => 2.0,
        "int" | "unsigned" | "float" | "int32_t" | "uint32_t" | "uint" => 4.0,
        "long" | "long long" | "double" | "size_t" | "int64_t" | "uint64_t" | "float2" | "int2" => {
            8.0
        }
        "float4" | "int4" | "double2" => 16.0,
        _ => return None,
    })
}

fn floor(s: S) -> S {
    match s {
        S::Num(v) => S::Num(v.floor()),
        S::Bin('/', ..) => S::Call("floor", vec![s]),
        // Already an integer (a call of cdiv, floor, ceil, an integer
        // expression).
        other => other,
    }
}

/// `a op b`, constants folded and identities dropped.
fn bin(op: char, a: S, b: S) -> S {
    match (op, &a, &b) {
        (_, S::Num(x), S::Num(y)) => {
            let (x, y) = (*x, *y);
            let v = match op {
                '+' => Some(x + y),
                '-' => Some(x - y),
                '*' => Some(x * y),
                '/' if y != 0.0 && (x / y).fract() == 0.0 => Some(x / y),
                '%' if y != 0.0 && x.fract() == 0.0 && y.fract() == 0.0 => Some(x % y),
                _ => None,
            };
            if let Some(v) = v.filter(|v| v.abs() <= 9007199254740992.0) {
                return S::Num(v);
            }
        }
        // (x - 2) + 1 is x - 1.
        ('+' | '-', S::Bin(inner @ ('+' | '-'), x, c), S::Num(d)) if matches!(**c, S::Num(_)) => {
            let S::Num(c) = **c else { unreachable!() };
            let sign = |op: char| if op == '+' { 1.0 } else { -1.0 };
            let total = sign(*inner) * c + sign(op) * d;
            return match total {
                0.0 => (**x).clone(),
                t if t > 0.0 => S::Bin('+', x.clone(), Box::new(S::Num(t))),
                t => S::Bin('-', x.clone(), Box::new(S::Num(-t))),
            };
        }
        ('*', S::Num(one), _) if *one == 1.0 => return b,
        ('*' | '/', _, S::Num(one)) if *one == 1.0 => return a,
        ('+', S::Num(zero), _) if *zero == 0.0 => return b,
        ('+' | '-', _, S::Num(zero)) if *zero == 0.0 => return a,
        _ => {}
    }
    S::Bin(op, Box::new(a), Box::new(b))
}

fn prec(s: &S) -> u8 {
    match s {
        S::Bin('+' | '-', ..) => 1,
        S::Bin(..) => 2,
        S::Neg(_) => 3,
        S::Num(v) if *v < 0.0 => 3,
        _ => 4,
    }
}

fn print(s: &S) -> String {
    match s {
        S::Num(v) if v.fract() == 0.0 && v.abs() < 9007199254740992.0 => format!("{}", *v as i64),
        S::Num(v) => format!("{v}"),
        S::Name(n) => n.clone(),
        S::Neg(x) => format!("-{}", wrap(x, prec(x) < 3)),
        S::Call(f, args) => {
            let args: Vec<String> = args.iter().map(print).collect();
            format!("{f}({})", args.join(", "))
        }
        S::Bin(op, a, b) => {
            let p = prec(s);
            let associative = matches!(
                (op, &**b),
                ('+', S::Bin('+' | '-', ..)) | ('*', S::Bin('*', ..))
            );
            let right = prec(b) < p || (prec(b) == p && !associative);
            format!("{} {op} {}", wrap(a, prec(a) < p), wrap(b, right))
        }
    }
}

fn wrap(s: &S, parens: bool) -> String {
    if parens {
        format!("({})", print(s))
    } else {
        print(s)
    }
}

#[cfg(test)]
mod tests {
    use super::super::lex::{lex, Lexed};
    use super::*;

    /// Names as a file's `#define`s give them; `f*` names are floats.
    struct Defines(Lexed);

    impl Names for Defines {
        fn meaning(&self, name: &str) -> Meaning {
            match self.0.defines.get(name) {
                Some(d) if d.params.is_none() => {
                    parse(&d.body).map_or(Meaning::Unknown, Meaning::Is)
                }
                _ if name == "changing" => Meaning::Unknown,
                _ => Meaning::Keep {
                    float: name.starts_with('f'),
                },
            }
        }

        fn macro_fn(&self, name: &str) -> Option<(Vec<String>, Vec<Token>)> {
            let d = self.0.defines.get(name)?;
            Some((d.params.clone()?, d.body.clone()))
        }
    }

    #[test]
    fn c_sizes_read_as_spec_expressions() {
        let names = Defines(lex(
            "#define BLOCK 256\n#define HALO 1\n#define DIV_UP(a, b) (((a) + (b) - 1) / (b))\n\
             #define MIN(a, b) ((a) <= (b) ? (a) : (b))\n",
        ));
        for (c, want) in [
            ("(n + 255) / 256", Some("cdiv(n, 256)")),
            ("(n + BLOCK - 1) / BLOCK", Some("cdiv(n, 256)")),
            ("(n + b - 1) / b", Some("cdiv(n, b)")),
            ("(n - 1 + b) / b", Some("cdiv(n, b)")),
            ("n / b + (n % b != 0)", Some("cdiv(n, b)")),
            ("n / b + ((n % b == 0) ? 0 : 1)", Some("cdiv(n, b)")),
            ("(n % b ? 1 : 0) + n / b", Some("cdiv(n, b)")),
            ("(n - 1) / b + 1", Some("cdiv(n, b)")),
            ("(int)ceil(n / (float)BLOCK)", Some("cdiv(n, 256)")),
            ("(n + 255) >> 8", Some("cdiv(n, 256)")),
            (
                "DIV_UP(cols, BLOCK - 2 * HALO * ph)",
                Some("cdiv(cols, 256 - 2 * ph)"),
            ),
            ("iDivUp(n, 128)", Some("cdiv(n, 128)")),
            ("n / 256", Some("floor(n / 256)")),
            ("fx / 2", Some("fx / 2")),
            ("(int)(fx / 2)", Some("floor(fx / 2)")),
            ("n >> 2", Some("floor(n / 4)")),
            ("n << 3", Some("n * 8")),
            ("MIN(ph, rows - t - 1)", Some("min(ph, rows - t - 1)")),
            ("std::max<int>(a, b)", Some("max(a, b)")),
            ("a > b ? b : a", Some("min(a, b)")),
            ("n * sizeof(float)", Some("n * 4")),
            ("BLOCK * BLOCK * sizeof(double)", Some("524288")),
            ("a - (b - c)", Some("a - (b - c)")),
            ("a * (b % c)", Some("a * (b % c)")),
            ("-(a + 1)", Some("-(a + 1)")),
            ("0x10u * 2", Some("32")),
            ("n / 2 * 2", Some("floor(n / 2) * 2")),
            ("2 * n - 2 + 1", Some("2 * n - 1")),
            ("n + 1 - 1", Some("n")),
            ("p->n", None),
            ("v[0]", None),
            ("n == 1", None),
            ("rand()", None),
            ("changing + 1", None),
            ("seed * 2", None),
        ] {
            let e = parse(&lex(c).tokens).unwrap_or_else(|| panic!("{c} does not parse"));
            assert_eq!(to_spec(&e, &names).as_deref(), want, "{c}");
        }
    }
}
