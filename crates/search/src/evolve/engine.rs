//! The engine: one generation per `step`, all state in one serializable value.

#[cfg(test)]
mod breeding_tests;
mod generation;

use super::ahead::Bred;
use super::diversity::{distinct_count, duplicate_count};
use super::variation::{crossover, mutate};
use super::{
    nsga, Backend, BackendError, Config, Counters, EvolveError, Member, Outcome, PromotionFailure,
    Scope, Selection, Validated,
};
use gevo_ir::{KernelIr, Patch};
use gevo_model::spec::TestSet;
use gevo_model::utilization::Utilization;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// What a cached fitness is valid for.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct CacheKey {
    pub ptx_hash: String,
    pub scope: Scope,
    pub test_set_hash: String,
}

/// The whole state of one search. Serialized as is for checkpoints: a search
/// resumed from it continues exactly as if never stopped (given a
/// deterministic backend).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Engine {
    pub(super) config: Config,
    pub(super) seed: u64,
    pub(super) rng: ChaCha8Rng,
    /// Generations completed; generation 0 is the initial population.
    pub(super) generations: u64,
    pub(super) population: Vec<Member>,
    /// Every non-dominated valid variant seen, one per PTX.
    pub(super) archive: Vec<Member>,
    #[serde(with = "pairs")]
    pub(super) cache: BTreeMap<CacheKey, Outcome>,
    /// Generated-test verdicts of the variants selection saw (why one
    /// failed, `None`: it passed), by the same keys as the cache
    /// (`generality.rs`).
    #[serde(default, with = "pairs", skip_serializing_if = "BTreeMap::is_empty")]
    pub(super) generality: BTreeMap<CacheKey, Option<String>>,
    pub(super) counters: Counters,
    /// PTX hashes already tried on the held-out tests.
    pub(super) promoted: BTreeSet<String>,
    pub(super) validated: Vec<Validated>,
    pub(super) promotion_failures: Vec<PromotionFailure>,
    /// Patches the initial population starts with, before random ones.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) seeds: Vec<Patch>,
    /// The lowest train cost any generation reached, and generations since
    /// it last went down (stagnation).
    #[serde(default)]
    pub(super) best_seen: Option<f64>,
    #[serde(default)]
    pub(super) stagnant: u64,
    /// The largest validated speedup when the stall count last started,
    /// and generations since it last rose (or since the last restart).
    #[serde(default)]
    pub(super) validated_seen: Option<f64>,
    #[serde(default)]
    pub(super) stalled: u64,
    /// The cheapest distinct valid variants seen (`promotion_pool`).
    #[serde(default)]
    pub(super) pool: Vec<Member>,
    /// Generations that restarted part of the population after stagnation.
    #[serde(default)]
    pub(super) restarts: Vec<u64>,
    /// Variants that passed everything but the safety gate, which checks
    /// them beside the search (`Backend::start_safety_check`); validated
    /// when it passes them. A checkpoint keeps them, and a resumed search
    /// (or a new backend) checks them again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) gating: Vec<Validated>,
    /// Fitness cache entries chosen for eviction at the end of the last
    /// generation, dropped at the end of this one (`bounds.rs`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) evicting: Vec<CacheKey>,
    /// The batch the next step measures, where the backend compiles it
    /// ahead (`ahead.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) ahead: Option<Bred>,
}

/// What one generation did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GenerationReport {
    pub generation: u64,
    /// Individuals evaluated in this generation, and of those from the cache.
    pub evaluations: u64,
    pub cache_hits: u64,
    /// Valid members of the new population.
    pub valid: usize,
    /// Lowest train cost ratio in the population.
    pub best_cost: Option<f64>,
    pub validated: Vec<Validated>,
    pub promotion_failures: Vec<PromotionFailure>,
    /// Rejected evaluations of this generation by the failure's kind.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub rejections: BTreeMap<String, u64>,
    /// Distinct PTX among the new population's members.
    #[serde(default)]
    pub distinct_ptx: usize,
    /// Individuals this generation restarted from the archive after
    /// stagnation (0: no restart).
    #[serde(default)]
    pub restarted: usize,
    /// Generations since the best train cost last went down.
    #[serde(default)]
    pub stagnant: u64,
    /// Generations since the validated best last rose, or since the last
    /// restart.
    #[serde(default)]
    pub stalled: u64,
    /// Individuals that moved between islands this generation.
    #[serde(default)]
    pub migrated: usize,
    /// Per island (empty with one population).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub islands: Vec<IslandReport>,
    /// Where the backend's workers spent this generation (the GPU backend).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub utilization: Option<Utilization>,
}

