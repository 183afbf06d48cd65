//! CUDA and C++ source as tokens, for reading a kernel's launch sites
//! (`gevod spec init`): comments dropped, string and character literals
//! kept whole, `<<<` and `>>>` as tokens of their own, preprocessor lines
//! set aside with the `#define`s they make (object-like and function-like)
//! and `#if 0` regions skipped. No macro is expanded here.

use std::collections::BTreeMap;

/// What a token is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Ident,
    Number,
    Punct,
    /// A string or character literal.
    Literal,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Token {
    pub(crate) kind: Kind,
    pub(crate) text: String,
    /// 1-based.
    pub(crate) line: usize,
}

impl Token {
    pub(crate) fn is(&self, text: &str) -> bool {
        self.text == text
    }
}

/// A `#define` as written: parameters for a function-like macro.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Define {
    pub(crate) params: Option<Vec<String>>,
    pub(crate) body: Vec<Token>,
}

/// A source file's tokens and the macros it defines.
#[derive(Debug, Default)]
pub(crate) struct Lexed {
    pub(crate) tokens: Vec<Token>,
    pub(crate) defines: BTreeMap<String, Define>,
}

/// Punctuators, longest first.
const PUNCTS: &[&str] = &[
    "<<<", ">>>", "<<=", ">>=", "...", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "++", "--",
    "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "->", "::",
];

pub(crate) fn lex(source: &str) -> Lexed {
    let mut out = Lexed::default();
    let mut skipping = 0usize;
    // The code alone, directives and skipped regions as blank lines, so
    // that tokens keep their lines.
    let mut code = String::with_capacity(source.len());
    for part in split_directives(source) {
        let blank = |code: &mut String| code.extend(std::iter::repeat_n('\n', part.lines));
        if part.directive {
            let tokens = tokens(&part.text, part.line);
            match skip_state(&tokens, skipping) {
                Some(s) => skipping = s,
                None if skipping == 0 => define(&tokens, &mut out.defines),
                None => {}
            }
            blank(&mut code);
        } else if skipping > 0 {
            blank(&mut code);
        } else {
            code += &part.text;
        }
    }
    out.tokens = tokens(&code, 1);
    out
}

/// `#if 0` regions: the nesting depth inside one after this directive, or
/// `None` when it is no conditional.
fn skip_state(tokens: &[Token], skipping: usize) -> Option<usize> {
    let word = tokens.get(1)?.text.as_str();
    let zero = tokens.get(2).is_some_and(|t| t.is("0")) && tokens.len() == 3;
    Some(match word {
        "if" | "ifdef" | "ifndef" if skipping > 0 => skipping + 1,
        "if" if zero => 1,
        "if" | "ifdef" | "ifndef" => 0,
        "else" | "elif" if skipping == 1 => 0,
        "endif" => skipping.saturating_sub(1),
        _ => return None,
    })
}

fn define(tokens: &[Token], defines: &mut BTreeMap<String, Define>) {
    match tokens.get(1).map(|t| t.text.as_str()) {
        Some("undef") => {
            if let Some(name) = tokens.get(2) {
                defines.remove(&name.text);
            }
        }
        Some("define") => {
            let Some(name) = tokens.get(2).filter(|t| t.kind == Kind::Ident) else {
                return;
            };
            let rest = &tokens[3..];
            // Function-like only where `(` follows the name directly; the
            // lexer marks that by a `(` with no space (see `tokens`).
            let (params, body) = match rest.first() {
                Some(t) if t.is("(") && t.line == usize::MAX => {
                    let Some(close) = rest.iter().position(|t| t.is(")")) else {
                        return;
                    };
                    let params = rest[1..close]
                        .iter()
                        .filter(|t| !t.is(","))
                        .map(|t| t.text.clone())
                        .collect();
                    (Some(params), &rest[close + 1..])
                }
                _ => (None, rest),
            };
            let body = body
                .iter()
                .map(|t| Token {
                    line: name.line,
                    ..t.clone()
                })
                .collect();
            defines.insert(name.text.clone(), Define { params, body });
        }
        _ => {}
    }
}

/// A run of code lines, or one preprocessor directive.
struct Part {
    directive: bool,
    /// The line it starts on.
    line: usize,
    /// How many line breaks it spans.
    lines: usize,
    text: String,
}

