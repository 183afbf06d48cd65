//! Checkpoints and results in redb: one file (`gevod.redb`) per state
//! directory, a versioned schema, and one write transaction per generation,
//! so a process killed at any moment restarts from the last committed
//! generation with nothing committed lost.
//!
//! Values are JSON (serde) so a record is readable and a schema change is a
//! migration over plain data.
//!
//! Bounded for a job that never stops (docs/daemon.md, "The store's
//! size"): a generation's statistics (what the report plots) are kept for
//! every generation, its population only for the last [`FULL_GENERATIONS`],
//! in a table of its own so that dropping one frees whole pages. Promotion
//! failures are kept for the last [`KEPT_FAILURES`] per job. Resume needs
//! only the engine (the checkpoint), transplant its population and
//! validated variants. The file is compacted when the store is opened, and
//! after a generation once it grew enough since (`compact`).

use crate::evolve::{Engine, GenerationReport, Member, PromotionFailure, Validated};
use redb::{Database, ReadableTable, TableDefinition, TableHandle};
use serde::{de::DeserializeOwned, Serialize};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, RwLock};

mod compact;
mod records;
pub use compact::{GROWTH_MIN, GROWTH_PERCENT};
pub use records::{DaemonJob, GenerationRecord, JobRecord, Origin, Tuned};

/// The schema this build writes. Older stores are migrated on open; newer
/// ones are refused.
pub const SCHEMA_VERSION: u64 = 1;
pub const FILE_NAME: &str = "gevod.redb";
/// Generation records that keep their whole population.
pub const FULL_GENERATIONS: u64 = 8;
/// Promotion failures kept per job (the newest), as many as the engine keeps.
pub const KEPT_FAILURES: u64 = crate::evolve::bounds::KEPT_PROMOTION_FAILURES as u64;

const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
/// job id -> `JobRecord`
const JOBS: TableDefinition<&str, &[u8]> = TableDefinition::new("jobs");
/// job id -> `Engine` (the checkpoint)
const ENGINES: TableDefinition<&str, &[u8]> = TableDefinition::new("engines");
/// (job id, generation) -> `GenerationRecord`, its population and the
/// variants its report repeats from their own tables left out (stores
/// written before the populations table kept them here)
const GENERATIONS: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("generations");
/// (job id, generation) -> `Vec<Member>`: the last [`FULL_GENERATIONS`] only
const POPULATIONS: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("populations");
/// (job id, sequence) -> `Validated`
const VALIDATED: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("validated");
/// (job id, sequence) -> `PromotionFailure`
const FAILURES: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("promotion_failures");
/// job id -> `DaemonJob` (what `gevod serve` knows of a job beyond the engine)
const DAEMON_JOBS: TableDefinition<&str, &[u8]> = TableDefinition::new("daemon_jobs");
/// name -> JSON value: `gevod serve`'s own settings (client watch roots)
const SETTINGS: TableDefinition<&str, &[u8]> = TableDefinition::new("settings");
/// `<job>/<ptx hash>` -> a validated variant's edit contributions (`contrib`).
const CONTRIBUTIONS: TableDefinition<&str, &[u8]> = TableDefinition::new("contributions");

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{}: {source}", path.display())]
    Db {
        path: PathBuf,
        #[source]
        source: redb::Error,
    },
    #[error("{}: cannot create the state directory: {source}", path.display())]
    Dir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: cannot put the new store in place: {source}", path.display())]
    Place {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: schema version {found} was written by a newer gevod (this one reads up to {SCHEMA_VERSION})", path.display())]
    TooNew { path: PathBuf, found: u64 },
    #[error("{}: record {key} is unreadable: {source}", path.display())]
    Record {
        path: PathBuf,
        key: String,
        #[source]
        source: serde_json::Error,
    },
}

pub struct Store {
    path: PathBuf,
    /// Transactions hold it for reading, compaction for writing (`compact`).
    db: RwLock<Database>,
    compaction: Mutex<compact::Compaction>,
}

