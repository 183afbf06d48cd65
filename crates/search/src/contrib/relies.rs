//! What each edit of a patch relies on, one line each at source lines:
//!
//! - a deleted or moved barrier: the conflicting shared or global accesses
//!   it ordered (one before it, one after, at least one a store), and which
//!   barrier orders them in the variant, or none;
//! - a removed store: whether its value is read on the tests (the original
//!   with the store writing 0, then 1, instead: when no output changes, the
//!   value is never read there);
//! - a load or store moved or copied across a barrier, or into or out of
//!   a loop;
//! - any edit that holds only at the tests' sizes: the patch run on the
//!   sizes the spec's expressions allow that no test uses (the generated
//!   tests of `spec::generate`, all candidates, not only the kept few),
//!   the first that fails named, and the edit whose removal makes it pass.
//!
//! The barrier and motion lines read the lowered programs (`flow`), the
//! rest run the simulator through an `Evaluator`; no I/O beyond that.

use super::flow::{Access, Flow, Order};
use super::ContribError;
use crate::eval::Evaluator;
use gevo_ir::{ConstKind, Edit, EditKind, InstId, KernelIr, Patch, ValueRef};
use gevo_model::spec::{Spec, TestSet};
use serde::{Deserialize, Serialize};

/// Pairs of accesses named per barrier; more are counted.
const MAX_PAIRS: usize = 4;

/// What one line is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RelianceKind {
    /// A deleted or moved barrier and the accesses it ordered.
    Barrier,
    /// A removed store, and whether its value is read on the tests.
    RemovedStore,
    /// A load or store moved or copied across a barrier or a loop boundary.
    Motion,
    /// The patch holds only at the tests' sizes.
    TestSizes,
}

/// One thing an edit relies on, in one line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reliance {
    pub kind: RelianceKind,
    pub line: String,
}

/// The lines of every edit, and what finding them cost.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReliesOn {
    /// Per edit, in patch order.
    pub edits: Vec<Vec<Reliance>>,
    /// Simulator test runs made (each a whole test, all its launches).
    pub runs: usize,
    pub seconds: f64,
}

/// An evaluator for `spec` whose generated tests are every candidate the
/// spec's expressions allow (within the cost and size caps), not only the
/// few validation keeps: explaining affords more sizes than each promotion.
pub fn evaluator(mut spec: Spec, workers: usize) -> Result<Evaluator, ContribError> {
    spec.generate_every_candidate();
    Ok(Evaluator::new(spec, workers)?)
}

/// Finds what each edit of `patch` relies on. `evaluator` holds the same
/// IR as `ir` (see [`evaluator`]).
pub fn analyze(
    ir: &KernelIr,
    evaluator: &Evaluator,
    patch: &Patch,
) -> Result<ReliesOn, ContribError> {
    let started = std::time::Instant::now();
    let original = ir.lower_all(&ir.empty_patch())?;
    let variant = ir.lower_all(patch)?;
    let mut sim = Sim { evaluator, runs: 0 };
    // Whether the tests saw no race: qualifies "no barrier orders them".
    let full_passes = sim.first_failure(patch, TestSet::All)?.is_none();
    let words = Words::new(ir)?;
    let mut edits = Vec::with_capacity(patch.edits.len());
    for edit in &patch.edits {
        let kernel = edit
            .ids()
            .into_iter()
            .find_map(|id| ir.kernel_of(id))
            .unwrap_or(0);
        let (o, v) = (Flow::new(&original[kernel]), Flow::new(&variant[kernel]));
        let mut lines = Vec::new();
        barrier_lines(edit, &o, &v, &words, full_passes, &mut lines);
        motion_lines(edit, &o, &words, &mut lines);
        removed_store_lines(ir, edit, &o, &words, &mut sim, &mut lines)?;
        edits.push(lines);
    }
    size_lines(patch, &mut sim, &mut edits)?;
    Ok(ReliesOn {
        edits,
        runs: sim.runs,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// Runs on the simulator, counted.
struct Sim<'e> {
    evaluator: &'e Evaluator,
    runs: usize,
}

impl Sim<'_> {
    /// The first failing test of `set` as `test: reason`, or `None`.
    fn first_failure(
        &mut self,
        patch: &Patch,
        set: TestSet,
    ) -> Result<Option<String>, ContribError> {
        let results = self.evaluator.evaluate(patch, set)?;
        self.runs += results.len();
        Ok(results
            .iter()
            .find_map(|r| r.failure.as_ref().map(|f| format!("{}: {f}", r.test))))
    }
}

/// Names instructions in source terms.
struct Words<'i> {
    ir: &'i KernelIr,
    /// The original's IR text per id, for `ir::source::what`.
    listing: std::collections::BTreeMap<u32, String>,
}

