//! When the original kernel faults, the spec may be the cause rather than
//! the kernel: a buffer too short for the launch (`len`), a block shape the
//! kernel's static `__shared__` arrays were not written for, or buffers
//! passed in another order. Each suspicion is tried: the failing test is
//! run again with that one thing changed (the buffer longer, the block
//! shaped like the array with the grid covering as many threads, the two
//! buffers exchanged), and only a change that makes the fault go away is
//! reported, naming the spec line, and the finding then ends by sending
//! the user to that spec field rather than to the kernel. Runs only on
//! this error path.

use super::simulate;
use gevo_model::sim::code::Program;
use gevo_model::sim::pointer::signed_offset;
use gevo_model::sim::{Fault, Limits, Verdict};
use gevo_model::spec::{
    ArgKind, ArgValue, Instance, LaunchInstance, LaunchParam, LaunchSpec, Location, Spec,
    MAX_BLOCK_THREADS,
};

/// Steps per block a trial run may take (the original's own run had none:
/// it failed).
const TRIAL_BLOCK_BUDGET: u64 = 50_000_000;

/// What in the spec made the original fault, found by a change that
/// clears it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecCause {
    /// One line: what the spec gives, what was tried, and the spec line.
    pub advice: String,
    /// The spec field to fix, with its line: `args[1].len, the length of
    /// \`grid\` (k.gevo.toml:16)`.
    pub field: String,
}

/// The finding's last lines: the spec cause and the field to fix, or,
/// without one, the kernel's line to fix.
pub(super) fn what_to_do(cause: Option<&SpecCause>, verdict: &Verdict) -> String {
    match cause {
        Some(c) => format!(
            "{}\nFix the spec: {}, or give tests that do not reach the fault.",
            c.advice, c.field
        ),
        None => format!(
            "Fix the kernel{}, or give tests that do not reach the fault.",
            verdict
                .context
                .source
                .as_deref()
                .map_or(String::new(), |s| format!(" at {s}"))
        ),
    }
}

/// What in the spec made the original fault on `instance`, naming its
/// spec line; `None` when no change to the spec clears the fault.
pub(super) fn spec_cause(
    spec: &Spec,
    programs: &[Program],
    instance: &Instance,
    verdict: &Verdict,
    workers: usize,
) -> Option<SpecCause> {
    let launch = faulting_launch(instance, verdict)?;
    let trial = Trial {
        spec,
        programs,
        instance,
        launch,
        workers,
    };
    match &verdict.fault {
        Fault::OutOfBounds {
            space: "global",
            buffer,
            offset,
            ..
        } => trial
            .another_order(*buffer, *offset)
            .or_else(|| trial.too_short(*buffer, *offset)),
        Fault::OutOfBounds {
            space: "shared", ..
        }
        | Fault::SharedRace { .. }
        | Fault::UninitializedShared { .. } => trial.block_shape(verdict),
        _ => None,
    }
}

/// The launch instance the verdict names (the first one of that label).
fn faulting_launch<'a>(instance: &'a Instance, verdict: &Verdict) -> Option<&'a LaunchInstance> {
    let label = verdict.context.launch.as_deref().unwrap_or("");
    instance.launches.iter().find(|l| l.label == label)
}

struct Trial<'a> {
    spec: &'a Spec,
    programs: &'a [Program],
    instance: &'a Instance,
    launch: &'a LaunchInstance,
    workers: usize,
}