impl Store {
    /// Opens (creating if needed) `<dir>/gevod.redb` and brings its schema
    /// up to date.
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        std::fs::create_dir_all(dir).map_err(|source| StoreError::Dir {
            path: dir.to_path_buf(),
            source,
        })?;
        let path = dir.join(FILE_NAME);
        if !path.exists() {
            create_whole(&path)?;
        }
        let mut db = Database::create(&path).map_err(|e| db_error(&path, e))?;
        // Space freed by thinned records goes back to the file system here:
        // redb reuses freed pages while running, but never shrinks the file.
        if let Err(e) = db.compact() {
            tracing::warn!(store = %path.display(), error = %e, "compacting the store");
        }
        let len = std::fs::metadata(&path).map_or(0, |m| m.len());
        let store = Store {
            path,
            db: RwLock::new(db),
            compaction: Mutex::new(compact::Compaction::new(len)),
        };
        store.migrate()?;
        Ok(store)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Creates every table and records the schema version. Version 1 is the
    /// first; a later version adds its step here (read old records, write
    /// new ones, bump the version) inside the same transaction.
    fn migrate(&self) -> Result<(), StoreError> {
        let txn = self.begin_write()?;
        {
            let mut meta = txn.open_table(META).map_err(|e| self.err(e))?;
            let found = meta
                .get("schema_version")
                .map_err(|e| self.err(e))?
                .map(|v| v.value());
            match found {
                Some(v) if v > SCHEMA_VERSION => {
                    return Err(StoreError::TooNew {
                        path: self.path.clone(),
                        found: v,
                    })
                }
                Some(SCHEMA_VERSION) => {}
                // Fresh store (or, later, an older version to migrate).
                _ => {
                    meta.insert("schema_version", SCHEMA_VERSION)
                        .map_err(|e| self.err(e))?;
                }
            }
            txn.open_table(JOBS).map_err(|e| self.err(e))?;
            txn.open_table(ENGINES).map_err(|e| self.err(e))?;
            txn.open_table(GENERATIONS).map_err(|e| self.err(e))?;
            txn.open_table(VALIDATED).map_err(|e| self.err(e))?;
            txn.open_table(FAILURES).map_err(|e| self.err(e))?;
            // Added tables need no version step: older builds never open them.
            txn.open_table(DAEMON_JOBS).map_err(|e| self.err(e))?;
            txn.open_table(SETTINGS).map_err(|e| self.err(e))?;
            txn.open_table(POPULATIONS).map_err(|e| self.err(e))?;
            txn.open_table(CONTRIBUTIONS).map_err(|e| self.err(e))?;
        }
        txn.commit().map_err(|e| self.err(e))
    }

    /// Every job's id, in order.
    pub fn jobs(&self) -> Result<Vec<String>, StoreError> {
        let txn = self.begin_read()?;
        let t = txn.open_table(JOBS).map_err(|e| self.err(e))?;
        let mut ids = Vec::new();
        for entry in t.iter().map_err(|e| self.err(e))? {
            ids.push(entry.map_err(|e| self.err(e))?.0.value().to_string());
        }
        Ok(ids)
    }

    pub fn job(&self, id: &str) -> Result<Option<JobRecord>, StoreError> {
        self.get(JOBS, id)
    }

    /// The engine as of the last committed generation.
    pub fn checkpoint(&self, id: &str) -> Result<Option<Engine>, StoreError> {
        self.get(ENGINES, id)
    }

    /// Records a new job with its starting engine, in one transaction.
    pub fn create_job(&self, job: &JobRecord, engine: &Engine) -> Result<(), StoreError> {
        self.create(job, engine, None)
    }

    /// Commits one generation: its record, the engine after it, and any
    /// variants it validated or failed to promote. All or nothing.
    pub fn commit_generation(
        &self,
        job: &str,
        engine: &Engine,
        report: &GenerationReport,
    ) -> Result<(), StoreError> {
        self.commit_generation_took(job, engine, report, None)
    }

