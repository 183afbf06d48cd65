//! The shape of host code, as far as launches need it: the functions a
//! file defines (inside namespaces, `extern "C"` blocks and classes too),
//! and in each body the statements that hold or repeat launches: blocks,
//! `for`, `while` and `do` loops, `if` and `switch`, and simple statements
//! as token ranges. Everything else is skipped by balanced brackets.

use super::cexpr::closing;
use super::lex::{Kind, Token};
use std::ops::Range;

/// A function definition.
#[derive(Debug)]
pub(crate) struct Function {
    pub(crate) name: String,
    pub(crate) line: usize,
    pub(crate) body: Vec<Stmt>,
    /// The body's tokens, braces excluded.
    pub(crate) span: Range<usize>,
}

#[derive(Debug)]
pub(crate) enum Stmt {
    /// A statement up to its `;` (excluded).
    Simple(Range<usize>),
    Block(Vec<Stmt>),
    /// `for (head) body`; `span` is the whole statement.
    For {
        head: Range<usize>,
        body: Box<Stmt>,
        span: Range<usize>,
    },
    /// `while (cond) body` or `do body while (cond);`.
    While {
        cond: Range<usize>,
        body: Box<Stmt>,
        span: Range<usize>,
    },
    /// `if (cond) then else other`, and `switch (cond) then`.
    If {
        cond: Range<usize>,
        then: Box<Stmt>,
        other: Option<Box<Stmt>>,
    },
}

/// Every function defined in the tokens, in order.
pub(crate) fn functions(tokens: &[Token]) -> Vec<Function> {
    let mut out = Vec::new();
    scope(tokens, 0..tokens.len(), &mut out);
    out
}

/// The matching bracket of `open`, if it lies before `end`.
fn close_within(tokens: &[Token], open: usize, end: usize) -> Option<usize> {
    closing(tokens, open).filter(|c| *c < end)
}

/// A namespace, class or file scope: definitions one after another.
fn scope(tokens: &[Token], range: Range<usize>, out: &mut Vec<Function>) {
    let mut i = range.start;
    let mut start = i;
    while i < range.end {
        match tokens[i].text.as_str() {
            ";" => start = i + 1,
            "(" | "[" => match close_within(tokens, i, range.end) {
                Some(c) => i = c,
                None => return,
            },
            "{" => {
                let Some(close) = close_within(tokens, i, range.end) else {
                    return;
                };
                let header = &tokens[start..i];
                if opens_scope(header) {
                    scope(tokens, i + 1..close, out);
                } else if let Some(name) = function_name(header) {
                    out.push(Function {
                        line: name.line,
                        name: name.text.clone(),
                        body: statements(tokens, i + 1..close),
                        span: i + 1..close,
                    });
                }
                i = close;
                start = close + 1;
            }
            _ => {}
        }
        i += 1;
    }
}

/// `namespace x`, `extern "C"`, `struct S : B`, `class C`.
fn opens_scope(header: &[Token]) -> bool {
    let words: Vec<&str> = header.iter().map(|t| t.text.as_str()).collect();
    let after_template = match words.first() {
        Some(&"template") => header
            .get(1)
            .and_then(|_| closing(header, 1))
            .map_or(&words[..0], |c| &words[c + 1..]),
        _ => &words[..],
    };
    match after_template.first() {
        Some(&"namespace") => true,
        Some(&"extern") => header.len() == 2 && header[1].kind == Kind::Literal,
        Some(&("struct" | "class" | "union")) => !after_template.contains(&"("),
        _ => false,
    }
}

/// The name of the function whose header this is, if it is one: a name
/// before a parameter list, no `=` outside brackets (an initializer).
fn function_name(header: &[Token]) -> Option<&Token> {
    let mut depth = 0;
    for (i, t) in header.iter().enumerate() {
        match t.text.as_str() {
            "=" if depth == 0 => return None,
            "enum" => return None,
            "(" if depth == 0 => {
                let name = header[..i].last().filter(|n| n.kind == Kind::Ident)?;
                return (!matches!(name.text.as_str(), "if" | "for" | "while" | "switch"))
                    .then_some(name);
            }
            "(" | "[" | "<" => depth += 1,
            ")" | "]" | ">" => depth -= 1,
            _ => {}
        }
    }
    None
}

/// The statements of a function body or block.
pub(crate) fn statements(tokens: &[Token], range: Range<usize>) -> Vec<Stmt> {
    let mut s = Skim {
        t: tokens,
        i: range.start,
        end: range.end,
    };
    let mut out = Vec::new();
    while s.i < s.end {
        let before = s.i;
        if let Some(stmt) = s.stmt() {
            out.push(stmt);
        }
        if s.i == before {
            s.i += 1;
        }
    }
    out
}

struct Skim<'a> {
    t: &'a [Token],
    i: usize,
    end: usize,
}

