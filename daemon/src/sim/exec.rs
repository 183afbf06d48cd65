//! Runs a lowered kernel over its whole grid.
//!
//! Blocks are independent and run in parallel on worker threads. Inside a
//! block, threads run one after another, each until it reaches a barrier or
//! exits; when every live thread waits at the barrier, all continue. Shared
//! memory carries a shadow per byte that catches races between two barriers
//! and reads of bytes never written; global memory records which block wrote
//! each word (`Writers`), which catches blocks writing the same bytes.

use super::code::*;
use super::cost;
use super::memory::{GlobalMemory, Writers};
use super::pointer;
use super::verdict::{Fault, Verdict};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchDims {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub dynamic_shared_bytes: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RunStats {
    /// Instructions executed (phi copies not counted).
    pub steps: u64,
    pub cost: u64,
    /// The most steps any one block took.
    pub max_block_steps: u64,
}

impl RunStats {
    /// Accumulates another run (of a block, or of a launch).
    pub fn add(&mut self, other: &RunStats) {
        self.steps += other.steps;
        self.cost += other.cost;
        self.max_block_steps = self.max_block_steps.max(other.max_block_steps);
    }
}

/// Each block may execute at most this many instructions.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub block_step_budget: u64,
}

/// Runs `program` once over the grid. `args` are the raw parameter values
/// (global pointers already tagged). Results do not depend on `workers`:
/// they are those of running the blocks one after another in order, where a
/// failure is reported for the lowest failing block and two blocks writing
/// the same global bytes are a `GlobalRace` of the later one.
pub fn run(
    program: &Program,
    dims: &LaunchDims,
    args: &[u64],
    memory: &GlobalMemory,
    limits: Limits,
    workers: usize,
) -> Result<RunStats, Verdict> {
    let [gx, gy, gz] = dims.grid;
    let blocks = gx as usize * gy as usize * gz as usize;
    let workers = workers.clamp(1, blocks.max(1));
    // Stores narrower than a word can be two blocks writing neighbouring
    // bytes of one word, which is no conflict: track bytes then.
    let narrow = program
        .blocks
        .iter()
        .flat_map(|b| &b.insts)
        .any(|i| match i.op {
            Op::Store { bytes, .. } => bytes < 4,
            Op::VecStore {
                elem_bytes, lanes, ..
            } => elem_bytes.saturating_mul(lanes) < 4,
            _ => false,
        });
    let shift = if narrow { 0 } else { 2 };
    if workers == 1 {
        return run_blocks(program, dims, args, memory, limits, 1, shift).0;
    }
    let start = memory.snapshot();
    let (result, conflict) = run_blocks(program, dims, args, memory, limits, workers, shift);
    if !conflict {
        return result;
    }
    // Blocks wrote the same bytes; which of them noticed depended on timing.
    // Run again, in block order, from the launch's starting memory.
    memory.restore(&start);
    run_blocks(program, dims, args, memory, limits, 1, shift).0
}

/// One pass over the grid on `workers` threads; also whether a block saw a
/// global write conflict (the pass then stops early).
fn run_blocks(
    program: &Program,
    dims: &LaunchDims,
    args: &[u64],
    memory: &GlobalMemory,
    limits: Limits,
    workers: usize,
    shift: u32,
) -> (Result<RunStats, Verdict>, bool) {
    let [gx, gy, gz] = dims.grid;
    let blocks = gx as usize * gy as usize * gz as usize;
    let writers = Writers::new(memory, shift, workers == 1);
    let next = AtomicUsize::new(0);
    // Lowest failing block index so far: later blocks need not run.
    let first_failure = AtomicUsize::new(usize::MAX);
    let conflict = AtomicBool::new(false);
    let worker_results: Vec<Vec<(usize, Result<RunStats, Verdict>)>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                s.spawn(|| {
                    let mut results = Vec::new();
                    loop {
                        let b = next.fetch_add(1, Ordering::Relaxed);
                        if b >= blocks
                            || b > first_failure.load(Ordering::Relaxed)
                            || conflict.load(Ordering::Relaxed)
                        {
                            break;
                        }
                        let r =
                            BlockRun::new(program, dims, b, args, memory, &writers, limits).run();
                        if let Err(v) = &r {
                            first_failure.fetch_min(b, Ordering::Relaxed);
                            if matches!(v.fault, Fault::GlobalRace { .. }) {
                                conflict.store(true, Ordering::Relaxed);
                            }
                        }
                        results.push((b, r));
                    }
                    results
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("simulator worker"))
            .collect()
    });
    let mut results: Vec<(usize, Result<RunStats, Verdict>)> =
        worker_results.into_iter().flatten().collect();
    results.sort_by_key(|(b, _)| *b);
    let mut total = RunStats::default();
    for (_, r) in results {
        match r {
            Ok(stats) => total.add(&stats),
            Err(v) => return (Err(v), conflict.into_inner()),
        }
    }
    (Ok(total), conflict.into_inner())
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Status {
    Running,
    AtBarrier,
    /// Stopped at a warp-collective instruction (`pc` points at it).
    AtWarpOp,
    Exited,
}

struct Thread {
    regs: Vec<u64>,
    block: u32,
    pc: u32,
    status: Status,
    local: Vec<u8>,
    tid: [u32; 3],
}

const NO_THREAD: u32 = u32::MAX;
const MANY: u32 = u32::MAX - 1;

/// Per shared byte: who wrote and who read it in which barrier interval.
#[derive(Clone, Copy)]
struct Shadow {
    written: bool,
    write_epoch: u32,
    writer: u32,
    read_epoch: u32,
    reader: u32,
}