    /// Like [`Store::commit_generation`], recording the generation's wall
    /// time (`seconds`) for the report's evaluations-per-second plot.
    pub fn commit_generation_took(
        &self,
        job: &str,
        engine: &Engine,
        report: &GenerationReport,
        seconds: Option<f64>,
    ) -> Result<(), StoreError> {
        let committed_at = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .ok();
        let record = GenerationRecord {
            report: GenerationReport {
                validated: Vec::new(),
                promotion_failures: Vec::new(),
                ..report.clone()
            },
            population: Vec::new(),
            evaluations: engine.counters().evaluations,
            cache_hits: engine.counters().cache_hits,
            committed_at,
            seconds,
            gevod: Some(env!("CARGO_PKG_VERSION").to_string()),
        };
        let txn = self.begin_write()?;
        {
            let mut engines = txn.open_table(ENGINES).map_err(|e| self.err(e))?;
            engines
                .insert(job, to_json(engine).as_slice())
                .map_err(|e| self.err(e))?;
            let mut generations = txn.open_table(GENERATIONS).map_err(|e| self.err(e))?;
            generations
                .insert((job, report.generation), to_json(&record).as_slice())
                .map_err(|e| self.err(e))?;
            let mut populations = txn.open_table(POPULATIONS).map_err(|e| self.err(e))?;
            populations
                .insert(
                    (job, report.generation),
                    to_json(&engine.population()).as_slice(),
                )
                .map_err(|e| self.err(e))?;
            if let Some(old) = report.generation.checked_sub(FULL_GENERATIONS) {
                populations.remove((job, old)).map_err(|e| self.err(e))?;
            }
            append_promotions(&txn, job, &report.validated, &report.promotion_failures)
                .map_err(|e| self.err(e))?;
        }
        txn.commit().map_err(|e| self.err(e))?;
        self.compact_if_grown();
        Ok(())
    }

    /// Commits promotions decided outside a generation (the safety gate's
    /// last verdicts at the end of a search): the engine after them, and
    /// the variants validated or rejected. All or nothing.
    pub fn commit_promotions(
        &self,
        job: &str,
        engine: &Engine,
        validated: &[Validated],
        failures: &[PromotionFailure],
    ) -> Result<(), StoreError> {
        let txn = self.begin_write()?;
        {
            let mut engines = txn.open_table(ENGINES).map_err(|e| self.err(e))?;
            engines
                .insert(job, to_json(engine).as_slice())
                .map_err(|e| self.err(e))?;
            append_promotions(&txn, job, validated, failures).map_err(|e| self.err(e))?;
        }
        txn.commit().map_err(|e| self.err(e))
    }

    /// Records a new daemon job: its record, starting engine and daemon
    /// entry, in one transaction.
    pub fn create_daemon_job(
        &self,
        job: &JobRecord,
        engine: &Engine,
        entry: &DaemonJob,
    ) -> Result<(), StoreError> {
        self.create(job, engine, Some(entry))
    }

    fn create(
        &self,
        job: &JobRecord,
        engine: &Engine,
        entry: Option<&DaemonJob>,
    ) -> Result<(), StoreError> {
        let txn = self.begin_write()?;
        {
            let mut jobs = txn.open_table(JOBS).map_err(|e| self.err(e))?;
            jobs.insert(job.id.as_str(), to_json(job).as_slice())
                .map_err(|e| self.err(e))?;
            let mut engines = txn.open_table(ENGINES).map_err(|e| self.err(e))?;
            engines
                .insert(job.id.as_str(), to_json(engine).as_slice())
                .map_err(|e| self.err(e))?;
            if let Some(entry) = entry {
                let mut daemon = txn.open_table(DAEMON_JOBS).map_err(|e| self.err(e))?;
                daemon
                    .insert(job.id.as_str(), to_json(entry).as_slice())
                    .map_err(|e| self.err(e))?;
            }
        }
        txn.commit().map_err(|e| self.err(e))
    }

    /// Rewrites a job's record (its spec moved, say); the engine and
    /// history stay.
    pub fn put_job(&self, job: &JobRecord) -> Result<(), StoreError> {
        self.put(JOBS, &job.id, job)
    }

    pub fn put_daemon_job(&self, id: &str, entry: &DaemonJob) -> Result<(), StoreError> {
        self.put(DAEMON_JOBS, id, entry)
    }

    /// Every daemon job, by id.
    pub fn daemon_jobs(&self) -> Result<Vec<(String, DaemonJob)>, StoreError> {
        let txn = self.begin_read()?;
        let t = txn.open_table(DAEMON_JOBS).map_err(|e| self.err(e))?;
        let mut out = Vec::new();
        for entry in t.iter().map_err(|e| self.err(e))? {
            let (k, v) = entry.map_err(|e| self.err(e))?;
            let id = k.value().to_string();
            let job = self.decode(&format!("daemon_jobs/{id}"), v.value())?;
            out.push((id, job));
        }
        Ok(out)
    }

