//! Spec files: broken specs give one-line errors naming file, line and field;
//! the fixture specs load and instantiate deterministically; `.npy` inputs;
//! per-backend test sets reach the workers that run them.

use crate::common;

use common::workers::{eval_workers, fake_device};
use gevo_model::spec::{
    self, ArgKind, ArgValue, ElemType, Fill, Role, Scalar, Spec, TestCase, TestSet, TestTarget,
};
use gevo_search::evolve::{Backend, Scope};
use gevod::worker::gpu::{CudaBackend, CudaOptions};
use gevod::worker::pool::{PoolOptions, WorkerPool};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Every `daemon/tests/specs/*.toml` starts with `# expect: <substring>`;
/// loading it must fail with a one-line message that contains the
/// substring, starts with the file's path and a line number, and (when
/// the file has a `# line: N` header) names that line.
#[test]
fn broken_specs_fail_with_located_messages() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/specs");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    assert!(files.len() >= 15, "only {} broken specs", files.len());
    let mut failures = Vec::new();
    for path in &files {
        let text = std::fs::read_to_string(path).unwrap();
        let expect = text
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("# expect: "))
            .unwrap_or_else(|| panic!("{}: no `# expect:` line", path.display()))
            .trim()
            .to_string();
        let line = text
            .lines()
            .nth(1)
            .and_then(|l| l.strip_prefix("# line: "))
            .map(|l| l.trim().parse::<usize>().unwrap());
        let err = match spec::load(path) {
            Ok(_) => {
                failures.push(format!(
                    "{}: loaded, expected an error containing {expect:?}",
                    path.display()
                ));
                continue;
            }
            Err(e) => e,
        };
        let msg = err.to_string();
        eprintln!("{msg}");
        let prefix = format!("{}:", path.display());
        let after = msg.strip_prefix(&prefix);
        let line_in_msg = after
            .and_then(|rest| rest.split(':').next())
            .and_then(|n| n.parse::<usize>().ok());
        if !msg.contains(&expect) {
            failures.push(format!(
                "{}: {msg:?} does not contain {expect:?}",
                path.display()
            ));
        } else if msg.contains('\n') {
            failures.push(format!(
                "{}: message is not one line: {msg:?}",
                path.display()
            ));
        } else if line_in_msg.is_none() || line_in_msg != err.line {
            failures.push(format!(
                "{}: message does not start with the file and a line: {msg:?}",
                path.display()
            ));
        } else if line.is_some() && line != err.line {
            failures.push(format!(
                "{}: line {:?}, expected {line:?}: {msg}",
                path.display(),
                err.line
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} broken specs:\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
}

/// Expected buffer lengths of each fixture, from the test's parameters.
fn expected_lens(name: &str, p: &BTreeMap<String, f64>) -> Vec<(&'static str, usize)> {
    let g = |k: &str| p[k] as usize;
    match name {
        "vecadd" => vec![("a", g("n")), ("b", g("n")), ("c", g("n"))],
        "reduce" => vec![("in", g("n")), ("out", g("n").div_ceil(256))],
        "stencil" => vec![("in", g("nx") * g("ny")), ("out", g("nx") * g("ny"))],
        "nw" => vec![
            ("score", g("tiles") * (g("n") + 1) * (g("n") + 1)),
            ("ref", g("tiles") * g("n") * g("n")),
        ],
        "loops" => vec![("x", g("n")), ("y", g("n"))],
        "expf" => vec![("x", g("n")), ("y", g("n"))],
        _ => unreachable!(),
    }
}

const FIXTURES: [&str; 6] = ["vecadd", "reduce", "stencil", "nw", "loops", "expf"];

fn threads(inst: &spec::Instance) -> u64 {
    let l = &inst.launches[0];
    l.grid.iter().chain(&l.block).map(|&d| d as u64).product()
}

#[test]
fn fixture_specs_load_and_instantiate() {
    for name in FIXTURES {
        let spec = spec::load(&common::spec_fixture(name)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            spec.ir,
            common::spec_fixture(name)
                .parent()
                .unwrap()
                .join(format!("{name}.ll"))
        );
        assert!(spec.ir.is_file());
        assert_eq!(spec.arch.as_deref(), Some("sm_90"));
        assert!(!spec.train.is_empty() && !spec.heldout.is_empty());
        let mut max_train_threads = 0;
        let mut max_heldout_threads = 0;
        for test in spec.tests(TestSet::All) {
            let inst = spec
                .instantiate(test)
                .unwrap_or_else(|e| panic!("{name} {}: {e}", test.name));
            assert_eq!(inst.args.len(), spec.args.len());
            assert_eq!(inst.launches.len(), 1);
            assert_eq!(inst.launches[0].shared_bytes, 0);
            assert_eq!(inst.final_binding, (0..spec.args.len()).collect::<Vec<_>>());
            for (arg, want) in expected_lens(name, &test.params) {
                let i = spec.arg_index(arg).unwrap();
                let ArgValue::Buffer { elem, role, data } = &inst.args[i] else {
                    panic!("{name}: {arg} is not a buffer")
                };
                assert_eq!(data.len(), want * elem.size(), "{name} {} {arg}", test.name);
                if *role == Role::Out {
                    assert!(
                        data.iter().all(|&b| b == 0),
                        "{name}: out buffer {arg} is not zeroed"
                    );
                }
            }
            // Scalars carry the test's parameter of the same name.
            for (i, a) in spec.args.iter().enumerate() {
                if let ArgValue::Scalar(s) = inst.args[i] {
                    let v = test.params[&a.name];
                    match s {
                        Scalar::I32(x) => assert_eq!(x as f64, v),
                        Scalar::F32(x) => assert_eq!(x, v as f32),
                        other => panic!("{name}: unexpected scalar {other:?}"),
                    }
                }
            }
            // The launch shape the kernels assume (see the .cu headers).
            let (grid, block) = (inst.launches[0].grid, inst.launches[0].block);
            match name {
                "reduce" => assert_eq!(block, [256, 1, 1]),
                "stencil" => {
                    assert_eq!(block, [16, 16, 1]);
                    assert!(grid[0] as f64 * 16.0 >= test.params["nx"]);
                    assert!(grid[1] as f64 * 16.0 >= test.params["ny"]);
                }
                "nw" => {
                    assert_eq!(block[0] as f64, test.params["n"]);
                    assert!((1..=32).contains(&block[0]));
                    assert_eq!(grid[0] as f64, test.params["tiles"]);
                }
                _ => assert!(threads(&inst) as f64 >= test.params["n"]),
            }
            if test.name.starts_with("train") {
                max_train_threads = max_train_threads.max(threads(&inst));
            } else {
                max_heldout_threads = max_heldout_threads.max(threads(&inst));
            }
        }
        assert!(
            max_train_threads <= 16384,
            "{name}: train tests launch {max_train_threads} threads"
        );
        assert!(
            max_heldout_threads > max_train_threads,
            "{name}: heldout is not larger than train"
        );
    }
}

fn buffers(inst: &spec::Instance, role: Role) -> Vec<&[u8]> {
    inst.args
        .iter()
        .filter_map(|a| match a {
            ArgValue::Buffer { role: r, data, .. } if *r == role => Some(data.as_slice()),
            _ => None,
        })
        .collect()
}

#[test]
fn instantiation_is_deterministic_and_follows_the_seed() {
    for name in FIXTURES {
        let spec = spec::load(&common::spec_fixture(name)).unwrap();
        let again = spec::load(&common::spec_fixture(name)).unwrap();
        for test in spec.tests(TestSet::Train) {
            let a = spec.instantiate(test).unwrap();
            let b = again.instantiate(test).unwrap();
            assert!(a == b, "{name} {}: two instantiations differ", test.name);
            let other = TestCase {
                seed: test.seed + 1000,
                ..test.clone()
            };
            let c = spec.instantiate(&other).unwrap();
            let inputs: Vec<_> = [Role::In, Role::Inout]
                .iter()
                .flat_map(|&r| buffers(&a, r))
                .collect();
            let other_inputs: Vec<_> = [Role::In, Role::Inout]
                .iter()
                .flat_map(|&r| buffers(&c, r))
                .collect();
            assert!(!inputs.is_empty());
            for (x, y) in inputs.iter().zip(&other_inputs) {
                assert_eq!(x.len(), y.len());
                assert_ne!(
                    x, y,
                    "{name} {}: another seed gives the same input",
                    test.name
                );
            }
            assert_eq!(a.launches, c.launches);
        }
        // Two buffers with the same fill in one test still differ (seeded by name).
        if name == "vecadd" {
            let inst = spec.instantiate(&spec.train[0]).unwrap();
            let ins = buffers(&inst, Role::In);
            assert_ne!(ins[0], ins[1]);
        }
    }
}

#[test]
fn fixture_values_are_in_range() {
    let spec = spec::load(&common::spec_fixture("nw")).unwrap();
    let inst = spec.instantiate(&spec.train[0]).unwrap();
    let ArgValue::Buffer {
        elem: ElemType::I32,
        data,
        ..
    } = &inst.args[spec.arg_index("ref").unwrap()]
    else {
        panic!()
    };
    let vals: Vec<i32> = data
        .chunks(4)
        .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert!(vals.iter().all(|v| (-10..=10).contains(v)));
    assert!(vals.contains(&-10) && vals.contains(&10));
    let spec = spec::load(&common::spec_fixture("stencil")).unwrap();
    let inst = spec.instantiate(&spec.train[0]).unwrap();
    let ArgValue::Buffer { data, .. } = &inst.args[0] else {
        panic!()
    };
    let vals: Vec<f32> = data
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert!(vals.iter().all(|v| (-1.0..=1.0).contains(v)));
    let mean = vals.iter().sum::<f32>() / vals.len() as f32;
    assert!(mean.abs() < 0.05, "{mean}");
}

/// A minimal .npy writer, independent of the reader under test.
fn write_npy(path: &Path, version: u8, descr: &str, shape: &str, data: &[u8]) {
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    let prefix = if version == 1 { 10 } else { 12 };
    while (prefix + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY".to_vec();
    out.extend([version, 0]);
    if version == 1 {
        out.extend((header.len() as u16).to_le_bytes());
    } else {
        out.extend((header.len() as u32).to_le_bytes());
    }
    out.extend(header.as_bytes());
    out.extend(data);
    std::fs::write(path, out).unwrap();
}

fn spec_text(ty: &str, fill: &str, len: &str) -> String {
    format!(
        r#"version = 1
ir = "k.ll"
kernel = "k"

[launch]
grid = [1]
block = [32]

[[args]]
name = "x"
kind = "buffer"
type = "{ty}"
len = "{len}"
fill = {fill}
role = "inout"

[tests]
train = [{{ n = 6, seed = 1 }}]
heldout = [{{ n = 6, seed = 2 }}]

[acceptance]
metric = "exact"
"#
    )
}

#[test]
fn npy_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("k.ll"), "; stand-in IR\n").unwrap();
    let floats: Vec<f32> = vec![1.5, -2.0, 3.25, 0.0, f32::MAX, -1e-30];
    let bytes: Vec<u8> = floats.iter().flat_map(|f| f.to_le_bytes()).collect();
    write_npy(&dir.path().join("v1.npy"), 1, "<f4", "(2, 3)", &bytes);
    write_npy(&dir.path().join("v2.npy"), 2, "<f4", "(6,)", &bytes);
    let spec_path = dir.path().join("k.gevo.toml");
    for file in ["v1.npy", "v2.npy"] {
        let text = spec_text("f32", &format!("{{ file = \"{file}\" }}"), "n");
        std::fs::write(&spec_path, &text).unwrap();
        let spec = spec::load(&spec_path).unwrap_or_else(|e| panic!("{e}"));
        let ArgKind::Buffer { fill, .. } = &spec.args[0].kind else {
            panic!()
        };
        assert!(matches!(&fill.value, Fill::File { elems: 6, .. }));
        for test in spec.tests(TestSet::All) {
            let inst = spec.instantiate(test).unwrap();
            let ArgValue::Buffer { elem, role, data } = &inst.args[0] else {
                panic!()
            };
            assert_eq!((*elem, *role), (ElemType::F32, Role::Inout));
            assert_eq!(data, &bytes, "{file}: data differ");
        }
    }

    // One-byte and 64-bit integer dtypes.
    write_npy(
        &dir.path().join("u8.npy"),
        1,
        "|u1",
        "(6,)",
        &[1, 2, 3, 250, 0, 255],
    );
    std::fs::write(&spec_path, spec_text("u8", "{ file = \"u8.npy\" }", "n")).unwrap();
    let spec = spec::load(&spec_path).unwrap();
    let inst = spec.instantiate(&spec.train[0]).unwrap();
    assert_eq!(
        inst.args[0],
        ArgValue::Buffer {
            elem: ElemType::U8,
            role: Role::Inout,
            data: vec![1, 2, 3, 250, 0, 255]
        }
    );
    let longs: Vec<u8> = (0..6i64).flat_map(|v| (v - 3).to_le_bytes()).collect();
    write_npy(&dir.path().join("i8.npy"), 1, "<i8", "(3, 2)", &longs);
    std::fs::write(&spec_path, spec_text("i64", "{ file = \"i8.npy\" }", "n")).unwrap();
    let spec = spec::load(&spec_path).unwrap();
    let inst = spec.instantiate(&spec.train[0]).unwrap();
    assert!(matches!(&inst.args[0], ArgValue::Buffer { data, .. } if *data == longs));

    // Raw little-endian file.
    std::fs::write(dir.path().join("x.bin"), &bytes).unwrap();
    std::fs::write(&spec_path, spec_text("f32", "{ file = \"x.bin\" }", "n")).unwrap();
    let spec = spec::load(&spec_path).unwrap();
    let inst = spec.instantiate(&spec.train[0]).unwrap();
    assert!(matches!(&inst.args[0], ArgValue::Buffer { data, .. } if *data == bytes));

    // Mismatches are errors naming the spec file, line and field.
    let bad = |ty: &str, file: &str, len: &str, want: &str| {
        std::fs::write(
            &spec_path,
            spec_text(ty, &format!("{{ file = \"{file}\" }}"), len),
        )
        .unwrap();
        let e = spec::load(&spec_path).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains(want), "{msg}");
        assert!(
            msg.starts_with(&format!("{}:14:", spec_path.display())),
            "{msg}"
        );
        assert!(e.field.starts_with("args[0].fill"), "{msg}");
    };
    bad(
        "f64",
        "v1.npy",
        "n",
        "has dtype '<f4', expected '<f8' for a f64 buffer",
    );
    bad("i32", "v1.npy", "n", "expected '<i4'");
    bad(
        "f32",
        "v1.npy",
        "n + 1",
        "holds 6 f32 elements, but len is 7 in test train[0]",
    );
    write_npy(&dir.path().join("big.npy"), 1, ">f4", "(6,)", &bytes);
    bad("f32", "big.npy", "n", "has dtype '>f4', expected '<f4'");
    write_npy(&dir.path().join("short.npy"), 1, "<f4", "(7,)", &bytes);
    bad(
        "f32",
        "short.npy",
        "n",
        "has 24 data bytes, shape [7] of '<f4' needs 28",
    );
    let mut fortran = std::fs::read(dir.path().join("v1.npy")).unwrap();
    let at = fortran.windows(5).position(|w| w == b"False").unwrap();
    fortran.splice(at..at + 5, *b"True ");
    std::fs::write(dir.path().join("f.npy"), fortran).unwrap();
    bad("f32", "f.npy", "n", "Fortran order");
    std::fs::write(dir.path().join("fake.npy"), b"not numpy").unwrap();
    bad("f32", "fake.npy", "n", "not a .npy file");
}

