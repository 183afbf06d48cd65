//! What a guarded build guards: every global, generic and shared access
//! of the chosen kernels (with its site: instruction, block, source line,
//! the parameter its pointer derives from) and every loop header, found
//! before line tables are stripped and before the runtime is linked in.

use super::super::dom::DomTree;
use super::super::live::LiveFunction;
use super::super::llvm;
use super::aligned::{gep_offset_alignment, BUFFER_ALIGNMENT, NO_OFFSET};
use super::in_bounds;
use super::repeated::Checked;
use super::{is_runtime, BlockBounds, GuardSite, SiteKind, SCRATCH_BYTES, SHARED_SCRATCH_BYTES};
use inkwell::module::Module;
use inkwell::values::AsValueRef;
use std::borrow::Cow;
use std::collections::BTreeMap;

/// Bits of a site id that number the sites within one function
/// (`GuardSite::id`); the bits above name the function's space.
const LOCAL_SITE_BITS: u32 = 20;
/// The id of a site past the last one a function's space can number: its
/// fault is recorded without its location.
const UNNAMED_SITE: u32 = u32::MAX;

/// Numbers sites a function at a time (`GuardSite::id`): space 0 holds
/// every function that is not a chosen kernel (edits never change them),
/// space 1 + i the `i`th chosen kernel, so that an edit renumbers only the
/// sites of the kernel it edits, and a pipeline's other kernels keep their
/// guarded PTX (assembled a kernel at a time, `cuda::parts`).
#[derive(Default)]
struct SiteIds(BTreeMap<u32, u32>);

impl SiteIds {
    fn next(&mut self, space: u32) -> u32 {
        let count = self.0.entry(space).or_insert(0);
        let id = match *count < 1 << LOCAL_SITE_BITS {
            true => (space << LOCAL_SITE_BITS) | *count,
            false => UNNAMED_SITE,
        };
        *count += 1;
        id
    }
}

/// One access to guard: the instruction, its site, which operands are
/// pointers (with the byte count and alignment the check uses).
pub(super) struct Access {
    pub(super) inst: llvm::Value,
    pub(super) site: u32,
    pub(super) pointers: Vec<u32>,
    pub(super) bytes: u64,
    pub(super) align: u64,
    /// For a memory intrinsic: the operand holding its length.
    pub(super) length: Option<u32>,
    /// What every pointer this access may use is computed from, when the
    /// inline check can use its range (`inline_check.rs`).
    pub(super) base: Option<Base>,
    /// Proven aligned from its root (`aligned.rs`): only its range is tested.
    pub(super) aligned: bool,
    /// An earlier access (its index in the plan's) whose check covers this
    /// one's, whose guarded pointer it takes (`repeated.rs`).
    pub(super) reuses: Option<usize>,
    /// Proven aligned and inside its variable for every thread
    /// (`in_bounds.rs`): not checked at all.
    pub(super) in_bounds: bool,
}

impl Access {
    /// Whether it writes (`SiteKind::writes`).
    pub(super) fn writes(&self) -> bool {
        site_kind(self.inst).writes()
    }

    /// Whether it writes through a global or generic pointer.
    pub(super) fn writes_global(&self) -> bool {
        let destination = llvm::operand(self.inst, self.pointers[0]);
        self.writes()
            && matches!(
                llvm::pointer_address_space(llvm::type_of(destination)),
                0 | 1
            )
    }
}

/// The one root an access's pointer is computed from (through GEPs, casts,
/// phis and selects) whose range a guard can know without walking the
/// test's table at the access.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Base {
    /// A pointer parameter of a kernel (an entry point): it holds a test
    /// buffer's address, whose range is found once at the kernel's entry.
    KernelParameter { function: llvm::Value, index: u32 },
    /// One of the module's own defined global or shared variables: its
    /// range is a constant.
    Variable { global: llvm::Value, bytes: u64 },
}

pub(super) struct Loop {
    pub(super) site: u32,
    pub(super) header: llvm::Block,
    /// The blocks whose back edges reach the header.
    pub(super) latches: Vec<llvm::Block>,
}

