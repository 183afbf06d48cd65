//! Guarded check builds (`ir::guard`, docs/evolve.md "Guarded check
//! builds"): in every fixture, original and mutated, every global, generic
//! and shared memory access goes through a guard's check and every loop of
//! the chosen kernels through a trip budget, and the guarded IR verifies and
//! compiles. What the guards do on the GPU is the GPU suite's (`gevod
//! gpu-guard-check`).

use crate::common;
use crate::guard_text::{checks_and_guarded, guarded_access_count};

use gevo_ir::guard::SiteKind;
use gevo_ir::{GuardSite, KernelIr};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// Every fixture's IR with its chosen kernels (one, or a pipeline's).
pub(crate) fn fixtures() -> Vec<(String, KernelIr)> {
    let mut fixtures: Vec<_> = common::KERNEL_FIXTURES
        .iter()
        .map(|n| load(n, &common::spec_fixture(n)))
        .collect();
    fixtures.extend(pipelines());
    fixtures
}

/// Each pipeline fixture's IR with its kernels.
fn pipelines() -> Vec<(String, KernelIr)> {
    common::PIPELINE_FIXTURES
        .iter()
        .map(|n| load(n, &common::pipeline_fixture(n)))
        .collect()
}

pub(crate) fn load(name: &str, spec: &std::path::Path) -> (String, KernelIr) {
    let spec = gevo_model::spec::load(spec).unwrap_or_else(|e| panic!("{name}: {e}"));
    let ir =
        KernelIr::load_kernels(&spec.ir, &spec.kernels).unwrap_or_else(|e| panic!("{name}: {e}"));
    (name.to_string(), ir)
}

/// `count` random one-edit variants of `ir` (seed `seed`), those whose
/// guarded build builds and splits into parts: the patch, the build, its
/// parts.
fn one_edit_parts(
    ir: &KernelIr,
    options: &gevo_ir::CodegenOptions,
    seed: u64,
    count: usize,
) -> Vec<(
    gevo_ir::Patch,
    gevo_ir::Guarded,
    gevod::cuda::part_assembly::Parts,
)> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..count)
        .filter_map(|_| {
            let patch = ir.mutate(&mut rng, 1).unwrap();
            let variant = ir.compile_guarded(&patch, options).ok()?;
            let parts = gevod::cuda::part_assembly::split(&variant.ptx)?;
            Some((patch, variant, parts))
        })
        .collect()
}

/// The kernels whose parts differ between two splits of one module.
fn changed_kernels<'a>(
    a: &'a gevod::cuda::part_assembly::Parts,
    b: &gevod::cuda::part_assembly::Parts,
) -> Vec<&'a str> {
    a.kernels
        .iter()
        .zip(&b.kernels)
        .filter(|(x, y)| x != y)
        .map(|(x, _)| x.0.as_str())
        .collect()
}

