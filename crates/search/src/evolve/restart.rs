//! Stagnation and the archives beyond the population. When the best train
//! cost has not gone down for `stagnation_generations`, or the validated
//! best has not risen for `validated_stall_generations`, a share of every
//! island restarts from archived variants (the Pareto front, the validated,
//! the promotion pool) with `restart_edits` extra random edits each: the
//! search leaves the basin it converged to while keeping what it learnt.
//! The promotion pool keeps the cheapest distinct valid variants seen, so
//! promotion can still reach them after they left the population.

use super::{Engine, Member};
use gevo_ir::{KernelIr, Patch};
use rand::Rng;
use std::collections::BTreeSet;

impl Engine {
    pub(super) fn restart_due(&self) -> bool {
        let n = self.config.stagnation_generations;
        let m = self.config.validated_stall_generations;
        (n > 0 && self.stagnant >= n) || (m > 0 && self.stalled >= m)
    }

    /// Both counts start again: a restart is under way.
    pub(super) fn note_restart(&mut self) {
        self.stagnant = 0;
        self.stalled = 0;
    }

    /// Records whether this generation lowered the best train cost, and
    /// whether the validated best rose since the last generation.
    pub(super) fn note_progress(&mut self) {
        let validated = self.best_validated().map(|v| v.speedup);
        let best = self.best_cost();
        count_since_better(
            validated,
            &mut self.validated_seen,
            &mut self.stalled,
            |v, seen| v <= seen,
        );
        count_since_better(best, &mut self.best_seen, &mut self.stagnant, |b, seen| {
            b >= seen
        });
    }

    /// New individuals for a restart of the island `members`: archived
    /// variants (the island's elites when nothing is archived yet), each
    /// with `restart_edits` more random edits.
    pub(super) fn restart_patches(&mut self, ir: &KernelIr, members: &[Member]) -> Vec<Patch> {
        let elites = self.elite_count(members.len());
        let count = ((self.config.restart_fraction * members.len() as f64).round() as usize)
            .min(members.len() - elites);
        let mut sources: Vec<Patch> = self
            .archive
            .iter()
            .chain(&self.pool)
            .map(|m| m.patch.clone())
            .chain(self.validated.iter().map(|v| v.patch.clone()))
            .collect();
        if sources.is_empty() {
            let order = self.order(members);
            sources = order[..elites.max(1)]
                .iter()
                .map(|&i| members[i].patch.clone())
                .collect();
        }
        (0..count)
            .map(|_| {
                let start = sources[self.rng.gen_range(0..sources.len())].clone();
                ir.extend_within(
                    start.clone(),
                    &mut self.rng,
                    self.config.restart_edits,
                    self.config.mutation_tries,
                )
                .unwrap_or_else(|_| {
                    self.counters.mutation_failures += 1;
                    start
                })
            })
            .collect()
    }

    /// Keeps the `promotion_pool` cheapest distinct valid variants of the
    /// pool and the population (cost, then error, then fewer edits).
    pub(super) fn update_pool(&mut self) {
        let size = self.config.promotion_pool;
        if size == 0 {
            return;
        }
        let mut all: Vec<Member> = std::mem::take(&mut self.pool);
        all.extend(
            self.population
                .iter()
                .filter(|m| m.outcome.cost().is_some())
                .cloned(),
        );
        all.sort_by(by_cost);
        let mut seen = BTreeSet::new();
        all.retain(|m| seen.insert(m.ptx_hash.clone()));
        all.truncate(size);
        self.pool = all;
    }
}

/// Valid members cheapest first: cost, then error, then fewer edits.
pub(super) fn by_cost(a: &Member, b: &Member) -> std::cmp::Ordering {
    let (pa, pb) = (a.outcome.objectives(), b.outcome.objectives());
    let (pa, pb) = (pa.expect("valid"), pb.expect("valid"));
    pa.0.total_cmp(&pb.0)
        .then(pa.1.total_cmp(&pb.1))
        .then(a.patch.edits.len().cmp(&b.patch.edits.len()))
}

/// One more generation in `count`, unless `now` is better than the best
/// `seen` so far (not `no_better`), or the first value at all: then `seen`
/// takes it and the count starts again.
fn count_since_better(
    now: Option<f64>,
    seen: &mut Option<f64>,
    count: &mut u64,
    no_better: impl Fn(f64, f64) -> bool,
) {
    match (now, *seen) {
        (Some(n), Some(s)) if no_better(n, s) => *count += 1,
        (None, _) => *count += 1,
        (Some(n), _) => {
            *seen = Some(n);
            *count = 0;
        }
    }
}
