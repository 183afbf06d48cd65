//! Matching one function's instructions from old IR to new IR, on plain
//! data (no LLVM): each instruction is described by its [`InstShape`]. The
//! answer maps an old instruction index to a new one, or to nothing when
//! no new instruction is its unambiguous counterpart.
//!
//! Stages (see ARCHITECTURE.md, "Transplanting patches"):
//! 1. anchors: refined colours (the shape key, then the colours of the
//!    operands' definitions and of the users, a few rounds) that occur
//!    exactly once among the unmatched instructions on each side;
//! 2. propagation: from a matched pair to the definitions of the same
//!    operand slots, and to users that are alone in their key and slot;
//! 3. gaps: between consecutive matched pairs (in order on both sides),
//!    the unmatched instructions of one key pair up in order when both
//!    sides have as many; else the debug line, shifted by the nearest
//!    anchor's line shift, picks a single candidate.
//!
//! Stages 2 and 3 run with keys from strict (exact text and dominator
//! depth) to loose (constants and global names wildcarded). Every match is
//! one-to-one; anything ambiguous stays unmatched.

use std::collections::hash_map::DefaultHasher;
use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};

/// One instruction as the matcher sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstShape {
    /// Opcode, flags, predicate, types, constants, callee and globals, with
    /// local value names, metadata and attribute groups left out.
    pub exact: String,
    /// `exact` with numeric constants and global variable names wildcarded.
    pub coarse: String,
    /// Per operand, the index of the instruction that defines it.
    pub defs: Vec<Option<u32>>,
    /// Depth of the instruction's block in the dominator tree.
    pub depth: u32,
    /// `file:line` of its debug location, when the IR has line tables.
    pub line: Option<(String, u32)>,
}

/// Refinement rounds for the anchor colours: enough to tell apart
/// instructions by their neighbourhood two or three steps away, few enough
/// that a change elsewhere does not reach every colour.
const ROUNDS: usize = 3;

/// For each old instruction, the new instruction it matches.
pub fn match_instructions(old: &[InstShape], new: &[InstShape]) -> Vec<Option<u32>> {
    let mut m = Matching::new(old, new);
    m.anchors();
    for level in Level::ALL {
        loop {
            let before = m.count;
            m.propagate(level);
            m.align_gaps(level);
            if m.count == before {
                break;
            }
        }
    }
    m.forward.iter().map(|o| o.map(|n| n as u32)).collect()
}

/// A shape at one level of strictness: the text, and the depth when kept.
type Key<'s> = (&'s str, Option<u32>);
/// Old and new instruction indices that share something.
type Sides = (Vec<usize>, Vec<usize>);

#[derive(Debug, Clone, Copy)]
enum Level {
    ExactDepth,
    Exact,
    CoarseDepth,
    Coarse,
}

impl Level {
    const ALL: [Level; 4] = [
        Level::ExactDepth,
        Level::Exact,
        Level::CoarseDepth,
        Level::Coarse,
    ];

    fn key(self, s: &InstShape) -> Key<'_> {
        match self {
            Level::ExactDepth => (&s.exact, Some(s.depth)),
            Level::Exact => (&s.exact, None),
            Level::CoarseDepth => (&s.coarse, Some(s.depth)),
            Level::Coarse => (&s.coarse, None),
        }
    }
}

struct Matching<'a> {
    old: &'a [InstShape],
    new: &'a [InstShape],
    forward: Vec<Option<usize>>,
    backward: Vec<Option<usize>>,
    old_users: Vec<Vec<(usize, usize)>>,
    new_users: Vec<Vec<(usize, usize)>>,
    count: usize,
}

fn users(shapes: &[InstShape]) -> Vec<Vec<(usize, usize)>> {
    let mut users = vec![Vec::new(); shapes.len()];
    for (i, s) in shapes.iter().enumerate() {
        for (slot, d) in s.defs.iter().enumerate() {
            if let Some(d) = d.filter(|&d| (d as usize) < shapes.len()) {
                users[d as usize].push((i, slot));
            }
        }
    }
    users
}

