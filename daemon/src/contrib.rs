//! Edit contributions of a validated variant (ablation and epistasis, as
//! Magpie and the GI literature call it): which edit gives the speed, which
//! only makes another one valid, which does nothing measurable.
//!
//! Given a minimized patch, every subset that tells one edit from the
//! others is run like promotion runs a candidate: the same backend, the
//! same test set (the held-out tests by default), the cost ratio with its
//! confidence interval (a bootstrap over the GPU's rounds; the exact point
//! on the simulator). The subsets are each edit alone, the patch without
//! each edit (leave-one-out), and, for patches of up to
//! [`Options::max_pair_edits`] edits, every pair. A subset that does not
//! replay on the original IR (an edit names an instruction another edit
//! creates) is recorded as such and never run.
//!
//! The classification rule, with `F` the full patch's cost-ratio interval
//! and `t` the threshold (minimization's, 1%):
//! - **carries speed**: the patch without the edit passes every test and
//!   is slower than the full patch with confidence (its interval's low end
//!   above `F.hi * (1 + t)`), or the edit alone passes and is faster than
//!   the original with confidence (its interval's high end below `1 - t`);
//! - **enabling**: not carrying speed, and another edit needs it: the patch
//!   without it fails a test or does not replay, or (pairs measured) for an
//!   edit `j` that carries speed but alone fails or is not faster than the
//!   original with confidence, the pair of the two passes and is;
//! - **neutral**: neither.
//!
//! No I/O: the backend runs everything, the caller stores the result.

use crate::assessment::Assessment;
use crate::evolve::{Backend, BackendError, Scope};
use crate::ir::{KernelIr, Patch};
use crate::spec::TestSet;
use crate::stats::Interval;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Why the analysis could not be done.
#[derive(Debug, thiserror::Error)]
pub enum ContribError {
    #[error(transparent)]
    Backend(#[from] BackendError),
    #[error("the patch has no edits to explain")]
    Empty,
    #[error("the full patch does not pass the tests: {0}")]
    FullFails(String),
}

/// How the analysis measures and judges.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// The tests every subset runs on (promotion's: the held-out tests).
    pub set: TestSet,
    /// The relative cost difference below which two subsets count as
    /// equally fast (minimization's threshold).
    pub threshold: f64,
    /// Every pair is measured for patches of at most this many edits.
    pub max_pair_edits: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            set: TestSet::Heldout,
            threshold: 0.01,
            max_pair_edits: 6,
        }
    }
}

/// What one subset of the edits did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Outcome {
    /// The subset does not replay on the original IR.
    NoReplay { reason: String },
    /// It ran and failed a test (or measured no cost).
    Fails { reason: String },
    /// It passed every test: its cost ratio to the original, with the
    /// 95% interval.
    Passes { cost: Interval },
}

impl Outcome {
    /// The cost interval, when the subset passed.
    pub fn cost(&self) -> Option<Interval> {
        match self {
            Outcome::Passes { cost } => Some(*cost),
            _ => None,
        }
    }

    /// One short phrase: `cost 0.8123 (0.80..0.82)`, `fails: ...`.
    pub fn phrase(&self) -> String {
        match self {
            Outcome::Passes { cost } if cost.lo == cost.hi => format!("cost {:.4}", cost.estimate),
            Outcome::Passes { cost } => {
                format!("cost {:.4} ({:.4}..{:.4})", cost.estimate, cost.lo, cost.hi)
            }
            Outcome::Fails { reason } => format!("fails: {reason}"),
            Outcome::NoReplay { reason } => format!("does not replay: {reason}"),
        }
    }
}

/// One measured subset: the indices of its edits in the patch, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Subset {
    pub edits: Vec<usize>,
    pub outcome: Outcome,
}

/// What an edit is to the variant's speed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    CarriesSpeed,
    Enabling,
    Neutral,
}

impl Class {
    pub fn name(self) -> &'static str {
        match self {
            Class::CarriesSpeed => "carries speed",
            Class::Enabling => "enabling",
            Class::Neutral => "neutral",
        }
    }
}

