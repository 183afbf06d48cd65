//! Arithmetic expressions over test parameters: `ceil(nx / 16)`, `n * n + 1`.
//!
//! Grammar (usual precedence, left-associative):
//!
//! ```text
//! expr    := term (('+' | '-') term)*
//! term    := unary (('*' | '/' | '%') unary)*
//! unary   := ('-' | '+') unary | primary
//! primary := number | name | name '(' expr (',' expr)* ')' | '(' expr ')'
//! ```
//!
//! Numbers are decimal integer or float literals (`16`, `0.5`, `1e6`). Names
//! are `[A-Za-z_][A-Za-z0-9_]*` and refer to test parameters. Functions:
//! `ceil(x)`, `floor(x)`, `min(a, b, ...)`, `max(a, b, ...)`, `cdiv(a, b)`.
//! Everything is evaluated in `f64`; `/` is real division and `%` the
//! remainder with the sign of the dividend (as in C). `cdiv(a, b)` is the
//! ceiling of `a / b`, computed exactly on integers when both are integral.

use std::collections::BTreeMap;
use std::fmt;

/// A parsed expression.
#[derive(Debug, Clone, PartialEq)]
pub struct Expr {
    source: String,
    ast: Ast,
}

/// Why an expression does not parse or evaluate. `column` is the 1-based
/// character position in the expression text (0 when it concerns the whole).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExprError {
    pub column: usize,
    pub message: String,
}

impl fmt::Display for ExprError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.column > 0 {
            write!(f, "{} (at character {})", self.message, self.column)
        } else {
            f.write_str(&self.message)
        }
    }
}

impl std::error::Error for ExprError {}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Func {
    Ceil,
    Floor,
    Min,
    Max,
    Cdiv,
}

/// The functions an expression may call.
pub const FUNCTIONS: [&str; 5] = ["ceil", "floor", "min", "max", "cdiv"];

#[derive(Debug, Clone, PartialEq)]
enum Ast {
    Num(f64),
    /// A parameter, with the 1-based column of its name.
    Param(String, usize),
    Neg(Box<Ast>),
    /// The column of the operator, for division-by-zero messages.
    Bin(BinOp, Box<Ast>, Box<Ast>, usize),
    Call(Func, Vec<Ast>, usize),
}

/// Largest integer magnitude an `f64` holds exactly (2^53).
pub const MAX_EXACT_INT: f64 = 9_007_199_254_740_992.0;

impl Expr {
    /// Parses an expression.
    pub fn parse(source: &str) -> Result<Expr, ExprError> {
        let tokens = lex(source)?;
        let mut p = Parser { tokens, pos: 0 };
        if p.tokens.len() == 1 {
            return Err(ExprError {
                column: 0,
                message: "empty expression".into(),
            });
        }
        let ast = p.expr()?;
        let tok = p.peek();
        if tok.kind != Tok::End {
            return Err(ExprError {
                column: tok.column,
                message: format!("unexpected {}", tok.kind.describe()),
            });
        }
        Ok(Expr {
            source: source.to_string(),
            ast,
        })
    }

    /// An expression that is a plain number (a TOML number in the spec).
    pub fn number(value: f64) -> Expr {
        Expr {
            source: format_number(value),
            ast: Ast::Num(value),
        }
    }

    /// The text the expression was parsed from.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The parameter names the expression refers to, sorted, without repeats.
    pub fn params(&self) -> Vec<&str> {
        fn walk<'a>(ast: &'a Ast, out: &mut Vec<&'a str>) {
            match ast {
                Ast::Num(_) => {}
                Ast::Param(name, _) => out.push(name),
                Ast::Neg(a) => walk(a, out),
                Ast::Bin(_, a, b, _) => {
                    walk(a, out);
                    walk(b, out);
                }
                Ast::Call(_, args, _) => args.iter().for_each(|a| walk(a, out)),
            }
        }
        let mut out = Vec::new();
        walk(&self.ast, &mut out);
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The constant value of an expression that names no parameter.
    pub fn constant(&self) -> Option<f64> {
        if self.params().is_empty() {
            self.eval(&BTreeMap::new()).ok()
        } else {
            None
        }
    }

