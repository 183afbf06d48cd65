//! `[launch]`: grid and block dimensions, dynamic shared memory, and
//! `repeat` with its buffer swaps (resolved against the arguments once they
//! are read); also the placeholder launch a harness spec carries.

use super::read::{array, expr, string, table, Cx, Res, Tab};
use crate::spec::error::Location;
use crate::spec::expr::Expr;
use crate::spec::model::{ArgKind, ArgSpec, Launch, Located, Repeat};
use crate::spec::tree::{Node, Value};
use std::collections::BTreeMap;
use std::ops::Range;

pub(super) const LAUNCH_KEYS: &[&str] = &["grid", "block", "shared_bytes", "repeat"];
const REPEAT_KEYS: &[&str] = &["count", "swap"];

/// A swap pair as written: two names with the span of the pair.
pub(super) struct RawSwap {
    names: [(String, Range<usize>); 2],
    span: Range<usize>,
    field: String,
}

fn read_dims(cx: &Cx, node: &Node, field: &str) -> Res<Vec<Located<Expr>>> {
    let items: Vec<(&Node, String)> = match &node.value {
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, n)| (n, format!("{field}[{i}]")))
            .collect(),
        Value::Str(_) | Value::Int(_) | Value::Float(_) => vec![(node, field.to_string())],
        other => {
            return Err(cx.err(
                &node.span,
                field,
                format!(
                    "expected an array of 1 to 3 expressions, found {}",
                    other.type_name()
                ),
            ))
        }
    };
    if items.is_empty() || items.len() > 3 {
        return Err(cx.err(
            &node.span,
            field,
            format!(
                "expected 1 to 3 dimensions (x, y, z), found {}",
                items.len()
            ),
        ));
    }
    items.into_iter().map(|(n, f)| expr(cx, n, &f)).collect()
}

pub(super) fn read_launch(cx: &Cx, node: &Node) -> Res<(Launch, Option<Vec<RawSwap>>)> {
    let t = table(cx, node, "launch", LAUNCH_KEYS)?;
    read_geometry(cx, &t, "launch")
}

/// Grid, block, shared memory and repeat from a table already checked for
/// unknown keys; fields are named under `prefix` (`launch`, `launches[2]`).
pub(super) fn read_geometry(cx: &Cx, t: &Tab, prefix: &str) -> Res<(Launch, Option<Vec<RawSwap>>)> {
    let grid_node = t.req(
        cx,
        "grid",
        "an array of 1 to 3 expressions, e.g. grid = [\"cdiv(n, 256)\"]",
    )?;
    let grid = read_dims(cx, grid_node, &format!("{prefix}.grid"))?;
    let block_node = t.req(
        cx,
        "block",
        "an array of 1 to 3 expressions, e.g. block = [256]",
    )?;
    let block = read_dims(cx, block_node, &format!("{prefix}.block"))?;
    let shared_bytes = match t.get("shared_bytes") {
        Some(n) => expr(cx, n, &format!("{prefix}.shared_bytes"))?,
        None => Located {
            value: Expr::number(0.0),
            at: cx.at(&t.span, &format!("{prefix}.shared_bytes")),
        },
    };
    let mut raw_swaps = None;
    let repeat = match t.get("repeat") {
        None => None,
        Some(n) => {
            let field = format!("{prefix}.repeat");
            let r = table(cx, n, &field, REPEAT_KEYS)?;
            let count = expr(
                cx,
                r.req(cx, "count", "the number of launches (an expression)")?,
                &format!("{field}.count"),
            )?;
            raw_swaps = Some(match r.get("swap") {
                Some(s) => read_swaps(cx, s, &format!("{field}.swap"))?,
                None => Vec::new(),
            });
            Some(Repeat {
                count,
                swap: Vec::new(),
                swap_at: Vec::new(),
            })
        }
    };
    Ok((
        Launch {
            grid,
            block,
            shared_bytes,
            repeat,
            block_at: cx.at(&block_node.span, &format!("{prefix}.block")),
        },
        raw_swaps,
    ))
}

