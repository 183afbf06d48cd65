//! Skeletons with launches read from host source, one case per pair of
//! files in tests/fixtures/spec_init/launches/: `<case>.cu` (a kernel and
//! the host code launching it) and `<case>.expect`:
//!
//! - `kernel <name>` and one `param <name> buffer <type|?> <role>` or
//!   `param <name> scalar <type|?>` line per kernel parameter (what the IR
//!   would say);
//! - `--- contains`: lines the skeleton holds, in this order (others may
//!   come between);
//! - `--- lacks`: lines it must not hold;
//! - `--- fill`: `<field> = <TOML value>` for each placeholder left, in the
//!   order the loader lists them (the list must match exactly);
//! - `--- check`: what the filled spec's tests expand to: `count <test>
//!   <launches>`, `grid|block <test> <launch> x y z`, `scalar <test>
//!   <launch> <param> <value>`, `buffer <test> <launch> <param> <slot>` (the
//!   `[[args]]` entry whose initial buffer the parameter gets).
//!
//! `# ` lines are comments outside `--- contains` and `--- lacks`.

use super::super::pipeline::LaunchParam;
use super::*;
use crate::spec::skeleton::{
    find_launches, render_checked, LaunchSource, ParamSketch, Sketch, SketchKind,
};
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/spec_init/launches")
}

#[derive(Default)]
struct Case {
    kernel: String,
    params: Vec<ParamSketch>,
    contains: Vec<String>,
    lacks: Vec<String>,
    fill: Vec<(String, String)>,
    check: Vec<String>,
}

fn read_case(text: &str) -> Case {
    let mut case = Case::default();
    let mut section = "";
    for line in text.lines() {
        if let Some(s) = line.strip_prefix("--- ") {
            section = match s {
                "contains" | "lacks" | "fill" | "check" => s,
                other => panic!("unknown section {other}"),
            };
            continue;
        }
        let keep_comments = matches!(section, "contains" | "lacks");
        if line.trim().is_empty() || (!keep_comments && line.starts_with('#')) {
            continue;
        }
        match section {
            "contains" => case.contains.push(line.to_string()),
            "lacks" => case.lacks.push(line.to_string()),
            "fill" => {
                let (field, value) = line.split_once(" = ").expect("field = value");
                case.fill.push((field.to_string(), value.to_string()));
            }
            "check" => case.check.push(line.to_string()),
            _ => {
                let words: Vec<&str> = line.split_whitespace().collect();
                match words[..] {
                    ["kernel", name] => case.kernel = name.to_string(),
                    ["param", name, kind, ty, ref rest @ ..] => {
                        case.params.push(param(name, kind, ty, rest))
                    }
                    _ => panic!("unreadable line: {line}"),
                }
            }
        }
    }
    case
}

fn param(name: &str, kind: &str, ty: &str, rest: &[&str]) -> ParamSketch {
    let elem = ElemType::from_name(ty);
    let kind = match (kind, rest) {
        ("scalar", []) => SketchKind::Scalar { ty: elem },
        ("buffer", [role]) => SketchKind::Buffer {
            elem,
            role: match *role {
                "in" => Role::In,
                "out" => Role::Out,
                "inout" => Role::Inout,
                other => panic!("role {other}"),
            },
        },
        _ => panic!("param {name}: {kind} {rest:?}"),
    };
    ParamSketch {
        name: name.to_string(),
        kind,
        described: ty.to_string(),
    }
}

/// The skeleton with its placeholders replaced, in order, by `values`.
fn filled(skeleton: &str, values: &[&str]) -> String {
    let mut out = String::new();
    let mut values = values.iter();
    for line in skeleton.split_inclusive('\n') {
        if line.trim_start().starts_with('#') {
            out += line;
            continue;
        }
        let mut rest = line;
        while let Some(at) = rest.find("\"TODO") {
            out += &rest[..at];
            let body = &rest[at + 1..];
            let mut end = 0;
            let mut chars = body.char_indices();
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => {
                        chars.next();
                    }
                    '"' => {
                        end = i;
                        break;
                    }
                    _ => {}
                }
            }
            out += values.next().expect("a value for every placeholder");
            rest = &body[end + 1..];
        }
        out += rest;
    }
    assert!(values.next().is_none(), "more values than placeholders");
    out
}

fn scalar_text(s: Scalar) -> String {
    match s {
        Scalar::I8(v) => v.to_string(),
        Scalar::I16(v) => v.to_string(),
        Scalar::I32(v) => v.to_string(),
        Scalar::I64(v) => v.to_string(),
        Scalar::U8(v) => v.to_string(),
        Scalar::U16(v) => v.to_string(),
        Scalar::U32(v) => v.to_string(),
        Scalar::U64(v) => v.to_string(),
        Scalar::F32(v) => v.to_string(),
        Scalar::F64(v) => v.to_string(),
    }
}