    /// Evaluates the expression with the given parameter values. Errors:
    /// unknown parameter, division (or `%`, `cdiv`) by zero, a result that
    /// is not finite.
    pub fn eval(&self, params: &BTreeMap<String, f64>) -> Result<f64, ExprError> {
        let v = eval(&self.ast, params)?;
        if v.is_finite() {
            Ok(v)
        } else {
            Err(ExprError {
                column: 0,
                message: format!("`{}` is not finite ({v})", self.source),
            })
        }
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

/// Formats a number the way it would be written in an expression.
pub(crate) fn format_number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < MAX_EXACT_INT {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

fn eval(ast: &Ast, params: &BTreeMap<String, f64>) -> Result<f64, ExprError> {
    Ok(match ast {
        Ast::Num(v) => *v,
        Ast::Param(name, column) => match params.get(name) {
            Some(v) => *v,
            None => {
                let known = params.keys().map(String::as_str).collect::<Vec<_>>();
                let known = if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                };
                return Err(ExprError {
                    column: *column,
                    message: format!("unknown parameter `{name}` (parameters: {known})"),
                });
            }
        },
        Ast::Neg(a) => -eval(a, params)?,
        Ast::Bin(op, a, b, column) => {
            let (a, b) = (eval(a, params)?, eval(b, params)?);
            let zero = || ExprError {
                column: *column,
                message: "division by zero".into(),
            };
            match op {
                BinOp::Add => a + b,
                BinOp::Sub => a - b,
                BinOp::Mul => a * b,
                BinOp::Div if b == 0.0 => return Err(zero()),
                BinOp::Div => a / b,
                BinOp::Rem if b == 0.0 => return Err(zero()),
                BinOp::Rem => a % b,
            }
        }
        Ast::Call(func, args, column) => {
            let vals = args
                .iter()
                .map(|a| eval(a, params))
                .collect::<Result<Vec<_>, _>>()?;
            match func {
                Func::Ceil => vals[0].ceil(),
                Func::Floor => vals[0].floor(),
                Func::Min => vals.iter().copied().fold(f64::INFINITY, f64::min),
                Func::Max => vals.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                Func::Cdiv => {
                    let (a, b) = (vals[0], vals[1]);
                    if b == 0.0 {
                        return Err(ExprError {
                            column: *column,
                            message: "cdiv: division by zero".into(),
                        });
                    }
                    cdiv(a, b)
                }
            }
        }
    })
}

/// Ceiling division: exact on integral operands below 2^63, `ceil(a / b)` otherwise.
fn cdiv(a: f64, b: f64) -> f64 {
    let limit = 9.2e18;
    if a.fract() == 0.0 && b.fract() == 0.0 && a.abs() < limit && b.abs() < limit {
        let (a, b) = (a as i64 as i128, b as i64 as i128);
        let q = a / b;
        let r = a % b;
        // Round toward +infinity when there is a remainder and the exact
        // quotient is positive.
        let q = if r != 0 && ((r > 0) == (b > 0)) {
            q + 1
        } else {
            q
        };
        q as f64
    } else {
        (a / b).ceil()
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(f64),
    Name(String),
    Op(char),
    End,
}

impl Tok {
    fn describe(&self) -> String {
        match self {
            Tok::Num(v) => format!("number {}", format_number(*v)),
            Tok::Name(n) => format!("name `{n}`"),
            Tok::Op(c) => format!("`{c}`"),
            Tok::End => "end of expression".into(),
        }
    }
}

#[derive(Debug, Clone)]
struct Token {
    kind: Tok,
    column: usize,
}

fn lex(source: &str) -> Result<Vec<Token>, ExprError> {
    let chars: Vec<char> = source.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let column = i + 1;
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_digit()
            || (c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit))
        {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '.') {
                i += 1;
            }
            if i < chars.len() && (chars[i] == 'e' || chars[i] == 'E') {
                let mut j = i + 1;
                if j < chars.len() && (chars[j] == '+' || chars[j] == '-') {
                    j += 1;
                }
                if j < chars.len() && chars[j].is_ascii_digit() {
                    i = j;
                    while i < chars.len() && chars[i].is_ascii_digit() {
                        i += 1;
                    }
                }
            }
            let text: String = chars[start..i].iter().collect();
            let value = text.parse::<f64>().map_err(|_| ExprError {
                column,
                message: format!("bad number `{text}`"),
            })?;
            if i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                return Err(ExprError {
                    column: i + 1,
                    message: format!("bad number `{text}{}`", chars[i]),
                });
            }
            out.push(Token {
                kind: Tok::Num(value),
                column,
            });
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push(Token {
                kind: Tok::Name(chars[start..i].iter().collect()),
                column,
            });
        } else if "+-*/%(),".contains(c) {
            out.push(Token {
                kind: Tok::Op(c),
                column,
            });
            i += 1;
        } else {
            return Err(ExprError {
                column,
                message: format!("unexpected character `{c}`"),
            });
        }
    }
    out.push(Token {
        kind: Tok::End,
        column: chars.len() + 1,
    });
    Ok(out)
}

struct Parser {
    tokens: Vec<Token>,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> &Token {
        &self.tokens[self.pos]
    }

