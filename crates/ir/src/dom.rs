//! Dominator tree over a function's basic blocks, computed from the CFG in Rust
//! (Cooper, Harvey and Kennedy's iterative algorithm over reverse post-order).
//!
//! Edits never change the CFG (terminators are never copied, moved, deleted or
//! replaced, and branch targets are never operands we touch), so the tree is
//! computed once per kernel on load and shared by every edit of every patch.

/// Blocks are numbered by their position in the function; block 0 is the entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomTree {
    /// Immediate dominator of each block; `None` for the entry and for blocks
    /// unreachable from it.
    idom: Vec<Option<usize>>,
    /// Depth in the tree (entry = 0); meaningless for unreachable blocks.
    depth: Vec<u32>,
    reachable: Vec<bool>,
}

impl DomTree {
    /// The tree of `function`'s blocks, in the function's order.
    pub fn of_function(function: super::llvm::Value) -> Self {
        let blocks = super::llvm::blocks(function);
        let index = |b| {
            blocks
                .iter()
                .position(|x| *x == b)
                .expect("successor is a block of the function")
        };
        let successors: Vec<Vec<usize>> = blocks
            .iter()
            .map(|&b| super::llvm::successors(b).into_iter().map(index).collect())
            .collect();
        DomTree::new(&successors)
    }

    /// `successors[b]` lists the blocks that block `b`'s terminator may jump to.
    pub fn new(successors: &[Vec<usize>]) -> Self {
        let n = successors.len();
        let post_order = post_order(successors);
        let mut rpo_index = vec![usize::MAX; n];
        for (i, &b) in post_order.iter().rev().enumerate() {
            rpo_index[b] = i;
        }
        let mut predecessors = vec![Vec::new(); n];
        for (b, succs) in successors.iter().enumerate() {
            for &s in succs {
                predecessors[s].push(b);
            }
        }

        let mut idom: Vec<Option<usize>> = vec![None; n];
        if n > 0 {
            idom[0] = Some(0);
        }
        let mut changed = true;
        while changed {
            changed = false;
            for &b in post_order.iter().rev().skip(1) {
                let mut new_idom: Option<usize> = None;
                for &p in &predecessors[b] {
                    if idom[p].is_none() {
                        continue;
                    }
                    new_idom = Some(match new_idom {
                        None => p,
                        Some(current) => intersect(&idom, &rpo_index, p, current),
                    });
                }
                if new_idom.is_some() && idom[b] != new_idom {
                    idom[b] = new_idom;
                    changed = true;
                }
            }
        }

        let reachable: Vec<bool> = idom.iter().map(Option::is_some).collect();
        if n > 0 {
            idom[0] = None;
        }
        let mut depth = vec![0u32; n];
        for &b in post_order.iter().rev() {
            if let Some(parent) = idom[b] {
                depth[b] = depth[parent] + 1;
            }
        }
        DomTree {
            idom,
            depth,
            reachable,
        }
    }

    pub fn len(&self) -> usize {
        self.idom.len()
    }

    pub fn is_empty(&self) -> bool {
        self.idom.is_empty()
    }

    pub fn is_reachable(&self, block: usize) -> bool {
        self.reachable[block]
    }

    pub fn immediate_dominator(&self, block: usize) -> Option<usize> {
        self.idom[block]
    }

    /// Whether `a` dominates `b` (every block dominates itself). As in LLVM,
    /// everything dominates an unreachable block, and a block unreachable from
    /// the entry dominates nothing else.
    pub fn dominates(&self, a: usize, b: usize) -> bool {
        if !self.reachable[b] {
            return true;
        }
        if !self.reachable[a] {
            return false;
        }
        let mut b = b;
        while self.depth[b] > self.depth[a] {
            b = self.idom[b].expect("reachable non-entry block has an idom");
        }
        a == b
    }

    pub fn strictly_dominates(&self, a: usize, b: usize) -> bool {
        a != b && self.dominates(a, b)
    }
}

fn intersect(idom: &[Option<usize>], rpo_index: &[usize], mut a: usize, mut b: usize) -> usize {
    while a != b {
        while rpo_index[a] > rpo_index[b] {
            a = idom[a].expect("processed block has an idom");
        }
        while rpo_index[b] > rpo_index[a] {
            b = idom[b].expect("processed block has an idom");
        }
    }
    a
}

/// Post-order of the blocks reachable from block 0, iteratively (kernels can
/// have deep CFGs after unrolling; recursion could overflow the stack).
fn post_order(successors: &[Vec<usize>]) -> Vec<usize> {
    let n = successors.len();
    let mut order = Vec::with_capacity(n);
    if n == 0 {
        return order;
    }
    let mut visited = vec![false; n];
    let mut stack: Vec<(usize, usize)> = vec![(0, 0)];
    visited[0] = true;
    while let Some(&mut (block, ref mut next)) = stack.last_mut() {
        if let Some(&succ) = successors[block].get(*next) {
            *next += 1;
            if !visited[succ] {
                visited[succ] = true;
                stack.push((succ, 0));
            }
        } else {
            order.push(block);
            stack.pop();
        }
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each case: the CFG as successor lists, then the expected idom of every block.
    fn check(successors: &[&[usize]], expected_idom: &[Option<usize>]) {
        let succ: Vec<Vec<usize>> = successors.iter().map(|s| s.to_vec()).collect();
        let tree = DomTree::new(&succ);
        let got: Vec<Option<usize>> = (0..tree.len())
            .map(|b| tree.immediate_dominator(b))
            .collect();
        assert_eq!(got, expected_idom, "cfg {successors:?}");
    }

    #[test]
    fn immediate_dominators() {
        // straight line
        check(&[&[1], &[2], &[]], &[None, Some(0), Some(1)]);
        // diamond
        check(
            &[&[1, 2], &[3], &[3], &[]],
            &[None, Some(0), Some(0), Some(0)],
        );
        // loop with exit: 0 -> 1 (header) -> 2 (body) -> 1, 1 -> 3
        check(
            &[&[1], &[2, 3], &[1], &[]],
            &[None, Some(0), Some(1), Some(1)],
        );
        // irreducible: 0 -> 1, 0 -> 2, 1 <-> 2, 2 -> 3
        check(
            &[&[1, 2], &[2], &[1, 3], &[]],
            &[None, Some(0), Some(0), Some(2)],
        );
        // unreachable block 2
        check(&[&[1], &[], &[1]], &[None, Some(0), None]);
    }

    #[test]
    fn dominance_queries() {
        let succ = vec![vec![1, 2], vec![3], vec![3], vec![], vec![3]];
        let tree = DomTree::new(&succ);
        assert!(tree.dominates(0, 3));
        assert!(tree.dominates(3, 3));
        assert!(!tree.strictly_dominates(3, 3));
        assert!(!tree.dominates(1, 3));
        assert!(!tree.dominates(2, 1));
        // block 4 is unreachable: everything dominates it, it dominates nothing else
        assert!(tree.dominates(1, 4));
        assert!(!tree.dominates(4, 3));
        assert!(!tree.is_reachable(4));
    }
}