pub(super) struct Loops {
    pub(super) function: llvm::Value,
    pub(super) loops: Vec<Loop>,
}

/// A `__syncthreads()` of a chosen kernel, checked for lanes that reach it
/// apart (`barriers.rs`) unless every lane of a warp is proven to reach it
/// together (`uniform.rs`).
pub(super) struct Barrier {
    pub(super) site: u32,
    pub(super) call: llvm::Value,
    pub(super) function: llvm::Value,
    pub(super) together: bool,
}

impl Barrier {
    pub(super) fn checked(&self) -> bool {
        !self.together
    }
}

pub(super) struct Plan {
    pub(super) sites: Vec<GuardSite>,
    pub(super) accesses: Vec<Access>,
    pub(super) loops: Vec<Loops>,
    pub(super) barriers: Vec<Barrier>,
    /// Accesses wider than the scratch, left unguarded.
    pub(super) too_wide: usize,
}

/// What `access_of` finds at an instruction.
enum Found {
    Guard(Access),
    TooWide,
    Nothing,
}

/// Finds what to guard, before line tables are stripped (the sites keep
/// their source lines) and before the runtime is linked in.
/// `blocks`: per part, the most threads its blocks have, where known.
pub(super) fn plan(
    module: &Module<'_>,
    parts: &[LiveFunction<'_>],
    loaded: &[super::super::Part],
    blocks: &[Option<BlockBounds>],
) -> Plan {
    let layout = llvm::DataLayout::of(module.as_mut_ptr());
    let kernels = llvm::kernel_functions(module.as_mut_ptr());
    let variables = variables(module, layout);
    let mut planner = Planner {
        parts,
        blocks,
        layout,
        ids: SiteIds::default(),
        plan: Plan {
            sites: Vec::new(),
            accesses: Vec::new(),
            loops: Vec::new(),
            barriers: Vec::new(),
            too_wide: 0,
        },
    };
    for f in module.get_functions() {
        let name = f.get_name().to_string_lossy().into_owned();
        if f.count_basic_blocks() == 0 || name.starts_with("llvm.") || is_runtime(&name) {
            continue;
        }
        planner.plan_accesses(f.as_value_ref(), kernels.contains(&name), &variables);
    }
    for (part, live) in loaded.iter().zip(parts) {
        planner.plan_loops_and_barriers(part, live.function());
    }
    planner.plan
}

/// The module's own defined global and shared variables: (variable, bytes,
/// alignment).
fn variables(module: &Module<'_>, layout: llvm::DataLayout) -> Vec<(llvm::Value, u64, u64)> {
    llvm::globals(module.as_mut_ptr())
        .into_iter()
        .filter(|g| {
            g.initializer.is_some()
                && matches!(g.address_space, 1 | 3)
                && !is_runtime(&llvm::value_name(g.value))
        })
        .map(|g| {
            (
                g.value,
                layout.alloc_size(g.value_type),
                u64::from(g.alignment),
            )
        })
        .collect()
}

/// The plan as `plan` builds it, with the numbering of its sites.
struct Planner<'p, 'd> {
    parts: &'p [LiveFunction<'d>],
    blocks: &'p [Option<BlockBounds>],
    layout: llvm::DataLayout,
    ids: SiteIds,
    plan: Plan,
}

impl Planner<'_, '_> {
    /// The site-id space of `function` (`SiteIds`).
    fn space_of(&self, function: llvm::Value) -> u32 {
        let highest_space = (1 << (32 - LOCAL_SITE_BITS)) - 1;
        self.parts
            .iter()
            .position(|p| p.function() == function)
            .map_or(0, |i| (i as u32 + 1).min(highest_space))
    }

