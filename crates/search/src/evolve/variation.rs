//! Making children: GEVO's messy one-point crossover and single-edit
//! mutation. Every child returned replays to verified IR.

use gevo_ir::{Edit, InstId, KernelIr, Patch};
use rand::seq::SliceRandom;
use rand::Rng;
use std::collections::{BTreeMap, BTreeSet};

/// Pools both parents' edits, shuffles them, cuts the pool at a random point
/// and returns the two halves as children, each in pooled order. A half that
/// does not replay (an edit lost the instruction it names) is `None`.
///
/// Both parents may have created instructions under the same fresh id; the
/// second parent's created ids are renamed first so the pool stays coherent.
pub fn crossover<R: Rng>(ir: &KernelIr, a: &Patch, b: &Patch, rng: &mut R) -> [Option<Patch>; 2] {
    let mut pool: Vec<Edit> = a.edits.clone();
    pool.extend(renamed_apart(a, b));
    pool.shuffle(rng);
    let cut = if pool.is_empty() {
        0
    } else {
        rng.gen_range(0..=pool.len())
    };
    let (left, right) = pool.split_at(cut);
    [left, right].map(|edits| {
        let mut child = ir.empty_patch();
        child.edits = edits.to_vec();
        // Shuffling can put a use of a created instruction before its
        // creation: restore creation order among dependent edits.
        order_creations_first(&mut child.edits);
        ir.check(&child).is_ok().then_some(child)
    })
}

/// One more random valid edit, or `None` when `tries` candidates all failed.
pub fn mutate<R: Rng>(ir: &KernelIr, patch: &Patch, rng: &mut R, tries: usize) -> Option<Patch> {
    ir.extend_within(patch.clone(), rng, 1, tries).ok()
}

/// `b`'s edits with every id `b` creates that `a` also creates renamed to an
/// id neither uses.
fn renamed_apart(a: &Patch, b: &Patch) -> Vec<Edit> {
    let taken: BTreeSet<InstId> = a.edits.iter().filter_map(Edit::created_id).collect();
    let mut next = all_ids(a).chain(all_ids(b)).map(|i| i.0).max().unwrap_or(0) + 1;
    let mut renames = BTreeMap::new();
    for id in b.edits.iter().filter_map(Edit::created_id) {
        if taken.contains(&id) {
            renames.insert(id, InstId(next));
            next += 1;
        }
    }
    b.edits
        .iter()
        .map(|e| {
            let mut e = e.clone();
            e.remap_ids(|id| renames.get(&id).copied().unwrap_or(id));
            e
        })
        .collect()
}

fn all_ids(p: &Patch) -> impl Iterator<Item = InstId> + '_ {
    p.edits.iter().flat_map(Edit::ids)
}

/// Stable reorder so that an edit creating an instruction comes before any
/// edit that mentions it.
fn order_creations_first(edits: &mut Vec<Edit>) {
    let mut placed: Vec<Edit> = Vec::with_capacity(edits.len());
    let mut pending: Vec<Edit> = std::mem::take(edits);
    let created: BTreeSet<InstId> = pending.iter().filter_map(Edit::created_id).collect();
    let mut available: BTreeSet<InstId> = BTreeSet::new();
    while !pending.is_empty() {
        let ready = pending.iter().position(|e| {
            e.ids().into_iter().all(|id| {
                !created.contains(&id) || available.contains(&id) || Some(id) == e.created_id()
            })
        });
        // A cycle cannot happen (an id is created once), but never loop.
        let index = ready.unwrap_or(0);
        let e = pending.remove(index);
        if let Some(id) = e.created_id() {
            available.insert(id);
        }
        placed.push(e);
    }
    *edits = placed;
}