    pub fn setting<T: DeserializeOwned>(&self, name: &str) -> Result<Option<T>, StoreError> {
        self.get(SETTINGS, name)
    }

    pub fn put_setting<T: Serialize>(&self, name: &str, value: &T) -> Result<(), StoreError> {
        self.put(SETTINGS, name, value)
    }

    /// The edit contributions stored beside a job's validated variant (by
    /// the variant's PTX hash).
    pub fn contributions(
        &self,
        job: &str,
        ptx_hash: &str,
    ) -> Result<Option<crate::contrib::Contributions>, StoreError> {
        self.get(CONTRIBUTIONS, &format!("{job}/{ptx_hash}"))
    }

    pub fn put_contributions(
        &self,
        job: &str,
        ptx_hash: &str,
        value: &crate::contrib::Contributions,
    ) -> Result<(), StoreError> {
        self.put(CONTRIBUTIONS, &format!("{job}/{ptx_hash}"), value)
    }

    fn put<T: Serialize>(
        &self,
        table: TableDefinition<&str, &[u8]>,
        key: &str,
        value: &T,
    ) -> Result<(), StoreError> {
        let txn = self.begin_write()?;
        {
            let mut t = txn.open_table(table).map_err(|e| self.err(e))?;
            t.insert(key, to_json(value).as_slice())
                .map_err(|e| self.err(e))?;
        }
        txn.commit().map_err(|e| self.err(e))
    }

    /// Generation `n` of a job, with its population when it is among the
    /// last [`FULL_GENERATIONS`].
    pub fn generation(&self, job: &str, n: u64) -> Result<Option<GenerationRecord>, StoreError> {
        let txn = self.begin_read()?;
        let table = txn.open_table(GENERATIONS).map_err(|e| self.err(e))?;
        let value = table.get((job, n)).map_err(|e| self.err(e))?;
        let Some(mut record) = value
            .map(|v| self.decode::<GenerationRecord>(&format!("{job}/generation {n}"), v.value()))
            .transpose()?
        else {
            return Ok(None);
        };
        let populations = txn.open_table(POPULATIONS).map_err(|e| self.err(e))?;
        if let Some(p) = populations.get((job, n)).map_err(|e| self.err(e))? {
            record.population = self.decode(&format!("{job}/population {n}"), p.value())?;
        }
        Ok(Some(record))
    }

    /// Every committed generation of a job, in order; the last
    /// [`FULL_GENERATIONS`] with their populations.
    pub fn generations(&self, job: &str) -> Result<Vec<GenerationRecord>, StoreError> {
        let mut records: Vec<GenerationRecord> = self.list(GENERATIONS, job)?;
        let populations: Vec<(u64, Vec<Member>)> = self.list_keyed(POPULATIONS, job)?;
        for (n, population) in populations {
            if let Some(r) = records.iter_mut().find(|r| r.report.generation == n) {
                r.population = population;
            }
        }
        Ok(records)
    }

    pub fn validated(&self, job: &str) -> Result<Vec<Validated>, StoreError> {
        self.list(VALIDATED, job)
    }

    pub fn promotion_failures(&self, job: &str) -> Result<Vec<PromotionFailure>, StoreError> {
        self.list(FAILURES, job)
    }

    fn get<T: DeserializeOwned>(
        &self,
        table: TableDefinition<&str, &[u8]>,
        key: &str,
    ) -> Result<Option<T>, StoreError> {
        let txn = self.begin_read()?;
        let t = txn.open_table(table).map_err(|e| self.err(e))?;
        let value = t.get(key).map_err(|e| self.err(e))?;
        value
            .map(|v| self.decode(&format!("{}/{key}", table.name()), v.value()))
            .transpose()
    }

    fn list<T: DeserializeOwned>(
        &self,
        table: TableDefinition<(&str, u64), &[u8]>,
        job: &str,
    ) -> Result<Vec<T>, StoreError> {
        Ok(self
            .list_keyed(table, job)?
            .into_iter()
            .map(|(_, v)| v)
            .collect())
    }

