//! Which `__syncthreads()` of a kernel every lane of a warp reaches
//! together, proven from the patched IR alone: those need no check in the
//! guarded build (barriers.rs), which saves each warp the poll at every
//! such barrier and, where a kernel has no other, the live lanes' upkeep at
//! its entry and returns (BENCHMARKS.md, "Barriers proven together").
//!
//! A divergence analysis in the manner of a GPU compiler's, kept
//! conservative wherever that is simpler:
//! - divergent values: reads of the thread's or lane's index and anything
//!   the analysis cannot see through (loads, atomics, calls but a few
//!   intrinsics, inline assembly, `alloca`), and everything computed from
//!   them;
//! - a divergent branch (a conditional `br` or `switch` on a divergent
//!   value) whose lanes may meet a barrier on both sides: every block
//!   between it and its immediate post-dominator is run by some lanes of
//!   a warp and not others, so every value there is divergent, and the
//!   post-dominator's phis too. A side from which no barrier can be
//!   reached and that meets the other side nowhere (the branch's
//!   post-dominator is the function's exit) is an early way out
//!   (`if (i >= n) return;`): lanes that take it never wait at a barrier
//!   and leave the rest together. Where the sides meet, the lanes that
//!   left wait there for the others (their reconvergence point), and a
//!   lane looping over a barrier alone would wait for them for ever
//!   (`reduce.lane-loops-alone`);
//! - repeated until nothing more turns divergent.
//!
//! A barrier inside no divergent branch's region is reached together. A
//! barrier in a block from which no return can be reached (an endless
//! loop) is not claimed.

use super::super::dom::DomTree;
use super::super::llvm;
use llvm_sys::LLVMOpcode;
use std::collections::{HashMap, HashSet};

/// Special registers that are the same for every lane of a warp.
const UNIFORM_REGISTERS: [&str; 4] = ["ctaid.", "ntid.", "nctaid.", "warpsize"];

/// The calls among `barriers` (calls in `function`) that every lane of a
/// warp reaches together.
pub(super) fn reached_together(
    function: llvm::Value,
    barriers: &[llvm::Value],
) -> Vec<llvm::Value> {
    let cfg = Cfg::of(function);
    let barrier_blocks: HashSet<usize> = barriers
        .iter()
        .filter_map(|&b| llvm::parent(b).and_then(|block| cfg.index.get(&block).copied()))
        .collect();
    let reaches_barrier = cfg.reaching(&barrier_blocks);
    let divergent_blocks = divergent_regions(&cfg, &reaches_barrier);
    barriers
        .iter()
        .copied()
        .filter(|&b| {
            let block = llvm::parent(b).and_then(|block| cfg.index.get(&block).copied());
            block.is_some_and(|i| cfg.post.is_reachable(i + 1) && !divergent_blocks.contains(&i))
        })
        .collect()
}

/// A function's blocks, numbered in order, with their edges and the
/// post-dominator tree (node 0 the exit every return reaches, block `i`
/// node `i + 1`).
struct Cfg {
    blocks: Vec<llvm::Block>,
    index: HashMap<llvm::Block, usize>,
    successors: Vec<Vec<usize>>,
    post: DomTree,
}

impl Cfg {
    fn of(function: llvm::Value) -> Cfg {
        let blocks = llvm::blocks(function);
        let index: HashMap<llvm::Block, usize> =
            blocks.iter().enumerate().map(|(i, &b)| (b, i)).collect();
        let successors: Vec<Vec<usize>> = blocks
            .iter()
            .map(|&b| llvm::successors(b).iter().map(|s| index[s]).collect())
            .collect();
        // The reverse graph: the exit leads to every block that leaves the
        // function, and each block to its predecessors.
        let mut reverse = vec![Vec::new(); blocks.len() + 1];
        for (b, succs) in successors.iter().enumerate() {
            if succs.is_empty() {
                reverse[0].push(b + 1);
            }
            for &s in succs {
                reverse[s + 1].push(b + 1);
            }
        }
        let post = DomTree::new(&reverse);
        Cfg {
            blocks,
            index,
            successors,
            post,
        }
    }

    /// The blocks from which one of `targets` can be reached (themselves
    /// included).
    fn reaching(&self, targets: &HashSet<usize>) -> Vec<bool> {
        let mut reaches: Vec<bool> = (0..self.blocks.len())
            .map(|b| targets.contains(&b))
            .collect();
        let mut changed = true;
        while changed {
            changed = false;
            for b in 0..self.blocks.len() {
                if !reaches[b] && self.successors[b].iter().any(|&s| reaches[s]) {
                    reaches[b] = true;
                    changed = true;
                }
            }
        }
        reaches
    }

    /// Block `b`'s immediate post-dominator; None where it is the exit, or
    /// `b` never returns.
    fn join_of(&self, b: usize) -> Option<usize> {
        self.post
            .immediate_dominator(b + 1)
            .filter(|&node| node != 0)
            .map(|node| node - 1)
    }