/// One island's state after a generation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IslandReport {
    pub best_cost: Option<f64>,
    pub distinct_ptx: usize,
}

impl Engine {
    pub fn new(config: Config, seed: u64) -> Result<Self, EvolveError> {
        config
            .validate()
            .map_err(|e| EvolveError::Config(e.to_string()))?;
        Ok(Engine {
            config,
            seed,
            rng: ChaCha8Rng::seed_from_u64(seed),
            generations: 0,
            population: Vec::new(),
            archive: Vec::new(),
            cache: BTreeMap::new(),
            generality: BTreeMap::new(),
            counters: Counters::default(),
            promoted: BTreeSet::new(),
            validated: Vec::new(),
            promotion_failures: Vec::new(),
            seeds: Vec::new(),
            best_seen: None,
            stagnant: 0,
            validated_seen: None,
            stalled: 0,
            pool: Vec::new(),
            restarts: Vec::new(),
            gating: Vec::new(),
            evicting: Vec::new(),
            ahead: None,
        })
    }

    /// Starts the search from these patches as well (a user's patch, an
    /// earlier search's winners): they join the initial population in
    /// place of random individuals. No effect once the search has begun.
    pub fn seed_with(&mut self, patches: Vec<Patch>) {
        if self.population.is_empty() {
            self.seeds = patches;
        }
    }

    pub fn config(&self) -> &Config {
        &self.config
    }
    pub fn seed(&self) -> u64 {
        self.seed
    }
    /// Generations completed (the initial population is generation 0).
    pub fn generations(&self) -> u64 {
        self.generations
    }
    pub fn population(&self) -> &[Member] {
        &self.population
    }
    /// The Pareto front over (cost, error), best cost first.
    pub fn archive(&self) -> &[Member] {
        &self.archive
    }
    pub fn counters(&self) -> &Counters {
        &self.counters
    }
    pub fn validated(&self) -> &[Validated] {
        &self.validated
    }
    pub fn promotion_failures(&self) -> &[PromotionFailure] {
        &self.promotion_failures
    }
    /// The validated variant with the largest speedup.
    pub fn best_validated(&self) -> Option<&Validated> {
        self.validated
            .iter()
            .max_by(|a, b| a.speedup.total_cmp(&b.speedup))
    }
    /// Generations that restarted part of the population after stagnation.
    pub fn restarts(&self) -> &[u64] {
        &self.restarts
    }
    /// Distinct PTX in the current population.
    pub fn distinct_ptx(&self) -> usize {
        distinct_count(&self.population)
    }
    pub fn best_cost(&self) -> Option<f64> {
        best_cost(&self.population)
    }

    /// Runs one generation: the initial population first, then breeding and
    /// survivor selection; then promotion. The state changes only when the
    /// whole generation succeeded, so a stop between batches loses nothing
    /// committed.
    pub fn step(
        &mut self,
        ir: &KernelIr,
        backend: &mut dyn Backend,
    ) -> Result<GenerationReport, EvolveError> {
        let mut next = self.clone();
        let report = next.advance(ir, backend)?;
        *self = next;
        Ok(report)
    }

    /// Builds the initial population's patches (the seeds, then random
    /// individuals) ahead of the first [`step`](Self::step), which would
    /// otherwise build them itself, drawing the same edits. A large
    /// population takes minutes, so `stop` is asked between individuals:
    /// `Ok(false)`, and the engine as it was, when it said stop. Nothing to
    /// do once the search has begun.
    pub fn build_initial(
        &mut self,
        ir: &KernelIr,
        stop: &dyn Fn() -> bool,
    ) -> Result<bool, EvolveError> {
        let size = self.config.population;
        if !self.population.is_empty() || self.seeds.len() >= size {
            return Ok(true);
        }
        let mut rng = self.rng.clone();
        let mut initial = self.seeds.clone();
        while initial.len() < size {
            if stop() {
                return Ok(false);
            }
            initial.push(
                ir.mutate(&mut rng, self.config.initial_edits)
                    .map_err(EvolveError::Initial)?,
            );
        }
        self.rng = rng;
        self.seeds = initial;
        Ok(true)
    }

