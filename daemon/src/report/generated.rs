//! A job's generated held-out tests for the report: derived from the job's
//! own spec and IR snapshots in the store, on the simulator, as promotion
//! derives them (the spec's `[tests.sim]` set, whatever the backend; the
//! daemon, which keeps them per job, passes them in instead), with
//! selection's counts of the variants it ran on them and rejected.

use super::{Generated, GeneratedTest, KeptTests};
use gevo_model::spec::{Spec, SpecError, TestTarget};
use gevo_search::eval::{EvalError, Evaluator};
use gevo_search::evolve::{Engine, PromotionFailure};
use gevo_search::store::JobRecord;

/// Why the generated tests could not be derived.
#[derive(Debug, thiserror::Error)]
enum DeriveError {
    #[error("a temporary directory for the IR snapshot: {0}")]
    TempDir(#[source] std::io::Error),
    #[error("writing the IR snapshot: {0}")]
    Snapshot(#[source] std::io::Error),
    #[error(transparent)]
    Eval(#[from] EvalError),
}

/// The report's generated tests of `job`: `known` (the daemon's), else
/// derived here when the job has a validated variant to have passed them.
pub fn generated(
    job: &JobRecord,
    engine: &Engine,
    failures: &[PromotionFailure],
    spec: &Result<Spec, SpecError>,
    known: Option<Vec<GeneratedTest>>,
) -> Generated {
    let kept = match (engine.best_validated(), known, spec) {
        (None, _, _) => KeptTests::NoBest,
        (Some(_), Some(known), _) => KeptTests::Listed(known),
        (Some(_), None, Err(e)) => KeptTests::NotDerived(e.to_string()),
        (Some(_), None, Ok(spec)) => {
            derive(job, spec).unwrap_or_else(|e| KeptTests::NotDerived(e.to_string()))
        }
    };
    let counters = engine.counters();
    Generated {
        kept,
        in_selection: engine.config().generality_in_selection,
        checks: counters.generality_checks,
        rejected: counters.rejections.get("generated").copied().unwrap_or(0),
        refused_at_promotion: failures.iter().filter(|f| f.kind == "generated").count() as u64,
    }
}

/// The kept generated tests of `job`'s spec (its snapshot, parsed) on its
/// IR snapshot.
fn derive(job: &JobRecord, spec: &Spec) -> Result<KeptTests, DeriveError> {
    let mut spec = spec.clone().for_backend(TestTarget::Sim);
    if spec.harness.is_some() {
        return Ok(KeptTests::Harness);
    }
    let dir = tempfile::tempdir().map_err(DeriveError::TempDir)?;
    let ir_path = dir.path().join("kernel.ll");
    std::fs::write(&ir_path, &job.ir_text).map_err(DeriveError::Snapshot)?;
    spec.ir = ir_path;
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let g = Evaluator::new(spec, workers)?.generated()?;
    Ok(KeptTests::Listed(
        g.kept
            .iter()
            .map(|k| GeneratedTest {
                test: k.test.name.clone(),
                why: k.why.clone(),
            })
            .collect(),
    ))
}