#[test]
fn repeat_and_swaps() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("k.ll"), "; stand-in IR\n").unwrap();
    let text = r#"version = 1
ir = "k.ll"
kernel = "jacobi"

[launch]
grid = ["cdiv(nx, 16)", "cdiv(ny, 16)"]
block = [16, 16]
shared_bytes = "18 * 18 * 4"
repeat = { count = "sweeps", swap = [["in", "out"]] }

[[args]]
name = "in"
kind = "buffer"
type = "f32"
len = "nx * ny"
fill = { normal = [0.0, 1.0] }
role = "inout"

[[args]]
name = "out"
kind = "buffer"
type = "f32"
len = "nx * ny"
role = "out"

[[args]]
name = "w"
kind = "scalar"
type = "f64"
value = "1 / 3"

[tests]
train = [{ nx = 40, ny = 20, sweeps = 3, seed = 7 }]
heldout = [{ nx = 400, ny = 200, sweeps = 10, seed = 8 }]

[acceptance]
metric = "ulp"
tolerance = 4
"#;
    let spec = spec::parse(&dir.path().join("j.gevo.toml"), text).unwrap_or_else(|e| panic!("{e}"));
    let inst = spec.instantiate(&spec.train[0]).unwrap();
    assert_eq!(inst.launches.len(), 3);
    for l in &inst.launches {
        assert_eq!(l.grid, [3, 2, 1]);
        assert_eq!(l.block, [16, 16, 1]);
        assert_eq!(l.shared_bytes, 1296);
        assert_eq!(
            l.label, "",
            "the single-kernel form's launches have no label"
        );
    }
    // Launch 2 reads what launch 1 wrote: `in` and `out` exchange buffers.
    let buffers = |l: &spec::LaunchInstance| -> Vec<(usize, usize)> {
        l.params
            .iter()
            .filter_map(|p| match *p {
                spec::LaunchParam::Buffer { arg, slot } => Some((arg, slot)),
                _ => None,
            })
            .collect()
    };
    assert_eq!(buffers(&inst.launches[0]), vec![(0, 0), (1, 1)]);
    assert_eq!(buffers(&inst.launches[1]), vec![(0, 1), (1, 0)]);
    assert_eq!(buffers(&inst.launches[2]), vec![(0, 0), (1, 1)]);
    assert_eq!(inst.final_binding, vec![0, 1, 2]);
    assert_eq!(inst.args[2], ArgValue::Scalar(Scalar::F64(1.0 / 3.0)));
    let heldout = spec.instantiate(&spec.heldout[0]).unwrap();
    assert_eq!(heldout.launches.len(), 10);
    assert_eq!(
        heldout.final_binding[..2],
        [1, 0],
        "an even count ends swapped"
    );
    assert_eq!(spec.acceptance.tolerance, 4.0);
    assert_eq!(spec.outputs(), vec![0, 1]);
}

