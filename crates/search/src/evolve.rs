//! The search: GEVO's genetic improvement loop as a value. The engine breeds
//! patches, asks a [`Backend`] to compile and assess them, keeps the
//! population, the Pareto archive and the fitness cache, promotes improving
//! variants through the held-out tests and minimizes them. It does no I/O:
//! compiling and running belong to the backend, persisting to `store`.

mod ahead;
pub mod bounds;
mod diversity;
mod engine;
mod gating;
mod generality;
mod islands;
pub mod nsga;
mod promote;
mod promotion_beside;
pub mod ranges;
mod restart;
mod variation;

pub use engine::{CacheKey, Engine, GenerationReport, IslandReport};
pub use promote::Promotion;

use gevo_ir::{IrError, KernelIr, Patch};
use gevo_model::assessment::{Assessment, TestSummary};
use gevo_model::spec::TestSet;
use gevo_model::utilization::Utilization;
use serde::{Deserialize, Serialize};

/// Search parameters. The defaults are GEVO's, except where
/// `scripts/search-bench.sh` showed that a change helps (docs/evolve.md,
/// "Keeping the search moving"): `tournament_size` and the additions
/// below `selection`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Individuals per generation.
    pub population: usize,
    /// Random valid edits each initial individual gets.
    pub initial_edits: usize,
    /// Chance that two selected parents are crossed over.
    pub crossover_rate: f64,
    /// Chance that a child gets one more random edit.
    pub mutation_rate: f64,
    /// Share of the population (best by NSGA-II order) kept as is.
    pub elite_fraction: f64,
    /// Individuals drawn per tournament. GEVO draws 2; with `distinct_ptx`
    /// copies of the best no longer win many tournaments each, and 4 gives
    /// the selection pressure back.
    pub tournament_size: usize,
    /// Candidate edits drawn before a mutation gives up (the child is kept
    /// unmutated).
    pub mutation_tries: usize,
    /// At most this many new train-best variants per generation are re-run on
    /// the held-out tests.
    pub promotions_per_generation: usize,
    /// Minimization drops an edit when the variant stays valid and its cost
    /// changes by less than this fraction.
    pub minimize_threshold: f64,
    /// A validated variant may be slower with confidence on no held-out
    /// test by more than this fraction (0: on none at all), whatever its
    /// speedup over all of them together.
    pub max_test_regression: f64,
    /// `nsga2` (GEVO's), or `blind`: parents and survivors drawn at random,
    /// ignoring fitness (rejected variants still die). The control that
    /// shows the search's selection is what finds improvements.
    pub selection: Selection,
    /// Individuals with identical PTX count once in selection and survival
    /// (later copies rank behind every distinct member), and a child whose
    /// patch repeats one already in its island or among its siblings gets
    /// a fresh mutation instead of costing an evaluation for nothing.
    pub distinct_ptx: bool,
    /// A tournament won by a rejected member (one that drew no valid member
    /// ranked before it) is drawn again from the valid ones, where the
    /// population has any, so that no child is bred from a rejected parent
    /// while a valid one could be. Off by default until measured on the GPU
    /// (docs/evolve.md, "Valid parents first").
    pub valid_parents_first: bool,
    /// After this many generations without a lower best train cost, part
    /// of each island restarts from the archive (0: never).
    pub stagnation_generations: u64,
    /// After this many generations without a new validated best (nothing
    /// validated counts as none), part of each island restarts from the
    /// archive as after stagnation (0: never). On a GPU the best train
    /// cost is the minimum of noisy measurements and keeps inching down,
    /// so only the validated best says that a long search has stopped
    /// finding.
    pub validated_stall_generations: u64,
    /// Share of an island (its elites excepted) that a restart replaces.
    pub restart_fraction: f64,
    /// Random edits a restarted individual gets on top of the archived
    /// patch it starts from (heavier than a child's one).
    pub restart_edits: usize,
    /// Subpopulations searched side by side (1: one population); at most
    /// one per 4 individuals, whatever this says.
    pub islands: usize,
    /// Generations between migrations (each island's best go to the next).
    pub migration_interval: u64,
    /// Individuals each island sends per migration.
    pub migrants: usize,
    /// The engine keeps this many of the cheapest distinct valid variants
    /// it has seen; promotion picks candidates from them, the Pareto
    /// archive and the population, so a variant that lost its place in the
    /// population can still be validated when the train-best fails the
    /// held-out tests (0: the population only).
    pub promotion_pool: usize,
    /// Valid variants that may enter the next population (at or under the
    /// elite's train cost, or onto the Pareto front) run the generated
    /// held-out tests, where the backend has them; one that fails is
    /// rejected for selection as a train failure is (docs/evolve.md,
    /// "Generality in selection").
    pub generality_in_selection: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Selection {
    Nsga2,
    Blind,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            population: 256,
            initial_edits: 3,
            crossover_rate: 0.8,
            mutation_rate: 0.3,
            elite_fraction: 0.25,
            tournament_size: 4,
            mutation_tries: 50,
            promotions_per_generation: 2,
            minimize_threshold: 0.01,
            max_test_regression: 0.0,
            selection: Selection::Nsga2,
            distinct_ptx: true,
            valid_parents_first: false,
            stagnation_generations: 0,
            validated_stall_generations: 8,
            restart_fraction: 0.5,
            restart_edits: 3,
            islands: 4,
            migration_interval: 4,
            migrants: 2,
            promotion_pool: 16,
            generality_in_selection: true,
        }
    }
}

