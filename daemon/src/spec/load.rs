//! Parsing and static validation of a spec file.

use super::error::{Location, Locator, SpecError};
use super::expr::{format_number, Expr, MAX_EXACT_INT};
use super::inputs::MAX_BUFFER_BYTES;
use super::model::*;
use super::npy;
use super::tree::{self, Entry, Node, Value};
use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The newest spec format version this code reads.
pub const SPEC_VERSION: i64 = 1;

const TOP_KEYS: &[&str] = &[
    "version",
    "ir",
    "kernel",
    "arch",
    "project",
    "launch",
    "args",
    "tests",
    "acceptance",
    "harness",
];
const HARNESS_KEYS: &[&str] = &[
    "command",
    "workdir",
    "timeout_s",
    "max_output_bytes",
    "rounds",
    "outputs",
];
const HARNESS_OUTPUT_KEYS: &[&str] = &["file", "type"];
const LAUNCH_KEYS: &[&str] = &["grid", "block", "shared_bytes", "repeat"];
const REPEAT_KEYS: &[&str] = &["count", "swap"];
const ARG_KEYS: &[&str] = &["name", "kind", "type", "len", "fill", "role", "value"];
const FILL_KINDS: &[&str] = &["uniform", "normal", "int_range", "iota", "constant", "file"];
const TESTS_KEYS: &[&str] = &["train", "heldout"];
const ACCEPTANCE_KEYS: &[&str] = &["metric", "tolerance"];
const TYPE_NAMES: &str = "f32, f64, i8, i16, i32, i64, u8, u16, u32, u64";

pub(crate) struct Cx {
    pub(crate) file: PathBuf,
    dir: PathBuf,
    locator: Locator,
}

type Res<T> = Result<T, SpecError>;

impl Cx {
    fn err(&self, span: &Range<usize>, field: &str, message: impl Into<String>) -> SpecError {
        self.locator.error(span.start, field, message)
    }

    fn at(&self, span: &Range<usize>, field: &str) -> Location {
        Location::at(&self.locator, span.start, field)
    }

    fn resolve(&self, p: &str) -> PathBuf {
        self.dir.join(p)
    }
}

/// A table being read: unknown keys have already been refused.
struct Tab<'n> {
    entries: &'n [Entry],
    field: String,
    span: Range<usize>,
}

impl<'n> Tab<'n> {
    fn get(&self, key: &str) -> Option<&'n Node> {
        self.entries.iter().find(|e| e.key == key).map(|e| &e.node)
    }

    fn path(&self, key: &str) -> String {
        join(&self.field, key)
    }

    fn missing(&self, cx: &Cx, key: &str, expected: &str) -> SpecError {
        cx.err(
            &self.span,
            &self.path(key),
            format!("missing; expected {expected}"),
        )
    }

    fn req(&self, cx: &Cx, key: &str, expected: &str) -> Res<&'n Node> {
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

fn quote_list(items: &[&str]) -> String {
    items.join(", ")
}

fn table<'n>(cx: &Cx, node: &'n Node, field: &str, allowed: &[&str]) -> Res<Tab<'n>> {
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

fn string(cx: &Cx, node: &Node, field: &str) -> Res<String> {
    match &node.value {
        Value::Str(s) => Ok(s.clone()),
        other => Err(cx.err(
            &node.span,
            field,
            format!("expected a string, found {}", other.type_name()),
        )),
    }
}

fn nonempty_string(cx: &Cx, node: &Node, field: &str) -> Res<String> {
    let s = string(cx, node, field)?;
    if s.trim().is_empty() {
        return Err(cx.err(&node.span, field, "expected a non-empty string"));
    }
    Ok(s)
}

fn integer(cx: &Cx, node: &Node, field: &str) -> Res<i64> {
    match &node.value {
        Value::Int(i) => Ok(*i),
        other => Err(cx.err(
            &node.span,
            field,
            format!("expected an integer, found {}", other.type_name()),
        )),
    }
}

