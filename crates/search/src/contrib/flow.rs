//! A lowered kernel (`sim::code::Program`) read as a control-flow graph,
//! for what an edit relies on: where an instruction is, the memory
//! accesses between one barrier and the next, whether one access reaches
//! another without passing a barrier, and the loops. Plain data: the
//! program is what the simulator runs, so the IR's and the simulator's
//! views of a variant agree.

use gevo_model::sim::code::{Op, Program, Reg};
use gevo_model::sim::pointer;
use std::collections::{BTreeSet, HashMap, VecDeque};

/// An instruction's place: block, index in the block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct At {
    pub block: usize,
    pub index: usize,
}

/// A load, store or atomic, with the memory it touches where the pointer's
/// origin is known.
#[derive(Debug, Clone, PartialEq)]
pub struct Access {
    /// The edit engine's instruction id.
    pub id: u32,
    pub at: At,
    pub write: bool,
    /// `pointer::GLOBAL`, `SHARED`, ...; `None`: not known statically.
    pub space: Option<u8>,
    /// The shared variable, by its source name, when known.
    pub var: Option<String>,
}

impl Access {
    /// Whether `self` and `other` may touch the same bytes, one writing:
    /// the pairs a barrier between them orders. Thread-private memory
    /// (local, constant) never conflicts.
    pub fn conflicts(&self, other: &Access) -> bool {
        let private = |s: Option<u8>| matches!(s, Some(pointer::LOCAL | pointer::CONSTANT));
        if !(self.write || other.write) || private(self.space) || private(other.space) {
            return false;
        }
        match (self.space, other.space) {
            (Some(a), Some(b)) if a != b => false,
            _ => match (&self.var, &other.var) {
                (Some(a), Some(b)) => a == b,
                _ => true,
            },
        }
    }

    /// `shared-memory store to tile`, `global-memory load`.
    pub fn words(&self) -> String {
        let space = match self.space {
            Some(pointer::GLOBAL) => "global-memory ",
            Some(pointer::SHARED) => "shared-memory ",
            _ => "",
        };
        let kind = if self.write { "store" } else { "load" };
        match &self.var {
            Some(v) => format!("{space}{kind} {} {v}", if self.write { "to" } else { "of" }),
            None => format!("{space}{kind}"),
        }
    }
}

/// How a later access stands to an earlier one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// A path runs from the first to the second with no barrier on it.
    Unordered,
    /// Every path passes a barrier; the first met is this instruction.
    ByBarrier(u32),
    /// The second never runs after the first.
    NotAfter,
}

/// The graph of one program.
pub struct Flow<'p> {
    program: &'p Program,
    succ: Vec<Vec<usize>>,
    pred: Vec<Vec<usize>>,
    /// Instructions defining each register.
    defs: HashMap<Reg, At>,
    /// Phi copies' sources per destination register.
    phi_sources: HashMap<Reg, Vec<Reg>>,
    /// Natural loops: header and body (header included).
    loops: Vec<(usize, BTreeSet<usize>)>,
}

impl<'p> Flow<'p> {
    pub fn new(program: &'p Program) -> Self {
        let n = program.blocks.len();
        let mut succ = vec![Vec::new(); n];
        let mut defs = HashMap::new();
        for (b, block) in program.blocks.iter().enumerate() {
            for (i, inst) in block.insts.iter().enumerate() {
                let edges: Vec<u32> = match &inst.op {
                    Op::Br { edge } => vec![*edge],
                    Op::CondBr {
                        if_true, if_false, ..
                    } => vec![*if_true, *if_false],
                    Op::Switch { cases, default, .. } => {
                        cases.iter().map(|c| c.1).chain([*default]).collect()
                    }
                    _ => {
                        defs.entry(inst.dst).or_insert(At { block: b, index: i });
                        Vec::new()
                    }
                };
                for e in edges {
                    let target = program.edges[e as usize].target as usize;
                    if !succ[b].contains(&target) {
                        succ[b].push(target);
                    }
                }
            }
        }
        let mut pred = vec![Vec::new(); n];
        for (b, s) in succ.iter().enumerate() {
            for &t in s {
                pred[t].push(b);
            }
        }
        let mut phi_sources: HashMap<Reg, Vec<Reg>> = HashMap::new();
        for e in &program.edges {
            for &(dst, src) in &e.copies {
                phi_sources.entry(dst).or_default().push(src);
            }
        }
        let loops = natural_loops(&succ, &pred);
        Flow {
            program,
            succ,
            pred,
            defs,
            phi_sources,
            loops,
        }
    }