impl Config {
    /// Islands in use: `islands`, but at most one per 4 individuals.
    pub fn island_count(&self) -> usize {
        self.islands.min(self.population / 4).max(1)
    }

    /// Every behaviour beyond GEVO's own search turned off: the baseline
    /// the benchmark compares against.
    pub fn plain_gevo() -> Config {
        Config {
            tournament_size: 2,
            distinct_ptx: false,
            stagnation_generations: 0,
            validated_stall_generations: 0,
            islands: 1,
            promotion_pool: 0,
            generality_in_selection: false,
            ..Config::default()
        }
    }
}

/// What a fitness is valid for besides the PTX: the backend and the device or
/// arch it ran on. With the test-set hash and the PTX hash it keys the cache.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Scope {
    /// `sim` or `cuda`.
    pub backend: String,
    /// The arch (`sm_90`) or the device the backend measures on.
    pub target: String,
}

/// A compiled variant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Build {
    pub ptx_hash: String,
    pub ptx: String,
}

/// What [`Backend::start_safety_check`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum GateStart {
    /// Decided at once: why the variant must not be validated, if so.
    Verdict(Option<String>),
    /// Running beside the search: see [`Backend::safety_verdicts`].
    Started,
}

/// A promotion that ran beside the search ([`Backend::start_promotion`]),
/// and how it ended.
pub struct EndedPromotion {
    pub promotion: Promotion,
    pub outcome: Result<(), EvolveError>,
}

/// Why a backend could not go on with a batch.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// A stop was requested (Ctrl-C, shutdown): the batch is abandoned.
    #[error("interrupted")]
    Interrupted,
    /// Nothing can be evaluated (the spec no longer loads, workers cannot start).
    #[error("{0}")]
    Failed(String),
}

/// Compiles and runs variants. Per-variant failures (a patch that does not
/// compile, a crashed code generator, a failing test) are values in the
/// results; an `Err` means the whole batch could not be done.
pub trait Backend {
    fn scope(&self) -> Scope;
    /// The hash of the test set's definition, for cache keys.
    fn test_set_hash(&self, set: TestSet) -> String;
    /// Each patch's PTX, or why it has none.
    fn compile(&mut self, patches: &[Patch]) -> Result<Vec<Result<Build, String>>, BackendError>;
    /// Worker processes replaced so far (crashes, hangs, lost GPU contexts).
    fn respawns(&self) -> u64 {
        0
    }
    /// Whether a stop was asked (what makes a batch [`BackendError::Interrupted`]):
    /// the engine's own long work, building a large initial population,
    /// asks too.
    fn stopping(&self) -> bool {
        false
    }
    /// Each patch run on `set`.
    fn assess(&mut self, patches: &[Patch], set: TestSet) -> Result<Vec<Assessment>, BackendError>;