fn number(cx: &Cx, node: &Node, field: &str) -> Res<Number> {
    match &node.value {
        Value::Int(i) => Ok(Number::Int(*i)),
        Value::Float(f) if f.is_finite() => Ok(Number::Float(*f)),
        Value::Float(f) => Err(cx.err(
            &node.span,
            field,
            format!("expected a finite number, found {f}"),
        )),
        other => Err(cx.err(
            &node.span,
            field,
            format!("expected a number, found {}", other.type_name()),
        )),
    }
}

fn array<'n>(cx: &Cx, node: &'n Node, field: &str, expected: &str) -> Res<&'n [Node]> {
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
fn expr(cx: &Cx, node: &Node, field: &str) -> Res<Located<Expr>> {
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
                format!("expected a finite number, found {f}"),
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

/// Reads and validates a spec from its text.
pub(crate) fn parse_spec(path: &Path, text: &str) -> Res<Spec> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let cx = Cx {
        file: path.to_path_buf(),
        dir,
        locator: Locator::new(path, text),
    };
    let root = tree::parse(text).map_err(|(message, offset)| {
        cx.locator
            .error(offset, "", format!("invalid TOML: {message}"))
    })?;
    let spec = read_root(&cx, &root, text)?;
    // Static checks that need each test's parameter values.
    for test in spec.train.iter().chain(&spec.heldout) {
        spec.plan(test)?;
    }
    Ok(spec)
}

fn read_root(cx: &Cx, root: &Node, text: &str) -> Res<Spec> {
    // The version comes first: a newer file may well have keys we do not know.
    let Value::Table(entries) = &root.value else {
        return Err(cx.err(&root.span, "", "expected a TOML table"));
    };
    let version = entries.iter().find(|e| e.key == "version");
    match version {
        None => {
            return Err(cx.err(
                &root.span,
                "version",
                format!("missing; expected `version = {SPEC_VERSION}` at the top of the file"),
            ))
        }
        Some(e) => {
            let v = integer(cx, &e.node, "version")?;
            if v > SPEC_VERSION {
                return Err(cx.err(
                    &e.node.span,
                    "version",
                    format!("spec format version {v} is newer than this gevod supports ({SPEC_VERSION})"),
                ));
            }
            if v < 1 {
                return Err(cx.err(
                    &e.node.span,
                    "version",
                    format!("expected {SPEC_VERSION}, found {v}"),
                ));
            }
        }
    }
    let top = table(cx, root, "", TOP_KEYS)?;

    let ir_node = top.req(
        cx,
        "ir",
        "the path of the kernel's LLVM IR (.ll or .bc), relative to the spec file",
    )?;
    let ir_rel = nonempty_string(cx, ir_node, "ir")?;
    let ir = cx.resolve(&ir_rel);
    if !ir.is_file() {
        return Err(cx.err(
            &ir_node.span,
            "ir",
            format!("IR file {} does not exist", ir.display()),
        ));
    }
    let kernel = nonempty_string(
        cx,
        top.req(cx, "kernel", "the kernel's entry name")?,
        "kernel",
    )?;
    let arch = match top.get("arch") {
        None => None,
        Some(n) => {
            let a = string(cx, n, "arch")?;
            if !valid_arch(&a) {
                return Err(cx.err(
                    &n.span,
                    "arch",
                    format!("expected an sm_XX architecture such as sm_90, found \"{a}\""),
                ));
            }
            Some(a)
        }
    };
    let project = top
        .get("project")
        .map(|n| string(cx, n, "project"))
        .transpose()?;

    let harness_node = top.get("harness");
    let (launch, args) = match harness_node {
        None => {
            let launch_node = top.req(cx, "launch", "a [launch] table with grid and block")?;
            let (mut launch, raw_swaps) = read_launch(cx, launch_node)?;
            let args = read_args(cx, &top)?;
            if let (Some(repeat), Some(raw)) = (launch.repeat.as_mut(), raw_swaps) {
                resolve_swaps(cx, repeat, raw, &args)?;
            }
            (launch, args)
        }
        Some(h) => {
            // The application launches the kernel: a launch or arguments
            // here would be silently unused, so they are refused.
            for key in ["launch", "args"] {
                if let Some(n) = top.get(key) {
                    return Err(cx.err(
                        &n.span,
                        key,
                        "not used in harness mode (the [harness] command launches the kernel); remove it",
                    ));
                }
            }
            (trivial_launch(cx, &h.span), Vec::new())
        }
    };

    let tests_node = top.req(cx, "tests", "a [tests] table with train and heldout arrays")?;
    let (train, heldout) = read_tests(cx, tests_node)?;

    let acc_node = top.req(
        cx,
        "acceptance",
        "an [acceptance] table with metric (and tolerance)",
    )?;
    let acceptance = read_acceptance(cx, acc_node)?;
    let harness = harness_node
        .map(|n| read_harness(cx, n, &train, &heldout))
        .transpose()?;

    Ok(Spec {
        path: cx.file.clone(),
        ir,
        kernel,
        arch,
        project,
        launch,
        args,
        train,
        heldout,
        acceptance,
        harness,
        text: text.to_string(),
    })
}