    /// The blocks reached from `from` before `stop`.
    fn region(&self, from: &[usize], stop: Option<usize>) -> HashSet<usize> {
        let mut seen = HashSet::new();
        let mut work: Vec<usize> = from.to_vec();
        while let Some(b) = work.pop() {
            if Some(b) == stop || !seen.insert(b) {
                continue;
            }
            work.extend(self.successors[b].iter().copied());
        }
        seen
    }
}

/// The blocks that some lanes of a warp run and others do not, by the
/// fixpoint the module's doc describes.
fn divergent_regions(cfg: &Cfg, reaches_barrier: &[bool]) -> HashSet<usize> {
    let mut divergent: HashSet<llvm::Value> = HashSet::new();
    let mut in_region: HashSet<usize> = HashSet::new();
    let mut joins: HashSet<usize> = HashSet::new();
    let mut split: HashSet<usize> = HashSet::new();
    let instructions: Vec<Vec<llvm::Value>> =
        cfg.blocks.iter().map(|&b| llvm::instructions(b)).collect();
    loop {
        let mut changed = false;
        for (b, insts) in instructions.iter().enumerate() {
            for &inst in insts {
                if divergent.contains(&inst) {
                    continue;
                }
                let phi_at_join = llvm::is_phi(inst) && joins.contains(&b);
                let from_operand = (0..llvm::num_operands(inst))
                    .any(|k| divergent.contains(&llvm::operand(inst, k)));
                if in_region.contains(&b) || phi_at_join || from_operand || is_source(inst) {
                    divergent.insert(inst);
                    changed = true;
                }
            }
        }
        for (b, insts) in instructions.iter().enumerate() {
            let Some(&term) = insts.last() else { continue };
            let succs = &cfg.successors[b];
            let on_divergent = match llvm::opcode(term) {
                LLVMOpcode::LLVMBr => {
                    llvm::branch_condition(term).is_some_and(|c| divergent.contains(&c))
                }
                LLVMOpcode::LLVMSwitch => divergent.contains(&llvm::operand(term, 0)),
                _ => succs.len() > 1,
            };
            let join = cfg.join_of(b);
            // Lanes that take a side where no barrier waits, and that never
            // meets the other side, leave the others together. Where the
            // sides meet again, the lanes that left wait there for the rest
            // (their reconvergence point), so they have not left.
            let both_meet_barriers = succs.iter().filter(|&&s| reaches_barrier[s]).count() > 1;
            let way_out = join.is_none() && !both_meet_barriers;
            if !on_divergent || way_out || !split.insert(b) {
                continue;
            }
            in_region.extend(cfg.region(succs, join));
            joins.extend(join);
            changed = true;
        }
        if !changed {
            return in_region;
        }
    }
}

/// Whether `inst` may differ between lanes whatever its operands are.
fn is_source(inst: llvm::Value) -> bool {
    use LLVMOpcode::*;
    match llvm::opcode(inst) {
        LLVMLoad | LLVMAtomicRMW | LLVMAtomicCmpXchg | LLVMAlloca | LLVMVAArg | LLVMLandingPad => {
            true
        }
        LLVMCall | LLVMInvoke | LLVMCallBr => !is_uniform_call(inst),
        _ => false,
    }
}

/// A call whose result is the same for every lane given the same operands:
/// an intrinsic that only computes, or a special register every lane of a
/// warp shares. Anything else (the thread's index, warp votes and
/// shuffles, the clock, a function the module defines) may differ.
fn is_uniform_call(call: llvm::Value) -> bool {
    let Some(callee) = llvm::called_function(call) else {
        return false;
    };
    let name = llvm::value_name(callee);
    if let Some(register) = name.strip_prefix("llvm.nvvm.read.ptx.sreg.") {
        return UNIFORM_REGISTERS.iter().any(|r| register.starts_with(r));
    }
    name.starts_with("llvm.") && !name.starts_with("llvm.nvvm.") && llvm::calls_intrinsic(call)
}

#[cfg(test)]
mod tests {
    use super::super::super::parse_bitcode;
    use super::*;
    use inkwell::context::Context;
    use inkwell::values::AsValueRef;

    /// Each case's barriers, by the prefix of its function's name
    /// (uniform_cases.ll).
    #[test]
    fn barriers_proven_reached_together_match_the_cases() {
        let context = Context::create();
        let text = include_str!("uniform_cases.ll");
        let module = parse_bitcode(&context, text.as_bytes()).unwrap();
        let mut cases = 0;
        for function in module
            .get_functions()
            .filter(|f| f.count_basic_blocks() > 0)
        {
            let name = function.get_name().to_string_lossy().into_owned();
            let value = function.as_value_ref();
            let barriers: Vec<llvm::Value> = llvm::blocks(value)
                .into_iter()
                .flat_map(llvm::instructions)
                .filter(|&i| {
                    llvm::is_call(i)
                        && llvm::called_function(i)
                            .is_some_and(|f| llvm::value_name(f) == "llvm.nvvm.barrier0")
                })
                .collect();
            assert_eq!(barriers.len(), 1, "{name}");
            let together = reached_together(value, &barriers);
            let expected = name.starts_with("together_");
            assert!(expected || name.starts_with("apart_"), "{name}");
            assert_eq!(together.len() == 1, expected, "{name}");
            cases += 1;
        }
        assert_eq!(cases, 11);
    }
}