/// `swap = [["a", "b"], ...]` as written.
pub(super) fn read_swaps(cx: &Cx, s: &Node, field: &str) -> Res<Vec<RawSwap>> {
    let expected = "an array of [\"a\", \"b\"] buffer-name pairs";
    let mut swaps = Vec::new();
    for (k, pair) in array(cx, s, field, expected)?.iter().enumerate() {
        let field = format!("{field}[{k}]");
        let items = array(cx, pair, &field, "a pair of buffer names [\"a\", \"b\"]")?;
        if items.len() != 2 {
            return Err(cx.err(
                &pair.span,
                &field,
                format!(
                    "expected a pair of buffer names [\"a\", \"b\"], found {} entries",
                    items.len()
                ),
            ));
        }
        let a = string(cx, &items[0], &format!("{field}[0]"))?;
        let b = string(cx, &items[1], &format!("{field}[1]"))?;
        swaps.push(RawSwap {
            names: [(a, items[0].span.clone()), (b, items[1].span.clone())],
            span: pair.span.clone(),
            field,
        });
    }
    Ok(swaps)
}

/// Swap pairs as argument indices with their places.
pub(super) type Swaps = (Vec<(usize, usize)>, Vec<Location>);

pub(super) fn resolve_swaps(cx: &Cx, raw: Vec<RawSwap>, args: &[ArgSpec]) -> Res<Swaps> {
    let mut out: Swaps = (Vec::new(), Vec::new());
    let mut used: BTreeMap<usize, String> = BTreeMap::new();
    for s in raw {
        let mut idx = [0usize; 2];
        for (j, (name, span)) in s.names.iter().enumerate() {
            let field = format!("{}[{j}]", s.field);
            let Some(i) = args.iter().position(|a| &a.name == name) else {
                let names: Vec<&str> = args.iter().map(|a| a.name.as_str()).collect();
                return Err(cx.err(
                    span,
                    &field,
                    format!("unknown argument `{name}`; arguments: {}", names.join(", ")),
                ));
            };
            if !matches!(args[i].kind, ArgKind::Buffer { .. }) {
                return Err(cx.err(
                    span,
                    &field,
                    format!("`{name}` is a scalar; only buffers can be swapped"),
                ));
            }
            if let Some(prev) = used.get(&i) {
                return Err(cx.err(
                    span,
                    &field,
                    format!("`{name}` is already swapped in {prev}"),
                ));
            }
            idx[j] = i;
        }
        if idx[0] == idx[1] {
            return Err(cx.err(
                &s.span,
                &s.field,
                format!("`{}` is swapped with itself", s.names[0].0),
            ));
        }
        let (ArgKind::Buffer { elem: ea, .. }, ArgKind::Buffer { elem: eb, .. }) =
            (&args[idx[0]].kind, &args[idx[1]].kind)
        else {
            unreachable!("both checked to be buffers")
        };
        if ea != eb {
            return Err(cx.err(
                &s.span,
                &s.field,
                format!(
                    "buffers of different types cannot be swapped: `{}` is {ea}, `{}` is {eb}",
                    s.names[0].0, s.names[1].0
                ),
            ));
        }
        used.insert(idx[0], s.field.clone());
        used.insert(idx[1], s.field.clone());
        out.0.push((idx[0], idx[1]));
        out.1.push(cx.at(&s.span, &s.field));
    }
    Ok(out)
}

/// The launch a harness spec carries: one thread, never run.
pub(super) fn trivial_launch(cx: &Cx, span: &Range<usize>) -> Launch {
    let one = || Located {
        value: Expr::number(1.0),
        at: cx.at(span, "harness"),
    };
    Launch {
        grid: vec![one()],
        block: vec![one()],
        shared_bytes: Located {
            value: Expr::number(0.0),
            at: cx.at(span, "harness"),
        },
        repeat: None,
        block_at: cx.at(span, "harness"),
    }
}
