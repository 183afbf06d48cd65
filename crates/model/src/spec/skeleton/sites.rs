//! A kernel's launch sites in host source text (`gevod spec init`): the
//! first function that launches it with `<<<...>>>`, its launches of the
//! kernel in order with the host loops around them, each loop's bounds
//! and the buffers it swaps, and every size in the spec's terms
//! (`translate`). Plain data for `render_launches`; nothing here knows the
//! kernel's parameters.

use super::cexpr::{closing, parse, split_commas, text, unparse, CExpr};
use super::defs::{defs, globals, swaps, Def, Value};
use super::lex::{lex, Define, Kind, Lexed, Token};
use super::stmts::{functions, Stmt};
use super::translate::{to_spec, Meaning, Names};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::ops::Range;

/// A spec expression, or the C text the spec cannot say.
pub type Expr = Result<String, String>;

/// The launches of one function, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct HostLaunches {
    /// The file as given.
    pub file: String,
    pub function: String,
    pub line: usize,
    pub steps: Vec<HostStep>,
    /// Other places that launch the kernel (`file:line (function)`).
    pub elsewhere: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum HostStep {
    Launch(HostLaunch),
    Loop(HostLoop),
}

#[derive(Debug, Clone, PartialEq)]
pub struct HostLaunch {
    pub line: usize,
    /// The launch as written, on one line.
    pub call: String,
    pub grid: Vec<Expr>,
    pub block: Vec<Expr>,
    pub shared: Option<Expr>,
    pub args: Vec<HostArg>,
    /// The `if` conditions around it within its function.
    pub conditions: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct HostArg {
    /// As written.
    pub text: String,
    pub value: Expr,
    /// Whether it changes from one iteration of a loop around it to the
    /// next (it uses a loop's variable, or something the loop sets).
    pub varies: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct HostLoop {
    pub line: usize,
    /// `for (int t = 0; t < n; t += ph)`, `while (err > tol)`.
    pub head: String,
    /// `None` for a `while` loop or a `for` whose variable is not clear.
    pub var: Option<String>,
    pub from: Expr,
    pub to: Expr,
    pub by: Expr,
    /// Host expressions the loop body exchanges (`std::swap(a, b)`, or
    /// `t = a; a = b; b = t;`).
    pub swaps: Vec<(String, String)>,
    pub body: Vec<HostStep>,
    /// Other kernels the loop launches.
    pub others: Vec<String>,
}

/// Where the kernel `name` (unqualified, no template arguments) is
/// launched in `sources` (file name, text), read in order: the first
/// function holding a launch, or `None`.
pub fn find(name: &str, sources: &[(String, String)]) -> Option<HostLaunches> {
    let mut found: Option<HostLaunches> = None;
    let mut elsewhere = Vec::new();
    for (file, source) in sources {
        let lexed = lex(source);
        let globals = globals(&lexed.tokens);
        for f in functions(&lexed.tokens) {
            let sites = launches_in(&lexed.tokens, f.span.clone(), name);
            let Some(first) = sites.first() else {
                continue;
            };
            if found.is_some() {
                elsewhere.push(format!("{file}:{} ({})", lexed.tokens[*first].line, f.name));
                continue;
            }
            let reader = Reader {
                t: &lexed.tokens,
                lexed: &lexed,
                globals: &globals,
                defs: defs(&lexed.tokens, &f),
                kernel: name,
                memo: RefCell::default(),
            };
            found = Some(HostLaunches {
                file: file.clone(),
                function: f.name.clone(),
                line: f.line,
                steps: reader.walk(&f.body, &mut Context::default()),
                elsewhere: Vec::new(),
            });
        }
    }
    found.map(|mut f| {
        f.elsewhere = elsewhere;
        f
    })
}

/// The `<<<` tokens of launches of `name` in `range`.
fn launches_in(t: &[Token], range: Range<usize>, name: &str) -> Vec<usize> {
    range
        .filter(|&i| t[i].is("<<<") && launched_name(t, i).is_some_and(|n| n == name))
        .collect()
}

/// The unqualified name before the `<<<` at `at`, template arguments
/// skipped.
fn launched_name(t: &[Token], at: usize) -> Option<&str> {
    name_at(t, at).map(|i| t[i].text.as_str())
}

/// The index of that name.
fn name_at(t: &[Token], at: usize) -> Option<usize> {
    let mut i = at.checked_sub(1)?;
    if t[i].is(">") {
        let mut depth = 0;
        loop {
            match t[i].text.as_str() {
                ">" => depth += 1,
                ">>" => depth += 2,
                "<" => depth -= 1,
                ";" | "{" | "}" => return None,
                _ => {}
            }
            if depth == 0 {
                break;
            }
            i = i.checked_sub(1)?;
        }
        i = i.checked_sub(1)?;
    }
    (t[i].kind == Kind::Ident).then_some(i)
}

/// The loops around the statement being read.
#[derive(Default)]
struct Context {
    /// Each enclosing loop's variable (if any) and body span.
    loops: Vec<(Option<String>, Range<usize>)>,
    conditions: Vec<String>,
    /// Names of other kernels launched, for the innermost loop.
    others: Vec<String>,
}

struct Reader<'a> {
    t: &'a [Token],
    lexed: &'a Lexed,
    globals: &'a BTreeMap<String, CExpr>,
    defs: BTreeMap<String, Vec<Def>>,
    kernel: &'a str,
    /// What each name means at a place (name, token, loops around it):
    /// computed once, so that chains of definitions cost their length.
    memo: RefCell<BTreeMap<(String, usize, usize), Meaning>>,
}

/// The names as seen from one place in a function.
#[derive(Clone, Copy)]
struct At<'r> {
    r: &'r Reader<'r>,
    at: usize,
    loops: &'r [(Option<String>, Range<usize>)],
    depth: usize,
}