struct BlockRun<'a> {
    program: &'a Program,
    dims: &'a LaunchDims,
    cta: [u32; 3],
    memory: &'a GlobalMemory,
    writers: &'a Writers,
    /// This block's linear index + 1, as `Writers` records it (0: too many
    /// blocks to record, never the case in practice).
    writer: u32,
    limits: Limits,
    threads: Vec<Thread>,
    shared: Vec<u8>,
    shadow: Vec<Shadow>,
    epoch: u32,
    steps: u64,
    cost: u64,
    copy_buffer: Vec<u64>,
}

impl<'a> BlockRun<'a> {
    fn new(
        program: &'a Program,
        dims: &'a LaunchDims,
        block: usize,
        args: &[u64],
        memory: &'a GlobalMemory,
        writers: &'a Writers,
        limits: Limits,
    ) -> Self {
        let cta = cta_of(dims, block);
        let mut template = vec![0u64; program.registers as usize];
        for &(r, bits) in &program.constants {
            template[r as usize] = bits;
        }
        for (slot, &value) in program.params.iter().zip(args) {
            template[slot.reg as usize] = value;
        }
        let [bx, by, bz] = dims.block;
        let mut threads = Vec::with_capacity((bx * by * bz) as usize);
        for z in 0..bz {
            for y in 0..by {
                for x in 0..bx {
                    threads.push(Thread {
                        regs: template.clone(),
                        block: 0,
                        pc: 0,
                        status: Status::Running,
                        local: vec![0; program.local_bytes as usize],
                        tid: [x, y, z],
                    });
                }
            }
        }
        let shared_bytes = (program.static_shared_bytes + dims.dynamic_shared_bytes) as usize;
        BlockRun {
            program,
            dims,
            cta,
            memory,
            writers,
            writer: u32::try_from(block + 1).unwrap_or(0),
            limits,
            threads,
            shared: vec![0; shared_bytes],
            shadow: vec![
                Shadow {
                    written: false,
                    write_epoch: 0,
                    writer: NO_THREAD,
                    read_epoch: 0,
                    reader: NO_THREAD,
                };
                shared_bytes
            ],
            epoch: 1,
            steps: 0,
            cost: 0,
            copy_buffer: Vec::new(),
        }
    }

    fn run(mut self) -> Result<RunStats, Verdict> {
        loop {
            for t in 0..self.threads.len() {
                if self.threads[t].status == Status::Running {
                    self.run_thread(t)?;
                }
            }
            if self.threads.iter().any(|t| t.status == Status::AtWarpOp) {
                self.resolve_warp_ops()?;
                continue;
            }
            let waiting = self
                .threads
                .iter()
                .filter(|t| t.status == Status::AtBarrier)
                .count();
            if waiting == 0 {
                break;
            }
            // Every live thread is at the barrier (exited threads count as
            // arrived, as on sm_70 and later): start a new interval.
            self.epoch += 1;
            for t in &mut self.threads {
                if t.status == Status::AtBarrier {
                    t.status = Status::Running;
                }
            }
        }
        Ok(RunStats {
            steps: self.steps,
            cost: self.cost,
            max_block_steps: self.steps,
        })
    }

    fn verdict(&self, t: usize, inst: &Inst, fault: Fault) -> Verdict {
        let th = &self.threads[t];
        Verdict {
            fault,
            instruction: inst.id,
            block: self.program.blocks[th.block as usize].name.clone(),
            cta: self.cta,
            thread: th.tid,
        }
    }

    fn take_edge(&mut self, t: usize, edge: u32) {
        let e = &self.program.edges[edge as usize];
        let th = &mut self.threads[t];
        if !e.copies.is_empty() {
            self.copy_buffer.clear();
            self.copy_buffer
                .extend(e.copies.iter().map(|&(_, src)| th.regs[src as usize]));
            for (&(dst, _), &v) in e.copies.iter().zip(&self.copy_buffer) {
                th.regs[dst as usize] = v;
            }
        }
        th.block = e.target;
        th.pc = 0;
    }

