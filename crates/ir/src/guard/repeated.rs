//! Checks not repeated: an access whose pointer value an earlier access of
//! its function checked at least as strictly, on every path to it, takes
//! that access's guarded pointer instead of a check of its own. It would
//! be refused exactly where that one was refused, and that one's refusal
//! is recorded (a run's record is never skipped), so the build reports
//! the same faults at the earlier site. Unrolled read-modify-write code
//! (`a[i] -= ...`: a load and a store through one pointer) is full of them:
//! lu's guarded build checks 195 of its 303 accesses, and its bred
//! variants' guarded builds assemble in 0.86x the time (BENCHMARKS.md,
//! "Checks not repeated").
//!
//! At least as strictly: as many bytes or more (the range test is
//! `address + bytes <= end`), an alignment at least as large unless this
//! access is proven aligned (`aligned.rs`), and a write where this access
//! writes (a write's limit also refuses read-only inputs). Only plain
//! accesses through one pointer (loads, stores, atomics) take part: a
//! memory intrinsic's guard changes its length, not its pointers.

use super::super::dom::DomTree;
use super::super::llvm;
use super::plan::Access;
use std::borrow::Cow;

/// The accesses of one function checked so far, by the block they are in.
pub(super) struct Checked<'d> {
    dom: Cow<'d, DomTree>,
    checked: Vec<Check>,
}

/// What one checked access's guard tested.
struct Check {
    /// Where it is in the plan's accesses.
    index: usize,
    pointer: llvm::Value,
    block: usize,
    bytes: u64,
    align: u64,
    writes: bool,
}

impl<'d> Checked<'d> {
    /// Nothing checked yet in a function whose blocks' dominator tree is
    /// `dom` (a chosen kernel's, kept since it was loaded, or one computed
    /// for another function), its blocks visited in order, each from its
    /// first instruction.
    pub(super) fn new(dom: Cow<'d, DomTree>) -> Self {
        Checked {
            dom,
            checked: Vec::new(),
        }
    }

    /// The plan index of an earlier checked access whose guarded pointer
    /// `access` (in block `block`, at plan index `index`) may take; none,
    /// and `access` counts as checked from here on, where there is none.
    pub(super) fn covering(
        &mut self,
        access: &Access,
        block: usize,
        index: usize,
    ) -> Option<usize> {
        let [at] = access.pointers[..] else {
            return None;
        };
        if access.length.is_some() {
            return None;
        }
        let pointer = llvm::operand(access.inst, at);
        let writes = access.writes();
        let covered = self.checked.iter().find(|c| {
            c.pointer == pointer
                && c.bytes >= access.bytes
                && (access.aligned || c.align >= access.align)
                && (c.writes || !writes)
                // Same block: the plan visits it in order, so `c` is before.
                && (c.block == block || self.dom.strictly_dominates(c.block, block))
        });
        if let Some(c) = covered {
            return Some(c.index);
        }
        self.checked.push(Check {
            index,
            pointer,
            block,
            bytes: access.bytes,
            align: access.align,
            writes,
        });
        None
    }
}