fn valid_arch(a: &str) -> bool {
    let Some(rest) = a.strip_prefix("sm_") else {
        return false;
    };
    let digits = rest.trim_end_matches(|c: char| c.is_ascii_lowercase());
    !digits.is_empty()
        && digits.chars().all(|c| c.is_ascii_digit())
        && rest.len() - digits.len() <= 1
}

/// A swap pair as written: two names with the span of the pair.
struct RawSwap {
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

fn read_launch(cx: &Cx, node: &Node) -> Res<(Launch, Option<Vec<RawSwap>>)> {
    let t = table(cx, node, "launch", LAUNCH_KEYS)?;
    let grid_node = t.req(
        cx,
        "grid",
        "an array of 1 to 3 expressions, e.g. grid = [\"cdiv(n, 256)\"]",
    )?;
    let grid = read_dims(cx, grid_node, "launch.grid")?;
    let block_node = t.req(
        cx,
        "block",
        "an array of 1 to 3 expressions, e.g. block = [256]",
    )?;
    let block = read_dims(cx, block_node, "launch.block")?;
    let shared_bytes = match t.get("shared_bytes") {
        Some(n) => expr(cx, n, "launch.shared_bytes")?,
        None => Located {
            value: Expr::number(0.0),
            at: cx.at(&t.span, "launch.shared_bytes"),
        },
    };
    let mut raw_swaps = None;
    let repeat = match t.get("repeat") {
        None => None,
        Some(n) => {
            let r = table(cx, n, "launch.repeat", REPEAT_KEYS)?;
            let count = expr(
                cx,
                r.req(cx, "count", "the number of launches (an expression)")?,
                "launch.repeat.count",
            )?;
            let mut swaps = Vec::new();
            if let Some(s) = r.get("swap") {
                let expected = "an array of [\"a\", \"b\"] buffer-name pairs";
                for (k, pair) in array(cx, s, "launch.repeat.swap", expected)?
                    .iter()
                    .enumerate()
                {
                    let field = format!("launch.repeat.swap[{k}]");
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
            }
            raw_swaps = Some(swaps);
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
            block_at: cx.at(&block_node.span, "launch.block"),
        },
        raw_swaps,
    ))
}

fn resolve_swaps(cx: &Cx, repeat: &mut Repeat, raw: Vec<RawSwap>, args: &[ArgSpec]) -> Res<()> {
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
        repeat.swap.push((idx[0], idx[1]));
        repeat.swap_at.push(cx.at(&s.span, &s.field));
    }
    Ok(())
}

