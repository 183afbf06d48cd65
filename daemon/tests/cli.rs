//! The `gevod` binary, run as a user would: replay across processes, and bad
//! input giving one line naming the file, a non-zero exit and nothing written.

use crate::common;

use common::s;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn gevod(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gevod"))
        .args(args)
        .env(
            "GEVO_LIBDEVICE",
            common::repo_root().join("tests/fixtures/libdevice-stub.ll"),
        )
        .output()
        .expect("run gevod")
}

fn ok(args: &[&str]) -> Output {
    common::succeeded(gevod(args), args)
}

/// A recorded patch re-applied in fresh processes yields identical IR text
/// and PTX, equal to what the library produces in this process.
#[test]
fn replay_in_fresh_processes_is_byte_identical() {
    let dir = tempfile::tempdir().unwrap();
    for name in common::KERNEL_FIXTURES {
        let fixture = common::kernel_fixture(name);
        let patch_a = dir.path().join(format!("{name}-a.json"));
        let patch_b = dir.path().join(format!("{name}-b.json"));
        ok(&[
            "mutate",
            s(&fixture),
            "--seed",
            "42",
            "--edits",
            "8",
            "-o",
            s(&patch_a),
        ]);
        ok(&[
            "mutate",
            s(&fixture),
            "--seed",
            "42",
            "--edits",
            "8",
            "-o",
            s(&patch_b),
        ]);
        let patch_text = std::fs::read_to_string(&patch_a).unwrap();
        assert_eq!(
            patch_text,
            std::fs::read_to_string(&patch_b).unwrap(),
            "{name}: same seed, same patch"
        );

        let mut runs = Vec::new();
        for run in 0..2 {
            let ptx = dir.path().join(format!("{name}-{run}.ptx"));
            let ll = dir.path().join(format!("{name}-{run}.ll"));
            ok(&[
                "ptx",
                s(&fixture),
                "--patch",
                s(&patch_a),
                "--emit-ir",
                s(&ll),
                "-o",
                s(&ptx),
            ]);
            runs.push((
                std::fs::read_to_string(&ll).unwrap(),
                std::fs::read_to_string(&ptx).unwrap(),
            ));
        }
        assert_eq!(runs[0], runs[1], "{name}: two processes disagree");

        let ir = common::load(name);
        let patch = gevo_ir::Patch::from_json(&patch_text).unwrap();
        let compiled = ir.compile(&patch, &common::codegen_options()).unwrap();
        assert_eq!(
            (compiled.ir, compiled.ptx),
            runs.pop().unwrap(),
            "{name}: process and library disagree"
        );
        assert_ne!(
            compiled.ptx_hash,
            ir.compile(&ir.empty_patch(), &common::codegen_options())
                .unwrap()
                .ptx_hash
        );
    }
}

/// The IR hash (and so every patch) does not depend on where the IR was read
/// from, even for modules without a `source_filename` line.
#[test]
fn ir_hash_does_not_depend_on_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(common::kernel_fixture("vecadd")).unwrap();
    let stripped = common::without_lines(&text, "source_filename");
    let hashes: Vec<String> = ["a.ll", "sub/b.ll"]
        .iter()
        .map(|name| {
            let path = dir.path().join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &stripped).unwrap();
            gevo_ir::KernelIr::load(&path, None)
                .unwrap()
                .ir_hash()
                .to_string()
        })
        .collect();
    assert_eq!(hashes[0], hashes[1]);
}

