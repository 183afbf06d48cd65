//! A report's numbers as JSON (`gevod report --json`): what a script needs
//! to compare searches without reading the HTML.

use super::ReportData;
use serde_json::{json, Value};

/// The job, its counts, the best validated variant's speedup and the GPU
/// workers' utilization over every committed generation (with the shares
/// and rates derived from it, as `gevod evolve --json` writes them).
pub fn summary_json(data: &ReportData) -> Value {
    let seconds: f64 = data.generations.iter().filter_map(|g| g.seconds).sum();
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
    })
}