    fn initial(&mut self, ir: &KernelIr, backend: &dyn Backend) -> Result<Vec<Patch>, EvolveError> {
        if !self.build_initial(ir, &|| backend.stopping())? {
            return Err(BackendError::Interrupted.into());
        }
        let mut initial: Vec<Patch> = std::mem::take(&mut self.seeds);
        initial.truncate(self.config.population);
        Ok(initial)
    }

    /// Children for the places an island's elites leave: tournament-selected
    /// parents, crossed over and mutated at the configured rates; with
    /// `distinct_ptx`, also one fresh mutant of an elite per duplicate the
    /// island holds.
    pub(super) fn breed(&mut self, ir: &KernelIr, members: &[Member]) -> Vec<Patch> {
        // Position in the selection order: lower is better.
        let order = self.order(members);
        let mut standing = vec![0usize; order.len()];
        for (place, &i) in order.iter().enumerate() {
            standing[i] = place;
        }
        let elites = self.elite_count(members.len());
        let wanted = members.len() - elites;
        let rejected = |i: usize| members[i].outcome.cost().is_none();
        let valid: Vec<usize> = match self.config.valid_parents_first {
            true => (0..members.len()).filter(|&i| !rejected(i)).collect(),
            false => Vec::new(),
        };
        let mut children = Vec::with_capacity(wanted);
        while children.len() < wanted {
            let a = self.tournament(&standing, &valid);
            let b = self.tournament(&standing, &valid);
            let (pa, pb) = (members[a].patch.clone(), members[b].patch.clone());
            // Each child with whether a parent of it was rejected: both
            // parents of a crossed child, else the one it copies.
            let either = rejected(a) || rejected(b);
            let pair = if self.rng.gen_bool(self.config.crossover_rate) {
                let [x, y] = crossover(ir, &pa, &pb, &mut self.rng);
                let fallbacks = u64::from(x.is_none()) + u64::from(y.is_none());
                self.counters.crossover_fallbacks += fallbacks;
                [
                    x.map_or((pa, rejected(a)), |x| (x, either)),
                    y.map_or((pb, rejected(b)), |y| (y, either)),
                ]
            } else {
                [(pa, rejected(a)), (pb, rejected(b))]
            };
            for (child, of_rejected) in pair {
                if children.len() == wanted {
                    break;
                }
                self.counters.children_of_rejected += u64::from(of_rejected);
                let child = if self.rng.gen_bool(self.config.mutation_rate) {
                    self.mutated(ir, child)
                } else {
                    child
                };
                children.push(child);
            }
        }
        if self.config.distinct_ptx {
            self.refresh_repeats(ir, members, &mut children);
            let duplicates = duplicate_count(members);
            let elite_patches: Vec<Patch> = order[..elites.max(1)]
                .iter()
                .map(|&i| members[i].patch.clone())
                .collect();
            for _ in 0..duplicates {
                let parent = elite_patches[self.rng.gen_range(0..elite_patches.len())].clone();
                children.push(self.mutated(ir, parent));
            }
        }
        children
    }

    /// `patch` with one more random edit, or unchanged when none was found.
    pub(super) fn mutated(&mut self, ir: &KernelIr, patch: Patch) -> Patch {
        match mutate(ir, &patch, &mut self.rng, self.config.mutation_tries) {
            Some(mutated) => mutated,
            None => {
                self.counters.mutation_failures += 1;
                patch
            }
        }
    }

    /// The best standing of `tournament_size` members drawn at random; where
    /// that is a rejected member and `valid` (ascending: the valid members,
    /// with `valid_parents_first`) names any, a tournament of those instead.
    fn tournament(&mut self, standing: &[usize], valid: &[usize]) -> usize {
        let size = self.config.tournament_size;
        let winner = (0..size)
            .map(|_| self.rng.gen_range(0..standing.len()))
            .min_by_key(|&i| (standing[i], i))
            .expect("tournament size is at least 1");
        if valid.is_empty() || valid.binary_search(&winner).is_ok() {
            return winner;
        }
        (0..size)
            .map(|_| valid[self.rng.gen_range(0..valid.len())])
            .min_by_key(|&i| (standing[i], i))
            .expect("tournament size is at least 1")
    }

