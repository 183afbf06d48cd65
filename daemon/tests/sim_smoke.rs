//! The simulator on fixtures with hand-built arguments and Rust references.

use crate::common;

use common::sim::{bytes_of, f32s, run_on, run_program, run_text, u32s, LIMITS};
use gevo_model::sim::{self, pointer, GlobalMemory, LaunchDims, Limits};

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

fn patched(name: &str, edits_json: &str) -> (gevo_ir::KernelIr, gevo_ir::Patch) {
    let ir = common::load(name);
    let mut patch = ir.empty_patch();
    patch.edits = serde_json::from_str(edits_json).unwrap();
    (ir, patch)
}

fn run_fixture(
    ir: &gevo_ir::KernelIr,
    patch: &gevo_ir::Patch,
    buffers: &[Vec<u8>],
    scalars: &[u64],
    dims: LaunchDims,
    budget: u64,
) -> Result<sim::RunStats, sim::Verdict> {
    let limits = Limits {
        block_step_budget: budget,
    };
    run_program(ir, patch, buffers, scalars, dims, limits).map(|(stats, _)| stats)
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
    let ir = gevo_ir::KernelIr::parse("clock.ll", text.as_bytes(), None).unwrap();
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

/// Warp intrinsics run in lockstep groups of 32: a shuffle-down tree sums
/// each warp into lane 0, and a ballot sees every odd lane.
#[test]
fn warp_shuffles_and_votes() {
    let mut body = String::from("  %v0 = add i32 %tid, 1\n");
    for (k, delta) in [16, 8, 4, 2, 1].iter().enumerate() {
        body += &format!("  %s{k} = call i32 @llvm.nvvm.shfl.sync.down.i32(i32 -1, i32 %v{k}, i32 {delta}, i32 31)\n");
        body += &format!("  %v{} = add i32 %v{k}, %s{k}\n", k + 1);
    }
    let text = format!(
        r#"target triple = "nvptx64-nvidia-cuda"
define void @warp(ptr %out, ptr %ballots) {{
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
{body}  %odd = and i32 %tid, 1
  %p = icmp eq i32 %odd, 1
  %b = call i32 @llvm.nvvm.vote.ballot.sync(i32 -1, i1 %p)
  %i = zext i32 %tid to i64
  %o = getelementptr i32, ptr %out, i64 %i
  store i32 %v5, ptr %o, align 4
  %ob = getelementptr i32, ptr %ballots, i64 %i
  store i32 %b, ptr %ob, align 4
  ret void
}}
declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i32 @llvm.nvvm.shfl.sync.down.i32(i32, i32, i32, i32)
declare i32 @llvm.nvvm.vote.ballot.sync(i32, i1)
!nvvm.annotations = !{{!0}}
!0 = !{{ptr @warp, !"kernel", i32 1}}
"#
    );
    let dims = LaunchDims {
        grid: [1, 1, 1],
        block: [64, 1, 1],
        dynamic_shared_bytes: 0,
    };
    let out = run_text(&text, dims, &[vec![0; 256], vec![0; 256]]).unwrap();
    let (sums, ballots) = (u32s(&out[0]), u32s(&out[1]));
    assert_eq!(sums[0], (1..=32).sum::<u32>());
    assert_eq!(sums[32], (33..=64).sum::<u32>());
    assert!(ballots.iter().all(|&b| b == 0xAAAA_AAAA), "{ballots:x?}");
}

/// A compare-and-swap loop (atomic max) across blocks: `extractvalue` of the
/// cmpxchg pair gives its success flag.
#[test]
fn compare_and_swap_loop() {
    let text = r#"target triple = "nvptx64-nvidia-cuda"
define void @cas(ptr %out) {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %cta = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %shifted = mul i32 %cta, 100
  %mine = add i32 %shifted, %tid
  br label %loop
loop:
  %old = load i32, ptr %out, align 4
  %m = call i32 @llvm.smax.i32(i32 %old, i32 %mine)
  %pair = cmpxchg ptr %out, i32 %old, i32 %m seq_cst seq_cst
  %ok = extractvalue { i32, i1 } %pair, 1
  br i1 %ok, label %done, label %loop
done:
  ret void
}
declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
declare i32 @llvm.smax.i32(i32, i32)
!nvvm.annotations = !{!0}
!0 = !{ptr @cas, !"kernel", i32 1}
"#;
    let dims = LaunchDims {
        grid: [4, 1, 1],
        block: [32, 1, 1],
        dynamic_shared_bytes: 0,
    };
    let out = run_text(text, dims, &[vec![0; 4]]).unwrap();
    assert_eq!(u32s(&out[0]), vec![331]);
}

/// vecadd indexed by threadIdx.x alone: every block writes out[0..256].
/// The verdict is the one of running blocks in order, whatever the worker
/// count: block 1's first store hits what block 0 wrote.
#[test]
fn blocks_writing_the_same_global_bytes_race() {
    let (ir, patch) = patched(
        "vecadd",
        r#"[{"op":"operand_replace","user":7,"operand":0,"value":{"inst":3}}]"#,
    );
    let program = ir.lower(&patch).unwrap();
    let input = bytes_of(&(0..1000).map(|i| i as f32).collect::<Vec<_>>());
    let buffers = [input.clone(), input, vec![0; 4000]];
    let dims = LaunchDims {
        grid: [4, 1, 1],
        block: [256, 1, 1],
        dynamic_shared_bytes: 0,
    };
    let expected = sim::Verdict {
        fault: sim::Fault::GlobalRace {
            buffer: 2,
            offset: 0,
            bytes: 4,
            other_block: [0, 0, 0],
        },
        instruction: 14,
        block: "bb1".into(),
        cta: [1, 0, 0],
        thread: [0, 0, 0],
        context: Box::default(),
    };
    for workers in [1, 2, 2, 2, 2, 2, 2, 2, 2, 3] {
        let v = run_on(&program, &buffers, &[1000], dims, LIMITS, workers)
            .0
            .unwrap_err();
        assert_eq!(v, expected, "{workers} workers: {v}");
        assert_eq!(v.kind(), "global_race");
    }

    // The original writes disjoint words from every block, launch after
    // launch on the same memory.
    let program = ir.lower(&ir.empty_patch()).unwrap();
    let (r, mem) = run_on(&program, &buffers, &[1000], dims, LIMITS, 2);
    r.unwrap();
    let args = [
        pointer::make(pointer::GLOBAL, 0, 0),
        pointer::make(pointer::GLOBAL, 1, 0),
        pointer::make(pointer::GLOBAL, 2, 0),
        1000,
    ];
    sim::run(&program, &dims, &args, &mem, LIMITS, 2).unwrap();
}

/// Plain byte stores: blocks of 3 threads writing neighbouring bytes of one
/// word do not conflict; overlapping ones do. Atomics never conflict.
#[test]
fn global_conflicts_are_per_byte_and_skip_atomics() {
    let kernel = |index: &str| {
        format!(
            r#"target triple = "nvptx64-nvidia-cuda"
define void @k(ptr %out, ptr %count) {{
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %cta = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %base = mul i32 %cta, {index}
  %i = add i32 %base, %tid
  %p = getelementptr i8, ptr %out, i32 %i
  %v = trunc i32 %i to i8
  store i8 %v, ptr %p, align 1
  %old = atomicrmw add ptr %count, i32 1 monotonic
  ret void
}}
declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
!nvvm.annotations = !{{!0}}
!0 = !{{ptr @k, !"kernel", i32 1}}
"#
        )
    };
    let dims = LaunchDims {
        grid: [5, 1, 1],
        block: [3, 1, 1],
        dynamic_shared_bytes: 0,
    };
    let ir = |index| gevo_ir::KernelIr::parse("k.ll", kernel(index).as_bytes(), None).unwrap();
    let buffers = [vec![0xee; 16], vec![0; 4]];
    for workers in [1, 2] {
        let program = ir("3").lower(&ir("3").empty_patch()).unwrap();
        let (r, mem) = run_on(&program, &buffers, &[], dims, LIMITS, workers);
        r.unwrap();
        let mut expected: Vec<u8> = (0..15).collect();
        expected.push(0xee);
        assert_eq!(mem.contents(0), expected);
        assert_eq!(u32s(&mem.contents(1)), vec![15]);

        // Blocks two bytes apart: block 1's thread 0 rewrites block 0's byte 2.
        let program = ir("2").lower(&ir("2").empty_patch()).unwrap();
        let v = run_on(&program, &buffers, &[], dims, LIMITS, workers)
            .0
            .unwrap_err();
        assert_eq!(
            (v.fault, v.cta, v.thread),
            (
                sim::Fault::GlobalRace {
                    buffer: 0,
                    offset: 2,
                    bytes: 1,
                    other_block: [0, 0, 0]
                },
                [1, 0, 0],
                [0, 0, 0]
            ),
            "{workers} workers"
        );
    }
}