    /// [`assess`](Self::assess), where timing a patch may stop once its
    /// cost ratio's interval lies wholly on one side of `line` (the GPU's
    /// race: a leave-one-out clearly slower than the full patch needs no
    /// 40 rounds to say so). Exact backends measure in full.
    fn assess_against(
        &mut self,
        patches: &[Patch],
        set: TestSet,
        _line: f64,
    ) -> Result<Vec<Assessment>, BackendError> {
        self.assess(patches, set)
    }

    /// Whether `assess(.., TestSet::Generated)` runs generated held-out
    /// tests (the simulator's backends); promotion asks only those. The
    /// GPU backend does not, for now (docs/evolve.md).
    fn runs_generated(&self) -> bool {
        false
    }

    /// Whether what this backend runs and times is the PTX alone (the GPU
    /// backend): two patches with the same PTX are then the same program,
    /// and minimization drops an edit whose removal leaves the PTX as it is
    /// without measuring it. The simulator runs the IR, where such an edit
    /// may still change the cost it counts.
    fn runs_ptx(&self) -> bool {
        false
    }

    /// Checks a variant about to be validated beyond its outputs and
    /// timings (the GPU backend's compute-sanitizer gate): why it must not
    /// be, if so. The simulator checks every run already.
    fn safety_check(&mut self, _build: &Build) -> Result<Option<String>, BackendError> {
        Ok(None)
    }

    /// Starts `safety_check` on `build`: where the backend runs its gate
    /// beside the search (the GPU's compute-sanitizer, in a thread of its
    /// own), [`GateStart::Started`], and the verdict comes later from
    /// [`safety_verdicts`](Self::safety_verdicts); elsewhere the verdict now.
    fn start_safety_check(&mut self, build: &Build) -> Result<GateStart, BackendError> {
        self.safety_check(build).map(GateStart::Verdict)
    }

    /// The verdicts of checks started earlier, by PTX hash (`Some`: why the
    /// variant must not be validated); with `wait`, at least one when any
    /// check is running, waiting for it.
    fn safety_verdicts(
        &mut self,
        _wait: bool,
    ) -> Result<Vec<(String, Option<String>)>, BackendError> {
        Ok(Vec::new())
    }

    /// Drops every started check but `ptx_hash`'s (the end of a search
    /// waits for the best variant's verdict only).
    fn focus_safety_check(&mut self, _ptx_hash: &str) {}

    /// What `safety_check` does here, and has done, in one line.
    fn safety_gate(&self) -> Option<String> {
        None
    }

    /// The train cost a new variant must beat to matter to selection in
    /// the batches that follow (`None`: any valid variant may). A backend
    /// may measure a variant less precisely once it is confidently no
    /// better (the GPU's adaptive measurement); exact backends ignore it.
    fn race_against(&mut self, _threshold: Option<f64>) {}

    /// PTX hashes the engine will drop from its fitness cache at the end
    /// of the next generation (each call names the latest generation's).
    /// A backend whose workers answer the PTX the search knows without
    /// checking it (the GPU backend's known-PTX skip) makes them forget
    /// these, and stops telling them of these, before the engine forgets:
    /// a variant the search no longer knows must be checked again.
    fn forget_known(&mut self, _ptx_hashes: &[String]) {}

    /// Where the backend's workers spent their time since the last call
    /// (the GPU backend; `None` where nothing is measured).
    fn take_utilization(&mut self) -> Option<Utilization> {
        None
    }

