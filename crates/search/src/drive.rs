//! One job driven, the same way for `gevod evolve` and for each of the
//! daemon's slots: opened (created with its seeds, or resumed from its
//! checkpoint), its initial population built before any worker starts,
//! stepped a generation at a time with every generation committed to the
//! store, until its goal, a time limit or a stop; validation happens inside
//! each step (promotion), and the best validated variant is exported to a
//! job directory. The callers own only what differs between them: which
//! job and workers (`worker::setup`, the daemon's factory), and how results
//! are shown (`Publish`).

use crate::evolve::{
    Backend, BackendError, Config, Engine, EvolveError, GenerationReport, PromotionFailure, Scope,
    Validated,
};
use crate::seed::{self, SeedError, Seeding};
use crate::store::{JobRecord, Origin, Store, StoreError};
use gevo_client::export::ExportError;
use gevo_ir::{content_hash, KernelIr, Patch};
use gevo_model::spec::Spec;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

#[derive(Debug, thiserror::Error)]
pub enum DriveError {
    #[error("{}: job {id} has no checkpoint", store.display())]
    NoCheckpoint { store: PathBuf, id: String },
    #[error("checkpoint: {0}")]
    Checkpoint(#[from] StoreError),
    #[error(transparent)]
    Seed(#[from] SeedError),
    #[error(transparent)]
    Evolve(EvolveError),
    #[error("exporting the best variant: {0}")]
    Export(#[from] ExportError),
}

/// When a run of the driver ends. The goal ends the job; the rest end only
/// this run of it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Limits {
    /// Generations past the initial population (the job's goal).
    pub generations: Option<u64>,
    /// Evaluations over the whole job, cache hits included (the job's goal).
    pub evaluations: Option<u64>,
    /// Checked between generations: a generation under way finishes first.
    pub deadline: Option<Instant>,
}

impl Limits {
    /// Whether the job has reached its goal.
    pub fn goal_met(&self, engine: &Engine) -> bool {
        // Generation 0 is the initial population.
        self.generations.is_some_and(|n| engine.generations() > n)
            || self
                .evaluations
                .is_some_and(|n| engine.counters().evaluations >= n)
    }

    /// Whether the deadline has passed.
    pub fn time_up(&self) -> bool {
        self.deadline.is_some_and(|d| Instant::now() >= d)
    }
}

/// Why [`Driver::run`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The goal was met: the job is done.
    Done,
    /// The deadline passed between generations.
    TimeUp,
    /// The stop flag was seen between generations.
    Stopped,
    /// The backend was told to stop during a generation, which is
    /// abandoned: the engine is as of the last commit, and the workers may
    /// be mid-request, so they should not be reused.
    Interrupted,
}

/// What a caller does with each committed generation.
pub trait Publish {
    /// After the generation is in the store; `done`: the goal is met.
    fn committed(&mut self, engine: &Engine, report: &GenerationReport, done: bool);
    /// A validated variant better than the last one published (the first
    /// one seen in this driver's life included).
    fn new_best(&mut self, engine: &Engine, best: &Validated);
}

/// A job of the store with its IR and its engine as of the last commit.
pub struct Driver {
    id: String,
    ir: KernelIr,
    engine: Engine,
    /// The PTX hash of the best variant handed to `Publish::new_best`.
    published: Option<String>,
}

/// A new job's initial population: the given patches first (a user's
/// own), then, unless `fresh`, those carried over from the state's earlier
/// job of the same spec (`seed::earlier_job`).
pub struct Start {
    pub config: Config,
    pub seed: u64,
    pub patches: Vec<Patch>,
    pub fresh: bool,
}

impl Driver {
    /// Resumes job `id` from its checkpoint.
    pub fn resume(store: &Store, id: &str, ir: KernelIr) -> Result<Self, DriveError> {
        let engine = store
            .checkpoint(id)?
            .ok_or_else(|| DriveError::NoCheckpoint {
                store: store.path().to_path_buf(),
                id: id.to_string(),
            })?;
        Ok(Self::with_engine(id, ir, engine))
    }