#[test]
fn every_memory_access_and_loop_of_every_fixture_is_guarded() {
    let options = common::codegen_options();
    for (name, ir) in fixtures() {
        let (text, sites) = ir
            .guarded_ir(&ir.empty_patch(), &options)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let accesses = guarded_access_count(&ir);
        assert!(accesses > 0, "{name} has memory accesses");
        let access_sites = sites
            .iter()
            .filter(|s| matches!(s.kind, SiteKind::Load | SiteKind::Store | SiteKind::Atomic))
            .count();
        assert_eq!(access_sites, accesses, "{name}: a site per access");
        // Each access now goes through a guard's pointer, checked inline
        // (its record behind a branch inside assembly: the kernel's blocks
        // stay whole) or by a call (never inlined, for the same reason); an
        // access whose pointer a dominating access checked as strictly
        // takes that one's (ir::guard::repeated).
        let (checked, redirected) = checks_and_guarded(&text);
        assert_eq!(redirected, accesses, "{name}: every access is guarded");
        assert!(checked <= accesses, "{name}: {checked} checks");
        let called = text.matches("call i1 @__gevo_check_").count()
            - text
                .matches("define internal i1 @__gevo_check_generic")
                .count()
                * 2;
        let inline = inline_checks(&text);
        assert_eq!(
            called + inline,
            checked,
            "{name}: a check per guard's pointer"
        );
        // Every fixture reads or writes through its kernels' parameters.
        assert!(inline > 0, "{name}: no inline check");
        let records = record_calls(&text);
        assert!(
            (1..=inline).contains(&records),
            "{name}: {records} records for {inline} inline checks"
        );
        println!(
            "{name}: {checked} checks for {accesses} accesses, {inline} of them inline, {records} record calls"
        );
        if name == "reduce" {
            // Its shared array, reached through generic pointers, is
            // accessed as shared memory.
            assert!(
                text.contains("ptr addrspace(3) %gevo.p"),
                "{name}: shared accesses stay shared"
            );
        }
        if name == "vecadd" {
            // a[i], b[i], c[i]: through kernel parameters, all inline, each
            // parameter's range found once at the entry.
            assert_eq!(inline, accesses, "{name}");
            assert_eq!(
                text.matches("call { i64, i64, i64 } @__gevo_range_of(")
                    .count(),
                3
            );
        }
        let loops = sites
            .iter()
            .filter(|s| s.kind == SiteKind::LoopHeader)
            .count();
        // Its budgets checked by assembly written out at the header, which
        // calls nothing (a call site in a loop costs every trip).
        assert_eq!(
            text.matches("GEVO_OVER:").count(),
            loops,
            "{name}: a trip count per loop header"
        );
        assert!(!text.contains("@__gevo_trip"), "{name}");
        assert_eq!(
            text.lines()
                .filter(|l| l.trim().starts_with("%gevo.trips") && l.contains(" = phi i32 "))
                .count(),
            loops,
            "{name}: each header counts in a register"
        );
        for site in &sites {
            assert!(
                site.instruction.is_some(),
                "{name}: every site is in a chosen kernel: {site:?}"
            );
        }
        let guarded = ir
            .compile_guarded(&ir.empty_patch(), &options)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        for symbol in ["__gevo_guard_state", "__gevo_guard_table"] {
            assert!(
                guarded.ptx.contains(symbol),
                "{name}: PTX declares {symbol}"
            );
        }
        assert_eq!(guarded.unguarded, 0, "{name}");
    }
}

#[test]
fn loops_get_budgets_and_sites_keep_source_lines_and_parameters() {
    let options = common::codegen_options();
    for (name, ir) in fixtures() {
        let (_, sites) = ir.guarded_ir(&ir.empty_patch(), &options).unwrap();
        if ["reduce", "nw", "loops"].contains(&name.as_str()) {
            assert!(
                sites.iter().any(|s| s.kind == SiteKind::LoopHeader),
                "{name} has a loop"
            );
            // Loop headers also ask the clock for the run's time budget.
            let ptx = ir.compile_guarded(&ir.empty_patch(), &options).unwrap().ptx;
            assert!(ptx.contains("%globaltimer"), "{name}: no clock read");
        }
        if name == "reduce" {
            // Its __syncthreads() become barriers lanes may reach apart.
            let plain = ir.compile(&ir.empty_patch(), &options).unwrap().ptx;
            let guarded = ir.compile_guarded(&ir.empty_patch(), &options).unwrap().ptx;
            let aligned = |ptx: &str| {
                ptx.lines()
                    .filter(|l| l.trim().starts_with("bar.sync"))
                    .count()
            };
            let unaligned = |ptx: &str| {
                ptx.lines()
                    .filter(|l| l.trim().starts_with("barrier.sync"))
                    .count()
            };
            assert!(aligned(&plain) > 0, "{name}: {plain}");
            assert_eq!(aligned(&guarded), 0, "{name}: {guarded}");
            // One more: after the shared-memory poison at the entry (poison.rs).
            assert_eq!(unaligned(&guarded), aligned(&plain) + 1, "{name}");
            // Every lane of a warp reaches them together (uniform.rs): no
            // check, and no live lanes to keep.
            assert!(!guarded.contains("GEVO_POLL:"), "{name}: {guarded}");
            let (text, _) = ir.guarded_ir(&ir.empty_patch(), &options).unwrap();
            assert!(!text.contains("@__gevo_live_init()"), "{name}");
        }
        assert!(
            sites.iter().any(|s| s.source.is_some()),
            "{name}: sites carry source lines"
        );
        if name == "vecadd" {
            // a[i], b[i], c[i]: each access knows its buffer's parameter.
            let mut arguments: Vec<u32> = sites.iter().filter_map(|s| s.argument).collect();
            arguments.sort_unstable();
            assert_eq!(arguments, [0, 1, 2], "{name}: {sites:?}");
            // Checked inline, recorded by the checks' own assembly: the
            // guarded kernel calls nothing.
            let guarded = ir.compile_guarded(&ir.empty_patch(), &options).unwrap().ptx;
            assert!(guarded.contains("GEVO_PASSED:"), "{name}: {guarded}");
            assert!(!guarded.contains("call "), "{name}: {guarded}");
        }
    }
}

