//! The CMake integration (gevo_optimize) end to end, as CI runs it: no GPU,
//! cmake, clang-19, a C++ compiler and the distribution's CUDA toolkit.
//!
//! - EMBED: examples/stencil-app is built against a real `gevod serve` on a
//!   temporary socket and state directory (the simulator backend), and the
//!   program's embedded PTX is checked at each step: the original without a
//!   daemon, the evolved variant once the daemon has one, nothing rebuilt
//!   when nothing changed, the original again when the daemon and its export
//!   are gone.
//! - GEVO_IR_DIR: the same example built from a first build's IR with a
//!   clang that does not exist.
//! - REPLACE: examples/stencil-replace, with the CUDA toolkit gevo finds by
//!   itself (in CI Debian's nvidia-cuda-toolkit, which
//!   scripts/install-deps.sh installs), builds its launch from the chosen
//!   PTX, original then evolved, as the toolkit's cuobjdump reads it out of
//!   the program; with REPLACE off it builds the ordinary way where the
//!   project has a CUDA compiler, and stops configuring where it has none;
//!   the select step refuses evolved PTX the launches cannot use.

use crate::common;

use common::cmake::{
    best_json, cuda_toolkit, run, text, wait_for_variant_and_pause, Project, Toolkit,
};
use common::daemon::{s, Daemon};
use common::have_tools;
use gevo_client::export::ptx_hash;
use std::path::Path;
use std::process::Command;

