//! Transplanting patches from one version of a kernel's IR to the next: the
//! instructions each edit names are matched from old to new ([`matching`]),
//! the edit is renamed to the new ids, performed on the new IR with its SSA
//! repairs chosen afresh (the recorded choice when it still fits), and the
//! module verified after it. An edit that names an instruction without an
//! unambiguous match, that depends on a dropped edit, or that no longer
//! verifies is dropped and reported; the rest form a patch of the new IR.
//!
//! Functions are matched by name, so a patch spanning several kernels of a
//! module matches each kernel to its namesake; today a patch names one.

mod matching;
mod shape;

pub use matching::{match_instructions, InstShape};
pub use shape::normalize;

use super::edit;
use super::live::LiveFunction;
use super::llvm::{self, Value};
use super::patch::{Edit, EditKind, InstId, Patch, Repair, ValueRef};
use super::{parse_bitcode, EditError, IrError, KernelIr};
use inkwell::context::Context;
use inkwell::values::AsValueRef;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;
use std::fmt;

/// Why an edit did not survive the transplant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DropReason {
    /// It names an instruction of the old IR with no unambiguous match.
    Unmatched { id: InstId, inst: String },
    /// It names an instruction created by an edit that was dropped.
    Depends { edit: usize },
    /// Renamed, it does not apply or the module no longer verifies.
    Invalid(String),
}

/// One edit of the old patch that was not carried over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dropped {
    /// Its index in the old patch.
    pub edit: usize,
    /// The edit as it read on the old IR.
    pub text: String,
    pub reason: DropReason,
}

impl fmt::Display for Dropped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "edit {} ({}): ", self.edit, self.text)?;
        match &self.reason {
            DropReason::Unmatched { id, inst } => {
                write!(f, "{id} `{inst}` has no unambiguous match in the new IR")
            }
            DropReason::Depends { edit } => {
                write!(f, "it names an instruction made by dropped edit {edit}")
            }
            DropReason::Invalid(why) => write!(f, "it does not apply to the new IR: {why}"),
        }
    }
}

/// A patch carried to new IR.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transplanted {
    /// The kept edits, as a patch of the new IR (it verifies there).
    pub patch: Patch,
    /// For each kept edit, its index in the old patch.
    pub kept: Vec<usize>,
    pub dropped: Vec<Dropped>,
}

/// The instruction matching between two versions of a kernel, computed
/// once and used for every patch carried across.
pub struct Transplanter<'a> {
    old: &'a KernelIr,
    new: &'a KernelIr,
    /// Old original id -> new original id.
    map: Vec<Option<u32>>,
    /// Printed old instructions, for messages.
    old_text: Vec<String>,
}

impl<'a> Transplanter<'a> {
    pub fn new(old: &'a KernelIr, new: &'a KernelIr) -> Result<Self, IrError> {
        // Kernels match their namesakes; ids run on across a module's
        // kernels, so each kernel's local matching is offset by its first id.
        let new_parts = shapes_of(new)?;
        let mut map = Vec::new();
        let mut old_text = Vec::new();
        for old_part in shapes_of(old)? {
            let local = match new_parts.iter().find(|p| p.symbol == old_part.symbol) {
                Some(new_part) => match_instructions(&old_part.shapes, &new_part.shapes)
                    .into_iter()
                    .map(|m| m.map(|id| id + new_part.first))
                    .collect(),
                None => vec![None; old_part.shapes.len()],
            };
            map.extend(local);
            old_text.extend(old_part.text);
        }
        Ok(Transplanter {
            old,
            new,
            map,
            old_text,
        })
    }

    /// How many of the old kernel's instructions have a match.
    pub fn matched(&self) -> (usize, usize) {
        (self.map.iter().flatten().count(), self.map.len())
    }

    /// The new id of an original old instruction, when matched.
    pub fn map_id(&self, old: InstId) -> Option<InstId> {
        self.map.get(old.0 as usize).copied().flatten().map(InstId)
    }

