//! Compaction while the store is open (docs/daemon.md, "The store's size").
//!
//! redb reuses freed pages but never shrinks its file, and a large value
//! (the engine's checkpoint, megabytes once its fitness cache is full) takes
//! a contiguous run of pages rounded up to a power of two, written at every
//! generation before the old one is freed: a file compacted only when
//! opened stays at twice its compacted size with a full cache, more while
//! the checkpoint grows. [`Store`] compacts after a committed generation
//! once the file has grown by [`GROWTH_PERCENT`] since the last compaction
//! (and by at least [`GROWTH_MIN`]).
//!
//! `Database::compact` needs the database to itself, with no transaction
//! live: every transaction of a [`Store`] holds a read lock on its
//! database ([`Txn`]) for as long as it lives, and compaction takes the
//! write lock only where it is free at once, so a commit never waits for a
//! reader and a reader never finds the database half compacted; a busy
//! store is compacted at a later commit.

use super::{Store, StoreError};
use redb::{Database, ReadTransaction, ReadableDatabase, WriteTransaction};
use std::sync::RwLockReadGuard;

/// Compaction runs once the file is this much larger than after the last
/// one, in percent.
pub const GROWTH_PERCENT: u64 = 50;
/// ... and at least this many bytes larger.
pub const GROWTH_MIN: u64 = 4 << 20;

/// A transaction of the store with the read lock that keeps compaction
/// away while it lives (declared first: dropped before the lock).
pub(super) struct Txn<'a, T> {
    txn: T,
    _db: RwLockReadGuard<'a, Database>,
}

impl<T> std::ops::Deref for Txn<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.txn
    }
}

impl Txn<'_, WriteTransaction> {
    pub fn commit(self) -> Result<(), redb::CommitError> {
        self.txn.commit()
    }
}

/// When the file was last compacted, as the file's length then.
#[derive(Debug, Default)]
pub(super) struct Compaction {
    after: u64,
}

impl Compaction {
    pub fn new(len: u64) -> Self {
        Compaction { after: len }
    }

    /// Whether a file of `len` bytes has grown enough to compact.
    fn due(&self, len: u64) -> bool {
        let grown = len.saturating_sub(self.after);
        grown >= GROWTH_MIN
            && grown.saturating_mul(100) >= self.after.saturating_mul(GROWTH_PERCENT)
    }
}

