//! One generation of [`Engine::step`]: promotion beside the search, the
//! initial population or breeding and survivor selection, promotion, and
//! the generation's report. Every RNG draw happens in the order it always
//! did, so a search stays deterministic and exactly resumable.

use super::super::ahead::Bred;
use super::super::diversity::distinct_count;
use super::super::{Backend, Counters, EvolveError, Member, PromotionFailure, Validated};
use super::{Engine, GenerationReport};
use gevo_ir::KernelIr;
use gevo_model::utilization::{EngineSpent, Utilization};
use std::collections::BTreeMap;
use std::time::Instant;

/// Adds the wall time since the previous lap to one part of a generation.
struct Stopwatch(Instant);

impl Stopwatch {
    /// Adds the seconds since the last lap to `part` and starts the next.
    fn lap(&mut self, part: &mut f64) {
        *part += self.0.elapsed().as_secs_f64();
        self.0 = Instant::now();
    }
}

impl Engine {
    /// Runs one generation on `self` (the caller's copy, kept only when
    /// this succeeds) and reports it.
    pub(super) fn advance(
        &mut self,
        ir: &KernelIr,
        backend: &mut dyn Backend,
    ) -> Result<GenerationReport, EvolveError> {
        let before = self.counters.clone();
        let generation = self.generations;
        let mut spent = EngineSpent::default();
        let mut watch = Stopwatch(Instant::now());
        backend.race_against(Some(self.race_threshold()));
        let (mut validated, mut promotion_failures) = (Vec::new(), Vec::new());
        // Where the backend promotes beside its evaluations, the previous
        // generation's candidates are promoted while the next batches are
        // measured, none of which waits for it (docs/evolve.md, "Promotion
        // beside the search").
        let beside = backend.promotes_beside();
        if beside && !self.population.is_empty() {
            self.resume_beside(
                ir,
                backend,
                generation,
                (&mut validated, &mut promotion_failures),
                &mut spent,
            )?;
        }
        let (restarted, migrated) = if self.population.is_empty() {
            let initial = self.initial(ir, backend)?;
            watch.lap(&mut spent.breed_s);
            self.population = self.evaluate(initial, backend)?;
            watch.lap(&mut spent.evaluate_s);
            (0, 0)
        } else {
            self.breed_and_select(ir, backend, generation, &mut watch, &mut spent)?
        };
        self.update_archive();
        self.update_pool();
        self.note_progress();
        watch.lap(&mut spent.select_s);
        if beside {
            // A promotion that ended during this batch reports with it.
            self.take_ended_beside(backend, &mut validated, &mut promotion_failures, &mut spent)?;
        } else {
            let (passed, rejected) = self.collect_gates(backend, None)?;
            validated.extend(passed);
            promotion_failures.extend(rejected);
            let (promoted, failed) = self.promote(ir, backend, generation)?;
            validated.extend(promoted);
            promotion_failures.extend(failed);
        }
        watch.lap(&mut spent.promote_s);
        let forgotten = self.bound_state();
        backend.forget_known(&forgotten);
        self.generations += 1;
        Ok(GenerationReport {
            validated,
            promotion_failures,
            // Measured backends only: the simulator's reports stay free of
            // wall times, so equal searches give equal reports.
            utilization: backend
                .take_utilization()
                .map(|u| Utilization { engine: spent, ..u }),
            ..self.report(generation, &before, restarted, migrated)
        })
    }

    /// Takes in what the safety gate and a promotion beside the search
    /// finished, then starts the previous generation's promotion when none
    /// is running.
    fn resume_beside(
        &mut self,
        ir: &KernelIr,
        backend: &mut dyn Backend,
        generation: u64,
        (validated, failures): (&mut Vec<Validated>, &mut Vec<PromotionFailure>),
        spent: &mut EngineSpent,
    ) -> Result<(), EvolveError> {
        let (passed, rejected) = self.collect_gates(backend, None)?;
        validated.extend(passed);
        failures.extend(rejected);
        self.take_ended_beside(backend, validated, failures, spent)?;
        if !backend.promotion_started() {
            let promotion = self.promotion(generation.saturating_sub(1));
            if !promotion.is_empty() {
                backend.start_promotion(promotion, ir.clone())?;
            }
        }
        Ok(())
    }

    /// Breeds and measures the next batch, then selects each island's
    /// survivors: how many individuals were restarted and how many migrated.
    fn breed_and_select(
        &mut self,
        ir: &KernelIr,
        backend: &mut dyn Backend,
        generation: u64,
        watch: &mut Stopwatch,
        spent: &mut EngineSpent,
    ) -> Result<(usize, usize), EvolveError> {
        let Bred {
            patches: batch,
            plan,
            restart,
        } = self.batch_for_step(ir, backend);
        let ranges = self.island_ranges();
        watch.lap(&mut spent.breed_s);
        let mut evaluated = self
            .evaluate_breeding_ahead(batch, ir, backend)?
            .into_iter();
        watch.lap(&mut spent.evaluate_s);
        let mut restarted = 0;
        let mut next = Vec::with_capacity(self.config.population);
        for (range, (children, fresh)) in ranges.into_iter().zip(plan) {
            let current = self.population[range.clone()].to_vec();
            let children: Vec<Member> = evaluated.by_ref().take(children).collect();
            let fresh: Vec<Member> = evaluated.by_ref().take(fresh).collect();
            restarted += fresh.len();
            next.extend(self.survivors(current, children, fresh, range.len()));
        }
        self.population = next;
        if restart {
            self.note_restart();
            self.restarts.push(generation);
        }
        Ok((restarted, self.migrate(generation)))
    }

    /// The report of `generation` from the engine's state after it, with
    /// no promotions and no utilization (the caller adds those).
    fn report(
        &self,
        generation: u64,
        before: &Counters,
        restarted: usize,
        migrated: usize,
    ) -> GenerationReport {
        GenerationReport {
            generation,
            evaluations: self.counters.evaluations - before.evaluations,
            cache_hits: self.counters.cache_hits - before.cache_hits,
            valid: self
                .population
                .iter()
                .filter(|m| m.outcome.cost().is_some())
                .count(),
            best_cost: self.best_cost(),
            validated: Vec::new(),
            promotion_failures: Vec::new(),
            rejections: self.rejections_since(before),
            distinct_ptx: distinct_count(&self.population),
            restarted,
            stagnant: self.stagnant,
            stalled: self.stalled,
            migrated,
            islands: self.island_reports(),
            utilization: None,
        }
    }

    /// Rejections by kind counted since `before`, kinds with none left out.
    fn rejections_since(&self, before: &Counters) -> BTreeMap<String, u64> {
        self.counters
            .rejections
            .iter()
            .map(|(k, n)| {
                (
                    k.clone(),
                    n - before.rejections.get(k).copied().unwrap_or(0),
                )
            })
            .filter(|(_, n)| *n > 0)
            .collect()
    }
}
