//! The skeleton's launch section from what `sites` read in the host
//! source: `[launch]` for one launch outside any loop, else `[[launches]]`
//! with the loops, swaps and per-launch scalars; TODO placeholders where
//! the source says something the spec cannot (the C text quoted), and
//! always a pointer to docs/spec.md's pipelines section.

use super::sites::{spec_names, Expr, HostLaunch, HostLaunches, HostLoop, HostStep};
use super::{comment, quoted, todo, LaunchSource, Sketch, SketchKind};
use std::collections::BTreeMap;

/// Where docs/spec.md describes `[[launches]]`.
pub const PIPELINES_DOC: &str = "docs/spec.md#pipelines-launches";

/// How the kernel's parameters and launches go into the skeleton.
#[derive(Debug)]
pub(crate) struct Plan<'s> {
    /// Per parameter: declared in `[[args]]` (else an inline scalar of each
    /// launch), and a scalar's value as the launches pass it.
    pub(crate) declared: Vec<bool>,
    pub(crate) values: Vec<Option<Expr>>,
    /// The launches, when they make a pipeline.
    pub(crate) pipeline: Option<&'s HostLaunches>,
    /// The one launch of the `[launch]` form, when read from the source.
    pub(crate) single: Option<&'s HostLaunch>,
    /// Host buffer expressions and the `[[args]]` entry each stands for.
    binding: BTreeMap<String, String>,
}

pub(crate) fn plan(sketch: &Sketch) -> Plan<'_> {
    let n = sketch.params.len();
    let mut plan = Plan {
        declared: vec![true; n],
        values: vec![None; n],
        pipeline: None,
        single: None,
        binding: BTreeMap::new(),
    };
    let LaunchSource::Found(found) = &sketch.launches else {
        return plan;
    };
    let mut all = Vec::new();
    flatten(&found.steps, &mut all);
    let fits: Vec<&HostLaunch> = all.iter().copied().filter(|l| l.args.len() == n).collect();
    match found.steps.as_slice() {
        [HostStep::Launch(l)] => plan.single = Some(l),
        _ => plan.pipeline = Some(found),
    }
    for (i, p) in sketch.params.iter().enumerate() {
        match p.kind {
            SketchKind::Scalar { .. } => {
                let mut values = fits.iter().map(|l| &l.args[i]);
                let first = values.next();
                // The same value in every launch, unchanged by any loop
                // (or the same C text the spec cannot say).
                let same = first
                    .is_some_and(|a| !a.varies && values.all(|b| b.value == a.value && !b.varies));
                plan.values[i] = first.map(|a| a.value.clone());
                plan.declared[i] = plan.pipeline.is_none() || fits.is_empty() || same;
            }
            SketchKind::Buffer { .. } => {
                // The first launch passing this parameter names its buffer.
                if let Some(l) = fits.first() {
                    plan.binding.insert(l.args[i].text.clone(), p.name.clone());
                }
            }
        }
    }
    plan
}

fn flatten<'a>(steps: &'a [HostStep], out: &mut Vec<&'a HostLaunch>) {
    for s in steps {
        match s {
            HostStep::Launch(l) => out.push(l),
            HostStep::Loop(l) => flatten(&l.body, out),
        }
    }
}

/// Where the launches came from, or why none were read; then the pointer
/// to `[[launches]]`.
fn provenance(sketch: &Sketch, out: &mut String) {
    match &sketch.launches {
        LaunchSource::NoSource => {
            *out += "# No CUDA source was read for launches (the IR names none in its debug info):\n\
                     # `gevod spec init --source <file.cu>` fills grid, block and loops from its <<<...>>> launch.\n"
        }
        LaunchSource::NotFound { searched } => {
            *out += &format!(
                "# No <<<...>>> launch of {} in {}: `--source <file.cu>` names the file that launches it.\n",
                comment(&sketch.kernel),
                comment(&searched.join(", "))
            )
        }
        LaunchSource::Found(f) => {
            *out += &format!(
                "# Read from the launches in {}, function {} (line {}): check them.\n",
                comment(&f.file),
                comment(&f.function),
                f.line
            );
            if !f.elsewhere.is_empty() {
                *out += &format!(
                    "# Also launched at {}; this skeleton follows the first.\n",
                    comment(&f.elsewhere.join(", "))
                );
            }
        }
    }
}