#[test]
fn load_reports_unreadable_file() {
    let e = spec::load(Path::new("/nonexistent/dir/x.gevo.toml")).unwrap_err();
    assert_eq!(
        e.to_string(),
        "/nonexistent/dir/x.gevo.toml: cannot read spec file: it does not exist"
    );
}

/// A spec that cannot be read is one line naming the file once and saying
/// "cannot read" once.
#[test]
fn unreadable_specs_are_named_once() {
    let dir = tempfile::tempdir().unwrap();
    let latin1 = dir.path().join("m26.gevo.toml");
    std::fs::write(&latin1, b"version = 1\nkernel = \"caf\xe9\"\n").unwrap();
    let folder = dir.path().join("d.gevo.toml");
    std::fs::create_dir(&folder).unwrap();
    for (path, reason) in [
        (&latin1, "not UTF-8 text"),
        (&folder, "it is a directory, not a regular file"),
    ] {
        let e = spec::load(path).unwrap_err().to_string();
        assert_eq!(
            e,
            format!("{}: cannot read spec file: {reason}", path.display())
        );
        assert_eq!(e.matches(path.to_str().unwrap()).count(), 1, "{e}");
    }
}

#[test]
fn content_and_test_set_hashes_are_stable() {
    let a: Spec = spec::load(&common::spec_fixture("stencil")).unwrap();
    let b: Spec = spec::load(&common::spec_fixture("stencil")).unwrap();
    assert_eq!(a.content_hash(), b.content_hash());
    for set in [TestSet::Train, TestSet::Heldout, TestSet::All] {
        assert_eq!(a.test_set_hash(set), b.test_set_hash(set));
        assert_eq!(a.test_set_hash(set).len(), 64);
    }
    let c = spec::load(&common::spec_fixture("vecadd")).unwrap();
    assert_ne!(a.content_hash(), c.content_hash());
    assert_ne!(
        a.test_set_hash(TestSet::Train),
        c.test_set_hash(TestSet::Train)
    );
}