fn valid_name(n: &str) -> bool {
    let mut chars = n.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn read_args(cx: &Cx, top: &Tab) -> Res<Vec<ArgSpec>> {
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

fn pair(cx: &Cx, node: &Node, field: &str, what: &str) -> Res<[Number; 2]> {
    let items = array(cx, node, field, what)?;
    if items.len() != 2 {
        return Err(cx.err(
            &node.span,
            field,
            format!("expected {what}, found {} entries", items.len()),
        ));
    }
    Ok([
        number(cx, &items[0], &format!("{field}[0]"))?,
        number(cx, &items[1], &format!("{field}[1]"))?,
    ])
}

/// Checks that an integer fits the element type (any integer fits a float type).
fn check_fits(cx: &Cx, span: &Range<usize>, field: &str, v: i64, elem: ElemType) -> Res<()> {
    if let Some((lo, hi)) = elem.int_range() {
        if (v as i128) < lo || (v as i128) > hi {
            return Err(cx.err(
                span,
                field,
                format!("{v} does not fit in {elem} ({lo} to {hi})"),
            ));
        }
    }
    Ok(())
}

fn read_fill(cx: &Cx, node: &Node, field: &str, elem: ElemType) -> Res<Fill> {
    let expected = format!("expected one of {}", quote_list(FILL_KINDS));
    let entry = match &node.value {
        Value::Str(s) if s == "iota" => {
            return Ok(Fill::Iota {
                start: Number::Int(0),
            })
        }
        Value::Table(entries) if entries.len() == 1 => &entries[0],
        Value::Table(entries) if entries.len() > 1 => {
            let keys: Vec<String> = entries.iter().map(|e| format!("`{}`", e.key)).collect();
            return Err(cx.err(
                &node.span,
                field,
                format!(
                    "expected exactly one of {}, found {}",
                    quote_list(FILL_KINDS),
                    keys.join(" and ")
                ),
            ));
        }
        _ => {
            return Err(cx.err(
                &node.span,
                field,
                format!("{expected} (e.g. fill = {{ uniform = [-1.0, 1.0] }})"),
            ))
        }
    };
    let sub = format!("{field}.{}", entry.key);
    let n = &entry.node;
    let float_only = |kind: &str| -> Res<()> {
        if elem.is_float() {
            Ok(())
        } else {
            Err(cx.err(
                &n.span,
                &sub,
                format!(
                    "{kind} needs a float buffer, this one is {elem}; use int_range for integers"
                ),
            ))
        }
    };
    Ok(match entry.key.as_str() {
        "uniform" => {
            float_only("uniform")?;
            let [lo, hi] = pair(cx, n, &sub, "a pair [lo, hi]")?;
            let (lo, hi) = (lo.as_f64(), hi.as_f64());
            if lo > hi {
                return Err(cx.err(&n.span, &sub, format!("lo ({lo}) > hi ({hi})")));
            }
            Fill::Uniform { lo, hi }
        }
        "normal" => {
            float_only("normal")?;
            let [mean, stddev] = pair(cx, n, &sub, "a pair [mean, stddev]")?;
            let (mean, stddev) = (mean.as_f64(), stddev.as_f64());
            if stddev < 0.0 {
                return Err(cx.err(
                    &n.span,
                    &sub,
                    format!("stddev must be >= 0, found {stddev}"),
                ));
            }
            Fill::Normal { mean, stddev }
        }
        "int_range" => {
            let items = array(cx, n, &sub, "a pair of integers [lo, hi]")?;
            if items.len() != 2 {
                return Err(cx.err(
                    &n.span,
                    &sub,
                    format!(
                        "expected a pair of integers [lo, hi], found {} entries",
                        items.len()
                    ),
                ));
            }
            let lo = integer(cx, &items[0], &format!("{sub}[0]"))?;
            let hi = integer(cx, &items[1], &format!("{sub}[1]"))?;
            if lo > hi {
                return Err(cx.err(&n.span, &sub, format!("lo ({lo}) > hi ({hi})")));
            }
            check_fits(cx, &items[0].span, &format!("{sub}[0]"), lo, elem)?;
            check_fits(cx, &items[1].span, &format!("{sub}[1]"), hi, elem)?;
            Fill::IntRange { lo, hi }
        }
        "iota" | "constant" => {
            let v = number(cx, n, &sub)?;
            if !elem.is_float() {
                match v {
                    Number::Int(i) => check_fits(cx, &n.span, &sub, i, elem)?,
                    Number::Float(f) => {
                        return Err(cx.err(
                            &n.span,
                            &sub,
                            format!("expected an integer for a {elem} buffer, found {f}"),
                        ))
                    }
                }
            }
            if entry.key == "iota" {
                Fill::Iota { start: v }
            } else {
                Fill::Constant(v)
            }
        }
        "file" => read_file_fill(cx, n, &sub, elem)?,
        other => {
            return Err(cx.err(
                &entry.key_span,
                field,
                format!("{expected}, found `{other}`"),
            ))
        }
    })
}

fn read_file_fill(cx: &Cx, node: &Node, field: &str, elem: ElemType) -> Res<Fill> {
    let rel = nonempty_string(cx, node, field)?;
    let path = cx.resolve(&rel);
    let err = |m: String| cx.err(&node.span, field, m);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(err(format!("data file {} does not exist", path.display())))
        }
        Err(e) => {
            return Err(err(format!(
                "cannot read data file {}: {e}",
                path.display()
            )))
        }
    };
    let size = elem.size();
    let is_npy = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("npy"));
    let (data, elems) = if is_npy {
        let h = npy::parse_header(&bytes).map_err(|m| err(format!("{}: {m}", path.display())))?;
        if !npy::descr_matches(&h.descr, elem) {
            return Err(err(format!(
                "{} has dtype '{}', expected '{}' for a {elem} buffer (little-endian)",
                path.display(),
                h.descr,
                elem.npy_descr()
            )));
        }
        let elems = h.elems().ok_or_else(|| {
            err(format!(
                "{}: shape {:?} is too large",
                path.display(),
                h.shape
            ))
        })?;
        if h.fortran_order && h.shape.iter().filter(|&&d| d > 1).count() > 1 {
            return Err(err(format!(
                "{} is in Fortran order; only C order is supported",
                path.display()
            )));
        }
        let payload = &bytes[h.data_offset..];
        if payload.len() as u128 != elems as u128 * size as u128 {
            return Err(err(format!(
                "{} has {} data bytes, shape {:?} of '{}' needs {}",
                path.display(),
                payload.len(),
                h.shape,
                h.descr,
                elems as u128 * size as u128
            )));
        }
        (payload.to_vec(), elems)
    } else {
        if bytes.len() % size != 0 {
            return Err(err(format!(
                "{} has {} bytes, not a whole number of {elem} elements ({size} bytes each)",
                path.display(),
                bytes.len()
            )));
        }
        let elems = bytes.len() / size;
        (bytes, elems)
    };
    Ok(Fill::File {
        path,
        data: Arc::new(data),
        elems,
    })
}

