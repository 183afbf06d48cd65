//! `gevod run`'s result tables: per test on the simulator (deterministic
//! costs), per variant on the GPU (undisturbed times, ratios, the interval).

use gevo_search::eval::{Assessment, TestResult};

/// Simulator results: a row per test with its verdict, cost, ratio to the
/// original and error; a failing test's reason below its row.
pub fn results_table(results: &[TestResult]) -> String {
    // Generated tests' names say what they vary: the column fits the longest.
    let width = results
        .iter()
        .map(|r| r.test.chars().count())
        .fold(12, usize::max);
    let mut out = format!(
        "{:<width$} {:<22} {:>14} {:>8} {:>12}\n",
        "test", "verdict", "cost", "ratio", "error"
    );
    for r in results {
        let verdict = r.failure.as_ref().map_or("pass", |f| f.kind());
        let cost = r.cost.map_or("-".into(), |c| c.to_string());
        let ratio = r.cost.map_or("-".into(), |c| {
            format!("{:.3}", c as f64 / r.original_cost as f64)
        });
        let error = r.error.map_or("-".into(), |e| format!("{e:.3e}"));
        out += &format!(
            "{:<width$} {:<22} {:>14} {:>8} {:>12}\n",
            r.test, verdict, cost, ratio, error
        );
        if let Some(f) = &r.failure {
            out += &format!("  {f}\n");
        }
    }
    out
}

pub fn results_json(results: &[TestResult]) -> String {
    let rows: Vec<serde_json::Value> = results
        .iter()
        .map(|r| {
            serde_json::json!({
                "test": r.test,
                "passed": r.passed(),
                "verdict": r.failure.as_ref().map_or("pass", |f| f.kind()),
                "reason": r.failure.as_ref().map(|f| f.to_string()),
                "cost": r.cost,
                "original_cost": r.original_cost,
                "cost_ratio": r.cost.map(|c| c as f64 / r.original_cost as f64),
                "error": r.error,
            })
        })
        .collect();
    serde_json::to_string_pretty(&rows).expect("JSON of plain values") + "\n"
}

/// A table of GPU results: per test the verdict, the undisturbed times and
/// the cost ratio, then the whole set's ratio with its interval.
pub fn gpu_table(label: &str, a: &Assessment) -> String {
    let mut out = format!("{label}\n");
    if let Some(d) = &a.device {
        out += &format!("  on {} ({}, {})\n", d.name, d.arch(), d.uuid);
    }
    out += &format!(
        "  {:<12} {:<14} {:>12} {:>12} {:>8} {:>8}\n",
        "test", "verdict", "original us", "variant us", "ratio", "spread"
    );
    for t in &a.tests {
        let verdict = t.failure.as_ref().map_or("pass", |f| f.0.as_str());
        let us = |ns: Option<u64>| ns.map_or("-".into(), |n| format!("{:.2}", n as f64 / 1e3));
        let ratio = t.cost.map_or("-".into(), |c| {
            format!("{:.4}", c as f64 / t.original_cost.max(1) as f64)
        });
        let spread = t.timing.as_ref().map_or("-".into(), |t| {
            format!(
                "{:.1}%",
                100.0 * gevo_model::stats::relative_spread(&t.variant_ns)
            )
        });
        out += &format!(
            "  {:<12} {verdict:<14} {:>12} {:>12} {ratio:>8} {spread:>8}\n",
            t.test,
            us(Some(t.original_cost)),
            us(t.cost),
        );
        if let Some((_, message)) = &t.failure {
            out += &format!("    {message}\n");
        }
        // A pipeline: which kernel got faster.
        for k in &t.kernels {
            out += &format!(
                "    {:<24} {:>12.2} {:>12.2} {:>8.4}\n",
                k.kernel,
                k.original_ns / 1e3,
                k.variant_ns / 1e3,
                k.variant_ns / k.original_ns.max(1.0)
            );
        }
    }
    if let Some(i) = a.cost_interval() {
        out += &format!(
            "  cost ratio {:.4}, 95% interval {:.4}..{:.4}: {}\n",
            i.estimate,
            i.lo,
            i.hi,
            if i.below(1.0) {
                "faster"
            } else if i.lo > 1.0 {
                "slower"
            } else {
                "no difference shown"
            }
        );
    }
    out
}
