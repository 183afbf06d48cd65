//! Breeding a generation, and breeding it a step ahead (docs/evolve.md,
//! "Bred a step ahead"). Where the backend compiles the next batch while
//! it measures this one (`Backend::compiles_ahead`, the GPU backend), each
//! step measures the batch the step before bred, and breeds the next one
//! from the population it starts with, in a thread of its own while the
//! batch is measured: children come from parents one selection older, and
//! survivor selection still sees every measured variant. So the GPUs find
//! the next batch compiled when a step begins, and wait neither for the
//! compile workers' first variants nor for breeding. Elsewhere a step
//! breeds from the newest population and measures that, as GEVO does.

use super::{Backend, Engine, EvolveError, Member};
use gevo_ir::{KernelIr, Patch};
use serde::{Deserialize, Serialize};
use std::sync::mpsc;

/// One generation's batch: every island's children, then its restarted
/// individuals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bred {
    pub(super) patches: Vec<Patch>,
    /// Per island, in order: its children and its restarted individuals.
    pub(super) plan: Vec<(usize, usize)>,
    /// Whether it restarts part of every island (stagnation).
    pub(super) restart: bool,
}

impl Engine {
    /// The batch this step measures: where the backend compiles ahead, the
    /// one the previous step bred (when it fits the islands).
    pub(super) fn batch_for_step(&mut self, ir: &KernelIr, backend: &dyn Backend) -> Bred {
        let bred = match self.ahead.take() {
            Some(bred)
                if backend.compiles_ahead() && bred.plan.len() == self.config.island_count() =>
            {
                bred
            }
            _ => self.breed_generation(ir),
        };
        if bred.restart {
            // The restart is under way: the next batch does not repeat it.
            self.note_restart();
        }
        bred
    }

    /// Evaluates `batch`; where the backend compiles ahead, the next
    /// step's batch is bred meanwhile, in a thread of its own, and sent to
    /// the backend as soon as it is. Breeding there uses the engine's
    /// random stream before selection does, as it would here, so the search
    /// is the same as one that bred first (`self.ahead` holds it).
    pub(super) fn evaluate_breeding_ahead(
        &mut self,
        batch: Vec<Patch>,
        ir: &KernelIr,
        backend: &mut dyn Backend,
    ) -> Result<Vec<Member>, EvolveError> {
        if !backend.compiles_ahead() {
            return self.evaluate(batch, backend);
        }
        // Breeding needs no fitness cache: the copy goes without it.
        let cache = std::mem::take(&mut self.cache);
        let mut breeder = self.clone();
        self.cache = cache;
        let (sender, next) = mpsc::channel();
        backend.compile_ahead(next);
        let (evaluated, breeder) = std::thread::scope(|s| {
            let breeding = s.spawn(move || {
                let bred = breeder.breed_generation(ir);
                let _ = sender.send(bred.patches.clone());
                breeder.ahead = Some(bred);
                breeder
            });
            let evaluated = self.evaluate(batch, backend);
            (evaluated, breeding.join().expect("breeding does not panic"))
        });
        // All that breeding changes (evaluation changes none of it).
        self.rng = breeder.rng;
        self.counters.crossover_fallbacks = breeder.counters.crossover_fallbacks;
        self.counters.mutation_failures = breeder.counters.mutation_failures;
        self.ahead = breeder.ahead;
        evaluated
    }

    /// Every island breeds from its members, and restarts part of them
    /// where the search stagnated; the whole generation is one batch, so
    /// islands cost the backend nothing in parallelism.
    fn breed_generation(&mut self, ir: &KernelIr) -> Bred {
        let restart = self.restart_due();
        let mut bred = Bred {
            patches: Vec::new(),
            plan: Vec::new(),
            restart,
        };
        for range in self.island_ranges() {
            let members = self.population[range].to_vec();
            let children = self.breed(ir, &members);
            let fresh = if restart {
                self.restart_patches(ir, &members)
            } else {
                Vec::new()
            };
            bred.plan.push((children.len(), fresh.len()));
            bred.patches.extend(children);
            bred.patches.extend(fresh);
        }
        bred
    }
}