impl Trial<'_> {
    /// Whether the original runs `changed` without a fault.
    fn clears(&self, changed: &Instance) -> bool {
        let limits = Limits {
            block_step_budget: TRIAL_BLOCK_BUDGET,
        };
        simulate(self.programs, changed, limits, self.workers).is_ok()
    }

    /// `k.gevo.toml:12`.
    fn at(&self, at: &Location) -> String {
        format!("{}:{}", self.spec.path.display(), at.line)
    }

    /// The instance with every launch like the faulting one (same kernel
    /// and label) changed by `edit`.
    fn with_launches(&self, edit: impl Fn(&mut LaunchInstance)) -> Instance {
        let mut changed = self.instance.clone();
        for l in &mut changed.launches {
            if l.kernel == self.launch.kernel && l.label == self.launch.label {
                edit(l);
            }
        }
        changed
    }

    /// The buffer argument `slot`'s memory is bound to in the faulting
    /// launch, its parameter position, and the memory's length in elements.
    fn buffer(&self, slot: usize) -> Option<(usize, usize, u64, u64)> {
        let (position, arg) = self
            .launch
            .params
            .iter()
            .enumerate()
            .find_map(|(p, param)| match *param {
                LaunchParam::Buffer { arg, slot: s } if s == slot => Some((p, arg)),
                _ => None,
            })?;
        let ArgValue::Buffer { elem, data, .. } = &self.instance.args[slot] else {
            return None;
        };
        let size = elem.size().max(1) as u64;
        Some((position, arg, data.len() as u64 / size, size))
    }

    /// The element a global access at `offset` of buffer `slot` touched,
    /// when past the buffer's end.
    fn past_end(&self, slot: usize, offset: u64) -> Option<u64> {
        let (_, _, len, size) = self.buffer(slot)?;
        let element = u64::try_from(signed_offset(offset)).ok()? / size;
        (element >= len).then_some(element)
    }

    /// Another buffer of the launch, of the same element type and long
    /// enough for the faulting access, exchanged with the short one.
    fn another_order(&self, slot: usize, offset: u64) -> Option<SpecCause> {
        let element = self.past_end(slot, offset)?;
        let (position, arg, len, _) = self.buffer(slot)?;
        let elem_of = |s: usize| match &self.instance.args[s] {
            ArgValue::Buffer { elem, .. } => Some(*elem),
            ArgValue::Scalar(_) => None,
        };
        for (other_position, param) in self.launch.params.iter().enumerate() {
            let LaunchParam::Buffer {
                arg: other_arg,
                slot: other_slot,
            } = *param
            else {
                continue;
            };
            let Some((_, _, other_len, _)) = self.buffer(other_slot) else {
                continue;
            };
            if other_slot == slot || elem_of(other_slot) != elem_of(slot) || other_len <= element {
                continue;
            }
            let changed = self.with_launches(|l| l.params.swap(position, other_position));
            if !self.clears(&changed) {
                continue;
            }
            let name = |a: usize| &self.spec.args[a].name;
            let list = match launch_spec(self.spec, self.launch) {
                Some(l) if !self.spec.is_single_launch() => format!("{}.args", l.field),
                _ => "[[args]]".to_string(),
            };
            return Some(SpecCause {
                advice: format!(
                    "The spec may pass arguments in another order: the kernel's parameter \
                     {position} gets `{}` ({len} elements, {}) and parameter {other_position} \
                     gets `{}` ({other_len} elements, {}); with the two exchanged the original \
                     runs this test without a fault. Check the order of {list} against the \
                     kernel's parameters.",
                    name(arg),
                    self.at(&self.spec.args[arg].at),
                    name(other_arg),
                    self.at(&self.spec.args[other_arg].at),
                ),
                field: format!(
                    "the order of {list}, which passes `{}` as parameter {position} and `{}` as \
                     parameter {other_position}",
                    name(arg),
                    name(other_arg)
                ),
            });
        }
        None
    }

    /// The buffer made long enough for the launch (twice its threads, or
    /// twice the element touched): the fault goes away. Not when a few more
    /// elements (1/64 more, at least one) already clear it: a kernel that
    /// reads just past what its own bounds check allows (`in[i + 1]` for
    /// `i < n`) is the kernel's to fix.
    fn too_short(&self, slot: usize, offset: u64) -> Option<SpecCause> {
        let element = self.past_end(slot, offset)?;
        let (_, arg, len, size) = self.buffer(slot)?;
        if self.clears(&self.longer(slot, len + len / 64 + 1, size)?) {
            return None;
        }
        let threads: u64 = self
            .launch
            .grid
            .iter()
            .chain(&self.launch.block)
            .map(|&d| u64::from(d))
            .product();
        let longer = threads.max(element + 1).saturating_mul(2);
        if !self.clears(&self.longer(slot, longer, size)?) {
            return None;
        }
        let ArgKind::Buffer { len: written, .. } = &self.spec.args[arg].kind else {
            return None;
        };
        let name = &self.spec.args[arg].name;
        Some(SpecCause {
            advice: format!(
                "The spec may be the cause: `{name}` holds {len} elements (len = \"{}\" at {}), \
                 and this launch of {threads} threads reaches element {element}; with the buffer \
                 longer the original runs this test without a fault. Give `len` the size the \
                 kernel indexes for this grid.",
                written.value,
                self.at(&written.at),
            ),
            field: format!(
                "{}, the length of `{name}` ({})",
                written.at.field,
                self.at(&written.at)
            ),
        })
    }

    /// The instance with buffer `slot` `len` elements of `size` bytes long
    /// (zeros added); `None` past the largest buffer a spec may have.
    fn longer(&self, slot: usize, len: u64, size: u64) -> Option<Instance> {
        let bytes = len.checked_mul(size)?;
        if bytes > gevo_model::spec::MAX_BUFFER_BYTES {
            return None;
        }
        let mut changed = self.instance.clone();
        if let ArgValue::Buffer { data, .. } = &mut changed.args[slot] {
            data.resize(usize::try_from(bytes).ok()?, 0);
        }
        Some(changed)
    }

    /// A block shaped like the static shared array the fault is in (or
    /// like any of them, when the access is outside all).
    fn block_shape(&self, verdict: &Verdict) -> Option<SpecCause> {
        let program = &self.programs[self.launch.kernel];
        let named = verdict.context.shared.as_ref().map(|(n, _)| n.as_str());
        let geometry = launch_spec(self.spec, self.launch)?;
        for var in program
            .shared_vars
            .iter()
            .filter(|v| named.is_none_or(|n| n == v.name) && !v.dims.is_empty())
        {
            let block = shape_of(&var.dims)?;
            if block == self.launch.block {
                continue;
            }
            let grid: [u32; 3] = std::array::from_fn(|i| {
                let threads = u64::from(self.launch.grid[i]) * u64::from(self.launch.block[i]);
                u32::try_from(threads.div_ceil(u64::from(block[i]))).unwrap_or(u32::MAX)
            });
            let changed = self.with_launches(|l| {
                l.block = block;
                l.grid = grid;
            });
            if !self.clears(&changed) {
                continue;
            }
            let dims: String = var.dims.iter().map(|d| format!("[{d}]")).collect();
            let block_at = &geometry.geometry.block_at;
            return Some(SpecCause {
                advice: format!(
                    "The spec may be the cause: block = {} at {} does not match the kernel's \
                     static __shared__ array `{}{dims}`; with block = {} (the grid covering as \
                     many threads) the original runs this test without a fault. Give the block \
                     shape the kernel was written for.",
                    shown(self.launch.block),
                    self.at(block_at),
                    var.name,
                    shown(block),
                ),
                field: format!(
                    "{} ({}), for the shape of `{}{dims}`",
                    block_at.field,
                    self.at(block_at),
                    var.name
                ),
            });
        }
        None
    }
}

