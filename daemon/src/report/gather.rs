//! What a report shows, read from a store: the job's record and checkpoint,
//! its generation records, and the CUDA sources its line tables name.

use super::{
    edits, generated, BestVariant, GeneratedTest, GenerationPoint, ReportData, ReportError, TestRow,
};
use gevo_ir::{KernelIr, SourceFiles};
use gevo_model::access::Reader;
use gevo_model::spec::{self, generate, Spec, SpecError, TestTarget};
use gevo_model::utilization::Utilization;
use gevo_search::evolve::{Engine, PromotionFailure, Validated};
use gevo_search::store::{GenerationRecord, JobRecord, Store};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Rejection reasons a report always lists (kind label, the failure kinds
/// counted under it), in order; other kinds follow under their own names.
const REASONS: [(&str, &[&str]); 8] = [
    ("mismatch", &["mismatch"]),
    ("out of bounds", &["out_of_bounds"]),
    ("race", &["race", "global_race", "uninitialized_shared"]),
    ("divergent barrier", &["divergent_barrier"]),
    ("timeout", &["timeout", "step_budget"]),
    ("sanitizer", &["sanitizer"]),
    ("held-out", &["heldout"]),
    ("generated tests", &["generated"]),
];

/// The job a report is about: `wanted` (a job id, or a daemon kernel name
/// for its newest version), else the store's only job.
pub fn pick_job(store: &Store, wanted: Option<&str>) -> Result<String, ReportError> {
    let jobs = store.jobs()?;
    let Some(wanted) = wanted else {
        return match jobs.as_slice() {
            [] => Err(ReportError::NoJobs {
                store: store.path().to_path_buf(),
            }),
            [only] => Ok(only.clone()),
            _ => Err(ReportError::JobRequired {
                store: store.path().to_path_buf(),
                available: jobs,
            }),
        };
    };
    if jobs.iter().any(|j| j == wanted) {
        return Ok(wanted.to_string());
    }
    let newest = store
        .daemon_jobs()?
        .into_iter()
        .filter(|(_, d)| d.kernel == wanted || d.kernel.rsplit('/').next() == Some(wanted))
        .max_by_key(|(_, d)| d.version)
        .map(|(id, _)| id);
    newest.ok_or(ReportError::UnknownJob {
        store: store.path().to_path_buf(),
        job: wanted.to_string(),
        available: jobs,
    })
}

/// Gathers the report of job `id`; CUDA sources are read as `reader`, and
/// the job's generated held-out tests derived from its snapshots.
pub fn gather(store: &Store, id: &str, reader: Reader) -> Result<ReportData, ReportError> {
    gather_with(store, id, reader, None)
}

/// As [`gather`], with the job's kept generated tests where the caller
/// knows them (the daemon derives them once per job).
pub fn gather_with(
    store: &Store,
    id: &str,
    reader: Reader,
    known_generated: Option<Vec<GeneratedTest>>,
) -> Result<ReportData, ReportError> {
    let unknown = || ReportError::UnknownJob {
        store: store.path().to_path_buf(),
        job: id.to_string(),
        available: store.jobs().unwrap_or_default(),
    };
    let job = store.job(id)?.ok_or_else(unknown)?;
    let engine = store
        .checkpoint(id)?
        .ok_or_else(|| ReportError::NoCheckpoint {
            store: store.path().to_path_buf(),
            job: id.to_string(),
        })?;
    let records = store.generations(id)?;
    let failures = store.promotion_failures(id)?;
    let kernel = store
        .daemon_jobs()?
        .into_iter()
        .find(|(j, _)| j == id)
        .map(|(_, d)| d.kernel)
        .unwrap_or_else(|| spec_key(&job.spec_text, "kernel").unwrap_or_else(|| id.to_string()));

    let mut notes = Vec::new();
    // The job's spec snapshot, parsed once for the generated tests and the
    // held-out tests' sizes.
    let spec = spec::parse_as(&job.spec_path, &job.spec_text, &reader);
    let generated = generated::generated(&job, &engine, &failures, &spec, known_generated);
    let best = match engine.best_validated() {
        None => None,
        Some(v) => Some(best_variant(store, &job, &spec, v, reader, &mut notes)?),
    };
    let launch = super::tune::gather(store, &job, &mut notes);
    let generations = points(&records, &engine);
    notes.extend(old_store_notes(&records, &engine));
    let counters = engine.counters();
    let pareto = engine
        .archive()
        .iter()
        .filter_map(|m| m.outcome.objectives())
        .collect();
    let population = engine
        .population()
        .iter()
        .filter_map(|m| m.outcome.objectives())
        .collect();
    Ok(ReportData {
        kernel,
        job: job.id.clone(),
        backend: job.backend.clone(),
        environment: environment(&job, &engine, &records),
        best,
        generations,
        pareto,
        population,
        rejections: rejections(&counters.rejections, &failures),
        evaluations: counters.evaluations,
        cache_hits: counters.cache_hits,
        valid: counters.valid,
        utilization: utilization(&records),
        generated,
        launch,
        notes,
    })
}

/// The best validated variant `v` of `job` as the report shows it: its
/// held-out tests, its edits in source terms with excerpts, and its edit
/// contributions where measured. A note goes to `notes` where the line
/// tables name a source that was not found.
fn best_variant(
    store: &Store,
    job: &JobRecord,
    spec: &Result<Spec, SpecError>,
    v: &Validated,
    reader: Reader,
    notes: &mut Vec<String>,
) -> Result<BestVariant, ReportError> {
    let ir_err = |source| ReportError::Ir {
        job: job.id.clone(),
        source,
    };
    let ir =
        KernelIr::parse_for_patch(&job.id, job.ir_text.as_bytes(), &v.minimized).map_err(ir_err)?;
    let sizes = match spec {
        Ok(spec) => heldout_sizes(spec, &job.backend),
        Err(e) => {
            tracing::debug!(error = %e, "held-out test sizes not shown");
            BTreeMap::new()
        }
    };
    let mut files = source_files(job, reader);
    let edits = edits::source_edits(&ir, &v.minimized, &mut files).map_err(ir_err)?;
    let excerpts = edits::excerpts(&ir, &v.minimized, &mut files).map_err(ir_err)?;
    if ir.has_line_tables() && excerpts.is_empty() && !v.minimized.edits.is_empty() {
        notes.push(format!(
            "the CUDA source the line tables name was not found near {}",
            job.spec_path.display()
        ));
    }
    Ok(BestVariant {
        generation: v.generation,
        speedup: v.speedup,
        interval: v.interval,
        train_cost: v.train_cost,
        tests: v
            .heldout
            .iter()
            .map(|t| TestRow {
                test: t.test.clone(),
                sizes: sizes.get(&t.test).cloned().unwrap_or_default(),
                verdict: t.failure.as_ref().map_or("pass".into(), |f| f.0.clone()),
                ratio: t.cost_interval().map(|i| (i.estimate, i.lo, i.hi)),
                kernels: t.kernels.clone(),
            })
            .collect(),
        edits,
        line_tables: ir.has_line_tables(),
        excerpts,
        contributions: store.contributions(&job.id, &v.ptx_hash)?,
    })
}

/// Each held-out test's sizes (`n = 4096, m = 64`), on the tests of the
/// job's `backend` (a GPU job's GPU-sized ones).
pub fn heldout_sizes(spec: &Spec, backend: &str) -> BTreeMap<String, String> {
    let target = if backend.ends_with("cuda") {
        TestTarget::Gpu
    } else {
        TestTarget::Sim
    };
    let spec = spec.clone().for_backend(target);
    spec.heldout
        .iter()
        .map(|t| (t.name.clone(), generate::sizes(&spec, &t.params)))
        .collect()
}

/// What a store written by an older gevod lacks, where the report would
/// otherwise show it: generation timings, rejection counts by reason.
fn old_store_notes(records: &[GenerationRecord], engine: &Engine) -> Vec<String> {
    let mut notes = Vec::new();
    if !records.is_empty() && records.iter().all(|r| r.seconds.is_none()) {
        notes.push(
            "this store has no generation timings (written by an older gevod): no evaluations/s plot"
                .into(),
        );
    }
    let counters = engine.counters();
    if counters.rejections.is_empty() && counters.evaluations > counters.valid {
        notes.push(
            "this store has no rejection counts by reason (written by an older gevod): only held-out rejections are counted"
                .into(),
        );
    }
    notes
}

/// The generations' utilization summed (none where no generation has one).
fn utilization(records: &[GenerationRecord]) -> Option<Utilization> {
    records
        .iter()
        .filter_map(|r| r.report.utilization.as_ref())
        .fold(None, |sum: Option<Utilization>, u| {
            let mut sum = sum.unwrap_or_default();
            sum.add(u);
            Some(sum)
        })
}

/// Sources are looked up near the spec and the IR it names.
fn source_files(job: &JobRecord, reader: Reader) -> SourceFiles {
    let spec = job.spec_path.as_path();
    let mut near: Vec<PathBuf> = Vec::new();
    if let Some(ir) = spec_key(&job.spec_text, "ir") {
        let dir = spec.parent().unwrap_or(Path::new("."));
        near.push(dir.join(ir));
    }
    near.push(spec.to_path_buf());
    let near: Vec<&Path> = near.iter().map(PathBuf::as_path).collect();
    SourceFiles::near(reader, &near)
}

/// A top-level string key of the spec's text (`kernel`, `ir`), without
/// loading the spec (whose input files may be gone).
fn spec_key(spec_text: &str, key: &str) -> Option<String> {
    let value: toml::Table = toml::from_str(spec_text).ok()?;
    value.get(key)?.as_str().map(str::to_string)
}

fn points(records: &[GenerationRecord], engine: &Engine) -> Vec<GenerationPoint> {
    let mut validated: Vec<(u64, f64)> = engine
        .validated()
        .iter()
        .map(|v| (v.generation, 1.0 / v.speedup))
        .collect();
    validated.sort_by_key(|v| v.0);
    records
        .iter()
        .map(|r| {
            let g = r.report.generation;
            GenerationPoint {
                generation: g,
                best_train: r.report.best_cost,
                best_validated: validated
                    .iter()
                    .filter(|(at, _)| *at <= g)
                    .map(|(_, c)| *c)
                    .min_by(f64::total_cmp),
                evaluations: r.report.evaluations,
                seconds: r.seconds,
            }
        })
        .collect()
}

fn rejections(
    by_kind: &BTreeMap<String, u64>,
    failures: &[PromotionFailure],
) -> Vec<(String, u64)> {
    let mut counts: BTreeMap<String, u64> = by_kind.clone();
    for f in failures {
        let kind = match f.kind.as_str() {
            "" if f.reason.starts_with("GPU safety gate") => "sanitizer",
            "" => "heldout",
            k => k,
        };
        *counts.entry(kind.to_string()).or_default() += 1;
    }
    let mut out = Vec::new();
    for (label, kinds) in REASONS {
        let n = kinds.iter().filter_map(|k| counts.remove(*k)).sum();
        out.push((label.to_string(), n));
    }
    for (kind, n) in counts {
        let label = match kind.as_str() {
            "compile" | "invalid" | "invalid_ptx" => "does not build".to_string(),
            other => other.replace('_', " "),
        };
        match out.iter_mut().find(|(l, _)| *l == label) {
            Some(row) => row.1 += n,
            None => out.push((label, n)),
        }
    }
    out
}

fn environment(
    job: &JobRecord,
    engine: &Engine,
    records: &[GenerationRecord],
) -> Vec<(String, String)> {
    let arch = job
        .target
        .split_whitespace()
        .find(|w| w.starts_with("sm_"))
        .map(str::to_string)
        .or_else(|| spec_key(&job.spec_text, "arch"))
        .unwrap_or_else(|| "-".into());
    let gpu = if job.backend == "cuda" {
        job.target.clone()
    } else {
        "none: the SIMT simulator (deterministic cost counts, bounds and race checks on every run)"
            .into()
    };
    let searched_with = records
        .iter()
        .rev()
        .find_map(|r| r.gevod.clone())
        .unwrap_or_else(|| "unknown (a store from before gevod recorded it)".into());
    let c = engine.config();
    vec![
        ("GPU and driver".into(), gpu),
        ("architecture".into(), arch),
        ("backend".into(), job.backend.clone()),
        ("gevod (search)".into(), searched_with),
        ("gevod (report)".into(), env!("CARGO_PKG_VERSION").into()),
        ("seed".into(), job.seed.to_string()),
        (
            "search".into(),
            format!(
                "population {}, crossover {}, mutation {}, elite {}, selection {:?}",
                c.population, c.crossover_rate, c.mutation_rate, c.elite_fraction, c.selection
            )
            .to_lowercase(),
        ),
        ("spec".into(), job.spec_path.display().to_string()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use gevo_search::evolve::{Config, GenerationReport};

    fn job_record(id: &str, spec_text: &str, backend: &str, target: &str, seed: u64) -> JobRecord {
        JobRecord {
            id: id.into(),
            spec_path: format!("{id}.gevo.toml").into(),
            spec_hash: "s".into(),
            spec_text: spec_text.into(),
            ir_hash: "i".into(),
            ir_text: String::new(),
            backend: backend.into(),
            target: target.into(),
            seed,
        }
    }

    /// A store as an older gevod left it: generations without timings, a
    /// job with no validated variant. The report says what it lacks.
    #[test]
    fn an_older_store_reports_what_it_has() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let job = job_record("k-1", "kernel = \"k\"\nir = \"k.ll\"\n", "sim", "sm_90", 3);
        let engine = Engine::new(Config::default(), 3).unwrap();
        store.create_job(&job, &engine).unwrap();
        for generation in 0..2 {
            let report = GenerationReport {
                generation,
                evaluations: 8,
                cache_hits: 1,
                valid: 5,
                best_cost: Some(1.0 - 0.01 * generation as f64),
                validated: vec![],
                promotion_failures: vec![],
                rejections: BTreeMap::new(),
                ..GenerationReport::default()
            };
            store.commit_generation("k-1", &engine, &report).unwrap();
        }
        assert_eq!(pick_job(&store, None).unwrap(), "k-1");
        let data = gather(&store, "k-1", Reader::Caller).unwrap();
        assert_eq!(data.kernel, "k");
        assert_eq!(data.best, None);
        assert_eq!(data.generated.kept, super::super::KeptTests::NoBest);
        assert_eq!(data.generations.len(), 2);
        assert_eq!(data.generations[1].best_train, Some(0.99));
        assert!(
            data.notes
                .iter()
                .any(|n| n.contains("no generation timings")),
            "{:?}",
            data.notes
        );
        let html = super::super::render(&data);
        assert!(html.contains("No validated variant yet"));
        assert!(html.contains("<figure id=\"plot-cost\">\n<svg"));
        assert!(html.contains("No data for this plot"));
        assert_eq!(data.utilization, None);
        assert!(
            !html.contains("id=\"utilization\""),
            "no GPU time without a GPU"
        );
        let err = pick_job(&store, Some("nope")).unwrap_err().to_string();
        assert!(err.contains("no job nope") && err.contains("k-1"), "{err}");
    }

    /// A GPU search's generations carry their utilization: the report sums
    /// them and shows the shares, rounds per variant and time by phase.
    #[test]
    fn gpu_time_is_summed_over_generations() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let job = job_record("g-1", "kernel = \"g\"\n", "cuda", "H100", 1);
        let engine = Engine::new(Config::default(), 1).unwrap();
        store.create_job(&job, &engine).unwrap();
        for (generation, (timed, stopped)) in [(100, 60), (50, 40)].into_iter().enumerate() {
            let utilization = Utilization {
                wall_s: 10.0,
                gpu_workers: 1,
                compile_workers: 15,
                spent: gevo_model::utilization::Spent {
                    compile_s: 30.0,
                    check_s: 1.5,
                    timing_s: 7.5,
                    compile_cpu_s: 12.0,
                    ..Default::default()
                },
                measured: timed,
                timed,
                rounds: 5 * stopped + 15 * (timed - stopped),
                stopped_early: stopped,
                stopped_better: stopped / 4,
                compiled_ahead: 0,
                known_skipped: 0,
                guarded_assembled: 0,
                timed_assembled: 0,
                compiled: 0,
                screened_out: 0,
                promotion: gevo_model::utilization::Spent {
                    compile_s: 2.0,
                    timing_s: 1.5,
                    ..Default::default()
                },
                promotion_measured: 3,
                measured_ahead: 0,
                promotion_carried: 0,
                gpu_starts: 2,
                gpu_start_s: 3.0,
                gpu_idle_s: 1.0,
                gpu_start_parts: gevo_model::utilization::StartUp {
                    inputs_s: 2.0,
                    ..Default::default()
                },
                engine: gevo_model::utilization::EngineSpent {
                    breed_s: 0.5,
                    evaluate_s: 6.0,
                    select_s: 0.5,
                    promote_s: 3.0,
                    promote_beside_s: 2.5,
                },
            };
            let report = GenerationReport {
                generation: generation as u64,
                utilization: Some(utilization),
                ..GenerationReport::default()
            };
            store.commit_generation("g-1", &engine, &report).unwrap();
        }
        let data = gather(&store, "g-1", Reader::Caller).unwrap();
        let u = data.utilization.as_ref().unwrap();
        assert_eq!((u.measured, u.stopped_early, u.rounds), (150, 100, 1250));
        assert_eq!(u.gpu_idle_s, 2.0, "summed over the generations");
        assert!((u.gpu_busy_share() - 0.9).abs() < 1e-9, "{u:?}");
        let html = super::super::render(&data);
        for text in [
            "GPU busy 90% of 20 s (1 GPU worker(s), started 4 times, 2.0 s with no request)",
            "compile workers busy 20% (15)",
            "8.3 timing rounds per test each, 100 stopped early (25 as better).",
            "<tr><td>timing</td><td class=\"num\">15.0</td><td class=\"num\">17.9%</td></tr>",
            "<tr><td>GPU worker start-up</td><td class=\"num\">6.0</td>",
            "generating inputs 4.0 s, uploading 0.0 s",
            // The engine's time, summed: breeding 1 s, evaluation 12 s,
            // selection 1 s, promotion 6 s of 20 s.
            "<tr><td>waiting for evaluation</td><td class=\"num\">12.0</td><td class=\"num\">60.0%</td></tr>",
            "<tr><td>promotion</td><td class=\"num\">6.0</td><td class=\"num\">30.0%</td></tr>",
            "8.0 s between batches",
            // Summed too: the compile workers' CPU, promotion's part.
            "Of these: compile workers' CPU 24.0 s; promotion 4.0 s of the compile workers' and 3.0 s of the GPU's (6 measured).",
            "beside the batches in a thread of its own instead (5.0 s, which no batch waits for)",
        ] {
            assert!(html.contains(text), "{text} not in the report");
        }
    }

    #[test]
    fn rejections_list_the_named_reasons_then_the_rest() {
        let kinds: BTreeMap<String, u64> = [
            ("mismatch", 4),
            ("race", 1),
            ("global_race", 2),
            ("step_budget", 3),
            ("compile", 5),
            ("unsupported", 1),
        ]
        .into_iter()
        .map(|(k, n)| (k.to_string(), n))
        .collect();
        let failure = |kind: &str, reason: &str| PromotionFailure {
            generation: 1,
            patch: gevo_ir::Patch::new("h", "k"),
            ptx_hash: "p".into(),
            train_cost: 0.9,
            reason: reason.into(),
            kind: kind.into(),
        };
        let failures = [
            failure("heldout", "heldout[0]: mismatch"),
            failure("", "GPU safety gate: racecheck found 2 hazards"),
            failure("", "heldout[1]: out of bounds"),
            failure(
                "generated",
                "generated test generated[0] (Rx != Ry): mismatch",
            ),
        ];
        let rows = rejections(&kinds, &failures);
        let expect: Vec<(String, u64)> = [
            ("mismatch", 4),
            ("out of bounds", 0),
            ("race", 3),
            ("divergent barrier", 0),
            ("timeout", 3),
            ("sanitizer", 1),
            ("held-out", 2),
            ("generated tests", 1),
            ("does not build", 5),
            ("unsupported", 1),
        ]
        .into_iter()
        .map(|(k, n)| (k.to_string(), n))
        .collect();
        assert_eq!(rows, expect);
    }
}
