//! Generated held-out tests on the simulator: the candidates
//! `spec::generate` derives, kept where the original kernel runs them
//! cleanly (no fault, race, divergent barrier or runaway loop) within the
//! cost cap; the kept ones run on every variant about to be validated.

use super::{EvalError, Evaluator, Reference, MIN_BLOCK_BUDGET};
use gevo_ir::Patch;
use gevo_model::assessment::TestResult;
use gevo_model::sim::Limits;
use gevo_model::spec::generate::{self, Candidate};
use gevo_model::spec::{TestCase, TestSet};
use std::collections::BTreeSet;
use std::sync::Arc;

/// A generated test costs at most this many times the original's cost on
/// the user's most expensive test (on the simulator, deterministic).
pub const COST_CAP_FACTOR: u64 = 2;
/// A candidate's buffers may be at most this many times the user's largest.
const BYTES_CAP_FACTOR: usize = 4;

/// The generated tests of one spec: kept and dropped, and what the user's
/// own tests miss.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GeneratedTests {
    pub kept: Vec<Kept>,
    pub dropped: Vec<Dropped>,
    /// `spec::generate::lints`: no partial block, parameters always equal.
    pub lints: Vec<String>,
    /// The cap a kept test's original cost stays under.
    pub cost_cap: u64,
}

/// A generated test the original runs cleanly.
#[derive(Debug, Clone, PartialEq)]
pub struct Kept {
    pub test: TestCase,
    pub why: String,
    /// The parameters it changes from the user's test.
    pub changed: BTreeSet<String>,
    /// The original's simulator cost on it.
    pub cost: u64,
}

/// A candidate not kept, and why (the original faults there, the cap).
#[derive(Debug, Clone, PartialEq)]
pub struct Dropped {
    pub test: TestCase,
    pub why: String,
    /// The parameters it changes from the user's test.
    pub changed: BTreeSet<String>,
    pub reason: String,
}

impl GeneratedTests {
    /// The original's summed cost over the kept tests: what each
    /// validation pays for them, on the simulator.
    pub fn cost(&self) -> u64 {
        self.kept.iter().map(|k| k.cost).sum()
    }
}

/// How many times the user's tests' largest block the original may run on
/// a generated test: generated sizes are larger than the user's, so this is
/// wider than a variant's budget against its own reference.
const ORIGINAL_BUDGET_FACTOR: u64 = 20;

impl Evaluator {
    /// The generated tests, made on first use: each candidate run on the
    /// original (with a step budget of `ORIGINAL_BUDGET_FACTOR` times the
    /// user's tests' largest block, so a candidate where the original runs
    /// away is dropped, not hung).
    pub fn generated(&self) -> Result<Arc<GeneratedTests>, EvalError> {
        let mut slot = self.generated.lock().expect("generated tests");
        if let Some(g) = &*slot {
            return Ok(g.clone());
        }
        let g = Arc::new(self.generate()?);
        for k in &g.kept {
            tracing::debug!(test = %k.test.name, why = %k.why, cost = k.cost, "generated test kept");
        }
        *slot = Some(g.clone());
        Ok(g)
    }

    fn generate(&self) -> Result<GeneratedTests, EvalError> {
        let spec = &self.spec;
        let users = spec.tests(TestSet::All);
        let mut max_cost = 0;
        let mut max_steps = 0;
        let mut max_bytes = 0;
        for t in &users {
            let r = self.reference(t)?;
            max_cost = max_cost.max(r.stats.cost);
            max_steps = max_steps.max(r.stats.max_block_steps);
            max_bytes = max_bytes.max(spec.buffer_bytes(t)?);
        }
        let cost_cap = max_cost.saturating_mul(COST_CAP_FACTOR).max(1);
        let limits = Limits {
            block_step_budget: max_steps
                .saturating_mul(ORIGINAL_BUDGET_FACTOR)
                .max(MIN_BLOCK_BUDGET),
        };
        let max = spec.generation().max;
        let mut out = GeneratedTests {
            lints: generate::lints(spec),
            cost_cap,
            ..GeneratedTests::default()
        };
        for Candidate { test, why, changed } in generate::candidates(spec) {
            let drop = |reason: String| Dropped {
                test: test.clone(),
                why: why.clone(),
                changed: changed.clone(),
                reason,
            };
            if out.kept.len() >= max {
                out.dropped
                    .push(drop(format!("not run: {max} kept already")));
                continue;
            }
            match spec.buffer_bytes(&test) {
                Err(e) => {
                    out.dropped
                        .push(drop(format!("the spec does not make it: {}", e.message)));
                    continue;
                }
                Ok(b) if b > max_bytes.saturating_mul(BYTES_CAP_FACTOR) => {
                    out.dropped.push(drop(format!(
                        "over the size cap ({b} buffer bytes, {BYTES_CAP_FACTOR}x the user's largest test)"
                    )));
                    continue;
                }
                Ok(_) => {}
            }
            let instance = match spec.instantiate_on(&test, self.workers) {
                Ok(i) => i,
                Err(e) => {
                    out.dropped
                        .push(drop(format!("the spec does not make it: {}", e.message)));
                    continue;
                }
            };
            match self.run_original(&instance, limits) {
                Err(verdict) => out.dropped.push(drop(format!(
                    "the original fails there: {}",
                    self.located(verdict)
                ))),
                Ok((stats, ..)) if stats.cost > cost_cap => out.dropped.push(drop(format!(
                    "over the cost cap (the original costs {}, cap {cost_cap}: {COST_CAP_FACTOR}x the user's costliest test)",
                    stats.cost
                ))),
                Ok((stats, outputs, protected)) => {
                    let cost = stats.cost;
                    self.references.lock().expect("reference cache").insert(
                        test.name.clone(),
                        Arc::new(Reference {
                            instance,
                            outputs,
                            stats,
                            protected,
                        }),
                    );
                    out.kept.push(Kept {
                        test,
                        why,
                        changed,
                        cost,
                    });
                }
            }
        }
        out.lints.extend(fixed_advice(&out));
        Ok(out)
    }

