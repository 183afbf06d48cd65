//! Several kernels in one `KernelIr` and one patch: ids unique across the
//! module, edits confined to one kernel, mutation spread over the kernels,
//! replay exact, one PTX module holding every kernel.

use crate::common;

use gevo_ir::{Edit, EditKind, IrError, KernelIr};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

fn pyramid() -> (KernelIr, Vec<String>) {
    let spec = gevo_model::spec::load(&common::pipeline_fixture("pyramid")).unwrap();
    let ir = KernelIr::load_kernels(&spec.ir, &spec.kernels).unwrap();
    (ir, spec.kernels)
}

#[test]
fn ids_run_on_across_the_kernels() {
    let (ir, kernels) = pyramid();
    let listing = ir.listing().unwrap();
    let ids: Vec<u32> = listing.iter().map(|(id, _)| id.0).collect();
    assert_eq!(ids, (0..ir.instruction_count()).collect::<Vec<_>>());
    // Each kernel's part of the listing is that kernel loaded alone, its
    // ids shifted by the instructions of the kernels before it.
    let mut first = 0u32;
    for (k, name) in kernels.iter().enumerate() {
        let alone = KernelIr::load(
            &common::repo_root().join("tests/fixtures/pipelines/pyramid.ll"),
            Some(name),
        )
        .unwrap()
        .listing()
        .unwrap();
        let part: Vec<_> = listing
            .iter()
            .filter(|(id, _)| ir.kernel_of(*id) == Some(k))
            .collect();
        assert_eq!(part.len(), alone.len(), "{name}");
        for ((id, text), (alone_id, alone_text)) in part.iter().zip(&alone) {
            assert_eq!(id.0, alone_id.0 + first, "{name}");
            assert_eq!(text, alone_text, "{name}");
        }
        first += alone.len() as u32;
    }
    assert_eq!(ir.empty_patch().kernels, kernels);
}

#[test]
fn an_edit_naming_two_kernels_is_refused() {
    let (ir, _) = pyramid();
    let listing = ir.listing().unwrap();
    let in_kernel = |k| {
        listing
            .iter()
            .find(|(id, text)| ir.kernel_of(*id) == Some(k) && text.contains("load"))
            .unwrap()
            .0
    };
    let mut patch = ir.empty_patch();
    patch.edits.push(Edit {
        kind: EditKind::Move {
            src: in_kernel(0),
            before: in_kernel(1),
        },
        repairs: Vec::new(),
    });
    let err = ir.check(&patch).unwrap_err();
    assert!(matches!(err, IrError::InvalidEdit { edit: 0, .. }), "{err}");
    // A single-kernel patch of the same IR is refused too: it spans other kernels.
    let mut single = patch.clone();
    single.kernels.clear();
    single.edits.clear();
    assert!(matches!(
        ir.check(&single),
        Err(IrError::PatchKernelMismatch { .. })
    ));
}

#[test]
fn mutation_reaches_every_kernel_and_replay_is_exact() {
    let (ir, kernels) = pyramid();
    let options = common::codegen_options();
    let mut per_kernel = vec![0usize; kernels.len()];
    let mut both = None;
    for seed in 0..120u64 {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let patch = ir.mutate(&mut rng, 2).unwrap();
        let explained = ir.explain(&patch).unwrap();
        let touched: Vec<usize> = explained
            .iter()
            .map(|e| {
                kernels
                    .iter()
                    .position(|k| Some(k) == e.kernel.as_ref())
                    .unwrap()
            })
            .collect();
        for &k in &touched {
            per_kernel[k] += 1;
        }
        if touched[0] != touched[1] && both.is_none() {
            both = Some(patch);
        }
    }
    assert!(per_kernel.iter().all(|&n| n > 0), "{per_kernel:?}");
    // Weighted by instruction count: pyr_final (the smallest) gets the fewest.
    let counts: Vec<usize> = (0..kernels.len())
        .map(|k| {
            ir.listing()
                .unwrap()
                .iter()
                .filter(|(id, _)| ir.kernel_of(*id) == Some(k))
                .count()
        })
        .collect();
    let smallest = (0..counts.len()).min_by_key(|&k| counts[k]).unwrap();
    let largest = (0..counts.len()).max_by_key(|&k| counts[k]).unwrap();
    assert!(
        per_kernel[smallest] < per_kernel[largest],
        "{per_kernel:?} for {counts:?}"
    );

    // A patch spanning two kernels replays to the same IR and PTX, in a
    // fresh load too, and its PTX holds every kernel.
    let patch = both.expect("some patch edits two kernels");
    let a = ir.compile(&patch, &options).unwrap();
    let (again, _) = pyramid();
    let b = again.compile(&patch, &options).unwrap();
    assert_eq!(a, b);
    for k in &kernels {
        assert!(
            a.ptx.contains(&format!(".entry {k}(")),
            "{k} missing from the PTX"
        );
    }
    let json = gevo_ir::Patch::from_json(&patch.to_json()).unwrap();
    assert_eq!(json, patch);

    // In source terms (the report, `gevo-client explain`) each edit names
    // the kernel it edits, as the replay finds it.
    let told = ir.describe(&patch).unwrap();
    let replayed = ir.explain(&patch).unwrap();
    assert_eq!(told.len(), replayed.len());
    for (story, step) in told.iter().zip(&replayed) {
        assert!(story.kernel.is_some(), "{story:?}");
        assert_eq!(story.kernel, step.kernel);
    }
    assert_ne!(told[0].kernel, told[1].kernel);
    let shown = gevo_client::explain::render_edits(
        &gevod::report::edits::source_edits(
            &ir,
            &patch,
            &mut gevo_ir::SourceFiles::near(gevo_model::access::Reader::Caller, &[]),
        )
        .unwrap(),
        true,
        "",
    );
    for story in &told {
        let kernel = story.kernel.as_deref().unwrap();
        assert!(shown.contains(&format!(". (in {kernel}) ")), "{shown}");
    }
    // A single kernel's edits name none.
    let single = common::load("stencil");
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let patch = single.mutate(&mut rng, 2).unwrap();
    assert!(single
        .describe(&patch)
        .unwrap()
        .iter()
        .all(|s| s.kernel.is_none()));
}
