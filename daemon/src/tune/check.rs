//! A configuration is kept only where it computes what the source's does:
//! its original's outputs on every simulator-sized train and held-out test
//! against the source configuration's, under the spec's acceptance.

use gevo_model::assessment::compare_outputs;
use gevo_model::spec::{Spec, TestSet, TestTarget};
use gevo_search::eval::Evaluator;

/// The source configuration's outputs on the simulator's tests.
pub(super) struct Reference {
    /// Per test of the simulator's train and held-out sets: its name and
    /// each argument's final bytes.
    outputs: Vec<(String, Vec<Vec<u8>>)>,
}

impl Reference {
    /// Runs the source's configuration (`tuned` as loaded) on every
    /// simulator test; why it cannot be the reference otherwise.
    pub(super) fn of(tuned: &Spec, workers: usize) -> Result<Self, String> {
        let source = Evaluator::new(tuned.for_backend(TestTarget::Sim), workers)
            .map_err(|e| e.to_string())?;
        let mut outputs = Vec::new();
        for test in source.spec().tests(TestSet::All) {
            let out = source.reference_outputs(test).map_err(|e| e.to_string())?;
            outputs.push((test.name.clone(), out));
        }
        Ok(Self { outputs })
    }

    /// Why the configuration `sim` runs is not the source's computation,
    /// if it is not: a fault, an output of another size, or outputs beyond
    /// the acceptance on some test.
    pub(super) fn check(&self, sim: &Evaluator) -> Result<(), String> {
        let spec = sim.spec();
        for (test, (name, expected)) in spec.tests(TestSet::All).into_iter().zip(&self.outputs) {
            debug_assert_eq!(&test.name, name);
            let actual = sim.reference_outputs(test).map_err(|e| e.to_string())?;
            for i in spec.outputs() {
                if actual[i].len() != expected[i].len() {
                    return Err(format!(
                        "{name} on the simulator: output {} has {} bytes, the source configuration's {}",
                        spec.args[i].name,
                        actual[i].len(),
                        expected[i].len()
                    ));
                }
            }
            let instance = spec.instantiate(test).map_err(|e| e.to_string())?;
            if let (Some(failure), _) = compare_outputs(spec, &instance, expected, &actual) {
                return Err(format!(
                    "{name} on the simulator: {failure}, against the source configuration's"
                ));
            }
        }
        Ok(())
    }
}
