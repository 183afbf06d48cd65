//! `[tests]`: the train and heldout test cases, each a seed and parameters,
//! and the sets `[tests.sim]` and `[tests.gpu]` give their backend instead.

use super::read::{array, integer, number, string, table, Cx, Res, Tab};
use crate::spec::expr::MAX_EXACT_INT;
use crate::spec::generate::Generation;
use crate::spec::model::{TestCase, TestOverrides, TestTarget, WrittenTests};
use crate::spec::tree::{Node, Value};
use std::collections::{BTreeMap, BTreeSet};

const TESTS_KEYS: &[&str] = &[
    "train", "heldout", "sim", "gpu", "fixed", "allowed", "generate",
];
const SETS: [&str; 2] = ["train", "heldout"];

pub(super) fn read_tests(cx: &Cx, node: &Node) -> Res<WrittenTests> {
    let t = table(cx, node, "tests", TESTS_KEYS)?;
    let expected = "a non-empty array of tests, e.g. [{ n = 1000, seed = 1 }]";
    let train = read_set(cx, t.req(cx, "train", expected)?, &t, "train")?;
    let heldout = read_set(cx, t.req(cx, "heldout", expected)?, &t, "heldout")?;
    let mut overrides = TestTarget::ALL.map(|_| TestOverrides::default());
    for (target, o) in TestTarget::ALL.into_iter().zip(&mut overrides) {
        if let Some(n) = t.get(target.name()) {
            *o = read_overrides(cx, n, &t.path(target.name()))?;
        }
    }
    let [sim, gpu] = overrides;
    let mut written = WrittenTests {
        train,
        heldout,
        sim,
        gpu,
        generation: Generation::default(),
    };
    written.generation = read_generation(cx, &t, &all_written(&written))?;
    Ok(written)
}

/// `fixed`, `allowed` and `generate`: names must be parameters some test
/// has; `allowed` lists numbers; `generate` is a count (0: none).
fn read_generation(cx: &Cx, t: &Tab, tests: &[TestCase]) -> Res<Generation> {
    let mut g = Generation::default();
    let known: BTreeSet<&str> = tests
        .iter()
        .flat_map(|t| t.params.keys().map(String::as_str))
        .collect();
    let check_name = |span: &std::ops::Range<usize>, field: &str, name: &str| {
        if known.contains(name) {
            Ok(())
        } else {
            Err(cx.err(
                span,
                field,
                format!(
                    "unknown parameter `{name}` (parameters: {})",
                    known.iter().copied().collect::<Vec<_>>().join(", ")
                ),
            ))
        }
    };
    if let Some(n) = t.get("generate") {
        let field = t.path("generate");
        let v = integer(cx, n, &field)?;
        g.max = usize::try_from(v)
            .ok()
            .filter(|v| *v <= 64)
            .ok_or_else(|| {
                cx.err(
                    &n.span,
                    &field,
                    format!("expected 0..=64 (how many generated tests at most), found {v}"),
                )
            })?;
    }
    if let Some(n) = t.get("fixed") {
        let field = t.path("fixed");
        for (i, item) in array(cx, n, &field, "an array of parameter names")?
            .iter()
            .enumerate()
        {
            let f = format!("{field}[{i}]");
            let name = string(cx, item, &f)?;
            check_name(&item.span, &f, &name)?;
            g.fixed.insert(name);
        }
    }
    if let Some(n) = t.get("allowed") {
        let field = t.path("allowed");
        let Value::Table(entries) = &n.value else {
            return Err(cx.err(&n.span, &field, "expected a table of parameter = [values]"));
        };
        for e in entries {
            let f = format!("{field}.{}", e.key);
            check_name(&e.node.span, &f, &e.key)?;
            let items = array(cx, &e.node, &f, "a non-empty array of numbers")?;
            if items.is_empty() {
                return Err(cx.err(
                    &e.node.span,
                    &f,
                    "empty; expected a non-empty array of numbers",
                ));
            }
            let values = items
                .iter()
                .enumerate()
                .map(|(i, item)| number(cx, item, &format!("{f}[{i}]")).map(|v| v.as_f64()))
                .collect::<Res<Vec<f64>>>()?;
            g.allowed.insert(e.key.clone(), values);
        }
    }
    Ok(g)
}

/// `[tests.sim]` or `[tests.gpu]`: `train` and/or `heldout`, each replacing
/// that set on its backend.
fn read_overrides(cx: &Cx, node: &Node, field: &str) -> Res<TestOverrides> {
    let t = table(cx, node, field, &SETS)?;
    let [train, heldout] = SETS.map(|set| t.get(set).map(|n| read_set(cx, n, &t, set)));
    let o = TestOverrides {
        train: train.transpose()?,
        heldout: heldout.transpose()?,
    };
    if o.train.is_none() && o.heldout.is_none() {
        return Err(cx.err(
            &t.span,
            field,
            "empty; expected train and/or heldout, each replacing [tests]' set on this backend",
        ));
    }
    Ok(o)
}

/// One set of tests, named `train[0]`, `heldout[1]`, ... (also in a
/// backend's table: names are positions within the set).
fn read_set(cx: &Cx, n: &Node, t: &Tab, set: &str) -> Res<Vec<TestCase>> {
    let field = t.path(set);
    let expected = "a non-empty array of tests, e.g. [{ n = 1000, seed = 1 }]";
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
    Ok(tests)
}

/// Every test the file gives, for the checks made on load: `[tests]`'s
/// under their names, a backend's under its table's path
/// (`tests.gpu.heldout[0]`), so that an error says which one it is.
pub(super) fn all_written(w: &WrittenTests) -> Vec<TestCase> {
    let mut all: Vec<TestCase> = w.train.iter().chain(&w.heldout).cloned().collect();
    for target in TestTarget::ALL {
        let o = w.overrides(target);
        for set in [&o.train, &o.heldout].into_iter().flatten() {
            all.extend(set.iter().map(|t| TestCase {
                name: format!("tests.{}.{}", target.name(), t.name),
                ..t.clone()
            }));
        }
    }
    all
}
