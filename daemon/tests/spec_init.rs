//! `gevod spec init` round trip on parameter lists written the way real
//! applications write them (tests/fixtures/spec_init/params.cu, compiled
//! with line tables by scripts/gen-fixtures.sh): the skeleton is valid TOML,
//! names every parameter in order (from the source when its declaration
//! reads cleanly, `arg<i>` otherwise, never shifted), and `gevod run` reads
//! it back as nothing but its placeholders.

use crate::common;

use common::s;
use std::process::Command;

struct Case {
    kernel: &'static str,
    names: &'static [&'static str],
    /// Each parameter's `# parameter <i>: ...` comment, as written.
    comments: &'static [&'static str],
}

const CASES: &[Case] = &[
    // Trailing `//` comments with commas and parentheses (the report).
    Case {
        kernel: "heat_step",
        names: &["temp", "power", "result", "cols", "rows", "cap"],
        comments: &[
            "const float*, readonly in the IR, accessed as float",
            "const float*, readonly in the IR, accessed as float",
            "float*, writeonly in the IR, accessed as float",
            "int",
            "int",
            "float",
        ],
    },
    // Block comments between a type and its name, after a name, between
    // parameters; C++ linkage (mangled name).
    Case {
        kernel: "scaled",
        names: &["src", "dst", "k", "n"],
        comments: &[
            "const float*, readonly in the IR, accessed as float",
            "float*, writeonly in the IR, accessed as float",
            "float",
            "int",
        ],
    },
    // Macros for a type and a qualifier: the spelling is kept, the type is
    // the IR's.
    Case {
        kernel: "macro_types",
        names: &["in", "out", "n"],
        comments: &[
            "const REAL* RESTRICT, readonly in the IR, accessed as float",
            "REAL* RESTRICT, writeonly in the IR, accessed as float",
            "int",
        ],
    },
    // A macro standing for two parameters: the source's list does not
    // match the IR's, so no name is taken from it.
    Case {
        kernel: "macro_list",
        names: &["arg0", "arg1", "arg2", "arg3"],
        comments: &[
            "ptr, readonly in the IR, accessed as float",
            "ptr, writeonly in the IR, accessed as float",
            "i32",
            "i32",
        ],
    },
    // An `#if` inside the list that the build left out: likewise.
    Case {
        kernel: "with_directive",
        names: &["arg0", "arg1", "arg2"],
        comments: &[
            "ptr, readonly in the IR, accessed as float",
            "ptr, writeonly in the IR, accessed as float",
            "i32",
        ],
    },
];

#[test]
fn skeletons_of_awkward_parameter_lists_read_back() {
    let fixtures = common::repo_root().join("tests/fixtures/spec_init");
    let ir = fixtures.join("params.ll");
    let dir = tempfile::tempdir().unwrap();
    for case in CASES {
        let spec = dir.path().join(format!("{}.gevo.toml", case.kernel));
        // From elsewhere: the IR names its source relative to its own
        // directory, where gevod looks for it.
        let args = [
            "spec",
            "init",
            s(&ir),
            "--kernel",
            case.kernel,
            "-o",
            s(&spec),
        ];
        let out = Command::new(env!("CARGO_BIN_EXE_gevod"))
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap();
        let out = common::succeeded(out, &args);
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(
            said.contains(&format!("({} parameters)", case.names.len())),
            "{}: {said}",
            case.kernel
        );
        let text = std::fs::read_to_string(&spec).unwrap();
        let table: toml::Table =
            toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}\n{text}", case.kernel));
        let names: Vec<&str> = table["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, case.names, "{}:\n{text}", case.kernel);
        let comments: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# parameter "))
            .map(|l| l.split_once(": ").unwrap().1)
            .collect();
        assert_eq!(comments, case.comments, "{}:\n{text}", case.kernel);

        // The spec loader reads it as its placeholders and nothing else.
        let run = Command::new(env!("CARGO_BIN_EXE_gevod"))
            .args(["run", s(&spec)])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&run.stderr);
        assert!(!run.status.success(), "{}: {err}", case.kernel);
        assert!(
            err.contains("placeholders to fill in:"),
            "{}: {err}",
            case.kernel
        );
        assert!(!err.contains("invalid TOML"), "{}: {err}", case.kernel);
    }
}

/// The skeleton's placeholders (string values starting with `"TODO`,
/// outside comments) replaced by `values`, in order.
fn filled(skeleton: &str, values: &[&str]) -> String {
    let mut values = values.iter();
    let mut out = String::new();
    for line in skeleton.split_inclusive('\n') {
        match line.find("\"TODO").filter(|_| !line.starts_with('#')) {
            // Placeholders are whole values: the rest of the line is the
            // string and perhaps a comment.
            Some(at) => {
                let value = values.next().expect("a value for every placeholder");
                out += &format!("{}{value}\n", &line[..at]);
            }
            None => out += line,
        }
    }
    assert!(values.next().is_none(), "more values than placeholders");
    out
}

/// `gevod spec init` on IR whose debug info names a source that launches
/// the kernel in a host loop (tests/fixtures/spec_init/stepper.cu): the
/// skeleton is a [[launches]] pipeline with the loop, the swap, the
/// per-step scalar inline and the grid in the spec's terms; with its
/// placeholders filled in, `gevod run` runs it on the simulator.
#[test]
fn a_host_launch_loop_becomes_launches() {
    let ir = common::repo_root().join("tests/fixtures/spec_init/stepper.ll");
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("stepper.gevo.toml");
    let args = ["spec", "init", s(&ir), "-o", s(&spec)];
    let out = Command::new(env!("CARGO_BIN_EXE_gevod"))
        .args(args)
        .current_dir(dir.path())
        .output()
        .unwrap();
    let out = common::succeeded(out, &args);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("(5 parameters); launches read from ") && said.contains("stepper.cu;"),
        "{said}"
    );
    let text = std::fs::read_to_string(&spec).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut at = 0;
    for want in [
        "[[launches]]",
        "for = \"s\"",
        "to = \"steps\"",
        "swap = [[\"in\", \"out\"]]",
        "[[launches.body]]",
        "grid = [\"cdiv(n, 128)\"]",
        "block = [128]",
        "  \"in\",",
        "  \"out\",",
        "  \"n\",",
        "  \"rate\",",
        "  { name = \"step\", type = \"i32\", value = \"s\" },",
        "# The expressions above use n, rate, steps: every test gives each a value.",
    ] {
        match lines[at..].iter().position(|l| *l == want) {
            Some(i) => at += i + 1,
            None => panic!("no line {want} in order in:\n{text}"),
        }
    }
    let table: toml::Table = toml::from_str(&text).unwrap();
    let names: Vec<&str> = table["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["in", "out", "n", "rate"], "{text}");

    let full = filled(
        &text,
        &[
            "\"n\"",
            "{ uniform = [0.0, 1.0] }",
            "\"n\"",
            "[{ n = 300, rate = 0.25, steps = 3, seed = 1 }]",
            "[{ n = 7, rate = 0.5, steps = 2, seed = 2 }]",
            "\"max_abs\"",
            "1e-5",
        ],
    );
    std::fs::write(&spec, &full).unwrap();
    let run = Command::new(env!("CARGO_BIN_EXE_gevod"))
        .args(["run", s(&spec), "--backend", "sim", "--json"])
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}\n{full}",
        String::from_utf8_lossy(&run.stderr)
    );
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&run.stdout).unwrap();
    assert!(rows.len() >= 2, "{rows:?}");
    assert!(rows.iter().all(|r| r["passed"] == true), "{rows:?}");
}
