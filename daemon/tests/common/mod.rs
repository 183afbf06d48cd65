//! Shared by the integration tests: fixture paths and loading.
#![allow(dead_code)]

pub mod cmake;
pub mod daemon;
pub mod gpu_backend;
pub mod intrinsics;
pub mod search;
pub mod sim;
pub mod slurm;
pub mod workers;

use gevo_ir::{CodegenOptions, KernelIr};
use std::path::{Path, PathBuf};
use std::process::Output;

/// A path as an argument (the tests' paths are UTF-8).
pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A process's output as text, lossily.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The rows of the HTML table `<table id="ID">` in `html` (what lies
/// between its opening tag and `</table>`); panics when there is none.
pub fn html_table<'a>(html: &'a str, id: &str) -> &'a str {
    html.split(&format!("<table id=\"{id}\">"))
        .nth(1)
        .and_then(|t| t.split("</table>").next())
        .unwrap_or_else(|| panic!("no {id} table"))
}

/// `text` without the lines that start with `prefix`.
pub fn without_lines(text: &str, prefix: &str) -> String {
    text.lines()
        .filter(|l| !l.starts_with(prefix))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// The output of `gevod args`, asserted to have exited 0 (its stderr if not).
pub fn succeeded(out: Output, args: &[&str]) -> Output {
    assert!(
        out.status.success(),
        "gevod {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Whether every tool answers `--version`; if not, prints that the test
/// skipped and which tool it lacked.
pub fn have_tools(tools: &[&str]) -> bool {
    let missing = tools.iter().find(|tool| {
        !std::process::Command::new(tool)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    });
    if let Some(tool) = missing {
        println!("skipped: {tool} is not installed (scripts/install-deps.sh installs it)");
    }
    missing.is_none()
}

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The `[tune]` fixture blockscale (spec, source, the IR of every
/// configuration) copied into `to`; its spec's path there.
pub fn copy_blockscale(to: &Path) -> PathBuf {
    let from = repo_root().join("tests/fixtures/tune");
    std::fs::create_dir_all(to.join("blockscale.tune")).unwrap();
    for name in ["blockscale.gevo.toml", "blockscale.ll", "blockscale.cu"] {
        std::fs::copy(from.join(name), to.join(name)).unwrap();
    }
    for entry in std::fs::read_dir(from.join("blockscale.tune")).unwrap() {
        let entry = entry.unwrap();
        let target = to.join("blockscale.tune").join(entry.file_name());
        std::fs::copy(entry.path(), target).unwrap();
    }
    to.join("blockscale.gevo.toml")
}

pub fn kernel_fixture(name: &str) -> PathBuf {
    repo_root()
        .join("tests/fixtures/kernels")
        .join(format!("{name}.ll"))
}

/// A harness spec for the stencil kernel at `ir` whose command is `command`
/// (a TOML array), with one u8 output file `r.bin` compared exactly.
pub fn harness_spec_text(ir: &Path, command: &str) -> String {
    format!(
        r#"version = 1
ir = "{}"
kernel = "stencil5"
[harness]
command = {command}
max_output_bytes = 1000
outputs = [{{ file = "r.bin", type = "u8" }}]
[tests]
train = [{{ seed = 1 }}]
heldout = [{{ seed = 2 }}]
[acceptance]
metric = "exact"
"#,
        ir.display()
    )
}

/// A fixture's kernel spec, `tests/fixtures/kernels/<name>.gevo.toml`.
pub fn spec_fixture(name: &str) -> PathBuf {
    repo_root()
        .join("tests/fixtures/kernels")
        .join(format!("{name}.gevo.toml"))
}

/// A pipeline fixture's spec, `tests/fixtures/pipelines/<name>.gevo.toml`.
pub fn pipeline_fixture(name: &str) -> PathBuf {
    repo_root()
        .join("tests/fixtures/pipelines")
        .join(format!("{name}.gevo.toml"))
}

/// The multi-kernel fixtures (`tests/fixtures/pipelines/`).
pub const PIPELINE_FIXTURES: [&str; 3] = ["wavefront", "lu", "pyramid"];

/// The team's libdevice stand-in (a written `__nv_expf`), for machines
/// without CUDA.
pub fn libdevice_stub() -> PathBuf {
    repo_root().join("tests/fixtures/libdevice-stub.ll")
}

pub const KERNEL_FIXTURES: [&str; 6] = ["vecadd", "reduce", "stencil", "nw", "loops", "expf"];

pub fn load(name: &str) -> KernelIr {
    KernelIr::load(&kernel_fixture(name), None).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Code generation options that link the team's libdevice stand-in, so the
/// expf fixture emits PTX on machines without CUDA.
pub fn codegen_options() -> CodegenOptions {
    CodegenOptions {
        libdevice: Some(libdevice_stub()),
        ..CodegenOptions::default()
    }
}
