//! What host code sets, as launch reading needs it: each name's
//! declarations, assignments and other changes in a function (and the
//! constants of the file), and the swaps a loop body makes.

use super::cexpr::{closing, parse, split_commas, text, CExpr};
use super::lex::{Kind, Token};
use super::stmts::{Function, Stmt};
use std::collections::BTreeMap;
use std::ops::Range;

/// What a name was set to: by a declaration's initializer, an assignment,
/// or something else that changes it.
#[derive(Debug, Clone)]
pub(crate) struct Def {
    pub(crate) at: usize,
    pub(crate) ty: String,
    pub(crate) value: Value,
}

#[derive(Debug, Clone)]
pub(crate) enum Value {
    Expr(CExpr),
    /// `dim3 g(a, b)`, `dim3 g = dim3(a, b)`, `dim3 g{a, b}`.
    Dims(Vec<CExpr>),
    /// `g.x = e`.
    Member(String, CExpr),
    /// Declared without a value.
    Declared,
    /// Changed some other way (`+=`, `++`, an initializer gevo cannot read).
    Changed,
}

/// Constants declared anywhere in the file (`const int N = 64;`), for
/// names a function does not set itself; the first one of a name counts.
pub(crate) fn globals(t: &[Token]) -> BTreeMap<String, CExpr> {
    let mut out = BTreeMap::new();
    let mut start = 0;
    for i in 0..t.len() {
        if !matches!(t[i].text.as_str(), ";" | "{" | "}") {
            continue;
        }
        let stmt = &t[start..i];
        if t[i].is(";") && stmt.iter().any(|x| x.is("const") || x.is("constexpr")) {
            for (name, def) in declarators(stmt, start) {
                if let Value::Expr(e) = def.value {
                    out.entry(name).or_insert(e);
                }
            }
        }
        start = i + 1;
    }
    out
}

/// Every name a function body sets, with where and how.
pub(crate) fn defs(t: &[Token], f: &Function) -> BTreeMap<String, Vec<Def>> {
    let mut out: BTreeMap<String, Vec<Def>> = BTreeMap::new();
    let mut add = |name: String, def: Def| out.entry(name).or_default().push(def);
    let mut visit = Vec::new();
    collect_simple(&f.body, &mut visit);
    for range in visit {
        let stmt = &t[range.clone()];
        for (name, def) in declarators(stmt, range.start) {
            add(name, def);
        }
        // `x++`, `++x`, `f(&x)`: changed.
        for (i, tok) in stmt.iter().enumerate() {
            let near = |d: isize| stmt.get(i.wrapping_add_signed(d)).map(|x| x.text.as_str());
            let changed = tok.kind == Kind::Ident
                && (matches!(near(1), Some("++" | "--"))
                    || matches!(near(-1), Some("++" | "--"))
                    || (near(-1) == Some("&") && matches!(near(-2), Some("(" | ","))));
            if changed {
                add(
                    tok.text.clone(),
                    Def {
                        at: range.start + i,
                        ty: String::new(),
                        value: Value::Changed,
                    },
                );
            }
        }
    }
    out
}

/// The simple statements of `stmts` and of `for` heads, recursively.
fn collect_simple(stmts: &[Stmt], out: &mut Vec<Range<usize>>) {
    for s in stmts {
        match s {
            Stmt::Simple(r) => out.push(r.clone()),
            Stmt::Block(v) => collect_simple(v, out),
            Stmt::For { head, body, .. } => {
                out.push(head.clone());
                collect_simple(std::slice::from_ref(body), out);
            }
            Stmt::While { body, .. } => collect_simple(std::slice::from_ref(body), out),
            Stmt::If { then, other, .. } => {
                collect_simple(std::slice::from_ref(then), out);
                if let Some(o) = other {
                    collect_simple(std::slice::from_ref(o), out);
                }
            }
        }
    }
}

/// Words that start statements which declare nothing.
const NOT_TYPES: &[&str] = &[
    "return", "delete", "throw", "goto", "case", "else", "using", "typedef",
];