    /// Whether this backend compiles the next batch while it measures this
    /// one ([`compile_ahead`](Self::compile_ahead); the GPU backend). The
    /// engine then breeds each generation's batch a step ahead, from the
    /// population one selection older (docs/evolve.md, "Bred a step
    /// ahead"); elsewhere it breeds from the newest, as GEVO does.
    fn compiles_ahead(&self) -> bool {
        false
    }

    /// The patches the next [`evaluate`](Self::evaluate) will ask for come
    /// on `next` while the one that follows this call runs (the engine
    /// breeds them meanwhile), to compile as workers are free.
    fn compile_ahead(&mut self, _next: std::sync::mpsc::Receiver<Vec<Patch>>) {}

    /// Whether this backend promotes beside the search
    /// ([`start_promotion`](Self::start_promotion); the GPU backend: a
    /// promotion shares the workers with the batches that follow it and
    /// none of them waits for it). Elsewhere the engine promotes after each
    /// generation's selection, as GEVO does, and a search stays
    /// deterministic.
    fn promotes_beside(&self) -> bool {
        false
    }

    /// Starts `promotion` in a thread of its own, on a backend that shares
    /// this one's workers: its requests go ahead of those of the batches
    /// that run meanwhile, and waits between them. Called only where
    /// [`promotes_beside`](Self::promotes_beside) says so, and only when
    /// none was started that [`ended_promotion`](Self::ended_promotion) has
    /// not handed back.
    fn start_promotion(
        &mut self,
        _promotion: Promotion,
        _ir: KernelIr,
    ) -> Result<(), BackendError> {
        Err(BackendError::Failed(
            "this backend does not promote beside its evaluations".into(),
        ))
    }

    /// Whether a promotion was started that has not been handed back.
    fn promotion_started(&self) -> bool {
        false
    }

    /// The promotion started beside the search, once it has ended; with
    /// `wait`, this backend's workers serve it until it ends. `None` when
    /// none was started, or without `wait` while it runs.
    fn ended_promotion(&mut self, _wait: bool) -> Result<Option<EndedPromotion>, BackendError> {
        Ok(None)
    }

    /// Compiles every patch and runs on `set` the first patch of each PTX
    /// that `known` (the fitness cache) does not answer. A backend may
    /// overlap the two (the GPU backend does); this one compiles all first.
    fn evaluate(
        &mut self,
        patches: &[Patch],
        set: TestSet,
        known: &(dyn Fn(&str) -> bool + Sync),
    ) -> Result<Vec<Evaluated>, BackendError> {
        let builds = self.compile(patches)?;
        let mut seen = std::collections::BTreeSet::new();
        let to_assess: Vec<usize> = builds
            .iter()
            .enumerate()
            .filter_map(|(i, b)| match b {
                Ok(b) if !known(&b.ptx_hash) && seen.insert(b.ptx_hash.clone()) => Some(i),
                _ => None,
            })
            .collect();
        let batch: Vec<Patch> = to_assess.iter().map(|&i| patches[i].clone()).collect();
        let mut assessments = self.assess(&batch, set)?.into_iter();
        let mut out: Vec<Evaluated> = builds
            .into_iter()
            .map(|build| Evaluated {
                build,
                assessment: None,
            })
            .collect();
        for &i in &to_assess {
            out[i].assessment = assessments.next();
        }
        Ok(out)
    }
}

/// A patch's build, and its assessment when [`Backend::evaluate`] ran it.
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluated {
    pub build: Result<Build, String>,
    pub assessment: Option<Assessment>,
}

#[derive(Debug, thiserror::Error)]
pub enum EvolveError {
    #[error(transparent)]
    Backend(#[from] BackendError),
    #[error("the initial population cannot be built: {0}")]
    Initial(IrError),
    #[error("invalid search configuration: {0}")]
    Config(String),
}

/// A variant's fitness on the train tests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Passed every test: cost relative to the original, and largest error.
    Valid { cost: f64, error: f64 },
    /// Does not compile, or failed a test (the reason names which and why).
    Rejected {
        reason: String,
        /// The failure's kind (`mismatch`, `out_of_bounds`, `race`,
        /// `timeout`, `compile`, ...): what reports count; empty in older
        /// checkpoints.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        kind: String,
    },
}