/// `[launch]`, with the launch's geometry when one was read.
pub(crate) fn single(sketch: &Sketch, plan: &Plan) -> String {
    let mut out = String::from("\n[launch]\n");
    provenance(sketch, &mut out);
    out += &format!(
        "# A host loop that launches the kernel again and again (a scalar per launch, buffers\n\
         # swapped between launches) is a [[launches]] pipeline instead: {PIPELINES_DOC}.\n"
    );
    match plan.single {
        Some(l) => {
            out += &format!("# {}\n", call_line(sketch, l));
            geometry(l, &mut out);
        }
        None => {
            out += &format!(
                "# 1 to 3 expressions (x, y, z) over the tests' parameters.\ngrid = [{}]\nblock = [{}]\n",
                todo("blocks per grid, e.g. cdiv(n, 256)"),
                todo("threads per block, e.g. 256"),
            );
        }
    }
    out
}

/// A scalar `[[args]]` entry's `value`.
pub(crate) fn scalar_value(plan: &Plan, i: usize) -> String {
    match &plan.values[i] {
        Some(v) => expr(v, "the value"),
        None => todo("the value, e.g. n"),
    }
}

/// `[[launches]]`: the steps in order, loops as `for` entries.
pub(crate) fn pipeline(sketch: &Sketch, plan: &Plan) -> String {
    let Some(found) = plan.pipeline else {
        return String::new();
    };
    let mut out = String::from("\n");
    provenance(sketch, &mut out);
    out += &format!(
        "# [[launches]] runs these in order, loops included ({PIPELINES_DOC}); the expressions\n\
         # use the host's names, and each test gives a value to every name not set here.\n"
    );
    let mut taken: Vec<String> = names_used(sketch, plan);
    steps(sketch, plan, &found.steps, "launches", &mut taken, &mut out);
    out
}

fn steps(
    sketch: &Sketch,
    plan: &Plan,
    list: &[HostStep],
    path: &str,
    taken: &mut Vec<String>,
    out: &mut String,
) {
    for s in list {
        *out += &format!("\n[[{path}]]\n");
        match s {
            HostStep::Launch(l) => launch(sketch, plan, l, out),
            HostStep::Loop(l) => {
                looped(sketch, plan, l, taken, out);
                steps(sketch, plan, &l.body, &format!("{path}.body"), taken, out);
            }
        }
    }
}

fn looped(sketch: &Sketch, plan: &Plan, l: &HostLoop, taken: &mut Vec<String>, out: &mut String) {
    *out += &format!(
        "# {}:{}: {}\n",
        comment(&file(sketch)),
        l.line,
        short(&l.head)
    );
    let var = match &l.var {
        Some(v) => v.clone(),
        None => {
            let v = ["i", "j", "k", "l"]
                .iter()
                .map(|s| s.to_string())
                .chain((2..).map(|n| format!("i{n}")))
                .find(|v| !taken.contains(v))
                .unwrap_or_default();
            taken.push(v.clone());
            v
        }
    };
    *out += &format!("for = {}\n", quoted(&var));
    if l.from != Ok("0".into()) {
        *out += &format!("from = {}\n", expr(&l.from, "the loop's first value"));
    }
    let end = match &l.var {
        Some(_) => "the loop's end, exclusive",
        None => "how many times the loop runs",
    };
    *out += &format!("to = {}\n", expr(&l.to, end));
    if l.by != Ok("1".into()) {
        *out += &format!("by = {}\n", expr(&l.by, "the loop's step"));
    }
    let mut pairs: Vec<[String; 2]> = Vec::new();
    let mut unmatched = Vec::new();
    for (a, b) in &l.swaps {
        match swapped_args(sketch, plan, l, a, b) {
            Some(p) if !pairs.iter().flatten().any(|x| p.contains(x)) => pairs.push(p),
            Some(_) => {}
            None => unmatched.push(format!("{a} and {b}")),
        }
    }
    if !unmatched.is_empty() {
        *out += &format!(
            "# The loop also swaps {}, which its launches do not pass as buffers.\n",
            comment(&unmatched.join(", "))
        );
    }
    if !pairs.is_empty() {
        let pairs: Vec<String> = pairs
            .iter()
            .map(|[a, b]| format!("[{}, {}]", quoted(a), quoted(b)))
            .collect();
        *out += &format!("swap = [{}]\n", pairs.join(", "));
    }
    if !l.others.is_empty() {
        *out += &format!(
            "# The loop also launches {}: a pipeline of several kernels lists them in `kernel`\n\
             # and here ({PIPELINES_DOC}).\n",
            comment(&l.others.join(", "))
        );
    }
}

