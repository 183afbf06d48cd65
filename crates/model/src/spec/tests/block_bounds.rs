//! The block bounds a guarded build may take thread indices to be below
//! ([`Spec::block_bounds`]): numbers in every launch of a kernel, the most
//! in each dimension; none where a block is an expression of sizes or
//! tunable constants, or the application launches the kernel.

use super::*;

#[test]
fn a_kernels_blocks_are_bounded_where_every_launch_gives_numbers() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    // (spec, per kernel: its bounds, "-" for none)
    for (path, expected) in [
        ("tests/fixtures/kernels/stencil.gevo.toml", vec!["16x16x1"]),
        (
            "tests/fixtures/pipelines/lu.gevo.toml",
            vec!["64x1x1", "8x1x1", "8x1x1", "8x8x1"],
        ),
        ("tests/fixtures/kernels/nw.gevo.toml", vec!["-"]),
        ("tests/fixtures/tune/tile2d.gevo.toml", vec!["-"]),
    ] {
        let spec = load(&root.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
        let bounds: Vec<String> = spec
            .block_bounds()
            .iter()
            .map(|b| match b {
                Some([x, y, z]) => format!("{x}x{y}x{z}"),
                None => "-".into(),
            })
            .collect();
        assert_eq!(bounds, expected, "{path}");
    }
}

/// In harness mode the application launches the kernel: no bounds.
#[test]
fn a_harness_kernel_has_no_block_bounds() {
    let dir = ir_dir();
    let text = "version = 1\nir = \"k.ll\"\nkernel = \"k\"\n[harness]\ncommand = [\"./app\", \"{ptx}\"]\noutputs = [{ file = \"out.f32\", type = \"f32\" }]\n\
         [tests]\ntrain = [{ n = 100, seed = 1 }]\nheldout = [{ n = 300, seed = 2 }]\n\
         [acceptance]\nmetric = \"max_abs\"\ntolerance = 0.001\n";
    let spec = parse(&dir.path().join("k.gevo.toml"), text).unwrap();
    assert_eq!(spec.block_bounds(), vec![None]);
}