fn hash_of(v: impl Hash) -> u64 {
    let mut h = DefaultHasher::new();
    v.hash(&mut h);
    h.finish()
}

/// Colours after each refinement round, round 0 first.
fn colours(shapes: &[InstShape], users: &[Vec<(usize, usize)>], depth: bool) -> Vec<Vec<u64>> {
    let mut rounds = vec![shapes
        .iter()
        .map(|s| hash_of((&s.exact, depth.then_some(s.depth))))
        .collect::<Vec<_>>()];
    for _ in 0..ROUNDS {
        let prev = rounds.last().expect("round 0");
        let next = shapes
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let defs: Vec<u64> = s
                    .defs
                    .iter()
                    .map(|d| d.and_then(|d| prev.get(d as usize).copied()).unwrap_or(0))
                    .collect();
                let mut uses: Vec<(u64, usize)> =
                    users[i].iter().map(|&(u, slot)| (prev[u], slot)).collect();
                uses.sort_unstable();
                hash_of((prev[i], defs, uses))
            })
            .collect();
        rounds.push(next);
    }
    rounds
}

impl<'a> Matching<'a> {
    fn new(old: &'a [InstShape], new: &'a [InstShape]) -> Self {
        Matching {
            old,
            new,
            forward: vec![None; old.len()],
            backward: vec![None; new.len()],
            old_users: users(old),
            new_users: users(new),
            count: 0,
        }
    }

    fn pair(&mut self, o: usize, n: usize) {
        debug_assert!(self.forward[o].is_none() && self.backward[n].is_none());
        self.forward[o] = Some(n);
        self.backward[n] = Some(o);
        self.count += 1;
    }

    /// Colours unique on both sides, most refined first; with the
    /// dominator depth, then without (a change that adds control flow
    /// shifts the depth of what follows). Round 0 (the instruction alone)
    /// is no anchor: one lone `br` on each side says little.
    fn anchors(&mut self) {
        for depth in [true, false] {
            let old_c = colours(self.old, &self.old_users, depth);
            let new_c = colours(self.new, &self.new_users, depth);
            for round in (1..=ROUNDS).rev() {
                let mut by_colour: BTreeMap<u64, Sides> = BTreeMap::new();
                for (o, &c) in old_c[round].iter().enumerate() {
                    if self.forward[o].is_none() {
                        by_colour.entry(c).or_default().0.push(o);
                    }
                }
                for (n, &c) in new_c[round].iter().enumerate() {
                    if self.backward[n].is_none() {
                        by_colour.entry(c).or_default().1.push(n);
                    }
                }
                for (os, ns) in by_colour.into_values() {
                    if let ([o], [n]) = (os.as_slice(), ns.as_slice()) {
                        self.pair(*o, *n);
                    }
                }
            }
        }
    }

    /// From each matched pair to the definitions in the same operand slots
    /// and to the users alone in their (key, slot).
    fn propagate(&mut self, level: Level) {
        let mut o = 0;
        while o < self.old.len() {
            if let Some(n) = self.forward[o] {
                let (od, nd) = (&self.old[o].defs, &self.new[n].defs);
                if od.len() == nd.len() {
                    for (a, b) in od.iter().zip(nd) {
                        if let (Some(a), Some(b)) = (*a, *b) {
                            self.try_pair(a as usize, b as usize, level);
                        }
                    }
                }
                let group =
                    |users: &[(usize, usize)], shapes: &'a [InstShape], taken: &[Option<usize>]| {
                        let mut g: BTreeMap<(Key<'a>, usize), Vec<usize>> = BTreeMap::new();
                        for &(u, slot) in users {
                            if taken[u].is_none() {
                                g.entry((level.key(&shapes[u]), slot)).or_default().push(u);
                            }
                        }
                        g
                    };
                let og = group(&self.old_users[o], self.old, &self.forward);
                let ng = group(&self.new_users[n], self.new, &self.backward);
                for (key, ou) in og {
                    if let (Some(nu), [a]) = (ng.get(&key), ou.as_slice()) {
                        if let [b] = nu.as_slice() {
                            self.try_pair(*a, *b, level);
                        }
                    }
                }
            }
            o += 1;
        }
    }

