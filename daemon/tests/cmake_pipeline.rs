//! gevo_optimize() with several KERNEL names: a pipeline of one source's
//! kernels, one PTX module, the spec's `kernel = [...]` checked against them.

use crate::common;

use common::cmake::{edit, example_copy};
use common::have_tools;

#[test]
fn several_kernel_names_build_one_module_and_must_match_the_spec() {
    if !have_tools(&["cmake", "clang-19"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let p = example_copy(dir.path(), "stencil-app", "app");
    let pipelines = common::repo_root().join("tests/fixtures/pipelines");
    std::fs::copy(
        pipelines.join("pyramid.cu"),
        p.source.join("kernels/pyramid.cu"),
    )
    .unwrap();
    std::fs::copy(
        pipelines.join("pyramid.gevo.toml"),
        p.source.join("kernels/pyramid.gevo.toml"),
    )
    .unwrap();
    let lists = p.source.join("CMakeLists.txt");
    edit(
        &lists,
        "# With the CUDA toolkit",
        "gevo_optimize(stencil-app\n  KERNEL pyr_step pyr_partial pyr_final\n  \
         SOURCE kernels/pyramid.cu\n  SPEC kernels/pyramid.gevo.toml\n  MODE EMBED)\n\n\
         # With the CUDA toolkit",
    );
    p.configure();
    p.build();
    // One module holding the three kernels, named after the first.
    let ptx = std::fs::read_to_string(p.gevo_file("pyr_step.original.ptx")).unwrap();
    for k in ["pyr_step", "pyr_partial", "pyr_final"] {
        assert!(ptx.contains(&format!(".entry {k}(")), "{k} missing:\n{ptx}");
    }
    // The spec gevod watches is the pipeline with the build's IR, and runs.
    let spec = p.gevo_file("pyr_step.gevo.toml");
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_gevod"))
        .arg("run")
        .arg(&spec)
        .args(["--backend", "sim", "--tests", "train"])
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let header = std::fs::read_to_string(p.gevo_file("gevo_pyr_step.h")).unwrap();
    assert!(header.contains("gevo_ptx_pyr_step_entry"), "{header}");

    // KERNEL names other than the spec's kernels: configure says so.
    edit(
        &lists,
        "KERNEL pyr_step pyr_partial pyr_final",
        "KERNEL pyr_step pyr_final",
    );
    let said = p.configure_fails(&[]);
    // CMake wraps its messages.
    let said = said.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        said.contains("KERNEL names pyr_step, pyr_final, but")
            && said.contains("has kernel = [pyr_step, pyr_partial, pyr_final]"),
        "{said}"
    );
}
