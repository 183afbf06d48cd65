//! gevo_optimize(... TUNE BLOCK_X BLOCK_Y) (docs/cmake.md, "Tunable
//! constants: TUNE") on tests/fixtures/tune-app, a 2-D kernel launched with
//! dim3(BLOCK_X, BLOCK_Y):
//!
//! - without a daemon the build uses the source's values and emits the IR of
//!   every other configuration; the spec copy names them (`[tune]`'s `ir`
//!   pattern, `[tune.source]`), and gevod's spec loader finds each one;
//! - an answer that carries a configuration (an export planted for this
//!   build's spec, read by the real gevo-client while no daemon answers)
//!   makes the select step define its values in gevo_tile_tune.h, which the
//!   target's sources force-include: the host code is recompiled with them,
//!   in MODE EMBED and MODE REPLACE (there also tile.cu's launch); the same
//!   answer again rebuilds nothing; an answer of other constants is not
//!   used;
//! - configure stops on a source or spec that TUNE cannot use, saying why.

use crate::common;

use common::cmake::{cuda_toolkit, edit, fixture_project, run, text, Project};
use common::daemon::s;
use common::have_tools;
use gevo_client::export::{ptx_hash, sha256_hex};
use gevo_client::proto::{Best, BestRecord};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

fn flat(log: &str) -> String {
    log.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// cmake wraps its messages: compares without line breaks.
fn assert_said(log: &str, wanted: &str) {
    assert!(
        flat(log).contains(&flat(wanted)),
        "wanted: {wanted}\nin:\n{log}"
    );
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Exports, for this build's spec, a variant whose PTX is `ptx`, built with
/// `configuration` (none: an untuned answer), as the daemon would before it
/// stopped; the build's gevo-client reads it, as no daemon answers at the
/// project's socket.
fn plant(p: &Project, ptx: &str, configuration: &[(&str, i64)]) {
    let spec = std::fs::read(p.gevo_file("tile.gevo.toml")).unwrap();
    let configuration = (!configuration.is_empty()).then(|| {
        configuration
            .iter()
            .map(|(name, value)| (name.to_string(), *value))
            .collect::<BTreeMap<_, _>>()
    });
    let best = Best {
        record: BestRecord {
            configuration,
            kernel: p.kernel("tile"),
            job: "planted".into(),
            version: 1,
            target: "sm_90".into(),
            backend: "cuda".into(),
            speedup: 1.2,
            interval: (1.1, 1.3),
            generation: 4,
            ptx_hash: ptx_hash(ptx),
            spec_hash: sha256_hex(&spec),
            ir_hash: String::new(),
            validated_at: 0,
        },
        ptx: ptx.to_string(),
    };
    gevo_client::export::write(&p.state, &best, Default::default()).unwrap();
}

/// The PTX of an IR file of <build>/gevo, as the daemon makes it.
fn ptx_of(p: &Project, ir: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_gevod"))
        .args(["ptx", s(&p.gevo_file(ir)), "--kernel", "tile_scale"])
        .args(["--arch", "sm_90"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    text(&out.stdout)
}

fn header(p: &Project) -> String {
    read(&p.gevo_file("gevo_tile_tune.h"))
}

/// The configurations' IR files of the fixture and the shape of the kernel's
/// shared tile in each, [BLOCK_Y][BLOCK_X + 1]: the source's (16 x 4) is
/// tile.ll, each other one is built with its -D values.
const IR_FILES: [(&str, &str); 4] = [
    ("tile.ll", "[4 x [17 x float]]"),
    ("tile.tune/tile.16.8.ll", "[8 x [17 x float]]"),
    ("tile.tune/tile.32.4.ll", "[4 x [33 x float]]"),
    ("tile.tune/tile.32.8.ll", "[8 x [33 x float]]"),
];

/// The spec copy as gevod reads it: the source's configuration runs
/// tile.ll, every other one its file of the pattern, and one of them,
/// chosen as gevod chooses (`[tune.chosen]` appended), runs on the
/// simulator.
fn check_spec_copy(p: &Project) {
    let path = p.gevo_file("tile.gevo.toml");
    let text = read(&path);
    for wanted in [
        "[tune]\n# Set by gevo_optimize():\nir = \"tile.tune/tile.{BLOCK_X}.{BLOCK_Y}.ll\"\n\
         BLOCK_X = [16, 32]\nBLOCK_Y = [4, 8]\n",
        "[tune.source]\nBLOCK_X = 16\nBLOCK_Y = 4\n",
        "\n# tune ir sha256: ",
    ] {
        assert!(text.contains(wanted), "{wanted} missing:\n{text}");
    }
    let spec = gevo_model::spec::load(&path).unwrap();
    let tune = spec.tune.as_ref().expect("the copy has [tune]");
    let dir = p.build.join("gevo");
    let mut files = Vec::new();
    for config in tune.configurations() {
        let file = tune
            .ir_path(&dir, &config)
            .unwrap_or_else(|| spec.ir.clone());
        assert!(file.is_file(), "{}", file.display());
        files.push(file.strip_prefix(&dir).unwrap().to_path_buf());
    }
    let wanted: Vec<&Path> = IR_FILES.iter().map(|(f, _)| Path::new(*f)).collect();
    assert_eq!(files, wanted);

    let mut b32x8 = BTreeMap::new();
    b32x8.insert("BLOCK_X".to_string(), 32);
    b32x8.insert("BLOCK_Y".to_string(), 8);
    let chosen = p.gevo_file("chosen.gevo.toml");
    std::fs::write(&chosen, spec.configured_text(&b32x8).unwrap()).unwrap();
    let ran = run(Command::new(env!("CARGO_BIN_EXE_gevod"))
        .arg("run")
        .arg(&chosen)
        .args(["--backend", "sim", "--tests", "train"]));
    assert!(ran.contains("exactly one block"), "{ran}");
    assert_eq!(
        gevo_model::spec::load(&chosen).unwrap().ir,
        dir.join("tile.tune/tile.32.8.ll")
    );
    std::fs::remove_file(&chosen).unwrap();
}

#[test]
fn tune_builds_each_configuration_and_the_chosen_one_reaches_the_host() {
    if !have_tools(&["cmake", "clang-19"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let p = fixture_project(dir.path(), "tune-app", "build");

    // 1. No daemon, no export: the source's values, the other
    // configurations' IR, and a spec copy that names them.
    let log = p.configure();
    assert_said(
        &log,
        "gevo: tile: TUNE BLOCK_X BLOCK_Y: 4 configurations of the spec's values; the \
         source's (BLOCK_X=16 BLOCK_Y=4) is tile.ll, 3 more in tile.tune/",
    );
    let log = p.build();
    assert_said(
        &log,
        "using the original PTX: gevod unreachable and no export",
    );
    assert_said(
        &log,
        "; the source's configuration BLOCK_X=16 BLOCK_Y=4; tile.ptx changed, \
         gevo_tile_tune.h unchanged",
    );
    for (file, tile) in IR_FILES {
        let ir = read(&p.gevo_file(file));
        assert!(ir.contains(&format!("global {tile}")), "{file}:\n{ir}");
    }
    assert!(!p.gevo_file("tile.tune/tile.16.4.ll").exists());
    check_spec_copy(&p);
    let none = header(&p);
    assert!(none.contains("the source's own values apply"), "{none}");
    assert!(!none.contains("#define BLOCK"), "{none}");
    assert_eq!(p.app("--block"), "main.cpp block 16x4\n");
    assert_eq!(p.app("--origin"), "original\n");

    // A build machine without clang takes every configuration's IR from
    // GEVO_IR_DIR, and makes the same spec.
    let prebuilt = Project::new(dir.path(), "tune-app", "prebuilt");
    prebuilt.configure_with(&[
        "-DGEVO_IR_DIR=../build/gevo".to_string(),
        format!("-DGEVO_CLANG={}", s(&dir.path().join("no-such-clang-19"))),
    ]);
    let log = prebuilt.build();
    assert_said(&log, "gevo: device IR of tile from ");
    for (file, _) in IR_FILES {
        assert_eq!(read(&prebuilt.gevo_file(file)), read(&p.gevo_file(file)));
    }
    let without_project = |p: &Project| {
        read(&p.gevo_file("tile.gevo.toml"))
            .lines()
            .filter(|l| !l.starts_with("project = "))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(without_project(&prebuilt), without_project(&p));

    // 2. A variant of the 32 x 8 configuration: its values reach the host
    // code, which is recompiled; the IR is not (it never sees the header).
    let ptx = ptx_of(&p, "tile.tune/tile.32.8.ll");
    plant(&p, &ptx, &[("BLOCK_X", 32), ("BLOCK_Y", 8)]);
    let log = p.build();
    assert_said(&log, "using the evolved PTX: ");
    assert_said(
        &log,
        "; configuration BLOCK_X=32 BLOCK_Y=8; tile.ptx changed, gevo_tile_tune.h changed",
    );
    assert!(log.contains("src/main.cpp.o"), "{log}");
    assert!(!log.contains("device IR of tile"), "{log}");
    assert!(
        header(&p).contains("#define BLOCK_X 32\n#define BLOCK_Y 8\n"),
        "{}",
        header(&p)
    );
    assert_eq!(p.app("--block"), "main.cpp block 32x8\n");
    assert_eq!(p.app("--print-ptx"), ptx);
    let origin = p.app("--origin");
    assert!(
        origin.starts_with("evolved: ")
            && origin.ends_with(", configuration BLOCK_X=32 BLOCK_Y=8\n"),
        "{origin}"
    );

    // 3. The same answer: nothing is compiled or linked.
    let app = p.build.join("tune-app");
    let before = p.mtime(&app);
    let log = p.build();
    assert_said(&log, "tile.ptx unchanged, gevo_tile_tune.h unchanged");
    assert!(!log.contains("Building"), "{log}");
    assert!(!log.contains("Linking"), "{log}");
    assert_eq!(p.mtime(&app), before);

    // 4. A variant of constants other than TUNE's, or lacking one, is not
    // used: the original PTX and the source's values again.
    for (configuration, shown) in [
        (
            &[("BLOCK_X", 32), ("BLOCK_Z", 2)][..],
            "BLOCK_X=32 BLOCK_Z=2",
        ),
        (&[("BLOCK_X", 32)][..], "BLOCK_X=32"),
    ] {
        plant(&p, &ptx, configuration);
        let log = p.build();
        assert_said(
            &log,
            &format!(
                "using the original PTX: the variant was built with the configuration {shown}, \
                 which does not set exactly the TUNE constants (BLOCK_X BLOCK_Y); the source's \
                 configuration BLOCK_X=16 BLOCK_Y=4"
            ),
        );
        assert_eq!(header(&p), none);
        assert_eq!(p.app("--block"), "main.cpp block 16x4\n");
        assert_eq!(p.app("--origin"), "original\n");
    }

    // 5. An untuned variant (no configuration) was built with the source's
    // values: used, and the header stays as it is.
    let untuned = read(&p.gevo_file("tile.original.ptx")) + "// an untuned variant\n";
    plant(&p, &untuned, &[]);
    let log = p.build();
    assert_said(&log, "using the evolved PTX: ");
    assert_said(
        &log,
        "; the source's configuration BLOCK_X=16 BLOCK_Y=4; tile.ptx changed, \
         gevo_tile_tune.h unchanged",
    );
    assert!(!log.contains("src/main.cpp.o"), "{log}");
    assert_eq!(p.app("--print-ptx"), untuned);
    assert_eq!(p.app("--block"), "main.cpp block 16x4\n");
}

#[test]
fn tune_with_replace_builds_the_launch_with_the_chosen_configuration() {
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
    let p = fixture_project(dir.path(), "tune-app", "build");
    let mut options = toolkit.settings.clone();
    options.push("-DTUNE_APP_MODE=REPLACE".to_string());
    let log = p.configure_with(&options);
    assert_said(
        &log,
        "gevo: tile: MODE REPLACE: tune-app runs the chosen PTX",
    );
    let log = p.build();
    assert!(
        log.contains("gevo: host side of tile.cu with tile.fatbin"),
        "{log}"
    );
    assert_eq!(
        p.app("--block"),
        "main.cpp block 16x4\ntile.cu block 16x4\n"
    );

    // A variant of the 32 x 4 configuration: the fatbin holds it, and both
    // the launch in tile.cu and main.cpp are compiled with its values.
    let ptx = ptx_of(&p, "tile.tune/tile.32.4.ll");
    plant(&p, &ptx, &[("BLOCK_X", 32), ("BLOCK_Y", 4)]);
    let log = p.build();
    assert_said(
        &log,
        "; configuration BLOCK_X=32 BLOCK_Y=4; tile.ptx changed, gevo_tile_tune.h changed",
    );
    for step in [
        "gevo: fatbin of tile.ptx for sm_90",
        "gevo: host side of tile.cu with tile.fatbin",
        "src/main.cpp.o",
    ] {
        assert!(log.contains(step), "{step} missing:\n{log}");
    }
    assert!(!log.contains("device IR of tile"), "{log}");
    assert_eq!(
        p.app("--block"),
        "main.cpp block 32x4\ntile.cu block 32x4\n"
    );
    assert_eq!(p.app("--print-ptx"), ptx);
    // The fatbin's PTX (fatbinary collapses its whitespace) has the tile of
    // 4 x 33 floats.
    let fatbin = std::fs::read(p.gevo_file("tile.fatbin")).unwrap();
    let tile = b"_ZZ10tile_scaleE4tile[528]";
    assert!(
        fatbin.windows(tile.len()).any(|w| w == tile),
        "the fatbin's PTX is not the 32 x 4 one"
    );
    // On a GPU the launch runs and checks the kernel.
    let out = Command::new(p.build.join("tune-app")).output().unwrap();
    let said = text(&out.stdout) + &text(&out.stderr);
    if out.status.success() {
        assert!(said.contains("block 32x4 on the GPU"), "{said}");
    } else {
        assert!(said.contains("no usable CUDA device"), "{said}");
    }

    // The same answer: nothing rebuilt.
    let host_object = p.build.join("CMakeFiles/gevo/tile.host.o");
    let before = p.mtime(&host_object);
    let log = p.build();
    assert_said(&log, "tile.ptx unchanged, gevo_tile_tune.h unchanged");
    assert!(!log.contains("host side of"), "{log}");
    assert!(!log.contains("Linking"), "{log}");
    assert_eq!(p.mtime(&host_object), before);
}

#[test]
fn tune_stops_configuring_on_a_source_or_spec_it_cannot_use() {
    if !have_tools(&["cmake", "clang-19"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let p = fixture_project(dir.path(), "tune-app", "build");
    let cu = p.source.join("kernels/tile.cu");
    let spec = p.source.join("kernels/tile.gevo.toml");
    let lists = p.source.join("CMakeLists.txt");
    let shown = s(&spec);
    let guarded = "#ifndef BLOCK_Y\n#define BLOCK_Y 4\n#endif\n";
    let one_line = "gevo reads the [tune] table of the spec with CMake's regexes and takes only \
                    the one-line form NAME = [8, 16, 32] (decimal integers)";
    let cases = [
        (
            &cu,
            guarded,
            "#define BLOCK_Y 4\n",
            "gevo_optimize(tune-app): TUNE BLOCK_Y: kernels/tile.cu defines BLOCK_Y without \
             `#ifndef BLOCK_Y` around it; wrap it in `#ifndef BLOCK_Y` (`#ifndef BLOCK_Y` / \
             `#define BLOCK_Y <integer>` / `#endif`), because gevo's value"
                .to_string(),
        ),
        (
            &cu,
            guarded,
            "",
            "TUNE BLOCK_Y: kernels/tile.cu does not define BLOCK_Y; define it there as \
             `#ifndef BLOCK_Y` / `#define BLOCK_Y <integer>` / `#endif`"
                .to_string(),
        ),
        (
            &cu,
            "#define BLOCK_Y 4",
            "#define BLOCK_Y (2 * 2)",
            "kernels/tile.cu defines BLOCK_Y as `(2 * 2)`; gevo needs a decimal integer there"
                .to_string(),
        ),
        (
            &spec,
            "BLOCK_Y = [4, 8]\n",
            "",
            format!("TUNE BLOCK_Y: the [tune] table of {shown} has no values for BLOCK_Y"),
        ),
        (
            &spec,
            "BLOCK_Y = [4, 8]",
            "BLOCK_Y = [\n    4,\n    8,\n]",
            format!(
                "cannot read the values of BLOCK_Y in the [tune] table of {shown} \
                 (`BLOCK_Y = [`): {one_line}"
            ),
        ),
        (
            &spec,
            "BLOCK_Y = [4, 8]",
            "BLOCK_Y = [4, 8]\nBLOCK_Z = [1, 2]",
            format!("{shown}'s [tune] lists BLOCK_Z, which TUNE does not name"),
        ),
        (
            &spec,
            "[tune]\nBLOCK_X = [16, 32]\nBLOCK_Y = [4, 8]\n",
            "",
            format!(
                "TUNE names BLOCK_X, BLOCK_Y, but {shown} has no [tune] table with the values \
                 to try"
            ),
        ),
        (
            &lists,
            "  TUNE BLOCK_X BLOCK_Y)",
            ")",
            format!("{shown} has a [tune] table, but the call names no TUNE constants"),
        ),
    ];
    for (file, from, to, wanted) in cases {
        let original = read(file);
        edit(file, from, to);
        let log = p.configure_fails(&[]);
        assert_said(&log, &wanted);
        std::fs::write(file, original).unwrap();
    }

    // Without a spec, the skeleton tries the source's values to begin with.
    std::fs::remove_file(&spec).unwrap();
    p.configure();
    let skeleton = read(&spec);
    assert!(
        skeleton.contains("\n[tune]\nBLOCK_X = [16]\nBLOCK_Y = [4]\n"),
        "{skeleton}"
    );
}
