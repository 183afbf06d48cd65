//! A job's generated held-out tests for the job view (`gevo-client jobs
//! <kernel>`): derived once per job, when a runner first starts it, from
//! the spec it read, on the simulator as promotion derives them (the spec's
//! `[tests.sim]` set, whatever the backend), and kept in the job's registry
//! entry.

use gevo_client::proto;
use gevo_model::spec::{Spec, TestTarget};
use gevo_search::eval::{Evaluator, GeneratedTests};

/// The generated tests kept and dropped and the lint lines; `None` for a
/// harness spec (it has none) or when the original cannot run (the job's
/// workers report that as the job's error).
pub fn derive(spec: &Spec, workers: usize) -> Option<proto::GeneratedTests> {
    if spec.harness.is_some() {
        return None;
    }
    let evaluator = Evaluator::new(spec.clone().for_backend(TestTarget::Sim), workers);
    match evaluator.and_then(|e| e.generated()) {
        Ok(g) => Some(to_wire(&g)),
        Err(e) => {
            tracing::warn!(error = %e, "generated held-out tests not derived");
            None
        }
    }
}

fn to_wire(g: &GeneratedTests) -> proto::GeneratedTests {
    proto::GeneratedTests {
        kept: g
            .kept
            .iter()
            .map(|k| proto::GeneratedTest {
                test: k.test.name.clone(),
                why: k.why.clone(),
                cost: Some(k.cost),
                reason: None,
            })
            .collect(),
        dropped: g
            .dropped
            .iter()
            .map(|d| proto::GeneratedTest {
                test: d.test.name.clone(),
                why: d.why.clone(),
                cost: None,
                reason: Some(d.reason.clone()),
            })
            .collect(),
        lints: g.lints.clone(),
        cost_per_validation: g.cost(),
    }
}