#[test]
fn edits_command_shows_each_edit_and_its_diff() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = common::kernel_fixture("stencil");
    let patch = dir.path().join("p.json");
    ok(&[
        "mutate",
        s(&fixture),
        "--seed",
        "7",
        "--edits",
        "3",
        "-o",
        s(&patch),
    ]);
    let out = String::from_utf8(ok(&["edits", s(&fixture), "--patch", s(&patch)]).stdout).unwrap();
    for i in 0..3 {
        assert!(out.contains(&format!("edit {i}: ")), "{out}");
    }
    assert_eq!(out.matches("--- before\n+++ after\n").count(), 3, "{out}");

    // The planted barrier edit, in CUDA source terms above its IR.
    let planted =
        common::repo_root().join("tests/fixtures/kernels/stencil.drop-barrier.patch.json");
    let out =
        String::from_utf8(ok(&["edits", s(&fixture), "--patch", s(&planted)]).stdout).unwrap();
    assert!(
        out.starts_with(
            "edit 0: delete the __syncthreads() at stencil.cu:61\n  stencil.cu:61 | __syncthreads();"
        ),
        "{out}"
    );
    assert!(out.contains("  IR: delete i87\n"), "{out}");
    // Renumbered debug locations stay out of the diff: one line goes.
    assert_eq!(
        out.lines()
            .filter(|l| l.starts_with('-') && !l.starts_with("---"))
            .count(),
        1,
        "{out}"
    );
}

#[test]
fn kernels_are_found_by_mangled_or_demangled_name() {
    let fixture = common::kernel_fixture("reduce");
    for name in [
        "_Z10reduce_sumPKfPfi",
        "reduce_sum",
        "reduce_sum(float const*, float*, int)",
    ] {
        let out = ok(&["ptx", s(&fixture), "--kernel", name]);
        assert!(String::from_utf8_lossy(&out.stdout).contains(".entry _Z10reduce_sumPKfPfi"));
    }
}

/// `gevod ptx --guarded` writes the guarded check build: the same kernel
/// with the runtime's fault record, which the ordinary build lacks.
#[test]
fn ptx_writes_the_guarded_build_on_request() {
    let fixture = common::kernel_fixture("reduce");
    let plain = ok(&["ptx", s(&fixture), "--kernel", "reduce_sum"]);
    let guarded = ok(&["ptx", s(&fixture), "--kernel", "reduce_sum", "--guarded"]);
    let (plain, guarded) = (
        String::from_utf8_lossy(&plain.stdout),
        String::from_utf8_lossy(&guarded.stdout),
    );
    for ptx in [&plain, &guarded] {
        assert!(ptx.contains(".entry _Z10reduce_sumPKfPfi"), "{ptx}");
    }
    assert!(guarded.contains("__gevo_guard_state"), "{guarded}");
    assert!(!plain.contains("__gevo_guard_state"), "{plain}");
}

struct BadInput {
    what: &'static str,
    /// File contents to create: (name, content).
    files: Vec<(&'static str, String)>,
    /// Arguments; `{dir}` is the temp dir, `{out}` the output that must not appear.
    args: &'static [&'static str],
    /// Substrings of the single stderr line.
    expect: &'static [&'static str],
}

fn stencil_patch(format: u32) -> String {
    let ir = common::load("stencil");
    let mut patch = ir.empty_patch();
    patch.format = format;
    patch.to_json()
}

