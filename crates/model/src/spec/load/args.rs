//! `[[args]]`: the kernel's arguments in order, their names, kinds and
//! types; buffers (length, role, fill) and scalars (value).

use super::fill::{read_fill, FILL_KINDS};
use super::read::{array, expr, quote_list, string, table, Cx, Res, Tab};
use super::TYPE_NAMES;
use crate::spec::model::{ArgKind, ArgSpec, ElemType, Fill, Located, Role};

const ARG_KEYS: &[&str] = &["name", "kind", "type", "len", "fill", "role", "value"];

pub(super) fn valid_name(n: &str) -> bool {
    let mut chars = n.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

pub(super) fn read_args(cx: &Cx, top: &Tab) -> Res<Vec<ArgSpec>> {
    let expected = "at least one [[args]] entry";
    let Some(node) = top.get("args") else {
        return Err(cx.err(
            &top.span,
            "args",
            format!("no arguments; expected {expected}"),
        ));
    };
    let items = array(cx, node, "args", "an array of [[args]] tables")?;
    if items.is_empty() {
        return Err(cx.err(
            &node.span,
            "args",
            format!("no arguments; expected {expected}"),
        ));
    }
    let mut args: Vec<ArgSpec> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let field = format!("args[{i}]");
        let t = table(cx, item, &field, ARG_KEYS)?;
        let name_node = t.req(cx, "name", "the argument's name (a string)")?;
        let name = string(cx, name_node, &t.path("name"))?;
        if !valid_name(&name) {
            return Err(cx.err(
                &name_node.span,
                &t.path("name"),
                format!("\"{name}\" is not a valid name (letters, digits, _; not starting with a digit)"),
            ));
        }
        if let Some(j) = args.iter().position(|a| a.name == name) {
            return Err(cx.err(
                &name_node.span,
                &t.path("name"),
                format!("duplicate argument name `{name}` (also args[{j}])"),
            ));
        }
        let kind_node = t.req(cx, "kind", "\"buffer\" or \"scalar\"")?;
        let kind = string(cx, kind_node, &t.path("kind"))?;
        let type_node = t.req(cx, "type", &format!("one of {TYPE_NAMES}"))?;
        let type_name = string(cx, type_node, &t.path("type"))?;
        let elem = ElemType::from_name(&type_name).ok_or_else(|| {
            cx.err(
                &type_node.span,
                &t.path("type"),
                format!("unknown type \"{type_name}\"; expected one of {TYPE_NAMES}"),
            )
        })?;
        let kind = match kind.as_str() {
            "buffer" => read_buffer(cx, &t, elem)?,
            "scalar" => {
                for key in ["len", "fill", "role"] {
                    if let Some(e) = t.entries.iter().find(|e| e.key == key) {
                        return Err(cx.err(
                            &e.key_span,
                            &t.path(key),
                            format!("`{key}` is only for buffers; `{name}` is a scalar (give it a `value`)"),
                        ));
                    }
                }
                let value_node = t.req(
                    cx,
                    "value",
                    "the scalar's value (an expression or a number)",
                )?;
                ArgKind::Scalar {
                    ty: elem,
                    value: expr(cx, value_node, &t.path("value"))?,
                }
            }
            other => {
                return Err(cx.err(
                    &kind_node.span,
                    &t.path("kind"),
                    format!("unknown kind \"{other}\"; expected one of buffer, scalar"),
                ))
            }
        };
        args.push(ArgSpec {
            name,
            kind,
            at: cx.at(&item.span, &field),
        });
    }
    if !args
        .iter()
        .any(|a| matches!(a.kind, ArgKind::Buffer { role, .. } if role.is_output()))
    {
        return Err(cx.err(
            &node.span,
            "args",
            "no buffer with role \"out\" or \"inout\"; at least one output is needed to compare",
        ));
    }
    Ok(args)
}

fn read_buffer(cx: &Cx, t: &Tab, elem: ElemType) -> Res<ArgKind> {
    if let Some(e) = t.entries.iter().find(|e| e.key == "value") {
        return Err(cx.err(
            &e.key_span,
            &t.path("value"),
            "`value` is only for scalars; a buffer has len, role and fill",
        ));
    }
    let len = expr(
        cx,
        t.req(
            cx,
            "len",
            "the number of elements (an expression or a number)",
        )?,
        &t.path("len"),
    )?;
    let role_node = t.req(cx, "role", "one of in, out, inout")?;
    let role_name = string(cx, role_node, &t.path("role"))?;
    let role = match role_name.as_str() {
        "in" => Role::In,
        "out" => Role::Out,
        "inout" => Role::Inout,
        other => {
            return Err(cx.err(
                &role_node.span,
                &t.path("role"),
                format!("unknown role \"{other}\"; expected one of in, out, inout"),
            ))
        }
    };
    let fill_field = t.path("fill");
    let fill = match (role, t.get("fill")) {
        (Role::Out, None) => Located {
            value: Fill::Zero,
            at: cx.at(&t.span, &fill_field),
        },
        (Role::Out, Some(n)) => {
            return Err(cx.err(
                &n.span,
                &fill_field,
                "an \"out\" buffer is zero-filled and takes no fill; use role = \"inout\" to give it initial contents",
            ))
        }
        (_, None) => {
            return Err(t.missing(
                cx,
                "fill",
                &format!("one of {} for an \"{role}\" buffer", quote_list(FILL_KINDS)),
            ))
        }
        (_, Some(n)) => Located {
            value: read_fill(cx, n, &fill_field, elem)?,
            at: cx.at(&n.span, &fill_field),
        },
    };
    Ok(ArgKind::Buffer {
        elem,
        len,
        role,
        fill,
    })
}