impl Names for At<'_> {
    fn meaning(&self, name: &str) -> Meaning {
        let key = (name.to_string(), self.at, self.loops.len());
        if let Some(m) = self.r.memo.borrow().get(&key) {
            return m.clone();
        }
        let m = self.uncached(name);
        self.r.memo.borrow_mut().insert(key, m.clone());
        m
    }

    fn macro_fn(&self, name: &str) -> Option<(Vec<String>, Vec<Token>)> {
        let Define { params, body } = self.r.lexed.defines.get(name)?;
        Some((params.clone()?, body.clone()))
    }

    fn member(&self, name: &str, field: &str) -> Option<CExpr> {
        let i = ["x", "y", "z"].iter().position(|x| *x == field)?;
        self.r.dim3_var(name, self.at).map(|mut d| d.swap_remove(i))
    }
}

impl At<'_> {
    fn uncached(&self, name: &str) -> Meaning {
        // A definition through itself, or too deep to follow.
        if self.depth > 8 {
            return Meaning::Unknown;
        }
        if self.loops.iter().any(|(v, _)| v.as_deref() == Some(name)) {
            return Meaning::Keep { float: false };
        }
        if let Some(d) = self
            .r
            .lexed
            .defines
            .get(name)
            .filter(|d| d.params.is_none())
        {
            return parse(&d.body).map_or(Meaning::Unknown, Meaning::Is);
        }
        let defs = self.r.defs.get(name).map_or(&[][..], Vec::as_slice);
        let float = defs
            .iter()
            .any(|d| ["float", "double"].iter().any(|f| d.ty.contains(f)));
        let in_loop = |d: &&Def| self.loops.iter().any(|(_, span)| span.contains(&d.at));
        let inner: Vec<&Def> = defs.iter().filter(in_loop).collect();
        let usable = |d: &Def| match &d.value {
            Value::Expr(e) if d.at < self.at => Some(e.clone()),
            _ => None,
        };
        let translates = |e: &CExpr| {
            let here = At {
                depth: self.depth + 1,
                ..*self
            };
            to_spec(e, &here).is_some()
        };
        if !inner.is_empty() {
            return match (inner.as_slice(), inner.first().and_then(|d| usable(d))) {
                ([_], Some(e)) if translates(&e) => Meaning::Is(e),
                _ => Meaning::Unknown,
            };
        }
        let values: Vec<&Def> = defs
            .iter()
            .filter(|d| !matches!(d.value, Value::Declared))
            .collect();
        if let [d] = values.as_slice() {
            if let Some(e) = usable(d).filter(|e| translates(e)) {
                return Meaning::Is(e);
            }
        }
        if defs.is_empty() {
            if let Some(e) = self.r.globals.get(name).filter(|e| translates(e)) {
                return Meaning::Is(e.clone());
            }
        }
        Meaning::Keep { float }
    }
}