/// The `[[args]]` names of the buffers a swap of host `a` and `b`
/// exchanges: launch arguments that turn into each other when `a` and `b`
/// trade places (`d_in`/`d_out`, or `buf[src]`/`buf[dst]`).
fn swapped_args(
    sketch: &Sketch,
    plan: &Plan,
    l: &HostLoop,
    a: &str,
    b: &str,
) -> Option<[String; 2]> {
    let mut launches = Vec::new();
    flatten(&l.body, &mut launches);
    let n = sketch.params.len();
    for launch in launches.iter().filter(|x| x.args.len() == n) {
        let buffers: Vec<&str> = (0..n)
            .filter(|&i| matches!(sketch.params[i].kind, SketchKind::Buffer { .. }))
            .map(|i| launch.args[i].text.as_str())
            .collect();
        for x in &buffers {
            let exchanged = exchange(x, a, b);
            if exchanged.as_deref() == Some(*x) {
                continue;
            }
            if let Some(y) = buffers.iter().find(|y| Some(**y) == exchanged.as_deref()) {
                return Some([plan.binding.get(*x)?.clone(), plan.binding.get(*y)?.clone()]);
            }
        }
    }
    None
}

/// `text` with the host names `a` and `b` exchanged (whole words), or
/// `None` when it holds neither.
fn exchange(text: &str, a: &str, b: &str) -> Option<String> {
    if text == a {
        return Some(b.to_string());
    }
    if text == b {
        return Some(a.to_string());
    }
    let words: Vec<String> = split_words(text);
    if !words.iter().any(|w| w == a || w == b) {
        return None;
    }
    Some(
        words
            .into_iter()
            .map(|w| match w {
                w if w == a => b.to_string(),
                w if w == b => a.to_string(),
                w => w,
            })
            .collect(),
    )
}

/// Identifiers and everything between them, in order.
fn split_words(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut word = false;
    for c in text.chars() {
        let w = c.is_alphanumeric() || c == '_';
        match out.last_mut() {
            Some(last) if w == word => last.push(c),
            _ => out.push(c.to_string()),
        }
        word = w;
    }
    out
}

fn launch(sketch: &Sketch, plan: &Plan, l: &HostLaunch, out: &mut String) {
    *out += &format!("# {}\n", call_line(sketch, l));
    if !l.conditions.is_empty() {
        *out += &format!(
            "# Only {} in the source: keep the launch if the tests take that path.\n",
            comment(&l.conditions.join(", "))
        );
    }
    geometry(l, out);
    let n = sketch.params.len();
    if l.args.len() != n {
        *out += &format!(
            "args = [{}]\n",
            todo(&format!(
                "the kernel's {n} arguments; the source passes {} ({})",
                l.args.len(),
                short(&l.call)
            ))
        );
        return;
    }
    let mut items = Vec::new();
    for (i, (p, a)) in sketch.params.iter().zip(&l.args).enumerate() {
        items.push(match &p.kind {
            SketchKind::Buffer { .. } => match plan.binding.get(&a.text) {
                Some(name) => quoted(name),
                None => todo(&format!(
                    "the buffer `{}` passes here: declare it in [[args]] and name it",
                    short(&a.text)
                )),
            },
            SketchKind::Scalar { .. } if plan.declared[i] => quoted(&p.name),
            SketchKind::Scalar { ty } => format!(
                "{{ name = {}, type = {}, value = {} }}",
                quoted(&p.name),
                super::type_value(*ty),
                expr(&a.value, "this launch's value")
            ),
        });
    }
    *out += "args = [\n";
    for item in items {
        *out += &format!("  {item},\n");
    }
    *out += "]\n";
}

