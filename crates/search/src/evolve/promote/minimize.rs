//! Minimization: a validated variant keeps only the edits its speedup
//! needs. Where the backend runs the PTX alone ([`Backend::runs_ptx`]), an
//! edit whose removal leaves the PTX as it is goes without a measurement:
//! the same PTX is the same program (most of a search's edits change
//! nothing code generation keeps).

use super::{assess_one, Promotion};
use crate::evolve::{Backend, EvolveError};
use gevo_ir::{KernelIr, Patch};
use gevo_model::spec::TestSet;

/// A minimized patch, and what minimizing it took.
pub(super) struct Minimized {
    pub patch: Patch,
    /// Its PTX is the patch's as found (every edit dropped left it as it
    /// was), on a backend that runs the PTX alone: the same program.
    pub same_program: bool,
    /// Variants measured on every test, the patch as found included.
    pub measured: usize,
}

impl Promotion {
    /// Drops, last edit first, each edit whose removal keeps the variant
    /// valid on every test and moves its cost by less than the threshold
    /// (relative to the patch as found, so small changes cannot add up).
    pub(super) fn minimize(
        &self,
        ir: &KernelIr,
        backend: &mut dyn Backend,
        patch: &Patch,
    ) -> Result<Minimized, EvolveError> {
        let full = assess_one(backend, patch, TestSet::All)?;
        let Some(full_cost) = full.cost_ratio() else {
            return Ok(Minimized {
                patch: patch.clone(),
                same_program: true,
                measured: 1,
            });
        };
        let found_ptx = ptx_hash(backend, patch)?;
        let mut current_ptx = found_ptx.clone();
        let mut current = patch.clone();
        let mut measured = 1;
        for i in (0..current.edits.len()).rev() {
            let mut candidate = current.clone();
            candidate.edits.remove(i);
            if ir.check(&candidate).is_err() {
                continue; // a later edit needs this one
            }
            let candidate_ptx = ptx_hash(backend, &candidate)?;
            if candidate_ptx.is_some() && candidate_ptx == current_ptx {
                current = candidate;
                continue;
            }
            let a = assess_one(backend, &candidate, TestSet::All)?;
            measured += 1;
            // Still faster than the original, and within the threshold: an
            // improvement smaller than the threshold is never minimized away.
            let keeps_cost = a.cost_ratio().is_some_and(|c| {
                c < 1.0 && (c - full_cost).abs() < self.minimize_threshold * full_cost
            });
            if a.passed() && keeps_cost {
                current = candidate;
                current_ptx = candidate_ptx;
            }
        }
        Ok(Minimized {
            same_program: current == *patch || (found_ptx.is_some() && current_ptx == found_ptx),
            patch: current,
            measured,
        })
    }
}

/// `patch`'s PTX hash, where the backend runs the PTX alone and it builds.
fn ptx_hash(backend: &mut dyn Backend, patch: &Patch) -> Result<Option<String>, EvolveError> {
    if !backend.runs_ptx() {
        return Ok(None);
    }
    let build = backend.compile(std::slice::from_ref(patch))?.remove(0);
    Ok(build.ok().map(|b| b.ptx_hash))
}

#[cfg(test)]
mod tests {
    use super::super::tests::{key, member, Table};
    use crate::evolve::{Backend, BackendError, Build, Config, Engine, Scope};
    use gevo_ir::{KernelIr, Patch};
    use gevo_model::assessment::Assessment;
    use gevo_model::spec::TestSet;
    use rand::SeedableRng;
    use std::collections::BTreeMap;

    /// A [`Table`] whose PTX leaves out the `neutral` edit (code generation
    /// drops it), that runs the PTX alone where `runs_ptx`, and logs each
    /// assessment as (test set, the patch's key).
    struct Neutral {
        table: Table,
        neutral: String,
        runs_ptx: bool,
        assessed: Vec<(TestSet, String)>,
    }

    impl Backend for Neutral {
        fn scope(&self) -> Scope {
            self.table.scope()
        }
        fn test_set_hash(&self, set: TestSet) -> String {
            self.table.test_set_hash(set)
        }
        fn runs_ptx(&self) -> bool {
            self.runs_ptx
        }
        fn compile(
            &mut self,
            patches: &[Patch],
        ) -> Result<Vec<Result<Build, String>>, BackendError> {
            Ok(patches
                .iter()
                .map(|p| {
                    let mut kept = p.clone();
                    kept.edits
                        .retain(|e| serde_json::to_string(e).unwrap() != self.neutral);
                    Ok(Build {
                        ptx_hash: key(&kept),
                        ptx: key(&kept),
                    })
                })
                .collect())
        }
        fn assess(
            &mut self,
            patches: &[Patch],
            set: TestSet,
        ) -> Result<Vec<Assessment>, BackendError> {
            self.assessed.extend(patches.iter().map(|p| (set, key(p))));
            self.table.assess(patches, set)
        }
    }

    /// vecadd's IR and a three-edit variant each of whose edits can be
    /// dropped alone or with the one before it.
    fn three_edits() -> (KernelIr, Patch) {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let spec =
            gevo_model::spec::load(&root.join("tests/fixtures/kernels/vecadd.gevo.toml")).unwrap();
        let ir = KernelIr::load(&spec.ir, Some(&spec.kernel)).unwrap();
        for seed in 1..200 {
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
            let Ok(patch) = ir.mutate(&mut rng, 3) else {
                continue;
            };
            let without = |drop: &[usize]| {
                let mut p = patch.clone();
                p.edits = (0..3)
                    .filter(|i| !drop.contains(i))
                    .map(|i| p.edits[i].clone())
                    .collect();
                p
            };
            let subsets: [&[usize]; 5] = [&[2], &[1], &[0], &[1, 0], &[2, 0]];
            if patch.edits.len() == 3 && subsets.iter().all(|d| ir.check(&without(d)).is_ok()) {
                return (ir, patch);
            }
        }
        panic!("no three-edit vecadd variant whose edits drop alone");
    }