#[test]
fn the_guarded_build_of_every_valid_variant_verifies() {
    let options = common::codegen_options();
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    for (name, ir) in fixtures() {
        let mut built = 0;
        for _ in 0..12 {
            let Ok(patch) = ir.mutate(&mut rng, 3) else {
                continue;
            };
            let plain = ir.compile(&patch, &options);
            let guarded = ir.compile_guarded(&patch, &options);
            assert_eq!(
                plain.is_ok(),
                guarded.is_ok(),
                "{name}: {patch:?}: {:?}",
                guarded.err()
            );
            built += usize::from(guarded.is_ok());
        }
        assert!(built > 0, "{name}: some variants build");
    }
}

/// The toolkit's ptxas, when this machine has one.
fn ptxas() -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("ptxas"))
        .find(|p| p.is_file())
}

/// Architectures whose default PTX versions differ: sm_60's (5.0) has none
/// of the instructions the guarded build's barriers need, which LLVM then
/// cannot select (an abort, not an error), so that build asks for 6.3.
const ARCHES: [&str; 3] = ["sm_60", "sm_75", "sm_90"];

#[test]
fn the_guarded_build_of_every_fixture_compiles_and_assembles_for_old_and_new_gpus() {
    let ptxas = ptxas();
    if ptxas.is_none() {
        println!("no ptxas on PATH: compiling only (the GPU suite assembles every guarded build)");
    }
    let dir = tempfile::tempdir().unwrap();
    // GEVO_KEEP_GUARDED_PTX=DIR keeps the PTX there, to read.
    let keep = std::env::var_os("GEVO_KEEP_GUARDED_PTX").map(std::path::PathBuf::from);
    for arch in ARCHES {
        let options = gevo_ir::CodegenOptions {
            arch: arch.into(),
            ..common::codegen_options()
        };
        for (name, ir) in fixtures() {
            let ptx = ir
                .compile_guarded(&ir.empty_patch(), &options)
                .unwrap_or_else(|e| panic!("{arch} {name}: {e}"))
                .ptx;
            let file = dir.path().join(format!("{name}-{arch}.ptx"));
            std::fs::write(&file, &ptx).unwrap();
            if let Some(keep) = &keep {
                std::fs::copy(&file, keep.join(format!("{name}-{arch}.ptx"))).unwrap();
            }
            let Some(ptxas) = &ptxas else { continue };
            let out = std::process::Command::new(ptxas)
                .arg(format!("-arch={arch}"))
                .arg(&file)
                .arg("-o")
                .arg(dir.path().join(format!("{name}-{arch}.cubin")))
                .output()
                .unwrap();
            let said = String::from_utf8_lossy(&out.stderr);
            if said.contains("Unsupported .version") || said.contains("not defined for option") {
                println!("skipped {name} on {arch}: this ptxas is older than the PTX ({said})");
                continue;
            }
            assert!(out.status.success(), "{arch} {name}: {said}\n{ptx}");
        }
    }
}

/// The kernel `k` of a module written out here.
/// Accesses checked inline: each one's refusal is a negated check.
fn inline_checks(guarded_ir: &str) -> usize {
    guarded_ir
        .lines()
        .map(str::trim_start)
        .filter(|l| l.starts_with("%gevo.refused") && l.contains(" = xor i1 "))
        .count()
}

/// Calls of the assembly that records refusals (its text names its
/// label once).
fn record_calls(guarded_ir: &str) -> usize {
    guarded_ir.matches("GEVO_PASSED:").count()
}