/// `buffer_bytes` counts what `instantiate` would generate, without
/// generating it (the pre-screen picks its test by it).
#[test]
fn buffer_bytes_match_the_generated_instances() {
    for name in FIXTURES {
        let spec = spec::load(&common::spec_fixture(name)).unwrap();
        for test in spec.tests(TestSet::All) {
            let generated: usize = spec
                .instantiate(test)
                .unwrap()
                .args
                .iter()
                .map(|a| match a {
                    ArgValue::Buffer { data, .. } => data.len(),
                    ArgValue::Scalar(_) => 0,
                })
                .sum();
            assert_eq!(
                spec.buffer_bytes(test).unwrap(),
                generated,
                "{name} {}",
                test.name
            );
            // On a GPU: each buffer run on, a pristine copy of each input,
            // and (outputs compared there) the original's of each output.
            let instance = spec.instantiate(test).unwrap();
            let on_device = |references: bool| -> usize {
                instance
                    .args
                    .iter()
                    .map(|a| match a {
                        ArgValue::Buffer { data, role, .. } => {
                            let inputs = usize::from(*role != spec::Role::Out);
                            let outputs = usize::from(references && *role != spec::Role::In);
                            (1 + inputs + outputs) * data.len()
                        }
                        ArgValue::Scalar(_) => 0,
                    })
                    .sum()
            };
            for references in [false, true] {
                assert_eq!(
                    spec.device_bytes(test, references).unwrap(),
                    on_device(references),
                    "{name} {} (references on the device: {references})",
                    test.name
                );
            }
        }
    }
}

