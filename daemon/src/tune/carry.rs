//! Edits found under one configuration, carried to the others: the best
//! patch transplanted (`gevo_ir::transplant`) to the next-fastest
//! configurations' IR and measured there on the train tests against that
//! configuration's original. What it says: whether another configuration
//! with the same edits would beat the one the search ran on.

use super::{copy_to_scratch, Dropped, Files, Sweep, Timer};
use crate::worker::gpu_run::{measure_on_gpu, Variants};
use crate::worker::setup::WorkerSetup;
use gevo_ir::transplant::Transplanter;
use gevo_ir::{KernelIr, Patch};
use gevo_model::spec::tune::Configuration;
use gevo_model::spec::{self, Spec, TestSet, TestTarget};
use gevo_model::stats;
use gevo_search::eval::Evaluator;
use std::path::Path;

/// The patch on one other configuration.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Carried {
    pub configuration: Configuration,
    /// Edits carried over, and of how many.
    pub kept: usize,
    pub edits: usize,
    /// The carried patch's train cost over that configuration's original
    /// (geometric mean over the tests).
    pub cost_ratio: Option<f64>,
    /// Its cost over the source configuration's original: the
    /// configuration's sweep ratio times `cost_ratio`.
    pub of_source: Option<f64>,
    /// Why it was not measured, or failed.
    pub why: Option<String>,
}

/// A tuned spec's configurations and where they are measured.
pub struct Configurations<'a> {
    pub spec_path: &'a Path,
    /// The spec with `[tune]`, no configuration chosen.
    pub tuned: &'a Spec,
    pub timer: &'a Timer<'a>,
    pub files: &'a Files<'a>,
}

/// One test of a carried patch: its name, why it failed, its cost and the
/// configuration's original's.
struct TestOutcome {
    test: String,
    failure: Option<(String, String)>,
    cost: Option<u64>,
    original: u64,
}

/// `patch` (of `from`, the IR of the sweep's best configuration) carried to
/// the `limit` next-fastest measured configurations.
pub fn carry(
    at: &Configurations,
    sweep: &Sweep,
    from: &KernelIr,
    patch: &Patch,
    limit: usize,
) -> Vec<Carried> {
    let (spec_path, tuned, timer, files) = (at.spec_path, at.tuned, at.timer, at.files);
    let chosen = sweep.best.as_ref().map(|b| &b.configuration);
    let mut others: Vec<_> = sweep
        .configurations
        .iter()
        .filter(|m| Some(&m.configuration) != chosen)
        .filter_map(|m| Some((m, m.mean_ratio?)))
        .collect();
    others.sort_by(|a, b| a.1.total_cmp(&b.1));
    others
        .into_iter()
        .take(limit)
        .map(|(m, ratio)| {
            let mut carried = Carried {
                configuration: m.configuration.clone(),
                kept: 0,
                edits: patch.edits.len(),
                cost_ratio: None,
                of_source: None,
                why: None,
            };
            let text = tuned
                .configured_text(&m.configuration)
                .expect("a tuned spec");
            match carry_one(spec_path, &text, from, patch, timer, files) {
                Ok((kept, cost)) => {
                    carried.kept = kept;
                    carried.cost_ratio = Some(cost);
                    carried.of_source = Some(cost * ratio);
                }
                Err((kept, why)) => {
                    carried.kept = kept;
                    carried.why = Some(why);
                }
            }
            carried
        })
        .collect()
}

type Outcome = Result<(usize, f64), (usize, String)>;

fn carry_one(
    spec_path: &Path,
    text: &str,
    from: &KernelIr,
    patch: &Patch,
    timer: &Timer,
    files: &Files,
) -> Outcome {
    let why = |e: &dyn std::fmt::Display| (0, e.to_string());
    let mut spec = spec::parse_as(spec_path, text, files.reader).map_err(|e| why(&e))?;
    let (text_file, ir_file) = copy_to_scratch(&spec, text, files).map_err(|d| match d {
        Dropped::Why(w) => (0, w),
        Dropped::Fatal(e) => (0, e.to_string()),
    })?;
    spec.ir = ir_file.clone();
    let to = KernelIr::load_kernels(&spec.ir, &spec.kernels).map_err(|e| why(&e))?;
    let moved = Transplanter::new(from, &to)
        .and_then(|t| t.transplant(patch))
        .map_err(|e| why(&e))?;
    let kept = moved.kept.len();
    if kept == 0 {
        return Err((
            0,
            "no edit has a counterpart in this configuration's IR".into(),
        ));
    }
    let results: Vec<TestOutcome> = match timer {
        Timer::Simulator { workers } => {
            let sim = Evaluator::new(spec.for_backend(TestTarget::Sim), *workers)
                .map_err(|e| (kept, e.to_string()))?;
            let results = sim
                .evaluate(&moved.patch, TestSet::Train)
                .map_err(|e| (kept, e.to_string()))?;
            results
                .iter()
                .map(|r| TestOutcome {
                    test: r.test.clone(),
                    failure: r
                        .failure
                        .as_ref()
                        .map(|f| (f.kind().to_string(), f.to_string())),
                    cost: r.cost,
                    original: r.original_cost,
                })
                .collect()
        }
        Timer::Gpu { setup, device } => {
            let setup = WorkerSetup {
                spec_text: Some(&text_file),
                ir: Some(&ir_file),
                ..setup.clone()
            };
            let variants = Variants::Patch("carried".into(), moved.patch.clone());
            let gpu_spec = spec.for_backend(TestTarget::Gpu);
            let run = measure_on_gpu(&setup, &gpu_spec, device.clone(), variants, TestSet::Train)
                .map_err(|e| (kept, e.to_string()))?;
            let (_, a) = run.results.into_iter().next().expect("one variant");
            a.tests
                .into_iter()
                .map(|t| TestOutcome {
                    test: t.test,
                    failure: t.failure,
                    cost: t.cost,
                    original: t.original_cost,
                })
                .collect()
        }
    };
    let mut ratios = Vec::new();
    for TestOutcome {
        test,
        failure,
        cost,
        original,
    } in results
    {
        if let Some((kind, message)) = failure {
            return Err((kept, format!("{test}: {kind}: {message}")));
        }
        let cost = cost.ok_or_else(|| (kept, format!("{test}: not measured")))?;
        ratios.push(cost as f64 / original.max(1) as f64);
    }
    Ok((kept, stats::geometric_mean(ratios)))
}
