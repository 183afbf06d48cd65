//! The six GEVO edits on a live function. Each edit is a structural change
//! followed by SSA repair. Replay applies the repairs recorded in the edit;
//! generation chooses them with the RNG and records them. Both share the
//! structural step, so a generated edit replays to the same IR.

use super::error::EditError;
use super::live::LiveFunction;
use super::llvm::{self, Value};
use super::patch::{Edit, EditKind, InstId, Repair, ValueRef};
use rand::seq::SliceRandom;
use rand::Rng;

/// Replays one recorded edit.
pub fn apply_edit(f: &mut LiveFunction, edit: &Edit) -> Result<(), EditError> {
    if let EditKind::Delete { target } = edit.kind {
        let inst = movable(f, target)?;
        apply_repairs(f, &edit.repairs)?;
        return erase_with_anchor(f, target, inst);
    }
    structural(f, &edit.kind)?;
    apply_repairs(f, &edit.repairs)
}

fn apply_repairs(f: &mut LiveFunction, repairs: &[Repair]) -> Result<(), EditError> {
    for r in repairs {
        f.set_operand(r.user, r.operand, r.value)?;
    }
    Ok(())
}

/// Performs `kind` with fresh repair choices drawn from `rng`, and returns the
/// edit with those choices recorded. On error the function may be left
/// half-edited; callers replay from the original.
pub fn perform_edit<R: Rng>(
    f: &mut LiveFunction,
    kind: EditKind,
    rng: &mut R,
) -> Result<Edit, EditError> {
    let mut repairs = Vec::new();
    if let EditKind::Delete { target } = kind {
        let inst = movable(f, target)?;
        let broken = f.broken_uses_of_removal(inst);
        repair(f, &broken, Some(inst), rng, &mut repairs)?;
        erase_with_anchor(f, target, inst)?;
        return Ok(Edit { kind, repairs });
    }
    let touched = structural(f, &kind)?;
    let broken = f.broken_uses(&touched);
    repair(f, &broken, None, rng, &mut repairs)?;
    if let EditKind::Copy { clone, .. } = kind {
        wire_result(f, clone, rng, &mut repairs)?;
    }
    Ok(Edit { kind, repairs })
}

/// Gives every broken use a random value available there.
fn repair<R: Rng>(
    f: &mut LiveFunction,
    broken: &[(InstId, u32)],
    exclude: Option<Value>,
    rng: &mut R,
    repairs: &mut Vec<Repair>,
) -> Result<(), EditError> {
    for &(user, operand) in broken {
        let inst = f.inst(user)?;
        let candidates = f.candidates(inst, operand, exclude);
        let value = *candidates
            .choose(rng)
            .expect("the zero constant is always a candidate");
        f.set_operand(user, operand, value)?;
        repairs.push(Repair {
            user,
            operand,
            value,
        });
    }
    Ok(())
}

/// Feeds a copied instruction's result into one later operand of its type, so
/// the copy has an effect beyond its side effects.
fn wire_result<R: Rng>(
    f: &mut LiveFunction,
    clone: InstId,
    rng: &mut R,
    repairs: &mut Vec<Repair>,
) -> Result<(), EditError> {
    let inst = f.inst(clone)?;
    let ty = llvm::type_of(inst);
    if llvm::is_void(ty) {
        return Ok(());
    }
    let mut slots = Vec::new();
    for user in f.live_instructions() {
        if user == inst {
            continue;
        }
        for operand in f.editable_operands(user) {
            if llvm::type_of(llvm::operand(user, operand)) == ty
                && llvm::operand(user, operand) != inst
                && f.dominates_use(inst, user, operand)
            {
                slots.push((f.id_of(user), operand));
            }
        }
    }
    if let Some(&(user, operand)) = slots.choose(rng) {
        let value = ValueRef::Inst(clone);
        f.set_operand(user, operand, value)?;
        repairs.push(Repair {
            user,
            operand,
            value,
        });
    }
    Ok(())
}

/// An instruction that Copy, Delete, Move, Replace and Swap may touch.
fn movable(f: &LiveFunction, id: InstId) -> Result<Value, EditError> {
    let inst = f.inst(id)?;
    if llvm::is_terminator(inst) || llvm::is_phi(inst) {
        return Err(EditError::Pinned(id));
    }
    Ok(inst)
}

fn erase_with_anchor(f: &mut LiveFunction, id: InstId, inst: Value) -> Result<(), EditError> {
    let next = llvm::next_instruction(inst).expect("non-terminators have a successor");
    let anchor = f.id_of(next);
    f.erase(id, anchor)
}

/// The structural part of every edit but Delete. Returns the instructions
/// whose operands or uses may now be broken.
fn structural(f: &mut LiveFunction, kind: &EditKind) -> Result<Vec<Value>, EditError> {
    match *kind {
        EditKind::Copy { src, before, clone } => {
            let src_inst = movable(f, src)?;
            let position = f.position(before)?;
            let copy = llvm::clone_instruction(src_inst);
            f.insert_before(copy, position);
            f.register(clone, copy)?;
            Ok(vec![copy])
        }
        EditKind::Move { src, before } => {
            let src_inst = movable(f, src)?;
            let position = f.position(before)?;
            if position != src_inst {
                f.detach(src_inst);
                f.insert_before(src_inst, position);
            }
            Ok(vec![src_inst])
        }
        EditKind::Replace {
            target,
            with,
            clone,
        } => {
            let target_inst = movable(f, target)?;
            let with_inst = movable(f, with)?;
            if llvm::type_of(target_inst) != llvm::type_of(with_inst) {
                return Err(EditError::TypeMismatch(target, with));
            }
            let copy = llvm::clone_instruction(with_inst);
            f.insert_before(copy, target_inst);
            f.register(clone, copy)?;
            if !llvm::is_void(llvm::type_of(target_inst)) {
                llvm::replace_all_uses(target_inst, copy);
            }
            f.erase(target, clone)?;
            Ok(vec![copy])
        }
        EditKind::Swap { a, b } => {
            let a_inst = movable(f, a)?;
            let b_inst = movable(f, b)?;
            if a_inst != b_inst {
                let after_a = llvm::next_instruction(a_inst).expect("non-terminator");
                let after_b = llvm::next_instruction(b_inst).expect("non-terminator");
                if after_a == b_inst {
                    f.detach(b_inst);
                    f.insert_before(b_inst, a_inst);
                } else if after_b == a_inst {
                    f.detach(a_inst);
                    f.insert_before(a_inst, b_inst);
                } else {
                    f.detach(a_inst);
                    f.insert_before(a_inst, after_b);
                    f.detach(b_inst);
                    f.insert_before(b_inst, after_a);
                }
            }
            Ok(vec![a_inst, b_inst])
        }
        EditKind::OperandReplace {
            user,
            operand,
            value,
        } => {
            f.set_operand(user, operand, value)?;
            Ok(Vec::new())
        }
        EditKind::Delete { .. } => unreachable!("deletion repairs before it erases"),
    }
}

impl LiveFunction<'_> {
    /// Every use of `inst`, which is about to be deleted.
    fn broken_uses_of_removal(&mut self, inst: Value) -> Vec<(InstId, u32)> {
        let mut broken = Vec::new();
        for user in llvm::users(inst) {
            for i in 0..llvm::num_operands(user) {
                if llvm::operand(user, i) == inst {
                    broken.push((self.id_of(user), i));
                }
            }
        }
        broken.sort();
        broken
    }
}