    fn run_thread(&mut self, t: usize) -> Result<(), Verdict> {
        let program = self.program;
        loop {
            let th = &mut self.threads[t];
            let inst = &program.blocks[th.block as usize].insts[th.pc as usize];
            th.pc += 1;
            self.steps += 1;
            self.cost += u64::from(inst.cost);
            if self.steps > self.limits.block_step_budget {
                return Err(self.verdict(
                    t,
                    inst,
                    Fault::StepBudget {
                        budget: self.limits.block_step_budget,
                    },
                ));
            }
            let r = |reg: Reg| th.regs[reg as usize];
            let value = match &inst.op {
                Op::Int { op, bits, a, b } => int_op(*op, *bits, r(*a), r(*b)),
                Op::Float { op, width, a, b } => float_op(*op, *width, r(*a), r(*b)),
                Op::FloatUnary { f, width, a } => float_fn(*f, *width, r(*a)),
                Op::Fma { width, a, b, c } => match width {
                    FloatWidth::F32 => {
                        u64::from(f32b(r(*a)).mul_add(f32b(r(*b)), f32b(r(*c))).to_bits())
                    }
                    FloatWidth::F64 => f64::from_bits(r(*a))
                        .mul_add(f64::from_bits(r(*b)), f64::from_bits(r(*c)))
                        .to_bits(),
                },
                Op::IntAbs { bits, a } => {
                    (sign_extend(r(*a), *bits).wrapping_abs() as u64) & mask(*bits)
                }
                Op::ICmp { pred, bits, a, b } => u64::from(icmp(*pred, *bits, r(*a), r(*b))),
                Op::FCmp { pred, width, a, b } => u64::from(fcmp(*pred, *width, r(*a), r(*b))),
                Op::Cast {
                    cast,
                    from_bits,
                    to_bits,
                    a,
                } => cast_value(*cast, *from_bits, *to_bits, r(*a)),
                Op::Select { cond, a, b } => {
                    if r(*cond) & 1 == 1 {
                        r(*a)
                    } else {
                        r(*b)
                    }
                }
                Op::Gep {
                    base,
                    offset,
                    terms,
                } => {
                    let mut p = r(*base).wrapping_add(*offset as u64);
                    for &(idx, bits, scale) in terms {
                        p = p.wrapping_add(sign_extend(r(idx), bits).wrapping_mul(scale) as u64);
                    }
                    p
                }
                Op::Special(s) => u64::from(self.special(t, *s)),
                Op::Load { ptr, bytes } => {
                    let p = r(*ptr);
                    self.load(t, inst, p, *bytes)?
                }
                Op::Store { ptr, value, bytes } => {
                    let (p, v) = (r(*ptr), r(*value));
                    self.store(t, inst, p, v, *bytes)?;
                    continue;
                }
                Op::IntUnary { .. }
                | Op::Prmt { .. }
                | Op::VecLoad { .. }
                | Op::VecStore { .. } => {
                    self.run_rare(t, inst)?;
                    continue;
                }
                Op::AtomicRmw {
                    op,
                    ptr,
                    value,
                    bytes,
                } => {
                    let (p, v) = (r(*ptr), r(*value));
                    self.atomic(t, inst, p, *bytes, |old| rmw(*op, *bytes, old, v))?
                }
                Op::CmpXchg {
                    ptr,
                    expected,
                    new,
                    bytes,
                } => {
                    let (p, e, n) = (r(*ptr), r(*expected), r(*new));
                    // The result is { old, success }; only `old` is modelled.
                    self.atomic(t, inst, p, *bytes, |old| if old == e { n } else { old })?
                }
                Op::Alloca { offset } => pointer::make(pointer::LOCAL, 0, *offset),
                Op::Barrier => {
                    self.threads[t].status = Status::AtBarrier;
                    return Ok(());
                }
                Op::Warp { .. } => {
                    // Executed with the rest of its warp (`resolve_warp_ops`).
                    let th = &mut self.threads[t];
                    th.pc -= 1;
                    th.status = Status::AtWarpOp;
                    self.steps -= 1;
                    self.cost -= u64::from(inst.cost);
                    return Ok(());
                }
                Op::Fence | Op::Nop => continue,
                Op::Br { edge } => {
                    let edge = *edge;
                    self.take_edge(t, edge);
                    continue;
                }
                Op::CondBr {
                    cond,
                    if_true,
                    if_false,
                } => {
                    let edge = if r(*cond) & 1 == 1 {
                        *if_true
                    } else {
                        *if_false
                    };
                    self.take_edge(t, edge);
                    continue;
                }
                Op::Switch {
                    value,
                    bits,
                    cases,
                    default,
                } => {
                    let v = r(*value) & mask(*bits);
                    let edge = cases
                        .iter()
                        .find(|(c, _)| *c == v)
                        .map_or(*default, |&(_, e)| e);
                    self.take_edge(t, edge);
                    continue;
                }
                Op::Ret => {
                    self.threads[t].status = Status::Exited;
                    return Ok(());
                }
                Op::Unreachable => return Err(self.verdict(t, inst, Fault::Unreachable)),
                Op::Unsupported(what) => {
                    return Err(self.verdict(t, inst, Fault::Unsupported { what: what.clone() }));
                }
            };
            self.threads[t].regs[inst.dst as usize] = value;
        }
    }

    /// Instructions that kernels seldom execute, with one call site in the
    /// interpreter loop so they do not weigh on its code.
    #[inline(never)]
    fn run_rare(&mut self, t: usize, inst: &Inst) -> Result<(), Verdict> {
        let r = |reg: Reg| self.threads[t].regs[reg as usize];
        let value = match &inst.op {
            Op::IntUnary { f, bits, a } => int_fn(*f, *bits, r(*a)),
            Op::Prmt { a, b, c } => prmt(r(*a), r(*b), r(*c)),
            Op::VecLoad {
                ptr,
                elem_bytes,
                lanes,
            } => return self.load_vector(t, inst, r(*ptr), *elem_bytes, *lanes),
            Op::VecStore {
                ptr,
                value,
                elem_bytes,
                lanes,
            } => return self.store_vector(t, inst, r(*ptr), *value, *elem_bytes, *lanes),
            _ => return Ok(()),
        };
        self.threads[t].regs[inst.dst as usize] = value;
        Ok(())
    }

