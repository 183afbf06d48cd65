//! `[[launches]]`: a pipeline of launches over the declared `[[args]]`, with
//! `for` loops whose variable the expressions inside may use; and `kernel`,
//! which names one kernel or several.

use super::args::valid_name;
use super::launch::{read_geometry, read_swaps, resolve_swaps};
use super::read::{array, expr, string, table, Cx, Res};
use super::TYPE_NAMES;
use crate::spec::model::{ArgSpec, ElemType, Launch};
use crate::spec::pipeline::{LaunchArg, LaunchSpec, LoopSpec, Step};
use crate::spec::tree::{Node, Value};
use std::ops::Range;

const LAUNCH_ENTRY_KEYS: &[&str] = &["kernel", "grid", "block", "shared_bytes", "repeat", "args"];
const LOOP_KEYS: &[&str] = &["for", "from", "to", "by", "swap", "body"];
const SCALAR_KEYS: &[&str] = &["name", "type", "value"];

/// `kernel`: one name, or an array of names (a pipeline's kernels).
pub(super) fn read_kernel_names(cx: &Cx, node: &Node) -> Res<Vec<(String, Range<usize>)>> {
    let items: Vec<(&Node, String)> = match &node.value {
        Value::Str(_) => vec![(node, "kernel".to_string())],
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, n)| (n, format!("kernel[{i}]")))
            .collect(),
        other => {
            return Err(cx.err(
                &node.span,
                "kernel",
                format!("expected a string, found {}", other.type_name()),
            ))
        }
    };
    if items.is_empty() {
        return Err(cx.err(&node.span, "kernel", "expected at least one kernel name"));
    }
    let mut out: Vec<(String, Range<usize>)> = Vec::new();
    for (n, field) in items {
        let name = string(cx, n, &field)?;
        if name.trim().is_empty() {
            return Err(cx.err(&n.span, &field, "expected a non-empty string"));
        }
        if let Some(j) = out.iter().position(|(k, _)| *k == name) {
            return Err(cx.err(
                &n.span,
                &field,
                format!("`{name}` is listed twice (also kernel[{j}])"),
            ));
        }
        out.push((name, n.span.clone()));
    }
    Ok(out)
}

struct Reading<'a> {
    cx: &'a Cx,
    args: &'a [ArgSpec],
    /// The kernels `kernel` lists (fixed), or those named so far.
    kernels: Vec<String>,
    declared: bool,
    used_args: Vec<bool>,
    used_kernels: Vec<bool>,
}

/// Reads `[[launches]]`; returns the pipeline and its kernels (those of
/// `kernel` when given, else in the order launches first name them).
pub(super) fn read_pipeline(
    cx: &Cx,
    node: &Node,
    declared: Option<Vec<(String, Range<usize>)>>,
    args: &[ArgSpec],
) -> Res<(Vec<Step>, Vec<String>)> {
    let mut r = Reading {
        cx,
        args,
        kernels: declared.iter().flatten().map(|(k, _)| k.clone()).collect(),
        declared: declared.is_some(),
        used_args: vec![false; args.len()],
        used_kernels: vec![false; declared.as_ref().map_or(0, Vec::len)],
    };
    let steps = r.steps(node, "launches", &mut Vec::new())?;
    if let Some(declared) = &declared {
        if let Some(i) = r.used_kernels.iter().position(|u| !u) {
            let field = if declared.len() == 1 {
                "kernel".to_string()
            } else {
                format!("kernel[{i}]")
            };
            return Err(cx.err(
                &declared[i].1,
                &field,
                format!(
                    "`{}` is launched by no launch; remove it or launch it",
                    declared[i].0
                ),
            ));
        }
    }
    if let Some(i) = r.used_args.iter().position(|u| !u) {
        return Err(args[i].at.error(
            &cx.file,
            format!(
                "`{}` is passed to no launch; remove it or pass it in a launch's args",
                args[i].name
            ),
        ));
    }
    Ok((steps, r.kernels))
}