    /// Carries `patch` (made for the old IR) to the new IR.
    pub fn transplant(&self, patch: &Patch) -> Result<Transplanted, IrError> {
        self.old.check_patch(patch)?;
        let old_count = self.old.instruction_count();
        let new_count = self.new.instruction_count();
        // Created ids: old clone id -> new clone id, or the dropped edit.
        let mut created: BTreeMap<InstId, Result<InstId, usize>> = BTreeMap::new();
        let mut out = Transplanted {
            patch: self.new.empty_patch(),
            kept: Vec::new(),
            dropped: Vec::new(),
        };
        let context = Context::create();
        let mut next_clone = new_count;
        for (i, e) in patch.edits.iter().enumerate() {
            let drop = |reason| Dropped {
                edit: i,
                text: e.to_string(),
                reason,
            };
            let rename = |id: InstId| -> Result<InstId, DropReason> {
                if id.0 >= old_count {
                    return match created.get(&id) {
                        Some(Ok(new)) => Ok(*new),
                        Some(Err(edit)) => Err(DropReason::Depends { edit: *edit }),
                        None => Err(DropReason::Invalid(
                            EditError::UnknownInstruction(id).to_string(),
                        )),
                    };
                }
                self.map_id(id).ok_or_else(|| DropReason::Unmatched {
                    id,
                    inst: self.old_text[id.0 as usize].clone(),
                })
            };
            let clone = e.created_id().map(|_| InstId(next_clone));
            let kind = match rename_kind(&e.kind, &rename, clone) {
                Ok(k) => k,
                Err(reason) => {
                    if let Some(old) = e.created_id() {
                        created.insert(old, Err(i));
                    }
                    out.dropped.push(drop(reason));
                    continue;
                }
            };
            // The recorded repairs, renamed where their instructions match
            // (the edit's own clone included).
            let rename_hint = |id: InstId| match (e.created_id(), clone) {
                (Some(old), Some(new)) if old == id => Some(new),
                _ => rename(id).ok(),
            };
            let hints: BTreeMap<(InstId, u32), ValueRef> = e
                .repairs
                .iter()
                .filter_map(|r| {
                    let user = rename_hint(r.user)?;
                    let value = match r.value {
                        ValueRef::Inst(id) => ValueRef::Inst(rename_hint(id)?),
                        v => v,
                    };
                    Some(((user, r.operand), value))
                })
                .collect();
            match self.perform(&context, &out.patch.edits, kind, &hints, i as u64) {
                Ok(edit) => {
                    if let (Some(old), Some(new)) = (e.created_id(), clone) {
                        created.insert(old, Ok(new));
                        next_clone += 1;
                    }
                    out.patch.edits.push(edit);
                    out.kept.push(i);
                }
                Err(why) => {
                    if let Some(old) = e.created_id() {
                        created.insert(old, Err(i));
                    }
                    out.dropped.push(drop(DropReason::Invalid(why)));
                }
            }
        }
        // Kept edits verified one by one; the whole is checked once more
        // the way every variant is built.
        self.new.check(&out.patch)?;
        Ok(out)
    }

    /// Replays `kept` on a fresh copy of the new IR, then performs `kind`
    /// with repairs taken from `hints` where they still fit, else drawn
    /// from a generator seeded by the edit's index; verifies the module.
    fn perform(
        &self,
        context: &Context,
        kept: &[Edit],
        kind: EditKind,
        hints: &BTreeMap<(InstId, u32), ValueRef>,
        seed: u64,
    ) -> Result<Edit, String> {
        let module = parse_bitcode(context, &self.new.bitcode).map_err(|e| e.to_string())?;
        let mut live = self.new.live(&module);
        live.replay(kept).map_err(|e| e.to_string())?;
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let owner = Edit {
            kind: kind.clone(),
            repairs: Vec::new(),
        };
        let k = live.edit_owner(&owner).map_err(|e| e.to_string())?;
        let edit = perform_with_hints(live.part_mut(k), kind, hints, &mut rng)
            .map_err(|e| e.to_string())?;
        module.verify().map_err(|e| first_line(&e.to_string()))?;
        Ok(edit)
    }
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or_default().trim().to_string()
}

/// One kernel's shapes and printed instructions, by local index, and the
/// module-wide id of its first instruction.
struct PartShapes {
    symbol: String,
    first: u32,
    shapes: Vec<InstShape>,
    text: Vec<String>,
}

/// Every chosen kernel's shapes, in id order.
fn shapes_of(ir: &KernelIr) -> Result<Vec<PartShapes>, IrError> {
    let context = Context::create();
    let module = parse_bitcode(&context, &ir.bitcode)?;
    let mut parts = Vec::new();
    for part in &ir.parts {
        let function = module
            .get_function(&part.symbol)
            .expect("the canonical module holds the kernel")
            .as_value_ref();
        let text = llvm::blocks(function)
            .into_iter()
            .flat_map(llvm::instructions)
            .map(|i| normalize_message(&llvm::value_to_string(i)))
            .collect();
        parts.push(PartShapes {
            symbol: part.symbol.clone(),
            first: part.first,
            shapes: shape::function_shapes(function, &part.dom),
            text,
        });
    }
    Ok(parts)
}