fn read_tests(cx: &Cx, node: &Node) -> Res<(Vec<TestCase>, Vec<TestCase>)> {
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

fn read_acceptance(cx: &Cx, node: &Node) -> Res<Acceptance> {
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
                Value::Float(f) if !f.is_nan() => *f,
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

/// The launch a harness spec carries: one thread, never run.
fn trivial_launch(cx: &Cx, span: &Range<usize>) -> Launch {
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

/// Harness runs default to a minute and a mebibyte of output per stream or file.
const DEFAULT_HARNESS_TIMEOUT_S: f64 = 60.0;
const DEFAULT_HARNESS_OUTPUT_BYTES: i64 = 1 << 20;
const DEFAULT_HARNESS_ROUNDS: i64 = 5;

fn read_harness(cx: &Cx, node: &Node, train: &[TestCase], heldout: &[TestCase]) -> Res<Harness> {
    let t = table(cx, node, "harness", HARNESS_KEYS)?;
    let expected = "an array of strings: the program and its arguments, e.g. [\"./app\", \"--ptx\", \"{ptx}\", \"--out\", \"{out}\"]";
    let c = t.req(cx, "command", expected)?;
    let items = array(cx, c, "harness.command", expected)?;
    if items.is_empty() {
        return Err(cx.err(
            &c.span,
            "harness.command",
            format!("empty; expected {expected}"),
        ));
    }
    let mut command = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let field = format!("harness.command[{i}]");
        let arg = if i == 0 {
            nonempty_string(cx, item, &field)?
        } else {
            string(cx, item, &field)?
        };
        // Every placeholder must have a value in every test.
        for test in train.iter().chain(heldout) {
            substitute(&arg, |name| {
                (HARNESS_PLACEHOLDERS.contains(&name) || test.params.contains_key(name))
                    .then(String::new)
            })
            .map_err(|e| {
                cx.err(
                    &item.span,
                    &field,
                    format!(
                        "{e} in test {}; placeholders are {{ptx}}, {{out}}, {{test}}, {{seed}} and the test's parameters",
                        test.name
                    ),
                )
            })?;
        }
        command.push(arg);
    }
    let workdir = match t.get("workdir") {
        None => cx.resolve("."),
        Some(n) => cx.resolve(&nonempty_string(cx, n, "harness.workdir")?),
    };
    let timeout_s = match t.get("timeout_s") {
        None => DEFAULT_HARNESS_TIMEOUT_S,
        Some(n) => {
            let v = number(cx, n, "harness.timeout_s")?.as_f64();
            if !(v > 0.0 && v <= 86_400.0) {
                return Err(cx.err(
                    &n.span,
                    "harness.timeout_s",
                    format!("expected seconds in (0, 86400], found {}", format_number(v)),
                ));
            }
            v
        }
    };
    let positive = |key: &str, default: i64, max: i64| -> Res<i64> {
        let field = format!("harness.{key}");
        match t.get(key) {
            None => Ok(default),
            Some(n) => {
                let v = integer(cx, n, &field)?;
                if v < 1 || v > max {
                    return Err(cx.err(&n.span, &field, format!("expected 1 to {max}, found {v}")));
                }
                Ok(v)
            }
        }
    };
    let max_output_bytes = positive(
        "max_output_bytes",
        DEFAULT_HARNESS_OUTPUT_BYTES,
        MAX_BUFFER_BYTES as i64,
    )? as u64;
    let rounds = positive("rounds", DEFAULT_HARNESS_ROUNDS, 1000)? as u32;

    let expected =
        "an array of output files, e.g. outputs = [{ file = \"out.f32\", type = \"f32\" }]";
    let o = t.req(cx, "outputs", expected)?;
    let items = array(cx, o, "harness.outputs", expected)?;
    if items.is_empty() {
        return Err(cx.err(
            &o.span,
            "harness.outputs",
            format!("empty; expected {expected}"),
        ));
    }
    let mut outputs: Vec<HarnessOutput> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let field = format!("harness.outputs[{i}]");
        let ot = table(cx, item, &field, HARNESS_OUTPUT_KEYS)?;
        let f = ot.req(cx, "file", "a file name inside {out}")?;
        let file = nonempty_string(cx, f, &ot.path("file"))?;
        if file.contains('/') || file == "." || file == ".." {
            return Err(cx.err(
                &f.span,
                &ot.path("file"),
                format!("\"{file}\" is not a plain file name; outputs are files directly inside {{out}}"),
            ));
        }
        if outputs.iter().any(|o| o.file == file) {
            return Err(cx.err(
                &f.span,
                &ot.path("file"),
                format!("\"{file}\" is listed twice"),
            ));
        }
        let ty = ot.req(cx, "type", &format!("an element type: {TYPE_NAMES}"))?;
        let name = string(cx, ty, &ot.path("type"))?;
        let elem = ElemType::from_name(&name).ok_or_else(|| {
            cx.err(
                &ty.span,
                &ot.path("type"),
                format!("unknown type \"{name}\"; expected one of {TYPE_NAMES}"),
            )
        })?;
        outputs.push(HarnessOutput { file, elem });
    }
    Ok(Harness {
        command,
        workdir,
        timeout: std::time::Duration::from_secs_f64(timeout_s),
        max_output_bytes,
        rounds,
        outputs,
    })
}
