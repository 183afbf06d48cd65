//! CUDA and C source text as gevo reads it without a compiler (`spec
//! init`'s launch sites, a kernel's parameter list): comments and
//! preprocessor lines set aside, string and character literals kept whole.

/// `//` and `/* */` comments replaced by a space (line breaks inside kept);
/// string and character literals untouched.
pub fn without_comments(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    let mut chars = source.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'/') => {
                // A backslash ending the line continues the comment: C
                // splices lines before it removes comments.
                let mut last = '/';
                while let Some(&n) = chars.peek() {
                    if n == '\n' {
                        if last != '\\' {
                            break;
                        }
                        out.push('\n');
                    }
                    if !n.is_whitespace() || n == '\n' {
                        last = n;
                    }
                    chars.next();
                }
                out.push(' ');
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut last = ' ';
                for n in chars.by_ref() {
                    if n == '\n' {
                        out.push('\n');
                    }
                    if last == '*' && n == '/' {
                        break;
                    }
                    last = n;
                }
                out.push(' ');
            }
            '"' | '\'' => {
                out.push(c);
                while let Some(n) = chars.next() {
                    out.push(n);
                    if n == '\\' {
                        if let Some(escaped) = chars.next() {
                            out.push(escaped);
                        }
                    } else if n == c || n == '\n' {
                        break;
                    }
                }
            }
            _ => out.push(c),
        }
    }
    out
}

/// Comment-free `text` with its preprocessor lines (`#if`, `#define`, ...,
/// continued with `\\`) replaced by a space (their line breaks kept).
pub fn without_directives(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_directive = false;
    for line in text.split_inclusive('\n') {
        let body = line.trim_end_matches('\n');
        if in_directive || body.trim_start().starts_with('#') {
            in_directive = body.trim_end().ends_with('\\');
            out.push(' ');
            if line.ends_with('\n') {
                out.push('\n');
            }
        } else {
            out.push_str(line);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_go_literals_stay_and_line_breaks_are_kept() {
        let source = "a /* one\ntwo */ b // c\n\"// not\" '/*' d\n";
        assert_eq!(without_comments(source), "a \n  b  \n\"// not\" '/*' d\n");
    }

    #[test]
    fn a_line_comment_ending_in_a_backslash_goes_on() {
        let source = "int a; // one \\\n two\nint b;\n";
        assert_eq!(without_comments(source), "int a; \n \nint b;\n");
    }

    #[test]
    fn directives_go_with_their_continuations() {
        let text = "#define F(x) \\\n  (x)\nint f();\n  #if 1\nint g();\n";
        assert_eq!(without_directives(text), " \n \nint f();\n \nint g();\n");
    }
}