/// One edit's contribution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EditContribution {
    /// Its index in the patch.
    pub index: usize,
    /// The edit, as IR ids (`delete 14`).
    pub edit: String,
    /// The kernel it edits (a pipeline's; the kernel of a single-kernel spec).
    pub kernel: String,
    pub class: Class,
    /// Why, in one line.
    pub why: String,
    /// The edit alone on the original.
    pub alone: Outcome,
    /// The patch without it.
    pub without: Outcome,
    /// The speed-carrying edits it is needed by, where pairs tell.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub enables: Vec<usize>,
}

/// The analysis of one patch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Contributions {
    /// Where it was measured.
    pub scope: Scope,
    /// `heldout`, `train` or `all`.
    pub set: String,
    pub threshold: f64,
    /// The patch explained (a validated variant's minimized patch).
    pub patch: Patch,
    /// The full patch's cost ratio.
    pub full: Interval,
    pub edits: Vec<EditContribution>,
    /// Every pair of edits, when the patch has at most `max_pair_edits`.
    pub pairs: Vec<Subset>,
    /// Distinct subsets run on the backend (the full patch included).
    pub variants_measured: usize,
    /// Subsets that did not replay (never run).
    pub not_replayed: usize,
    /// Wall-clock seconds the measurements took.
    pub seconds: f64,
}

/// Measures the subsets of `patch` on `backend` and classifies each edit.
pub fn analyze(
    ir: &KernelIr,
    backend: &mut dyn Backend,
    patch: &Patch,
    options: &Options,
) -> Result<Contributions, ContribError> {
    let n = patch.edits.len();
    if n == 0 {
        return Err(ContribError::Empty);
    }
    let all: Vec<usize> = (0..n).collect();
    let mut wanted: Vec<Vec<usize>> = vec![all.clone()];
    wanted.extend((0..n).map(|i| vec![i]));
    wanted.extend((0..n).map(|i| without(&all, i)));
    let pairs_measured = n >= 3 && n <= options.max_pair_edits;
    if pairs_measured {
        for i in 0..n {
            for j in i + 1..n {
                wanted.push(vec![i, j]);
            }
        }
    }
    let started = std::time::Instant::now();
    let outcomes = measure(ir, backend, patch, &wanted, options.set)?;
    let seconds = started.elapsed().as_secs_f64();
    let full = match &outcomes[&all] {
        Outcome::Passes { cost } => *cost,
        other => return Err(ContribError::FullFails(other.phrase())),
    };
    let t = options.threshold;
    let alone = |i: usize| outcomes[&vec![i]].clone();
    let rest = |i: usize| outcomes[&without(&all, i)].clone();
    let faster_than_original = |o: &Outcome| o.cost().is_some_and(|c| c.hi < 1.0 - t);
    let slower_than_full = |o: &Outcome| o.cost().is_some_and(|c| c.lo > full.hi * (1.0 + t));

    let carries: Vec<bool> = (0..n)
        .map(|i| slower_than_full(&rest(i)) || faster_than_original(&alone(i)))
        .collect();
    let mut edits = Vec::with_capacity(n);
    for i in 0..n {
        let (a, w) = (alone(i), rest(i));
        let enables: Vec<usize> = if pairs_measured {
            (0..n)
                .filter(|&j| j != i && carries[j] && !faster_than_original(&alone(j)))
                .filter(|&j| faster_than_original(&outcomes[&pair(i, j)]))
                .collect()
        } else {
            Vec::new()
        };
        let (class, why) = if carries[i] {
            let why = match w.cost() {
                Some(c) if slower_than_full(&w) => format!(
                    "without it the cost ratio rises from {:.4} to {:.4}",
                    full.estimate, c.estimate
                ),
                _ => format!("alone it is faster than the original ({})", a.phrase()),
            };
            (Class::CarriesSpeed, why)
        } else if !enables.is_empty() {
            let names: Vec<String> = enables.iter().map(|j| format!("#{}", j + 1)).collect();
            let why = format!(
                "alone it is no faster ({}); edit {} is faster only with it",
                a.phrase(),
                names.join(", ")
            );
            (Class::Enabling, why)
        } else if w.cost().is_none() {
            let why = format!(
                "the other edits need it: without it the patch {}",
                w.phrase()
            );
            (Class::Enabling, why)
        } else {
            let why = format!(
                "without it {}, alone {}: within {:.0}% of the full patch",
                w.phrase(),
                a.phrase(),
                t * 100.0
            );
            (Class::Neutral, why)
        };
        let edit = &patch.edits[i];
        edits.push(EditContribution {
            index: i,
            edit: edit.to_string(),
            kernel: kernel_of(ir, patch, i),
            class,
            why,
            alone: a,
            without: w,
            enables,
        });
    }
    let pairs = if pairs_measured {
        (0..n)
            .flat_map(|i| (i + 1..n).map(move |j| pair(i, j)))
            .map(|edits| Subset {
                outcome: outcomes[&edits].clone(),
                edits,
            })
            .collect()
    } else {
        Vec::new()
    };
    let not_replayed = outcomes
        .values()
        .filter(|o| matches!(o, Outcome::NoReplay { .. }))
        .count();
    Ok(Contributions {
        scope: backend.scope(),
        set: set_name(options.set).to_string(),
        threshold: t,
        patch: patch.clone(),
        full,
        edits,
        pairs,
        variants_measured: outcomes.len() - not_replayed,
        not_replayed,
        seconds,
    })
}

