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
//! creates) is recorded as such and never run. With
//! [`Options::alone_where_needed`] (the GPU's, where each subset costs
//! half a second of GPU time) and no pairs, the leave-one-outs run first
//! and an edit runs alone only where its leave-one-out did not show it
//! carrying speed: the alone outcome decides nothing more there. With
//! [`Options::race`] (the GPU's too) the full patch is timed in full first,
//! and each other subset only until its interval lies on one side of the
//! line that decides it ([`Backend::assess_against`]): a leave-one-out
//! against `F.hi + m`, an edit alone against `1 - m` (the rule below).
//!
//! The classification rule, relative to the full patch's gain: with `F` the
//! full patch's cost-ratio interval, `t` the threshold (minimization's, 1%)
//! and `m = t * (1 - F.estimate)` (that share of the gain, so a small full
//! gain is judged at its own scale):
//! - **carries speed**: the patch without the edit passes every test and
//!   is slower than the full patch with confidence, by more than `m` (its
//!   interval's low end above `F.hi + m`), or the edit alone passes and is
//!   faster than the original with confidence (its interval's high end
//!   below `1 - m`);
//! - **enabling**: not carrying speed, and another edit needs it: the patch
//!   without it fails a test or does not replay, or (pairs measured) for an
//!   edit `j` that carries speed but alone fails or is not faster than the
//!   original with confidence, the pair of the two passes and is;
//! - **neutral**: neither: removing it changes nothing measurable (within
//!   the intervals, or by less than `m`).
//!
//! What each edit relies on (a barrier's ordered accesses, a removed
//! store's unread value, motion across barriers and loops, the tests'
//! sizes) is `relies`, attached with [`Contributions::attach_relies`].
//!
//! No I/O: the backend runs everything, the caller stores the result.

mod flow;
pub mod relies;

use crate::evolve::{Backend, BackendError, Scope};
use gevo_ir::{KernelIr, Patch};
use gevo_model::assessment::Assessment;
use gevo_model::spec::TestSet;
use gevo_model::stats::Interval;
pub use relies::{Reliance, RelianceKind, ReliesOn};
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
    #[error(transparent)]
    Ir(#[from] gevo_ir::IrError),
    #[error(transparent)]
    Eval(#[from] crate::eval::EvalError),
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
    /// Where no pairs are measured: each edit alone only where the patch
    /// without it is not slower than the full patch with confidence (its
    /// alone outcome is then [`Outcome::NotMeasured`]).
    pub alone_where_needed: bool,
    /// Each subset but the full patch measured against the line that
    /// decides it, where the backend can stop early (the GPU's race).
    pub race: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            set: TestSet::Heldout,
            threshold: 0.01,
            max_pair_edits: 6,
            alone_where_needed: false,
            race: false,
        }
    }
}