impl<'a> Reader<'a> {
    fn at<'r>(&'r self, at: usize, ctx: &'r Context) -> At<'r> {
        At {
            r: self,
            at,
            loops: &ctx.loops,
            depth: 0,
        }
    }

    fn walk(&self, stmts: &[Stmt], ctx: &mut Context) -> Vec<HostStep> {
        let mut out = Vec::new();
        for s in stmts {
            match s {
                Stmt::Simple(r) => {
                    for at in r.clone().filter(|&i| self.t[i].is("<<<")) {
                        match launched_name(self.t, at) {
                            Some(n) if n == self.kernel => {
                                if let Some(l) = self.launch(at, r.end, ctx) {
                                    out.push(HostStep::Launch(l));
                                }
                            }
                            Some(other) if !ctx.others.iter().any(|o| o == other) => {
                                ctx.others.push(other.to_string())
                            }
                            _ => {}
                        }
                    }
                }
                Stmt::Block(v) => out.extend(self.walk(v, ctx)),
                Stmt::If { cond, then, other } => {
                    ctx.conditions
                        .push(format!("if ({})", text(&self.t[cond.clone()])));
                    out.extend(self.walk(std::slice::from_ref(then), ctx));
                    if let Some(o) = other {
                        ctx.conditions.push("else".into());
                        out.extend(self.walk(std::slice::from_ref(o), ctx));
                        ctx.conditions.pop();
                    }
                    ctx.conditions.pop();
                }
                Stmt::For { head, body, span } => {
                    let head_at = span.start;
                    let mut l = self.for_head(head.clone(), head_at, ctx);
                    out.extend(self.body(&mut l, body, span, ctx));
                }
                Stmt::While { cond, body, span } => {
                    let head = format!("while ({})", text(&self.t[cond.clone()]));
                    let todo = || Err(head.clone());
                    let mut l = HostLoop {
                        line: self.t[span.start].line,
                        head: head.clone(),
                        var: None,
                        from: Ok("0".into()),
                        to: todo(),
                        by: Ok("1".into()),
                        swaps: Vec::new(),
                        body: Vec::new(),
                        others: Vec::new(),
                    };
                    out.extend(self.body(&mut l, body, span, ctx));
                }
            }
        }
        out
    }

    /// A loop's body read; the loop itself when it launches the kernel.
    fn body(
        &self,
        l: &mut HostLoop,
        body: &Stmt,
        span: &Range<usize>,
        ctx: &mut Context,
    ) -> Option<HostStep> {
        ctx.loops.push((l.var.clone(), span.clone()));
        let outer_others = std::mem::take(&mut ctx.others);
        l.body = self.walk(std::slice::from_ref(body), ctx);
        l.others = std::mem::replace(&mut ctx.others, outer_others);
        ctx.loops.pop();
        if l.body.is_empty() {
            return None;
        }
        l.swaps = swaps(self.t, body);
        Some(HostStep::Loop(l.clone()))
    }