    /// Creates `record`'s job in the store, seeded as `start` says; the
    /// origin of carried seeds is kept under `seed::origin_key`.
    pub fn create(
        store: &Store,
        record: &JobRecord,
        ir: KernelIr,
        start: Start,
    ) -> Result<(Self, Option<Origin>), DriveError> {
        let seeding = match start.fresh {
            true => None,
            false => match seed::earlier_job(store, record)? {
                Some(from) => seed::from_job(store, &from, 0, &ir)?,
                None => None,
            },
        };
        let (engine, origin) = new_engine(start.config, start.seed, start.patches, seeding)?;
        if let Some(origin) = &origin {
            store.put_setting(&seed::origin_key(&record.id), origin)?;
        }
        store.create_job(record, &engine)?;
        Ok((Self::with_engine(&record.id, ir, engine), origin))
    }

    pub fn with_engine(id: &str, ir: KernelIr, engine: Engine) -> Self {
        Self {
            id: id.to_string(),
            ir,
            engine,
            published: None,
        }
    }

    pub fn id(&self) -> &str {
        &self.id
    }
    pub fn ir(&self) -> &KernelIr {
        &self.ir
    }
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Builds the initial population's patches before the workers start (a
    /// large one takes minutes), asking `stop` between individuals: `false`
    /// when it said stop. Nothing to do once the search has begun.
    pub fn prepare(&mut self, stop: &dyn Fn() -> bool) -> Result<bool, DriveError> {
        self.engine
            .build_initial(&self.ir, stop)
            .map_err(DriveError::Evolve)
    }

    /// Steps the engine on `backend` until `limits` or `stop` end the run,
    /// committing each generation and publishing it, and each new best.
    /// The goal and the stop are also asked before the first generation.
    pub fn run(
        &mut self,
        store: &Store,
        backend: &mut dyn Backend,
        limits: &Limits,
        stop: &AtomicBool,
        publish: &mut dyn Publish,
    ) -> Result<Ended, DriveError> {
        loop {
            let ended = if limits.goal_met(&self.engine) {
                Some(Ended::Done)
            } else if stop.load(Ordering::Relaxed) {
                Some(Ended::Stopped)
            } else if limits.time_up() {
                Some(Ended::TimeUp)
            } else {
                None
            };
            if let Some(ended) = ended {
                return self.settle(store, backend, publish, ended);
            }
            let started = Instant::now();
            let report = match self.engine.step(&self.ir, backend) {
                Ok(report) => report,
                Err(EvolveError::Backend(BackendError::Interrupted)) => {
                    return Ok(Ended::Interrupted)
                }
                Err(e) => return Err(DriveError::Evolve(e)),
            };
            let took = started.elapsed().as_secs_f64();
            store.commit_generation_took(&self.id, &self.engine, &report, Some(took))?;
            publish.committed(&self.engine, &report, limits.goal_met(&self.engine));
            self.publish_best(publish);
        }
    }

    /// The end of a run: on its goal or deadline, ends the promotion
    /// running beside the search and promotes the last generation's
    /// candidates where they wait for a later step (`Engine::promote_last`); then waits for the safety gate's verdict on the best
    /// variant it is still checking (`Engine::settle`: a validated variant
    /// found in the last generations is not left for a resume to check
    /// again) and commits what it decided. A stop that reached the backend kills the checks: they stay in
    /// the checkpoint, checked again on resume, and the run ends
    /// [`Ended::Stopped`] (the gate is apart from the workers, which are
    /// not mid-request, so a daemon may keep them).
    fn settle(
        &mut self,
        store: &Store,
        backend: &mut dyn Backend,
        publish: &mut dyn Publish,
        ended: Ended,
    ) -> Result<Ended, DriveError> {
        let settled = if matches!(ended, Ended::Stopped) {
            self.engine.settle(backend)
        } else {
            self.settle_last(backend)
        };
        let (validated, failures) = match settled {
            Ok(settled) => settled,
            Err(EvolveError::Backend(BackendError::Interrupted)) => return Ok(Ended::Stopped),
            Err(e) => return Err(DriveError::Evolve(e)),
        };
        if !validated.is_empty() || !failures.is_empty() {
            store.commit_promotions(&self.id, &self.engine, &validated, &failures)?;
            self.publish_best(publish);
        }
        Ok(ended)
    }