#[test]
fn the_example_embeds_the_evolved_ptx_and_falls_back_to_the_original() {
    if !have_tools(&["cmake", "clang-19"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let daemon_dir = dir.path().join("daemon");
    let p = Project::new(dir.path(), "stencil-app", "build");

    // 1. No daemon, no export: the original PTX, and the log says why.
    let log = p.configure();
    assert!(log.contains("could not register"), "{log}");
    let log = p.build();
    assert!(
        log.contains("using the original PTX: gevod unreachable and no export"),
        "{log}"
    );
    let original = p.original();
    assert!(original.contains(".entry stencil5"), "{original}");
    let ptx = Command::new(env!("CARGO_BIN_EXE_gevod"))
        .args(["ptx", s(&p.gevo_file("stencil.ll")), "--arch", "sm_90"])
        .output()
        .unwrap();
    assert!(ptx.status.success(), "{ptx:?}");
    assert_eq!(original, text(&ptx.stdout), "gevod ptx of the emitted IR");
    // The IR has line tables (GEVO_LINE_TABLES, on by default), naming the source.
    let ir = std::fs::read_to_string(p.gevo_file("stencil.ll")).unwrap();
    assert!(
        ir.contains("!DILocation(line: "),
        "no line tables in the emitted IR"
    );
    assert_eq!(p.app("--print-ptx"), original);
    assert_eq!(p.app("--origin"), "original\n");
    let spec = std::fs::read_to_string(p.gevo_file("stencil.gevo.toml")).unwrap();
    let kernel = p.kernel("stencil");
    let project = kernel.strip_suffix("/stencil").unwrap();
    for line in [
        "ir = \"stencil.ll\"".to_string(),
        format!("project = \"{project}\""),
        "kernel = \"stencil5\"".to_string(),
    ] {
        assert!(spec.contains(&line), "{line} missing:\n{spec}");
    }

    // 2. A daemon that watches nothing: configuring registers <build>/gevo;
    // once a variant is validated the build embeds it.
    let mut d = Daemon::start(&daemon_dir, &[]);
    let log = p.configure();
    let watched = p.build.join("gevo").canonicalize().unwrap();
    assert!(
        log.contains(&format!("gevod: watching {}", watched.display())),
        "{log}"
    );
    wait_for_variant_and_pause(&d, &kernel, dir.path());
    let log = p.build();
    assert!(log.contains("using the evolved PTX"), "{log}");
    assert!(log.contains("(from the daemon)"), "{log}");
    let best = best_json(&d, &kernel);
    let embedded = p.app("--print-ptx");
    assert_eq!(ptx_hash(&embedded), best["ptx_hash"].as_str().unwrap());
    assert_ne!(embedded, original, "the evolved PTX is the original's");
    let origin = p.app("--origin");
    assert!(
        origin.starts_with(&format!("evolved: {kernel} sm_90, speedup ")),
        "{origin}"
    );

    // 3. Nothing changed: nothing is regenerated, compiled or linked.
    let app = p.build.join("stencil-app");
    let generated = p.gevo_file("stencil_ptx.cpp");
    let before = (p.mtime(&app), p.mtime(&generated));
    let log = p.build();
    assert!(log.contains("stencil.ptx unchanged"), "{log}");
    assert!(!log.contains("Linking"), "{log}");
    assert_eq!((p.mtime(&app), p.mtime(&generated)), before, "{log}");

    // 4. The daemon stops: its export still serves the same PTX, so again
    // nothing is rebuilt; without the export, the original is back.
    let (status, _) = d.signal(libc::SIGTERM);
    assert!(status.success(), "gevod: {status}\n{}", d.log_text());
    let log = p.build();
    assert!(log.contains("using the evolved PTX"), "{log}");
    assert!(log.contains("from the export"), "{log}");
    assert!(!log.contains("Linking"), "{log}");
    assert_eq!(p.app("--print-ptx"), embedded);

    std::fs::remove_dir_all(p.state.join("exports")).unwrap();
    let log = p.build();
    assert!(
        log.contains("using the original PTX: gevod unreachable and no export"),
        "{log}"
    );
    assert_eq!(p.app("--print-ptx"), original);
    assert_eq!(p.app("--origin"), "original\n");
}

#[test]
fn prebuilt_ir_from_gevo_ir_dir_needs_no_clang() {
    if !have_tools(&["cmake", "clang-19"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // A normal build emits the IR with clang ...
    let normal = Project::new(dir.path(), "stencil-app", "normal");
    normal.configure();
    normal.build();
    let ir = normal.gevo_file("stencil.ll");
    let original = normal.original();
    assert!(original.contains(".entry stencil5"), "{original}");

    // ... which a build machine without clang takes from GEVO_IR_DIR (a
    // relative path is relative to the build directory). A clang that does
    // not exist would fail the build if anything ran it.
    let no_clang = vec![
        "-DGEVO_IR_DIR=../normal/gevo".to_string(),
        format!("-DGEVO_CLANG={}", s(&dir.path().join("no-such-clang-19"))),
    ];
    let p = Project::new(dir.path(), "stencil-app", "prebuilt");
    let log = p.configure_with(&no_clang);
    assert!(
        log.contains(&format!(
            "gevo: stencil: device IR from {} (GEVO_IR_DIR)",
            s(&ir)
        )),
        "{log}"
    );
    assert!(
        !log.contains("finds no CUDA installation"),
        "clang ran:\n{log}"
    );
    let log = p.build();
    assert!(
        log.contains(&format!("gevo: device IR of stencil from {}", s(&ir))),
        "{log}"
    );
    assert!(!log.contains("device IR of stencil for"), "{log}");
    assert_eq!(
        std::fs::read(p.gevo_file("stencil.ll")).unwrap(),
        std::fs::read(&ir).unwrap()
    );
    // The same IR gives the same spec (its hash names the IR; the project
    // names each build directory) and the same original PTX, made by gevod,
    // which is what the program embeds.
    let spec_of = |p: &Project| {
        let spec = std::fs::read_to_string(p.gevo_file("stencil.gevo.toml")).unwrap();
        let project = format!(
            "project = \"{}\"\n",
            p.kernel("stencil").replace("/stencil", "")
        );
        assert!(spec.contains(&project), "{project}:\n{spec}");
        spec.replace(&project, "")
    };
    assert_eq!(spec_of(&p), spec_of(&normal));
    assert_eq!(p.original(), original);
    assert_eq!(p.app("--print-ptx"), original);
    assert_eq!(p.app("--origin"), "original\n");

    // New IR there is copied at the next build; unchanged IR copies nothing.
    let log = p.build();
    assert!(!log.contains("device IR of stencil"), "{log}");
    let mut changed = std::fs::read_to_string(&ir).unwrap();
    changed.push_str("\n; rebuilt elsewhere\n");
    std::fs::write(&ir, &changed).unwrap();
    let log = p.build();
    assert!(log.contains("gevo: device IR of stencil from"), "{log}");
    assert_eq!(
        std::fs::read_to_string(p.gevo_file("stencil.ll")).unwrap(),
        changed
    );

    // Configure-time errors name what is missing.
    let missing = Project::new(dir.path(), "stencil-app", "missing");
    let empty = dir.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let log = missing.configure_fails(&[format!("-DGEVO_IR_DIR={}", s(&empty))]);
    let wanted = format!("{}/stencil.ll", s(&empty));
    // cmake wraps long messages: compare without line breaks.
    let flat = log.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains(&format!("GEVO_IR_DIR is set, but {wanted} does not exist")),
        "{log}"
    );
    let neither = Project::new(dir.path(), "stencil-app", "neither");
    let mut args = no_clang.clone();
    args.push(format!("-DGEVOD={}", s(&dir.path().join("no-such-gevod"))));
    let log = neither.configure_fails(&args);
    let flat = log.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains("GEVO_IR_DIR is set and neither gevod nor clang is available to compile the original PTX"),
        "{log}"
    );
}

// MODE REPLACE (examples/stencil-replace): the program's <<<...>>> launch
// runs the chosen PTX, assembled into a fatbin that clang compiles into the
// host side of the kernel's source. It needs the CUDA toolkit's ptxas,
// fatbinary, headers, libdevice and cudart; without a toolkit the tests
// that need one say so and skip.

/// PTX as fatbinary keeps it: without comments, each line's whitespace
/// collapsed, blank lines dropped.
fn normalized_ptx(ptx: &str) -> Vec<String> {
    ptx.lines()
        .map(|line| {
            let code = line.split("//").next().unwrap_or("");
            code.split_whitespace().collect::<Vec<_>>().join(" ")
        })
        .filter(|line| !line.is_empty())
        .collect()
}

/// The PTX image of a fatbin (made with --compress=false): the text from
/// its `.version` to the terminating NUL.
fn fatbin_ptx(fatbin: &[u8]) -> String {
    let start = find(fatbin, b".version").expect("no PTX in the fatbin");
    let len = fatbin[start..]
        .iter()
        .position(|&b| b == 0)
        .expect("the fatbin's PTX has no end");
    text(&fatbin[start..start + len])
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The PTX that `cuobjdump -ptx` reads out of a program: the text after its
/// last header line (`compile_size = 64bit`).
fn cuobjdump_ptx(toolkit: &Toolkit, program: &Path) -> String {
    let said = run(Command::new(&toolkit.cuobjdump).arg("-ptx").arg(program));
    let at = said.rfind("compile_size = 64bit").expect("no PTX header") + 20;
    said[at..].to_string()
}

/// The checks of a REPLACE build whose chosen PTX is `chosen`: the program
/// holds gevo's fatbin (clang puts it in the binary whole), the fatbin
/// holds a cubin and that PTX, and the toolkit's cuobjdump finds in the
/// program an sm_90 cubin and that PTX.
fn assert_runs_chosen_ptx(p: &Project, toolkit: &Toolkit, chosen: &str) {
    let program = p.build.join(&p.name);
    let listed = run(Command::new(&toolkit.cuobjdump)
        .args(["-lelf", "-lptx"])
        .arg(&program));
    assert!(listed.contains(".sm_90.cubin"), "{listed}");
    assert!(listed.contains(".sm_90.ptx"), "{listed}");
    assert_eq!(
        normalized_ptx(&cuobjdump_ptx(toolkit, &program)),
        normalized_ptx(chosen),
        "cuobjdump finds another PTX in the program"
    );
    let fatbin = std::fs::read(p.gevo_file("stencil.fatbin")).unwrap();
    let program = std::fs::read(p.build.join(&p.name)).unwrap();
    assert!(
        find(&program, &fatbin).is_some(),
        "the program does not hold gevo's fatbin"
    );
    assert!(
        find(&fatbin, b"\x7fELF").is_some(),
        "no cubin in the fatbin"
    );
    assert_eq!(
        normalized_ptx(&fatbin_ptx(&fatbin)),
        normalized_ptx(chosen),
        "the fatbin's PTX is not the chosen one"
    );
    assert_eq!(p.app("--replaced"), "yes\n");
    assert_eq!(p.app("--print-ptx"), chosen);
}

/// Runs the program without arguments: on a GPU it checks the kernel and
/// succeeds; without one it fails saying so. Returns its output.
fn run_on_gpu_if_any(p: &Project) -> String {
    let out = Command::new(p.build.join(&p.name)).output().unwrap();
    let both = text(&out.stdout) + &text(&out.stderr);
    if out.status.success() {
        assert!(both.contains("against the CPU: ok"), "{both}");
    } else {
        assert!(both.contains("no usable CUDA device"), "{both}");
    }
    both
}

/// What configure says when REPLACE is off for `reason` in a project that
/// has no CUDA compiler: nothing would compile kernels/stencil.cu, and the
/// two ways out.
fn nothing_compiles(off: &str) -> String {
    format!(
        "gevo_optimize(stencil-replace): {off}, and nothing else would compile \
         kernels/stencil.cu: stencil-replace lists it, but the project enables no language that \
         compiles .cu files (CUDA), so stencil-replace would be built without that file's code. \
         Either make REPLACE work (clang-19 and a CUDA toolkit: Debian's or Ubuntu's \
         nvidia-cuda-toolkit, NVIDIA's in /usr/local/cuda, or one named by GEVO_CUDA_PATH), or \
         enable the CUDA language (project(... LANGUAGES CXX CUDA) or enable_language(CUDA)) so \
         that the CUDA compiler builds kernels/stencil.cu when REPLACE is off"
    )
}

/// The REPLACE-off cases: the configure options and the reason said.
fn replace_off_cases(dir: &Path) -> Vec<(Vec<String>, String)> {
    // A toolkit root with nothing in it: the same as none, on any machine.
    let empty = dir.join("no-cuda");
    std::fs::create_dir_all(&empty).unwrap();
    // A build machine without clang (prebuilt IR) has nothing to compile
    // the host side with.
    let ir = dir.join("ir");
    std::fs::create_dir_all(&ir).unwrap();
    std::fs::write(ir.join("stencil.ll"), "").unwrap();
    vec![
        (
            vec![format!("-DGEVO_CUDA_PATH={}", s(&empty))],
            format!(
                "GEVO_CUDA_PATH {} is not a CUDA installation clang can use: it lacks include/, \
                 bin/, nvvm/libdevice/libdevice.10.bc (NVIDIA's toolkit is at /usr/local/cuda, \
                 Debian's and Ubuntu's at /usr/lib/cuda)",
                s(&empty)
            ),
        ),
        (
            vec![
                format!("-DGEVO_IR_DIR={}", s(&ir)),
                format!("-DGEVO_CLANG={}", s(&dir.join("no-such-clang"))),
            ],
            "no clang for the host side (install clang-19 or set GEVO_CLANG)".to_string(),
        ),
    ]
}

#[test]
fn replace_off_without_a_cuda_compiler_stops_configuring() {
    if !have_tools(&["cmake", "clang-19"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for (i, (options, reason)) in replace_off_cases(dir.path()).into_iter().enumerate() {
        let p = Project::new(dir.path(), "stencil-replace", &format!("build-{i}"));
        // The example enables CUDA where CMake finds a compiler for it: as
        // on a machine with none.
        let mut options = options;
        options.push("-DCMAKE_CUDA_COMPILER=NOTFOUND".to_string());
        let log = p.configure_fails(&options);
        let flat = log.split_whitespace().collect::<Vec<_>>().join(" ");
        let wanted = nothing_compiles(&format!("MODE REPLACE is off ({reason})"));
        assert!(flat.contains(&wanted), "wanted: {wanted}\nin:\n{log}");
        assert_eq!(flat.matches("CMake Error").count(), 1, "{log}");
    }
}

#[test]
fn replace_off_with_a_cuda_compiler_builds_the_ordinary_way() {
    if !have_tools(&["cmake", "clang-19", "nvcc"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cases = replace_off_cases(dir.path());
    let p = Project::new(dir.path(), "stencil-replace", "build");
    let (options, reason) = &cases[0];
    let log = p.configure_with(options);
    let flat = log.split_whitespace().collect::<Vec<_>>().join(" ");
    let wanted = format!(
        "gevo: stencil: MODE REPLACE is off: {reason}; stencil-replace builds kernels/stencil.cu \
         the ordinary way"
    );
    assert!(flat.contains(&wanted), "wanted: {wanted}\nin:\n{log}");
    let log = p.build();
    assert!(
        log.contains("using the original PTX: gevod unreachable and no export"),
        "{log}"
    );
    assert!(!log.contains("fatbin of stencil.ptx"), "{log}");
    assert!(!log.contains("host side of"), "{log}");
    assert!(log.contains("Building CUDA object"), "{log}");
    assert!(!p.gevo_file("stencil.fatbin").exists());
    // The kernel still goes to the daemon, and its PTX into the program.
    assert!(p.gevo_file("stencil.gevo.toml").is_file());
    assert_eq!(p.app("--print-ptx"), p.original());
    assert_eq!(p.app("--origin"), "original\n");
    assert_eq!(p.app("--replaced"), "no\n");
    let ran = run_on_gpu_if_any(&p);
    assert!(
        ran.contains("the launch runs the ordinary build's code (MODE REPLACE is off)"),
        "{ran}"
    );

    // Without clang, likewise.
    let (options, reason) = &cases[1];
    let no_clang = Project::new(dir.path(), "stencil-replace", "no-clang");
    let log = no_clang.configure_with(options);
    let flat = log.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains(&format!("gevo: stencil: MODE REPLACE is off: {reason}")),
        "{log}"
    );
}

#[test]
fn replace_builds_the_launches_from_the_chosen_ptx() {
    if !have_tools(&["cmake", "clang-19"]) {
        return;
    }
    let toolkit = match cuda_toolkit() {
        Ok(toolkit) => toolkit,
        Err(why) => {
            println!("skipped: {why}");
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let daemon_dir = dir.path().join("daemon");
    let p = Project::new(dir.path(), "stencil-replace", "build");
    let settings = &toolkit.settings;

    // 1. No daemon: the original PTX, in the fatbin the launch uses. The
    // toolkit is found by itself (unless GEVO_TEST_CUDA_PATH names it), and
    // every line says the same one.
    let log = p.configure_with(settings);
    let flat = log.split_whitespace().collect::<Vec<_>>().join(" ");
    let root = s(&toolkit.root);
    for wanted in [
        "gevo: CUDA ".to_string(),
        format!(" found: --cuda-path {root} ("),
        format!(
            "gevo: stencil: MODE REPLACE: stencil-replace runs the chosen PTX for the kernels of \
             kernels/stencil.cu (CUDA at {root})"
        ),
    ] {
        assert!(flat.contains(&wanted), "wanted: {wanted}\nin:\n{log}");
    }
    assert!(!flat.contains("finds no CUDA installation"), "{log}");
    let log = p.build();
    assert!(
        log.contains("gevo: fatbin of stencil.ptx for sm_90"),
        "{log}"
    );
    assert!(
        log.contains("gevo: host side of stencil.cu with stencil.fatbin"),
        "{log}"
    );
    let original = p.original();
    assert_runs_chosen_ptx(&p, &toolkit, &original);
    assert_eq!(p.app("--origin"), "original\n");
    let ran = run_on_gpu_if_any(&p);
    assert!(
        ran.contains("the launch runs gevo's PTX of stencil5: original"),
        "{ran}"
    );

    // 2. Nothing changed: no fatbin, no host object, no link.
    let host_object = p.build.join("CMakeFiles/gevo/stencil.host.o");
    let before = p.mtime(&host_object);
    let log = p.build();
    assert!(log.contains("stencil.ptx unchanged"), "{log}");
    assert!(!log.contains("fatbin of"), "{log}");
    assert!(!log.contains("host side of"), "{log}");
    assert!(!log.contains("Linking"), "{log}");
    assert_eq!(p.mtime(&host_object), before);

    // 3. A validated variant of the simulator's: the next build assembles
    // it and recompiles the host side against it.
    let d = Daemon::start(&daemon_dir, &[]);
    p.configure_with(settings);
    let kernel = p.kernel("stencil");
    wait_for_variant_and_pause(&d, &kernel, dir.path());
    let log = p.build();
    assert!(log.contains("using the evolved PTX"), "{log}");
    assert!(
        log.contains("gevo: fatbin of stencil.ptx for sm_90"),
        "{log}"
    );
    assert!(
        log.contains("gevo: host side of stencil.cu with stencil.fatbin"),
        "{log}"
    );
    let evolved = p.app("--print-ptx");
    assert_ne!(evolved, original, "the evolved PTX is the original's");
    assert_eq!(
        ptx_hash(&evolved),
        best_json(&d, &kernel)["ptx_hash"].as_str().unwrap()
    );
    assert_runs_chosen_ptx(&p, &toolkit, &evolved);
    let origin = p.app("--origin");
    assert!(
        origin.starts_with(&format!("evolved: {kernel} sm_90, speedup ")),
        "{origin}"
    );
    let ran = run_on_gpu_if_any(&p);
    assert!(
        ran.contains(&format!(
            "the launch runs gevo's PTX of stencil5: {}",
            origin.trim_end()
        )),
        "{ran}"
    );

    // 4. The same answer again: nothing rebuilt.
    let before = p.mtime(&host_object);
    let log = p.build();
    assert!(log.contains("stencil.ptx unchanged"), "{log}");
    assert!(!log.contains("host side of"), "{log}");
    assert!(!log.contains("Linking"), "{log}");
    assert_eq!(p.mtime(&host_object), before);
}

/// Runs GevoBuildStep.cmake's select step for REPLACE with a stand-in
/// gevo-client that answers with the PTX in `answer`, and a stand-in ptxas
/// that exits with `ptxas_exit`. Returns what the step said and the PTX it
/// chose.
fn select_for_replace(dir: &Path, answer: &str, ptxas_exit: i32) -> (String, String) {
    use std::os::unix::fs::PermissionsExt;
    let spec = dir.join("k.gevo.toml");
    std::fs::write(&spec, "kernel = \"a\"\n").unwrap();
    let original = dir.join("k.original.ptx");
    std::fs::write(
        &original,
        ".version 8.0\n.visible .entry a()\n{\n}\n.visible .entry b()\n{\n}\n",
    )
    .unwrap();
    std::fs::write(dir.join("answer.ptx"), answer).unwrap();
    let script = |name: &str, body: String| {
        let path = dir.join(name);
        std::fs::write(&path, body).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    };
    // Writes the answer to the file after -o and prints the JSON that
    // `gevo-client --json best` prints, for this very spec.
    let client = script(
        "gevo-client",
        format!(
            "#!/bin/sh\nwhile [ $# -gt 0 ]; do if [ \"$1\" = -o ]; then cp '{}' \"$2\"; fi; shift; done\n\
             echo '{{\"spec_hash\":\"{}\",\"target\":\"sm_90\",\"backend\":\"sim\",\"job\":\"job 1\",\"generation\":3}}'\n",
            s(&dir.join("answer.ptx")),
            ptx_hash(&std::fs::read_to_string(&spec).unwrap())
        ),
    );
    let ptxas = script(
        "ptxas",
        format!("#!/bin/sh\necho 'ptxas fatal   : stand-in refuses' >&2\nexit {ptxas_exit}\n"),
    );
    let out = dir.join("k.ptx");
    let said = run(Command::new("cmake")
        .arg("-DGEVO_STEP=select")
        .arg("-DKERNEL=p/k")
        .arg("-DARCH=sm_90")
        .arg(format!("-DCLIENT={}", s(&client)))
        .arg("-DUSE_EVOLVED=ON")
        .arg(format!("-DSPEC={}", s(&spec)))
        .arg(format!("-DORIGINAL={}", s(&original)))
        .arg(format!("-DOUT={}", s(&out)))
        .arg(format!("-DORIGIN={}", s(&dir.join("k.ptx.origin"))))
        .arg(format!("-DPTXAS={}", s(&ptxas)))
        .arg("-P")
        .arg(common::repo_root().join("cmake/GevoBuildStep.cmake")));
    (said, std::fs::read_to_string(&out).unwrap())
}

#[test]
fn replace_chooses_only_evolved_ptx_that_the_launches_can_use() {
    if !have_tools(&["cmake"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let original = ".version 8.0\n.visible .entry a()\n{\n}\n.visible .entry b()\n{\n}\n";
    let both = ".version 8.0\n.visible .entry a()\n{\nret;\n}\n.visible .entry b()\n{\n}\n";

    // The source launches a and b: a PTX without b cannot replace it.
    let (said, chosen) =
        select_for_replace(dir.path(), ".version 8.0\n.visible .entry a()\n{\n}\n", 0);
    assert!(
        said.contains(
            "using the original PTX: the evolved PTX lacks the entries b of the original"
        ),
        "{said}"
    );
    assert_eq!(chosen, original);

    // ptxas must assemble it, or the build could not.
    let (said, chosen) = select_for_replace(dir.path(), both, 1);
    assert!(
        said.contains("using the original PTX: ptxas rejects the evolved PTX (ptxas fatal   : stand-in refuses)"),
        "{said}"
    );
    assert_eq!(chosen, original);

    let (said, chosen) = select_for_replace(dir.path(), both, 0);
    assert!(said.contains("using the evolved PTX"), "{said}");
    assert_eq!(chosen, both);

    // Once chosen it is not assembled again at every build: the same
    // answer is kept even where this ptxas would now refuse it.
    let (said, chosen) = select_for_replace(dir.path(), both, 1);
    assert!(said.contains("using the evolved PTX"), "{said}");
    assert!(said.contains("k.ptx unchanged"), "{said}");
    assert_eq!(chosen, both);
}