fn set_name(set: TestSet) -> &'static str {
    match set {
        TestSet::Train => "train",
        TestSet::Heldout => "heldout",
        TestSet::All => "all",
        TestSet::Generated => "generated",
    }
}

fn without(all: &[usize], i: usize) -> Vec<usize> {
    all.iter().copied().filter(|&k| k != i).collect()
}

fn pair(i: usize, j: usize) -> Vec<usize> {
    if i < j {
        vec![i, j]
    } else {
        vec![j, i]
    }
}

/// The subset of `patch` holding the edits at `indices`.
fn subset(patch: &Patch, indices: &[usize]) -> Patch {
    Patch {
        edits: indices.iter().map(|&i| patch.edits[i].clone()).collect(),
        ..patch.clone()
    }
}

/// Runs each distinct subset that replays, in one batch.
fn measure(
    ir: &KernelIr,
    backend: &mut dyn Backend,
    patch: &Patch,
    wanted: &[Vec<usize>],
    set: TestSet,
) -> Result<BTreeMap<Vec<usize>, Outcome>, ContribError> {
    let mut outcomes = BTreeMap::new();
    let mut to_run: Vec<(Vec<usize>, Patch)> = Vec::new();
    for indices in wanted {
        if outcomes.contains_key(indices) || to_run.iter().any(|(k, _)| k == indices) {
            continue;
        }
        let p = subset(patch, indices);
        match ir.check(&p) {
            Ok(()) => to_run.push((indices.clone(), p)),
            Err(e) => {
                outcomes.insert(
                    indices.clone(),
                    Outcome::NoReplay {
                        reason: e.to_string(),
                    },
                );
            }
        }
    }
    let batch: Vec<Patch> = to_run.iter().map(|(_, p)| p.clone()).collect();
    let results = backend.assess(&batch, set)?;
    tracing::debug!(subsets = batch.len(), "edit contributions measured");
    for ((indices, _), a) in to_run.into_iter().zip(results) {
        outcomes.insert(indices, outcome_of(&a));
    }
    Ok(outcomes)
}

fn outcome_of(a: &Assessment) -> Outcome {
    if let Some(reason) = a.first_failure() {
        return Outcome::Fails { reason };
    }
    match a.cost_interval() {
        Some(cost) => Outcome::Passes { cost },
        None => Outcome::Fails {
            reason: "no cost measured".into(),
        },
    }
}