    /// A search that ended on its goal or deadline: the promotion still
    /// running beside it, served to its end, and the last generation's
    /// (`Engine::promote_last`), then the gate's verdicts.
    fn settle_last(
        &mut self,
        backend: &mut dyn Backend,
    ) -> Result<(Vec<Validated>, Vec<PromotionFailure>), EvolveError> {
        let (mut validated, mut failures) = self.engine.promote_last(&self.ir, backend)?;
        let (passed, rejected) = self.engine.settle(backend)?;
        validated.extend(passed);
        failures.extend(rejected);
        Ok((validated, failures))
    }

    fn publish_best(&mut self, publish: &mut dyn Publish) {
        if let Some(best) = self.engine.best_validated() {
            if self.published.as_ref() != Some(&best.ptx_hash) {
                self.published = Some(best.ptx_hash.clone());
                publish.new_best(&self.engine, best);
            }
        }
    }
}

/// A new job's engine: `config` and `seed`, seeded with `patches` (a
/// user's own) and then those `carried` from an earlier job, whose origin
/// is returned. `Driver::create` and the daemon both make a new job's
/// engine here; each picks the earlier job its own way.
pub fn new_engine(
    config: Config,
    seed: u64,
    mut patches: Vec<Patch>,
    carried: Option<Seeding>,
) -> Result<(Engine, Option<Origin>), DriveError> {
    let mut engine = Engine::new(config, seed).map_err(DriveError::Evolve)?;
    let origin = carried.map(|Seeding { seeds, origin }| {
        patches.extend(seeds);
        origin
    });
    engine.seed_with(patches);
    Ok((engine, origin))
}

/// The id and record of a `gevod evolve` job: the spec, IR, scope, seed,
/// search settings and starting patches name it, so that the same command
/// finds its checkpoint again and another search gets another id.
pub struct Identity<'a> {
    pub spec_path: &'a Path,
    pub spec: &'a Spec,
    pub ir: &'a KernelIr,
    pub scope: &'a Scope,
    pub config: &'a Config,
    pub seed: u64,
    pub start: &'a [Patch],
}

impl Identity<'_> {
    pub fn record(&self) -> JobRecord {
        let mut identity = serde_json::json!({
            "spec": self.spec.content_hash(), "ir": self.ir.ir_hash(), "scope": self.scope,
            "seed": self.seed, "config": self.config,
        });
        // Starting patches make another search (and leave other jobs' ids as they were).
        if !self.start.is_empty() {
            identity["start"] = serde_json::json!(self.start);
        }
        let stem = self
            .spec_path
            .file_name()
            .and_then(|n| n.to_str())
            .map(|n| n.trim_end_matches(".toml").trim_end_matches(".gevo"))
            .unwrap_or("kernel");
        let id = format!(
            "{stem}-{}",
            &content_hash(identity.to_string().as_bytes())[..12]
        );
        // Absolute: the report finds the CUDA sources near it from anywhere.
        let spec_path =
            std::path::absolute(self.spec_path).unwrap_or_else(|_| self.spec_path.to_path_buf());
        JobRecord::new(
            id,
            spec_path,
            self.spec.text(),
            self.ir,
            self.scope,
            self.seed,
        )
    }
}

/// The files of a variant exported to a job directory.
#[derive(Debug, Clone, PartialEq)]
pub struct Exported {
    pub ptx: PathBuf,
    pub patch: PathBuf,
    pub minimized: PathBuf,
}

/// Writes `best`'s PTX and patches into `dir` (each file atomically):
/// `best.ptx`, `best.patch.json`, `best.min.patch.json`.
pub fn export_to(dir: &Path, best: &Validated) -> Result<Exported, DriveError> {
    let files = Exported {
        ptx: dir.join("best.ptx"),
        patch: dir.join("best.patch.json"),
        minimized: dir.join("best.min.patch.json"),
    };
    let write = gevo_client::export::write_atomic;
    write(&files.ptx, best.ptx.as_bytes())?;
    write(&files.patch, (best.patch.to_json() + "\n").as_bytes())?;
    write(
        &files.minimized,
        (best.minimized.to_json() + "\n").as_bytes(),
    )?;
    Ok(files)
}