    /// Runs `patch` on the kept generated tests, stopping at the first
    /// failure; each result's test is named with what it covers
    /// (`generated[1] (n = 7: one partial block)`).
    pub fn evaluate_generated(&self, patch: &Patch) -> Result<Vec<TestResult>, EvalError> {
        let g = self.generated()?;
        let tests: Vec<&TestCase> = g.kept.iter().map(|k| &k.test).collect();
        let mut results = self.evaluate_until(patch, &tests, |r| r.failure.is_some())?;
        for (r, k) in results.iter_mut().zip(&g.kept) {
            r.test = format!("{} ({})", k.test.name, k.why);
        }
        Ok(results)
    }
}

/// When many generated tests were dropped because the original or the
/// spec cannot run them: the parameters every candidate changing them alone
/// was dropped for, and the `[tests] fixed` line that says they must keep
/// the user's values (a size tied to another, a step that must divide a
/// length).
fn fixed_advice(g: &GeneratedTests) -> Option<String> {
    let refused: Vec<&Dropped> = g
        .dropped
        .iter()
        .filter(|d| d.reason.starts_with("the original fails") || d.reason.starts_with("the spec"))
        .collect();
    let run = g.kept.len() + refused.len();
    if refused.len() < 2 || refused.len() * 2 < run {
        return None;
    }
    let alone = |d: &BTreeSet<String>| (d.len() == 1).then(|| d.iter().next().cloned()).flatten();
    let tried: BTreeSet<String> = refused.iter().filter_map(|d| alone(&d.changed)).collect();
    let kept: BTreeSet<String> = g.kept.iter().filter_map(|k| alone(&k.changed)).collect();
    let fix: Vec<String> = tried
        .difference(&kept)
        .map(|p| format!("\"{p}\""))
        .collect();
    if fix.is_empty() {
        return None;
    }
    Some(format!(
        "{} of {run} generated tests were dropped (the original or the spec cannot run them), and every one changing {} alone: if it must keep the user's values, say so ([tests] fixed = [{}])",
        refused.len(),
        fix.join(", ").replace('"', ""),
        fix.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(name: &str, changed: &[&str]) -> (TestCase, String, BTreeSet<String>) {
        let test = TestCase {
            name: name.into(),
            seed: 1,
            params: Default::default(),
        };
        let changed = changed.iter().map(|s| s.to_string()).collect();
        (test, name.into(), changed)
    }

    fn kept(name: &str, changed: &[&str]) -> Kept {
        let (test, why, changed) = case(name, changed);
        Kept {
            test,
            why,
            changed,
            cost: 1,
        }
    }

    fn dropped(name: &str, changed: &[&str], reason: &str) -> Dropped {
        let (test, why, changed) = case(name, changed);
        Dropped {
            test,
            why,
            changed,
            reason: reason.into(),
        }
    }

    /// Each case: kept and dropped candidates, and the advice (or none).
    #[test]
    fn fixed_is_advised_for_what_fails_wherever_it_changes_alone() {
        let fails = "the original fails there: out of bounds";
        let no_grid = "the spec does not make it: grid is negative";
        let cases: Vec<(Vec<Kept>, Vec<Dropped>, Option<&str>)> = vec![
            // ph alone always dropped, cols alone kept: fix ph.
            (
                vec![kept("a", &["cols"]), kept("s", &[])],
                vec![
                    dropped("all", &["cols", "ph", "rows"], no_grid),
                    dropped("b", &["ph"], fails),
                    dropped("c", &["ph"], no_grid),
                    dropped("d", &["rows", "cols"], fails),
                ],
                Some("4 of 6 generated tests were dropped (the original or the spec cannot run them), and every one changing ph alone: if it must keep the user's values, say so ([tests] fixed = [\"ph\"])"),
            ),
            // Few dropped: no advice.
            (
                vec![kept("a", &["cols"]), kept("b", &["rows"]), kept("c", &[])],
                vec![dropped("d", &["ph"], fails), dropped("e", &["ph"], fails)],
                None,
            ),
            // Dropped for the cap, not for running: no advice.
            (
                vec![kept("a", &["cols"])],
                vec![
                    dropped("b", &["ph"], "not run: 8 kept already"),
                    dropped("c", &["ph"], "over the cost cap (...)"),
                ],
                None,
            ),
        ];
        for (kept, dropped, expect) in cases {
            let g = GeneratedTests {
                kept,
                dropped,
                ..GeneratedTests::default()
            };
            assert_eq!(fixed_advice(&g).as_deref(), expect);
        }
    }
}
