//! Islands: the population split into `islands` subpopulations that breed
//! and survive apart (one batch per generation for all of them), and every
//! `migration_interval` generations each island's `migrants` best replace
//! the worst of the next island, in a ring. Separate islands converge to
//! different variants; migration lets a good one spread slowly. An island
//! is also the unit one worker group could own.

use super::diversity::distinct_count;
use super::engine::IslandReport;
use super::Engine;
use std::collections::BTreeSet;
use std::ops::Range;

impl Engine {
    /// Each island's place in the population vector: equal shares, the
    /// first ones one larger when the population does not divide.
    pub(super) fn island_ranges(&self) -> Vec<Range<usize>> {
        let (n, k) = (self.population.len(), self.config.island_count());
        let mut start = 0;
        (0..k)
            .map(|i| {
                let len = n / k + usize::from(i < n % k);
                let r = start..start + len;
                start += len;
                r
            })
            .collect()
    }

    /// Moves copies of each island's best into the next island in place of
    /// its worst, when this generation is a migration generation; returns
    /// how many moved. With `distinct_ptx`, a PTX the receiving island
    /// already has is not sent again.
    pub(super) fn migrate(&mut self, generation: u64) -> usize {
        let (k, interval) = (self.config.island_count(), self.config.migration_interval);
        if k < 2 || interval == 0 || generation % interval != 0 {
            return 0;
        }
        let ranges = self.island_ranges();
        let orders: Vec<Vec<usize>> = ranges
            .iter()
            .map(|r| {
                let members = self.population[r.clone()].to_vec();
                self.order(&members)
            })
            .collect();
        let mut moved = 0;
        let mut incoming = Vec::new();
        for (from, r) in ranges.iter().enumerate() {
            let to = (from + 1) % k;
            let present: BTreeSet<Option<String>> = self.population[ranges[to].clone()]
                .iter()
                .map(|m| m.ptx_hash.clone())
                .collect();
            let sent: Vec<_> = orders[from]
                .iter()
                .map(|&i| self.population[r.start + i].clone())
                .filter(|m| m.outcome.cost().is_some())
                .filter(|m| !self.config.distinct_ptx || !present.contains(&m.ptx_hash))
                .take(self.config.migrants)
                .collect();
            incoming.push((to, sent));
        }
        for (to, sent) in incoming {
            let r = &ranges[to];
            let worst = orders[to].iter().rev();
            for (&i, m) in worst.zip(sent) {
                self.population[r.start + i] = m;
                moved += 1;
            }
        }
        moved
    }

    pub(super) fn island_reports(&self) -> Vec<IslandReport> {
        if self.config.island_count() < 2 {
            return Vec::new();
        }
        self.island_ranges()
            .into_iter()
            .map(|r| {
                let members = &self.population[r];
                IslandReport {
                    best_cost: super::engine::best_cost(members),
                    distinct_ptx: distinct_count(members),
                }
            })
            .collect()
    }
}
