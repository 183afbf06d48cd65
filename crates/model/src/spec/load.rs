//! Reading a spec file: the entry point ([`parse_spec`]), the version check
//! and the top-level table, which hands each sub-table to its own reader
//! (`read` holds the shared context and typed readers of TOML nodes).

mod acceptance;
mod args;
mod fill;
mod harness;
mod launch;
mod pipeline;
mod placeholders;
mod read;
mod test_cases;
mod tune;

use super::error::Locator;
use super::model::{ArgSpec, Spec};
use super::tree::{self, Node, Value};
use crate::access::{AccessError, Reader};
use crate::spec::pipeline::{LaunchArg, LaunchSpec, Step};
use acceptance::read_acceptance;
use args::read_args;
use harness::read_harness;
use launch::{read_launch, resolve_swaps, trivial_launch};
use pipeline::{read_kernel_names, read_pipeline};
use read::{integer, nonempty_string, string, table, Cx, Res, Tab};
use std::ops::Range;
use std::path::{Path, PathBuf};
use test_cases::{all_written, read_tests};

/// The newest spec format version this code reads.
pub const SPEC_VERSION: i64 = 1;

const TOP_KEYS: &[&str] = &[
    "version",
    "ir",
    "kernel",
    "arch",
    "project",
    "launch",
    "launches",
    "args",
    "tests",
    "acceptance",
    "harness",
    "tune",
];
/// The element type names, as listed in messages.
const TYPE_NAMES: &str = "f32, f64, i8, i16, i32, i64, u8, u16, u32, u64";

/// Reads and validates a spec from its text.
pub(crate) fn parse_spec(path: &Path, text: &str, reader: &Reader) -> Res<Spec> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let cx = Cx {
        file: path.to_path_buf(),
        dir,
        locator: Locator::new(path, text),
        reader: reader.clone(),
    };
    let root = tree::parse(text).map_err(|(message, offset)| {
        cx.locator
            .error(offset, "", format!("invalid TOML: {message}"))
    })?;
    placeholders::check(&cx, &root)?;
    let spec = read_root(&cx, &root, text)?;
    // Static checks that need each test's parameter values, for every
    // backend's tests.
    for test in &all_written(&spec.written) {
        spec.plan(test)?;
    }
    Ok(spec)
}

fn read_root(cx: &Cx, root: &Node, text: &str) -> Res<Spec> {
    check_version(cx, root)?;
    let top = table(cx, root, "", TOP_KEYS)?;
    let ir = read_ir_path(cx, &top)?;
    let kernel_node = top.get("kernel");
    let declared = kernel_node.map(|n| read_kernel_names(cx, n)).transpose()?;
    let arch = top.get("arch").map(|n| read_arch(cx, n)).transpose()?;
    let project = top
        .get("project")
        .map(|n| string(cx, n, "project"))
        .transpose()?;

    let harness_node = top.get("harness");
    let launches_node = top.get("launches");
    let (pipeline, args, kernels) = match (harness_node, launches_node) {
        (None, None) => single_kernel_form(cx, &top, declared)?,
        (None, Some(l)) => {
            if let Some(n) = top.get("launch") {
                return Err(cx.err(
                    &n.span,
                    "launch",
                    "a spec has either [launch] (one kernel) or [[launches]] (a pipeline), not both; give grid and block in each launch",
                ));
            }
            let args = read_args(cx, &top)?;
            let (pipeline, kernels) = read_pipeline(cx, l, declared, &args)?;
            (pipeline, args, kernels)
        }
        (Some(h), _) => harness_form(cx, &top, h, declared)?,
    };

    let tests_node = top.req(cx, "tests", "a [tests] table with train and heldout arrays")?;
    let mut written = read_tests(cx, tests_node)?;
    let (ir, tune) = match top.get("tune") {
        None => (ir, None),
        Some(node) => {
            if let Some(h) = harness_node {
                return Err(cx.err(
                    &h.span,
                    "harness",
                    "[tune] needs [launch] or [[launches]]: in harness mode the application launches the kernel with its own constants",
                ));
            }
            let tune = tune::read_tune(cx, node)?;
            tune::add_constants(cx, node, &tune, &mut written)?;
            (tune::chosen_ir(cx, node, &tune, ir)?, Some(tune))
        }
    };

    let acc_node = top.req(
        cx,
        "acceptance",
        "an [acceptance] table with metric (and tolerance)",
    )?;
    let acceptance = read_acceptance(cx, acc_node)?;
    let harness = harness_node
        .map(|n| read_harness(cx, n, &all_written(&written)))
        .transpose()?;

    Ok(Spec {
        path: cx.file.clone(),
        ir,
        kernel: kernels_first(&kernels),
        kernels,
        arch,
        project,
        pipeline,
        args,
        train: written.train.clone(),
        heldout: written.heldout.clone(),
        written,
        acceptance,
        harness,
        tune,
        text: text.to_string(),
    })
}

