//! The top-level items of a PTX module as LLVM's NVPTX back end writes
//! it (the preamble, variables, function prototypes and bodies, kernels),
//! read line by line. A module holding anything else (an unknown
//! directive, a weak symbol) is not read: callers then treat it whole.

/// Whether `c` may stand in a PTX identifier (letters, digits, `_`, `$`).
pub(crate) fn identifier_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '$'
}

/// One top-level item of a PTX module.
pub(crate) enum Item {
    /// `.version`, `.target`, `.address_size`.
    Preamble(String),
    /// A function's prototype (ends in `;`).
    Prototype(String),
    /// A function with its body.
    Function(String),
    /// A kernel with its body.
    Entry { name: String, text: String },
    /// A variable: `.global`, `.const`, `.shared`, possibly `.visible`.
    Variable(String),
}

/// Whether `text` names `name` as a whole identifier.
pub(crate) fn mentions(text: &str, name: &str) -> bool {
    text.match_indices(name).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + name.len()..].chars().next();
        !before.is_some_and(identifier_char) && !after.is_some_and(identifier_char)
    })
}

/// `.global .align 4 .b8 name[256];` (or `... name = ...;`) -> `name`.
pub(crate) fn variable_name(text: &str) -> Option<String> {
    let end = text.find(['[', '=', ';'])?;
    let name = text[..end].split_whitespace().next_back()?;
    name.chars().all(identifier_char).then(|| name.to_string())
}

/// `.func (.param .b32 r) name(` -> `name`.
pub(crate) fn function_name(text: &str) -> Option<String> {
    let directive = text.trim_start();
    let directive = directive.strip_prefix(".visible ").unwrap_or(directive);
    let directive = directive.strip_prefix(".extern ").unwrap_or(directive);
    let mut rest = directive.strip_prefix(".func")?.trim_start();
    if rest.starts_with('(') {
        rest = rest[rest.find(')')? + 1..].trim_start();
    }
    leading_identifier(rest)
}

/// The identifier `text` starts with, if any.
fn leading_identifier(text: &str) -> Option<String> {
    let name: String = text.chars().take_while(|c| identifier_char(*c)).collect();
    (!name.is_empty()).then_some(name)
}

/// The module's top-level items, or `None` at anything unknown.
pub(crate) fn items(ptx: &str) -> Option<Vec<Item>> {
    let mut items = Vec::new();
    let mut lines = ptx.lines();
    while let Some(line) = lines.next() {
        let t = line.trim();
        if t.is_empty() || t.starts_with("//") {
            continue;
        }
        let first = t.split_whitespace().next()?;
        if [".version", ".target", ".address_size"].contains(&first) {
            items.push(Item::Preamble(format!("{line}\n")));
            continue;
        }
        let directive = t.strip_prefix(".visible ").unwrap_or(t);
        let kind = directive.split_whitespace().next()?;
        match kind {
            ".global" | ".const" | ".shared" | ".extern" => {
                items.push(Item::Variable(statement(line, &mut lines)?))
            }
            ".func" | ".entry" => {
                let text = block(line, &mut lines)?;
                let item = match (kind, text.contains('{')) {
                    (".entry", true) => Item::Entry {
                        name: entry_name(directive)?,
                        text,
                    },
                    (".func", true) => Item::Function(text),
                    (".func", false) => Item::Prototype(text),
                    _ => return None,
                };
                items.push(item);
            }
            _ => return None,
        }
    }
    Some(items)
}

/// A variable's text: lines up to the one that ends in `;`.
fn statement<'a>(first: &str, lines: &mut impl Iterator<Item = &'a str>) -> Option<String> {
    let mut text = format!("{first}\n");
    let mut last = first;
    while !last.trim_end().ends_with(';') {
        last = lines.next()?;
        text += last;
        text.push('\n');
    }
    Some(text)
}

/// A function's or kernel's text: a prototype up to its `;`, or its body
/// up to the brace that closes it.
fn block<'a>(first: &str, lines: &mut impl Iterator<Item = &'a str>) -> Option<String> {
    let mut text = String::new();
    let (mut depth, mut opened) = (0i64, false);
    let mut line = without_call_numbers(first);
    loop {
        text += line;
        text.push('\n');
        for c in line.chars() {
            match c {
                '{' => {
                    depth += 1;
                    opened = true;
                }
                '}' => depth -= 1,
                _ => {}
            }
        }
        if opened && depth == 0 {
            return Some(text);
        }
        if !opened && line.trim_end().ends_with(';') {
            return Some(text);
        }
        line = without_call_numbers(lines.next()?);
    }
}

/// `line` without the code generator's call-sequence comment
/// (`{ // callseq 17, 0`): numbered across the module, it would make a
/// kernel's part change with another kernel's calls.
fn without_call_numbers(line: &str) -> &str {
    match line.find(" // callseq ") {
        Some(at) => &line[..at],
        None => line,
    }
}

/// `.entry name(` -> `name`.
fn entry_name(directive: &str) -> Option<String> {
    let rest = directive.strip_prefix(".entry")?.trim_start();
    leading_identifier(rest)
}