#[test]
fn bad_input_is_one_line_naming_the_file_and_writes_nothing() {
    let fixtures = common::repo_root().join("tests/fixtures/kernels");
    let vecadd = std::fs::read_to_string(fixtures.join("vecadd.ll")).unwrap();
    let two_arg_spec = format!(
        "version = 1\nir = {:?}\nkernel = \"vecadd\"\n[launch]\ngrid = [1]\nblock = [32]\n\
         [[args]]\nname = \"a\"\nkind = \"buffer\"\ntype = \"f32\"\nlen = \"n\"\nfill = {{ constant = 1.0 }}\nrole = \"in\"\n\
         [[args]]\nname = \"c\"\nkind = \"buffer\"\ntype = \"f32\"\nlen = \"n\"\nrole = \"out\"\n\
         [tests]\ntrain = [{{ n = 8, seed = 1 }}]\nheldout = [{{ n = 9, seed = 2 }}]\n[acceptance]\nmetric = \"exact\"\n",
        s(&fixtures.join("vecadd.ll"))
    );
    let cases = vec![
        BadInput {
            what: "spec arguments not matching the kernel",
            files: vec![("two.gevo.toml", two_arg_spec.clone())],
            args: &["run", "{dir}/two.gevo.toml"],
            expect: &["two.gevo.toml:14:", "args[1]: the spec lists 2 arguments but kernel vecadd takes 4"],
        },
        BadInput {
            what: "malformed spec",
            files: vec![(
                "bad.gevo.toml",
                two_arg_spec.replace("metric = \"exact\"", "metric = \"closest\""),
            )],
            args: &["run", "{dir}/bad.gevo.toml"],
            expect: &["bad.gevo.toml:", "acceptance.metric"],
        },
        BadInput {
            what: "unparsable IR",
            files: vec![(
                "bad.ll",
                vecadd.replace("fadd contract float", "fadd contract flot"),
            )],
            args: &["ptx", "{dir}/bad.ll", "-o", "{out}"],
            expect: &["bad.ll:", "error:"],
        },
        BadInput {
            what: "truncated IR",
            files: vec![("cut.ll", vecadd[..vecadd.len() / 2].to_string())],
            args: &["ptx", "{dir}/cut.ll", "-o", "{out}"],
            expect: &["cut.ll"],
        },
        BadInput {
            what: "not NVPTX",
            files: vec![("x86.ll", "target triple = \"x86_64-pc-linux-gnu\"\n".into())],
            args: &["ptx", "{dir}/x86.ll", "-o", "{out}"],
            expect: &["x86.ll: not an NVPTX module"],
        },
        BadInput {
            what: "no kernel",
            files: vec![(
                "nok.ll",
                "target triple = \"nvptx64-nvidia-cuda\"\ndefine void @f() {\n  ret void\n}\n"
                    .into(),
            )],
            args: &["mutate", "{dir}/nok.ll", "--seed", "1", "-o", "{out}"],
            expect: &["nok.ll: no kernel found"],
        },
        BadInput {
            what: "unknown kernel name",
            files: vec![],
            args: &[
                "ptx",
                "{fixtures}/reduce.ll",
                "--kernel",
                "nope",
                "-o",
                "{out}",
            ],
            expect: &[
                "reduce.ll: no kernel named \"nope\"",
                "_Z10reduce_sumPKfPfi",
            ],
        },
        BadInput {
            what: "patch for other IR",
            files: vec![("p.json", stencil_patch(1))],
            args: &[
                "ptx",
                "{fixtures}/vecadd.ll",
                "--patch",
                "{dir}/p.json",
                "-o",
                "{out}",
            ],
            expect: &[
                "vecadd.ll with patch",
                "p.json",
                "patch was made for other IR",
            ],
        },
        BadInput {
            what: "patch of a newer format",
            files: vec![("p.json", stencil_patch(2))],
            args: &[
                "ptx",
                "{fixtures}/stencil.ll",
                "--patch",
                "{dir}/p.json",
                "-o",
                "{out}",
            ],
            expect: &["p.json: patch format 2 is newer"],
        },
        BadInput {
            what: "malformed patch",
            files: vec![("p.json", "{\"format\": 1, \"edits\": [".into())],
            args: &["edits", "{fixtures}/stencil.ll", "--patch", "{dir}/p.json"],
            expect: &["p.json: not a valid patch"],
        },
        BadInput {
            what: "a list where a patch goes",
            files: vec![("p.json", "[]".into())],
            args: &["edits", "{fixtures}/stencil.ll", "--patch", "{dir}/p.json"],
            expect: &["p.json: not a valid patch: a patch is a JSON object with \"format\", \"ir_hash\", \"kernel\" and \"edits\" (docs/patches.md), not an array"],
        },
        BadInput {
            what: "a tolerance that is not a number",
            files: vec![(
                "nan.gevo.toml",
                two_arg_spec.replace(
                    "metric = \"exact\"",
                    "metric = \"max_abs\"\ntolerance = nan",
                ),
            )],
            args: &["run", "{dir}/nan.gevo.toml"],
            expect: &["nan.gevo.toml:", "acceptance.tolerance: expected a finite number >= 0, found nan"],
        },
        BadInput {
            what: "a config number out of its range",
            files: vec![("gevod.toml", "[workers]\ncount = 100000\n".into())],
            args: &["--check-config", "--config", "{dir}/gevod.toml"],
            expect: &["gevod.toml: workers.count: 100000 is out of range (0 to 1024)"],
        },
        BadInput {
            what: "report of a directory that is no state directory",
            files: vec![("note.txt", "not a store".into())],
            args: &["report", "{dir}", "-o", "{out}"],
            expect: &["no gevod.redb here (is it a state directory?)"],
        },
        BadInput {
            what: "missing file",
            files: vec![],
            args: &["ptx", "{dir}/missing.ll", "-o", "{out}"],
            expect: &["missing.ll does not exist"],
        },
        BadInput {
            what: "libdevice absent",
            files: vec![],
            args: &[
                "ptx",
                "{fixtures}/expf.ll",
                "--libdevice",
                "{dir}/none.bc",
                "-o",
                "{out}",
            ],
            expect: &["expf.ll", "__nv_expf", "none.bc"],
        },
    ];
    for case in cases {
        let dir = tempfile::tempdir().unwrap();
        for (name, content) in &case.files {
            std::fs::write(dir.path().join(name), content).unwrap();
        }
        let out_path: PathBuf = dir.path().join("out");
        let args: Vec<String> = case
            .args
            .iter()
            .map(|a| {
                a.replace("{dir}", s(dir.path()))
                    .replace("{out}", s(&out_path))
                    .replace("{fixtures}", s(&fixtures))
            })
            .collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = gevod(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{}: succeeded", case.what);
        assert_eq!(
            stderr.trim_end().lines().count(),
            1,
            "{}: not one line: {stderr}",
            case.what
        );
        for e in case.expect {
            assert!(stderr.contains(e), "{}: {e:?} not in {stderr}", case.what);
        }
        assert!(!out_path.exists(), "{}: output written", case.what);
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            case.files.len(),
            "{}: stray files left",
            case.what
        );
    }
}

