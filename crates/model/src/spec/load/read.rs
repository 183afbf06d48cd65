//! The reading context (file, directory, positions) and the typed readers of
//! TOML nodes that every table's reader uses: tables that refuse unknown keys,
//! strings, integers, numbers, arrays and expression fields.

use crate::access::Reader;
use crate::ranges::Bounded as _;
use crate::spec::error::{Location, Locator, SpecError};
use crate::spec::expr::{Expr, MAX_EXACT_INT};
use crate::spec::model::{Located, Number};
use crate::spec::tree::{Entry, Node, Value};
use std::ops::Range;
use std::path::PathBuf;

pub(super) struct Cx {
    pub(super) file: PathBuf,
    pub(super) dir: PathBuf,
    pub(super) locator: Locator,
    /// Who the files the spec names are read for.
    pub(super) reader: Reader,
}

pub(super) type Res<T> = Result<T, SpecError>;

impl Cx {
    pub(super) fn err(
        &self,
        span: &Range<usize>,
        field: &str,
        message: impl Into<String>,
    ) -> SpecError {
        self.locator.error(span.start, field, message)
    }

    pub(super) fn at(&self, span: &Range<usize>, field: &str) -> Location {
        Location::at(&self.locator, span.start, field)
    }

    pub(super) fn resolve(&self, p: &str) -> PathBuf {
        self.dir.join(p)
    }
}

/// A table being read: unknown keys have already been refused.
pub(super) struct Tab<'n> {
    pub(super) entries: &'n [Entry],
    pub(super) field: String,
    pub(super) span: Range<usize>,
}

impl<'n> Tab<'n> {
    pub(super) fn get(&self, key: &str) -> Option<&'n Node> {
        self.entries.iter().find(|e| e.key == key).map(|e| &e.node)
    }

    pub(super) fn path(&self, key: &str) -> String {
        join(&self.field, key)
    }

    pub(super) fn missing(&self, cx: &Cx, key: &str, expected: &str) -> SpecError {
        cx.err(
            &self.span,
            &self.path(key),
            format!("missing; expected {expected}"),
        )
    }

    pub(super) fn req(&self, cx: &Cx, key: &str, expected: &str) -> Res<&'n Node> {
        self.get(key).ok_or_else(|| self.missing(cx, key, expected))
    }
}

fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_string()
    } else {
        format!("{prefix}.{key}")
    }
}

pub(super) fn quote_list(items: &[&str]) -> String {
    items.join(", ")
}

pub(super) fn table<'n>(cx: &Cx, node: &'n Node, field: &str, allowed: &[&str]) -> Res<Tab<'n>> {
    let Value::Table(entries) = &node.value else {
        return Err(cx.err(
            &node.span,
            field,
            format!("expected a table, found {}", node.value.type_name()),
        ));
    };
    if let Some(e) = entries.iter().find(|e| !allowed.contains(&e.key.as_str())) {
        return Err(cx.err(
            &e.key_span,
            &join(field, &e.key),
            format!(
                "unknown key `{}`; expected one of {}",
                e.key,
                quote_list(allowed)
            ),
        ));
    }
    Ok(Tab {
        entries,
        field: field.to_string(),
        span: node.span.clone(),
    })
}

pub(super) fn string(cx: &Cx, node: &Node, field: &str) -> Res<String> {
    match &node.value {
        Value::Str(s) => Ok(s.clone()),
        other => Err(cx.err(
            &node.span,
            field,
            format!("expected a string, found {}", other.type_name()),
        )),
    }
}

pub(super) fn nonempty_string(cx: &Cx, node: &Node, field: &str) -> Res<String> {
    let s = string(cx, node, field)?;
    if s.trim().is_empty() {
        return Err(cx.err(&node.span, field, "expected a non-empty string"));
    }
    Ok(s)
}

pub(super) fn integer(cx: &Cx, node: &Node, field: &str) -> Res<i64> {
    match &node.value {
        Value::Int(i) => Ok(*i),
        other => Err(cx.err(
            &node.span,
            field,
            format!("expected an integer, found {}", other.type_name()),
        )),
    }
}

pub(super) fn number(cx: &Cx, node: &Node, field: &str) -> Res<Number> {
    match &node.value {
        Value::Int(i) => Ok(Number::Int(*i)),
        Value::Float(f) if f.is_finite() => Ok(Number::Float(*f)),
        Value::Float(f) => Err(cx.err(
            &node.span,
            field,
            format!("expected a finite number, found {}", f.show()),
        )),
        other => Err(cx.err(
            &node.span,
            field,
            format!("expected a number, found {}", other.type_name()),
        )),
    }
}

pub(super) fn array<'n>(cx: &Cx, node: &'n Node, field: &str, expected: &str) -> Res<&'n [Node]> {
    match &node.value {
        Value::Array(items) => Ok(items),
        other => Err(cx.err(
            &node.span,
            field,
            format!("expected {expected}, found {}", other.type_name()),
        )),
    }
}

/// An expression field: a string expression or a plain TOML number.
pub(super) fn expr(cx: &Cx, node: &Node, field: &str) -> Res<Located<Expr>> {
    let value = match &node.value {
        Value::Str(s) => Expr::parse(s)
            .map_err(|e| cx.err(&node.span, field, format!("bad expression \"{s}\": {e}")))?,
        Value::Int(i) => {
            if (*i as f64).abs() > MAX_EXACT_INT {
                return Err(cx.err(
                    &node.span,
                    field,
                    format!("{i} is beyond 2^53, the largest exact value"),
                ));
            }
            Expr::number(*i as f64)
        }
        Value::Float(f) if f.is_finite() => Expr::number(*f),
        Value::Float(f) => {
            return Err(cx.err(
                &node.span,
                field,
                format!("expected a finite number, found {}", f.show()),
            ))
        }
        other => {
            return Err(cx.err(
                &node.span,
                field,
                format!(
                    "expected an expression (a string) or a number, found {}",
                    other.type_name()
                ),
            ))
        }
    };
    Ok(Located {
        value,
        at: cx.at(&node.span, field),
    })
}