    /// The site `id` of `inst`, in the block labelled `block`.
    fn site_of(
        &self,
        id: u32,
        inst: llvm::Value,
        block: String,
        kind: SiteKind,
        bytes: u64,
    ) -> GuardSite {
        let function = llvm::parent(inst)
            .map(|b| llvm::value_name(llvm::block_function(b)))
            .unwrap_or_default();
        let instruction = self
            .parts
            .iter()
            .find_map(|p| p.try_id_of(inst))
            .map(|id| id.0);
        GuardSite {
            id,
            kind,
            instruction,
            function,
            block,
            source: llvm::source_line(inst),
            bytes: bytes.min(u32::MAX as u64) as u32,
            argument: None,
        }
    }

    /// Adds every access of `function` a guard checks, with its site and
    /// the root its pointer is computed from.
    fn plan_accesses(
        &mut self,
        function: llvm::Value,
        is_kernel: bool,
        variables: &[(llvm::Value, u64, u64)],
    ) {
        let space = self.space_of(function);
        // A chosen kernel's tree kept since load, and its block bounds.
        let part = self.parts.iter().position(|p| p.function() == function);
        let dom = match part {
            Some(i) => Cow::Borrowed(self.parts[i].dom()),
            None => Cow::Owned(DomTree::of_function(function)),
        };
        let block_bounds = part.and_then(|i| self.blocks.get(i).copied().flatten());
        let mut checked = Checked::new(dom);
        for (index, block) in llvm::blocks(function).into_iter().enumerate() {
            let block_label = block_label(block, index);
            for inst in llvm::instructions(block) {
                let mut access = match access_of(inst, self.layout) {
                    Found::Guard(access) => access,
                    Found::TooWide => {
                        self.plan.too_wide += 1;
                        continue;
                    }
                    Found::Nothing => continue,
                };
                let kind = site_kind(inst);
                access.site = self.ids.next(space);
                let mut site =
                    self.site_of(access.site, inst, block_label.clone(), kind, access.bytes);
                let rooted = root_of(llvm::operand(inst, access.pointers[0]), self.layout);
                let root = rooted.map(|r| r.root);
                site.argument = root.and_then(|r| parameter_index(r, function));
                access.base = root.and_then(|r| match parameter_index(r, function) {
                    Some(index) if is_kernel && access.length.is_none() => {
                        Some(Base::KernelParameter { function, index })
                    }
                    None if access.length.is_none() => variables
                        .iter()
                        .find(|(g, _, _)| *g == r)
                        .map(|&(global, bytes, _)| Base::Variable { global, bytes }),
                    _ => None,
                });
                let root_alignment = match access.base {
                    Some(Base::KernelParameter { .. }) => BUFFER_ALIGNMENT,
                    Some(Base::Variable { global, .. }) => variables
                        .iter()
                        .find(|(g, _, _)| *g == global)
                        .map_or(1, |&(_, _, align)| align),
                    None => 1,
                };
                access.aligned =
                    rooted.is_some_and(|r| root_alignment.min(r.offset_alignment) >= access.align);
                access.in_bounds = match (access.base, block_bounds) {
                    (Some(Base::Variable { global, bytes }), Some(bounds)) => {
                        let pointer = llvm::operand(inst, access.pointers[0]);
                        access.aligned
                            && in_bounds::proven_inside(
                                pointer,
                                global,
                                bytes,
                                access.bytes,
                                bounds,
                                self.layout,
                            )
                    }
                    _ => false,
                };
                access.reuses = checked.covering(&access, index, self.plan.accesses.len());
                self.plan.sites.push(site);
                self.plan.accesses.push(access);
            }
        }
    }

    /// Adds the barriers and the loop headers of a chosen kernel.
    fn plan_loops_and_barriers(&mut self, part: &super::super::Part, function: llvm::Value) {
        let space = self.space_of(function);
        let blocks = llvm::blocks(function);
        let headers = loop_headers(part, &blocks);
        self.plan_barriers(function, &blocks, space);
        let mut loops = Loops {
            function,
            loops: Vec::new(),
        };
        for (h, latches) in headers {
            let first = llvm::instructions(blocks[h])
                .into_iter()
                .find(|&i| !llvm::is_phi(i))
                .expect("a block ends in a terminator");
            let site = self.ids.next(space);
            let guard_site = self.site_of(
                site,
                first,
                block_label(blocks[h], h),
                SiteKind::LoopHeader,
                0,
            );
            self.plan.sites.push(guard_site);
            loops.loops.push(Loop {
                site,
                header: blocks[h],
                latches,
            });
        }
        self.plan.loops.push(loops);
    }