    /// A job's entries of `table` with their sequence or generation number.
    fn list_keyed<T: DeserializeOwned>(
        &self,
        table: TableDefinition<(&str, u64), &[u8]>,
        job: &str,
    ) -> Result<Vec<(u64, T)>, StoreError> {
        let txn = self.begin_read()?;
        let t = txn.open_table(table).map_err(|e| self.err(e))?;
        let mut out = Vec::new();
        for entry in t
            .range((job, 0)..=(job, u64::MAX))
            .map_err(|e| self.err(e))?
        {
            let (k, v) = entry.map_err(|e| self.err(e))?;
            let n = k.value().1;
            let key = format!("{}/{job}/{n}", table.name());
            out.push((n, self.decode(&key, v.value())?));
        }
        Ok(out)
    }

    fn decode<T: DeserializeOwned>(&self, key: &str, bytes: &[u8]) -> Result<T, StoreError> {
        serde_json::from_slice(bytes).map_err(|source| StoreError::Record {
            path: self.path.clone(),
            key: key.to_string(),
            source,
        })
    }

    fn err(&self, e: impl Into<redb::Error>) -> StoreError {
        db_error(&self.path, e)
    }
}

/// Appends `items` after the job's last sequence number in `table`,
/// keeping only the newest `keep` when given.
/// Validated variants and promotion failures, each after the job's last
/// (the failures capped at `KEPT_FAILURES`).
fn append_promotions(
    txn: &redb::WriteTransaction,
    job: &str,
    validated: &[Validated],
    failures: &[PromotionFailure],
) -> Result<(), redb::Error> {
    append(txn, VALIDATED, job, validated, None)?;
    append(txn, FAILURES, job, failures, Some(KEPT_FAILURES))
}

fn append<T: Serialize>(
    txn: &redb::WriteTransaction,
    table: TableDefinition<(&str, u64), &[u8]>,
    job: &str,
    items: &[T],
    keep: Option<u64>,
) -> Result<(), redb::Error> {
    let mut t = txn.open_table(table)?;
    let first = match t.range((job, 0)..=(job, u64::MAX))?.next_back() {
        Some(last) => last?.0.value().1 + 1,
        None => 0,
    };
    for (seq, item) in (first..).zip(items) {
        t.insert((job, seq), to_json(item).as_slice())?;
        if let Some(gone) = keep.and_then(|k| seq.checked_sub(k)) {
            t.remove((job, gone))?;
        }
    }
    Ok(())
}

fn to_json<T: Serialize>(value: &T) -> Vec<u8> {
    serde_json::to_vec(value).expect("store records serialize")
}

/// A store file that does not exist yet, made whole under a temporary name
/// (`gevod.redb.new`) and linked into place: a kill while redb writes its
/// first pages leaves that file, which the next open makes again, never a
/// `gevod.redb` that does not open (redb writes its magic number last).
fn create_whole(path: &Path) -> Result<(), StoreError> {
    let fresh = path.with_extension("redb.new");
    let made = match Database::create(&fresh) {
        // Another process is making it: its open goes on, this one stops.
        Err(e @ redb::DatabaseError::DatabaseAlreadyOpen) => Err(e),
        // What a killed open left.
        Err(_) => {
            let _ = std::fs::remove_file(&fresh);
            Database::create(&fresh)
        }
        made => made,
    };
    drop(made.map_err(|e| db_error(&fresh, e))?);
    // A link never replaces a store another process made meanwhile; a file
    // system without hard links gets a rename, which would.
    let placed = match std::fs::hard_link(&fresh, path) {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(_) => std::fs::rename(&fresh, path),
        Ok(()) => Ok(()),
    };
    placed.map_err(|source| StoreError::Place {
        path: path.to_path_buf(),
        source,
    })?;
    let _ = std::fs::remove_file(&fresh);
    Ok(())
}