/// `kind` with every named instruction renamed; a created id becomes `clone`.
fn rename_kind(
    kind: &EditKind,
    rename: &impl Fn(InstId) -> Result<InstId, DropReason>,
    clone: Option<InstId>,
) -> Result<EditKind, DropReason> {
    let fresh = || clone.expect("a creating edit has a fresh id");
    Ok(match *kind {
        EditKind::Copy { src, before, .. } => EditKind::Copy {
            src: rename(src)?,
            before: rename(before)?,
            clone: fresh(),
        },
        EditKind::Delete { target } => EditKind::Delete {
            target: rename(target)?,
        },
        EditKind::Move { src, before } => EditKind::Move {
            src: rename(src)?,
            before: rename(before)?,
        },
        EditKind::Replace { target, with, .. } => EditKind::Replace {
            target: rename(target)?,
            with: rename(with)?,
            clone: fresh(),
        },
        EditKind::Swap { a, b } => EditKind::Swap {
            a: rename(a)?,
            b: rename(b)?,
        },
        EditKind::OperandReplace {
            user,
            operand,
            value,
        } => EditKind::OperandReplace {
            user: rename(user)?,
            operand,
            value: match value {
                ValueRef::Inst(id) => ValueRef::Inst(rename(id)?),
                v => v,
            },
        },
    })
}

/// Performs `kind` on `f` with SSA repair: each broken use gets the hinted
/// value when it is available there, else one drawn from `rng`; a copy's
/// result is wired where the hint says, when that still dominates.
fn perform_with_hints(
    f: &mut LiveFunction,
    kind: EditKind,
    hints: &BTreeMap<(InstId, u32), ValueRef>,
    rng: &mut ChaCha8Rng,
) -> Result<Edit, EditError> {
    let mut repairs = Vec::new();
    if let EditKind::Delete { target } = kind {
        let inst = f.inst(target)?;
        let mut uses = Vec::new();
        for user in llvm::users(inst) {
            for op in 0..llvm::num_operands(user) {
                if llvm::operand(user, op) == inst {
                    uses.push((f.id_of(user), op));
                }
            }
        }
        uses.sort();
        for (user, operand) in uses {
            let candidates = f.candidates(f.inst(user)?, operand, Some(inst));
            let value = choose(&candidates, hints.get(&(user, operand)), rng);
            repairs.push(Repair {
                user,
                operand,
                value,
            });
        }
        let e = Edit { kind, repairs };
        edit::apply_edit(f, &e)?;
        return Ok(e);
    }
    edit::apply_edit(
        f,
        &Edit {
            kind: kind.clone(),
            repairs: Vec::new(),
        },
    )?;
    let touched: Vec<Value> = match kind {
        EditKind::Copy { clone, .. } | EditKind::Replace { clone, .. } => vec![f.inst(clone)?],
        EditKind::Move { src, .. } => vec![f.inst(src)?],
        EditKind::Swap { a, b } => vec![f.inst(a)?, f.inst(b)?],
        EditKind::OperandReplace { .. } | EditKind::Delete { .. } => Vec::new(),
    };
    for (user, operand) in f.broken_uses(&touched) {
        let candidates = f.candidates(f.inst(user)?, operand, None);
        let value = choose(&candidates, hints.get(&(user, operand)), rng);
        f.set_operand(user, operand, value)?;
        repairs.push(Repair {
            user,
            operand,
            value,
        });
    }
    if let EditKind::Copy { clone, .. } = kind {
        // The wiring of the copy's result: a hint whose value is the clone.
        let inst = f.inst(clone)?;
        let wiring = hints
            .iter()
            .find(|(_, v)| **v == ValueRef::Inst(clone))
            .map(|(&(user, operand), _)| (user, operand));
        if let Some((user, operand)) = wiring {
            if !repairs
                .iter()
                .any(|r| (r.user, r.operand) == (user, operand))
            {
                if let Ok(user_inst) = f.inst(user) {
                    if operand < llvm::num_operands(user_inst)
                        && f.dominates_use(inst, user_inst, operand)
                        && f.set_operand(user, operand, ValueRef::Inst(clone)).is_ok()
                    {
                        repairs.push(Repair {
                            user,
                            operand,
                            value: ValueRef::Inst(clone),
                        });
                    }
                }
            }
        }
    }
    Ok(Edit { kind, repairs })
}

fn choose(candidates: &[ValueRef], hint: Option<&ValueRef>, rng: &mut ChaCha8Rng) -> ValueRef {
    match hint {
        Some(h) if candidates.contains(h) => *h,
        _ => *candidates
            .choose(rng)
            .expect("the zero constant is always a candidate"),
    }
}

/// A printed instruction for a message: trimmed, without metadata.
fn normalize_message(text: &str) -> String {
    let text = text.trim();
    text.split_once(", !")
        .map_or(text, |(head, _)| head)
        .to_string()
}