/// The launch as written that `launch` was expanded from: the single
/// `[launch]`, or the `[[launches]]` entry its label names.
fn launch_spec<'a>(spec: &'a Spec, launch: &LaunchInstance) -> Option<&'a LaunchSpec> {
    spec.launch_specs().into_iter().find(|l| {
        l.kernel == launch.kernel
            && (launch.label.is_empty() || launch.label.starts_with(&format!("{} (", l.field)))
    })
}

/// The block an array's shape suggests: its innermost dimension along x,
/// the next along y, the next along z; `None` beyond three dimensions or
/// above the most threads a block may have.
fn shape_of(dims: &[u64]) -> Option<[u32; 3]> {
    if dims.len() > 3 {
        return None;
    }
    let mut block = [1u32; 3];
    for (i, d) in dims.iter().rev().enumerate() {
        block[i] = u32::try_from(*d).ok()?;
    }
    let threads: u64 = block.iter().map(|&b| u64::from(b)).product();
    (threads > 0 && threads <= MAX_BLOCK_THREADS).then_some(block)
}

/// `[16, 16]`, trailing 1s left out.
fn shown(block: [u32; 3]) -> String {
    let used = match block {
        [x, 1, 1] => vec![x],
        [x, y, 1] => vec![x, y],
        [x, y, z] => vec![x, y, z],
    };
    format!(
        "[{}]",
        used.iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    )
}
