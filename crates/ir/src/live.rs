//! A kernel function being edited inside one LLVM context: the id table,
//! instruction positions, dominance between instructions and uses, and the
//! values that may legally feed an operand.

use super::dom::DomTree;
use super::error::EditError;
use super::llvm::{self, Block, Inserter, Value};
use super::patch::{ConstKind, InstId, ValueRef};
use std::collections::HashMap;

enum Slot {
    Live(Value),
    /// Deleted; its position is now that of `anchor` (the instruction that
    /// followed it, or the clone that replaced it).
    Deleted {
        anchor: InstId,
    },
}

pub struct LiveFunction<'d> {
    func: Value,
    slots: HashMap<InstId, Slot>,
    ids: HashMap<Value, InstId>,
    params: Vec<Value>,
    block_index: HashMap<Block, usize>,
    dom: &'d DomTree,
    /// (block, index in block) of every instruction; rebuilt lazily after a
    /// structural change.
    positions: HashMap<Value, (usize, u32)>,
    positions_stale: bool,
    next_id: u32,
    inserter: Inserter,
}

impl<'d> LiveFunction<'d> {
    /// Numbers the instructions of `func` in function order. `dom` must be
    /// the dominator tree of this function's CFG (edits never change the CFG).
    /// Ids start at `first`: a module's later kernels continue where the
    /// earlier ones end, so ids are unique across the module.
    pub fn numbered_from(func: Value, dom: &'d DomTree, first: u32) -> Self {
        let blocks = llvm::blocks(func);
        let block_index = blocks.iter().enumerate().map(|(i, &b)| (b, i)).collect();
        let mut slots = HashMap::new();
        let mut ids = HashMap::new();
        let mut next = first;
        for &block in &blocks {
            for inst in llvm::instructions(block) {
                slots.insert(InstId(next), Slot::Live(inst));
                ids.insert(inst, InstId(next));
                next += 1;
            }
        }
        let mut live = LiveFunction {
            func,
            slots,
            ids,
            params: llvm::params(func),
            block_index,
            dom,
            positions: HashMap::new(),
            positions_stale: true,
            next_id: next,
            inserter: Inserter::new(func),
        };
        live.refresh_positions();
        live
    }

    /// The id the next created instruction gets: one past the largest in use.
    pub fn fresh_id(&self) -> InstId {
        InstId(self.next_id)
    }

    /// Whether `id` names an instruction of this function, live or deleted.
    pub fn holds(&self, id: InstId) -> bool {
        self.slots.contains_key(&id)
    }

    /// Makes ids below `next` unavailable to `fresh_id` (taken in another
    /// function of the module).
    pub fn reserve_below(&mut self, next: u32) {
        self.next_id = self.next_id.max(next);
    }

    pub fn inst(&self, id: InstId) -> Result<Value, EditError> {
        match self.slots.get(&id) {
            Some(Slot::Live(v)) => Ok(*v),
            Some(Slot::Deleted { .. }) => Err(EditError::Deleted(id)),
            None => Err(EditError::UnknownInstruction(id)),
        }
    }

    pub fn id_of(&self, inst: Value) -> InstId {
        self.ids[&inst]
    }

    /// The id of `inst`, when it is one of this function's numbered
    /// instructions.
    pub fn try_id_of(&self, inst: Value) -> Option<InstId> {
        self.ids.get(&inst).copied()
    }

    /// A position named by `id`: the instruction to insert before. Follows
    /// deletions to the position the deleted instruction had, and moves past
    /// phis, which must stay at the top of their block.
    pub fn position(&self, id: InstId) -> Result<Value, EditError> {
        let mut id = id;
        // Anchors always point at younger or later instructions; the bound only
        // guards against a malformed chain.
        for _ in 0..=self.slots.len() {
            match self.slots.get(&id) {
                Some(Slot::Live(v)) => {
                    let mut v = *v;
                    while llvm::is_phi(v) {
                        v = llvm::next_instruction(v).expect("a block ends in a terminator");
                    }
                    return Ok(v);
                }
                Some(Slot::Deleted { anchor }) => id = *anchor,
                None => return Err(EditError::UnknownInstruction(id)),
            }
        }
        Err(EditError::UnknownInstruction(id))
    }

    /// The function being edited.
    pub fn function(&self) -> Value {
        self.func
    }