    pub(super) fn elite_count(&self, n: usize) -> usize {
        ((n as f64 * self.config.elite_fraction).round() as usize).min(n - 1)
    }

    /// The train cost a new variant must beat to matter to selection: per
    /// island, the `elite_count`-th lowest cost (beating it enters the
    /// elite); where an island has fewer valid members than elites, every
    /// valid variant enters, and then what must be measured with care is
    /// only a variant that may be promoted: the promotion bar (the
    /// original's 1.0, or the best validated variant's train cost). The
    /// most lenient island's value; before the initial population, the bar.
    pub(super) fn race_threshold(&self) -> f64 {
        let bar = self.promotion_bar();
        if self.population.is_empty() {
            return bar;
        }
        let mut loosest = f64::NEG_INFINITY;
        for range in self.island_ranges() {
            let mut costs: Vec<f64> = self.population[range.clone()]
                .iter()
                .filter_map(|m| m.outcome.cost())
                .collect();
            let k = self.elite_count(range.len()).max(1);
            costs.sort_by(f64::total_cmp);
            loosest = loosest.max(costs.get(k - 1).copied().unwrap_or(bar));
        }
        loosest
    }

    /// An island's elites, then selection over the rest of it together with
    /// the children (with `distinct_ptx`, a PTX already taken ranks behind
    /// every new one); `fresh` (a restart) takes the last places.
    fn survivors(
        &mut self,
        current: Vec<Member>,
        children: Vec<Member>,
        fresh: Vec<Member>,
        size: usize,
    ) -> Vec<Member> {
        let order = self.order(&current);
        let elites = self.elite_count(size);
        let mut slots: Vec<Option<Member>> = current.into_iter().map(Some).collect();
        let mut next: Vec<Member> = order[..elites]
            .iter()
            .map(|&i| slots[i].take().expect("each index once"))
            .collect();
        let mut rest: Vec<Member> = slots.into_iter().flatten().collect();
        rest.extend(children);
        let order = self.order(&rest);
        let keep = size - fresh.len().min(size - elites);
        let mut taken: BTreeSet<String> = next.iter().filter_map(|m| m.ptx_hash.clone()).collect();
        let mut repeats = Vec::new();
        let mut rest: Vec<Option<Member>> = rest.into_iter().map(Some).collect();
        for i in order {
            if next.len() == keep {
                break;
            }
            let m = rest[i].take().expect("each index once");
            let repeat = m
                .ptx_hash
                .as_ref()
                .is_some_and(|h| !taken.insert(h.clone()));
            if repeat && self.config.distinct_ptx {
                repeats.push(m);
            } else {
                next.push(m);
            }
        }
        let room = keep - next.len();
        next.extend(repeats.into_iter().take(room));
        next.extend(fresh.into_iter().take(size - next.len()));
        next
    }