fn geometry(l: &HostLaunch, out: &mut String) {
    let dims = |d: &[Expr], what: &str| {
        d.iter()
            .map(|e| expr(e, what))
            .collect::<Vec<_>>()
            .join(", ")
    };
    *out += &format!("grid = [{}]\n", dims(&l.grid, "blocks per grid"));
    *out += &format!("block = [{}]\n", dims(&l.block, "threads per block"));
    match &l.shared {
        None => {}
        Some(Ok(v)) if v == "0" => {}
        Some(s) => {
            *out += &format!(
                "shared_bytes = {}\n",
                expr(s, "dynamic shared memory in bytes")
            )
        }
    }
}

/// An expression as a TOML value: an integer bare, other expressions as
/// strings, what the spec cannot say as a placeholder quoting the source.
fn expr(e: &Expr, what: &str) -> String {
    match e {
        Ok(v) if v.parse::<i64>().is_ok() => v.clone(),
        Ok(v) => quoted(v),
        Err(c) => todo(&format!("{what}; the source has `{}`", short(c))),
    }
}

fn call_line(sketch: &Sketch, l: &HostLaunch) -> String {
    format!("{}:{}: {}", comment(&file(sketch)), l.line, short(&l.call))
}

fn file(sketch: &Sketch) -> String {
    match &sketch.launches {
        LaunchSource::Found(f) => f.file.clone(),
        _ => String::new(),
    }
}

/// Source text for a comment or placeholder: one line, at most 160
/// characters.
fn short(s: &str) -> String {
    let s = comment(s);
    match s.char_indices().nth(160) {
        Some((at, _)) => format!("{}...", &s[..at]),
        None => s,
    }
}

/// The names the skeleton's expressions use that no loop sets: what every
/// test must give a value.
pub(crate) fn test_parameters(sketch: &Sketch, plan: &Plan) -> Vec<String> {
    let mut exprs: Vec<&Expr> = plan.values.iter().flatten().collect();
    let mut vars = Vec::new();
    if let LaunchSource::Found(f) = &sketch.launches {
        collect(sketch, &f.steps, &mut exprs, &mut vars);
    }
    let mut names: Vec<String> = exprs
        .iter()
        .filter_map(|e| e.as_ref().ok())
        .flat_map(|e| spec_names(e))
        .filter(|n| !vars.contains(n))
        .collect();
    names.sort();
    names.dedup();
    names
}

/// The expressions of `steps` (a launch's scalar arguments, not its
/// buffers), and the loops' variables.
fn collect<'a>(
    sketch: &Sketch,
    steps: &'a [HostStep],
    exprs: &mut Vec<&'a Expr>,
    vars: &mut Vec<String>,
) {
    for s in steps {
        match s {
            HostStep::Launch(l) => {
                exprs.extend(l.grid.iter().chain(&l.block).chain(&l.shared));
                if l.args.len() == sketch.params.len() {
                    let scalars = sketch.params.iter().zip(&l.args);
                    exprs.extend(
                        scalars
                            .filter(|(p, _)| matches!(p.kind, SketchKind::Scalar { .. }))
                            .map(|(_, a)| &a.value),
                    );
                }
            }
            HostStep::Loop(l) => {
                vars.extend(l.var.clone());
                exprs.extend([&l.from, &l.to, &l.by]);
                collect(sketch, &l.body, exprs, vars);
            }
        }
    }
}

/// Every name in use, loop variables included (a made-up loop variable
/// must differ from them).
fn names_used(sketch: &Sketch, plan: &Plan) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(f) = plan.pipeline {
        let mut exprs = Vec::new();
        collect(sketch, &f.steps, &mut exprs, &mut out);
        for e in exprs.iter().filter_map(|e| e.as_ref().ok()) {
            out.extend(spec_names(e));
        }
    }
    out
}