    /// Adds `function`'s aligned barriers, each marked whether every lane
    /// of a warp is proven to reach it together.
    fn plan_barriers(&mut self, function: llvm::Value, blocks: &[llvm::Block], space: u32) {
        for (index, &block) in blocks.iter().enumerate() {
            for inst in llvm::instructions(block) {
                if llvm::is_call(inst)
                    && llvm::called_function(inst)
                        .is_some_and(|f| llvm::value_name(f) == super::ALIGNED_BARRIER)
                {
                    let id = self.ids.next(space);
                    self.plan.barriers.push(Barrier {
                        site: id,
                        call: inst,
                        function,
                        together: false,
                    });
                    let site =
                        self.site_of(id, inst, block_label(block, index), SiteKind::Barrier, 0);
                    self.plan.sites.push(site);
                }
            }
        }
        let calls: Vec<llvm::Value> = self
            .plan
            .barriers
            .iter()
            .filter(|b| b.function == function)
            .map(|b| b.call)
            .collect();
        let together = super::uniform::reached_together(function, &calls);
        for barrier in self
            .plan
            .barriers
            .iter_mut()
            .filter(|b| b.function == function)
        {
            barrier.together = together.contains(&barrier.call);
        }
    }
}

/// The loop headers of a function's `blocks`, each with its latches (the
/// blocks whose back edges reach it), by the header's index.
fn loop_headers(
    part: &super::super::Part,
    blocks: &[llvm::Block],
) -> Vec<(usize, Vec<llvm::Block>)> {
    let mut headers: Vec<(usize, Vec<llvm::Block>)> = Vec::new();
    for (b, &block) in blocks.iter().enumerate() {
        for succ in llvm::successors(block) {
            let h = blocks
                .iter()
                .position(|x| *x == succ)
                .expect("a successor is a block of the function");
            // A back edge: its target dominates its source.
            if part.dom.is_reachable(b) && part.dom.dominates(h, b) {
                match headers.iter_mut().find(|(x, _)| *x == h) {
                    Some((_, latches)) if !latches.contains(&block) => latches.push(block),
                    Some(_) => {}
                    None => headers.push((h, vec![block])),
                }
            }
        }
    }
    headers.sort_unstable_by_key(|(h, _)| *h);
    headers
}

/// What an access's pointer is computed from.
#[derive(Debug, Clone, Copy)]
pub(super) struct Rooted {
    pub(super) root: llvm::Value,
    /// The largest power of two every path's offset from the root is a
    /// multiple of (`aligned::gep_offset_alignment`, the least on the way).
    pub(super) offset_alignment: u64,
}

/// The one value `pointer` is computed from through GEPs, casts, phis and
/// selects, when every path leads to the same one; none when some path
/// goes through anything else (a load, an integer cast) or two roots meet.
pub(super) fn root_of(pointer: llvm::Value, layout: llvm::DataLayout) -> Option<Rooted> {
    use llvm_sys::LLVMOpcode::*;
    let mut root = None;
    let mut offset_alignment = NO_OFFSET;
    let mut seen = Vec::new();
    let mut work = vec![pointer];
    while let Some(v) = work.pop() {
        if seen.contains(&v) {
            continue;
        }
        // Bounded: pointer arithmetic is a short web; past this, no root.
        if seen.len() == 256 {
            return None;
        }
        seen.push(v);
        let opcode = if llvm::is_instruction(v) {
            Some(llvm::opcode(v))
        } else {
            llvm::const_expr_opcode(v)
        };
        match opcode {
            Some(LLVMGetElementPtr) => {
                offset_alignment = offset_alignment.min(gep_offset_alignment(v, layout));
                work.push(llvm::operand(v, 0))
            }
            Some(LLVMAddrSpaceCast | LLVMBitCast) => work.push(llvm::operand(v, 0)),
            Some(LLVMPHI) => work.extend((0..llvm::incoming_count(v)).map(|i| llvm::operand(v, i))),
            Some(LLVMSelect) => work.extend([llvm::operand(v, 1), llvm::operand(v, 2)]),
            _ if llvm::is_argument(v) || llvm::is_global_value(v) => match root {
                None => root = Some(v),
                Some(r) if r == v => {}
                Some(_) => return None,
            },
            _ => return None,
        }
    }
    root.map(|root| Rooted {
        root,
        offset_alignment,
    })
}

