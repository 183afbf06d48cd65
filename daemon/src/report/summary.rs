//! A report's numbers as JSON (`gevod report --json`): what a script needs
//! to compare searches without reading the HTML.

use super::{KeptTests, ReportData};
use serde_json::{json, Value};

/// The job, its counts, the best validated variant's speedup and the GPU
/// workers' utilization over every committed generation (with the shares
/// and rates derived from it, as `gevod evolve --json` writes them); the
/// train best against the validated best per generation (`course`, the
/// cost plot's points), the generated held-out tests, and a tuned job's
/// launch configuration (`tune::json`).
pub fn summary_json(data: &ReportData) -> Value {
    let seconds: f64 = data.generations.iter().filter_map(|g| g.seconds).sum();
    let course: Vec<Value> = data
        .generations
        .iter()
        .map(|g| {
            json!({
                "generation": g.generation,
                "seconds": g.seconds,
                "train_best": g.best_train,
                "validated_best": g.best_validated,
            })
        })
        .collect();
    let g = &data.generated;
    let passed = match &g.kept {
        KeptTests::Listed(tests) => json!(tests
            .iter()
            .map(|t| json!({"test": t.test, "why": t.why}))
            .collect::<Vec<_>>()),
        _ => Value::Null,
    };
    json!({
        "kernel": data.kernel,
        "job": data.job,
        "backend": data.backend,
        "generations": data.generations.len(),
        "seconds": seconds,
        "evaluations": data.evaluations,
        "valid": data.valid,
        "cache_hits": data.cache_hits,
        "best": data.best.as_ref().map(|b| json!({
            "generation": b.generation,
            "speedup": b.speedup,
            "interval": [b.interval.0, b.interval.1],
        })),
        "utilization": data.utilization.as_ref().map(gevo_model::utilization::Utilization::to_json),
        "course": course,
        "since_validated": super::course::since(&data.generations).map(|s| s.sentence()),
        "generated": {
            "passed": passed,
            "in_selection": g.in_selection,
            "selection_checks": g.checks,
            "selection_rejections": g.rejected,
            "promotion_rejections": g.refused_at_promotion,
        },
        "launch": data.launch.as_ref().map(|l| super::tune::json(l, data.best.as_ref())),
    })
}