    fn try_pair(&mut self, o: usize, n: usize, level: Level) {
        if o < self.old.len()
            && n < self.new.len()
            && self.forward[o].is_none()
            && self.backward[n].is_none()
            && level.key(&self.old[o]) == level.key(&self.new[n])
        {
            self.pair(o, n);
        }
    }

    /// Matched pairs in old order whose new indices increase (greedy), with
    /// sentinels at both ends.
    fn monotone_anchors(&self) -> Vec<(isize, isize)> {
        let mut out = vec![(-1isize, -1isize)];
        for (o, n) in self.forward.iter().enumerate() {
            if let Some(n) = *n {
                if n as isize > out.last().expect("sentinel").1 {
                    out.push((o as isize, n as isize));
                }
            }
        }
        out.push((self.old.len() as isize, self.new.len() as isize));
        out
    }

    fn align_gaps(&mut self, level: Level) {
        let anchors = self.monotone_anchors();
        for w in anchors.windows(2) {
            let ((ao, an), (bo, bn)) = (w[0], w[1]);
            let mut groups: BTreeMap<Key, Sides> = BTreeMap::new();
            for o in (ao + 1) as usize..bo as usize {
                if self.forward[o].is_none() {
                    groups.entry(level.key(&self.old[o])).or_default().0.push(o);
                }
            }
            for n in (an + 1) as usize..bn as usize {
                if self.backward[n].is_none() {
                    if let Some(g) = groups.get_mut(&level.key(&self.new[n])) {
                        g.1.push(n);
                    }
                }
            }
            let shift = self.line_shift(ao, bo);
            for (os, ns) in groups.into_values() {
                if ns.is_empty() {
                    continue;
                }
                if os.len() == ns.len() {
                    for (o, n) in os.into_iter().zip(ns) {
                        self.pair(o, n);
                    }
                    continue;
                }
                let Some(shift) = shift else { continue };
                self.pair_by_line(&os, &ns, shift);
            }
        }
    }

    /// New line minus old line of the gap's nearest bounding anchor that has
    /// a line on both sides.
    fn line_shift(&self, before: isize, after: isize) -> Option<i64> {
        let shift_of = |o: isize| -> Option<i64> {
            let o = usize::try_from(o).ok().filter(|&o| o < self.old.len())?;
            let n = self.forward[o]?;
            let (of, ol) = self.old[o].line.as_ref()?;
            let (nf, nl) = self.new[n].line.as_ref()?;
            (of == nf).then(|| i64::from(*nl) - i64::from(*ol))
        };
        shift_of(before).or_else(|| shift_of(after))
    }