    /// `for (init; cond; step)`: variable, start, end (exclusive), step.
    fn for_head(&self, head: Range<usize>, at: usize, ctx: &Context) -> HostLoop {
        let tokens = &self.t[head.clone()];
        let written = format!("for ({})", text(tokens));
        let parts: Vec<&[Token]> = tokens.split(|t| t.is(";")).collect();
        let names = self.at(at, ctx);
        let spec = |e: &CExpr| to_spec(e, &names).ok_or_else(|| written.clone());
        let mut l = HostLoop {
            line: self.t[at].line,
            head: written.clone(),
            var: None,
            from: Err(written.clone()),
            to: Err(written.clone()),
            by: Err(written.clone()),
            swaps: Vec::new(),
            body: Vec::new(),
            others: Vec::new(),
        };
        let [init, cond, step] = parts[..] else {
            return l;
        };
        // init: `int t = e` or `t = e`.
        let eq = init.iter().position(|t| t.is("="));
        let Some(var) = eq
            .and_then(|e| e.checked_sub(1))
            .map(|v| &init[v])
            .filter(|v| v.kind == Kind::Ident)
        else {
            return l;
        };
        let var = var.text.clone();
        l.var = Some(var.clone());
        let first = split_commas(&init[eq.unwrap_or(0) + 1..]);
        l.from = first
            .first()
            .and_then(|e| parse(e))
            .map_or(Err(written.clone()), |e| spec(&e));
        // step: `t++`, `t += e`, `t = t + e`, and the decrements.
        let is_var = |t: &Token| t.text == var;
        let by = match step {
            [v, op] | [op, v] if is_var(v) && op.is("++") => Some(CExpr::Num {
                value: 1.0,
                float: false,
            }),
            [v, op] | [op, v] if is_var(v) && op.is("--") => Some(CExpr::Num {
                value: -1.0,
                float: false,
            }),
            [v, op, rest @ ..] if is_var(v) && (op.is("+=") || op.is("-=")) => {
                parse(rest).map(|e| {
                    if op.is("-=") {
                        CExpr::Unary("-".into(), Box::new(e))
                    } else {
                        e
                    }
                })
            }
            [v, op, w, plus, rest @ ..]
                if is_var(v) && op.is("=") && is_var(w) && (plus.is("+") || plus.is("-")) =>
            {
                parse(rest).map(|e| {
                    if plus.is("-") {
                        CExpr::Unary("-".into(), Box::new(e))
                    } else {
                        e
                    }
                })
            }
            _ => None,
        };
        let down = matches!(&by, Some(CExpr::Unary(..)))
            || matches!(&by, Some(CExpr::Num { value, .. }) if *value < 0.0);
        l.by = by.map_or(Err(written.clone()), |e| spec(&e));
        // cond: `t < e`, `t <= e`, `t != e` (and `>` `>=` going down).
        let to = match parse(cond) {
            Some(CExpr::Binary(op, a, b)) => {
                let (op, bound) = match (&*a, &*b) {
                    (CExpr::Name(v), e) if *v == var => (op.clone(), e.clone()),
                    (e, CExpr::Name(v)) if *v == var => (flip(&op), e.clone()),
                    _ => (String::new(), CExpr::Name(String::new())),
                };
                let one = CExpr::Num {
                    value: 1.0,
                    float: false,
                };
                match (op.as_str(), down) {
                    ("<" | "!=", false) | (">" | "!=", true) => Some(bound),
                    ("<=", false) => Some(plus_one(bound)),
                    (">=", true) => Some(CExpr::Binary("-".into(), Box::new(bound), Box::new(one))),
                    _ => None,
                }
            }
            _ => None,
        };
        l.to = to.map_or(Err(written.clone()), |e| spec(&e));
        l
    }