impl<'i> Words<'i> {
    fn new(ir: &'i KernelIr) -> Result<Self, ContribError> {
        let listing = ir
            .listing()?
            .into_iter()
            .map(|(id, text)| (id.0, text))
            .collect();
        Ok(Words { ir, listing })
    }

    /// `relies.cu:31`, or `i31` without line tables.
    fn place(&self, id: u32) -> String {
        self.ir
            .source_line(id)
            .map_or_else(|| InstId(id).to_string(), str::to_string)
    }

    /// `the __syncthreads() at relies.cu:32`.
    fn inst(&self, id: u32) -> String {
        let what = self.listing.get(&id).map_or_else(
            || "instruction".to_string(),
            |t| gevo_ir::source::what(t.trim()),
        );
        format!("the {what} at {}", self.place(id))
    }

    fn access(&self, a: &Access) -> String {
        format!("the {} at {}", a.words(), self.place(a.id))
    }
}

/// The barriers an edit deletes (Delete, Replace) or moves (Move, Swap).
fn touched_barriers(edit: &Edit, o: &Flow) -> Vec<(u32, bool)> {
    let is_barrier = |id: InstId| o.position(id.0).is_some_and(|at| o.is_barrier(at));
    let mut out = Vec::new();
    match edit.kind {
        EditKind::Delete { target } | EditKind::Replace { target, .. } if is_barrier(target) => {
            out.push((target.0, true))
        }
        EditKind::Move { src, .. } if is_barrier(src) => out.push((src.0, false)),
        EditKind::Swap { a, b } => out.extend(
            [a, b]
                .into_iter()
                .filter(|&x| is_barrier(x))
                .map(|x| (x.0, false)),
        ),
        _ => {}
    }
    out
}

fn barrier_lines(
    edit: &Edit,
    o: &Flow,
    v: &Flow,
    words: &Words,
    full_passes: bool,
    lines: &mut Vec<Reliance>,
) {
    for (barrier, deleted) in touched_barriers(edit, o) {
        let Some(at) = o.position(barrier) else {
            continue;
        };
        let name = words.inst(barrier);
        let (before, after) = (
            o.accesses_to_barrier(at, false),
            o.accesses_to_barrier(at, true),
        );
        let mut pairs: Vec<(&Access, &Access)> = Vec::new();
        for x in &before {
            for y in after.iter().filter(|y| x.conflicts(y)) {
                if matches!(o.order(x.at, y.at), Order::ByBarrier(_)) {
                    pairs.push((x, y));
                }
            }
        }
        let push = |lines: &mut Vec<Reliance>, line: String| {
            lines.push(Reliance {
                kind: RelianceKind::Barrier,
                line,
            })
        };
        if pairs.is_empty() {
            push(
                lines,
                format!(
                    "{name} ordered no conflicting shared or global accesses: nothing relies on it"
                ),
            );
            continue;
        }
        let verb = if deleted { "deleted" } else { "moved" };
        for (x, y) in pairs.iter().take(MAX_PAIRS) {
            let now = match (v.position(x.id), v.position(y.id)) {
                (Some(vx), Some(vy)) => match v.order(vx, vy) {
                    Order::ByBarrier(b) if b == barrier => "it still orders them".to_string(),
                    Order::ByBarrier(b) => format!("{} now orders them", words.inst(b)),
                    Order::Unordered if full_passes => {
                        "no barrier orders them now; the simulator saw no race on the tests"
                            .to_string()
                    }
                    Order::Unordered => "no barrier orders them now".to_string(),
                    Order::NotAfter => "the patch no longer runs them in that order".to_string(),
                },
                _ => "the patch removes one of them".to_string(),
            };
            push(
                lines,
                format!(
                    "{verb} {name} ordered {} before {}: {now}",
                    words.access(x),
                    words.access(y)
                ),
            );
        }
        if pairs.len() > MAX_PAIRS {
            push(
                lines,
                format!("{name}: {} more ordered pairs", pairs.len() - MAX_PAIRS),
            );
        }
    }
}