    /// Compiles every patch, answers what the cache knows, assesses the rest
    /// on the train tests (each distinct PTX once), and fills the cache.
    pub(super) fn evaluate(
        &mut self,
        patches: Vec<Patch>,
        backend: &mut dyn Backend,
    ) -> Result<Vec<Member>, EvolveError> {
        let scope = backend.scope();
        let test_set_hash = backend.test_set_hash(TestSet::Train);
        let key = |ptx_hash: &str| CacheKey {
            ptx_hash: ptx_hash.to_string(),
            scope: scope.clone(),
            test_set_hash: test_set_hash.clone(),
        };
        // The threshold of the population the batch competes with, taken
        // before it changes.
        let threshold = self.race_threshold();
        let cache = &self.cache;
        let known = |hash: &str| cache.contains_key(&key(hash));
        let evaluated = backend.evaluate(&patches, TestSet::Train, &known)?;
        let mut builds = Vec::with_capacity(evaluated.len());
        let mut assessed = BTreeSet::new();
        for (i, e) in evaluated.into_iter().enumerate() {
            if let (Ok(b), Some(a)) = (&e.build, &e.assessment) {
                self.cache.insert(key(&b.ptx_hash), Outcome::of(a));
                assessed.insert(i);
            }
            builds.push(e.build);
        }
        let mut members = Vec::with_capacity(patches.len());
        for (i, (patch, build)) in patches.into_iter().zip(builds).enumerate() {
            self.counters.evaluations += 1;
            let member = match build {
                Err(reason) => {
                    self.counters.compile_failures += 1;
                    Member {
                        patch,
                        ptx_hash: None,
                        outcome: Outcome::Rejected {
                            reason: format!("does not compile: {reason}"),
                            kind: "compile".into(),
                        },
                    }
                }
                Ok(b) => {
                    if !assessed.contains(&i) {
                        self.counters.cache_hits += 1;
                    }
                    let outcome = self.cache[&key(&b.ptx_hash)].clone();
                    Member {
                        patch,
                        ptx_hash: Some(b.ptx_hash),
                        outcome,
                    }
                }
            };
            members.push(member);
        }
        self.select_on_generality(&mut members, threshold, backend)?;
        for member in &members {
            match &member.outcome {
                Outcome::Valid { cost, error } => {
                    self.counters.valid += 1;
                    tracing::debug!(edits = member.patch.edits.len(), cost, error, "valid");
                }
                Outcome::Rejected { reason, kind } => {
                    let kind = if kind.is_empty() { "other" } else { kind };
                    *self
                        .counters
                        .rejections
                        .entry(kind.to_string())
                        .or_default() += 1;
                    tracing::debug!(edits = member.patch.edits.len(), %reason, "rejected")
                }
            }
        }
        Ok(members)
    }

    /// Adds the population's valid members to the archive and keeps only the
    /// non-dominated, one per PTX, ordered by cost then error.
    fn update_archive(&mut self) {
        let mut all: Vec<Member> = std::mem::take(&mut self.archive);
        all.extend(
            self.population
                .iter()
                .filter(|m| m.outcome.cost().is_some())
                .cloned(),
        );
        let mut seen = BTreeSet::new();
        all.retain(|m| seen.insert(m.ptx_hash.clone()));
        let points: Vec<_> = all.iter().map(|m| m.outcome.objectives()).collect();
        let fronts = nsga::fronts(&points);
        let mut front: Vec<Member> = all
            .into_iter()
            .zip(fronts)
            .filter(|(_, f)| *f == 0)
            .map(|(m, _)| m)
            .collect();
        front.sort_by(|a, b| {
            let (pa, pb) = (a.outcome.objectives(), b.outcome.objectives());
            let (pa, pb) = (pa.expect("valid"), pb.expect("valid"));
            pa.0.total_cmp(&pb.0)
                .then(pa.1.total_cmp(&pb.1))
                .then(a.patch.edits.len().cmp(&b.patch.edits.len()))
        });
        self.archive = front;
    }
}

/// Indices best first: NSGA-II order, or for the blind control valid members
/// in a random order, then the rejected.
pub(super) fn selection_order(
    selection: Selection,
    members: &[Member],
    rng: &mut ChaCha8Rng,
) -> Vec<usize> {
    let points: Vec<_> = members.iter().map(|m| m.outcome.objectives()).collect();
    match selection {
        Selection::Nsga2 => nsga::order(&points),
        Selection::Blind => {
            let mut idx: Vec<usize> = (0..members.len()).collect();
            idx.shuffle(rng);
            idx.sort_by_key(|&i| points[i].is_none());
            idx
        }
    }
}

pub(super) fn best_cost(population: &[Member]) -> Option<f64> {
    population
        .iter()
        .filter_map(|m| m.outcome.cost())
        .min_by(f64::total_cmp)
}

/// Maps with struct keys as JSON: a list of `[key, value]` pairs.
mod pairs {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::collections::BTreeMap;

    pub fn serialize<K: Serialize, V: Serialize, S: Serializer>(
        map: &BTreeMap<K, V>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.collect_seq(map.iter())
    }

    pub fn deserialize<'de, K, V, D>(d: D) -> Result<BTreeMap<K, V>, D::Error>
    where
        K: Deserialize<'de> + Ord,
        V: Deserialize<'de>,
        D: Deserializer<'de>,
    {
        Ok(Vec::<(K, V)>::deserialize(d)?.into_iter().collect())
    }
}