    /// Executes the warp-collective instructions that threads wait at, one
    /// warp at a time: the waiting threads of a warp are its active lanes.
    fn resolve_warp_ops(&mut self) -> Result<(), Verdict> {
        let program = self.program;
        for warp_start in (0..self.threads.len()).step_by(32) {
            let lanes: Vec<usize> = (warp_start..(warp_start + 32).min(self.threads.len()))
                .filter(|&t| self.threads[t].status == Status::AtWarpOp)
                .collect();
            let Some(&first) = lanes.first() else {
                continue;
            };
            let at = |t: usize| (self.threads[t].block, self.threads[t].pc);
            let inst = &program.blocks[at(first).0 as usize].insts[at(first).1 as usize];
            if lanes.iter().any(|&t| at(t) != at(first)) {
                let what =
                    "threads of one warp at different warp-collective instructions".to_string();
                return Err(self.verdict(first, inst, Fault::Unsupported { what }));
            }
            let Op::Warp { op, args } = &inst.op else {
                unreachable!("threads wait only at warp operations")
            };
            let active: u32 = lanes
                .iter()
                .map(|&t| 1u32 << (t % 32))
                .fold(0, |a, b| a | b);
            let arg = |t: usize, i: usize| self.threads[t].regs[args[i] as usize];
            let results: Vec<u64> = lanes
                .iter()
                .map(|&t| {
                    let lane = (t % 32) as u32;
                    let value_of = |l: u32| {
                        let src = warp_start + l as usize;
                        if active & (1 << l) != 0 {
                            arg(src, 1)
                        } else {
                            arg(t, 1)
                        }
                    };
                    match op {
                        WarpOp::ShflIdx | WarpOp::ShflUp | WarpOp::ShflDown | WarpOp::ShflBfly => {
                            let (b, c) = (arg(t, 2) as u32, arg(t, 3) as u32);
                            let segmask = (c >> 8) & 0x1f;
                            let max_lane = (lane & segmask) | (c & 0x1f & !segmask);
                            let min_lane = lane & segmask;
                            let (j, ok) = match op {
                                WarpOp::ShflUp => {
                                    (lane.wrapping_sub(b), lane >= b && lane - b >= max_lane)
                                }
                                WarpOp::ShflDown => (
                                    lane.wrapping_add(b),
                                    lane.checked_add(b).is_some_and(|j| j <= max_lane),
                                ),
                                WarpOp::ShflBfly => (lane ^ b, (lane ^ b) <= max_lane),
                                _ => (
                                    min_lane | (b & !segmask),
                                    (min_lane | (b & !segmask)) <= max_lane,
                                ),
                            };
                            value_of(if ok && j < 32 { j } else { lane })
                        }
                        WarpOp::VoteAll | WarpOp::VoteAny | WarpOp::VoteUni | WarpOp::Ballot => {
                            let ballot: u32 = lanes
                                .iter()
                                .filter(|&&u| arg(u, 1) & 1 == 1)
                                .map(|&u| 1u32 << (u % 32))
                                .fold(0, |a, b| a | b)
                                & arg(t, 0) as u32;
                            let members = active & arg(t, 0) as u32;
                            u64::from(match op {
                                WarpOp::VoteAll => u32::from(ballot == members),
                                WarpOp::VoteAny => u32::from(ballot != 0),
                                WarpOp::VoteUni => u32::from(ballot == 0 || ballot == members),
                                _ => ballot,
                            })
                        }
                        WarpOp::ActiveMask => u64::from(active),
                    }
                })
                .collect();
            for (&t, value) in lanes.iter().zip(results) {
                let th = &mut self.threads[t];
                th.regs[inst.dst as usize] = value;
                th.pc += 1;
                th.status = Status::Running;
                self.steps += 1;
                self.cost += u64::from(inst.cost);
            }
        }
        Ok(())
    }

    fn special(&self, t: usize, s: SpecialReg) -> u32 {
        let tid = self.threads[t].tid;
        let (b, g, c) = (self.dims.block, self.dims.grid, self.cta);
        match s {
            SpecialReg::TidX => tid[0],
            SpecialReg::TidY => tid[1],
            SpecialReg::TidZ => tid[2],
            SpecialReg::NtidX => b[0],
            SpecialReg::NtidY => b[1],
            SpecialReg::NtidZ => b[2],
            SpecialReg::CtaidX => c[0],
            SpecialReg::CtaidY => c[1],
            SpecialReg::CtaidZ => c[2],
            SpecialReg::NctaidX => g[0],
            SpecialReg::NctaidY => g[1],
            SpecialReg::NctaidZ => g[2],
            SpecialReg::WarpSize => 32,
            SpecialReg::LaneId => (t as u32) % 32,
        }
    }

    fn out_of_bounds(&self, t: usize, inst: &Inst, p: u64, bytes: u32) -> Verdict {
        let (space, index, offset) = pointer::split(p);
        self.verdict(
            t,
            inst,
            Fault::OutOfBounds {
                space: pointer::space_name(space),
                buffer: index,
                offset,
                bytes,
            },
        )
    }

    /// A plain store to global memory (one call from the interpreter loop).
    #[inline(never)]
    fn store_global(
        &self,
        t: usize,
        inst: &Inst,
        p: u64,
        v: u64,
        bytes: u32,
    ) -> Result<(), Verdict> {
        let (_, index, offset) = pointer::split(p);
        if !self.memory.write(index, offset, bytes, v) {
            return Err(self.out_of_bounds(t, inst, p, bytes));
        }
        self.claim_global(t, inst, index, offset, bytes)
    }

    /// Records this block as the writer of global bytes (a plain store);
    /// a verdict if another block wrote any of them in this launch.
    fn claim_global(
        &self,
        t: usize,
        inst: &Inst,
        index: usize,
        offset: u64,
        bytes: u32,
    ) -> Result<(), Verdict> {
        self.writers
            .claim(index, offset, bytes, self.writer)
            .map_err(|other| {
                let fault = Fault::GlobalRace {
                    buffer: index,
                    offset,
                    bytes,
                    other_block: cta_of(self.dims, other as usize - 1),
                };
                self.verdict(t, inst, fault)
            })
    }

    /// Checks a shared access against the shadow and records it.
    fn track_shared(
        &mut self,
        t: usize,
        inst: &Inst,
        offset: usize,
        bytes: u32,
        write: bool,
    ) -> Result<(), Verdict> {
        let me = t as u32;
        for i in offset..offset + bytes as usize {
            let s = self.shadow[i];
            let conflict = if write {
                (s.write_epoch == self.epoch && s.writer != me)
                    || (s.read_epoch == self.epoch && s.reader != me)
            } else {
                s.write_epoch == self.epoch && s.writer != me
            };
            if conflict {
                let other = if s.write_epoch == self.epoch && s.writer != me {
                    s.writer
                } else {
                    s.reader
                };
                let other_thread = (other < MANY).then(|| self.threads[other as usize].tid);
                return Err(self.verdict(
                    t,
                    inst,
                    Fault::SharedRace {
                        offset: i as u64,
                        other_thread,
                        write,
                    },
                ));
            }
            if !write && !s.written {
                return Err(self.verdict(t, inst, Fault::UninitializedShared { offset: i as u64 }));
            }
            let s = &mut self.shadow[i];
            if write {
                s.written = true;
                s.write_epoch = self.epoch;
                s.writer = me;
            } else if s.read_epoch != self.epoch {
                s.read_epoch = self.epoch;
                s.reader = me;
            } else if s.reader != me {
                s.reader = MANY;
            }
        }
        Ok(())
    }

