//! Placeholders left from a skeleton (`gevod spec init`): every string
//! value starting with the marker is listed in one error, before anything
//! else is checked, so the user sees all that is left at once.

use super::read::{Cx, Res};
use crate::spec::skeleton::PLACEHOLDER;
use crate::spec::tree::{Node, Value};

pub(super) fn check(cx: &Cx, root: &Node) -> Res<()> {
    let mut left = Vec::new();
    collect(root, String::new(), &mut left);
    let Some((_, offset)) = left.first() else {
        return Ok(());
    };
    let fields: Vec<&str> = left.iter().map(|(f, _)| f.as_str()).collect();
    Err(cx.locator.error(
        *offset,
        "",
        format!(
            "{} placeholders to fill in: {} (values starting with \"{PLACEHOLDER}\")",
            fields.len(),
            fields.join(", ")
        ),
    ))
}

fn collect(node: &Node, path: String, left: &mut Vec<(String, usize)>) {
    match &node.value {
        Value::Str(s) if s.starts_with(PLACEHOLDER) => left.push((path, node.span.start)),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                collect(item, format!("{path}[{i}]"), left);
            }
        }
        Value::Table(entries) => {
            for e in entries {
                let child = if path.is_empty() {
                    e.key.clone()
                } else {
                    format!("{path}.{}", e.key)
                };
                collect(&e.node, child, left);
            }
        }
        _ => {}
    }
}