/// The kernel edit `i` works on: that of the first original instruction
/// it names (a clone's kernel is its source's).
fn kernel_of(ir: &KernelIr, patch: &Patch, i: usize) -> String {
    let kernels = ir.chosen_kernels();
    patch.edits[i]
        .ids()
        .into_iter()
        .find_map(|id| ir.kernel_of(id))
        .and_then(|k| kernels.get(k).map(|s| s.to_string()))
        .unwrap_or_else(|| patch.kernel.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::assessment::TestSummary;
    use crate::evolve::Build;
    use rand::SeedableRng;

    /// Answers from a table keyed by the subset's edits (as indices into
    /// the planted patch): a cost ratio, or `None` for a failing test.
    struct Table {
        patch: Patch,
        rows: BTreeMap<Vec<usize>, Option<f64>>,
        runs: usize,
        /// 0: exact costs (the simulator); else GPU-like timing rounds, each
        /// off by up to this fraction, so each cost has a bootstrap interval.
        noise: f64,
    }

    /// 40 paired rounds (a held-out test's) around `cost`, off by up to
    /// `noise` each, drawn from a fixed seed.
    fn rounds(cost: f64, noise: f64, seed: u64) -> crate::stats::Timing {
        use rand::Rng;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let mut jitter = |base: f64| base * (1.0 + noise * rng.gen_range(-1.0..1.0));
        crate::stats::Timing {
            original_ns: (0..40).map(|_| jitter(1000.0)).collect(),
            variant_ns: (0..40).map(|_| jitter(1000.0 * cost)).collect(),
        }
    }

    impl Table {
        fn indices(&self, p: &Patch) -> Vec<usize> {
            p.edits
                .iter()
                .map(|e| self.patch.edits.iter().position(|x| x == e).unwrap())
                .collect()
        }
    }

    impl Backend for Table {
        fn scope(&self) -> Scope {
            Scope {
                backend: "table".into(),
                target: "-".into(),
            }
        }
        fn test_set_hash(&self, _: TestSet) -> String {
            "t".into()
        }
        fn compile(&mut self, _: &[Patch]) -> Result<Vec<Result<Build, String>>, BackendError> {
            unreachable!("contributions only assess")
        }
        fn assess(
            &mut self,
            patches: &[Patch],
            _: TestSet,
        ) -> Result<Vec<Assessment>, BackendError> {
            self.runs += patches.len();
            Ok(patches
                .iter()
                .map(|p| {
                    let key = self.indices(p);
                    let cost = *self
                        .rows
                        .get(&key)
                        .unwrap_or_else(|| panic!("no row {key:?}"));
                    let seed = key.iter().fold(1u64, |h, i| h * 31 + *i as u64);
                    let timing = cost
                        .filter(|_| self.noise > 0.0)
                        .map(|c| rounds(c, self.noise, seed));
                    Assessment {
                        tests: vec![TestSummary {
                            test: "t".into(),
                            failure: cost.is_none().then(|| ("race".into(), "planted".into())),
                            cost: cost.map(|c| (c * 10000.0).round() as u64),
                            original_cost: 10000,
                            error: Some(0.0),
                            timing,
                            kernels: Vec::new(),
                        }],
                        device: None,
                    }
                })
                .collect())
        }
    }

    /// Three edits of the vecadd fixture that replay in every subset.
    fn three_edits() -> (KernelIr, Patch) {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let spec =
            crate::spec::load(&root.join("tests/fixtures/kernels/vecadd.gevo.toml")).unwrap();
        let ir = KernelIr::load(&spec.ir, Some(&spec.kernel)).unwrap();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        for _ in 0..200 {
            let mut patch = ir.empty_patch();
            for _ in 0..3 {
                patch.edits.extend(ir.mutate(&mut rng, 1).unwrap().edits);
            }
            let all = [0usize, 1, 2];
            let replays = (1u8..8).all(|mask| {
                let s: Vec<usize> = all
                    .iter()
                    .copied()
                    .filter(|i| mask & (1 << i) != 0)
                    .collect();
                ir.check(&subset(&patch, &s)).is_ok()
            });
            let distinct = patch.edits[0] != patch.edits[1]
                && patch.edits[1] != patch.edits[2]
                && patch.edits[0] != patch.edits[2];
            if replays && distinct {
                return (ir, patch);
            }
        }
        panic!("no three independent edits found");
    }

    /// Each case: the cost of every subset (`None`: fails a test), and the
    /// classes expected for edits 0, 1, 2.
    #[test]
    fn edits_are_classified_by_the_documented_rule() {
        use Class::*;
        type Row = (&'static [usize], Option<f64>);
        let cases: &[(&str, &[Row], [Class; 3])] = &[
            (
                "0 carries the speed, 1 enables it, 2 is neutral",
                &[
                    (&[0, 1, 2], Some(0.5)),
                    (&[0], None),
                    (&[1], Some(1.0)),
                    (&[2], Some(1.0)),
                    (&[1, 2], Some(1.0)),
                    (&[0, 2], None),
                    (&[0, 1], Some(0.5)),
                ],
                [CarriesSpeed, Enabling, Neutral],
            ),
            (
                "two independent speedups, and a slower-alone edit nothing needs",
                &[
                    (&[0, 1, 2], Some(0.6)),
                    (&[0], Some(0.8)),
                    (&[1], Some(0.8)),
                    (&[2], Some(1.05)),
                    (&[1, 2], Some(0.8)),
                    (&[0, 2], Some(0.8)),
                    (&[0, 1], Some(0.6)),
                ],
                [CarriesSpeed, CarriesSpeed, Neutral],
            ),
            (
                "an edit within the threshold is neutral; one that is slower alone but makes a failing edit pass enables it",
                &[
                    (&[0, 1, 2], Some(0.7)),
                    (&[0], Some(1.0)),
                    (&[1], Some(1.02)),
                    (&[2], None),
                    (&[1, 2], Some(0.7)),
                    (&[0, 2], None),
                    (&[0, 1], Some(1.02)),
                ],
                [Neutral, Enabling, CarriesSpeed],
            ),
        ];
        let (ir, patch) = three_edits();
        for (name, rows, expected) in cases {
            let mut backend = Table {
                patch: patch.clone(),
                rows: rows.iter().map(|(k, c)| (k.to_vec(), *c)).collect(),
                runs: 0,
                noise: 0.0,
            };
            let c = analyze(&ir, &mut backend, &patch, &Options::default()).unwrap();
            let got: Vec<Class> = c.edits.iter().map(|e| e.class).collect();
            assert_eq!(got, expected, "{name}: {:#?}", c.edits);
            // Full, 3 alone and 3 leave-one-out (= the 3 pairs): 7 runs.
            assert_eq!((c.variants_measured, backend.runs), (7, 7), "{name}");
            assert_eq!(c.pairs.len(), 3, "{name}");
            assert!(c.edits.iter().all(|e| e.kernel == "vecadd"), "{name}");
        }
    }

    /// With GPU-like timing noise the same costs are judged by their
    /// intervals: a 3% loss within 8% noise per round is no loss with
    /// confidence, a 40% loss is; the exact costs call both losses.
    #[test]
    fn on_noisy_timings_only_a_loss_beyond_the_intervals_carries_speed() {
        use Class::*;
        let rows: BTreeMap<Vec<usize>, Option<f64>> = [
            (vec![0, 1, 2], Some(0.60)),
            (vec![0], Some(1.0)),
            (vec![1], Some(0.62)),
            (vec![2], Some(1.0)),
            (vec![1, 2], Some(0.62)), // without 0: 3% slower than the full patch
            (vec![0, 2], Some(1.0)),  // without 1: all of the speed gone
            (vec![0, 1], Some(0.60)),
        ]
        .into_iter()
        .collect();
        let (ir, patch) = three_edits();
        for (noise, expected) in [
            (0.0, [CarriesSpeed, CarriesSpeed, Neutral]),
            (0.08, [Neutral, CarriesSpeed, Neutral]),
        ] {
            let mut backend = Table {
                patch: patch.clone(),
                rows: rows.clone(),
                runs: 0,
                noise,
            };
            let c = analyze(&ir, &mut backend, &patch, &Options::default()).unwrap();
            let got: Vec<Class> = c.edits.iter().map(|e| e.class).collect();
            assert_eq!(got, expected, "noise {noise}: {:#?}", c.edits);
            let without_0 = c.edits[0].without.cost().unwrap();
            assert_eq!(noise > 0.0, without_0.lo < without_0.hi, "{without_0:?}");
        }
    }

    #[test]
    fn a_failing_full_patch_or_an_empty_one_is_an_error() {
        let (ir, patch) = three_edits();
        let mut backend = Table {
            patch: patch.clone(),
            rows: BTreeMap::from([(vec![0, 1, 2], None)]),
            runs: 0,
            noise: 0.0,
        };
        // Every subset must have a row: give the others one.
        for s in [
            vec![0],
            vec![1],
            vec![2],
            vec![0, 1],
            vec![0, 2],
            vec![1, 2],
        ] {
            backend.rows.insert(s, Some(1.0));
        }
        let err = analyze(&ir, &mut backend, &patch, &Options::default()).unwrap_err();
        assert!(
            matches!(err, ContribError::FullFails(ref m) if m.contains("planted")),
            "{err}"
        );
        let err = analyze(&ir, &mut backend, &ir.empty_patch(), &Options::default()).unwrap_err();
        assert!(matches!(err, ContribError::Empty), "{err}");
    }
}