impl Options {
    /// On a GPU every subset is timed (about 0.5 s of a pipeline's GPU
    /// time each in full): pairs only for three edits (where they are the
    /// leave-one-outs), each edit alone only where needed, and each subset
    /// raced against the line that decides it.
    pub fn on_gpu() -> Self {
        Options {
            max_pair_edits: 3,
            alone_where_needed: true,
            race: true,
            ..Options::default()
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
    /// Not run: the other subsets already decided the edit's class
    /// ([`Options::alone_where_needed`]).
    NotMeasured,
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
            Outcome::NotMeasured => "not measured (the patch without it decided)".into(),
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
    /// What it relies on, one line each (`relies`; empty in rows stored
    /// before the analysis existed, and for an edit relying on nothing found).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub relies_on: Vec<Reliance>,
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
    /// What the relies-on analysis cost; `None` until it ran (rows stored
    /// before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relies_cost: Option<ReliesCost>,
}

/// Simulator test runs and seconds the relies-on lines took.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ReliesCost {
    pub runs: usize,
    pub seconds: f64,
}

impl Contributions {
    /// Puts each edit's relies-on lines beside its contribution.
    /// Each line once per edit: two findings can word the same fact.
    pub fn attach_relies(&mut self, r: ReliesOn) {
        for (e, lines) in self.edits.iter_mut().zip(r.edits) {
            let mut seen = std::collections::BTreeSet::new();
            e.relies_on = lines
                .into_iter()
                .filter(|l| seen.insert(l.line.clone()))
                .collect();
        }
        self.relies_cost = Some(ReliesCost {
            runs: r.runs,
            seconds: r.seconds,
        });
    }
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
    let pairs_measured = n >= 3 && n <= options.max_pair_edits;
    let staged = options.alone_where_needed && !pairs_measured;
    let started = std::time::Instant::now();
    let plan = Plan {
        ir,
        patch,
        set: options.set,
        // Two edits or fewer: a subset is both an edit alone and a
        // leave-one-out, with two lines; every one is measured in full.
        race: options.race && n >= 3,
    };
    let first = if staged {
        leave_one_out_subsets(n)
    } else {
        wanted_subsets(n, pairs_measured)
    };
    // Racing, the full patch first: its interval sets the lines.
    let at_once = if plan.race { 1 } else { first.len() };
    let mut outcomes = plan.measure(backend, &first[..at_once], None)?;
    let full = match &outcomes[&all] {
        Outcome::Passes { cost } => *cost,
        other => return Err(ContribError::FullFails(other.phrase())),
    };
    let lines = Lines::new(options.threshold, full);
    if plan.race {
        // A leave-one-out decides against the full patch, any other
        // subset (an edit alone, a pair) against the original.
        let (leave_one_outs, others): (Vec<Vec<usize>>, Vec<Vec<usize>>) =
            first[1..].iter().cloned().partition(|s| s.len() == n - 1);
        outcomes.extend(plan.measure(backend, &leave_one_outs, Some(lines.without))?);
        outcomes.extend(plan.measure(backend, &others, Some(lines.alone))?);
    }
    if staged {
        plan.measure_alone_where_needed(backend, lines, &mut outcomes)?;
    }
    let seconds = started.elapsed().as_secs_f64();
    let judge = Judge {
        outcomes: &outcomes,
        all: &all,
        full,
        t: options.threshold,
    };
    let carries: Vec<bool> = (0..n).map(|i| judge.carries(i)).collect();
    let edits = (0..n)
        .map(|i| {
            let enables = if pairs_measured {
                judge.enables(i, &carries)
            } else {
                Vec::new()
            };
            let (a, w) = (judge.alone(i), judge.rest(i));
            let (class, why) = judge.classify(carries[i], &enables, &a, &w);
            EditContribution {
                index: i,
                edit: patch.edits[i].to_string(),
                kernel: kernel_of(ir, patch, i),
                class,
                why,
                alone: a,
                without: w,
                enables,
                relies_on: Vec::new(),
            }
        })
        .collect();
    let pairs = if pairs_measured {
        pair_subsets(&outcomes, n)
    } else {
        Vec::new()
    };
    let not_replayed = outcomes
        .values()
        .filter(|o| matches!(o, Outcome::NoReplay { .. }))
        .count();
    let not_measured = outcomes
        .values()
        .filter(|o| matches!(o, Outcome::NotMeasured))
        .count();
    Ok(Contributions {
        scope: backend.scope(),
        set: set_name(options.set).to_string(),
        threshold: options.threshold,
        patch: patch.clone(),
        full,
        edits,
        pairs,
        variants_measured: outcomes.len() - not_replayed - not_measured,
        not_replayed,
        seconds,
        relies_cost: None,
    })
}

/// The subsets to measure: the full patch, each edit alone, each
/// leave-one-out, then every pair when `pairs` is set.
fn wanted_subsets(n: usize, pairs: bool) -> Vec<Vec<usize>> {
    let all: Vec<usize> = (0..n).collect();
    let mut wanted: Vec<Vec<usize>> = vec![all.clone()];
    wanted.extend((0..n).map(|i| vec![i]));
    wanted.extend((0..n).map(|i| without(&all, i)));
    if pairs {
        for i in 0..n {
            for j in i + 1..n {
                wanted.push(vec![i, j]);
            }
        }
    }
    wanted
}

/// The full patch and each leave-one-out: the first stage where each edit
/// alone runs only where needed.
fn leave_one_out_subsets(n: usize) -> Vec<Vec<usize>> {
    let all: Vec<usize> = (0..n).collect();
    std::iter::once(all.clone())
        .chain((0..n).map(|i| without(&all, i)))
        .collect()
}

/// The lines of the module's rule, which decide an edit's class and where
/// a raced subset may stop: a leave-one-out's against the full patch, an
/// edit alone's (or a pair's) against the original.
#[derive(Debug, Clone, Copy)]
struct Lines {
    /// `F.hi + m`: slower than this with confidence, the edit carries speed.
    without: f64,
    /// `1 - m`: faster than this with confidence, the edit alone is faster.
    alone: f64,
}

impl Lines {
    /// With `m` the smallest difference that counts: the threshold `t`'s
    /// share of the full patch's gain (zero for a patch that gains nothing).
    fn new(t: f64, full: Interval) -> Lines {
        let m = t * (1.0 - full.estimate).max(0.0);
        Lines {
            without: full.hi + m,
            alone: 1.0 - m,
        }
    }

    /// Whether `o` passed and is slower than the full patch with confidence.
    fn slower_than_full(&self, o: &Outcome) -> bool {
        o.cost().is_some_and(|c| c.lo > self.without)
    }

    /// Whether `o` passed and is faster than the original with confidence.
    fn faster_than_original(&self, o: &Outcome) -> bool {
        o.cost().is_some_and(|c| c.hi < self.alone)
    }
}

/// What the measurements run on: the original, the patch whose subsets
/// they are, the test set, and whether subsets are raced.
struct Plan<'a> {
    ir: &'a KernelIr,
    patch: &'a Patch,
    set: TestSet,
    race: bool,
}