impl<'a> Skim<'a> {
    fn at(&self, i: usize) -> Option<&'a str> {
        (i < self.end).then(|| self.t[i].text.as_str())
    }

    /// `( ... )` at `self.i`: the range inside, and past it.
    fn parens(&mut self) -> Option<Range<usize>> {
        if self.at(self.i)? != "(" {
            return None;
        }
        let close = close_within(self.t, self.i, self.end)?;
        let inside = self.i + 1..close;
        self.i = close + 1;
        Some(inside)
    }

    fn body(&mut self) -> Box<Stmt> {
        Box::new(self.stmt().unwrap_or(Stmt::Block(Vec::new())))
    }

    fn stmt(&mut self) -> Option<Stmt> {
        let start = self.i;
        let word = self.at(start)?;
        match word {
            "{" => {
                let close = close_within(self.t, start, self.end).unwrap_or(self.end);
                self.i = close + 1;
                Some(Stmt::Block(statements(self.t, start + 1..close)))
            }
            "for" | "while" => {
                self.i += 1;
                let inside = self.parens()?;
                let body = self.body();
                let span = start..self.i;
                Some(match word {
                    "for" => Stmt::For {
                        head: inside,
                        body,
                        span,
                    },
                    _ => Stmt::While {
                        cond: inside,
                        body,
                        span,
                    },
                })
            }
            "do" => {
                self.i += 1;
                let body = self.body();
                if self.at(self.i) == Some("while") {
                    self.i += 1;
                }
                let cond = self.parens().unwrap_or(self.i..self.i);
                if self.at(self.i) == Some(";") {
                    self.i += 1;
                }
                Some(Stmt::While {
                    cond,
                    body,
                    span: start..self.i,
                })
            }
            "if" | "switch" => {
                self.i += 1;
                if self.at(self.i) == Some("constexpr") {
                    self.i += 1;
                }
                let cond = self.parens()?;
                let then = self.body();
                let other = (word == "if" && self.at(self.i) == Some("else")).then(|| {
                    self.i += 1;
                    self.body()
                });
                Some(Stmt::If { cond, then, other })
            }
            "else" | "try" => {
                self.i += 1;
                self.stmt()
            }
            "catch" => {
                self.i += 1;
                self.parens();
                self.stmt()
            }
            ";" => {
                self.i += 1;
                None
            }
            "case" | "default" | "public" | "private" | "protected" => {
                // A label: up to its colon.
                while self.at(self.i).is_some_and(|t| t != ":") {
                    self.i += 1;
                }
                self.i += 1;
                None
            }
            _ if self.t[start].kind == Kind::Ident && self.at(start + 1) == Some(":") => {
                self.i += 2;
                None
            }
            _ => {
                let mut i = start;
                while i < self.end && self.t[i].text != ";" {
                    if matches!(self.t[i].text.as_str(), "(" | "[" | "{") {
                        i = close_within(self.t, i, self.end).unwrap_or(self.end);
                    }
                    i += 1;
                }
                self.i = i + 1;
                Some(Stmt::Simple(start..i.min(self.end)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::lex::lex;
    use super::*;

    fn shape(tokens: &[Token], s: &Stmt) -> String {
        match s {
            Stmt::Simple(r) => super::super::cexpr::text(&tokens[r.clone()]),
            Stmt::Block(v) => format!(
                "{{{}}}",
                v.iter()
                    .map(|s| shape(tokens, s))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
            Stmt::For { head, body, .. } => format!(
                "for({}) {}",
                super::super::cexpr::text(&tokens[head.clone()]),
                shape(tokens, body)
            ),
            Stmt::While { body, .. } => format!("while {}", shape(tokens, body)),
            Stmt::If { then, other, .. } => format!(
                "if {}{}",
                shape(tokens, then),
                other
                    .as_ref()
                    .map_or(String::new(), |o| format!(" else {}", shape(tokens, o)))
            ),
        }
    }

    #[test]
    fn functions_and_their_loops() {
        let l = lex(
            "#include <x.h>\nnamespace app { struct S { int a = 1; void m() { f(); } };\n\
             static const int N = 4; int g[] = {1, 2};\n\
             template <typename T> void run(T* a, int n) {\n\
               for (int i = 0; i < n; i++) k<<<1, 2>>>(a);\n\
               if (n) { x = 1; } else y = 2;\n\
               do { n--; } while (n > 0);\n\
               switch (n) { case 1: z(); break; default: w(); }\n\
               auto f = [&](int q) { return q; };\n\
               label: ;\n} }\n\
             extern \"C\" { void c_api(void) { while (1) { } } }\n",
        );
        let fs = functions(&l.tokens);
        let names: Vec<&str> = fs.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["m", "run", "c_api"]);
        let run: Vec<String> = fs[1].body.iter().map(|s| shape(&l.tokens, s)).collect();
        assert_eq!(
            run,
            [
                "for(int i = 0; i < n; i++) k<<<1, 2>>>(a)",
                "if {x = 1} else y = 2",
                "while {n--}",
                "if {z(); break; w()}",
                "auto f = [&](int q) { return q; }",
            ]
        );
        assert_eq!(fs[1].line, 4);
    }
}
