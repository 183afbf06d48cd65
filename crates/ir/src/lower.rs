//! Lowering: a (patched, verified) kernel function becomes the simulator's
//! plain `Program`. This module owns the translation and nothing else: it
//! reads LLVM only through `ir::llvm`'s wrappers and builds `sim::code`
//! values (registers, constants, blocks, edges), which the simulator runs
//! without knowing LLVM.
//!
//! Every value gets registers; constants are folded to raw bits (constant
//! expressions included); GEPs become byte offsets; phis become copies on
//! the edges into their block. Vector values are scalarized here: a vector
//! of N elements occupies N consecutive registers and its instructions
//! become one `Inst` per element (loads and stores stay one access), so the
//! interpreter only ever sees scalars. Intrinsics and libdevice functions
//! the simulator knows are decoded through one table of recipes
//! (`recipes::recipe`). What the simulator does not model becomes
//! `Op::Unsupported` (a verdict when reached) or, for module-level features,
//! `IrError::Unsupported`.
//!
//! Files: this one holds the entry point (`lower`), the lowering state and
//! the emitting helpers; `types` widths, sizes and lane counts; `values`
//! registers and folded constants; `memory` globals, GEPs, loads, stores,
//! atomics and allocas; `flow` branches and phis; `inst` the dispatch per
//! instruction and the scalar (elementwise) instructions; `vector` element
//! and field moves; `calls` calls (special registers, warp operations,
//! barriers, reductions, overflow pairs); `recipes` the known functions.

mod calls;
mod flow;
mod inst;
mod memory;
mod recipes;
mod types;
mod values;
mod vector;

use super::error::IrError;
use super::live::LiveFunction;
use super::llvm::{self, Value};
use gevo_model::sim::code::*;
use gevo_model::sim::cost;
use llvm_sys::LLVMTypeKind;
use std::collections::HashMap;
use types::lane_count;

/// The GPU's limits: 228 KiB of shared memory per block on sm_90, and a
/// generous bound on per-thread stack.
const MAX_SHARED_BYTES: u64 = 228 * 1024;
const MAX_LOCAL_BYTES: u64 = 64 * 1024;

struct Lowering {
    layout: llvm::DataLayout,
    /// The (first) register of every instruction and parameter.
    regs: HashMap<Value, Reg>,
    const_regs: HashMap<u64, Reg>,
    /// Vector and struct constants: the first of their consecutive registers.
    const_lanes: HashMap<Value, Reg>,
    constants: Vec<(Reg, u64)>,
    next_reg: Reg,
    block_index: HashMap<llvm::Block, u32>,
    globals: HashMap<Value, u64>,
    edges: Vec<Edge>,
    local_bytes: u64,
    /// Instructions emitted for the block being lowered.
    out: Vec<Inst>,
    /// The id of the LLVM instruction being lowered.
    id: u32,
}

fn unsupported(what: impl Into<String>) -> IrError {
    IrError::Unsupported { what: what.into() }
}

/// Lowers the function `live` edits (in `module`); `live` supplies instruction ids.
pub fn lower(module: llvm::Module, live: &LiveFunction) -> Result<Program, IrError> {
    let func = live.function();
    let layout = llvm::DataLayout::of(module);
    let blocks = llvm::blocks(func);
    let mut l = Lowering {
        layout,
        regs: HashMap::new(),
        const_regs: HashMap::new(),
        constants: Vec::new(),
        next_reg: 0,
        block_index: blocks
            .iter()
            .enumerate()
            .map(|(i, &b)| (b, i as u32))
            .collect(),
        globals: HashMap::new(),
        edges: Vec::new(),
        local_bytes: 0,
        const_lanes: HashMap::new(),
        out: Vec::new(),
        id: 0,
    };
    let memory::GlobalLayout {
        shared_bytes: static_shared_bytes,
        shared_vars,
        constant_globals,
    } = l.lay_out_globals(module)?;
    if static_shared_bytes > MAX_SHARED_BYTES {
        return Err(unsupported(format!(
            "{static_shared_bytes} bytes of static shared memory"
        )));
    }

    let mut params = Vec::new();
    for p in llvm::params(func) {
        let reg = l.fresh();
        l.regs.insert(p, reg);
        let ty = llvm::type_of(p);
        let is_pointer = llvm::type_kind(ty) == LLVMTypeKind::LLVMPointerTypeKind;
        let bits = if is_pointer { 64 } else { l.bits_of(ty)? };
        let float = matches!(
            llvm::type_kind(ty),
            LLVMTypeKind::LLVMFloatTypeKind | LLVMTypeKind::LLVMDoubleTypeKind
        );
        params.push(ParamSlot {
            reg,
            is_pointer,
            bits,
            float,
        });
    }
    for &b in &blocks {
        for inst in llvm::instructions(b) {
            let ty = llvm::type_of(inst);
            if !llvm::is_void(ty) {
                let reg = l.fresh_n(lane_count(ty)?);
                l.regs.insert(inst, reg);
            }
        }
    }
    let mut out_blocks = Vec::new();
    for (index, &b) in blocks.iter().enumerate() {
        for inst in llvm::instructions(b) {
            if llvm::is_phi(inst) {
                continue; // phis are copies on the edges into this block
            }
            l.id = live.id_of(inst).0;
            l.lower_inst(inst, b)?;
        }
        let insts = std::mem::take(&mut l.out);
        // Unnamed blocks (clang numbers them) are called by their position.
        let name = llvm::block_name(b);
        out_blocks.push(Block {
            name: if name.is_empty() {
                format!("bb{index}")
            } else {
                name
            },
            insts,
        });
    }
    Ok(Program {
        kernel: llvm::value_name(func),
        registers: l.next_reg,
        constants: l.constants,
        params,
        blocks: out_blocks,
        edges: l.edges,
        static_shared_bytes,
        shared_vars,
        constant_globals,
        local_bytes: l.local_bytes,
    })
}

impl Lowering {
    fn fresh(&mut self) -> Reg {
        self.fresh_n(1)
    }

    /// `n` consecutive fresh registers; the first.
    fn fresh_n(&mut self, n: u32) -> Reg {
        let r = self.next_reg;
        self.next_reg += n;
        r
    }

    fn emit(&mut self, op: Op, dst: Reg) {
        self.out.push(Inst {
            cost: cost::weight(&op),
            dst,
            id: self.id,
            op,
        });
    }

    fn copy(&mut self, dst: Reg, src: Reg) {
        self.emit(
            Op::Cast {
                cast: Cast::Bits,
                from_bits: 64,
                to_bits: 64,
                a: src,
            },
            dst,
        );
    }

    /// The instructions emitted since `start` are register moves of one
    /// LLVM instruction (a shuffle, an element insert, a vector bitcast):
    /// they cost 1 together, as the GPU renames registers for most of them.
    fn cost_as_one(&mut self, start: usize) {
        for (k, inst) in self.out[start..].iter_mut().enumerate() {
            inst.cost = u32::from(k == 0);
        }
    }

    fn int(&mut self, op: IntOp, bits: u32, a: Reg, b: Reg, dst: Reg) {
        self.emit(Op::Int { op, bits, a, b }, dst);
    }

    fn icmp(&mut self, pred: ICmp, bits: u32, a: Reg, b: Reg, dst: Reg) {
        self.emit(Op::ICmp { pred, bits, a, b }, dst);
    }
}