    /// Where the instruction with id `id` is (its first part, when the
    /// lowering split it).
    pub fn position(&self, id: u32) -> Option<At> {
        self.program
            .blocks
            .iter()
            .enumerate()
            .find_map(|(b, block)| {
                block
                    .insts
                    .iter()
                    .position(|i| i.id == id)
                    .map(|index| At { block: b, index })
            })
    }

    fn op(&self, at: At) -> &Op {
        &self.program.blocks[at.block].insts[at.index].op
    }

    fn id(&self, at: At) -> u32 {
        self.program.blocks[at.block].insts[at.index].id
    }

    pub fn is_barrier(&self, at: At) -> bool {
        matches!(self.op(at), Op::Barrier)
    }

    /// The access at `at`, when it is one.
    pub fn access(&self, at: At) -> Option<Access> {
        let (ptr, write) = match self.op(at) {
            Op::Load { ptr, .. } | Op::VecLoad { ptr, .. } => (*ptr, false),
            Op::Store { ptr, .. }
            | Op::VecStore { ptr, .. }
            | Op::AtomicRmw { ptr, .. }
            | Op::CmpXchg { ptr, .. } => (*ptr, true),
            _ => return None,
        };
        let origin = self.origin(ptr, 0);
        Some(Access {
            id: self.id(at),
            at,
            write,
            space: origin.as_ref().map(|o| o.0),
            var: origin.and_then(|o| o.1),
        })
    }

    /// The space (and shared variable) a pointer register comes from,
    /// followed through address arithmetic, casts, selects and phis.
    fn origin(&self, reg: Reg, depth: u32) -> Option<(u8, Option<String>)> {
        if depth > 32 {
            return None;
        }
        if let Some(&(_, bits)) = self.program.constants.iter().find(|(r, _)| *r == reg) {
            let (space, _, offset) = pointer::split(bits);
            let var = (space == pointer::SHARED)
                .then(|| self.program.shared_var_at(offset).map(|v| v.0.to_string()))
                .flatten();
            return Some((space, var));
        }
        if self
            .program
            .params
            .iter()
            .any(|p| p.reg == reg && p.is_pointer)
        {
            return Some((pointer::GLOBAL, None));
        }
        if let Some(sources) = self.phi_sources.get(&reg) {
            return sources.iter().find_map(|&s| self.origin(s, depth + 1));
        }
        match self.op(*self.defs.get(&reg)?) {
            Op::Gep { base, .. } => self.origin(*base, depth + 1),
            Op::Cast { a, .. } => self.origin(*a, depth + 1),
            Op::Select { a, b, .. } => self
                .origin(*a, depth + 1)
                .or_else(|| self.origin(*b, depth + 1)),
            Op::Alloca { .. } => Some((pointer::LOCAL, None)),
            _ => None,
        }
    }

    /// The accesses from `at` on to the next barrier on every path
    /// (`forward`), or back to the previous one: those a barrier at `at`
    /// orders. A barrier with no access between it and `at` is looked
    /// past (a doubled `__syncthreads()` orders what the pair orders).
    pub fn accesses_to_barrier(&self, at: At, forward: bool) -> Vec<Access> {
        let mut out: Vec<Access> = Vec::new();
        // (block, entered with an access behind on the path)
        let mut seen: BTreeSet<(usize, bool)> = BTreeSet::new();
        let mut work: VecDeque<(usize, Option<usize>, bool)> =
            VecDeque::from([(at.block, Some(at.index), false)]);
        while let Some((b, from, mut found)) = work.pop_front() {
            let len = self.program.blocks[b].insts.len();
            let indices: Vec<usize> = match (forward, from) {
                (true, Some(i)) => (i + 1..len).collect(),
                (true, None) => (0..len).collect(),
                (false, Some(i)) => (0..i).rev().collect(),
                (false, None) => (0..len).rev().collect(),
            };
            let mut stopped = false;
            for index in indices {
                let here = At { block: b, index };
                if self.is_barrier(here) && found {
                    stopped = true;
                    break;
                }
                if let Some(a) = self.access(here) {
                    found = true;
                    if !out.iter().any(|o| o.at == a.at) {
                        out.push(a);
                    }
                }
            }
            if stopped {
                continue;
            }
            let next = if forward {
                &self.succ[b]
            } else {
                &self.pred[b]
            };
            for &n in next {
                if seen.insert((n, found)) {
                    work.push_back((n, None, found));
                }
            }
        }
        out
    }