/// The names a statement (or a `for` head's parts) sets: declarations
/// with or without values, assignments, compound assignments. `start` is
/// the statement's first token's index.
fn declarators(stmt: &[Token], start: usize) -> Vec<(String, Def)> {
    let mut out = Vec::new();
    // A `for` head: its parts, each on its own.
    if stmt.iter().any(|t| t.is(";")) {
        let mut at = 0;
        for part in stmt.split(|t| t.is(";")) {
            out.extend(declarators(part, start + at));
            at += part.len() + 1;
        }
        return out;
    }
    let Some(first) = stmt.first() else {
        return out;
    };
    if NOT_TYPES.contains(&first.text.as_str()) {
        return out;
    }
    let def = |at: usize, ty: &str, value| Def {
        at: start + at,
        ty: ty.to_string(),
        value,
    };
    // Assignments: `x = e`, `g.x = e`, `x += e`.
    let assign = stmt.iter().position(|t| {
        matches!(
            t.text.as_str(),
            "=" | "+=" | "-=" | "*=" | "/=" | "%=" | "<<=" | ">>=" | "&=" | "|=" | "^="
        )
    });
    if let Some(eq) = assign {
        let lhs = &stmt[..eq];
        let rhs = || parse(&stmt[eq + 1..]);
        let plain = stmt[eq].is("=");
        match lhs {
            [x] if x.kind == Kind::Ident => {
                let value = rhs().filter(|_| plain).map_or(Value::Changed, Value::Expr);
                out.push((x.text.clone(), def(0, "", value)));
                return out;
            }
            [x, dot, field] if x.kind == Kind::Ident && dot.is(".") => {
                let value = rhs()
                    .filter(|_| plain)
                    .map_or(Value::Changed, |e| Value::Member(field.text.clone(), e));
                out.push((x.text.clone(), def(0, "", value)));
                return out;
            }
            _ => {}
        }
    }
    // Declarations: a type, then declarators separated by commas.
    let Some(name_at) = declared_name(stmt) else {
        return out;
    };
    let ty = text(&stmt[..name_at]);
    let mut at = name_at;
    for d in split_commas(&stmt[name_at..]) {
        let offset = at;
        at += d.len() + 1;
        let Some(name) = d.iter().find(|t| t.kind == Kind::Ident) else {
            continue;
        };
        let lead = d.iter().position(|t| t.kind == Kind::Ident).unwrap_or(0);
        let rest = &d[lead + 1..];
        let value = match rest.first().map(|t| t.text.as_str()) {
            None => Value::Declared,
            Some("=") => match parse(&rest[1..]) {
                Some(CExpr::Call(f, args)) if f == "dim3" => Value::Dims(args),
                Some(e) if ty.contains("dim3") => Value::Dims(vec![e]),
                Some(e) => Value::Expr(e),
                None => brace_items(&rest[1..]).map_or(Value::Changed, Value::Dims),
            },
            Some("(" | "{") => {
                let items = closing(rest, 0)
                    .filter(|c| *c + 1 == rest.len())
                    .and_then(|c| {
                        split_commas(&rest[1..c])
                            .into_iter()
                            .map(parse)
                            .collect::<Option<Vec<_>>>()
                    });
                match items {
                    Some(items) if ty.contains("dim3") => Value::Dims(items),
                    Some(mut items) if items.len() == 1 => Value::Expr(items.remove(0)),
                    _ => Value::Changed,
                }
            }
            Some("[") => Value::Declared,
            _ => Value::Changed,
        };
        out.push((name.text.clone(), def(offset + lead, &ty, value)));
    }
    out
}

/// `{a, b}` as expressions.
fn brace_items(t: &[Token]) -> Option<Vec<CExpr>> {
    let close = closing(t, 0).filter(|c| t[0].is("{") && *c + 1 == t.len())?;
    split_commas(&t[1..close]).into_iter().map(parse).collect()
}

/// Where the first declared name of a declaration is: after one or more
/// type words (identifiers, `::`, `*`, `&`, template arguments), never
/// right after `::` (a qualified call such as `std::swap(a, b)`).
fn declared_name(stmt: &[Token]) -> Option<usize> {
    let mut i = 0;
    let mut words = 0;
    while i < stmt.len() {
        let t = &stmt[i];
        match t.text.as_str() {
            "<" => i = closing(stmt, i)?,
            "::" | "*" | "&" | "&&" => {}
            _ if t.kind == Kind::Ident => {
                let next = stmt.get(i + 1).map(|n| n.text.as_str());
                let prev = i.checked_sub(1).map(|p| stmt[p].text.as_str());
                let ends = matches!(next, None | Some("=" | "(" | "{" | "[" | ","));
                if ends && words > 0 && prev != Some("::") {
                    return Some(i);
                }
                words += 1;
            }
            _ => return None,
        }
        i += 1;
    }
    None
}

/// The swaps a loop body makes: `std::swap(a, b)` (any `swap`), or three
/// assignments through a temporary (`t = a; a = b; b = t;`).
pub(crate) fn swaps(t: &[Token], body: &Stmt) -> Vec<(String, String)> {
    let mut simple = Vec::new();
    flat_simple(body, &mut simple);
    let mut out = Vec::new();
    for (i, r) in simple.iter().enumerate() {
        let s = &t[r.clone()];
        let call = s
            .iter()
            .position(|x| x.is("swap"))
            .filter(|&p| s.get(p + 1).is_some_and(|x| x.is("(")));
        if let Some(p) = call {
            if let Some(c) = closing(s, p + 1) {
                if let [a, b] = split_commas(&s[p + 2..c])[..] {
                    out.push((text(a), text(b)));
                }
            }
            continue;
        }
        // tmp = a; a = b; b = tmp;
        let Some([s2, s3]) = simple
            .get(i + 1..i + 3)
            .map(|x| [&t[x[0].clone()], &t[x[1].clone()]])
        else {
            continue;
        };
        let assigned = |s: &[Token]| {
            let eq = s.iter().position(|x| x.is("="))?;
            let lhs = s[..eq].last()?;
            Some((lhs.text.clone(), text(&s[eq + 1..]), eq))
        };
        if let (Some((tmp, a, _)), Some((a2, b, eq2)), Some((b2, tmp2, _))) =
            (assigned(s), assigned(s2), assigned(s3))
        {
            if eq2 == 1 && a == a2 && b == b2 && tmp == tmp2 && a != b {
                out.push((a, b));
            }
        }
    }
    out
}

/// A loop body's simple statements in order, not those of nested loops.
fn flat_simple(s: &Stmt, out: &mut Vec<Range<usize>>) {
    match s {
        Stmt::Simple(r) => out.push(r.clone()),
        Stmt::Block(v) => v.iter().for_each(|s| flat_simple(s, out)),
        Stmt::If { then, other, .. } => {
            flat_simple(then, out);
            if let Some(o) = other {
                flat_simple(o, out);
            }
        }
        Stmt::For { .. } | Stmt::While { .. } => {}
    }
}
