//! What gevo_optimize() chooses where the call leaves it open, each said at
//! configure time (docs/cmake.md): the architecture (the project's choice,
//! else the local GPU's through a stand-in nvidia-smi, else sm_90), MODE
//! AUTO (REPLACE where its needs are met, EMBED otherwise, and a configure
//! error where neither REPLACE nor the project could compile the source),
//! and the spec skeleton written where SPEC does not exist yet. No GPU
//! needed.

use crate::common;

use common::cmake::{edit, example_copy, run, text, Project};
use common::daemon::s;
use common::have_tools;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// cmake's output without its line breaks and indentation (it wraps and
/// indents warnings).
fn flat(log: &str) -> String {
    log.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn assert_said(log: &str, wanted: &str) {
    assert!(flat(log).contains(wanted), "wanted: {wanted}\nin:\n{log}");
}

/// An executable shell script at dir/name.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// A stand-in nvidia-smi that answers the compute capability query with
/// `lines` (or fails with them when `exit` is not 0).
fn nvidia_smi(dir: &Path, lines: &str, exit: i32) -> String {
    let body = format!(
        "case \"$*\" in *--query-gpu=compute_cap,name*) ;; *) echo \"unexpected: $*\" >&2; exit 99;; esac\n\
         printf '%s' '{lines}'\nexit {exit}\n"
    );
    let path = script(dir, &format!("nvidia-smi-{exit}-{}", lines.len()), &body);
    format!("-DGEVO_NVIDIA_SMI={}", s(&path))
}

#[test]
fn the_arch_is_the_projects_choice_else_the_local_gpus_else_sm_90() {
    if !have_tools(&["cmake", "clang-19"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let rtx = nvidia_smi(
        d,
        "8.6, NVIDIA GeForce RTX 3090\n8.6, NVIDIA GeForce RTX 3090\n",
        0,
    );

    // Nothing chosen: the local GPU's, and the IR and PTX are built for it.
    let p = Project::new(d, "stencil-app", "gpu");
    let log = p.configure_with(std::slice::from_ref(&rtx));
    assert_said(
        &log,
        "gevo: stencil: arch sm_86: the local GPU's (NVIDIA GeForce RTX 3090, compute capability \
         8.6, from nvidia-smi), as CMAKE_CUDA_ARCHITECTURES is not set",
    );
    p.build();
    assert!(p.original().contains(".target sm_86"), "{}", p.original());
    let spec = std::fs::read_to_string(p.gevo_file("stencil.gevo.toml")).unwrap();
    assert!(spec.contains("arch = \"sm_86\""), "{spec}");

    // GPUs of several kinds: the first, and the others are named.
    let mixed = nvidia_smi(d, "9.0, NVIDIA H100\n8.0, NVIDIA A100-SXM4-40GB\n", 0);
    let p = Project::new(d, "stencil-app", "mixed");
    let log = p.configure_with(&[mixed]);
    assert_said(
        &log,
        "arch sm_90: the local GPU's (NVIDIA H100, compute capability 9.0; GPU 0 of GPUs of \
         compute capabilities 9.0, 8.0, from nvidia-smi)",
    );

    // No GPU: sm_90, and why.
    let broken = nvidia_smi(
        d,
        "NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver.\n",
        9,
    );
    let p = Project::new(d, "stencil-app", "no-gpu");
    let log = p.configure_with(&[broken]);
    assert_said(
        &log,
        "arch sm_90: gevo's default, as CMAKE_CUDA_ARCHITECTURES is not set and ",
    );
    assert_said(
        &log,
        "found no GPU (NVIDIA-SMI has failed because it could not communicate with the NVIDIA \
         driver.); set ARCH or CMAKE_CUDA_ARCHITECTURES for the GPU the kernel runs on",
    );

    // The project's (here the command line's) list: its first real entry,
    // whatever the GPU, and why only one.
    let p = Project::new(d, "stencil-app", "list");
    let log = p.configure_with(&[
        rtx.clone(),
        "-DCMAKE_CUDA_ARCHITECTURES=80-virtual;75;90".into(),
    ]);
    assert_said(
        &log,
        "gevo: stencil: arch sm_75: the first real architecture of CMAKE_CUDA_ARCHITECTURES \
         (80-virtual;75;90): gevo evolves a kernel for one architecture (variants are timed on \
         one GPU, their PTX is built for it, and newer GPUs JIT-compile that PTX); set ARCH for \
         another",
    );
    let log = p.configure_with(&[rtx, "-DCMAKE_CUDA_ARCHITECTURES=native".into()]);
    assert_said(
        &log,
        "arch sm_86: the local GPU's (NVIDIA GeForce RTX 3090, compute capability 8.6, from \
         nvidia-smi), as CMAKE_CUDA_ARCHITECTURES is native",
    );
}

#[test]
fn the_cuda_compilers_default_architecture_is_not_the_projects_choice() {
    if !have_tools(&["cmake", "clang-19"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let rtx = nvidia_smi(d, "8.6, NVIDIA GeForce RTX 3090\n", 0);
    // What enable_language(CUDA) does when neither the project, -D nor
    // CUDAARCHS set the architectures: the compiler's default goes into the
    // cache with this help string (CMakeDetermineCUDACompiler.cmake).
    let p = example_copy(d, "stencil-app", "defaulted");
    edit(
        &p.source.join("CMakeLists.txt"),
        "add_executable(stencil-app",
        "if(\"${CMAKE_CUDA_ARCHITECTURES}\" STREQUAL \"\")\n\
         \x20 set(CMAKE_CUDA_ARCHITECTURES 52 CACHE STRING \"CUDA architectures\")\n\
         endif()\n\
         add_executable(stencil-app",
    );
    let log = p.configure_with(std::slice::from_ref(&rtx));
    assert_said(
        &log,
        "gevo: stencil: arch sm_86: the local GPU's (NVIDIA GeForce RTX 3090, compute capability \
         8.6, from nvidia-smi), as CMAKE_CUDA_ARCHITECTURES (52) is the CUDA compiler's default, \
         not the project's choice",
    );
    // Changed later on the command line, it is a choice.
    let log = p.configure_with(&["-DCMAKE_CUDA_ARCHITECTURES=75".into()]);
    assert_said(
        &log,
        "gevo: stencil: arch sm_75: CMAKE_CUDA_ARCHITECTURES (75)",
    );

    // The same value given on the first command line is a choice too.
    let mut chosen = Project::new(d, "stencil-app", "chosen");
    chosen.source = p.source.clone();
    let log = chosen.configure_with(&[rtx, "-DCMAKE_CUDA_ARCHITECTURES=52".into()]);
    assert_said(
        &log,
        "gevo: stencil: arch sm_52: CMAKE_CUDA_ARCHITECTURES (52)",
    );

    // ARCH wins over everything.
    edit(
        &p.source.join("CMakeLists.txt"),
        "SPEC kernels/stencil.gevo.toml)",
        "SPEC kernels/stencil.gevo.toml ARCH sm_80)",
    );
    let log = p.configure();
    assert_said(&log, "gevo: stencil: arch sm_80: ARCH");
}

/// With nvcc, the real thing: a CUDA project that sets no architectures.
#[test]
fn with_nvcc_an_unset_cuda_architectures_is_the_compilers_default() {
    if !have_tools(&["cmake", "clang-19", "nvcc"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let p = example_copy(d, "stencil-app", "cuda");
    edit(
        &p.source.join("CMakeLists.txt"),
        "project(stencil-app LANGUAGES CXX)",
        "project(stencil-app LANGUAGES CXX CUDA)",
    );
    let log = p.configure_with(&[nvidia_smi(d, "8.6, NVIDIA GeForce RTX 3090\n", 0)]);
    assert_said(
        &log,
        "is the CUDA compiler's default, not the project's choice",
    );
    assert_said(&log, "gevo: stencil: arch sm_86: the local GPU's");
}

#[test]
fn mode_auto_replaces_where_it_can_and_embeds_otherwise() {
    if !have_tools(&["cmake", "clang-19"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();

    // A program that loads the PTX itself does not compile the kernel's
    // source: nothing to replace.
    let app = Project::new(d, "stencil-app", "app");
    let log = app.configure();
    assert_said(
        &log,
        "gevo: stencil: MODE AUTO is EMBED: stencil-app does not compile kernels/stencil.cu, so \
         no launch of it could run the chosen PTX: the program loads the embedded PTX itself \
         (gevo_stencil.h)",
    );
    let header = std::fs::read_to_string(app.gevo_file("gevo_stencil.h")).unwrap();
    assert!(
        header.contains("#define GEVO_stencil_REPLACED 0"),
        "{header}"
    );

    // A program that launches it, as stencil-replace without its MODE,
    // where REPLACE's needs are unmet (a toolkit root with nothing in it).
    let p = example_copy(d, "stencil-replace", "auto");
    edit(&p.source.join("CMakeLists.txt"), "  MODE REPLACE)", ")");
    let empty = d.join("no-cuda");
    std::fs::create_dir_all(&empty).unwrap();
    let no_toolkit = format!("-DGEVO_CUDA_PATH={}", s(&empty));
    let reason = format!(
        "GEVO_CUDA_PATH {} is not a CUDA installation clang can use: it lacks include/, bin/, \
         nvvm/libdevice/libdevice.10.bc (NVIDIA's toolkit is at /usr/local/cuda, Debian's and \
         Ubuntu's at /usr/lib/cuda)",
        s(&empty)
    );
    // Without a CUDA compiler nothing would compile the file the target
    // lists: configure stops, as with MODE REPLACE (cmake_example.rs).
    let mut bare = Project::new(d, "stencil-replace", "auto-no-cuda");
    bare.source = p.source.clone();
    let log = bare.configure_fails(&[no_toolkit.clone(), "-DCMAKE_CUDA_COMPILER=NOTFOUND".into()]);
    assert_said(
        &log,
        &format!(
            "gevo_optimize(stencil-replace): MODE AUTO cannot use REPLACE ({reason}), and nothing \
             else would compile kernels/stencil.cu: stencil-replace lists it, but the project \
             enables no language that compiles .cu files (CUDA)"
        ),
    );
    // With one (nvcc), EMBED, and the file builds the ordinary way (built
    // in cmake_example.rs).
    if have_tools(&["nvcc"]) {
        let log = p.configure_with(std::slice::from_ref(&no_toolkit));
        assert_said(
            &log,
            &format!(
                "gevo: stencil: MODE AUTO is EMBED: REPLACE cannot work here: {reason}; \
                 stencil-replace builds kernels/stencil.cu the ordinary way"
            ),
        );
        let header = std::fs::read_to_string(p.gevo_file("gevo_stencil.h")).unwrap();
        assert!(
            header.contains("#define GEVO_stencil_REPLACED 0"),
            "{header}"
        );
    }

    // Explicit modes stay as they were: EMBED says nothing of REPLACE.
    let explicit = example_copy(d, "stencil-replace", "embed");
    edit(
        &explicit.source.join("CMakeLists.txt"),
        "  MODE REPLACE)",
        "  MODE EMBED)",
    );
    let log = explicit.configure();
    assert!(!log.contains("MODE AUTO"), "{log}");
    assert!(!log.contains("REPLACE"), "{log}");

    // Where the toolkit is there, AUTO is REPLACE, whether the project has
    // a CUDA compiler or not.
    let toolkit = match common::cmake::cuda_toolkit() {
        Ok(toolkit) => toolkit,
        Err(why) => {
            println!("MODE AUTO's REPLACE half skipped: {why}");
            return;
        }
    };
    let mut found = toolkit.settings.clone();
    if found.is_empty() {
        found.push("-DGEVO_CUDA_PATH=".into());
    }
    let log = bare.configure_with(&found);
    assert_said(
        &log,
        &format!(
            "gevo: stencil: MODE AUTO is REPLACE: stencil-replace runs the chosen PTX for the \
             kernels of kernels/stencil.cu (CUDA at {})",
            s(&toolkit.root)
        ),
    );
    bare.build();
    assert_eq!(bare.app("--replaced"), "yes\n");
}

#[test]
fn a_missing_spec_gets_a_skeleton_and_the_build_uses_the_original_until_it_is_filled() {
    if !have_tools(&["cmake", "clang-19"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let p = example_copy(d, "stencil-app", "fresh");
    let spec = p.source.join("kernels/stencil.gevo.toml");
    let filled = std::fs::read_to_string(&spec).unwrap();
    std::fs::remove_file(&spec).unwrap();

    // Without gevod there is nothing to write it with: configure says so.
    let log = {
        let mut no_gevod = Project::new(d, "stencil-app", "no-gevod");
        no_gevod.source = p.source.clone();
        let out = no_gevod
            .configure_command(&[format!("-DGEVOD={}", s(&d.join("no-such-gevod")))])
            .output()
            .unwrap();
        assert!(!out.status.success());
        text(&out.stdout) + &text(&out.stderr)
    };
    assert_said(
        &log,
        &format!(
            "SPEC {} does not exist, and gevo cannot write a skeleton of it: no gevod (set GEVOD)",
            s(&spec)
        ),
    );
    assert!(!spec.exists());

    let log = p.configure();
    assert_said(
        &log,
        "gevo: stencil: kernels/stencil.gevo.toml did not exist: gevo wrote a skeleton there with \
         `gevod spec init` from the kernel's IR. Fill in its TODO values (docs/spec.md); until \
         then builds use the original kernel.",
    );
    let skeleton = std::fs::read_to_string(&spec).unwrap();
    assert!(skeleton.contains("kernel = \"stencil5\""), "{skeleton}");
    assert!(skeleton.contains("len = \"TODO"), "{skeleton}");
    assert_eq!(skeleton.matches("\n[[args]]\n").count(), 4, "{skeleton}");
    // The parameters by their names in stencil.cu (the IR was emitted with
    // line tables), not arg0 .. arg3.
    for name in ["in", "out", "nx", "ny"] {
        assert!(
            skeleton.contains(&format!("name = \"{name}\"")),
            "{name}: {skeleton}"
        );
    }
    assert!(!skeleton.contains("arg0"), "{skeleton}");
    // Configure gave spec init SOURCE and the target's sources to read
    // launches from; this program launches through the driver API, so the
    // skeleton says where it looked and points at [[launches]].
    let looked = skeleton
        .lines()
        .find(|l| l.starts_with("# No <<<...>>> launch of stencil5 in "))
        .unwrap_or_else(|| panic!("{skeleton}"));
    assert!(
        looked.contains("kernels/stencil.cu") && looked.contains("src/main.cpp"),
        "{looked}"
    );
    assert!(
        skeleton.contains("docs/spec.md#pipelines-launches"),
        "{skeleton}"
    );
    // It is the user's file now: the next configure keeps it and says what
    // is left.
    let log = p.configure();
    assert!(!log.contains("wrote a skeleton"), "{log}");
    assert_said(
        &log,
        "gevo: stencil: kernels/stencil.gevo.toml still has TODO placeholders (on 11 lines): \
         builds use the original kernel until they are filled in",
    );
    let log = p.build();
    assert_said(
        &log,
        &format!(
            "using the original PTX: {} still has TODO placeholders: fill them in (docs/spec.md)",
            s(&spec)
        ),
    );
    assert_eq!(p.app("--origin"), "original\n");
    assert_eq!(p.app("--print-ptx"), p.original());

    // Filled in: the build reconfigures by itself and asks the daemon.
    std::fs::write(&spec, filled).unwrap();
    let log = p.build();
    assert!(!log.contains("TODO"), "{log}");
    assert_said(
        &log,
        "using the original PTX: gevod unreachable and no export",
    );
}

/// The skeleton's IR comes from GEVO_IR_DIR on a machine without clang.
#[test]
fn a_skeleton_from_prebuilt_ir() {
    if !have_tools(&["cmake", "clang-19"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ir_dir = d.join("ir");
    std::fs::create_dir_all(&ir_dir).unwrap();
    let ir = run(Command::new("clang-19")
        .args([
            "-x",
            "cuda",
            "--cuda-device-only",
            "-emit-llvm",
            "-O3",
            "-S",
        ])
        .args([
            "--cuda-gpu-arch=sm_90",
            "-nocudainc",
            "-nocudalib",
            "-include",
        ])
        .arg(common::repo_root().join("cmake/gevo_cuda_shim.h"))
        .arg(common::repo_root().join("examples/stencil-app/kernels/stencil.cu"))
        .arg("-o")
        .arg(ir_dir.join("stencil.ll")));
    assert!(ir.is_empty(), "{ir}");
    let p = example_copy(d, "stencil-app", "prebuilt");
    let spec = p.source.join("kernels/stencil.gevo.toml");
    std::fs::remove_file(&spec).unwrap();
    let log = p.configure_with(&[
        format!("-DGEVO_IR_DIR={}", s(&ir_dir)),
        format!("-DGEVO_CLANG={}", s(&d.join("no-such-clang"))),
    ]);
    assert_said(
        &log,
        "kernels/stencil.gevo.toml did not exist: gevo wrote a skeleton",
    );
    let skeleton = std::fs::read_to_string(&spec).unwrap();
    assert!(skeleton.contains("kernel = \"stencil5\""), "{skeleton}");
}