impl Plan<'_> {
    /// The second stage: each edit alone where the patch without it was
    /// not slower than the full patch with confidence;
    /// [`Outcome::NotMeasured`] for the others, whose class the
    /// leave-one-out decided.
    fn measure_alone_where_needed(
        &self,
        backend: &mut dyn Backend,
        lines: Lines,
        outcomes: &mut BTreeMap<Vec<usize>, Outcome>,
    ) -> Result<(), ContribError> {
        let all: Vec<usize> = (0..self.patch.edits.len()).collect();
        let (decided, needed): (Vec<usize>, Vec<usize>) = all
            .iter()
            .partition(|&&i| lines.slower_than_full(&outcomes[&without(&all, i)]));
        // With one or two edits an edit alone is the full patch or a
        // leave-one-out, measured already.
        let alone: Vec<Vec<usize>> = needed
            .iter()
            .map(|&i| vec![i])
            .filter(|s| !outcomes.contains_key(s))
            .collect();
        outcomes.extend(self.measure(backend, &alone, Some(lines.alone))?);
        for i in decided {
            outcomes.entry(vec![i]).or_insert(Outcome::NotMeasured);
        }
        Ok(())
    }

    /// Runs each distinct subset in `wanted` that replays, in one batch;
    /// raced against `line` where the plan races.
    fn measure(
        &self,
        backend: &mut dyn Backend,
        wanted: &[Vec<usize>],
        line: Option<f64>,
    ) -> Result<BTreeMap<Vec<usize>, Outcome>, ContribError> {
        let mut outcomes = BTreeMap::new();
        let mut to_run: Vec<(Vec<usize>, Patch)> = Vec::new();
        for indices in wanted {
            if outcomes.contains_key(indices) || to_run.iter().any(|(k, _)| k == indices) {
                continue;
            }
            let p = subset(self.patch, indices);
            match self.ir.check(&p) {
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
        if to_run.is_empty() {
            return Ok(outcomes);
        }
        let batch: Vec<Patch> = to_run.iter().map(|(_, p)| p.clone()).collect();
        let results = match line.filter(|_| self.race) {
            Some(line) => backend.assess_against(&batch, self.set, line)?,
            None => backend.assess(&batch, self.set)?,
        };
        tracing::debug!(subsets = batch.len(), ?line, "edit contributions measured");
        for ((indices, _), a) in to_run.into_iter().zip(results) {
            outcomes.insert(indices, outcome_of(&a));
        }
        Ok(outcomes)
    }
}

/// Every measured pair with its outcome, in index order.
fn pair_subsets(outcomes: &BTreeMap<Vec<usize>, Outcome>, n: usize) -> Vec<Subset> {
    (0..n)
        .flat_map(|i| (i + 1..n).map(move |j| pair(i, j)))
        .map(|edits| Subset {
            outcome: outcomes[&edits].clone(),
            edits,
        })
        .collect()
}

/// The measured outcomes with the classification rule's thresholds.
struct Judge<'a> {
    outcomes: &'a BTreeMap<Vec<usize>, Outcome>,
    all: &'a [usize],
    /// The full patch's cost-ratio interval.
    full: Interval,
    /// The relative threshold below which costs count as equal.
    t: f64,
}

impl Judge<'_> {
    /// Edit `i` alone on the original.
    fn alone(&self, i: usize) -> Outcome {
        self.outcomes[&vec![i]].clone()
    }

    /// The patch without edit `i`.
    fn rest(&self, i: usize) -> Outcome {
        self.outcomes[&without(self.all, i)].clone()
    }

    /// The rule's lines for this full patch and threshold.
    fn lines(&self) -> Lines {
        Lines::new(self.t, self.full)
    }

    /// The full patch's cost, with its interval where it has one.
    fn full_phrase(&self) -> String {
        Outcome::Passes { cost: self.full }.phrase()
    }

    /// Whether edit `i` carries speed (see the module's rule).
    fn carries(&self, i: usize) -> bool {
        self.lines().slower_than_full(&self.rest(i))
            || self.lines().faster_than_original(&self.alone(i))
    }

    /// The speed-carrying edits, not faster alone, that are faster paired
    /// with edit `i` (pairs measured only).
    fn enables(&self, i: usize, carries: &[bool]) -> Vec<usize> {
        (0..carries.len())
            .filter(|&j| j != i && carries[j] && !self.lines().faster_than_original(&self.alone(j)))
            .filter(|&j| {
                self.lines()
                    .faster_than_original(&self.outcomes[&pair(i, j)])
            })
            .collect()
    }

    /// The class of an edit and why, in one line, from whether it carries
    /// speed, what it enables, and its alone (`a`) and without (`w`) outcomes.
    fn classify(
        &self,
        carries: bool,
        enables: &[usize],
        a: &Outcome,
        w: &Outcome,
    ) -> (Class, String) {
        if carries {
            let why = match w.cost() {
                Some(_) if self.lines().slower_than_full(w) => format!(
                    "without it the patch loses its gain: {} rises to {}",
                    self.full_phrase(),
                    w.phrase()
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
                "removing it changes nothing measurable: without it {}, alone {}, the full patch {} (a change must exceed {:.0}% of its gain)",
                w.phrase(),
                a.phrase(),
                self.full_phrase(),
                self.t * 100.0
            );
            (Class::Neutral, why)
        }
    }
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
mod tests;
