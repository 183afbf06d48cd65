//! Text from files and sockets on its way to a terminal or a log line.
//! Anybody who can drop a file in a watched directory chooses some of the
//! bytes gevo prints (spec names, keys, paths, CUDA source lines, process
//! names): escape sequences among them could clear or retitle an
//! administrator's terminal. Every such string is printed through
//! [`escape_controls`]; `--json` output keeps the bytes, as JSON escapes.

use std::borrow::Cow;
use std::fmt::Write;

/// Characters that reorder or hide what a terminal shows without being
/// control characters: the bidirectional overrides, embeddings and
/// isolates (U+202A..U+202E, U+2066..U+2069), the directional marks
/// (U+200E, U+200F, U+061C), and the line and paragraph separators. A
/// right-to-left override in a file name can make `evil.cu` read as
/// another name.
fn reorders_text(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}' | '\u{061c}' | '\u{2028}' | '\u{2029}')
}

/// `s` with every control character (C0, DEL, C1) and every character that
/// reorders text ([`reorders_text`]) written as `\u{..}`, and
/// backslashes that could be read as such an escape doubled. Borrowed when
/// there is nothing to escape.
pub fn escape_controls(s: &str) -> Cow<'_, str> {
    escape(s, |c| c.is_control() || reorders_text(c))
}

/// [`escape_controls`] for multi-line text (a report, an error with its
/// source excerpt): newlines and tabs are kept.
pub fn escape_terminal(s: &str) -> Cow<'_, str> {
    escape(s, |c| {
        (c.is_control() && c != '\n' && c != '\t') || reorders_text(c)
    })
}

fn escape(s: &str, escaped: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !s.chars().any(&escaped) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if c == '\\' {
            out.push_str("\\\\");
        } else if escaped(c) {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// At most `max` characters of `s`, then `...` where it was cut: a message
/// quotes only a short prefix of what others wrote.
pub fn shorten(s: &str, max: usize) -> Cow<'_, str> {
    match s.char_indices().nth(max) {
        None => Cow::Borrowed(s),
        Some((end, _)) => Cow::Owned(format!("{}...", &s[..end])),
    }
}

/// [`escape_controls`] over a path, lossy for bytes that are not UTF-8.
pub fn escape_path(p: &std::path::Path) -> String {
    escape_controls(&p.to_string_lossy()).into_owned()
}

/// An error and its sources as one line, `outer: inner: ...`, leaving out
/// a source whose message the line holds already: many errors quote their
/// source in their own message and return it from `source()` as well, and
/// `anyhow`'s `{:#}` would print it twice.
pub fn error_line<'a>(
    chain: impl IntoIterator<Item = &'a (dyn std::error::Error + 'static)>,
) -> String {
    let mut line = String::new();
    for error in chain {
        let message = error.to_string();
        if message.is_empty() || line.contains(&message) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&message);
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error with a message and maybe a source, as thiserror makes them.
    #[derive(Debug)]
    struct Layer(String, Option<Box<Layer>>);

    impl std::fmt::Display for Layer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(&self.0)
        }
    }

    impl std::error::Error for Layer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_deref().map(|l| l as _)
        }
    }

    #[test]
    fn an_error_chain_is_one_line_without_repeats() {
        let start = "cannot start worker /usr/bin/gevod: the system refused a new process";
        for (layers, expected) in [
            // The issue's case: the wrapper quotes its source and returns it.
            (
                vec![format!("k.gevo.toml: {start}"), start.to_string()],
                format!("k.gevo.toml: {start}"),
            ),
            // A context that adds words keeps them, and the source follows.
            (
                vec!["k.gevo.toml".into(), "no kernel found".into()],
                "k.gevo.toml: no kernel found".into(),
            ),
            (
                vec![
                    "reading x".into(),
                    "x: Permission denied (os error 13)".into(),
                    "Permission denied (os error 13)".into(),
                ],
                "reading x: x: Permission denied (os error 13)".into(),
            ),
            (vec!["alone".into()], "alone".into()),
        ] {
            let error = layers
                .into_iter()
                .rev()
                .fold(None, |inner, m| Some(Box::new(Layer(m, inner))))
                .unwrap();
            let chain =
                std::iter::successors(Some(&*error as &(dyn std::error::Error + 'static)), |e| {
                    e.source()
                });
            assert_eq!(error_line(chain), expected);
        }
    }

    #[test]
    fn control_characters_are_escaped_and_the_rest_kept() {
        for (input, expected) in [
            ("plain name.gevo.toml", "plain name.gevo.toml"),
            ("\x1b]0;owned\x07x", "\\u{1b}]0;owned\\u{7}x"),
            ("a\nb\tc\rd", "a\\u{a}b\\u{9}c\\u{d}d"),
            ("del\x7f c1\u{9b}", "del\\u{7f} c1\\u{9b}"),
            ("stencil.cu:41 // é ✓", "stencil.cu:41 // é ✓"),
            // A right-to-left override, an isolate and a mark.
            ("a\u{202e}uc.live", "a\\u{202e}uc.live"),
            ("x\u{2067}y\u{200f}z", "x\\u{2067}y\\u{200f}z"),
            // A backslash is doubled only where escaping happened, so an
            // escaped string cannot pass for another one's escape.
            ("C:\\x\x1b", "C:\\\\x\\u{1b}"),
            ("C:\\x", "C:\\x"),
        ] {
            assert_eq!(escape_controls(input), expected, "{input:?}");
        }
        assert!(matches!(escape_controls("clean"), Cow::Borrowed(_)));
        assert_eq!(shorten("héllo", 5), "héllo");
        assert_eq!(shorten("héllo wörld", 7), "héllo w...");
        assert!(matches!(shorten("short", 80), Cow::Borrowed(_)));
        assert_eq!(
            escape_terminal("line 1\n\tline 2\x1b[2J\r"),
            "line 1\n\tline 2\\u{1b}[2J\\u{d}"
        );
    }
}