    /// Pairs old and new instructions whose lines agree after the shift,
    /// where exactly one of each side has that line.
    fn pair_by_line(&mut self, os: &[usize], ns: &[usize], shift: i64) {
        let expected = |o: usize| {
            self.old[o]
                .line
                .as_ref()
                .map(|(f, l)| (f.clone(), i64::from(*l) + shift))
        };
        let actual = |n: usize| {
            self.new[n]
                .line
                .as_ref()
                .map(|(f, l)| (f.clone(), i64::from(*l)))
        };
        let mut by_line: BTreeMap<(String, i64), Sides> = BTreeMap::new();
        for &o in os {
            if let Some(k) = expected(o) {
                by_line.entry(k).or_default().0.push(o);
            }
        }
        for &n in ns {
            if let Some(k) = actual(n) {
                if let Some(g) = by_line.get_mut(&k) {
                    g.1.push(n);
                }
            }
        }
        for (o, n) in by_line.into_values() {
            if let ([o], [n]) = (o.as_slice(), n.as_slice()) {
                self.pair(*o, *n);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A shape from `text` (`op` with `#` constants) and its operand defs.
    fn s(text: &str, defs: &[u32]) -> InstShape {
        InstShape {
            exact: text.to_string(),
            coarse: text
                .split(' ')
                .map(|t| if t.parse::<f64>().is_ok() { "#" } else { t })
                .collect::<Vec<_>>()
                .join(" "),
            defs: defs.iter().map(|&d| Some(d)).collect(),
            depth: 0,
            line: None,
        }
    }

    fn check(old: &[InstShape], new: &[InstShape], expect: &[Option<u32>]) {
        assert_eq!(match_instructions(old, new), expect);
    }

    #[test]
    fn identical_functions_match_one_to_one() {
        let f = [
            s("load", &[]),
            s("barrier", &[]),
            s("barrier", &[]),
            s("add 1", &[0]),
            s("store", &[3]),
            s("ret", &[]),
        ];
        check(&f, &f, &(0..6).map(Some).collect::<Vec<_>>());
    }

    #[test]
    fn an_insertion_shifts_the_rest() {
        let old = [
            s("load", &[]),
            s("barrier", &[]),
            s("store", &[0]),
            s("ret", &[]),
        ];
        let new = [
            s("load", &[]),
            s("mul 3", &[0]),
            s("store", &[1]),
            s("barrier", &[]),
            s("store", &[0]),
            s("ret", &[]),
        ];
        check(&old, &new, &[Some(0), Some(3), Some(4), Some(5)]);
    }

    #[test]
    fn a_changed_constant_matches_loosely() {
        let old = [
            s("load", &[]),
            s("add 1", &[0]),
            s("store", &[1]),
            s("ret", &[]),
        ];
        let new = [
            s("load", &[]),
            s("add 7", &[0]),
            s("store", &[1]),
            s("ret", &[]),
        ];
        check(&old, &new, &[Some(0), Some(1), Some(2), Some(3)]);
    }

    #[test]
    fn ambiguity_leaves_instructions_unmatched() {
        // Two old barriers, three new ones, no lines to tell them apart.
        let old = [
            s("load", &[]),
            s("barrier", &[]),
            s("barrier", &[]),
            s("ret", &[]),
        ];
        let new = [
            s("load", &[]),
            s("barrier", &[]),
            s("barrier", &[]),
            s("barrier", &[]),
            s("ret", &[]),
        ];
        check(&old, &new, &[Some(0), None, None, Some(4)]);
    }

    #[test]
    fn debug_lines_break_ties_after_a_shift() {
        let with_line = |mut shape: InstShape, line: u32| {
            shape.line = Some(("k.cu".into(), line));
            shape
        };
        let old = [
            with_line(s("load", &[]), 10),
            with_line(s("barrier", &[]), 11),
            with_line(s("barrier", &[]), 12),
            with_line(s("ret", &[]), 13),
        ];
        // Everything moved down two lines; a third barrier was added at 15.
        let new = [
            with_line(s("load", &[]), 12),
            with_line(s("barrier", &[]), 13),
            with_line(s("barrier", &[]), 14),
            with_line(s("barrier", &[]), 15),
            with_line(s("ret", &[]), 16),
        ];
        check(&old, &new, &[Some(0), Some(1), Some(2), Some(4)]);
    }

    #[test]
    fn removed_code_is_unmatched() {
        let old = [
            s("load", &[]),
            s("fmul", &[0]),
            s("store", &[1]),
            s("ret", &[]),
        ];
        let new = [s("load", &[]), s("ret", &[])];
        check(&old, &new, &[Some(0), None, None, Some(1)]);
    }
}
