//! The simulator on fixtures with hand-built arguments and Rust references.

mod common;

use gevod::sim::{self, pointer, GlobalMemory, LaunchDims, Limits};

fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn bytes_of(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

const LIMITS: Limits = Limits {
    block_step_budget: 100_000_000,
};

#[test]
fn vecadd_and_reduce_match_references() {
    let n = 1000usize;
    let a: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
    let b: Vec<f32> = (0..n).map(|i| 3.0 - i as f32).collect();
    let ir = common::load("vecadd");
    let program = ir.lower(&ir.empty_patch()).unwrap();
    let mem = GlobalMemory::new(&[&bytes_of(&a), &bytes_of(&b), &vec![0u8; 4 * n]]);
    let args = [
        pointer::make(pointer::GLOBAL, 0, 0),
        pointer::make(pointer::GLOBAL, 1, 0),
        pointer::make(pointer::GLOBAL, 2, 0),
        n as u64,
    ];
    let dims = LaunchDims {
        grid: [4, 1, 1],
        block: [256, 1, 1],
        dynamic_shared_bytes: 0,
    };
    let stats = sim::run(&program, &dims, &args, &mem, LIMITS, 2).unwrap();
    let c = f32s(&mem.contents(2));
    assert!(c
        .iter()
        .zip(a.iter().zip(&b))
        .all(|(c, (a, b))| *c == a + b));
    assert!(stats.steps > 1000, "{stats:?}");

    let ir = common::load("reduce");
    let program = ir.lower(&ir.empty_patch()).unwrap();
    let mem = GlobalMemory::new(&[&bytes_of(&a), &[0u8; 4 * 4]]);
    let args = [
        pointer::make(pointer::GLOBAL, 0, 0),
        pointer::make(pointer::GLOBAL, 1, 0),
        n as u64,
    ];
    sim::run(&program, &dims, &args, &mem, LIMITS, 2).unwrap();
    let out = f32s(&mem.contents(1));
    for (blk, &sum) in out.iter().enumerate() {
        let mut s: Vec<f32> = (0..256)
            .map(|t| a.get(blk * 256 + t).copied().unwrap_or(0.0))
            .collect();
        let mut step = 1;
        while step < 256 {
            for t in (0..256).step_by(2 * step) {
                s[t] += s[t + step];
            }
            step *= 2;
        }
        assert_eq!(sum, s[0], "block {blk}");
    }
}

fn patched(name: &str, edits_json: &str) -> (gevod::ir::KernelIr, gevod::ir::Patch) {
    let ir = common::load(name);
    let mut patch = ir.empty_patch();
    patch.edits = serde_json::from_str(edits_json).unwrap();
    (ir, patch)
}

fn run_fixture(
    ir: &gevod::ir::KernelIr,
    patch: &gevod::ir::Patch,
    buffers: &[Vec<u8>],
    scalars: &[u64],
    dims: LaunchDims,
    budget: u64,
) -> Result<sim::RunStats, sim::Verdict> {
    let program = ir.lower(patch).unwrap();
    let views: Vec<&[u8]> = buffers.iter().map(Vec::as_slice).collect();
    let mem = GlobalMemory::new(&views);
    let mut args: Vec<u64> = (0..buffers.len())
        .map(|i| pointer::make(pointer::GLOBAL, i as u64, 0))
        .collect();
    args.extend_from_slice(scalars);
    sim::run(
        &program,
        &dims,
        &args,
        &mem,
        Limits {
            block_step_budget: budget,
        },
        2,
    )
}

/// Planted faults get the right verdict, naming the instruction and thread.
#[test]
fn planted_faults_are_caught() {
    let dims = LaunchDims {
        grid: [4, 1, 1],
        block: [256, 1, 1],
        dynamic_shared_bytes: 0,
    };
    let input = bytes_of(&(0..1000).map(|i| i as f32).collect::<Vec<_>>());

    // A reduction with its loop barrier deleted races on shared memory.
    let (ir, patch) = patched("reduce", r#"[{"op":"delete","target":34}]"#);
    let v = run_fixture(
        &ir,
        &patch,
        &[input.clone(), vec![0; 16]],
        &[1000],
        dims,
        1 << 30,
    )
    .unwrap_err();
    assert_eq!(v.kind(), "race", "{v}");

    // vecadd without its bounds check runs past the end of its buffers.
    let (ir, patch) = patched(
        "vecadd",
        r#"[{"op":"operand_replace","user":6,"operand":0,"value":{"const":"one"}}]"#,
    );
    let v = run_fixture(
        &ir,
        &patch,
        &[input.clone(), input.clone(), vec![0; 4000]],
        &[1000],
        dims,
        1 << 30,
    )
    .unwrap_err();
    assert_eq!(v.kind(), "out_of_bounds", "{v}");
    assert!(
        matches!(v.fault, sim::Fault::OutOfBounds { offset: 4000, .. }),
        "{v}"
    );
    assert_eq!(
        (v.instruction, v.cta, v.thread),
        (11, [3, 0, 0], [232, 0, 0]),
        "{v}"
    );

    // poly_loops whose inner exit compare never holds runs until the budget.
    let (ir, original) = patched("loops", "[]");
    let stats = run_fixture(
        &ir,
        &original,
        &[input.clone(), vec![0; 4000]],
        &[1000, 5],
        dims,
        1 << 30,
    )
    .unwrap();
    let budget = 10 * stats.max_block_steps;
    let (ir, patch) = patched(
        "loops",
        r#"[{"op":"operand_replace","user":27,"operand":0,"value":{"const":"zero"}}]"#,
    );
    let v = run_fixture(
        &ir,
        &patch,
        &[input.clone(), vec![0; 4000]],
        &[1000, 5],
        dims,
        budget,
    )
    .unwrap_err();
    assert_eq!(v.fault, sim::Fault::StepBudget { budget }, "{v}");

    // An intrinsic the simulator does not know is named.
    let text = r#"target triple = "nvptx64-nvidia-cuda"
define void @k(ptr %out) {
  %c = call i32 @llvm.nvvm.read.ptx.sreg.clock()
  store i32 %c, ptr %out, align 4
  ret void
}
declare i32 @llvm.nvvm.read.ptx.sreg.clock()
!nvvm.annotations = !{!0}
!0 = !{ptr @k, !"kernel", i32 1}
"#;
    let ir = gevod::ir::KernelIr::parse("clock.ll", text.as_bytes(), None).unwrap();
    let one = LaunchDims {
        grid: [1, 1, 1],
        block: [1, 1, 1],
        dynamic_shared_bytes: 0,
    };
    let v = run_fixture(&ir, &ir.empty_patch(), &[vec![0; 4]], &[], one, 1000).unwrap_err();
    assert_eq!(
        v.fault,
        sim::Fault::Unsupported {
            what: "call to @llvm.nvvm.read.ptx.sreg.clock".into()
        },
        "{v}"
    );
}