    fn next(&mut self) -> Token {
        let t = self.tokens[self.pos].clone();
        if self.pos + 1 < self.tokens.len() {
            self.pos += 1;
        }
        t
    }

    fn eat(&mut self, op: char) -> Option<usize> {
        match self.peek() {
            Token {
                kind: Tok::Op(c),
                column,
            } if *c == op => {
                let column = *column;
                self.next();
                Some(column)
            }
            _ => None,
        }
    }

    fn expect(&mut self, op: char) -> Result<(), ExprError> {
        if self.eat(op).is_some() {
            Ok(())
        } else {
            let t = self.peek();
            Err(ExprError {
                column: t.column,
                message: format!("expected `{op}`, found {}", t.kind.describe()),
            })
        }
    }

    fn expr(&mut self) -> Result<Ast, ExprError> {
        let mut left = self.term()?;
        loop {
            let op = match self.peek().kind {
                Tok::Op('+') => BinOp::Add,
                Tok::Op('-') => BinOp::Sub,
                _ => return Ok(left),
            };
            let column = self.next().column;
            let right = self.term()?;
            left = Ast::Bin(op, Box::new(left), Box::new(right), column);
        }
    }

    fn term(&mut self) -> Result<Ast, ExprError> {
        let mut left = self.unary()?;
        loop {
            let op = match self.peek().kind {
                Tok::Op('*') => BinOp::Mul,
                Tok::Op('/') => BinOp::Div,
                Tok::Op('%') => BinOp::Rem,
                _ => return Ok(left),
            };
            let column = self.next().column;
            let right = self.unary()?;
            left = Ast::Bin(op, Box::new(left), Box::new(right), column);
        }
    }

    fn unary(&mut self) -> Result<Ast, ExprError> {
        if self.eat('-').is_some() {
            Ok(Ast::Neg(Box::new(self.unary()?)))
        } else if self.eat('+').is_some() {
            self.unary()
        } else {
            self.primary()
        }
    }

    fn primary(&mut self) -> Result<Ast, ExprError> {
        let tok = self.next();
        match tok.kind {
            Tok::Num(v) => Ok(Ast::Num(v)),
            Tok::Op('(') => {
                let inner = self.expr()?;
                self.expect(')')?;
                Ok(inner)
            }
            Tok::Name(name) => {
                if self.eat('(').is_none() {
                    return Ok(Ast::Param(name, tok.column));
                }
                let func = match name.as_str() {
                    "ceil" => Func::Ceil,
                    "floor" => Func::Floor,
                    "min" => Func::Min,
                    "max" => Func::Max,
                    "cdiv" => Func::Cdiv,
                    _ => {
                        return Err(ExprError {
                            column: tok.column,
                            message: format!(
                                "unknown function `{name}`; expected one of {}",
                                FUNCTIONS.join(", ")
                            ),
                        })
                    }
                };
                let mut args = vec![self.expr()?];
                while self.eat(',').is_some() {
                    args.push(self.expr()?);
                }
                self.expect(')')?;
                let arity_ok = match func {
                    Func::Ceil | Func::Floor => args.len() == 1,
                    Func::Cdiv => args.len() == 2,
                    Func::Min | Func::Max => args.len() >= 2,
                };
                if !arity_ok {
                    let wanted = match func {
                        Func::Ceil | Func::Floor => "1 argument",
                        Func::Cdiv => "2 arguments",
                        Func::Min | Func::Max => "at least 2 arguments",
                    };
                    return Err(ExprError {
                        column: tok.column,
                        message: format!("`{name}` takes {wanted}, got {}", args.len()),
                    });
                }
                Ok(Ast::Call(func, args, tok.column))
            }
            other => Err(ExprError {
                column: tok.column,
                message: format!(
                    "expected a number, a name or `(`, found {}",
                    other.describe()
                ),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cdiv_rounds_toward_positive_infinity() {
        assert_eq!(cdiv(7.0, 2.0), 4.0);
        assert_eq!(cdiv(-7.0, 2.0), -3.0);
        assert_eq!(cdiv(7.0, -2.0), -3.0);
        assert_eq!(cdiv(-7.0, -2.0), 4.0);
        assert_eq!(cdiv(8.0, 2.0), 4.0);
        assert_eq!(cdiv(0.0, 5.0), 0.0);
        assert_eq!(cdiv(7.5, 2.0), 4.0);
    }

    #[test]
    fn params_are_listed_once() {
        let e = Expr::parse("min(nx, ny) * nx + cdiv(n, 4)").unwrap();
        assert_eq!(e.params(), vec!["n", "nx", "ny"]);
        assert_eq!(Expr::parse("3 * 4").unwrap().constant(), Some(12.0));
    }
}