/// `module`'s kernel `k`, and its unpatched guarded IR and sites.
fn guarded_k(module: &str) -> (KernelIr, String, Vec<GuardSite>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("k.ll");
    std::fs::write(&path, module).unwrap();
    let ir = KernelIr::load_kernels(&path, &["k".to_string()]).unwrap();
    let (text, sites) = ir
        .guarded_ir(&ir.empty_patch(), &common::codegen_options())
        .unwrap();
    (ir, text, sites)
}

/// A kernel that reads through a pointer it loads from a buffer and writes
/// through one of two parameters: those accesses have no one root a guard
/// knows, so the runtime's check walks the test's table; the accesses
/// through one parameter are checked inline.
const LOADED_POINTER_IR: &str = r#"
target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

define void @k(ptr %pp, ptr %out, ptr %other, i1 %which) {
entry:
  %p = load ptr, ptr %pp, align 8
  %v = load float, ptr %p, align 4
  store float %v, ptr %out, align 4
  %either = select i1 %which, ptr %out, ptr %other
  store float %v, ptr %either, align 4
  ret void
}

!nvvm.annotations = !{!0}
!0 = !{ptr @k, !"kernel", i32 1}
"#;

#[test]
fn an_access_without_a_known_root_calls_the_runtime_check() {
    let (_, text, sites) = guarded_k(LOADED_POINTER_IR);
    assert_eq!(sites.len(), 4, "{sites:?}");
    assert_eq!(inline_checks(&text), 2);
    // The runtime check between them is a call: each has its own record.
    assert_eq!(record_calls(&text), 2);
    assert_eq!(text.matches("call i1 @__gevo_check_generic(").count(), 2);
    let arguments: Vec<Option<u32>> = sites.iter().map(|s| s.argument).collect();
    assert_eq!(arguments, [Some(0), None, Some(1), None]);
    // The inline-checked accesses are made as global accesses.
    assert_eq!(
        text.lines()
            .filter(|l| l.contains(" = select i1 ") && l.contains("ptr addrspace(1) %gevo.in"))
            .count(),
        2,
        "{text}"
    );
}

/// A loop whose header is its own latch, and one with two latches (a
/// `continue` from either arm): each header's trip count starts at 0 from
/// outside the loop and goes on from every latch.
const LOOPS_IR: &str = r#"
target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

define void @k(ptr %out, i32 %n) {
entry:
  br label %spin

spin:
  %i = phi i32 [ 0, %entry ], [ %next, %spin ]
  %next = add i32 %i, 1
  %done = icmp sge i32 %next, %n
  br i1 %done, label %walk, label %spin

walk:
  %j = phi i32 [ 0, %spin ], [ %j1, %odd ], [ %j2, %even ]
  %more = icmp slt i32 %j, 10
  br i1 %more, label %odd, label %exit

odd:
  %j1 = add i32 %j, 1
  %bit = and i32 %j, 1
  %is_even = icmp eq i32 %bit, 0
  br i1 %is_even, label %walk, label %even

even:
  %j2 = add i32 %j, 2
  br label %walk

exit:
  store i32 %j, ptr %out, align 4
  ret void
}

!nvvm.annotations = !{!0}
!0 = !{ptr @k, !"kernel", i32 1}
"#;

#[test]
fn each_loop_header_counts_from_zero_on_entry_and_on_from_every_latch() {
    let (ir, text, sites) = guarded_k(LOOPS_IR);
    let headers: Vec<&str> = sites
        .iter()
        .filter(|s| s.kind == SiteKind::LoopHeader)
        .map(|s| s.block.as_str())
        .collect();
    assert_eq!(headers, ["spin", "walk"]);
    let counts: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("%gevo.trips") && l.contains(" = phi i32 "))
        .collect();
    assert_eq!(counts.len(), 2, "{text}");
    // spin: from entry and from itself; walk: from spin, odd and even.
    let from_outside = |line: &str| line.matches("[ 0, %").count();
    let from_latches = |line: &str| line.matches("[ %gevo.now").count();
    assert_eq!(from_outside(counts[0]), 1, "{}", counts[0]);
    assert_eq!(from_latches(counts[0]), 1, "{}", counts[0]);
    assert_eq!(from_outside(counts[1]), 1, "{}", counts[1]);
    assert_eq!(from_latches(counts[1]), 2, "{}", counts[1]);
    // The headers' own phis moved with the counts and still verify.
    assert!(ir
        .compile_guarded(&ir.empty_patch(), &common::codegen_options())
        .is_ok());
}

