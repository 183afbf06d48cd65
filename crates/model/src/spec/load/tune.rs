//! `[tune]`: constants with the values to try, `[tune.source]` (the values the
//! source defines), `[tune.chosen]` (the configuration this spec runs) and the
//! `ir` pattern; then the chosen configuration's IR file and its constants
//! added to every test's parameters.

use super::read::{array, integer, nonempty_string, Cx, Res};
use crate::access::AccessError;
use crate::spec::model::{TestCase, WrittenTests};
use crate::spec::tree::{Node, Value};
use crate::spec::tune::{describe, Configuration, Tune, MAX_CONFIGURATIONS};
use std::path::PathBuf;

/// Values one constant may list.
const MAX_VALUES: usize = 64;

pub(super) fn read_tune(cx: &Cx, node: &Node) -> Res<Tune> {
    let Value::Table(entries) = &node.value else {
        return Err(cx.err(
            &node.span,
            "tune",
            format!("expected a table, found {}", node.value.type_name()),
        ));
    };
    let mut constants = Vec::new();
    let mut ir_pattern = None;
    let (mut source_node, mut chosen_node) = (None, None);
    for e in entries {
        let field = format!("tune.{}", e.key);
        match e.key.as_str() {
            "ir" => ir_pattern = Some(nonempty_string(cx, &e.node, &field)?),
            "source" => source_node = Some(&e.node),
            "chosen" => chosen_node = Some(&e.node),
            name => {
                if !is_identifier(name) {
                    return Err(cx.err(
                        &e.key_span,
                        &field,
                        format!("`{name}` is not a preprocessor constant's name (letters, digits and _, not first a digit); the keys of [tune] are constants, `ir`, `source` and `chosen`"),
                    ));
                }
                constants.push((name.to_string(), read_values(cx, &e.node, &field)?));
            }
        }
    }
    if constants.is_empty() {
        return Err(cx.err(
            &node.span,
            "tune",
            "no constants; expected NAME = [values to try], e.g. BLOCK_SIZE = [8, 16, 32]",
        ));
    }
    let count = constants
        .iter()
        .try_fold(1usize, |n, (_, v)| n.checked_mul(v.len()))
        .filter(|&n| n <= MAX_CONFIGURATIONS);
    if count.is_none() {
        return Err(cx.err(
            &node.span,
            "tune",
            format!("more than {MAX_CONFIGURATIONS} configurations (the product of the value lists); each is compiled and timed, so list fewer values"),
        ));
    }
    let source = match source_node {
        Some(n) => read_configuration(cx, n, "tune.source", &constants, false)?,
        None => {
            return Err(cx.err(
                &node.span,
                "tune.source",
                "missing; expected [tune.source] with the value the source defines for each constant (what `ir` was built with)",
            ))
        }
    };
    let chosen = chosen_node
        .map(|n| read_configuration(cx, n, "tune.chosen", &constants, true))
        .transpose()?;
    let tune = Tune {
        constants,
        chosen_written: chosen.is_some(),
        chosen: chosen.unwrap_or_else(|| source.clone()),
        source,
        ir_pattern,
    };
    check_pattern(cx, node, &tune)?;
    Ok(tune)
}

fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn read_values(cx: &Cx, node: &Node, field: &str) -> Res<Vec<i64>> {
    let expected = "an array of integers to try, e.g. [8, 16, 32]";
    let items = array(cx, node, field, expected)?;
    if items.is_empty() || items.len() > MAX_VALUES {
        return Err(cx.err(
            &node.span,
            field,
            format!("expected 1 to {MAX_VALUES} values, found {}", items.len()),
        ));
    }
    let mut values = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let v = integer(cx, item, &format!("{field}[{i}]"))?;
        if values.contains(&v) {
            return Err(cx.err(
                &item.span,
                &format!("{field}[{i}]"),
                format!("{v} is listed twice"),
            ));
        }
        values.push(v);
    }
    Ok(values)
}