    /// How `to` stands to `from`: reached on a path with no barrier, or
    /// only past one (the first met, breadth first), or never after it.
    pub fn order(&self, from: At, to: At) -> Order {
        self.order_from(from, from.index + 1, to)
    }

    /// [`Flow::order`] for something placed just before `at`: a barrier
    /// at `at` is on its way to `to`.
    pub fn order_before(&self, at: At, to: At) -> Order {
        self.order_from(at, at.index, to)
    }

    fn order_from(&self, from: At, start: usize, to: At) -> Order {
        let mut first_barrier = None;
        let mut seen = BTreeSet::new();
        let mut work: VecDeque<(usize, usize)> = VecDeque::from([(from.block, start)]);
        while let Some((b, start)) = work.pop_front() {
            let len = self.program.blocks[b].insts.len();
            let mut stopped = false;
            for index in start..len {
                let here = At { block: b, index };
                if here == to {
                    return Order::Unordered;
                }
                if self.is_barrier(here) {
                    first_barrier.get_or_insert(self.id(here));
                    stopped = true;
                    break;
                }
            }
            if stopped {
                continue;
            }
            for &n in &self.succ[b] {
                if seen.insert(n) {
                    work.push_back((n, 0));
                }
            }
        }
        // Past the barriers: does `to` run after `from` at all?
        if self.reaches(from, to) {
            first_barrier.map_or(Order::NotAfter, Order::ByBarrier)
        } else {
            Order::NotAfter
        }
    }

    /// Whether `to` can run after `from` (barriers or not).
    fn reaches(&self, from: At, to: At) -> bool {
        if from.block == to.block && to.index > from.index {
            return true;
        }
        let mut seen = BTreeSet::new();
        let mut work: Vec<usize> = self.succ[from.block].clone();
        while let Some(b) = work.pop() {
            if b == to.block {
                return true;
            }
            if seen.insert(b) {
                work.extend(&self.succ[b]);
            }
        }
        false
    }

    /// The headers of the loops holding block `b`, outermost first.
    pub fn loops_of(&self, b: usize) -> Vec<usize> {
        let mut out: Vec<(usize, usize)> = self
            .loops
            .iter()
            .filter(|(_, body)| body.contains(&b))
            .map(|(h, body)| (body.len(), *h))
            .collect();
        out.sort_by(|x, y| y.cmp(x));
        out.into_iter().map(|(_, h)| h).collect()
    }

    /// The first instruction id of block `b` (to name a loop by its header).
    pub fn first_id(&self, b: usize) -> Option<u32> {
        self.program.blocks[b].insts.first().map(|i| i.id)
    }
}

/// Natural loops from the back edges of a depth-first walk from block 0.
fn natural_loops(succ: &[Vec<usize>], pred: &[Vec<usize>]) -> Vec<(usize, BTreeSet<usize>)> {
    let n = succ.len();
    if n == 0 {
        return Vec::new();
    }
    let mut on_stack = vec![false; n];
    let mut visited = vec![false; n];
    let mut back_edges = Vec::new();
    // Iterative DFS: (block, next successor to look at).
    let mut stack = vec![(0usize, 0usize)];
    visited[0] = true;
    on_stack[0] = true;
    while let Some(&mut (b, ref mut next)) = stack.last_mut() {
        if let Some(&s) = succ[b].get(*next) {
            *next += 1;
            if on_stack[s] {
                back_edges.push((b, s));
            } else if !visited[s] {
                visited[s] = true;
                on_stack[s] = true;
                stack.push((s, 0));
            }
        } else {
            on_stack[b] = false;
            stack.pop();
        }
    }
    let mut loops: Vec<(usize, BTreeSet<usize>)> = Vec::new();
    for (tail, header) in back_edges {
        let mut body = BTreeSet::from([header]);
        let mut work = vec![tail];
        while let Some(b) = work.pop() {
            if body.insert(b) {
                work.extend(&pred[b]);
            }
        }
        match loops.iter_mut().find(|(h, _)| *h == header) {
            Some((_, existing)) => existing.extend(body),
            None => loops.push((header, body)),
        }
    }
    loops
}