/// An access moved (Move, Swap) or copied (Copy) to another place: the
/// barrier it now runs on the other side of, and loops entered or left.
fn motion_lines(edit: &Edit, o: &Flow, words: &Words, lines: &mut Vec<Reliance>) {
    let moves: Vec<(u32, u32, &str)> = match edit.kind {
        EditKind::Move { src, before } => vec![(src.0, before.0, "moved")],
        EditKind::Copy { src, before, .. } => vec![(src.0, before.0, "copied")],
        EditKind::Swap { a, b } => vec![(a.0, b.0, "swapped"), (b.0, a.0, "swapped")],
        _ => Vec::new(),
    };
    for (src, to, verb) in moves {
        let (Some(from), Some(dest)) = (o.position(src), o.position(to)) else {
            continue;
        };
        let Some(access) = o.access(from) else {
            continue;
        };
        let what = words.access(&access);
        let push = |lines: &mut Vec<Reliance>, line: String| {
            lines.push(Reliance {
                kind: RelianceKind::Motion,
                line,
            })
        };
        // Hoisted: the new place runs before the old one; sunk: after.
        let crossed = match (o.order_before(dest, from), o.order(from, dest)) {
            (Order::ByBarrier(b), _) => Some((b, "before")),
            (_, Order::ByBarrier(b)) => Some((b, "after")),
            _ => None,
        };
        if let Some((b, side)) = crossed {
            let reason = if access.write {
                "no other thread reading what it writes in between"
            } else {
                "no other thread writing what it reads in between"
            };
            push(
                lines,
                format!(
                    "{verb} {what} now runs {side} {}: it relies on {reason}",
                    words.inst(b)
                ),
            );
        }
        let (old, new) = (o.loops_of(from.block), o.loops_of(dest.block));
        let loop_name = |h: usize| {
            o.first_id(h).map_or_else(
                || "a loop".to_string(),
                |id| format!("the loop at {}", words.place(id)),
            )
        };
        if let Some(&h) = old.iter().find(|h| !new.contains(h)) {
            push(
                lines,
                format!(
                    "{verb} {what} now runs outside {}: it relies on the value not changing between iterations",
                    loop_name(h)
                ),
            );
        } else if let Some(&h) = new.iter().find(|h| !old.contains(h)) {
            push(
                lines,
                format!(
                    "{verb} {what} now runs inside {}: it relies on running it again each iteration changing nothing",
                    loop_name(h)
                ),
            );
        }
    }
}

/// A store the edit removes (Delete, or Replace by another instruction):
/// the original with it storing 0, then 1, instead, on every test.
fn removed_store_lines(
    ir: &KernelIr,
    edit: &Edit,
    o: &Flow,
    words: &Words,
    sim: &mut Sim,
    lines: &mut Vec<Reliance>,
) -> Result<(), ContribError> {
    let target = match edit.kind {
        EditKind::Delete { target } | EditKind::Replace { target, .. } => target,
        _ => return Ok(()),
    };
    let Some(access) = o.position(target.0).and_then(|at| o.access(at)) else {
        return Ok(());
    };
    if !access.write {
        return Ok(());
    }
    let mut tried = Vec::new();
    let mut read = None;
    for (value, shown) in [(ConstKind::Zero, "0"), (ConstKind::One, "1")] {
        let mut p = ir.empty_patch();
        p.edits.push(Edit {
            kind: EditKind::OperandReplace {
                user: target,
                operand: 0,
                value: ValueRef::Const(value),
            },
            repairs: Vec::new(),
        });
        if ir.check(&p).is_err() {
            continue;
        }
        tried.push(shown);
        if let Some(failure) = sim.first_failure(&p, TestSet::All)? {
            read = Some((shown, failure));
            break;
        }
    }
    let what = words.access(&access);
    let line = match (read, tried.is_empty()) {
        (Some((shown, failure)), _) => format!(
            "removed {what}: its value is read on the tests (storing {shown} instead fails {failure}); the patch relies on the memory already holding it"
        ),
        (None, true) => format!("removed {what}: its value could not be varied to tell whether it is read"),
        (None, false) => format!(
            "removed {what}: its value is never read on the tests (storing {} instead changes no output)",
            tried.join(" or ")
        ),
    };
    lines.push(Reliance {
        kind: RelianceKind::RemovedStore,
        line,
    });
    Ok(())
}

/// The patch on the generated sizes: when it fails one, the edits whose
/// removal makes it pass there (else those failing it alone) hold only at
/// the tests' sizes.
fn size_lines(
    patch: &Patch,
    sim: &mut Sim,
    edits: &mut [Vec<Reliance>],
) -> Result<(), ContribError> {
    let Some(failure) = sim.first_failure(patch, TestSet::Generated)? else {
        return Ok(());
    };
    let n = patch.edits.len();
    let subset = |keep: &dyn Fn(usize) -> bool| Patch {
        edits: (0..n)
            .filter(|&i| keep(i))
            .map(|i| patch.edits[i].clone())
            .collect(),
        ..patch.clone()
    };
    let mut blamed = Vec::new();
    if n > 1 {
        for i in 0..n {
            let without = subset(&|k| k != i);
            if sim.first_failure(&without, TestSet::Generated)?.is_none() {
                blamed.push((i, "without this edit the patch passes there".to_string()));
            }
        }
    } else {
        blamed.push((0, "the edit alone fails there".to_string()));
    }
    if blamed.is_empty() {
        for i in 0..n {
            let alone = subset(&|k| k == i);
            if let Some(f) = sim.first_failure(&alone, TestSet::Generated)? {
                blamed.push((i, format!("alone it fails {f}")));
            }
        }
    }
    for (i, why) in blamed {
        edits[i].push(Reliance {
            kind: RelianceKind::TestSizes,
            line: format!("holds only at the tests' sizes: the patch fails {failure}; {why}"),
        });
    }
    Ok(())
}