/// `[tune.source]` or `[tune.chosen]`: a value for every constant and
/// nothing else; a chosen value must be one to try or the source's.
fn read_configuration(
    cx: &Cx,
    node: &Node,
    field: &str,
    constants: &[(String, Vec<i64>)],
    chosen: bool,
) -> Res<Configuration> {
    let Value::Table(entries) = &node.value else {
        return Err(cx.err(
            &node.span,
            field,
            format!(
                "expected a table of NAME = value, found {}",
                node.value.type_name()
            ),
        ));
    };
    let mut config = Configuration::new();
    for e in entries {
        let key_field = format!("{field}.{}", e.key);
        let Some((_, values)) = constants.iter().find(|(n, _)| *n == e.key) else {
            let names: Vec<&str> = constants.iter().map(|(n, _)| n.as_str()).collect();
            return Err(cx.err(
                &e.key_span,
                &key_field,
                format!(
                    "`{}` is not a constant of [tune] (constants: {})",
                    e.key,
                    names.join(", ")
                ),
            ));
        };
        let v = integer(cx, &e.node, &key_field)?;
        if chosen && !values.contains(&v) {
            return Err(cx.err(
                &e.node.span,
                &key_field,
                format!("{v} is not among the values to try, {values:?}"),
            ));
        }
        config.insert(e.key.clone(), v);
    }
    if let Some((name, _)) = constants.iter().find(|(n, _)| !config.contains_key(n)) {
        return Err(cx.err(
            &node.span,
            field,
            format!("no value for the constant `{name}`"),
        ));
    }
    Ok(config)
}

/// The pattern must name every constant (else two configurations would
/// share one file) and nothing else; it is needed once any configuration
/// is not the source's.
fn check_pattern(cx: &Cx, node: &Node, tune: &Tune) -> Res<()> {
    let Some(pattern) = &tune.ir_pattern else {
        if tune.configurations().len() > 1 {
            return Err(cx.err(
                &node.span,
                "tune.ir",
                "missing; expected the IR file of each configuration, e.g. \"tune/kernel.{BLOCK_SIZE}.ll\" ({NAME} stands for the constant's value)",
            ));
        }
        return Ok(());
    };
    let at = node_span(node, "ir").unwrap_or(node.span.clone());
    let mut rest = pattern.as_str();
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}') else {
            return Err(cx.err(&at, "tune.ir", "a `{` without its `}`"));
        };
        let name = &rest[open + 1..open + close];
        if !tune.constants.iter().any(|(n, _)| n == name) {
            return Err(cx.err(
                &at,
                "tune.ir",
                format!("{{{name}}} is not a constant of [tune]"),
            ));
        }
        rest = &rest[open + close + 1..];
    }
    if let Some((name, _)) = tune
        .constants
        .iter()
        .find(|(n, _)| !pattern.contains(&format!("{{{n}}}")))
    {
        return Err(cx.err(
            &at,
            "tune.ir",
            format!(
                "the pattern does not name {{{name}}}: every configuration needs a file of its own"
            ),
        ));
    }
    Ok(())
}

fn node_span(node: &Node, key: &str) -> Option<std::ops::Range<usize>> {
    match &node.value {
        Value::Table(entries) => entries
            .iter()
            .find(|e| e.key == key)
            .map(|e| e.node.span.clone()),
        _ => None,
    }
}

/// The chosen configuration's IR (the top-level `ir` for the source's),
/// checked as the spec's reader may open it.
pub(super) fn chosen_ir(cx: &Cx, node: &Node, tune: &Tune, top_ir: PathBuf) -> Res<PathBuf> {
    let Some(path) = tune.ir_path(&cx.dir, &tune.chosen) else {
        return Ok(top_ir);
    };
    cx.reader.check(&path).map_err(|e| {
        let why = match e {
            AccessError::NotFound { .. } => format!("{} does not exist", path.display()),
            other => other.to_string(),
        };
        let at = node_span(node, "ir").unwrap_or(node.span.clone());
        cx.err(
            &at,
            "tune.ir",
            format!("IR of the configuration {}: {why}", describe(&tune.chosen)),
        )
    })?;
    Ok(path)
}

/// Adds the chosen configuration's constants to every test's parameters
/// (what the expressions see) and keeps generated tests from changing them;
/// a test that already has a parameter of that name is an error.
pub(super) fn add_constants(
    cx: &Cx,
    node: &Node,
    tune: &Tune,
    tests: &mut WrittenTests,
) -> Res<()> {
    let mut sets: Vec<&mut Vec<TestCase>> = vec![&mut tests.train, &mut tests.heldout];
    for o in [&mut tests.sim, &mut tests.gpu] {
        sets.extend(o.train.as_mut());
        sets.extend(o.heldout.as_mut());
    }
    for set in sets {
        for test in set.iter_mut() {
            for (name, value) in &tune.chosen {
                if test.params.contains_key(name) {
                    return Err(cx.err(
                        &node.span,
                        &format!("tune.{name}"),
                        format!(
                            "test {} has a parameter `{name}` too; a constant of [tune] is every test's parameter, so rename one",
                            test.name
                        ),
                    ));
                }
                test.params.insert(name.clone(), *value as f64);
            }
        }
    }
    tests.generation.fixed.extend(tune.chosen.keys().cloned());
    Ok(())
}