/// `gevod run` on a spec: the original passes; the bundled patch that drops
/// the stencil's redundant barrier passes at lower cost; `--json` reports it.
#[test]
fn run_reports_each_test_and_the_bundled_patch_is_faster() {
    let spec = common::spec_fixture("stencil");
    let patch = common::repo_root().join("tests/fixtures/kernels/stencil.drop-barrier.patch.json");
    let table = String::from_utf8(ok(&["run", s(&spec), "--tests", "train"]).stdout).unwrap();
    assert_eq!(
        table.lines().filter(|l| l.contains(" pass ")).count(),
        3,
        "{table}"
    );
    let json = ok(&["run", s(&spec), "--patch", s(&patch), "--json"]).stdout;
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&json).unwrap();
    assert_eq!(rows.len(), 5);
    for row in rows {
        assert_eq!(row["passed"], true, "{row}");
        let ratio = row["cost_ratio"].as_f64().unwrap();
        assert!(ratio < 0.97, "{row}");
    }
    // A failing variant makes the command fail, naming the spec.
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("p.json");
    let text = std::fs::read_to_string(&patch).unwrap().replace(
        "\"target\": 87",
        "\"target\": 86}, {\"op\": \"delete\", \"target\": 87",
    );
    std::fs::write(&broken, text).unwrap();
    let out = gevod(&["run", s(&spec), "--patch", s(&broken), "--tests", "train"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("race"));
    assert!(String::from_utf8_lossy(&out.stderr).contains("stencil.gevo.toml: 3 of 3 tests failed"));
}

/// vecadd's spec with simulator-sized and GPU-sized tests: `[tests.sim]`
/// replaces train (one test), `[tests.gpu]` both sets (GPU-sized).
fn backend_sized_spec(dir: &Path) -> PathBuf {
    let fixture = common::spec_fixture("vecadd");
    let ir = common::kernel_fixture("vecadd");
    let text = std::fs::read_to_string(&fixture)
        .unwrap()
        .replace("ir = \"vecadd.ll\"", &format!("ir = {:?}", s(&ir)))
        + "\n[tests.sim]\ntrain = [{ n = 100, seed = 7 }]\n\
           \n[tests.gpu]\ntrain = [{ n = 4194304, seed = 8 }, { n = 4194305, seed = 9 }]\n\
           heldout = [{ n = 16777216, seed = 10 }]\n";
    let spec = dir.join("sized.gevo.toml");
    std::fs::write(&spec, text).unwrap();
    spec
}