    fn launch(&self, at: usize, end: usize, ctx: &Context) -> Option<HostLaunch> {
        let t = self.t;
        let mut depth = 0i32;
        let close = (at + 1..end).find(|&i| {
            match t[i].text.as_str() {
                "(" | "[" | "{" => depth += 1,
                ")" | "]" | "}" => depth -= 1,
                _ => {}
            }
            depth == 0 && t[i].is(">>>")
        })?;
        let args_close =
            closing(t, close + 1).filter(|_| t.get(close + 1).is_some_and(|p| p.is("(")))?;
        let mut start = name_at(t, at)?;
        while start >= 2 && t[start - 1].is("::") && t[start - 2].kind == Kind::Ident {
            start -= 2;
        }
        let names = self.at(at, ctx);
        let spec = |tokens: &[Token]| -> Expr {
            parse(tokens)
                .and_then(|e| to_spec(&e, &names))
                .ok_or_else(|| text(tokens))
        };
        let config = split_commas(&t[at + 1..close]);
        let dims = |i: usize| config.get(i).map(|c| self.dims(c, &names, &spec));
        let loop_names: Vec<&str> = ctx.loops.iter().filter_map(|(v, _)| v.as_deref()).collect();
        let varies = |tokens: &[Token], value: &Expr| match value {
            Ok(v) => spec_names(v)
                .iter()
                .any(|n| loop_names.contains(&n.as_str())),
            Err(_) => tokens.iter().any(|t| {
                t.kind == Kind::Ident
                    && (loop_names.contains(&t.text.as_str())
                        || names.meaning(&t.text) == Meaning::Unknown)
            }),
        };
        Some(HostLaunch {
            line: t[at].line,
            call: text(&t[start..=args_close]),
            grid: dims(0)?,
            block: dims(1)?,
            shared: config.get(2).map(|c| spec(c)),
            args: split_commas(&t[close + 2..args_close])
                .into_iter()
                .map(|a| {
                    let value = spec(a);
                    HostArg {
                        text: text(a),
                        varies: varies(a, &value),
                        value,
                    }
                })
                .collect(),
            conditions: ctx.conditions.clone(),
        })
    }

    /// A launch's grid or block: `dim3` variables and `dim3(...)` read
    /// into their dimensions (trailing 1s dropped), else one expression.
    fn dims(&self, c: &[Token], names: &At, spec: &dyn Fn(&[Token]) -> Expr) -> Vec<Expr> {
        let items: Option<Vec<CExpr>> = match parse(c) {
            Some(CExpr::Call(f, args)) if f == "dim3" => Some(args),
            Some(CExpr::Name(n)) => self.dim3_var(&n, names.at),
            _ => None,
        };
        let Some(items) = items else {
            return vec![spec(c)];
        };
        let mut out: Vec<Expr> = items
            .iter()
            .map(|e| to_spec(e, names).ok_or_else(|| unparse(e)))
            .collect();
        while out.len() > 1 && out.last() == Some(&Ok("1".into())) {
            out.pop();
        }
        out
    }

    /// A `dim3` variable's dimensions as set before `at`.
    fn dim3_var(&self, name: &str, at: usize) -> Option<Vec<CExpr>> {
        let defs = self.defs.get(name)?;
        if !defs.iter().any(|d| d.ty.contains("dim3")) {
            return None;
        }
        let one = CExpr::Num {
            value: 1.0,
            float: false,
        };
        let mut dims = vec![one.clone(), one.clone(), one];
        for d in defs.iter().filter(|d| d.at < at) {
            match &d.value {
                Value::Dims(items) => {
                    dims.truncate(0);
                    dims.extend(items.iter().cloned());
                    dims.resize(
                        3,
                        CExpr::Num {
                            value: 1.0,
                            float: false,
                        },
                    );
                }
                Value::Member(f, e) => {
                    let i = ["x", "y", "z"].iter().position(|x| *x == f.as_str())?;
                    dims[i] = e.clone();
                }
                Value::Declared => {}
                _ => return None,
            }
        }
        Some(dims)
    }
}

fn flip(op: &str) -> String {
    match op {
        "<" => ">",
        ">" => "<",
        "<=" => ">=",
        ">=" => "<=",
        other => other,
    }
    .to_string()
}

/// `e + 1`, or `x` for `x - 1`.
fn plus_one(e: CExpr) -> CExpr {
    match e {
        CExpr::Binary(op, x, one)
            if op == "-" && matches!(*one, CExpr::Num { value, .. } if value == 1.0) =>
        {
            *x
        }
        e => CExpr::Binary(
            "+".into(),
            Box::new(e),
            Box::new(CExpr::Num {
                value: 1.0,
                float: false,
            }),
        ),
    }
}

/// The names a spec expression uses (functions aside).
pub fn spec_names(expr: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let tokens = lex(expr).tokens;
    for (i, t) in tokens.iter().enumerate() {
        let call = tokens.get(i + 1).is_some_and(|n| n.is("("));
        if t.kind == Kind::Ident && !call && !out.contains(&t.text) {
            out.push(t.text.clone());
        }
    }
    out
}
