//! Edits told in CUDA source terms: the fixtures' IR has line tables, every
//! edit keeps the debug locations (a clone has its source's), and IR without
//! line tables falls back to IR ids.

use crate::common;

use gevo_ir::{CodegenOptions, Edit, EditKind, InstId, KernelIr, Patch, SourceFiles, DEFAULT_ARCH};
use gevo_model::access::Reader;

fn stencil() -> KernelIr {
    KernelIr::load(&common::kernel_fixture("stencil"), None).unwrap()
}

fn patch(ir: &KernelIr, edits: Vec<EditKind>) -> Patch {
    let mut p = ir.empty_patch();
    p.edits = edits
        .into_iter()
        .map(|kind| Edit {
            kind,
            repairs: vec![],
        })
        .collect();
    p
}

/// Each case: edits on the stencil fixture, and what each says.
#[test]
fn edits_name_the_cuda_lines_they_touch() {
    let ir = stencil();
    assert!(ir.has_line_tables());
    let clone = InstId(ir.instruction_count());
    let cases: Vec<(Vec<EditKind>, Vec<&str>)> = vec![
        (
            vec![EditKind::Delete { target: InstId(87) }],
            vec!["delete the __syncthreads() at stencil.cu:61"],
        ),
        (
            // The clone keeps the barrier's line: deleting it names line 60.
            vec![
                EditKind::Copy {
                    src: InstId(86),
                    before: InstId(125),
                    clone,
                },
                EditKind::Delete { target: clone },
            ],
            vec![
                "copy the __syncthreads() at stencil.cu:60 to before stencil.cu:73",
                "delete the __syncthreads() at stencil.cu:60",
            ],
        ),
        (
            // A moved instruction keeps its line.
            vec![
                EditKind::Move {
                    src: InstId(86),
                    before: InstId(125),
                },
                EditKind::Swap {
                    a: InstId(86),
                    b: InstId(87),
                },
            ],
            vec![
                "move the __syncthreads() at stencil.cu:60 to before stencil.cu:73",
                "swap the __syncthreads() at stencil.cu:60 and the __syncthreads() at stencil.cu:61",
            ],
        ),
        (
            vec![EditKind::Replace {
                target: InstId(116),
                with: InstId(107),
                clone,
            }],
            vec!["replace the load at stencil.cu:71 with a copy of the load at stencil.cu:70"],
        ),
    ];
    for (edits, expect) in cases {
        let p = patch(&ir, edits);
        ir.check(&p).unwrap_or_else(|e| panic!("{expect:?}: {e}"));
        let told: Vec<String> = ir
            .describe(&p)
            .unwrap()
            .into_iter()
            .map(|s| s.summary)
            .collect();
        assert_eq!(told, expect);
    }
}

#[test]
fn the_clone_carries_its_sources_debug_location_in_the_ir() {
    let ir = stencil();
    let clone = InstId(ir.instruction_count());
    let p = patch(
        &ir,
        vec![EditKind::Copy {
            src: InstId(86),
            before: InstId(125),
            clone,
        }],
    );
    let text = ir.apply(&p).unwrap();
    let barriers: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("call void @llvm.nvvm.barrier0()"))
        .collect();
    assert_eq!(barriers.len(), 3, "{barriers:?}");
    let loc = |l: &str| l.rsplit("!dbg ").next().unwrap().to_string();
    // The first barrier and its copy (the last) share one DILocation.
    assert_eq!(loc(barriers[0]), loc(barriers[2]), "{barriers:?}");
}

#[test]
fn source_text_is_read_near_the_ir() {
    let ir = stencil();
    let p = patch(&ir, vec![EditKind::Delete { target: InstId(87) }]);
    let fixture = common::kernel_fixture("stencil");
    let mut files = SourceFiles::near(Reader::Caller, &[&fixture]);
    let edits = gevod::report::edits::source_edits(&ir, &p, &mut files).unwrap();
    assert_eq!(edits[0].lines[0].location, "stencil.cu:61");
    assert!(
        edits[0].lines[0]
            .text
            .as_deref()
            .unwrap()
            .starts_with("__syncthreads();"),
        "{edits:?}"
    );
    // Elsewhere the file is not found: the location stays, without text.
    let elsewhere = tempfile::tempdir().unwrap();
    let mut files = SourceFiles::near(Reader::Caller, &[elsewhere.path()]);
    let edits = gevod::report::edits::source_edits(&ir, &p, &mut files).unwrap();
    assert_eq!(edits[0].lines[0].text, None);
}

#[test]
fn without_line_tables_edits_name_ir_ids() {
    let path = common::repo_root().join("daemon/tests/edits/delete-barrier.test");
    let text = std::fs::read_to_string(&path).unwrap();
    let input = text.split("; === expected").next().unwrap();
    let ir = KernelIr::parse("delete-barrier.test", input.as_bytes(), None).unwrap();
    assert!(!ir.has_line_tables());
    let p = patch(&ir, vec![EditKind::Delete { target: InstId(6) }]);
    let told = ir.describe(&p).unwrap();
    assert_eq!(told[0].summary, "delete the __syncthreads() i6");
    let rendered = gevod::report::edits::text(&ir, &p, &mut SourceFiles::none(), "").unwrap();
    assert!(
        rendered.starts_with("(the kernel's IR has no line tables"),
        "{rendered}"
    );
}

#[test]
fn variant_ptx_carries_no_line_information() {
    let ir = stencil();
    let options = CodegenOptions {
        arch: DEFAULT_ARCH.into(),
        libdevice: None,
    };
    let p = patch(&ir, vec![EditKind::Delete { target: InstId(87) }]);
    let ptx = ir.compile(&p, &options).unwrap().ptx;
    assert!(ptx.contains(".entry stencil5"));
    assert!(!ptx.contains(".loc") && !ptx.contains(".file"), "{ptx}");
}
