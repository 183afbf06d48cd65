//! Breeding a generation, and breeding it a step ahead (docs/evolve.md,
//! "Bred a step ahead"). Where the backend compiles the next batch while
//! it measures this one (`Backend::compiles_ahead`, the GPU backend), each
//! step measures the batch the step before bred, and breeds the next one
//! from the population it starts with: children come from parents one
//! selection older, and survivor selection still sees every measured
//! variant. So the GPUs find the next batch compiled when a step begins,
//! instead of waiting for the compile workers' first variants. Elsewhere a
//! step breeds from the newest population and measures that, as GEVO does.

use super::{Backend, Engine};
use crate::ir::{KernelIr, Patch};
use serde::{Deserialize, Serialize};

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
    /// The batch this step measures. Where the backend compiles ahead, that
    /// is the one the previous step bred (when it fits the islands), and
    /// the next step's is bred now and handed to the backend.
    pub(super) fn batch_for_step(&mut self, ir: &KernelIr, backend: &mut dyn Backend) -> Bred {
        if !backend.compiles_ahead() {
            return self.breed_generation(ir);
        }
        let islands = self.island_ranges().len();
        let batch = match self.ahead.take() {
            Some(bred) if bred.plan.len() == islands => bred,
            _ => self.breed_generation(ir),
        };
        if batch.restart {
            // The restart is under way: the next batch does not repeat it.
            self.stagnant = 0;
        }
        let next = self.breed_generation(ir);
        backend.compile_ahead(&next.patches);
        self.ahead = Some(next);
        batch
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