    /// The dominator tree of its blocks (the CFG's on load: edits never
    /// change it).
    pub fn dom(&self) -> &'d DomTree {
        self.dom
    }

    /// Live instructions in function order.
    pub fn live_instructions(&self) -> Vec<Value> {
        llvm::blocks(self.func)
            .into_iter()
            .flat_map(llvm::instructions)
            .collect()
    }

    /// Registers a newly inserted instruction under `id`.
    pub fn register(&mut self, id: InstId, inst: Value) -> Result<(), EditError> {
        if self.slots.contains_key(&id) {
            return Err(EditError::IdTaken(id));
        }
        self.slots.insert(id, Slot::Live(inst));
        self.ids.insert(inst, id);
        self.next_id = self.next_id.max(id.0.saturating_add(1));
        self.positions_stale = true;
        Ok(())
    }

    /// Inserts an unlinked or moved instruction before `position`.
    pub fn insert_before(&mut self, inst: Value, position: Value) {
        self.inserter.insert_before(inst, position);
        self.positions_stale = true;
    }

    pub fn detach(&mut self, inst: Value) {
        llvm::remove_from_parent(inst);
        self.positions_stale = true;
    }

    /// Erases `id` (which must have no uses left) and anchors its position.
    pub fn erase(&mut self, id: InstId, anchor: InstId) -> Result<(), EditError> {
        let inst = self.inst(id)?;
        if llvm::has_uses(inst) {
            return Err(EditError::StillUsed(id));
        }
        self.ids.remove(&inst);
        llvm::erase(inst);
        self.slots.insert(id, Slot::Deleted { anchor });
        self.positions_stale = true;
        Ok(())
    }

    fn refresh_positions(&mut self) {
        if !self.positions_stale {
            return;
        }
        self.positions.clear();
        for (b, block) in llvm::blocks(self.func).into_iter().enumerate() {
            for (i, inst) in llvm::instructions(block).into_iter().enumerate() {
                self.positions.insert(inst, (b, i as u32));
            }
        }
        self.positions_stale = false;
    }

    /// Whether `def` is available at operand `operand` of `user` (LLVM's rule:
    /// a phi's incoming value is used at the end of its incoming block).
    pub fn dominates_use(&mut self, def: Value, user: Value, operand: u32) -> bool {
        if !llvm::is_instruction(def) {
            return true;
        }
        self.refresh_positions();
        let Some(&(def_block, def_index)) = self.positions.get(&def) else {
            return false;
        };
        if llvm::is_phi(user) {
            let incoming = self.block_index[&llvm::incoming_block(user, operand)];
            return self.dom.dominates(def_block, incoming);
        }
        if def == user {
            return false;
        }
        let (use_block, use_index) = self.positions[&user];
        if !self.dom.is_reachable(use_block) {
            return true;
        }
        if def_block == use_block {
            return def_index < use_index;
        }
        self.dom.strictly_dominates(def_block, use_block)
    }

    /// Operands of `inst` that edits may rewire: data-typed, not a callee,
    /// not a constant argument of an intrinsic (those are often `immarg`), and
    /// of a switch only the condition.
    pub fn editable_operands(&self, inst: Value) -> Vec<u32> {
        let n = llvm::num_operands(inst);
        let limit = match llvm::opcode(inst) {
            llvm_sys::LLVMOpcode::LLVMCall => n.saturating_sub(1),
            llvm_sys::LLVMOpcode::LLVMSwitch => n.min(1),
            _ => n,
        };
        let intrinsic = llvm::is_call(inst) && llvm::calls_intrinsic(inst);
        (0..limit)
            .filter(|&i| {
                let v = llvm::operand(inst, i);
                !v.is_null()
                    && llvm::is_data_type(llvm::type_of(v))
                    && !(intrinsic && llvm::is_constant(v))
            })
            .collect()
    }

    /// Operands that no longer see their value: those of the `touched`
    /// instructions, and every use of them. Sorted by (user id, operand).
    pub fn broken_uses(&mut self, touched: &[Value]) -> Vec<(InstId, u32)> {
        let mut broken = Vec::new();
        for &t in touched {
            for i in self.editable_operands(t) {
                let v = llvm::operand(t, i);
                if !self.dominates_use(v, t, i) {
                    broken.push((self.id_of(t), i));
                }
            }
            for user in llvm::users(t) {
                for i in 0..llvm::num_operands(user) {
                    if llvm::operand(user, i) == t && !self.dominates_use(t, user, i) {
                        broken.push((self.id_of(user), i));
                    }
                }
            }
        }
        broken.sort();
        broken.dedup();
        broken
    }

    /// The values of the operand's type available at operand `operand` of
    /// `user`, in a fixed order: parameters, instructions in function order,
    /// then constants. `exclude` (an instruction about to go) is left out.
    pub fn candidates(
        &mut self,
        user: Value,
        operand: u32,
        exclude: Option<Value>,
    ) -> Vec<ValueRef> {
        let ty = llvm::type_of(llvm::operand(user, operand));
        let mut out = Vec::new();
        for (n, &p) in self.params.iter().enumerate() {
            if llvm::type_of(p) == ty {
                out.push(ValueRef::Arg(n as u32));
            }
        }
        for inst in self.live_instructions() {
            if Some(inst) != exclude
                && llvm::type_of(inst) == ty
                && self.dominates_use(inst, user, operand)
            {
                out.push(ValueRef::Inst(self.id_of(inst)));
            }
        }
        out.push(ValueRef::Const(ConstKind::Zero));
        if llvm::is_int_or_float(ty) {
            out.push(ValueRef::Const(ConstKind::One));
        }
        out
    }

    /// The LLVM value a `ValueRef` names, for an operand of type `ty`.
    pub fn resolve(&self, value: ValueRef, ty: llvm::Type) -> Result<Value, EditError> {
        let v = match value {
            ValueRef::Inst(id) => self.inst(id)?,
            ValueRef::Arg(n) => *self
                .params
                .get(n as usize)
                .ok_or(EditError::UnknownArg(n))?,
            ValueRef::Const(ConstKind::Zero) => {
                if !llvm::is_data_type(ty) {
                    return Err(EditError::NoConstant("zero".into()));
                }
                llvm::const_zero(ty)
            }
            ValueRef::Const(ConstKind::One) => {
                llvm::const_one(ty).ok_or_else(|| EditError::NoConstant("one".into()))?
            }
        };
        Ok(v)
    }

    /// Sets operand `operand` of `user` to `value`, checking the operand may be
    /// rewired and the types agree.
    pub fn set_operand(
        &mut self,
        user: InstId,
        operand: u32,
        value: ValueRef,
    ) -> Result<(), EditError> {
        let inst = self.inst(user)?;
        if !self.editable_operands(inst).contains(&operand) {
            return Err(EditError::NoSuchOperand { user, operand });
        }
        let ty = llvm::type_of(llvm::operand(inst, operand));
        let v = self.resolve(value, ty)?;
        if llvm::type_of(v) != ty {
            return Err(EditError::OperandType {
                user,
                operand,
                value: value.to_string(),
            });
        }
        llvm::set_operand(inst, operand, v);
        Ok(())
    }
}
