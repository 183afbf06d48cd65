//! The kernels a patch spans, edited together in one LLVM module: each
//! chosen kernel's `LiveFunction`, ids numbered on across them (so an id
//! names one instruction in the whole module), and edits routed to the
//! kernel whose instructions they name.

use super::dom::DomTree;
use super::edit;
use super::error::{EditError, IrError};
use super::live::LiveFunction;
use super::mutate;
use super::patch::{Edit, EditKind, InstId};
use rand::Rng;

/// One chosen kernel of a module, as loaded.
#[derive(Debug, Clone)]
pub(crate) struct Part {
    /// The kernel's symbol.
    pub(crate) symbol: String,
    pub(crate) dom: DomTree,
    /// Its instructions on load are `first .. first + count`.
    pub(crate) first: u32,
    pub(crate) count: u32,
}

/// The chosen kernels being edited inside one context.
pub struct LiveModule<'d> {
    pub(crate) parts: Vec<LiveFunction<'d>>,
}

impl<'d> LiveModule<'d> {
    pub(crate) fn new(parts: Vec<LiveFunction<'d>>) -> Self {
        LiveModule { parts }
    }

    /// The kernel that holds `id` (live or deleted), by index.
    pub fn owner(&self, id: InstId) -> Option<usize> {
        self.parts.iter().position(|p| p.holds(id))
    }

    /// The kernel an edit works in: the one holding the first instruction
    /// it names that exists (a clone's id does not exist yet). Every other
    /// instruction it names must be in the same kernel; the edit fails
    /// there otherwise.
    pub fn edit_owner(&self, e: &Edit) -> Result<usize, EditError> {
        let first = match e.kind {
            EditKind::Copy { src, .. } => src,
            EditKind::Delete { target } => target,
            EditKind::Move { src, .. } => src,
            EditKind::Replace { target, .. } => target,
            EditKind::Swap { a, .. } => a,
            EditKind::OperandReplace { user, .. } => user,
        };
        self.owner(first)
            .ok_or(EditError::UnknownInstruction(first))
    }

    /// One past the largest id in use in any kernel.
    fn next_id(&self) -> u32 {
        self.parts.iter().map(|p| p.fresh_id().0).max().unwrap_or(0)
    }

    /// The kernel `k`, with ids taken elsewhere reserved.
    pub(crate) fn part_mut(&mut self, k: usize) -> &mut LiveFunction<'d> {
        let next = self.next_id();
        let part = &mut self.parts[k];
        part.reserve_below(next);
        part
    }

    /// Replays one recorded edit in the kernel it names.
    pub fn apply_edit(&mut self, e: &Edit) -> Result<(), EditError> {
        let k = self.edit_owner(e)?;
        // A created id must be new to the whole module, not just its kernel.
        if let Some(id) = e.created_id() {
            if self.owner(id).is_some() {
                return Err(EditError::IdTaken(id));
            }
        }
        edit::apply_edit(self.part_mut(k), e)
    }

    /// Replays recorded edits in order; the error names the failing edit.
    pub fn replay(&mut self, edits: &[Edit]) -> Result<(), IrError> {
        for (i, e) in edits.iter().enumerate() {
            self.apply_edit(e)
                .map_err(|reason| IrError::InvalidEdit { edit: i, reason })?;
        }
        Ok(())
    }

    /// A random edit's kind in a kernel chosen with probability proportional
    /// to its instruction count (no draw when there is one kernel, so a
    /// single kernel's random stream is what it always was), and the kernel.
    pub(crate) fn random_edit_kind<R: Rng>(
        &mut self,
        weights: &[u32],
        rng: &mut R,
    ) -> Option<(usize, EditKind)> {
        let k = if self.parts.len() == 1 {
            0
        } else {
            let total: u64 = weights.iter().map(|&w| u64::from(w.max(1))).sum();
            let mut x = rng.gen_range(0..total);
            let mut k = 0;
            for (i, &w) in weights.iter().enumerate() {
                let w = u64::from(w.max(1));
                if x < w {
                    k = i;
                    break;
                }
                x -= w;
            }
            k
        };
        let kind = mutate::random_edit_kind(self.part_mut(k), rng)?;
        Some((k, kind))
    }
}