impl Outcome {
    pub fn objectives(&self) -> nsga::Objectives {
        match self {
            Outcome::Valid { cost, error } => Some((*cost, *error)),
            Outcome::Rejected { .. } => None,
        }
    }

    pub fn cost(&self) -> Option<f64> {
        self.objectives().map(|o| o.0)
    }

    fn of(assessment: &Assessment) -> Outcome {
        match (assessment.first_failure(), assessment.cost_ratio()) {
            (None, Some(cost)) => Outcome::Valid {
                cost,
                error: assessment.error(),
            },
            (Some(reason), _) => Outcome::Rejected {
                reason,
                kind: assessment
                    .tests
                    .iter()
                    .find_map(|t| t.failure.as_ref().map(|f| f.0.clone()))
                    .unwrap_or_default(),
            },
            (None, None) => Outcome::Rejected {
                reason: "no cost measured".into(),
                kind: "no_cost".into(),
            },
        }
    }
}

/// One individual: its patch, the hash of its PTX (when it compiled) and its
/// fitness.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Member {
    pub patch: Patch,
    pub ptx_hash: Option<String>,
    pub outcome: Outcome,
}

/// A variant that passed the held-out tests, minimized.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Validated {
    /// The generation that found it.
    pub generation: u64,
    pub scope: Scope,
    /// The patch as the search found it.
    pub patch: Patch,
    /// The same with every edit that contributes under the threshold dropped.
    pub minimized: Patch,
    /// PTX of the minimized patch.
    pub ptx: String,
    pub ptx_hash: String,
    /// Train cost ratio of the patch as found.
    pub train_cost: f64,
    /// Original cost over variant cost on the held-out tests (minimized patch).
    pub speedup: f64,
    /// 95% confidence interval of the speedup (a bootstrap over the GPU's
    /// timing rounds). The simulator is deterministic, so there it is the
    /// point itself.
    pub interval: (f64, f64),
    /// The minimized patch's held-out results.
    pub heldout: Vec<TestSummary>,
}

/// A train-best variant that the held-out tests rejected.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromotionFailure {
    pub generation: u64,
    pub patch: Patch,
    pub ptx_hash: String,
    pub train_cost: f64,
    /// Which held-out test failed, and how.
    pub reason: String,
    /// `sanitizer` (the GPU safety gate refused it), `heldout` (the
    /// held-out tests did) or `generated` (a generated held-out test did);
    /// empty in older stores.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
}

/// Running totals of one search.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Counters {
    /// Fitness requests: every individual evaluated, cache hits included.
    pub evaluations: u64,
    /// Of those, answered by the fitness cache.
    pub cache_hits: u64,
    /// Of those, valid.
    pub valid: u64,
    /// Variants whose patch did not compile.
    pub compile_failures: u64,
    /// Crossover children that did not replay and were replaced by a parent.
    pub crossover_fallbacks: u64,
    /// Mutations that found no valid edit within the tries.
    pub mutation_failures: u64,
    /// Children bred from a rejected member: a tournament that drew only
    /// rejected members (a population short of valid ones), or a crossover
    /// with one. Most such children are rejected too.
    #[serde(default)]
    pub children_of_rejected: u64,
    /// Variants run on the generated held-out tests for selection
    /// (`generality_in_selection`), each PTX once.
    #[serde(default)]
    pub generality_checks: u64,
    /// Rejected evaluations by the failure's kind (cache hits included).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub rejections: std::collections::BTreeMap<String, u64>,
}

impl Counters {
    pub fn cache_hit_rate(&self) -> f64 {
        self.cache_hits as f64 / self.evaluations.max(1) as f64
    }

    pub fn valid_share(&self) -> f64 {
        self.valid as f64 / self.evaluations.max(1) as f64
    }
}
