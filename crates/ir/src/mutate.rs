//! Random choice of an edit's kind and the instructions it names. Repairs are
//! chosen later, by `edit::perform_edit`; validity is judged by the verifier.

use super::live::LiveFunction;
use super::llvm::{self, Value};
use super::patch::EditKind;
use rand::seq::SliceRandom;
use rand::Rng;

/// A random edit of one of the six kinds (uniformly), or `None` when the
/// chosen kind has nothing to act on in this function.
pub fn random_edit_kind<R: Rng>(f: &mut LiveFunction, rng: &mut R) -> Option<EditKind> {
    let all = f.live_instructions();
    let movable: Vec<Value> = all
        .iter()
        .copied()
        .filter(|&i| !llvm::is_terminator(i) && !llvm::is_phi(i))
        .collect();
    let pick = |rng: &mut R, from: &[Value]| from.choose(rng).copied();
    let kind = match rng.gen_range(0..6) {
        0 => EditKind::Copy {
            src: f.id_of(pick(rng, &movable)?),
            before: f.id_of(pick(rng, &all)?),
            clone: f.fresh_id(),
        },
        1 => EditKind::Delete {
            target: f.id_of(pick(rng, &movable)?),
        },
        2 => {
            let src = pick(rng, &movable)?;
            let before = pick(rng, &all)?;
            if before == src || llvm::next_instruction(src) == Some(before) {
                return None;
            }
            EditKind::Move {
                src: f.id_of(src),
                before: f.id_of(before),
            }
        }
        3 => {
            let target = pick(rng, &movable)?;
            let same_type: Vec<Value> = movable
                .iter()
                .copied()
                .filter(|&i| i != target && llvm::type_of(i) == llvm::type_of(target))
                .collect();
            EditKind::Replace {
                target: f.id_of(target),
                with: f.id_of(pick(rng, &same_type)?),
                clone: f.fresh_id(),
            }
        }
        4 => {
            let a = pick(rng, &movable)?;
            let b = pick(rng, &movable)?;
            if a == b {
                return None;
            }
            EditKind::Swap {
                a: f.id_of(a),
                b: f.id_of(b),
            }
        }
        _ => {
            let users: Vec<(Value, Vec<u32>)> = all
                .iter()
                .map(|&i| (i, f.editable_operands(i)))
                .filter(|(_, ops)| !ops.is_empty())
                .collect();
            let (user, operands) = users.choose(rng)?;
            let operand = *operands.choose(rng)?;
            let current = llvm::operand(*user, operand);
            let ty = llvm::type_of(current);
            let others: Vec<_> = f
                .candidates(*user, operand, None)
                .into_iter()
                .filter(|&v| f.resolve(v, ty).is_ok_and(|resolved| resolved != current))
                .collect();
            EditKind::OperandReplace {
                user: f.id_of(*user),
                operand,
                value: *others.choose(rng)?,
            }
        }
    };
    Some(kind)
}