    fn load(&mut self, t: usize, inst: &Inst, p: u64, bytes: u32) -> Result<u64, Verdict> {
        let (space, index, offset) = pointer::split(p);
        self.cost += cost::memory_weight(space);
        let end = offset + u64::from(bytes);
        let value = match space {
            pointer::GLOBAL => self.memory.read(index, offset, bytes),
            pointer::SHARED if end <= self.shared.len() as u64 => {
                self.track_shared(t, inst, offset as usize, bytes, false)?;
                Some(read_le(&self.shared[offset as usize..end as usize]))
            }
            pointer::LOCAL if end <= self.threads[t].local.len() as u64 => Some(read_le(
                &self.threads[t].local[offset as usize..end as usize],
            )),
            pointer::CONSTANT => self
                .program
                .constant_globals
                .get(index)
                .filter(|g| end <= g.len() as u64)
                .map(|g| read_le(&g[offset as usize..end as usize])),
            _ => None,
        };
        value.ok_or_else(|| self.out_of_bounds(t, inst, p, bytes))
    }

    fn store(&mut self, t: usize, inst: &Inst, p: u64, v: u64, bytes: u32) -> Result<(), Verdict> {
        let (space, _, offset) = pointer::split(p);
        self.cost += cost::memory_weight(space);
        let end = offset + u64::from(bytes);
        let ok = match space {
            pointer::GLOBAL => return self.store_global(t, inst, p, v, bytes),
            pointer::SHARED if end <= self.shared.len() as u64 => {
                self.track_shared(t, inst, offset as usize, bytes, true)?;
                write_le(&mut self.shared[offset as usize..end as usize], v);
                true
            }
            pointer::LOCAL if end <= self.threads[t].local.len() as u64 => {
                write_le(&mut self.threads[t].local[offset as usize..end as usize], v);
                true
            }
            _ => false,
        };
        if ok {
            Ok(())
        } else {
            Err(self.out_of_bounds(t, inst, p, bytes))
        }
    }

    /// Whether `bytes` bytes at `offset` of the space's region `index` exist.
    fn accessible(&self, t: usize, space: u8, index: usize, offset: u64, bytes: u64) -> bool {
        let Some(end) = offset.checked_add(bytes) else {
            return false;
        };
        match space {
            pointer::GLOBAL => {
                u32::try_from(bytes).is_ok_and(|bytes| self.memory.in_bounds(index, offset, bytes))
            }
            pointer::SHARED => end <= self.shared.len() as u64,
            pointer::LOCAL => end <= self.threads[t].local.len() as u64,
            pointer::CONSTANT => self
                .program
                .constant_globals
                .get(index)
                .is_some_and(|g| end <= g.len() as u64),
            _ => false,
        }
    }

    /// A vector load: the whole access is checked once (bounds, and the
    /// shared shadow for every byte), then each element is read.
    fn load_vector(
        &mut self,
        t: usize,
        inst: &Inst,
        p: u64,
        elem_bytes: u32,
        lanes: u32,
    ) -> Result<(), Verdict> {
        let (space, index, offset) = pointer::split(p);
        self.cost += cost::memory_weight(space);
        let total = elem_bytes.saturating_mul(lanes);
        if !self.accessible(t, space, index, offset, u64::from(total)) {
            return Err(self.out_of_bounds(t, inst, p, total));
        }
        if space == pointer::SHARED {
            self.track_shared(t, inst, offset as usize, total, false)?;
        }
        for lane in 0..lanes {
            let at = (offset + u64::from(lane * elem_bytes)) as usize;
            let range = at..at + elem_bytes as usize;
            let value = match space {
                pointer::GLOBAL => self.memory.read(index, at as u64, elem_bytes),
                pointer::SHARED => self.shared.get(range).map(read_le),
                pointer::LOCAL => self.threads[t].local.get(range).map(read_le),
                _ => self
                    .program
                    .constant_globals
                    .get(index)
                    .and_then(|g| g.get(range))
                    .map(read_le),
            };
            // In bounds: checked above for the whole access.
            self.threads[t].regs[(inst.dst + lane) as usize] = value.unwrap_or(0);
        }
        Ok(())
    }

    /// A vector store of registers `value..value + lanes`, checked as one access.
    fn store_vector(
        &mut self,
        t: usize,
        inst: &Inst,
        p: u64,
        value: Reg,
        elem_bytes: u32,
        lanes: u32,
    ) -> Result<(), Verdict> {
        let (space, index, offset) = pointer::split(p);
        self.cost += cost::memory_weight(space);
        let total = elem_bytes.saturating_mul(lanes);
        if space == pointer::CONSTANT || !self.accessible(t, space, index, offset, u64::from(total))
        {
            return Err(self.out_of_bounds(t, inst, p, total));
        }
        match space {
            pointer::SHARED => self.track_shared(t, inst, offset as usize, total, true)?,
            pointer::GLOBAL => self.claim_global(t, inst, index, offset, total)?,
            _ => {}
        }
        for lane in 0..lanes {
            let v = self.threads[t].regs[(value + lane) as usize];
            let at = (offset + u64::from(lane * elem_bytes)) as usize;
            let range = at..at + elem_bytes as usize;
            match space {
                pointer::GLOBAL => {
                    self.memory.write(index, at as u64, elem_bytes, v);
                }
                pointer::SHARED => write_le(&mut self.shared[range], v),
                _ => write_le(&mut self.threads[t].local[range], v),
            }
        }
        Ok(())
    }

