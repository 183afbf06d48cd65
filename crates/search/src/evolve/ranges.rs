//! The range of every search parameter (`[evolve]`), checked by
//! [`Config::validate`] wherever a configuration enters: `gevod evolve
//! --config`, the daemon's file (at start, `--check-config`, reload) and
//! [`Engine::new`](super::Engine::new). config/gevod.toml and docs/evolve.md
//! document each (a test compares them with [`RANGES`]).
//!
//! The upper bounds keep one bad number from costing the machine: a
//! population is held in memory twice per generation and each individual
//! costs an evaluation, so 65,536 is already hours per generation.

use super::Config;
use gevo_model::ranges::{Invalid, SettingRange};

type Count = SettingRange<usize>;
type Share = SettingRange<f64>;

pub const POPULATION: Count = Count::new("evolve.population", 4, 65_536);
pub const INITIAL_EDITS: Count = Count::new("evolve.initial_edits", 0, 64);
pub const CROSSOVER_RATE: Share = Share::new("evolve.crossover_rate", 0.0, 1.0);
pub const MUTATION_RATE: Share = Share::new("evolve.mutation_rate", 0.0, 1.0);
pub const ELITE_FRACTION: Share = Share::new("evolve.elite_fraction", 0.0, 1.0);
pub const TOURNAMENT_SIZE: Count = Count::new("evolve.tournament_size", 1, 64);
pub const MUTATION_TRIES: Count = Count::new("evolve.mutation_tries", 1, 10_000);
pub const PROMOTIONS_PER_GENERATION: Count = Count::new("evolve.promotions_per_generation", 0, 64);
pub const MINIMIZE_THRESHOLD: Share = Share::new("evolve.minimize_threshold", 0.0, 1.0);
pub const MAX_TEST_REGRESSION: Share = Share::new("evolve.max_test_regression", 0.0, 1.0);
pub const STAGNATION_GENERATIONS: SettingRange<u64> =
    SettingRange::new("evolve.stagnation_generations", 0, 1_000_000);
pub const VALIDATED_STALL_GENERATIONS: SettingRange<u64> =
    SettingRange::new("evolve.validated_stall_generations", 0, 1_000_000);
pub const RESTART_FRACTION: Share = Share::new("evolve.restart_fraction", 0.0, 1.0);
pub const RESTART_EDITS: Count = Count::new("evolve.restart_edits", 0, 64);
pub const ISLANDS: Count = Count::new("evolve.islands", 1, 1024);
pub const MIGRATION_INTERVAL: SettingRange<u64> =
    SettingRange::new("evolve.migration_interval", 1, 1_000_000);
pub const MIGRANTS: Count = Count::new("evolve.migrants", 0, 1024);
pub const PROMOTION_POOL: Count = Count::new("evolve.promotion_pool", 0, 4096);

/// Each range's key and text (`4 to 65536`), for the documentation's test.
pub fn documented() -> Vec<(&'static str, String)> {
    let counts = [
        POPULATION,
        INITIAL_EDITS,
        TOURNAMENT_SIZE,
        MUTATION_TRIES,
        PROMOTIONS_PER_GENERATION,
        RESTART_EDITS,
        ISLANDS,
        MIGRANTS,
        PROMOTION_POOL,
    ];
    let shares = [
        CROSSOVER_RATE,
        MUTATION_RATE,
        ELITE_FRACTION,
        MINIMIZE_THRESHOLD,
        MAX_TEST_REGRESSION,
        RESTART_FRACTION,
    ];
    let generations = [
        STAGNATION_GENERATIONS,
        VALIDATED_STALL_GENERATIONS,
        MIGRATION_INTERVAL,
    ];
    let counts = counts.iter().map(|r| (r.key, r.text()));
    let shares = shares.iter().map(|r| (r.key, r.text()));
    let generations = generations.iter().map(|r| (r.key, r.text()));
    counts.chain(shares).chain(generations).collect()
}

impl Config {
    /// Checks every parameter's range, then the rules between them; the
    /// error names the key (`evolve.population`).
    pub fn validate(&self) -> Result<(), Invalid> {
        POPULATION.check(self.population)?;
        INITIAL_EDITS.check(self.initial_edits)?;
        CROSSOVER_RATE.check(self.crossover_rate)?;
        MUTATION_RATE.check(self.mutation_rate)?;
        ELITE_FRACTION.check(self.elite_fraction)?;
        TOURNAMENT_SIZE.check(self.tournament_size)?;
        MUTATION_TRIES.check(self.mutation_tries)?;
        PROMOTIONS_PER_GENERATION.check(self.promotions_per_generation)?;
        MINIMIZE_THRESHOLD.check(self.minimize_threshold)?;
        MAX_TEST_REGRESSION.check(self.max_test_regression)?;
        STAGNATION_GENERATIONS.check(self.stagnation_generations)?;
        VALIDATED_STALL_GENERATIONS.check(self.validated_stall_generations)?;
        RESTART_FRACTION.check(self.restart_fraction)?;
        RESTART_EDITS.check(self.restart_edits)?;
        ISLANDS.check(self.islands)?;
        MIGRATION_INTERVAL.check(self.migration_interval)?;
        MIGRANTS.check(self.migrants)?;
        PROMOTION_POOL.check(self.promotion_pool)?;
        let islands = self.island_count();
        if islands > 1 && self.migrants >= self.population / islands {
            return Err(Invalid::new(
                MIGRANTS.key,
                format!(
                    "{} must be fewer than an island's {} individuals",
                    self.migrants,
                    self.population / islands
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_parameter_is_checked_against_its_range() {
        let bad = |f: fn(&mut Config)| {
            let mut c = Config::default();
            f(&mut c);
            c.validate().map_err(|e| e.to_string())
        };
        for (config, expected) in [
            (
                bad(|c| c.population = 1_000_000_000),
                "evolve.population: 1000000000 is out of range (4 to 65536)",
            ),
            (
                bad(|c| c.population = 2),
                "evolve.population: 2 is out of range (4 to 65536)",
            ),
            (
                bad(|c| c.crossover_rate = 1.5),
                "evolve.crossover_rate: 1.5 is out of range (0 to 1)",
            ),
            (
                bad(|c| c.mutation_rate = f64::NAN),
                "evolve.mutation_rate: nan is out of range (0 to 1)",
            ),
            (
                bad(|c| c.tournament_size = 0),
                "evolve.tournament_size: 0 is out of range (1 to 64)",
            ),
            (
                bad(|c| c.initial_edits = 100_000),
                "evolve.initial_edits: 100000 is out of range (0 to 64)",
            ),
            (
                bad(|c| c.islands = 0),
                "evolve.islands: 0 is out of range (1 to 1024)",
            ),
            (
                bad(|c| c.migration_interval = 0),
                "evolve.migration_interval: 0 is out of range (1 to 1000000)",
            ),
            (
                bad(|c| c.promotion_pool = 1 << 20),
                "evolve.promotion_pool: 1048576 is out of range (0 to 4096)",
            ),
            (
                bad(|c| c.migrants = 64),
                "evolve.migrants: 64 must be fewer than an island's 64 individuals",
            ),
        ] {
            assert_eq!(config, Err(expected.to_string()));
        }
        assert_eq!(Config::default().validate(), Ok(()));
        assert_eq!(Config::plain_gevo().validate(), Ok(()));
    }
}