    /// A backend on `table` with `neutral` (an edit's JSON, or none),
    /// running the PTX alone where `runs_ptx`, and an engine whose
    /// population is `patch`, valid at 0.8, to promote.
    fn promoting(
        patch: &Patch,
        table: BTreeMap<String, (f64, bool)>,
        neutral: String,
        runs_ptx: bool,
    ) -> (Neutral, Engine) {
        let backend = Neutral {
            table: Table(table, None),
            neutral,
            runs_ptx,
            assessed: Vec::new(),
        };
        let config = Config {
            population: 4,
            promotions_per_generation: 1,
            ..Config::default()
        };
        let mut engine = Engine::new(config, 1).unwrap();
        engine.population = vec![member(patch, 0.8)];
        (backend, engine)
    }

    fn only(patch: &Patch, keep: &[usize]) -> Patch {
        let mut p = patch.clone();
        p.edits = keep.iter().map(|&i| patch.edits[i].clone()).collect();
        p
    }

    /// Edit 1 is neutral (the PTX leaves it out); the patch passes, as does
    /// edit 2 alone where `two_alone_passes`. Minimized last edit first:
    /// dropping edit 2 fails; dropping edit 1 leaves the PTX as it is, so
    /// a backend that runs the PTX alone drops it unmeasured; then dropping
    /// edit 0 leaves edit 2 alone.
    #[test]
    fn an_edit_that_leaves_the_ptx_as_it_is_is_dropped_unmeasured() {
        let (ir, patch) = three_edits();
        let neutral = serde_json::to_string(&patch.edits[1]).unwrap();
        let cases = [
            // runs_ptx, edit 2 alone passes: kept, same program, measured
            (
                true,
                true,
                vec![2],
                false,
                vec![vec![0, 1, 2], vec![0, 1], vec![2]],
            ),
            (
                true,
                false,
                vec![0, 2],
                true,
                vec![vec![0, 1, 2], vec![0, 1], vec![2]],
            ),
            (
                false,
                true,
                vec![0, 1, 2],
                true,
                vec![vec![0, 1, 2], vec![0, 1], vec![0, 2], vec![1, 2]],
            ),
        ];
        for (runs_ptx, two_alone_passes, kept, same_program, measured) in cases {
            let mut table = BTreeMap::from([(key(&patch), (0.8, true))]);
            if two_alone_passes {
                table.insert(key(&only(&patch, &[2])), (0.8, true));
            }
            let (mut backend, engine) = promoting(&patch, table, neutral.clone(), runs_ptx);
            let promotion = engine.promotion(0);
            let minimized = promotion.minimize(&ir, &mut backend, &patch).unwrap();
            let case = format!("runs_ptx {runs_ptx}, edit 2 alone passes {two_alone_passes}");
            assert_eq!(minimized.patch, only(&patch, &kept), "{case}");
            assert_eq!(minimized.same_program, same_program, "{case}");
            let expected: Vec<_> = measured
                .iter()
                .map(|k| (TestSet::All, key(&only(&patch, k))))
                .collect();
            assert_eq!(backend.assessed, expected, "{case}");
            assert_eq!(minimized.measured, expected.len(), "{case}");
        }
    }

    /// A minimized patch with the PTX of the patch as found is not measured
    /// on the held-out tests again: the validated variant keeps the first
    /// held-out run.
    #[test]
    fn the_same_program_is_not_measured_on_the_heldout_tests_again() {
        let (ir, patch) = three_edits();
        let neutral = serde_json::to_string(&patch.edits[1]).unwrap();
        let table = BTreeMap::from([(key(&patch), (0.8, true))]);
        let (mut backend, mut engine) = promoting(&patch, table, neutral, true);
        let (validated, failed) = engine.promote(&ir, &mut backend, 0).unwrap();
        assert!(failed.is_empty(), "{failed:?}");
        assert_eq!(validated.len(), 1);
        assert_eq!(validated[0].minimized, only(&patch, &[0, 2]));
        let heldout: Vec<_> = backend
            .assessed
            .iter()
            .filter(|(s, _)| *s == TestSet::Heldout)
            .collect();
        assert_eq!(heldout, [&(TestSet::Heldout, key(&patch))]);
    }

    /// A candidate that passes the held-out tests but is not faster there
    /// as found fails without being minimized: its one measurement is the
    /// held-out run.
    #[test]
    fn a_candidate_not_faster_as_found_is_not_minimized() {
        let (ir, patch) = three_edits();
        let table = BTreeMap::from([(key(&patch), (1.0, true))]);
        let (mut backend, mut engine) = promoting(&patch, table, String::new(), true);
        let (validated, failed) = engine.promote(&ir, &mut backend, 0).unwrap();
        assert!(validated.is_empty(), "{validated:?}");
        assert_eq!(failed.len(), 1);
        assert!(
            failed[0].reason.starts_with("not faster with confidence"),
            "{failed:?}"
        );
        assert_eq!(backend.assessed, [(TestSet::Heldout, key(&patch))]);
    }
}