    /// Read-modify-write; atomics never race, so shared ones skip the shadow
    /// checks (but mark the bytes written).
    fn atomic(
        &mut self,
        t: usize,
        inst: &Inst,
        p: u64,
        bytes: u32,
        f: impl Fn(u64) -> u64,
    ) -> Result<u64, Verdict> {
        let (space, index, offset) = pointer::split(p);
        self.cost += cost::memory_weight(space);
        let end = offset + u64::from(bytes);
        let old = match space {
            pointer::GLOBAL => self.memory.update(index, offset, bytes, &f),
            pointer::SHARED if end <= self.shared.len() as u64 => {
                let range = offset as usize..end as usize;
                let old = read_le(&self.shared[range.clone()]);
                write_le(&mut self.shared[range.clone()], f(old));
                for s in &mut self.shadow[range] {
                    s.written = true;
                }
                Some(old)
            }
            pointer::LOCAL if end <= self.threads[t].local.len() as u64 => {
                let range = offset as usize..end as usize;
                let local = &mut self.threads[t].local;
                let old = read_le(&local[range.clone()]);
                write_le(&mut local[range], f(old));
                Some(old)
            }
            _ => None,
        };
        old.ok_or_else(|| self.out_of_bounds(t, inst, p, bytes))
    }
}

/// The CTA coordinates of the block with linear index `b`.
fn cta_of(dims: &LaunchDims, b: usize) -> [u32; 3] {
    // In 64 bits: a grid's x * y can pass u32::MAX.
    let (gx, gy) = (
        u64::from(dims.grid[0].max(1)),
        u64::from(dims.grid[1].max(1)),
    );
    let b = b as u64;
    [
        (b % gx) as u32,
        ((b / gx) % gy) as u32,
        (b / (gx * gy)) as u32,
    ]
}

fn read_le(bytes: &[u8]) -> u64 {
    let mut buf = [0u8; 8];
    buf[..bytes.len()].copy_from_slice(bytes);
    u64::from_le_bytes(buf)
}

fn write_le(dst: &mut [u8], v: u64) {
    let n = dst.len();
    dst.copy_from_slice(&v.to_le_bytes()[..n]);
}

fn f32b(v: u64) -> f32 {
    f32::from_bits(v as u32)
}

/// Integer semantics at `bits` width. Cases LLVM leaves undefined get PTX's
/// answers: division by zero gives all ones (unsigned) or -1 / the dividend,
/// shifts by the width or more give zero (or the sign for `ashr`).
fn int_op(op: IntOp, bits: u32, a: u64, b: u64) -> u64 {
    let m = mask(bits);
    let (a, b) = (a & m, b & m);
    let (sa, sb) = (sign_extend(a, bits), sign_extend(b, bits));
    let r = match op {
        IntOp::Add => a.wrapping_add(b),
        IntOp::Sub => a.wrapping_sub(b),
        IntOp::Mul => a.wrapping_mul(b),
        IntOp::UDiv => a.checked_div(b).unwrap_or(m),
        IntOp::SDiv => {
            if sb == 0 {
                m
            } else {
                sa.wrapping_div(sb) as u64
            }
        }
        IntOp::URem => a.checked_rem(b).unwrap_or(a),
        IntOp::SRem => {
            if sb == 0 {
                a
            } else {
                sa.wrapping_rem(sb) as u64
            }
        }
        IntOp::Shl => {
            if b >= u64::from(bits) {
                0
            } else {
                a << b
            }
        }
        IntOp::LShr => {
            if b >= u64::from(bits) {
                0
            } else {
                a >> b
            }
        }
        IntOp::AShr => (sa >> b.min(u64::from(bits) - 1)) as u64,
        IntOp::And => a & b,
        IntOp::Or => a | b,
        IntOp::Xor => a ^ b,
        IntOp::SMax => sa.max(sb) as u64,
        IntOp::SMin => sa.min(sb) as u64,
        IntOp::UMax => a.max(b),
        IntOp::UMin => a.min(b),
        IntOp::MulHiS
        | IntOp::MulHiU
        | IntOp::Mul24S
        | IntOp::Mul24U
        | IntOp::SAddSat
        | IntOp::SSubSat
        | IntOp::UAddSat
        | IntOp::USubSat => rare_int_op(op, bits, a, b),
    };
    r & m
}

/// The integer operations intrinsics bring, kept out of the interpreter
/// loop's inlined code. Operands are already masked to `bits`.
#[inline(never)]
fn rare_int_op(op: IntOp, bits: u32, a: u64, b: u64) -> u64 {
    let (sa, sb) = (sign_extend(a, bits), sign_extend(b, bits));
    let m = mask(bits);
    match op {
        IntOp::MulHiS => ((i128::from(sa) * i128::from(sb)) >> bits) as u64,
        IntOp::MulHiU => ((u128::from(a) * u128::from(b)) >> bits) as u64,
        IntOp::Mul24S => (sign_extend(a & 0xff_ffff, 24) * sign_extend(b & 0xff_ffff, 24)) as u64,
        IntOp::Mul24U => (a & 0xff_ffff) * (b & 0xff_ffff),
        IntOp::SAddSat => saturate_signed(i128::from(sa) + i128::from(sb), bits),
        IntOp::SSubSat => saturate_signed(i128::from(sa) - i128::from(sb), bits),
        IntOp::UAddSat => a.checked_add(b).filter(|&s| s <= m).unwrap_or(m),
        IntOp::USubSat => a.saturating_sub(b),
        // Never passed here (`int_op` computes the others).
        _ => 0,
    }
}

/// `v` clamped to the signed range of `bits` bits.
fn saturate_signed(v: i128, bits: u32) -> u64 {
    let max = i128::from(mask(bits) >> 1);
    v.clamp(-max - 1, max) as u64
}