/// Checks `version` before anything else: a newer file may well have keys
/// we do not know.
fn check_version(cx: &Cx, root: &Node) -> Res<()> {
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
    Ok(())
}

/// Reads `ir` and checks that the reader may open the file it names.
fn read_ir_path(cx: &Cx, top: &Tab) -> Res<PathBuf> {
    let ir_node = top.req(
        cx,
        "ir",
        "the path of the kernel's LLVM IR (.ll or .bc), relative to the spec file",
    )?;
    let ir_rel = nonempty_string(cx, ir_node, "ir")?;
    let ir = cx.resolve(&ir_rel);
    cx.reader.check(&ir).map_err(|e| {
        let message = match e {
            AccessError::NotFound { .. } => format!("IR file {} does not exist", ir.display()),
            other => format!("IR file {other}"),
        };
        cx.err(&ir_node.span, "ir", message)
    })?;
    Ok(ir)
}

/// Reads `arch`, which must name an sm_XX architecture.
fn read_arch(cx: &Cx, n: &Node) -> Res<String> {
    let a = string(cx, n, "arch")?;
    if !valid_arch(&a) {
        return Err(cx.err(
            &n.span,
            "arch",
            format!("expected an sm_XX architecture such as sm_90, found \"{a}\""),
        ));
    }
    Ok(a)
}

/// The kernel names declared by `kernel`, each with its span.
type Declared = Vec<(String, Range<usize>)>;

/// The pipeline's steps, its arguments and its kernels.
type Pipeline = (Vec<Step>, Vec<ArgSpec>, Vec<String>);

/// Reads the single-kernel form: one kernel, `[launch]`, every argument
/// passed in order.
fn single_kernel_form(cx: &Cx, top: &Tab, declared: Option<Declared>) -> Res<Pipeline> {
    let declared = match declared {
        None => return Err(top.missing(cx, "kernel", "the kernel's entry name")),
        Some(d) => d,
    };
    if declared.len() > 1 {
        return Err(cx.err(
            &declared[1].1,
            "kernel[1]",
            "several kernels need a [[launches]] pipeline naming which kernel each launch runs",
        ));
    }
    let launch_node = top.req(
        cx,
        "launch",
        "a [launch] table with grid and block (or [[launches]])",
    )?;
    let (mut launch, raw_swaps) = read_launch(cx, launch_node)?;
    let args = read_args(cx, top)?;
    if let (Some(repeat), Some(raw)) = (launch.repeat.as_mut(), raw_swaps) {
        (repeat.swap, repeat.swap_at) = resolve_swaps(cx, raw, &args)?;
    }
    let step = Step::Launch(LaunchSpec {
        kernel: 0,
        geometry: launch,
        args: (0..args.len()).map(LaunchArg::Named).collect(),
        field: "launch".to_string(),
    });
    let kernels = declared.into_iter().map(|(k, _)| k).collect();
    Ok((vec![step], args, kernels))
}

/// Reads the harness form, where the application launches the kernel: a
/// launch or arguments here would be silently unused, so they are refused.
fn harness_form(cx: &Cx, top: &Tab, h: &Node, declared: Option<Declared>) -> Res<Pipeline> {
    for key in ["launch", "launches", "args"] {
        if let Some(n) = top.get(key) {
            return Err(cx.err(
                &n.span,
                key,
                "not used in harness mode (the [harness] command launches the kernel); remove it",
            ));
        }
    }
    let declared = match declared {
        None => return Err(top.missing(cx, "kernel", "the kernel's entry name")),
        Some(d) => d,
    };
    let step = Step::Launch(LaunchSpec {
        kernel: 0,
        geometry: trivial_launch(cx, &h.span),
        args: Vec::new(),
        field: "launch".to_string(),
    });
    let kernels = declared.into_iter().map(|(k, _)| k).collect();
    Ok((vec![step], Vec::new(), kernels))
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

fn kernels_first(kernels: &[String]) -> String {
    kernels.first().cloned().unwrap_or_default()
}