impl Reading<'_> {
    fn steps(&mut self, node: &Node, field: &str, vars: &mut Vec<String>) -> Res<Vec<Step>> {
        let cx = self.cx;
        let items = array(cx, node, field, "an array of launch tables ([[...]])")?;
        if items.is_empty() {
            return Err(cx.err(
                &node.span,
                field,
                "no launches; expected at least one launch table",
            ));
        }
        let mut steps = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let field = format!("{field}[{i}]");
            let is_loop =
                matches!(&item.value, Value::Table(e) if e.iter().any(|e| e.key == "for"));
            steps.push(if is_loop {
                Step::Loop(self.each(item, &field, vars)?)
            } else {
                Step::Launch(self.launch(item, &field)?)
            });
        }
        Ok(steps)
    }

    fn each(&mut self, item: &Node, field: &str, vars: &mut Vec<String>) -> Res<LoopSpec> {
        let cx = self.cx;
        let t = table(cx, item, field, LOOP_KEYS)?;
        let var_node = t.req(cx, "for", "the loop variable's name")?;
        let var = string(cx, var_node, &t.path("for"))?;
        if !valid_name(&var) {
            return Err(cx.err(
                &var_node.span,
                &t.path("for"),
                format!(
                    "\"{var}\" is not a valid name (letters, digits, _; not starting with a digit)"
                ),
            ));
        }
        if vars.contains(&var) {
            return Err(cx.err(
                &var_node.span,
                &t.path("for"),
                format!("`{var}` is already the variable of an enclosing loop"),
            ));
        }
        let bound = |key: &str, default: f64| -> Res<_> {
            match t.get(key) {
                Some(n) => expr(cx, n, &t.path(key)),
                None => Ok(crate::spec::model::Located {
                    value: crate::spec::Expr::number(default),
                    at: cx.at(&t.span, &t.path(key)),
                }),
            }
        };
        let from = bound("from", 0.0)?;
        let to = expr(
            cx,
            t.req(cx, "to", "the loop's end, exclusive (an expression)")?,
            &t.path("to"),
        )?;
        let by = bound("by", 1.0)?;
        let (swap, swap_at) = match t.get("swap") {
            Some(s) => resolve_swaps(cx, read_swaps(cx, s, &t.path("swap"))?, self.args)?,
            None => Default::default(),
        };
        let body_node = t.req(
            cx,
            "body",
            "the launches the loop runs ([[launches.body]] tables)",
        )?;
        vars.push(var.clone());
        let body = self.steps(body_node, &t.path("body"), vars)?;
        vars.pop();
        Ok(LoopSpec {
            var,
            from,
            to,
            by,
            swap,
            swap_at,
            body,
            field: field.to_string(),
            at: cx.at(&var_node.span, &t.path("for")),
        })
    }

    fn launch(&mut self, item: &Node, field: &str) -> Res<LaunchSpec> {
        let cx = self.cx;
        let t = table(cx, item, field, LAUNCH_ENTRY_KEYS)?;
        let kernel = match t.get("kernel") {
            Some(n) => {
                let name = string(cx, n, &t.path("kernel"))?;
                match self.kernels.iter().position(|k| *k == name) {
                    Some(k) => k,
                    None if self.declared => {
                        return Err(cx.err(
                            &n.span,
                            &t.path("kernel"),
                            format!(
                            "`{name}` is not one of the spec's kernels ({}); add it to `kernel`",
                            self.kernels.join(", ")
                        ),
                        ))
                    }
                    None if name.trim().is_empty() => {
                        return Err(cx.err(
                            &n.span,
                            &t.path("kernel"),
                            "expected a non-empty string",
                        ))
                    }
                    None => {
                        self.kernels.push(name);
                        self.kernels.len() - 1
                    }
                }
            }
            None if self.declared && self.kernels.len() == 1 => 0,
            None => return Err(t.missing(cx, "kernel", "the name of the kernel this launch runs")),
        };
        if self.declared {
            self.used_kernels[kernel] = true;
        }
        let (mut geometry, raw): (Launch, _) = read_geometry(cx, &t, field)?;
        if let (Some(repeat), Some(raw)) = (geometry.repeat.as_mut(), raw) {
            (repeat.swap, repeat.swap_at) = resolve_swaps(cx, raw, self.args)?;
        }
        let args_node = t.req(
            cx,
            "args",
            "the kernel's arguments in order: names of [[args]] entries, or { type, value } scalars",
        )?;
        let args_field = t.path("args");
        let items = array(
            cx,
            args_node,
            &args_field,
            "an array of argument names or { type, value } tables",
        )?;
        let mut args = Vec::with_capacity(items.len());
        for (i, a) in items.iter().enumerate() {
            let f = format!("{args_field}[{i}]");
            args.push(match &a.value {
                Value::Str(name) => {
                    let Some(j) = self.args.iter().position(|x| x.name == *name) else {
                        let names: Vec<&str> = self.args.iter().map(|x| x.name.as_str()).collect();
                        return Err(cx.err(
                            &a.span,
                            &f,
                            format!(
                                "unknown argument `{name}`; [[args]] declares {} (or give a scalar as {{ type = \"i32\", value = \"...\" }})",
                                names.join(", ")
                            ),
                        ));
                    };
                    self.used_args[j] = true;
                    LaunchArg::Named(j)
                }
                Value::Table(_) => self.scalar(a, &f)?,
                other => {
                    return Err(cx.err(
                        &a.span,
                        &f,
                        format!(
                            "expected an argument name or a {{ type, value }} table, found {}",
                            other.type_name()
                        ),
                    ))
                }
            });
        }
        Ok(LaunchSpec {
            kernel,
            geometry,
            args,
            field: field.to_string(),
        })
    }

    fn scalar(&self, node: &Node, field: &str) -> Res<LaunchArg> {
        let cx = self.cx;
        let t = table(cx, node, field, SCALAR_KEYS)?;
        let name = match t.get("name") {
            Some(n) => {
                let s = string(cx, n, &t.path("name"))?;
                if !valid_name(&s) {
                    return Err(cx.err(
                        &n.span,
                        &t.path("name"),
                        format!("\"{s}\" is not a valid name (letters, digits, _; not starting with a digit)"),
                    ));
                }
                Some(s)
            }
            None => None,
        };
        let type_node = t.req(cx, "type", &format!("one of {TYPE_NAMES}"))?;
        let type_name = string(cx, type_node, &t.path("type"))?;
        let ty = ElemType::from_name(&type_name).ok_or_else(|| {
            cx.err(
                &type_node.span,
                &t.path("type"),
                format!("unknown type \"{type_name}\"; expected one of {TYPE_NAMES}"),
            )
        })?;
        let value = expr(
            cx,
            t.req(cx, "value", "the scalar's value (an expression)")?,
            &t.path("value"),
        )?;
        Ok(LaunchArg::Scalar { name, ty, value })
    }
}