fn int_fn(f: IntFn, bits: u32, a: u64) -> u64 {
    let a = a & mask(bits);
    // Widths above 64 never reach here (`ir::lower` refuses them).
    let unused = 64 - bits.min(64);
    u64::from(match f {
        IntFn::Popcount => a.count_ones(),
        IntFn::Clz => a.leading_zeros() - unused,
        IntFn::Ctz => a.trailing_zeros().min(bits),
        IntFn::Bswap => return a.swap_bytes() >> unused,
        IntFn::BitReverse => return a.reverse_bits() >> unused,
    })
}

/// PTX `prmt.b32` in its default mode: result byte i is byte `c[4i+2:4i]`
/// of the 8 bytes `b:a`, or that byte's sign replicated if `c[4i+3]` is set.
fn prmt(a: u64, b: u64, c: u64) -> u64 {
    let source = (b << 32) | (a & 0xffff_ffff);
    (0..4).fold(0, |out, i| {
        let select = (c >> (4 * i)) & 0xf;
        let byte = (source >> (8 * (select & 7))) & 0xff;
        let byte = if select & 8 == 0 {
            byte
        } else if byte & 0x80 != 0 {
            0xff
        } else {
            0
        };
        out | (byte << (8 * i))
    })
}

/// `$a` and `$raw_b` are the operands' registers (`$raw_b` is an integer
/// for `PowI`).
macro_rules! apply_float_op {
    ($op:expr, $x:expr, $y:expr, $width:expr, $a:expr, $raw_b:expr) => {
        match $op {
            FloatOp::Add => $x + $y,
            FloatOp::Sub => $x - $y,
            FloatOp::Mul => $x * $y,
            FloatOp::Div => $x / $y,
            FloatOp::Rem => $x % $y,
            FloatOp::Min => $x.min($y),
            FloatOp::Max => $x.max($y),
            FloatOp::CopySign => $x.copysign($y),
            FloatOp::Pow => $x.powf($y),
            FloatOp::Minimum
            | FloatOp::Maximum
            | FloatOp::PowI
            | FloatOp::Atan2
            | FloatOp::Hypot => return rare_float_op($op, $width, $a, $raw_b),
        }
    };
}

/// The float operations intrinsics bring, kept out of the interpreter
/// loop's inlined code.
macro_rules! apply_rare_float_op {
    ($op:expr, $x:expr, $y:expr, $width:expr, $a:expr, $raw_b:expr) => {
        match $op {
            // NaN in, NaN out (a quiet NaN from the sum); -0 orders below +0.
            FloatOp::Minimum => {
                if $x.is_nan() || $y.is_nan() {
                    $x + $y
                } else if $x == $y {
                    if $x.is_sign_negative() {
                        $x
                    } else {
                        $y
                    }
                } else {
                    $x.min($y)
                }
            }
            FloatOp::Maximum => {
                if $x.is_nan() || $y.is_nan() {
                    $x + $y
                } else if $x == $y {
                    if $x.is_sign_positive() {
                        $x
                    } else {
                        $y
                    }
                } else {
                    $x.max($y)
                }
            }
            FloatOp::PowI => $x.powi(sign_extend($raw_b, 32) as i32),
            FloatOp::Atan2 => $x.atan2($y),
            FloatOp::Hypot => $x.hypot($y),
            // Never passed here (`float_op` computes the others).
            _ => $x,
        }
    };
}

fn float_op(op: FloatOp, width: FloatWidth, a: u64, b: u64) -> u64 {
    match width {
        FloatWidth::F32 => u64::from(apply_float_op!(op, f32b(a), f32b(b), width, a, b).to_bits()),
        FloatWidth::F64 => {
            apply_float_op!(op, f64::from_bits(a), f64::from_bits(b), width, a, b).to_bits()
        }
    }
}

#[inline(never)]
fn rare_float_op(op: FloatOp, width: FloatWidth, a: u64, b: u64) -> u64 {
    match width {
        FloatWidth::F32 => {
            u64::from(apply_rare_float_op!(op, f32b(a), f32b(b), width, a, b).to_bits())
        }
        FloatWidth::F64 => {
            apply_rare_float_op!(op, f64::from_bits(a), f64::from_bits(b), width, a, b).to_bits()
        }
    }
}

macro_rules! apply_float_fn {
    ($f:expr, $x:expr, $width:expr, $a:expr) => {
        match $f {
            FloatFn::Neg => -$x,
            FloatFn::Abs => $x.abs(),
            FloatFn::Sqrt => $x.sqrt(),
            FloatFn::Exp => $x.exp(),
            FloatFn::Exp2 => $x.exp2(),
            FloatFn::Log => $x.ln(),
            FloatFn::Log2 => $x.log2(),
            FloatFn::Sin => $x.sin(),
            FloatFn::Cos => $x.cos(),
            FloatFn::Floor => $x.floor(),
            FloatFn::Ceil => $x.ceil(),
            FloatFn::Trunc => $x.trunc(),
            FloatFn::Round => $x.round(),
            FloatFn::Rsqrt => 1.0 / $x.sqrt(),
            FloatFn::RoundEven
            | FloatFn::Saturate
            | FloatFn::Log10
            | FloatFn::Exp10
            | FloatFn::Tan
            | FloatFn::Asin
            | FloatFn::Acos
            | FloatFn::Atan
            | FloatFn::Sinh
            | FloatFn::Cosh
            | FloatFn::Tanh
            | FloatFn::Cbrt
            | FloatFn::Expm1
            | FloatFn::Log1p => return rare_float_fn($f, $width, $a),
        }
    };
}

