//! `[acceptance]`: the comparison metric and its tolerance.

use super::read::{quote_list, string, table, Cx, Res};
use crate::ranges::Bounded as _;
use crate::spec::expr::format_number;
use crate::spec::model::{Acceptance, Metric};
use crate::spec::tree::{Node, Value};

const ACCEPTANCE_KEYS: &[&str] = &["metric", "tolerance"];

pub(super) fn read_acceptance(cx: &Cx, node: &Node) -> Res<Acceptance> {
    let t = table(cx, node, "acceptance", ACCEPTANCE_KEYS)?;
    let names = quote_list(&Metric::NAMES);
    let m = t.req(cx, "metric", &format!("one of {names}"))?;
    let name = string(cx, m, "acceptance.metric")?;
    let metric = Metric::from_name(&name).ok_or_else(|| {
        cx.err(
            &m.span,
            "acceptance.metric",
            format!("unknown metric \"{name}\"; expected one of {names}"),
        )
    })?;
    let tolerance = match t.get("tolerance") {
        None => 0.0,
        Some(n) => {
            let v = match &n.value {
                Value::Int(i) => *i as f64,
                Value::Float(f) if f.is_finite() => *f,
                // `nan` and `inf` are TOML floats: name them, not the type.
                Value::Float(f) => {
                    return Err(cx.err(
                        &n.span,
                        "acceptance.tolerance",
                        format!("expected a finite number >= 0, found {}", f.show()),
                    ))
                }
                other => {
                    return Err(cx.err(
                        &n.span,
                        "acceptance.tolerance",
                        format!("expected a number >= 0, found {}", other.type_name()),
                    ))
                }
            };
            if v < 0.0 {
                return Err(cx.err(
                    &n.span,
                    "acceptance.tolerance",
                    format!("must be >= 0, found {}", format_number(v)),
                ));
            }
            if metric == Metric::Exact && v != 0.0 {
                return Err(cx.err(
                    &n.span,
                    "acceptance.tolerance",
                    "metric \"exact\" takes no tolerance (leave it out or set 0)",
                ));
            }
            v
        }
    };
    Ok(Acceptance { metric, tolerance })
}