fn check(name: &str, spec: &Spec, line: &str) {
    let words: Vec<&str> = line.split_whitespace().collect();
    let test = |w: &str| {
        let (set, i) = w.trim_end_matches(']').split_once('[').expect("train[i]");
        let list = if set == "train" {
            &spec.train
        } else {
            &spec.heldout
        };
        let case = &list[i.parse::<usize>().unwrap()];
        spec.instantiate(case)
            .unwrap_or_else(|e| panic!("{name}: {w}: {e}"))
    };
    let n = |w: &str| w.parse::<usize>().unwrap();
    match words[..] {
        ["count", t, count] => assert_eq!(test(t).launches.len(), n(count), "{name}: {line}"),
        [dims @ ("grid" | "block"), t, l, x, y, z] => {
            let launch = &test(t).launches[n(l)];
            let got = if dims == "grid" {
                launch.grid
            } else {
                launch.block
            };
            assert_eq!(
                got,
                [x, y, z].map(|v| v.parse::<u32>().unwrap()),
                "{name}: {line}"
            );
        }
        ["scalar", t, l, p, value] => match test(t).launches[n(l)].params[n(p)] {
            LaunchParam::Scalar(s) => assert_eq!(scalar_text(s), value, "{name}: {line}"),
            other => panic!("{name}: {line}: {other:?}"),
        },
        ["buffer", t, l, p, slot] => match test(t).launches[n(l)].params[n(p)] {
            LaunchParam::Buffer { slot: s, .. } => assert_eq!(s, n(slot), "{name}: {line}"),
            other => panic!("{name}: {line}: {other:?}"),
        },
        _ => panic!("{name}: unknown check {line}"),
    }
}

#[test]
fn skeletons_take_their_launches_from_the_host_source() {
    let mut cases: Vec<PathBuf> = std::fs::read_dir(fixtures())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "expect"))
        .collect();
    cases.sort();
    assert!(cases.len() >= 6, "{cases:?}");
    let dir = ir_dir();
    for expect in cases {
        let name = expect.file_stem().unwrap().to_string_lossy().to_string();
        let case = read_case(&std::fs::read_to_string(&expect).unwrap());
        let file = format!("{name}.cu");
        let source = std::fs::read_to_string(fixtures().join(&file)).unwrap();
        let launches = match find_launches(&case.kernel, &[(file.clone(), source)]) {
            Some(found) => LaunchSource::Found(found),
            None => LaunchSource::NotFound {
                searched: vec![file],
            },
        };
        let sketch = Sketch {
            ir: "k.ll".into(),
            kernel: case.kernel.clone(),
            arch: None,
            params: case.params.clone(),
            launches,
        };
        let text = render_checked(&sketch).unwrap_or_else(|e| panic!("{name}: {e}"));
        let lines: Vec<&str> = text.lines().collect();
        let mut at = 0;
        for want in &case.contains {
            match lines[at..].iter().position(|l| l == want) {
                Some(i) => at += i + 1,
                None => panic!("{name}: no line\n{want}\nin order in:\n{text}"),
            }
        }
        for unwanted in &case.lacks {
            assert!(
                !lines.contains(&unwanted.as_str()),
                "{name}: has {unwanted}:\n{text}"
            );
        }

        // What is left is exactly the placeholders the fixture fills.
        let path = dir.path().join(format!("{name}.gevo.toml"));
        let err = parse(&path, &text)
            .expect_err("placeholders left")
            .to_string();
        let listed = err
            .split("to fill in: ")
            .nth(1)
            .and_then(|l| l.split(" (values").next())
            .unwrap_or_else(|| panic!("{name}: {err}"));
        let fields: Vec<&str> = case.fill.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(
            listed.split(", ").collect::<Vec<_>>(),
            fields,
            "{name}:\n{text}"
        );
        let values: Vec<&str> = case.fill.iter().map(|(_, v)| v.as_str()).collect();
        let full = filled(&text, &values);
        let spec = parse(&path, &full).unwrap_or_else(|e| panic!("{name}: {e}\n{full}"));
        for line in &case.check {
            check(&name, &spec, line);
        }
    }
}

/// Host code cut anywhere (an unfinished edit, a truncated file) and
/// definitions that chain or refer to themselves read without a panic or
/// a hang: every prefix of every fixture, cut every few characters.
#[test]
fn any_cut_of_a_source_reads() {
    let mut sources: Vec<String> = std::fs::read_dir(fixtures())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "cu"))
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    // 20 locals, each twice the one before, and one defined by itself.
    let mut chain = String::from("void f(int n) {\n int a0 = n;\n");
    for i in 1..20 {
        chain += &format!(" int a{i} = a{} + a{};\n", i - 1, i - 1);
    }
    chain += " int self_ = self_ + 1;\n k<<<a19, self_>>>(a19);\n}\n";
    sources.push(chain.clone());
    for source in &sources {
        let cuts = source.char_indices().map(|(i, _)| i).step_by(7);
        for cut in cuts.chain([source.len()]) {
            for name in ["k", "pyramid_step", "jacobi", "relax", "transpose"] {
                find_launches(name, &[("x.cu".into(), source[..cut].to_string())]);
            }
        }
    }
    let found = find_launches("k", &[("x.cu".into(), chain)]).expect("the launch");
    let crate::spec::skeleton::HostStep::Launch(l) = &found.steps[0] else {
        panic!("{found:?}")
    };
    // a19 written out would be n added 2^19 times: a name stays instead,
    // and the expression stays short; self_ is set from itself, so it is a
    // name of its own.
    let grid = l.grid[0].as_ref().expect("an expression");
    assert!(grid.len() <= 200 && grid.contains('a'), "{grid}");
    assert_eq!(l.block[0], Ok("self_".to_string()));
}