/// The float functions intrinsics bring, kept out of the interpreter loop's
/// inlined code.
macro_rules! apply_rare_float_fn {
    ($f:expr, $x:expr, $t:ty, $width:expr, $a:expr) => {
        match $f {
            FloatFn::RoundEven => $x.round_ties_even(),
            FloatFn::Saturate => {
                if $x > 0.0 {
                    $x.min(1.0)
                } else {
                    0.0
                }
            }
            FloatFn::Log10 => $x.log10(),
            FloatFn::Exp10 => <$t>::powf(10.0, $x),
            FloatFn::Tan => $x.tan(),
            FloatFn::Asin => $x.asin(),
            FloatFn::Acos => $x.acos(),
            FloatFn::Atan => $x.atan(),
            FloatFn::Sinh => $x.sinh(),
            FloatFn::Cosh => $x.cosh(),
            FloatFn::Tanh => $x.tanh(),
            FloatFn::Cbrt => $x.cbrt(),
            FloatFn::Expm1 => $x.exp_m1(),
            FloatFn::Log1p => $x.ln_1p(),
            // Never passed here (`float_fn` computes the others).
            _ => $x,
        }
    };
}

fn float_fn(f: FloatFn, width: FloatWidth, a: u64) -> u64 {
    match width {
        FloatWidth::F32 => u64::from(apply_float_fn!(f, f32b(a), width, a).to_bits()),
        FloatWidth::F64 => apply_float_fn!(f, f64::from_bits(a), width, a).to_bits(),
    }
}

#[inline(never)]
fn rare_float_fn(f: FloatFn, width: FloatWidth, a: u64) -> u64 {
    match width {
        FloatWidth::F32 => u64::from(apply_rare_float_fn!(f, f32b(a), f32, width, a).to_bits()),
        FloatWidth::F64 => apply_rare_float_fn!(f, f64::from_bits(a), f64, width, a).to_bits(),
    }
}

fn icmp(pred: ICmp, bits: u32, a: u64, b: u64) -> bool {
    let m = mask(bits);
    let (a, b) = (a & m, b & m);
    let (sa, sb) = (sign_extend(a, bits), sign_extend(b, bits));
    match pred {
        ICmp::Eq => a == b,
        ICmp::Ne => a != b,
        ICmp::Ugt => a > b,
        ICmp::Uge => a >= b,
        ICmp::Ult => a < b,
        ICmp::Ule => a <= b,
        ICmp::Sgt => sa > sb,
        ICmp::Sge => sa >= sb,
        ICmp::Slt => sa < sb,
        ICmp::Sle => sa <= sb,
    }
}

fn fcmp(pred: FCmp, width: FloatWidth, a: u64, b: u64) -> bool {
    let (x, y) = match width {
        FloatWidth::F32 => (f64::from(f32b(a)), f64::from(f32b(b))),
        FloatWidth::F64 => (f64::from_bits(a), f64::from_bits(b)),
    };
    if x.is_nan() || y.is_nan() {
        return pred.unordered_result;
    }
    match pred.cond {
        FCond::False => false,
        FCond::True | FCond::Ord => true,
        FCond::Eq => x == y,
        FCond::Ne => x != y,
        FCond::Lt => x < y,
        FCond::Le => x <= y,
        FCond::Gt => x > y,
        FCond::Ge => x >= y,
    }
}

fn to_float(v: f64, bits: u32) -> u64 {
    if bits == 32 {
        u64::from((v as f32).to_bits())
    } else {
        v.to_bits()
    }
}

fn from_float(v: u64, bits: u32) -> f64 {
    if bits == 32 {
        f64::from(f32b(v))
    } else {
        f64::from_bits(v)
    }
}

/// Float-to-integer conversions saturate and map NaN to 0, as PTX's `cvt.rzi` does.
fn cast_value(cast: Cast, from_bits: u32, to_bits: u32, a: u64) -> u64 {
    let m = mask(to_bits);
    match cast {
        Cast::Trunc | Cast::ZExt | Cast::Bits => a & m,
        Cast::SExt => (sign_extend(a, from_bits) as u64) & m,
        Cast::FpToSi => {
            let v = from_float(a, from_bits);
            let lo = -(2f64.powi(to_bits as i32 - 1));
            (v.clamp(lo, -lo - 1.0) as i64 as u64) & m
        }
        Cast::FpToUi => {
            let v = from_float(a, from_bits);
            (v.clamp(0.0, m as f64) as u64) & m
        }
        Cast::UiToFp => {
            if to_bits == 32 {
                u64::from((a as f32).to_bits())
            } else {
                (a as f64).to_bits()
            }
        }
        Cast::SiToFp => {
            let s = sign_extend(a, from_bits);
            if to_bits == 32 {
                u64::from((s as f32).to_bits())
            } else {
                (s as f64).to_bits()
            }
        }
        Cast::FpTrunc | Cast::FpExt => to_float(from_float(a, from_bits), to_bits),
    }
}

fn rmw(op: RmwOp, bytes: u32, old: u64, v: u64) -> u64 {
    let bits = bytes * 8;
    match op {
        RmwOp::Xchg => v,
        RmwOp::Add => int_op(IntOp::Add, bits, old, v),
        RmwOp::Sub => int_op(IntOp::Sub, bits, old, v),
        RmwOp::And => old & v,
        RmwOp::Or => old | v,
        RmwOp::Xor => old ^ v,
        RmwOp::Max => int_op(IntOp::SMax, bits, old, v),
        RmwOp::Min => int_op(IntOp::SMin, bits, old, v),
        RmwOp::UMax => int_op(IntOp::UMax, bits, old, v),
        RmwOp::UMin => int_op(IntOp::UMin, bits, old, v),
        RmwOp::FAdd => float_op(
            FloatOp::Add,
            if bits == 32 {
                FloatWidth::F32
            } else {
                FloatWidth::F64
            },
            old,
            v,
        ),
    }
}