/// Which parameter of `function` `value` is.
fn parameter_index(value: llvm::Value, function: llvm::Value) -> Option<u32> {
    llvm::params(function)
        .iter()
        .position(|&p| p == value)
        .map(|i| i as u32)
}

/// The block's name as the simulator's verdicts give it.
fn block_label(block: llvm::Block, index: usize) -> String {
    let name = llvm::block_name(block);
    if name.is_empty() {
        format!("bb{index}")
    } else {
        name
    }
}

fn site_kind(inst: llvm::Value) -> SiteKind {
    use llvm_sys::LLVMOpcode::*;
    match llvm::opcode(inst) {
        LLVMLoad => SiteKind::Load,
        LLVMStore => SiteKind::Store,
        LLVMAtomicRMW | LLVMAtomicCmpXchg => SiteKind::Atomic,
        _ => SiteKind::MemoryIntrinsic,
    }
}

/// Address spaces a guard checks: generic, global, shared.
fn guarded_space(pointer: llvm::Value) -> bool {
    matches!(
        llvm::pointer_address_space(llvm::type_of(pointer)),
        0 | 1 | 3
    )
}

/// The access `inst` makes, when it is one a guard checks.
fn access_of(inst: llvm::Value, layout: llvm::DataLayout) -> Found {
    use llvm_sys::LLVMOpcode::*;
    let (pointer, value_type) = match llvm::opcode(inst) {
        LLVMLoad => (0, llvm::type_of(inst)),
        LLVMStore => (1, llvm::type_of(llvm::operand(inst, 0))),
        LLVMAtomicRMW | LLVMAtomicCmpXchg => (0, llvm::type_of(llvm::operand(inst, 1))),
        LLVMCall => return memory_intrinsic(inst).map_or(Found::Nothing, Found::Guard),
        _ => return Found::Nothing,
    };
    if !guarded_space(llvm::operand(inst, pointer)) {
        return Found::Nothing;
    }
    let bytes = layout.store_size(value_type);
    let space = llvm::pointer_address_space(llvm::type_of(llvm::operand(inst, pointer)));
    let scratch = if space == 3 {
        SHARED_SCRATCH_BYTES
    } else {
        SCRATCH_BYTES
    };
    if bytes == 0 || bytes > scratch {
        return Found::TooWide;
    }
    // What the hardware demands: the access's own size (a vector load is
    // one wide load) but no more than the IR promises.
    let align = (llvm::alignment(inst).max(1) as u64).min(bytes.next_power_of_two());
    Found::Guard(Access {
        inst,
        site: 0,
        pointers: vec![pointer],
        bytes,
        align,
        length: None,
        base: None,
        aligned: false,
        reuses: None,
        in_bounds: false,
    })
}

fn memory_intrinsic(call: llvm::Value) -> Option<Access> {
    let callee = llvm::called_function(call)?;
    let name = llvm::value_name(callee);
    let pointers = if name.starts_with("llvm.memcpy") || name.starts_with("llvm.memmove") {
        vec![0, 1]
    } else if name.starts_with("llvm.memset") {
        vec![0]
    } else {
        return None;
    };
    if !pointers
        .iter()
        .all(|&p| guarded_space(llvm::operand(call, p)))
    {
        return None;
    }
    Some(Access {
        inst: call,
        site: 0,
        pointers,
        bytes: 0,
        align: 1,
        length: Some(2),
        base: None,
        aligned: false,
        reuses: None,
        in_bounds: false,
    })
}