/// Three accesses, a barrier, and one more, in one block; the barrier's
/// intrinsic is a call that waits for other threads.
const RUNS_IR: &str = r#"
target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

declare void @llvm.nvvm.barrier0()
declare float @llvm.fmuladd.f32(float, float, float)

define void @k(ptr %a, ptr %b, ptr %out) {
entry:
  %x = load float, ptr %a, align 4
  %y = load float, ptr %b, align 4
  %z = call float @llvm.fmuladd.f32(float %x, float %y, float 1.0)
  store float %z, ptr %out, align 4
  call void @llvm.nvvm.barrier0()
  store float %x, ptr %b, align 4
  ret void
}

!nvvm.annotations = !{!0}
!0 = !{ptr @k, !"kernel", i32 1}
"#;

#[test]
fn accesses_with_no_holding_call_between_share_one_record() {
    let (_, text, sites) = guarded_k(RUNS_IR);
    assert_eq!(sites.len(), 5, "four accesses and the barrier: {sites:?}");
    assert_eq!(inline_checks(&text), 4, "{text}");
    // The fused multiply-add's call returns at once; the barrier may hold.
    assert_eq!(record_calls(&text), 2, "{text}");
    // The first run reports its first refusal: a choice of site per
    // access after the first, whether any was refused so far.
    let first_sites = text
        .lines()
        .filter(|l| {
            l.contains("%gevo.first") && l.contains(" = select i1 %gevo.") && l.contains("i32 ")
        })
        .count();
    assert_eq!(first_sites, 2, "{text}");
}

/// A pipeline's guarded build splits into a part per kernel
/// (`cuda::parts`). With ptxas and nvlink, the parts link into one cubin
/// holding every kernel, and a variant's build assembles again only the
/// parts whose PTX its patch changed.
#[test]
fn a_pipelines_guarded_build_is_assembled_a_kernel_at_a_time() {
    let options = common::codegen_options();
    let assembler = gevod::cuda::toolkit::Assembler::find();
    let linking = assembler.as_ref().and_then(|a| a.linker()).is_some();
    if !linking {
        println!(
            "no ptxas and nvlink: splitting only (the GPU suite assembles every guarded build)"
        );
    }
    for (name, ir) in pipelines() {
        let original = ir.compile_guarded(&ir.empty_patch(), &options).unwrap().ptx;
        let parts = gevod::cuda::part_assembly::split(&original)
            .unwrap_or_else(|| panic!("{name}: the guarded build does not split"));
        let mut names: Vec<&str> = parts.kernels.iter().map(|(k, _)| k.as_str()).collect();
        names.sort_unstable();
        let mut kernels: Vec<&str> = ir.kernels().iter().map(String::as_str).collect();
        kernels.sort_unstable();
        assert_eq!(names, kernels, "{name}");
        let Some(assembler) = assembler.clone().filter(|_| linking) else {
            continue;
        };
        let mut parts_assembler = gevod::cuda::part_assembly::PartAssembler::new(assembler);
        let cubin = parts_assembler.assemble(&original, &options.arch).unwrap();
        for kernel in &kernels {
            assert!(
                cubin.has_code_for(kernel),
                "{name}: {kernel} not in the linked cubin"
            );
        }
        assert_eq!(parts_assembler.parts_assembled as usize, kernels.len() + 1);
        let mut fewer = 0;
        for (_, variant, split) in one_edit_parts(&ir, &options, 7, 6) {
            let changed =
                usize::from(split.common != parts.common) + changed_kernels(&split, &parts).len();
            let assembled = parts_assembler.parts_assembled;
            parts_assembler
                .assemble(&variant.ptx, &options.arch)
                .unwrap();
            let again = (parts_assembler.parts_assembled - assembled) as usize;
            assert!(
                again <= changed,
                "{name}: {again} parts assembled, {changed} changed"
            );
            fewer += usize::from(again < kernels.len());
        }
        assert!(fewer > 0, "{name}: every variant assembled every part");
    }
}

