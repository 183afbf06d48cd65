//! `[harness]`: the command that runs the kernel's application, its
//! placeholders (checked against every test), limits and output files.

use super::read::{array, integer, nonempty_string, number, string, table, Cx, Res, Tab};
use super::TYPE_NAMES;
use crate::access::Reader;
use crate::spec::expr::format_number;
use crate::spec::inputs::MAX_BUFFER_BYTES;
use crate::spec::model::{
    substitute, ElemType, Harness, HarnessOutput, TestCase, HARNESS_PLACEHOLDERS,
};
use crate::spec::tree::Node;
use std::path::{Path, PathBuf};

const HARNESS_KEYS: &[&str] = &[
    "command",
    "workdir",
    "timeout_s",
    "max_output_bytes",
    "rounds",
    "outputs",
];
const HARNESS_OUTPUT_KEYS: &[&str] = &["file", "type"];
/// Harness runs default to a minute and a mebibyte of output per stream or file.
const DEFAULT_HARNESS_TIMEOUT_S: f64 = 60.0;
const DEFAULT_HARNESS_OUTPUT_BYTES: i64 = 1 << 20;
const DEFAULT_HARNESS_ROUNDS: i64 = 5;

pub(super) fn read_harness(cx: &Cx, node: &Node, tests: &[TestCase]) -> Res<Harness> {
    let t = table(cx, node, "harness", HARNESS_KEYS)?;
    let (command, command_items) = read_command(cx, &t, tests)?;
    let workdir = match t.get("workdir") {
        None => cx.resolve("."),
        Some(n) => cx.resolve(&nonempty_string(cx, n, "harness.workdir")?),
    };
    let programs = command_programs(cx, &command, command_items, &workdir)?;
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
    let outputs = read_outputs(cx, &t)?;
    Ok(Harness {
        command,
        programs,
        workdir,
        timeout: std::time::Duration::from_secs_f64(timeout_s),
        max_output_bytes,
        rounds,
        outputs,
    })
}

/// Reads `command`, checking that every placeholder has a value in every
/// test, of every backend; returns the arguments and their nodes.
fn read_command<'n>(cx: &Cx, t: &Tab<'n>, tests: &[TestCase]) -> Res<(Vec<String>, &'n [Node])> {
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
        for test in tests {
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
    Ok((command, items))
}

/// Lists the files the command runs: the program given as a path (a bare
/// name is looked up on the run's root-owned PATH), and every argument
/// naming a file in the workdir (an interpreter's script). For a spec's
/// owner (the daemon), each must be a file only they and root can change;
/// its identity is part of the job's fingerprint.
fn command_programs(
    cx: &Cx,
    command: &[String],
    items: &[Node],
    workdir: &Path,
) -> Res<Vec<PathBuf>> {
    let mut programs = Vec::new();
    for (i, arg) in command.iter().enumerate() {
        let path = workdir.join(arg);
        let names_file = if i == 0 {
            arg.contains('/')
        } else {
            !arg.contains('{') && !arg.starts_with('-') && path.is_file()
        };
        if !names_file {
            continue;
        }
        if matches!(cx.reader, Reader::OnBehalf { .. }) {
            let what = if i == 0 { "program" } else { "file" };
            let field = format!("harness.command[{i}]");
            cx.reader
                .check(&path)
                .map_err(|e| cx.err(&items[i].span, &field, format!("{what} {e}")))?;
        }
        programs.push(path);
    }
    Ok(programs)
}

/// Reads `outputs`: plain, distinct file names inside `{out}`, each with
/// its element type.
fn read_outputs(cx: &Cx, t: &Tab) -> Res<Vec<HarnessOutput>> {
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
    Ok(outputs)
}
