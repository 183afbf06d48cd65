//! The tunable fixtures `tests/fixtures/tune/tile2d` and `pyramid` (built
//! by scripts/tune-fixture-ir.sh): every configuration of their `[tune]`
//! tables loads as a configured spec, has its own IR file, launches its
//! block shape with the grid covering the whole domain on every test, and
//! its original computes on the simulator what the source's configuration
//! computes, bit for bit, on the simulator's tests.

use crate::common;

use gevo_ir::KernelIr;
use gevo_model::sim::Limits;
use gevo_model::spec::{self, tune, ArgValue, Spec, TestSet, TestTarget};
use gevo_search::eval::simulate;
use std::collections::BTreeMap;

fn tile2d() -> std::path::PathBuf {
    common::repo_root().join("tests/fixtures/tune/tile2d.gevo.toml")
}

fn tunable_pyramid() -> std::path::PathBuf {
    common::repo_root().join("tests/fixtures/tune/pyramid.gevo.toml")
}

/// `source` run at `config`: its configured spec, which names the chosen
/// configuration and that configuration's IR file, which exists.
fn configured(source: &Spec, path: &std::path::Path, config: &tune::Configuration) -> Spec {
    let name = tune::describe(config);
    let text = source.configured_text(config).unwrap();
    let spec = spec::parse(path, &text).unwrap_or_else(|e| panic!("{name}: {e}"));
    let chosen = spec.tune.as_ref().unwrap();
    assert!(chosen.chosen_written);
    assert_eq!(&chosen.chosen, config);
    let t = source.tune.as_ref().unwrap();
    let ir = t
        .ir_path(path.parent().unwrap(), config)
        .unwrap_or_else(|| source.ir.clone());
    assert_eq!(spec.ir, ir, "{name}");
    assert!(
        spec.ir.is_file(),
        "{name}: {} is missing",
        spec.ir.display()
    );
    spec
}

/// The spec's out buffers after the original ran each simulator test, by
/// test name.
fn sim_outputs(spec: &Spec) -> BTreeMap<String, Vec<Vec<u8>>> {
    let spec = spec.for_backend(TestTarget::Sim);
    let ir = KernelIr::load_kernels(&spec.ir, &spec.kernels).unwrap();
    let programs = ir.lower_all(&ir.empty_patch()).unwrap();
    let limits = Limits {
        block_step_budget: u64::MAX,
    };
    spec.tests(TestSet::All)
        .into_iter()
        .map(|test| {
            let inst = spec.instantiate(test).unwrap();
            let (_, buffers) = simulate(&programs, &inst, limits, 2)
                .unwrap_or_else(|v| panic!("{} {}: {v}", spec.ir.display(), test.name));
            let outputs = spec.outputs().into_iter().map(|i| buffers[i].clone());
            (test.name.clone(), outputs.collect())
        })
        .collect()
}

/// Block and grid of every test of `spec` (both backends' sets): the
/// block is `x` by `y`, and the grid the fewest blocks covering nx by ny.
fn check_geometry(spec: &Spec, x: u32, y: u32) {
    let cdiv = |n: f64, b: u32| (n as u32).div_ceil(b);
    for target in [TestTarget::Sim, TestTarget::Gpu] {
        let spec = spec.for_backend(target);
        for test in spec.tests(TestSet::All) {
            let (nx, ny) = (test.params["nx"], test.params["ny"]);
            assert_eq!(test.params["BLOCK_X"], f64::from(x), "{}", test.name);
            assert_eq!(test.params["BLOCK_Y"], f64::from(y), "{}", test.name);
            let threads = u64::from(cdiv(nx, x) * x) * u64::from(cdiv(ny, y) * y);
            assert_eq!(spec.thread_count(test).unwrap(), threads, "{}", test.name);
            if target == TestTarget::Sim {
                // Small enough to make the inputs: the launch itself.
                let inst = spec.instantiate(test).unwrap();
                assert_eq!(inst.launches.len(), 1);
                assert_eq!(inst.launches[0].block, [x, y, 1], "{}", test.name);
                assert_eq!(
                    inst.launches[0].grid,
                    [cdiv(nx, x), cdiv(ny, y), 1],
                    "{}",
                    test.name
                );
                let ArgValue::Buffer { data, .. } = &inst.args[0] else {
                    panic!("in is a buffer");
                };
                assert_eq!(data.len(), 4 * (nx * ny) as usize);
            }
        }
    }
}

#[test]
fn every_tile2d_configuration_has_its_ir_block_and_the_source_outputs() {
    let path = tile2d();
    let source = spec::load(&path).unwrap();
    let t = source.tune.as_ref().expect("tile2d has [tune]");
    assert!(!t.chosen_written);
    let configs = t.configurations();
    assert!(
        (15..=25).contains(&configs.len()),
        "{} configurations",
        configs.len()
    );
    assert!(
        configs.contains(&t.source),
        "the source's shape is tried too"
    );
    let reference = sim_outputs(&source);
    for config in &configs {
        let name = tune::describe(config);
        let spec = configured(&source, &path, config);
        let (x, y) = (config["BLOCK_X"], config["BLOCK_Y"]);
        assert!(x * y <= 1024, "{name}: {} threads", x * y);
        check_geometry(&spec, x as u32, y as u32);
        assert_eq!(
            sim_outputs(&spec),
            reference,
            "{name}: outputs differ from the source's"
        );
    }
}

/// The tunable pipeline: each STEP_BLOCK launches every smoothing step in
/// blocks of that size, covering the signal, and computes what the
/// untuned pipeline fixture (tests/fixtures/pipelines/pyramid) computes.
#[test]
fn every_tunable_pyramid_configuration_has_its_ir_step_block_and_the_pipeline_outputs() {
    let path = tunable_pyramid();
    let source = spec::load(&path).unwrap();
    let t = source.tune.as_ref().expect("pyramid has [tune]");
    let configs = t.configurations();
    assert_eq!(configs.len(), 6);
    let untuned = common::repo_root().join("tests/fixtures/pipelines/pyramid.gevo.toml");
    let reference = sim_outputs(&spec::load(&untuned).unwrap());
    assert_eq!(sim_outputs(&source), reference, "the source configuration");
    for config in &configs {
        let name = tune::describe(config);
        let spec = configured(&source, &path, config);
        let block = config["STEP_BLOCK"] as u32;
        let sim = spec.for_backend(TestTarget::Sim);
        for test in sim.tests(TestSet::All) {
            let inst = sim.instantiate(test).unwrap();
            let steps = test.params["steps"] as usize;
            let n = test.params["n"] as u32;
            for launch in &inst.launches[..steps] {
                assert_eq!(launch.block, [block, 1, 1], "{name} {}", test.name);
                assert_eq!(
                    launch.grid,
                    [n.div_ceil(block), 1, 1],
                    "{name} {}",
                    test.name
                );
            }
        }
        assert_eq!(
            sim_outputs(&spec),
            reference,
            "{name}: outputs differ from the pipeline's"
        );
    }
}