/// An edit renumbers only its own kernel's guard sites (`GuardSite::id`),
/// and a kernel's part holds only the functions and variables it uses
/// (`cuda::parts`): a one-edit variant of a pipeline changes the guarded
/// PTX of the kernel it edits and, but for a few, of no other, so a build
/// a kernel at a time assembles one part again. Each site's id names its
/// kernel's space, and no two sites share one.
#[test]
fn an_edit_changes_only_its_own_kernels_guarded_part() {
    let options = common::codegen_options();
    for (name, ir) in pipelines() {
        let original = ir.compile_guarded(&ir.empty_patch(), &options).unwrap();
        let mut ids: Vec<u32> = original.sites.iter().map(|s| s.id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(
            ids.len(),
            original.sites.len(),
            "{name}: two sites share an id"
        );
        for site in &original.sites {
            let space = site.id >> 20;
            match ir.kernels().iter().position(|k| *k == site.function) {
                Some(i) => assert_eq!(space as usize, i + 1, "{name}: {site:?}"),
                None => assert_eq!(space, 0, "{name}: {site:?}"),
            }
        }
        let parts = gevod::cuda::part_assembly::split(&original.ptx).unwrap();
        let variants = one_edit_parts(&ir, &options, 11, 40);
        let (mut site_counts_changed, mut spread) = (0, 0);
        for (patch, variant, split) in &variants {
            site_counts_changed += usize::from(variant.sites.len() != original.sites.len());
            let changed = changed_kernels(split, &parts);
            if changed.len() > 1 {
                println!(
                    "{name}: one edit ({}) changed the guarded parts of {changed:?}",
                    patch.to_json()
                );
                spread += 1;
            }
        }
        let variants = variants.len();
        assert!(variants > 10, "{name}: {variants} variants built");
        println!(
            "{name}: {variants} one-edit variants, {site_counts_changed} with another site count, \
             {spread} changing more than one kernel's part"
        );
        // An edit that brings in a runtime function which reads the
        // module's variables moves a kernel's shared array to the module's
        // scope, so that kernel's part changes too: rare.
        assert!(
            spread * 10 <= variants,
            "{name}: {spread} of {variants} one-edit variants changed more than one kernel's part"
        );
    }
}

/// A kernel's checks record a fault with code written out in each check,
/// unless the kernel has more check sites than a few dozen: then they call
/// the runtime (ir/guard/record.rs). Of the fixtures only lu's unrolled
/// diagonal and perimeter kernels have that many; its internal kernel
/// writes its records out.
#[test]
fn only_kernels_with_many_checks_call_the_runtime_to_record() {
    let options = common::codegen_options();
    for (name, ir) in fixtures() {
        let ptx = ir.compile_guarded(&ir.empty_patch(), &options).unwrap().ptx;
        let calls = ptx.matches("call __gevo_record, (gevo_kind").count()
            + ptx.matches("call __gevo_barrier_check, (").count();
        let written = ptx.matches("atom.global.cas.b64 %gevo_w").count();
        println!("{name}: {calls} checks call, {written} write the record out");
        assert!(written > 0, "{name}: no record written out");
        assert_eq!(
            calls > 0,
            name == "lu",
            "{name}: {calls} checks call the runtime"
        );
    }
}

/// Every fixture original's writes to global memory are checked inline,
/// where a write into a read-only range (a kept input) is refused: so its
/// guarded runs need no kept input restored before them (docs/evolve.md,
/// "Inputs the guarded run cannot write"). Each write's limit is the one
/// the table's read-only bit may zero; no read's is.
#[test]
fn every_fixtures_writes_refuse_read_only_inputs() {
    let options = common::codegen_options();
    for (name, ir) in fixtures() {
        let guarded = ir.compile_guarded(&ir.empty_patch(), &options).unwrap();
        assert!(
            guarded.protects_inputs,
            "{name}: a write is not checked inline"
        );
        let (text, sites) = ir.guarded_ir(&ir.empty_patch(), &options).unwrap();
        let writes = sites
            .iter()
            .filter(|s| matches!(s.kind, SiteKind::Store | SiteKind::Atomic))
            .count();
        if writes > 0 && text.contains("@__gevo_range_of(") {
            assert!(text.contains("%gevo.wlimit"), "{name}: {text}");
        }
    }
}
