//! C and C++ expressions as a launch site writes them (`(n + 255) / 256`,
//! `dim3(cdiv(w, 16), h)`, `MIN(ph, rows - t - 1)`), parsed from tokens
//! into a small tree: enough of the grammar for sizes and arguments, with
//! casts, `sizeof`, calls, indexing and members; anything else (lambdas,
//! assignments, `new`) does not parse.

use super::lex::{Kind, Token};

/// A C expression.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum CExpr {
    /// A numeric literal; `float` when written as one (`1.5`, `2.f`).
    Num {
        value: f64,
        float: bool,
    },
    /// A name, qualified names joined (`std::min`).
    Name(String),
    Unary(String, Box<CExpr>),
    Binary(String, Box<CExpr>, Box<CExpr>),
    Ternary(Box<CExpr>, Box<CExpr>, Box<CExpr>),
    Call(String, Vec<CExpr>),
    /// `(T) x`, `static_cast<T>(x)`, `T(x)` for a built-in `T`.
    Cast(String, Box<CExpr>),
    Index(Box<CExpr>, Box<CExpr>),
    Member(Box<CExpr>, String),
    /// `sizeof(T)` or `sizeof x`: the operand's text.
    SizeOf(String),
    Literal(String),
}

/// Built-in type words a cast may be made of.
const TYPE_WORDS: &[&str] = &[
    "int",
    "unsigned",
    "signed",
    "long",
    "short",
    "char",
    "float",
    "double",
    "bool",
    "size_t",
    "ssize_t",
    "ptrdiff_t",
    "const",
    "int8_t",
    "int16_t",
    "int32_t",
    "int64_t",
    "uint8_t",
    "uint16_t",
    "uint32_t",
    "uint64_t",
    "uint",
    "std",
    "half",
    "__half",
];

/// Binary operators by binding strength, loosest first.
const LEVELS: &[&[&str]] = &[
    &["||"],
    &["&&"],
    &["|"],
    &["^"],
    &["&"],
    &["==", "!="],
    &["<", ">", "<=", ">="],
    &["<<", ">>"],
    &["+", "-"],
    &["*", "/", "%"],
];

/// The whole token run as one expression, or `None`.
pub(crate) fn parse(tokens: &[Token]) -> Option<CExpr> {
    let mut p = Parser { t: tokens, at: 0 };
    let e = p.ternary()?;
    (p.at == tokens.len()).then_some(e)
}