/// vecadd's spec with `[tests.sim] train` (one test) and `[tests.gpu]`
/// train and heldout (GPU-sized), in `dir`.
fn backend_sized_spec(dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(common::spec_fixture("vecadd"))
        .unwrap()
        .replace(
            "ir = \"vecadd.ll\"",
            &format!(
                "ir = {:?}",
                common::spec_fixture("vecadd").with_file_name("vecadd.ll")
            ),
        )
        + "\n[tests.sim]\ntrain = [{ n = 100, seed = 7 }]\n\
         \n[tests.gpu]\ntrain = [{ n = 4194304, seed = 8 }, { n = 4194305, seed = 9 }]\n\
         heldout = [{ n = 16777216, seed = 10 }]\n";
    let path = dir.join("sized.gevo.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// `gevod eval-worker` (the simulator, and the GPU backend's compile
/// workers) runs the sim sets; the GPU backend's results are keyed by the
/// gpu sets (its GPU worker here: the stand-in, which measures nothing).
#[test]
fn workers_run_and_key_their_backends_tests() {
    let dir = tempfile::tempdir().unwrap();
    let path = backend_sized_spec(dir.path());
    let spec = spec::load(&path).unwrap();
    let (sim, gpu) = (
        spec.for_backend(TestTarget::Sim),
        spec.for_backend(TestTarget::Gpu),
    );
    assert_ne!(
        sim.test_set_hash(TestSet::All),
        gpu.test_set_hash(TestSet::All)
    );
    let stop = Arc::new(AtomicBool::new(false));
    let scope = Scope {
        backend: "sim".into(),
        target: "sm_90".into(),
    };
    let mut pool = WorkerPool::start(eval_workers(&path, 1), &sim, scope, stop.clone()).unwrap();
    let empty = gevo_ir::KernelIr::load(&spec.ir, Some(&spec.kernel))
        .unwrap()
        .empty_patch();
    let a = pool.assess(&[empty], TestSet::All).unwrap();
    let names: Vec<&str> = a[0].tests.iter().map(|t| t.test.as_str()).collect();
    assert_eq!(names, ["train[0]", "heldout[0]", "heldout[1]"]);

    let counter = dir.path().join("requests");
    let gpu_worker = PoolOptions {
        program: common::repo_root().join("tests/fixtures/fake/gpu-worker.sh"),
        args: Vec::new(),
        env: vec![("FAKE_GPU_COUNTER".into(), counter.into())],
        ..eval_workers(&path, 1)
    };
    let options = || CudaOptions {
        compile: eval_workers(&path, 1),
        gpu: gpu_worker.clone(),
        device: fake_device(),
        arch: "sm_90".into(),
        cubin_for: None,
        prescreen: gevod::config::Prescreen::All,
        gate: None,
        measurement: gevod::cuda::measure::Measurement::Adaptive,
    };
    // Given the spec as loaded (or as either backend's): the same choice.
    for given in [&spec, &sim] {
        let cuda = CudaBackend::start(options(), given, stop.clone()).unwrap();
        for set in [TestSet::Train, TestSet::Heldout, TestSet::All] {
            assert_eq!(cuda.test_set_hash(set), gpu.test_set_hash(set), "{set:?}");
        }
    }
}
