//! `[tests]`: the train and heldout test cases, each a seed and parameters.

use super::read::{array, integer, table, Cx, Res};
use crate::spec::expr::MAX_EXACT_INT;
use crate::spec::model::TestCase;
use crate::spec::tree::{Node, Value};
use std::collections::BTreeMap;

const TESTS_KEYS: &[&str] = &["train", "heldout"];

pub(super) fn read_tests(cx: &Cx, node: &Node) -> Res<(Vec<TestCase>, Vec<TestCase>)> {
    let t = table(cx, node, "tests", TESTS_KEYS)?;
    let mut sets = Vec::new();
    for set in ["train", "heldout"] {
        let field = t.path(set);
        let expected = "a non-empty array of tests, e.g. [{ n = 1000, seed = 1 }]";
        let n = t.req(cx, set, expected)?;
        let items = array(cx, n, &field, expected)?;
        if items.is_empty() {
            return Err(cx.err(&n.span, &field, format!("empty; expected {expected}")));
        }
        let mut tests = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let tf = format!("{field}[{i}]");
            let Value::Table(entries) = &item.value else {
                return Err(cx.err(
                    &item.span,
                    &tf,
                    format!(
                        "expected a table of parameters with a seed, found {}",
                        item.value.type_name()
                    ),
                ));
            };
            let mut seed = None;
            let mut params = BTreeMap::new();
            for e in entries {
                let pf = format!("{tf}.{}", e.key);
                if e.key == "seed" {
                    let s = integer(cx, &e.node, &pf)?;
                    let s = u64::try_from(s).map_err(|_| {
                        cx.err(
                            &e.node.span,
                            &pf,
                            format!("expected a non-negative integer, found {s}"),
                        )
                    })?;
                    seed = Some(s);
                    continue;
                }
                let v = match &e.node.value {
                    Value::Int(i) if (*i as f64).abs() <= MAX_EXACT_INT => *i as f64,
                    Value::Int(i) => {
                        return Err(cx.err(
                            &e.node.span,
                            &pf,
                            format!("{i} is beyond 2^53, the largest exact value"),
                        ))
                    }
                    Value::Float(f) if f.is_finite() => *f,
                    other => {
                        return Err(cx.err(
                            &e.node.span,
                            &pf,
                            format!("expected a number, found {}", other.type_name()),
                        ))
                    }
                };
                params.insert(e.key.clone(), v);
            }
            let Some(seed) = seed else {
                return Err(cx.err(&item.span, &tf, "missing `seed` (a non-negative integer)"));
            };
            tests.push(TestCase {
                name: format!("{set}[{i}]"),
                seed,
                params,
            });
        }
        sets.push(tests);
    }
    let heldout = sets.pop().unwrap_or_default();
    let train = sets.pop().unwrap_or_default();
    Ok((train, heldout))
}