fn db_error(path: &Path, e: impl Into<redb::Error>) -> StoreError {
    StoreError::Db {
        path: path.to_path_buf(),
        source: e.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evolve::Config;

    fn job(id: &str) -> JobRecord {
        JobRecord {
            id: id.into(),
            spec_path: "k.gevo.toml".into(),
            spec_hash: "s".into(),
            spec_text: "spec".into(),
            ir_hash: "i".into(),
            ir_text: "ir".into(),
            backend: "sim".into(),
            target: "sm_90".into(),
            seed: 1,
        }
    }

    #[test]
    fn jobs_and_checkpoints_round_trip_across_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let engine = Engine::new(Config::default(), 7).unwrap();
        {
            let store = Store::open(dir.path()).unwrap();
            assert_eq!(store.job("a").unwrap(), None);
            store.create_job(&job("a"), &engine).unwrap();
        }
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.job("a").unwrap(), Some(job("a")));
        assert_eq!(store.checkpoint("a").unwrap(), Some(engine));
        assert_eq!(store.job("b").unwrap(), None);
        assert!(store.validated("a").unwrap().is_empty());
    }

    #[test]
    fn records_written_before_reports_read_back_with_what_they_have() {
        // A generation record and a promotion failure as an older gevod
        // wrote them: no timings, version, rejection counts or kinds.
        let old = r#"{"report":{"generation":3,"evaluations":16,"cache_hits":2,"valid":9,
            "best_cost":0.93,"validated":[],"promotion_failures":[]},
            "population":[{"patch":{"format":1,"ir_hash":"h","kernel":"k","edits":[]},
            "ptx_hash":null,"outcome":{"rejected":{"reason":"train[0]: race"}}}],
            "evaluations":64,"cache_hits":8}"#;
        let record: GenerationRecord = serde_json::from_str(old).unwrap();
        assert_eq!(record.committed_at, None);
        assert_eq!(record.seconds, None);
        assert_eq!(record.gevod, None);
        assert!(record.report.rejections.is_empty());
        let failure: PromotionFailure = serde_json::from_str(
            r#"{"generation":1,"patch":{"format":1,"ir_hash":"h","kernel":"k","edits":[]},
            "ptx_hash":"p","train_cost":0.9,"reason":"heldout[0]: mismatch"}"#,
        )
        .unwrap();
        assert_eq!(failure.kind, "");
    }

    #[test]
    fn generations_keep_their_timing_and_gevod_version() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let engine = Engine::new(Config::default(), 7).unwrap();
        store.create_job(&job("a"), &engine).unwrap();
        let report = GenerationReport {
            generation: 0,
            evaluations: 4,
            cache_hits: 0,
            valid: 4,
            best_cost: Some(0.9),
            validated: vec![],
            promotion_failures: vec![],
            rejections: [("race".to_string(), 2)].into_iter().collect(),
            ..GenerationReport::default()
        };
        store
            .commit_generation_took("a", &engine, &report, Some(1.5))
            .unwrap();
        let mut next = report.clone();
        next.generation = 1;
        store.commit_generation("a", &engine, &next).unwrap();
        let all = store.generations("a").unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!(all[0].seconds, Some(1.5));
        assert_eq!(all[1].seconds, None);
        assert!(all.iter().all(|g| g.committed_at.is_some()));
        assert_eq!(all[0].gevod.as_deref(), Some(env!("CARGO_PKG_VERSION")));
        assert_eq!(all[0].report.rejections["race"], 2);
    }

    #[test]
    fn a_newer_schema_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = Store::open(dir.path()).unwrap();
            let txn = store.begin_write().unwrap();
            txn.open_table(META)
                .unwrap()
                .insert("schema_version", SCHEMA_VERSION + 1)
                .unwrap();
            txn.commit().unwrap();
        }
        let err = Store::open(dir.path()).err().expect("refused");
        let msg = err.to_string();
        assert!(
            msg.contains("gevod.redb") && msg.contains("newer gevod"),
            "{msg}"
        );
    }

    /// What a kill during a store's first open leaves (a file redb began
    /// and never finished: no magic number) is made again; the store
    /// opens, whole.
    #[test]
    fn a_store_whose_creation_was_killed_is_made_again() {
        let dir = tempfile::tempdir().unwrap();
        let fresh = dir.path().join(FILE_NAME).with_extension("redb.new");
        std::fs::write(&fresh, vec![0u8; 4096]).unwrap();
        let store = Store::open(dir.path()).unwrap();
        assert!(store.jobs().unwrap().is_empty());
        assert!(!fresh.exists(), "the temporary file is gone");
        drop(store);
        assert!(Store::open(dir.path()).is_ok(), "and it opens again");
    }

    #[test]
    fn a_file_that_is_not_a_store_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(FILE_NAME), b"not a database at all").unwrap();
        let msg = Store::open(dir.path()).err().expect("refused").to_string();
        assert!(msg.contains("gevod.redb"), "{msg}");
    }
}
