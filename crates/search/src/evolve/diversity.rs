//! Diversity: with `distinct_ptx`, individuals that compile to the same PTX
//! (the fitness cache's key) count once. Selection orders the first member
//! of each PTX as usual and puts later copies behind every distinct one;
//! children that repeat a patch already present get a fresh edit before
//! they cost an evaluation.

use super::engine::selection_order;
use super::{Engine, Member};
use gevo_ir::{Edit, KernelIr, Patch};
use std::collections::{BTreeSet, HashSet};

/// A repeated child gets at most this many fresh edits to become new.
const REFRESH_TRIES: usize = 3;

/// Distinct PTX among `members` (those that did not compile have none).
pub fn distinct_count(members: &[Member]) -> usize {
    members
        .iter()
        .filter_map(|m| m.ptx_hash.as_deref())
        .collect::<BTreeSet<_>>()
        .len()
}

/// Members whose PTX an earlier member already has.
pub fn duplicate_count(members: &[Member]) -> usize {
    let mut seen = BTreeSet::new();
    members
        .iter()
        .filter(|m| m.ptx_hash.as_deref().is_some_and(|h| !seen.insert(h)))
        .count()
}

impl Engine {
    /// Indices best first. With `distinct_ptx` the ordering sees each PTX
    /// once (its first member), so copies neither win tournaments nor crowd
    /// the NSGA-II distances; the copies follow, in index order.
    pub(super) fn order(&mut self, members: &[Member]) -> Vec<usize> {
        if !self.config.distinct_ptx {
            return selection_order(self.config.selection, members, &mut self.rng);
        }
        let mut seen = BTreeSet::new();
        let (firsts, repeats): (Vec<usize>, Vec<usize>) = (0..members.len()).partition(|&i| {
            members[i]
                .ptx_hash
                .as_deref()
                .is_none_or(|h| seen.insert(h))
        });
        let subset: Vec<Member> = firsts.iter().map(|&i| members[i].clone()).collect();
        let mut order: Vec<usize> = selection_order(self.config.selection, &subset, &mut self.rng)
            .into_iter()
            .map(|i| firsts[i])
            .collect();
        order.extend(repeats);
        order
    }

    /// Gives each child whose edits repeat a member's or an earlier
    /// sibling's fresh edits (up to a few), so the generation's evaluations
    /// go to new variants rather than to cache hits.
    pub(super) fn refresh_repeats(
        &mut self,
        ir: &KernelIr,
        members: &[Member],
        children: &mut [Patch],
    ) {
        let mut seen: HashSet<Vec<Edit>> = members.iter().map(|m| m.patch.edits.clone()).collect();
        for child in children.iter_mut() {
            for _ in 0..REFRESH_TRIES {
                if !seen.contains(&child.edits) {
                    break;
                }
                *child = self.mutated(ir, child.clone());
            }
            seen.insert(child.edits.clone());
        }
    }
}