/// `gevod run` on the simulator runs the sim sets: `[tests.sim]`'s train
/// and `[tests]`' heldout, never the GPU-sized ones.
#[test]
fn the_simulator_runs_the_sim_sized_tests() {
    let dir = tempfile::tempdir().unwrap();
    let spec = backend_sized_spec(dir.path());
    let json = ok(&["run", s(&spec), "--backend", "sim", "--json"]).stdout;
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&json).unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["test"].as_str().unwrap()).collect();
    assert_eq!(names, ["train[0]", "heldout[0]", "heldout[1]"]);
    // train[0] is n = 100: cheaper than [tests]' train[0] (n = 1000).
    let plain = ok(&[
        "run",
        s(&common::spec_fixture("vecadd")),
        "--backend",
        "sim",
        "--tests",
        "train",
        "--json",
    ])
    .stdout;
    let plain: Vec<serde_json::Value> = serde_json::from_slice(&plain).unwrap();
    let cost = |r: &serde_json::Value| r["original_cost"].as_f64().unwrap();
    assert!(
        cost(&rows[0]) < cost(&plain[0]),
        "{} vs {}",
        rows[0],
        plain[0]
    );
}

/// Without a GPU (CI: no driver library, or the CUDA packages' library and
/// no device), `--backend cuda` is one line saying so, GPU-only options say
/// they need the GPU, and `auto` runs on the simulator. With a GPU the suite
/// in scripts/gpu-suite.sh covers these paths.
#[test]
fn the_gpu_backend_without_a_driver_is_one_clear_line() {
    use gevod::cuda::CudaError;
    let why = match gevod::cuda::driver::init() {
        Ok(()) => {
            println!("skipped: this machine has a GPU (scripts/gpu-suite.sh tests it)");
            return;
        }
        Err(CudaError::NoDevice { .. }) => "no CUDA device 0 (this machine has 0)".to_string(),
        Err(e) => e.to_string(),
    };
    let spec = common::spec_fixture("vecadd");
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let no_driver = format!("gevod: --backend cuda: {why}\n");
    for args in [
        vec!["run", s(&spec), "--backend", "cuda"],
        vec![
            "evolve",
            s(&spec),
            "--backend",
            "cuda",
            "--state",
            s(&state),
        ],
    ] {
        let out = gevod(&args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert_eq!(String::from_utf8_lossy(&out.stderr), no_driver, "{args:?}");
    }
    assert!(!state.exists(), "nothing is written when the backend fails");
    let out = gevod(&["run", s(&spec), "--ptx", s(&spec)]);
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "gevod: --ptx needs the GPU backend (no GPU is in use: --backend sim, or auto without a GPU)\n"
    );
    let out = ok(&["run", s(&spec), "--tests", "train"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("train[2]"));
}

/// Fills a skeleton's placeholders: each `key = "TODO..."` line whose key
/// (within its table, counted in file order) has an answer gets it.
fn fill_placeholders(skeleton: &str, answers: &[(&str, &str)]) -> String {
    let mut left: Vec<(&str, &str)> = answers.to_vec();
    skeleton
        .lines()
        .map(|line| {
            let Some((key, value)) = line.split_once(" = ") else {
                return line.to_string();
            };
            if !value.starts_with("\"TODO") && !value.starts_with("[\"TODO") {
                return line.to_string();
            }
            let at = left.iter().position(|(k, _)| *k == key).unwrap_or_else(|| {
                panic!("no answer left for placeholder `{line}`");
            });
            let (_, answer) = left.remove(at);
            format!("{key} = {answer}")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `gevod spec init` on IR without debug info: one [[args]] per parameter in
/// order, kinds, types and roles from the IR; `gevod run` lists every
/// placeholder left, and once they are filled the spec runs.
#[test]
fn a_spec_skeleton_lists_its_placeholders_then_runs_once_filled() {
    let dir = tempfile::tempdir().unwrap();
    let ir = dir.path().join("vecadd.ll");
    std::fs::copy(common::kernel_fixture("vecadd"), &ir).unwrap();
    let spec = dir.path().join("vecadd.gevo.toml");
    ok(&["spec", "init", s(&ir), "-o", s(&spec)]);
    let skeleton = std::fs::read_to_string(&spec).unwrap();
    assert!(skeleton.contains("ir = \"vecadd.ll\""), "{skeleton}");
    let args: Vec<&str> = skeleton
        .split("\n[[args]]\n")
        .skip(1)
        .map(|a| a.split("\n[").next().unwrap())
        .collect();
    assert_eq!(args.len(), 4, "{skeleton}");
    for (arg, (name, kind, ty, role)) in args.iter().zip([
        ("arg0", "buffer", "f32", Some("in")),
        ("arg1", "buffer", "f32", Some("in")),
        ("arg2", "buffer", "f32", Some("out")),
        ("arg3", "scalar", "i32", None),
    ]) {
        assert!(arg.contains(&format!("name = \"{name}\"")), "{arg}");
        assert!(arg.contains(&format!("kind = \"{kind}\"")), "{arg}");
        assert!(arg.contains(&format!("type = \"{ty}\"")), "{arg}");
        if let Some(role) = role {
            assert!(arg.contains(&format!("role = \"{role}\"")), "{arg}");
            assert!(arg.contains("guessed"), "the role is a guess: {arg}");
        }
    }
    // An existing spec is not overwritten.
    let again = gevod(&["spec", "init", s(&ir), "-o", s(&spec)]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("--force"));

    let unfilled = gevod(&["run", s(&spec)]);
    assert!(!unfilled.status.success());
    let err = String::from_utf8_lossy(&unfilled.stderr);
    assert!(
        err.contains("12 placeholders to fill in: launch.grid[0], launch.block[0], args[0].len, args[0].fill, args[1].len, args[1].fill, args[2].len, args[3].value, tests.train, tests.heldout, acceptance.metric, acceptance.tolerance"),
        "{err}"
    );

    let filled = fill_placeholders(
        &skeleton,
        &[
            ("grid", "[\"cdiv(n, 128)\"]"),
            ("block", "[128]"),
            ("len", "\"n\""),
            ("fill", "{ uniform = [-1.0, 1.0] }"),
            ("len", "\"n\""),
            ("fill", "{ uniform = [-1.0, 1.0] }"),
            ("len", "\"n\""),
            ("value", "\"n\""),
            ("train", "[{ n = 300, seed = 1 }]"),
            ("heldout", "[{ n = 1000, seed = 2 }]"),
            ("metric", "\"max_abs\""),
            ("tolerance", "1e-6"),
        ],
    );
    std::fs::write(&spec, filled).unwrap();
    let run = ok(&["run", s(&spec)]);
    assert!(String::from_utf8_lossy(&run.stdout).contains("heldout"));
}

/// With line tables, parameter names come from the CUDA source.
#[test]
fn a_spec_skeleton_names_parameters_from_the_source() {
    if !common::have_tools(&["clang-19"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let kernels = common::repo_root().join("tests/fixtures/kernels");
    let ir = dir.path().join("stencil.ll");
    let clang = Command::new("clang-19")
        .args([
            "-x",
            "cuda",
            "--cuda-device-only",
            "-nocudainc",
            "-nocudalib",
            "--cuda-gpu-arch=sm_90",
            "-O3",
            "-S",
            "-emit-llvm",
            "-gline-tables-only",
            "-include",
        ])
        .arg(kernels.join("gevo_shim.h"))
        .arg(kernels.join("stencil.cu"))
        .arg("-o")
        .arg(&ir)
        .output()
        .unwrap();
    assert!(clang.status.success(), "{clang:?}");
    let out = ok(&["spec", "init", s(&ir)]);
    let skeleton = String::from_utf8_lossy(&out.stdout);
    let names: Vec<&str> = skeleton
        .lines()
        .filter_map(|l| l.strip_prefix("name = "))
        .collect();
    assert_eq!(
        names,
        ["\"in\"", "\"out\"", "\"nx\"", "\"ny\""],
        "{skeleton}"
    );
    assert!(
        skeleton.contains("# parameter 0: const float*"),
        "{skeleton}"
    );
}
