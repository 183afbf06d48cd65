//! The simulator on kernels as clang emits them for vector types
//! (`ext_vector_type`: float4, int2, uchar4), vector operations of every
//! kind, vector accesses to shared memory, and `*.with.overflow` pairs;
//! hand-written IR text with Rust references.

use crate::common;

use common::sim::{bytes_of, f32s, run_text, run_text_with, u32s};
use gevo_model::sim::{self, LaunchDims};
/// The id of the one instruction of `text`'s kernel whose IR contains `needle`.
fn id_of(text: &str, needle: &str) -> u32 {
    let ir = gevo_ir::KernelIr::parse("test.ll", text.as_bytes(), None).unwrap();
    let hits: Vec<u32> = ir
        .listing()
        .unwrap()
        .into_iter()
        .filter(|(_, t)| t.contains(needle))
        .map(|(id, _)| id.0)
        .collect();
    assert_eq!(hits.len(), 1, "{needle}: {hits:?}");
    hits[0]
}

fn one_block(threads: u32) -> LaunchDims {
    LaunchDims {
        grid: [1, 1, 1],
        block: [threads, 1, 1],
        dynamic_shared_bytes: 0,
    }
}

fn i32_bytes(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A kernel in the form clang -O3 emits for `ext_vector_type` code: float4
/// loads and stores, a splat through insertelement + shufflevector.
#[test]
fn clang_float4_saxpy() {
    let text = r#"target triple = "nvptx64-nvidia-cuda"
define void @saxpy4(ptr %0, ptr %1, float %2, i32 %3) {
  %5 = tail call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %6 = tail call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %7 = mul i32 %5, %6
  %8 = tail call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %9 = add i32 %7, %8
  %10 = icmp slt i32 %9, %3
  br i1 %10, label %11, label %21
11:
  %12 = sext i32 %9 to i64
  %13 = getelementptr inbounds <4 x float>, ptr %1, i64 %12
  %14 = load <4 x float>, ptr %13, align 16
  %15 = insertelement <4 x float> poison, float %2, i64 0
  %16 = shufflevector <4 x float> %15, <4 x float> poison, <4 x i32> zeroinitializer
  %17 = getelementptr inbounds <4 x float>, ptr %0, i64 %12
  %18 = load <4 x float>, ptr %17, align 16
  %19 = fmul contract <4 x float> %16, %18
  %20 = fadd contract <4 x float> %14, %19
  store <4 x float> %20, ptr %13, align 16
  br label %21
21:
  ret void
}
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
!nvvm.annotations = !{!0}
!0 = !{ptr @saxpy4, !"kernel", i32 1}
"#;
    let n = 100usize; // float4 elements
    let a: Vec<f32> = (0..4 * n).map(|i| i as f32 * 0.25).collect();
    let b: Vec<f32> = (0..4 * n).map(|i| 1000.0 - i as f32).collect();
    let dims = LaunchDims {
        grid: [2, 1, 1],
        block: [64, 1, 1],
        dynamic_shared_bytes: 0,
    };
    let scalars = [u64::from(1.5f32.to_bits()), n as u64];
    let out = run_text_with(text, dims, &[bytes_of(&a), bytes_of(&b)], &scalars).unwrap();
    let expected: Vec<f32> = a.iter().zip(&b).map(|(x, y)| y + 1.5 * x).collect();
    assert_eq!(f32s(&out[1]), expected);

    // One bounds check for the whole 16-byte access: a buffer one float
    // short fails at the last element's load, as one verdict.
    let short = bytes_of(&a[..4 * n - 1]);
    let v = run_text_with(text, dims, &[short, bytes_of(&b)], &scalars).unwrap_err();
    assert_eq!(
        v.fault,
        sim::Fault::OutOfBounds {
            space: "global",
            buffer: 0,
            offset: 16 * (n as u64 - 1),
            bytes: 16
        },
        "{v}"
    );
    let load = id_of(text, "%18 = load <4 x float>");
    assert_eq!(
        (v.instruction, v.cta, v.thread),
        (load, [1, 0, 0], [35, 0, 0]),
        "{v}"
    );
}

/// int2 and uchar4 kernels as clang emits them: a swapping shuffle, a
/// vector store to a buffer of another type, a vector shift by a constant
/// vector and an insert at a variable index.
#[test]
fn clang_int2_and_uchar4() {
    let text = r#"target triple = "nvptx64-nvidia-cuda"
define void @swap2(ptr %0, ptr %1, i32 %2) {
  %8 = tail call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %9 = icmp slt i32 %8, %2
  br i1 %9, label %10, label %16
10:
  %11 = sext i32 %8 to i64
  %12 = getelementptr inbounds i64, ptr %1, i64 %11
  %13 = getelementptr inbounds <2 x i32>, ptr %0, i64 %11
  %14 = load <2 x i32>, ptr %13, align 8
  %15 = shufflevector <2 x i32> %14, <2 x i32> poison, <2 x i32> <i32 1, i32 0>
  store <2 x i32> %15, ptr %13, align 8
  store <2 x i32> %14, ptr %12, align 8
  br label %16
16:
  ret void
}
declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
!nvvm.annotations = !{!0}
!0 = !{ptr @swap2, !"kernel", i32 1}
"#;
    let pairs: Vec<i32> = (0..64).map(|i| i * 3 - 50).collect();
    let out = run_text_with(
        text,
        one_block(32),
        &[i32_bytes(&pairs), vec![0; 256]],
        &[32],
    )
    .unwrap();
    let swapped: Vec<i32> = pairs.chunks(2).flat_map(|p| [p[1], p[0]]).collect();
    assert_eq!(out[0], i32_bytes(&swapped));
    assert_eq!(out[1], i32_bytes(&pairs));

    let text = r#"target triple = "nvptx64-nvidia-cuda"
define void @bright(ptr %0, i32 %1, i32 %2) {
  %8 = tail call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %9 = icmp slt i32 %8, %1
  br i1 %9, label %10, label %17
10:
  %11 = and i32 %2, 3
  %12 = sext i32 %8 to i64
  %13 = getelementptr inbounds <4 x i8>, ptr %0, i64 %12
  %14 = load <4 x i8>, ptr %13, align 4
  %15 = lshr <4 x i8> %14, <i8 1, i8 1, i8 1, i8 1>
  %16 = insertelement <4 x i8> %15, i8 7, i32 %11
  store <4 x i8> %16, ptr %13, align 4
  br label %17
17:
  ret void
}
declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
!nvvm.annotations = !{!0}
!0 = !{ptr @bright, !"kernel", i32 1}
"#;
    let pixels: Vec<u8> = (0..128u32).map(|i| (i * 37 % 251) as u8).collect();
    let out = run_text_with(text, one_block(32), std::slice::from_ref(&pixels), &[32, 6]).unwrap();
    let expected: Vec<u8> = pixels
        .iter()
        .enumerate()
        .map(|(i, p)| if i % 4 == 2 { 7 } else { p / 2 })
        .collect();
    assert_eq!(out[0], expected);
}

/// Elementwise arithmetic, compares and selects, shuffles with undefined
/// entries, constant and variable element indices (out of range: 0), casts,
/// reductions, bitcasts between vectors and scalars of other shapes, and a
/// vector phi.
#[test]
fn vector_operations() {
    let text = r#"target triple = "nvptx64-nvidia-cuda"
define void @v(ptr %in, ptr %out) {
entry:
  %a = load <4 x i32>, ptr %in, align 16
  %bp = getelementptr <4 x i32>, ptr %in, i64 1
  %b = load <4 x i32>, ptr %bp, align 16
  %sum = add <4 x i32> %a, %b
  %gt = icmp sgt <4 x i32> %a, <i32 2, i32 2, i32 2, i32 2>
  %sel = select <4 x i1> %gt, <4 x i32> %a, <4 x i32> zeroinitializer
  %sh = shufflevector <4 x i32> %sum, <4 x i32> %b, <4 x i32> <i32 7, i32 0, i32 poison, i32 5>
  %idx = extractelement <4 x i32> %a, i64 2
  %e = extractelement <4 x i32> %b, i32 %idx
  %bad = add i32 %idx, 5
  %eoob = extractelement <4 x i32> %b, i32 %bad
  %ins = insertelement <4 x i32> %a, i32 99, i32 %idx
  %f = sitofp <4 x i32> %a to <4 x float>
  %half = fmul <4 x float> %f, <float 0.5, float 0.5, float 0.5, float 0.5>
  %fs = call float @llvm.vector.reduce.fadd.v4f32(float 100.0, <4 x float> %half)
  %mx = call i32 @llvm.vector.reduce.smax.v4i32(<4 x i32> %a)
  %mn = call i32 @llvm.vector.reduce.umin.v4i32(<4 x i32> %a)
  %bytes = bitcast <4 x i32> %a to <16 x i8>
  %b4 = extractelement <16 x i8> %bytes, i64 4
  %b15 = extractelement <16 x i8> %bytes, i64 15
  %pair = shufflevector <4 x i32> %a, <4 x i32> poison, <2 x i32> <i32 3, i32 1>
  %wide = bitcast <2 x i32> %pair to i64
  %back = bitcast i64 %wide to <2 x float>
  %dbl = bitcast <4 x i32> %b to <2 x double>
  %d1 = extractelement <2 x double> %dbl, i64 1
  %d1i = bitcast double %d1 to i64
  %tr = trunc <4 x i32> %b to <4 x i8>
  %tri = bitcast <4 x i8> %tr to i32
  %undef = insertelement <2 x i32> undef, i32 5, i64 1
  %uw = bitcast <2 x i32> %undef to i64
  %fr = freeze <4 x float> %half
  %neg = fneg <4 x float> %fr
  %lt = fcmp olt <4 x float> %neg, <float -1.0, float -1.0, float -1.0, float -1.0>
  %any = call i1 @llvm.vector.reduce.or.v4i1(<4 x i1> %lt)
  %pick = select i1 %any, <4 x float> %neg, <4 x float> %half
  br label %loop
loop:
  %i = phi i32 [ 0, %entry ], [ %i1, %loop ]
  %acc = phi <4 x i32> [ zeroinitializer, %entry ], [ %acc1, %loop ]
  %acc1 = add <4 x i32> %acc, %a
  %i1 = add i32 %i, 1
  %done = icmp eq i32 %i1, 3
  br i1 %done, label %exit, label %loop
exit:
  store <4 x i32> %sum, ptr %out, align 4
  %o4 = getelementptr i32, ptr %out, i64 4
  store <4 x i32> %sel, ptr %o4, align 4
  %o8 = getelementptr i32, ptr %out, i64 8
  store <4 x i32> %sh, ptr %o8, align 4
  %o12 = getelementptr i32, ptr %out, i64 12
  store <4 x i32> %ins, ptr %o12, align 4
  %o16 = getelementptr i32, ptr %out, i64 16
  store i32 %e, ptr %o16, align 4
  %o17 = getelementptr i32, ptr %out, i64 17
  store i32 %eoob, ptr %o17, align 4
  %o18 = getelementptr i32, ptr %out, i64 18
  store float %fs, ptr %o18, align 4
  %o19 = getelementptr i32, ptr %out, i64 19
  store i32 %mx, ptr %o19, align 4
  %o20 = getelementptr i32, ptr %out, i64 20
  store i32 %mn, ptr %o20, align 4
  %b4w = zext i8 %b4 to i32
  %o21 = getelementptr i32, ptr %out, i64 21
  store i32 %b4w, ptr %o21, align 4
  %b15w = zext i8 %b15 to i32
  %o22 = getelementptr i32, ptr %out, i64 22
  store i32 %b15w, ptr %o22, align 4
  %o23 = getelementptr i32, ptr %out, i64 23
  store i64 %wide, ptr %o23, align 4
  %o25 = getelementptr i32, ptr %out, i64 25
  store <2 x float> %back, ptr %o25, align 4
  %o27 = getelementptr i32, ptr %out, i64 27
  store i64 %d1i, ptr %o27, align 4
  %o29 = getelementptr i32, ptr %out, i64 29
  store i32 %tri, ptr %o29, align 4
  %o30 = getelementptr i32, ptr %out, i64 30
  store <4 x i32> %acc1, ptr %o30, align 4
  %o34 = getelementptr i32, ptr %out, i64 34
  store i64 %uw, ptr %o34, align 4
  %o36 = getelementptr i32, ptr %out, i64 36
  store <2 x i32> <i32 -1, i32 42>, ptr %o36, align 4
  %o38 = getelementptr i32, ptr %out, i64 38
  store <4 x float> %pick, ptr %o38, align 4
  ret void
}
declare i1 @llvm.vector.reduce.or.v4i1(<4 x i1>)
declare float @llvm.vector.reduce.fadd.v4f32(float, <4 x float>)
declare i32 @llvm.vector.reduce.smax.v4i32(<4 x i32>)
declare i32 @llvm.vector.reduce.umin.v4i32(<4 x i32>)
!nvvm.annotations = !{!0}
!0 = !{ptr @v, !"kernel", i32 1}
"#;
    let a = [1, 7, 3, -5];
    let b = [10, 20, 30, 40];
    let input = i32_bytes(&[a, b].concat());
    let out = run_text(text, one_block(1), &[input, vec![0xAB; 4 * 42]]).unwrap();
    let got = u32s(&out[1]);
    let u = |v: i32| v as u32;
    assert_eq!(got[0..4], [11, 27, 33, 35].map(u));
    assert_eq!(got[4..8], [0, 7, 3, 0].map(u));
    // The undefined shuffle entry reads as 0.
    assert_eq!(got[8..12], [40, 11, 0, 20].map(u));
    assert_eq!(got[12..16], [1, 7, 3, 99].map(u));
    assert_eq!((got[16], got[17]), (40, 0));
    assert_eq!(f32::from_bits(got[18]), 100.0 + 0.5 + 3.5 + 1.5 - 2.5);
    assert_eq!((got[19], got[20]), (7, 1));
    assert_eq!((got[21], got[22]), (7, 0xff));
    assert_eq!(got[23..25], [u(-5), 7]);
    assert_eq!(got[25..27], [u(-5), 7]);
    assert_eq!(got[27..29], [30, 40]);
    assert_eq!(got[29], 0x281e_140a);
    assert_eq!(got[30..34], [3, 21, 9, -15].map(u));
    assert_eq!(got[34..36], [0, 5]);
    assert_eq!(got[36..38], [u(-1), 42]);
    let picked: Vec<f32> = got[38..42].iter().map(|&b| f32::from_bits(b)).collect();
    assert_eq!(picked, [-0.5, -3.5, -1.5, 2.5]);
}

/// Vector accesses to shared memory go through the race and
/// uninitialised-read shadow byte by byte.
#[test]
fn vector_shared_accesses_are_checked() {
    let kernel = |body: &str| {
        format!(
            r#"target triple = "nvptx64-nvidia-cuda"
@s = internal addrspace(3) global [8 x i32] undef, align 16
define void @k(ptr %out) {{
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %sh = addrspacecast ptr addrspace(3) @s to ptr
  %first = icmp eq i32 %tid, 0
  br i1 %first, label %zero, label %other
zero:
  store <2 x i32> <i32 1, i32 2>, ptr %sh, align 16
  br label %other
other:
{body}
  ret void
}}
declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare void @llvm.nvvm.barrier0()
!nvvm.annotations = !{{!0}}
!0 = !{{ptr @k, !"kernel", i32 1}}
"#
        )
    };
    // Bytes 8..16 were never written.
    let read = kernel(
        "  call void @llvm.nvvm.barrier0()
  %v = load <4 x i32>, ptr %sh, align 16
  store <4 x i32> %v, ptr %out, align 16",
    );
    let v = run_text(&read, one_block(2), &[vec![0; 16]]).unwrap_err();
    assert_eq!(
        v.fault,
        sim::Fault::UninitializedShared { offset: 8 },
        "{v}"
    );
    assert_eq!(v.instruction, id_of(&read, "%v = load"));

    // Thread 1 writes bytes 4..8 with no barrier after thread 0's vector store.
    let race = kernel(
        "  %p = getelementptr i32, ptr %sh, i64 1
  store i32 9, ptr %p, align 4",
    );
    let v = run_text(&race, one_block(2), &[vec![0; 16]]).unwrap_err();
    assert!(
        matches!(
            v.fault,
            sim::Fault::SharedRace {
                offset: 4,
                other_thread: Some([0, 0, 0]),
                write: true
            }
        ),
        "{v}"
    );
}

/// `*.with.overflow` pairs through extractvalue and insertvalue, and a
/// struct phi.
#[test]
fn overflow_pairs() {
    let text = r#"target triple = "nvptx64-nvidia-cuda"
define void @k(ptr %in, ptr %out) {
entry:
  %x = load i32, ptr %in, align 4
  %p = getelementptr i32, ptr %in, i64 1
  %y = load i32, ptr %p, align 4
  %sa = call { i32, i1 } @llvm.sadd.with.overflow.i32(i32 %x, i32 %y)
  %ua = call { i32, i1 } @llvm.uadd.with.overflow.i32(i32 %x, i32 %y)
  %ss = call { i32, i1 } @llvm.ssub.with.overflow.i32(i32 %y, i32 %x)
  %us = call { i32, i1 } @llvm.usub.with.overflow.i32(i32 %y, i32 %x)
  %sm = call { i32, i1 } @llvm.smul.with.overflow.i32(i32 %x, i32 %y)
  %um = call { i32, i1 } @llvm.umul.with.overflow.i32(i32 %x, i32 %x)
  %cond = icmp eq i32 %x, 0
  br i1 %cond, label %join, label %set
set:
  %ins = insertvalue { i32, i1 } %sa, i32 77, 0
  br label %join
join:
  %pair = phi { i32, i1 } [ %sa, %entry ], [ %ins, %set ]
  %r0 = extractvalue { i32, i1 } %pair, 0
  store i32 %r0, ptr %out, align 4
  %f0 = extractvalue { i32, i1 } %sa, 1
  %f1 = extractvalue { i32, i1 } %ua, 1
  %f2 = extractvalue { i32, i1 } %ss, 1
  %f3 = extractvalue { i32, i1 } %us, 1
  %f4 = extractvalue { i32, i1 } %sm, 1
  %f5 = extractvalue { i32, i1 } %um, 1
  %v1 = extractvalue { i32, i1 } %ua, 0
  %v2 = extractvalue { i32, i1 } %ss, 0
  %v5 = extractvalue { i32, i1 } %um, 0
  %o1 = getelementptr i32, ptr %out, i64 1
  store i32 %v1, ptr %o1, align 4
  %o2 = getelementptr i32, ptr %out, i64 2
  store i32 %v2, ptr %o2, align 4
  %o3 = getelementptr i32, ptr %out, i64 3
  store i32 %v5, ptr %o3, align 4
  %w0 = zext i1 %f0 to i32
  %w1 = zext i1 %f1 to i32
  %w2 = zext i1 %f2 to i32
  %w3 = zext i1 %f3 to i32
  %w4 = zext i1 %f4 to i32
  %w5 = zext i1 %f5 to i32
  %s1 = shl i32 %w1, 1
  %s2 = shl i32 %w2, 2
  %s3 = shl i32 %w3, 3
  %s4 = shl i32 %w4, 4
  %s5 = shl i32 %w5, 5
  %m1 = or i32 %w0, %s1
  %m2 = or i32 %m1, %s2
  %m3 = or i32 %m2, %s3
  %m4 = or i32 %m3, %s4
  %m5 = or i32 %m4, %s5
  %o4 = getelementptr i32, ptr %out, i64 4
  store i32 %m5, ptr %o4, align 4
  ret void
}
declare { i32, i1 } @llvm.sadd.with.overflow.i32(i32, i32)
declare { i32, i1 } @llvm.uadd.with.overflow.i32(i32, i32)
declare { i32, i1 } @llvm.ssub.with.overflow.i32(i32, i32)
declare { i32, i1 } @llvm.usub.with.overflow.i32(i32, i32)
declare { i32, i1 } @llvm.smul.with.overflow.i32(i32, i32)
declare { i32, i1 } @llvm.umul.with.overflow.i32(i32, i32)
!nvvm.annotations = !{!0}
!0 = !{ptr @k, !"kernel", i32 1}
"#;
    let flags = |x: i32, y: i32| {
        let bits = [
            x.checked_add(y).is_none(),
            (x as u32).checked_add(y as u32).is_none(),
            y.checked_sub(x).is_none(),
            (y as u32).checked_sub(x as u32).is_none(),
            x.checked_mul(y).is_none(),
            (x as u32).checked_mul(x as u32).is_none(),
        ];
        bits.iter()
            .enumerate()
            .fold(0u32, |m, (i, &b)| m | (u32::from(b) << i))
    };
    for (x, y) in [
        (0, 5),
        (i32::MAX, 1),
        (-7, i32::MIN),
        (70_000, 70_000),
        (-3, 2),
        (1 << 16, -(1 << 15)),
    ] {
        let out = run_text(text, one_block(1), &[i32_bytes(&[x, y]), vec![0; 20]]).unwrap();
        let got = u32s(&out[1]);
        let r0 = if x == 0 { x.wrapping_add(y) } else { 77 };
        assert_eq!(
            got,
            vec![
                r0 as u32,
                (x as u32).wrapping_add(y as u32),
                y.wrapping_sub(x) as u32,
                (x as u32).wrapping_mul(x as u32),
                flags(x, y)
            ],
            "{x} {y}"
        );
    }
}