/// Splits a token run at its top-level commas (not inside `()`, `[]`,
/// `{}`); an empty run gives no items.
pub(crate) fn split_commas(tokens: &[Token]) -> Vec<&[Token]> {
    if tokens.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, t) in tokens.iter().enumerate() {
        match t.text.as_str() {
            "(" | "[" | "{" => depth += 1,
            ")" | "]" | "}" => depth -= 1,
            "," if depth == 0 => {
                out.push(&tokens[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&tokens[start..]);
    out
}

/// The index of the bracket closing the one at `open` (`(`, `[`, `{`, or
/// `<` of a template argument list, which counts only `<` and `>`).
pub(crate) fn closing(tokens: &[Token], open: usize) -> Option<usize> {
    let (o, c): (&[&str], &[&str]) = match tokens.get(open)?.text.as_str() {
        "<" => (&["<"], &[">", ">>"]),
        "(" | "[" | "{" => (&["(", "[", "{"], &[")", "]", "}"]),
        _ => return None,
    };
    let mut depth = 0i32;
    for (i, t) in tokens.iter().enumerate().skip(open) {
        if o.contains(&t.text.as_str()) {
            depth += 1;
        } else if c.contains(&t.text.as_str()) {
            depth -= if t.is(">>") { 2 } else { 1 };
            if depth <= 0 {
                return Some(i);
            }
        } else if o[0] == "<" && matches!(t.text.as_str(), ";" | "{" | "}") {
            return None;
        }
    }
    None
}

/// Tokens as one line of text, spaced as a person would write them.
pub(crate) fn text(tokens: &[Token]) -> String {
    // Template argument brackets: `<` after a name, closed by a `>` that a
    // call, `<<<` or `::` follows.
    let mut angle = vec![false; tokens.len()];
    for i in 1..tokens.len() {
        if tokens[i].is("<") && word(&tokens[i - 1].text) {
            if let Some(c) = closing(tokens, i).filter(|&c| tokens[c].is(">")) {
                if tokens
                    .get(c + 1)
                    .is_some_and(|n| matches!(n.text.as_str(), "(" | "<<<" | "::"))
                {
                    angle[i] = true;
                    angle[c] = true;
                }
            }
        }
    }
    let mut out = String::new();
    for (i, t) in tokens.iter().enumerate() {
        let at = |back: usize| i.checked_sub(back).map(|p| tokens[p].text.as_str());
        let prev = at(1);
        let tight_before = matches!(
            t.text.as_str(),
            ")" | "]" | "," | ";" | "." | "->" | "::" | "<<<" | ">>>"
        ) || (t.is("(")
            && prev.is_some_and(|p| word(p) || p == ">>>" || p == "]"))
            || (t.is("[") && prev.is_some_and(|p| word(p) || p == "]" || p == ")"))
            || (matches!(t.text.as_str(), "++" | "--") && prev.is_some_and(word));
        // A prefix operator: one with nothing, or an operator, before it.
        let unary = prev
            .is_some_and(|p| matches!(p, "-" | "+" | "*" | "&" | "!" | "~" | "++" | "--"))
            && at(2).is_none_or(|b| !word(b) && b != ")" && b != "]");
        let template = angle[i] || (i > 0 && angle[i - 1] && tokens[i - 1].is("<"));
        let tight_after = unary
            || template
            || (t.is("(") && i > 0 && angle[i - 1])
            || prev.is_some_and(|p| matches!(p, "(" | "[" | "." | "->" | "::" | "<<<"));
        if i > 0 && !tight_before && !tight_after {
            out.push(' ');
        }
        out += &t.text;
    }
    out
}

/// An expression written back as C (for a TODO that quotes it).
pub(crate) fn unparse(e: &CExpr) -> String {
    let paren = |x: &CExpr| match x {
        CExpr::Binary(..) | CExpr::Ternary(..) => format!("({})", unparse(x)),
        _ => unparse(x),
    };
    match e {
        CExpr::Num { value, float } if !float && value.fract() == 0.0 => {
            format!("{}", *value as i64)
        }
        CExpr::Num { value, .. } => format!("{value:?}"),
        CExpr::Name(n) | CExpr::Literal(n) => n.clone(),
        CExpr::Unary(op, x) => match op.strip_prefix("post") {
            Some(op) => format!("{}{op}", paren(x)),
            None => format!("{op}{}", paren(x)),
        },
        CExpr::Binary(op, a, b) => format!("{} {op} {}", paren(a), paren(b)),
        CExpr::Ternary(c, a, b) => format!("{} ? {} : {}", paren(c), paren(a), paren(b)),
        CExpr::Call(f, args) => {
            let args: Vec<String> = args.iter().map(unparse).collect();
            format!("{f}({})", args.join(", "))
        }
        CExpr::Cast(t, x) => format!("({t}){}", paren(x)),
        CExpr::Index(a, i) => format!("{}[{}]", paren(a), unparse(i)),
        CExpr::Member(a, f) => format!("{}.{f}", paren(a)),
        CExpr::SizeOf(t) => format!("sizeof({t})"),
    }
}

fn word(s: &str) -> bool {
    s.chars()
        .next()
        .is_some_and(|c| c.is_alphanumeric() || c == '_')
}

struct Parser<'a> {
    t: &'a [Token],
    at: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&str> {
        self.t.get(self.at).map(|t| t.text.as_str())
    }

    fn eat(&mut self, s: &str) -> bool {
        let yes = self.peek() == Some(s);
        self.at += usize::from(yes);
        yes
    }

    fn ternary(&mut self) -> Option<CExpr> {
        let c = self.binary(0)?;
        if !self.eat("?") {
            return Some(c);
        }
        let a = self.ternary()?;
        if !self.eat(":") {
            return None;
        }
        let b = self.ternary()?;
        Some(CExpr::Ternary(Box::new(c), Box::new(a), Box::new(b)))
    }

    fn binary(&mut self, level: usize) -> Option<CExpr> {
        if level == LEVELS.len() {
            return self.unary();
        }
        let mut left = self.binary(level + 1)?;
        while let Some(op) = self.peek().filter(|p| LEVELS[level].contains(p)) {
            let op = op.to_string();
            self.at += 1;
            let right = self.binary(level + 1)?;
            left = CExpr::Binary(op, Box::new(left), Box::new(right));
        }
        Some(left)
    }

    fn unary(&mut self) -> Option<CExpr> {
        match self.peek()? {
            op @ ("-" | "+" | "!" | "~" | "*" | "&" | "++" | "--") => {
                let op = op.to_string();
                self.at += 1;
                Some(CExpr::Unary(op, Box::new(self.unary()?)))
            }
            "sizeof" => {
                self.at += 1;
                let start = self.at;
                if self.peek() == Some("(") {
                    let close = closing(self.t, self.at)?;
                    self.at = close + 1;
                    return Some(CExpr::SizeOf(text(&self.t[start + 1..close])));
                }
                self.unary()?;
                Some(CExpr::SizeOf(text(&self.t[start..self.at])))
            }
            "(" => {
                let close = closing(self.t, self.at)?;
                let inside = &self.t[self.at + 1..close];
                if is_type(inside) && close + 1 < self.t.len() {
                    self.at = close + 1;
                    return Some(CExpr::Cast(text(inside), Box::new(self.unary()?)));
                }
                self.postfix()
            }
            _ => self.postfix(),
        }
    }

    fn postfix(&mut self) -> Option<CExpr> {
        let mut e = self.primary()?;
        loop {
            match self.peek() {
                Some("[") => {
                    let close = closing(self.t, self.at)?;
                    let index = parse(&self.t[self.at + 1..close])?;
                    self.at = close + 1;
                    e = CExpr::Index(Box::new(e), Box::new(index));
                }
                Some("." | "->") => {
                    self.at += 1;
                    let field = self.t.get(self.at).filter(|t| t.kind == Kind::Ident)?;
                    self.at += 1;
                    e = CExpr::Member(Box::new(e), field.text.clone());
                }
                Some("++" | "--") => {
                    let op = self.peek()?.to_string();
                    self.at += 1;
                    e = CExpr::Unary(format!("post{op}"), Box::new(e));
                }
                _ => return Some(e),
            }
        }
    }

    fn primary(&mut self) -> Option<CExpr> {
        let t = self.t.get(self.at)?;
        match t.kind {
            Kind::Number => {
                self.at += 1;
                number(&t.text)
            }
            Kind::Literal => {
                self.at += 1;
                Some(CExpr::Literal(t.text.clone()))
            }
            Kind::Punct if t.is("(") => {
                let close = closing(self.t, self.at)?;
                let inner = parse(&self.t[self.at + 1..close])?;
                self.at = close + 1;
                Some(inner)
            }
            Kind::Punct if t.is("::") => {
                self.at += 1;
                self.primary()
            }
            Kind::Punct => None,
            Kind::Ident => self.named(),
        }
    }

    /// A name, a call, or a C++ cast.
    fn named(&mut self) -> Option<CExpr> {
        let mut name = self.t[self.at].text.clone();
        self.at += 1;
        while self.peek() == Some("::") {
            let next = self.t.get(self.at + 1).filter(|t| t.kind == Kind::Ident)?;
            name = format!("{name}::{}", next.text);
            self.at += 2;
        }
        let base = name.rsplit("::").next().unwrap_or(&name).to_string();
        let mut cast_to = None;
        // Template arguments only where a call follows them: `min<int>(`,
        // `static_cast<float>(`; elsewhere `<` compares.
        if self.peek() == Some("<") {
            if let Some(close) = closing(self.t, self.at) {
                if self.t.get(close + 1).is_some_and(|t| t.is("(")) && self.t[close].is(">") {
                    if base.ends_with("_cast") {
                        cast_to = Some(text(&self.t[self.at + 1..close]));
                    }
                    self.at = close + 1;
                }
            }
        }
        if self.peek() != Some("(") {
            return Some(CExpr::Name(name));
        }
        let close = closing(self.t, self.at)?;
        let args: Option<Vec<CExpr>> = split_commas(&self.t[self.at + 1..close])
            .into_iter()
            .map(parse)
            .collect();
        self.at = close + 1;
        let mut args = args?;
        if let Some(ty) = cast_to {
            return (args.len() == 1).then(|| CExpr::Cast(ty, Box::new(args.remove(0))));
        }
        if TYPE_WORDS.contains(&base.as_str()) && args.len() == 1 && base != "std" {
            return Some(CExpr::Cast(name, Box::new(args.remove(0))));
        }
        Some(CExpr::Call(name, args))
    }
}

/// Whether the tokens inside parentheses spell a built-in type (a cast).
fn is_type(inside: &[Token]) -> bool {
    !inside.is_empty()
        && inside
            .iter()
            .all(|t| TYPE_WORDS.contains(&t.text.as_str()) || t.is("*") || t.is("::"))
        && inside
            .iter()
            .any(|t| t.kind == Kind::Ident && t.text != "const" && t.text != "std")
}

/// A C numeric literal: decimal, hex, octal or binary integers with their
/// suffixes, floats with an `f` suffix or none; digit separators allowed.
pub(crate) fn number(text: &str) -> Option<CExpr> {
    let t = text.replace('\'', "").to_ascii_lowercase();
    let (digits, radix) = if let Some(h) = t.strip_prefix("0x") {
        (h.to_string(), 16)
    } else if let Some(b) = t.strip_prefix("0b") {
        (b.to_string(), 2)
    } else {
        (t.clone(), 10)
    };
    let int_part = digits.trim_end_matches(['u', 'l']);
    let is_float = radix == 10 && (int_part.contains('.') || int_part.contains('e'));
    if is_float {
        let f = int_part.trim_end_matches('f');
        return f
            .parse::<f64>()
            .ok()
            .map(|value| CExpr::Num { value, float: true });
    }
    if radix == 10 && int_part.ends_with('f') {
        return None;
    }
    let radix = if radix == 10 && int_part.len() > 1 && int_part.starts_with('0') {
        8
    } else {
        radix
    };
    let value = u64::from_str_radix(int_part, radix).ok()?;
    (value <= 1 << 53).then_some(CExpr::Num {
        value: value as f64,
        float: false,
    })
}

#[cfg(test)]
mod tests {
    use super::super::lex::lex;
    use super::*;

    fn p(s: &str) -> Option<CExpr> {
        parse(&lex(s).tokens)
    }

    fn num(v: f64) -> CExpr {
        CExpr::Num {
            value: v,
            float: false,
        }
    }

    fn name(s: &str) -> Box<CExpr> {
        Box::new(CExpr::Name(s.into()))
    }

    #[test]
    fn precedence_casts_and_calls() {
        assert_eq!(
            p("(n + 255) / 256"),
            Some(CExpr::Binary(
                "/".into(),
                Box::new(CExpr::Binary("+".into(), name("n"), Box::new(num(255.0)))),
                Box::new(num(256.0))
            ))
        );
        assert_eq!(
            p("(float)n / 2"),
            Some(CExpr::Binary(
                "/".into(),
                Box::new(CExpr::Cast("float".into(), name("n"))),
                Box::new(num(2.0))
            ))
        );
        assert_eq!(
            p("std::min<int>(a, b - 1)"),
            Some(CExpr::Call(
                "std::min".into(),
                vec![
                    CExpr::Name("a".into()),
                    CExpr::Binary("-".into(), name("b"), Box::new(num(1.0)))
                ]
            ))
        );
        assert_eq!(
            p("static_cast<unsigned>(x)"),
            Some(CExpr::Cast("unsigned".into(), name("x")))
        );
        assert_eq!(
            p("a < b ? a : b"),
            Some(CExpr::Ternary(
                Box::new(CExpr::Binary("<".into(), name("a"), name("b"))),
                name("a"),
                name("b")
            ))
        );
        assert_eq!(p("buf[src]"), Some(CExpr::Index(name("buf"), name("src"))));
        assert_eq!(
            p("sizeof(float) * n").map(|e| matches!(e, CExpr::Binary(..))),
            Some(true)
        );
        assert_eq!(p("a = b"), None);
        assert_eq!(p("f(a, )"), None);
    }

    #[test]
    fn literals() {
        for (text, value, float) in [
            ("256", 256.0, false),
            ("256u", 256.0, false),
            ("0x100", 256.0, false),
            ("1'024", 1024.0, false),
            ("010", 8.0, false),
            ("1.5f", 1.5, true),
            ("2.", 2.0, true),
            ("1e3", 1000.0, true),
        ] {
            assert_eq!(number(text), Some(CExpr::Num { value, float }), "{text}");
        }
        assert_eq!(number("12abc"), None);
    }

    #[test]
    fn text_reads_as_written() {
        assert_eq!(
            text(&lex("k<<<dim3(a,b),256>>>(x[0],-n, f( y ), a-b, *p, i++)").tokens),
            "k<<<dim3(a, b), 256>>>(x[0], -n, f(y), a - b, *p, i++)"
        );
        assert_eq!(
            text(&lex("ns::k<float, 4><<<g, b>>>(std::min<int>(a, b), a < b, ++i)").tokens),
            "ns::k<float, 4><<<g, b>>>(std::min<int>(a, b), a < b, ++i)"
        );
    }
}