impl Store {
    fn read_lock(&self) -> RwLockReadGuard<'_, Database> {
        // A panic elsewhere leaves redb's own state consistent.
        self.db.read().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn begin_write(&self) -> Result<Txn<'_, WriteTransaction>, StoreError> {
        let db = self.read_lock();
        let txn = db.begin_write().map_err(|e| self.err(e))?;
        Ok(Txn { txn, _db: db })
    }

    pub(super) fn begin_read(&self) -> Result<Txn<'_, ReadTransaction>, StoreError> {
        let db = self.read_lock();
        let txn = db.begin_read().map_err(|e| self.err(e))?;
        Ok(Txn { txn, _db: db })
    }

    /// The file's length now (0 where it cannot be read).
    pub fn file_len(&self) -> u64 {
        std::fs::metadata(&self.path).map_or(0, |m| m.len())
    }

    /// Compacts the file where it grew enough since the last compaction and
    /// no transaction is live; called after a committed generation, from
    /// the thread that committed it. A failure is logged: the store stays
    /// as it was.
    pub(super) fn compact_if_grown(&self) {
        let mut last = self.compaction.lock().unwrap_or_else(|e| e.into_inner());
        let len = self.file_len();
        if !last.due(len) {
            return;
        }
        let Ok(mut db) = self.db.try_write() else {
            return;
        };
        let started = std::time::Instant::now();
        if let Err(e) = db.compact() {
            tracing::warn!(store = %self.path.display(), error = %e, "compacting the store");
        }
        drop(db);
        // Measured again, after a failure too: the next try waits for as
        // much growth again.
        *last = Compaction::new(self.file_len());
        tracing::debug!(store = %self.path.display(), before = len, after = last.after,
            seconds = started.elapsed().as_secs_f64(), "compacted the store");
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Engine, GenerationReport, JobRecord, FILE_NAME};
    use super::*;
    use crate::evolve::Config;

    #[test]
    fn compaction_waits_for_enough_growth() {
        let c = Compaction::new(8 << 20);
        assert!(!c.due(8 << 20));
        assert!(!c.due(11 << 20));
        assert!(c.due(12 << 20));
        // Small files wait for GROWTH_MIN.
        let small = Compaction::new(1 << 20);
        assert!(!small.due(4 << 20));
        assert!(small.due(5 << 20));
        assert!(!Compaction::new(u64::MAX).due(u64::MAX - 1));
    }

    /// An engine whose fitness cache holds `entries` entries like a real
    /// search's (SHA-256 keys, a cost or a rejection's reason): its
    /// checkpoint is about 0.3 KB per entry.
    fn engine_with_cache(entries: u64) -> Engine {
        let engine = Engine::new(Config::default(), 7).unwrap();
        let mut value = serde_json::to_value(&engine).unwrap();
        let cache = (0..entries)
            .map(|i| {
                let outcome = if i % 3 == 0 {
                    serde_json::json!({"valid": {"cost": 0.9 + i as f64 * 1e-9, "error": 0.0}})
                } else {
                    let reason = format!("train[1]: out_of_bounds: load of 4 bytes at out+{i}");
                    serde_json::json!({"rejected": {"reason": reason, "kind": "out_of_bounds"}})
                };
                let key = serde_json::json!({
                    "ptx_hash": format!("{:064x}", i.wrapping_mul(0x9e37_79b9_7f4a_7c15)),
                    "scope": {"backend": "sim", "target": ""},
                    "test_set_hash": format!("{:064x}", 42),
                });
                serde_json::json!([key, outcome])
            })
            .collect();
        value["cache"] = serde_json::Value::Array(cache);
        serde_json::from_value(value).unwrap()
    }

    /// The file's largest size between generations over `generations`
    /// committed ones of a job with `engine`'s checkpoint, and its size
    /// once reopened (compacted); `running` false: compacted only when
    /// opened, as before.
    fn sizes(engine: &Engine, generations: u64, running: bool) -> (u64, u64) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        if !running {
            *store.compaction.lock().unwrap() = Compaction::new(u64::MAX);
        }
        let job = JobRecord {
            id: "a".into(),
            spec_path: "k.gevo.toml".into(),
            spec_hash: "s".into(),
            spec_text: "spec".into(),
            ir_hash: "i".into(),
            ir_text: "ir".into(),
            backend: "sim".into(),
            target: String::new(),
            seed: 1,
        };
        store.create_job(&job, engine).unwrap();
        let mut report = GenerationReport {
            evaluations: 16,
            valid: 9,
            best_cost: Some(0.9),
            rejections: [("race".to_string(), 2)].into_iter().collect(),
            ..GenerationReport::default()
        };
        let mut largest = 0;
        for g in 0..generations {
            report.generation = g;
            store
                .commit_generation_took("a", engine, &report, Some(0.5))
                .unwrap();
            largest = largest.max(store.file_len());
        }
        drop(store);
        drop(Store::open(dir.path()).unwrap());
        let compacted = std::fs::metadata(dir.path().join(FILE_NAME)).unwrap().len();
        (largest, compacted)
    }

    /// docs/daemon.md, "The store's size": compacted, the file is about
    /// twice the checkpoint rounded up to a power of two; while running,
    /// it stays under half as much again plus GROWTH_MIN between
    /// generations, where before a large checkpoint kept it at twice its
    /// compacted size.
    #[test]
    fn a_large_checkpoint_is_compacted_while_running() {
        const GENERATIONS: u64 = 40;
        let engine = engine_with_cache(8_000);
        let checkpoint = serde_json::to_vec(&engine).unwrap().len() as u64;
        let run = checkpoint.next_power_of_two();
        let (before, compacted_before) = sizes(&engine, GENERATIONS, false);
        let (after, compacted) = sizes(&engine, GENERATIONS, true);
        println!(
            "checkpoint {checkpoint} bytes ({run} as a run of pages); {GENERATIONS} generations: \
             largest between generations {before} bytes compacted only when opened, {after} \
             compacted while running; compacted {compacted_before} and {compacted}"
        );
        // The documented bounds.
        let bound = compacted + compacted * GROWTH_PERCENT / 100 + GROWTH_MIN;
        assert!(compacted <= 2 * run + (1 << 20), "{compacted}");
        assert!(after <= bound, "{after} > {bound}");
        // What was: twice the compacted size while running.
        assert!(before > bound, "{before} <= {bound}");
    }
}