/// The source cut into code and preprocessor directives, a directive
/// running to its line's end or further after a backslash. Comments are
/// blanked first, keeping line breaks.
fn split_directives(source: &str) -> Vec<Part> {
    let clean = crate::c_source::without_comments(source);
    let mut parts: Vec<Part> = Vec::new();
    let mut lines = clean.split_inclusive('\n').enumerate();
    while let Some((i, l)) = lines.next() {
        let breaks = |l: &str| usize::from(l.ends_with('\n'));
        if l.trim_start().starts_with('#') {
            let mut part = Part {
                directive: true,
                line: i + 1,
                lines: breaks(l),
                text: l.to_string(),
            };
            while part.text.trim_end().ends_with('\\') {
                let Some((_, next)) = lines.next() else { break };
                part.text = part.text.trim_end().trim_end_matches('\\').to_string() + " " + next;
                part.lines += breaks(next);
            }
            parts.push(part);
        } else {
            match parts.last_mut() {
                Some(p) if !p.directive => {
                    p.text.push_str(l);
                    p.lines += breaks(l);
                }
                _ => parts.push(Part {
                    directive: false,
                    line: i + 1,
                    lines: breaks(l),
                    text: l.to_string(),
                }),
            }
        }
    }
    parts
}

/// Tokens of comment-free text starting at line `first`. A `(` directly
/// after an identifier (no space) gets line `usize::MAX` when it follows
/// the name of a `#define`, which marks a function-like macro; everywhere
/// else lines are real.
fn tokens(text: &str, first: usize) -> Vec<Token> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut line = first.max(1);
    let mut i = 0;
    let is_define = text.trim_start().starts_with('#')
        && text.trim_start()[1..].trim_start().starts_with("define");
    while i < chars.len() {
        let c = chars[i];
        if c == '\n' {
            line += 1;
            i += 1;
            continue;
        }
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        let start = i;
        let kind = if c.is_ascii_alphabetic() || c == '_' {
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            Kind::Ident
        } else if c.is_ascii_digit()
            || (c == '.' && chars.get(i + 1).is_some_and(|d| d.is_ascii_digit()))
        {
            while i < chars.len() {
                let d = chars[i];
                let exponent_sign = (d == '+' || d == '-')
                    && matches!(chars[i - 1], 'e' | 'E' | 'p' | 'P')
                    && !chars[start..i].iter().any(|x| *x == 'x' || *x == 'X');
                if d.is_ascii_alphanumeric() || d == '.' || d == '\'' || exponent_sign {
                    i += 1;
                } else {
                    break;
                }
            }
            Kind::Number
        } else if c == '"' || c == '\'' {
            i += 1;
            while i < chars.len() && chars[i] != c && chars[i] != '\n' {
                if chars[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i = (i + 1).min(chars.len());
            Kind::Literal
        } else {
            let rest: String = chars[i..chars.len().min(i + 3)].iter().collect();
            let len = PUNCTS
                .iter()
                .find(|p| rest.starts_with(**p))
                .map_or(1, |p| p.len());
            i += len;
            Kind::Punct
        };
        let text: String = chars[start..i].iter().collect();
        let glued_paren = is_define
            && text == "("
            && out.len() == 3
            && start > 0
            && !chars[start - 1].is_whitespace();
        out.push(Token {
            kind,
            line: if glued_paren { usize::MAX } else { line },
            text,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(l: &Lexed) -> Vec<&str> {
        l.tokens.iter().map(|t| t.text.as_str()).collect()
    }

    #[test]
    fn launches_shifts_and_templates_tokenize_apart() {
        let l = lex("k<float><<<g, b>>>(x << 2, y >> 1, 1.5e-3f, 0x1F);");
        assert_eq!(
            texts(&l),
            [
                "k", "<", "float", ">", "<<<", "g", ",", "b", ">>>", "(", "x", "<<", "2", ",", "y",
                ">>", "1", ",", "1.5e-3f", ",", "0x1F", ")", ";"
            ]
        );
    }

    #[test]
    fn comments_go_and_lines_stay() {
        let l = lex("a /* one\ntwo */ b // c <<< d\n\"s // t\" e\n");
        assert_eq!(texts(&l), ["a", "b", "\"s // t\"", "e"]);
        let lines: Vec<usize> = l.tokens.iter().map(|t| t.line).collect();
        assert_eq!(lines, [1, 2, 3, 3]);
    }

    #[test]
    fn defines_are_kept_and_if_zero_is_skipped() {
        let l = lex(
            "#define BLOCK 256\n#define DIV_UP(a, b) (((a) + (b) - 1) / (b))\n\
             #define PAREN (1)\n#if 0\nk<<<1, 1>>>();\n#define BLOCK 9\n#endif\n\
             #define LONG 1 + \\\n 2\nx\n",
        );
        assert_eq!(texts(&l), ["x"]);
        assert_eq!(l.tokens[0].line, 10);
        let block = &l.defines["BLOCK"];
        assert_eq!(block.params, None);
        assert_eq!(block.body[0].text, "256");
        assert_eq!(
            l.defines["DIV_UP"].params.as_deref(),
            Some(&["a".to_string(), "b".to_string()][..])
        );
        assert_eq!(l.defines["PAREN"].params, None);
        let long: Vec<&str> = l.defines["LONG"]
            .body
            .iter()
            .map(|t| t.text.as_str())
            .collect();
        assert_eq!(long, ["1", "+", "2"]);
    }
}
