//! Guarded check builds: the same patched IR as a variant's ordinary build,
//! with every global and shared memory access checked against what the test
//! owns and every loop of the chosen kernels given a trip budget, so that a
//! variant that would fault or run away on the GPU ends with a recorded
//! fault instead of a lost context or a watchdog kill (docs/evolve.md,
//! "Guarded check builds").
//!
//! How an access is guarded: `p' = select(ok, p, scratch)`, the access then
//! made through `p'`, where `ok` is an inline check against the one range
//! the pointer's root owns (`inline_check`) or a call that walks all the
//! test owns (`guard_runtime.ll`). No branch is added around an access, so
//! a guard never changes which threads reach a barrier; the first refusal
//! of a launch is recorded in `__gevo_guard_state`. A loop header counts
//! its trips (`loops`); past the trip budget, or the run's time budget
//! (both asked every 64 trips), the thread exits (an exited thread counts
//! as arrived at later barriers). A barrier that the lanes of a warp are
//! not proven to reach together (`uniform`) is checked for lanes that
//! reach it apart (`barriers`). A kernel that uses shared memory first
//! fills it with a poison pattern (`poison`), so that a read of bytes its
//! block never wrote shows in its outputs. The GPU worker fills
//! `__gevo_guard_table` (the test's buffer ranges, which of them are
//! read-only, the budgets and the poison pattern) before each guarded run
//! and reads the state after.

use super::error::IrError;
use super::llvm;
use super::{codegen, CodegenOptions, KernelIr, Patch};
use inkwell::builder::Builder;
use inkwell::context::Context;
use inkwell::memory_buffer::MemoryBuffer;
use inkwell::module::{Linkage, Module};
use inkwell::types::FunctionType;
use inkwell::values::{
    AsValueRef, BasicMetadataValueEnum, BasicValue, BasicValueEnum, FunctionValue,
    InstructionValue, IntValue, PointerValue, ValueKind,
};
use inkwell::{AddressSpace, IntPredicate};
use serde::{Deserialize, Serialize};

mod aligned;
pub use aligned::BUFFER_ALIGNMENT;
mod barriers;
mod in_bounds;
mod inline_check;
mod loops;
mod plan;
mod poison;
mod record;
mod repeated;
mod uniform;

use inline_check::InlineChecks;
use plan::{plan, Plan};

const RUNTIME: &str = include_str!("guard_runtime.ll");

/// Words of `__gevo_guard_state`, and what each holds.
pub const STATE_WORDS: usize = 8;
pub const STATE_KIND: usize = 0;
pub const STATE_SITE: usize = 1;
pub const STATE_THREAD: usize = 2;
pub const STATE_BLOCK: usize = 3;
pub const STATE_ADDRESS: usize = 4;
pub const STATE_MOST_TRIPS: usize = 5;
/// Words of `__gevo_guard_table`: the trip budget, the range count, then
/// begin/end pairs; third to last, the shared-memory poison pattern (its
/// low 32 bits); next to last, which ranges are read-only (bit `k` for the
/// `k`th pair); the last word, the time budget in nanoseconds.
pub const TABLE_WORDS: usize = 128;
pub const TABLE_POISON: usize = TABLE_WORDS - 3;
pub const MAX_RANGES: usize = (TABLE_POISON - 2) / 2;
pub const TABLE_READ_ONLY: usize = TABLE_WORDS - 2;
pub const TABLE_TIME_BUDGET: usize = TABLE_WORDS - 1;
/// The poison patterns shared memory is filled with (`TABLE_POISON`; the
/// runtime mixes the block's index into the low 20 bits). The first, for
/// every guarded run: all ones, so that a float or double read of a
/// poisoned byte is a NaN and an integer one a large negative number. The
/// second, finite and positive, for a run that asks whether the outputs
/// change with the pattern.
pub const POISON_PATTERNS: [u64; 2] = [0xFFFF_FFFF, 0x5A5A_5A5A];
/// The globals the GPU worker reads and fills.
pub const STATE_SYMBOL: &str = "__gevo_guard_state";
pub const TABLE_SYMBOL: &str = "__gevo_guard_table";
/// The guarded build uses `barrier.sync` (PTX ISA 6.0), `bar.warp.sync`
/// (6.0) and `activemask` (6.2): its PTX is at least version 6.3 whatever
/// the arch's own minimum (sm_60's is 5.0, where LLVM cannot select them).
const GUARDED_PTX_FEATURES: &str = "+ptx63";
/// The intrinsic `__syncthreads()` compiles to.
const ALIGNED_BARRIER: &str = "llvm.nvvm.barrier0";
/// Accesses wider than the scratch they would be redirected to are left
/// unguarded (no kernel of ours has one).
const SCRATCH_BYTES: u64 = 256;
const SHARED_SCRATCH_BYTES: u64 = 64;

/// What a recorded fault was (`__gevo_guard_state[0]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    GlobalOutOfBounds,
    SharedOutOfBounds,
    GlobalMisaligned,
    TripBudget,
    SharedMisaligned,
    TimeBudget,
    /// Lanes of a warp reached a `__syncthreads()` apart (the ordinary
    /// build's aligned barrier would hang); `address` holds a lane of the
    /// warp that was not with the others, as `index | x_size << 16 |
    /// y_size << 32`: its linear index in the block (x fastest) and the
    /// block's sizes, which the host divides by.
    DivergentBarrier,
}

impl FaultKind {
    pub fn from_word(word: u64) -> Option<FaultKind> {
        Some(match word {
            1 => FaultKind::GlobalOutOfBounds,
            2 => FaultKind::SharedOutOfBounds,
            3 => FaultKind::GlobalMisaligned,
            4 => FaultKind::TripBudget,
            5 => FaultKind::SharedMisaligned,
            6 => FaultKind::TimeBudget,
            7 => FaultKind::DivergentBarrier,
            _ => return None,
        })
    }
}

/// What a guard site guards.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SiteKind {
    Load,
    Store,
    Atomic,
    /// `llvm.memcpy`, `llvm.memmove`, `llvm.memset`: refused, they copy
    /// nothing.
    MemoryIntrinsic,
    LoopHeader,
    /// A `__syncthreads()`, checked for lanes that reach it apart.
    Barrier,
}

impl SiteKind {
    /// Whether the access writes: a store, an atomic, or a memory intrinsic
    /// (whose first pointer is its destination).
    pub fn writes(self) -> bool {
        matches!(
            self,
            SiteKind::Store | SiteKind::Atomic | SiteKind::MemoryIntrinsic
        )
    }
}

/// One guarded instruction, as the fault record names it by its id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuardSite {
    /// What the fault record names it by: its function's space in the high
    /// 12 bits (0: the functions that are not chosen kernels, which edits
    /// never change; 1 + i: the `i`th chosen kernel) and its number within
    /// the function in the low 20 (past 2^20 sites in one function, a
    /// fault is recorded without its location). An edit renumbers only the
    /// sites of the kernel it edits.
    pub id: u32,
    pub kind: SiteKind,
    /// The edit engine's instruction id (none in a function that is not
    /// one of the chosen kernels); a loop header's first instruction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instruction: Option<u32>,
    pub function: String,
    pub block: String,
    /// `file:line`, when the IR has line tables.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Bytes accessed (0 for a memory intrinsic's and a loop's).
    pub bytes: u32,
    /// The function parameter the accessed pointer derives from (through
    /// GEPs and casts), when it does: the buffer a fault names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub argument: Option<u32>,
}

/// The most threads a kernel's blocks have in x, y and z, over every
/// launch: a thread index is below it (`KernelIr::with_block_bounds`).
pub type BlockBounds = [u64; 3];

/// A variant's guarded build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Guarded {
    pub ptx: String,
    /// Named by the fault record's site id.
    pub sites: Vec<GuardSite>,
    /// Accesses left unguarded (wider than the scratch).
    pub unguarded: usize,
    /// Every write to global memory is checked inline, where a write into
    /// a read-only range of the table is refused: so the run leaves the
    /// kept inputs as they were (docs/evolve.md, "Inputs the guarded run
    /// cannot write").
    pub protects_inputs: bool,
    /// A kernel of the build fills its shared memory with the table's
    /// poison pattern first (`poison`): its outputs may change with it.
    pub poisons_shared: bool,
}

impl KernelIr {
    /// This IR with its chosen kernels' block bounds, in their order (none
    /// where a kernel's blocks are not known): a guarded build leaves
    /// unchecked the accesses of a module variable that thread indices
    /// below them keep inside it (`guard::in_bounds`). The caller vouches
    /// that every launch of a guarded build stays within them.
    pub fn with_block_bounds(mut self, bounds: Vec<Option<BlockBounds>>) -> Self {
        self.block_bounds = bounds;
        self
    }

    /// Replays `patch`, verifies, guards every memory access and loop, and
    /// emits PTX.
    pub fn compile_guarded(
        &self,
        patch: &Patch,
        options: &CodegenOptions,
    ) -> Result<Guarded, IrError> {
        self.with_patched(patch, |context, module, live| {
            let (sites, unguarded, protects_inputs, poisons_shared) =
                guard_module(context, module, live, self, &options.arch)?;
            let ptx = codegen::emit_ptx_with_features(
                context,
                module,
                &self.kernels,
                options,
                GUARDED_PTX_FEATURES,
            )?;
            Ok(Guarded {
                ptx,
                sites,
                unguarded,
                protects_inputs,
                poisons_shared,
            })
        })
    }

    /// The guarded build's IR (verified, before code generation) and its
    /// sites: what `compile_guarded` compiles.
    pub fn guarded_ir(
        &self,
        patch: &Patch,
        options: &CodegenOptions,
    ) -> Result<(String, Vec<GuardSite>), IrError> {
        self.with_patched(patch, |context, module, live| {
            let (sites, ..) = guard_module(context, module, live, self, &options.arch)?;
            Ok((module.print_to_string().to_string(), sites))
        })
    }
}

/// Guards `module` in place: plans the sites, links the runtime in, fills
/// shared memory with poison at the kernels' entries, inserts the checks
/// (calls, never inlined: see `guard_runtime.ll`), verifies. Answers the
/// sites, how many accesses were left unguarded, whether the inputs are
/// protected and whether shared memory is poisoned.
fn guard_module<'c>(
    context: &'c Context,
    module: &Module<'c>,
    live: &super::LiveModule<'_>,
    ir: &KernelIr,
    arch: &str,
) -> Result<(Vec<GuardSite>, usize, bool, bool), IrError> {
    let plan = plan(module, &live.parts, &ir.parts, &ir.block_bounds);
    module.strip_debug_info();
    let runtime = context
        .create_module_from_ir(MemoryBuffer::create_from_memory_range_copy(
            RUNTIME.as_bytes(),
            "guard_runtime",
        ))
        .map_err(|e| guard_error(format!("the guard runtime: {e}")))?;
    runtime.set_triple(&module.get_triple());
    runtime.set_data_layout(&module.get_data_layout());
    module
        .link_in_module(runtime)
        .map_err(|e| guard_error(format!("linking the guard runtime: {e}")))?;
    // Before the guards: the fill is not guarded, and the guards' entry
    // code goes in before it (poison.rs).
    let kernels: Vec<llvm::Value> = live.parts.iter().map(|p| p.function()).collect();
    let fills = poison::plan_fills(module, &kernels);
    poison::insert_fills(context, module, &fills)?;
    // Which functions' checks call the runtime to record, decided once for
    // the accesses' checks and the barriers' (record.rs).
    let calling = record::calling_functions(&plan);
    let writes_inline = insert_guards(context, module, &plan, &calling)?;
    barriers::unalign_and_check(context, module, &plan, &calling)?;
    define_ownership(context, module)?;
    for f in module.get_functions() {
        if is_runtime(&f.get_name().to_string_lossy()) {
            f.set_linkage(Linkage::Internal);
        }
    }
    for g in module.get_globals() {
        let name = g.get_name().to_string_lossy();
        if is_runtime(&name) && name != STATE_SYMBOL && name != TABLE_SYMBOL {
            g.set_linkage(Linkage::Internal);
        }
    }
    codegen::run_passes(module, arch, "globaldce")?;
    module.verify().map_err(|e| IrError::Verify {
        message: format!("the guarded build: {}", super::one_line(&e.to_string())),
    })?;
    let protects_inputs = writes_inline && plan.too_wide == 0;
    Ok((
        plan.sites,
        plan.too_wide,
        protects_inputs,
        !fills.is_empty(),
    ))
}

fn guard_error(message: String) -> IrError {
    IrError::Codegen {
        message: super::one_line(&message),
    }
}

fn is_runtime(name: &str) -> bool {
    name.starts_with("__gevo_")
}

/// The runtime's functions and globals, found after linking.
pub(super) struct Runtime<'c> {
    check_global: FunctionValue<'c>,
    check_shared: FunctionValue<'c>,
    check_generic: FunctionValue<'c>,
    scratch: PointerValue<'c>,
    scratch_shared: PointerValue<'c>,
}

impl<'c> Runtime<'c> {
    fn find(module: &Module<'c>) -> Result<Self, IrError> {
        Ok(Runtime {
            check_global: runtime_function(module, "__gevo_check_global")?,
            check_shared: runtime_function(module, "__gevo_check_shared")?,
            check_generic: runtime_function(module, "__gevo_check_generic")?,
            scratch: runtime_global(module, "__gevo_scratch")?,
            scratch_shared: runtime_global(module, "__gevo_scratch_shared")?,
        })
    }
}

/// A function of the guard runtime, linked into `module`.
fn runtime_function<'c>(module: &Module<'c>, name: &str) -> Result<FunctionValue<'c>, IrError> {
    module
        .get_function(name)
        .ok_or_else(|| guard_error(format!("the guard runtime lacks {name}")))
}

/// A global of the guard runtime, linked into `module`.
fn runtime_global<'c>(module: &Module<'c>, name: &str) -> Result<PointerValue<'c>, IrError> {
    module
        .get_global(name)
        .map(|g| g.as_pointer_value())
        .ok_or_else(|| guard_error(format!("the guard runtime lacks {name}")))
}

/// PTX assembly with side effects (never moved, merged or dropped), typed
/// `function_type`, its operands as `constraints` say (LLVM's syntax).
fn side_effect_asm<'c>(
    context: &'c Context,
    function_type: FunctionType<'c>,
    text: &str,
    constraints: &str,
) -> PointerValue<'c> {
    context.create_inline_asm(
        function_type,
        text.to_string(),
        constraints.to_string(),
        true,
        false,
        None,
        false,
    )
}

/// Where code that every later instruction of `function` may use goes:
/// before the entry block's first instruction that is not an `alloca`.
fn entry_position<'c>(function: llvm::Value) -> InstructionValue<'c> {
    let entry = llvm::blocks(function)[0];
    let first = llvm::instructions(entry)
        .into_iter()
        .find(|&i| llvm::opcode(i) != llvm_sys::LLVMOpcode::LLVMAlloca)
        .expect("a block ends in a terminator");
    llvm::instruction_value(first)
}

impl<'c> Runtime<'c> {
    /// Where a refused access in address space `space` goes: scratch
    /// memory in that space.
    fn scratch_in(&self, context: &'c Context, space: u32) -> PointerValue<'c> {
        match space {
            3 => self.scratch_shared,
            1 => self.scratch,
            _ => self
                .scratch
                .const_address_space_cast(context.ptr_type(AddressSpace::default())),
        }
    }
}

fn build_error(e: inkwell::builder::BuilderError) -> IrError {
    guard_error(format!("building a guard: {e}"))
}

/// Guards every planned access and loop; the checks in the functions
/// `calling` record by calling the runtime.
fn insert_guards<'c>(
    context: &'c Context,
    module: &Module<'c>,
    plan: &Plan,
    calling: &[llvm::Value],
) -> Result<bool, IrError> {
    let runtime = Runtime::find(module)?;
    let builder = context.create_builder();
    let mut inline = InlineChecks::new(context, module, &builder, plan, calling)?;
    let i64_type = context.i64_type();
    let i32_type = context.i32_type();
    // Whether every write to global memory is checked inline (only those
    // refuse a read-only range).
    let mut writes_inline = true;
    for access in &plan.accesses {
        if access.in_bounds {
            continue;
        }
        // Planned before linking: linking the runtime in adds but removes nothing.
        let inst = instruction(access.inst);
        if let Some(earlier) = access.reuses {
            // Guarded before this one: the plan's order is the functions'.
            let checked = &plan.accesses[earlier];
            let guarded = operand(instruction(checked.inst), checked.pointers[0]);
            inst.set_operand(access.pointers[0], guarded);
            continue;
        }
        builder.position_before(&inst);
        if inline.guard(context, module, &builder, access, inst, &runtime)? {
            continue;
        }
        writes_inline &= !access.writes_global();
        let site = i32_type.const_int(access.site as u64, false);
        let length = match access.length {
            Some(at) => operand(inst, at).into_int_value(),
            None => i64_type.const_int(access.bytes, false),
        };
        let length64 = builder
            .build_int_z_extend_or_bit_cast(length, i64_type, "gevo.n")
            .map_err(build_error)?;
        let align = i64_type.const_int(access.align, false);
        let mut all_ok: Option<IntValue<'c>> = None;
        for &at in &access.pointers {
            let pointer = operand(inst, at).into_pointer_value();
            let space = llvm::pointer_address_space(llvm::type_of(pointer.as_value_ref()));
            let ok = match space {
                0 => call(
                    &builder,
                    runtime.check_generic,
                    &[pointer.into(), length64.into(), align.into(), site.into()],
                )?,
                _ => {
                    let address = builder
                        .build_ptr_to_int(pointer, i64_type, "gevo.a")
                        .map_err(build_error)?;
                    let check = if space == 3 {
                        runtime.check_shared
                    } else {
                        runtime.check_global
                    };
                    call(
                        &builder,
                        check,
                        &[address.into(), length64.into(), align.into(), site.into()],
                    )?
                }
            };
            match access.length {
                // A memory intrinsic's length becomes 0 when refused.
                Some(_) => {
                    all_ok = Some(match all_ok {
                        Some(before) => builder
                            .build_and(before, ok, "gevo.ok")
                            .map_err(build_error)?,
                        None => ok,
                    })
                }
                None => {
                    let scratch = runtime.scratch_in(context, space);
                    let guarded = builder
                        .build_select(ok, pointer, scratch, "gevo.p")
                        .map_err(build_error)?;
                    inst.set_operand(at, guarded);
                }
            }
        }
        if let (Some(ok), Some(at)) = (all_ok, access.length) {
            let zero = length.get_type().const_zero();
            let guarded = builder
                .build_select(ok, length, zero, "gevo.len")
                .map_err(build_error)?;
            inst.set_operand(at, guarded);
        }
    }
    loops::count_trips(context, module, &builder, &plan.loops)?;
    Ok(writes_inline)
}

fn instruction<'c>(inst: llvm::Value) -> InstructionValue<'c> {
    llvm::instruction_value(inst)
}

fn operand(inst: InstructionValue<'_>, at: u32) -> BasicValueEnum<'_> {
    inst.get_operand(at)
        .and_then(|o| o.value())
        .expect("a planned operand is a value")
}

fn call<'c>(
    builder: &Builder<'c>,
    function: FunctionValue<'c>,
    args: &[BasicMetadataValueEnum<'c>],
) -> Result<IntValue<'c>, IrError> {
    match builder
        .build_call(function, args, "gevo.ok")
        .map_err(build_error)?
        .try_as_basic_value()
    {
        ValueKind::Basic(v) => Ok(v.into_int_value()),
        ValueKind::Instruction(_) => Err(guard_error("a check answers nothing".into())),
    }
}

/// Defines `__gevo_module_global_ok` and `__gevo_module_shared_ok`: whether
/// `[a, a + n)` (not wrapping past the top of the address space) lies
/// inside one of the module's own global (`__device__`) or shared
/// variables; an `extern __shared__` array spans the launch's dynamic
/// shared bytes.
fn define_ownership<'c>(context: &'c Context, module: &Module<'c>) -> Result<(), IrError> {
    let layout = llvm::DataLayout::of(module.as_mut_ptr());
    let dynamic = runtime_function(module, "__gevo_dynamic_shared_bytes")?;
    let builder = context.create_builder();
    let i64_type = context.i64_type();
    for (name, space) in [
        ("__gevo_module_global_ok", 1u32),
        ("__gevo_module_shared_ok", 3),
    ] {
        let function = runtime_function(module, name)?;
        let entry = context.append_basic_block(function, "entry");
        builder.position_at_end(entry);
        let a = function
            .get_nth_param(0)
            .expect("two parameters")
            .into_int_value();
        let n = function
            .get_nth_param(1)
            .expect("two parameters")
            .into_int_value();
        let end = builder.build_int_add(a, n, "end").map_err(build_error)?;
        let mut any = context.bool_type().const_zero();
        for g in llvm::globals(module.as_mut_ptr()) {
            let gname = llvm::value_name(g.value);
            if g.address_space != space || is_runtime(&gname) {
                continue;
            }
            let global = module
                .get_global(&gname)
                .expect("a global of the module is found by its name");
            let size: IntValue<'c> = match g.initializer {
                Some(_) => i64_type.const_int(layout.alloc_size(g.value_type), false),
                // A declaration: in shared memory, the dynamic shared array.
                None if space == 3 => call_i64(&builder, dynamic)?,
                None => continue,
            };
            let begin = builder
                .build_ptr_to_int(global.as_pointer_value(), i64_type, "begin")
                .map_err(build_error)?;
            let limit = builder
                .build_int_add(begin, size, "limit")
                .map_err(build_error)?;
            let after = builder
                .build_int_compare(IntPredicate::UGE, a, begin, "after")
                .map_err(build_error)?;
            let before = builder
                .build_int_compare(IntPredicate::ULE, end, limit, "before")
                .map_err(build_error)?;
            let inside = builder
                .build_and(after, before, "inside")
                .map_err(build_error)?;
            any = builder.build_or(any, inside, "any").map_err(build_error)?;
        }
        // An access that wraps past the top of the address space ends
        // "before" every variable's end: never inside one.
        let no_wrap = builder
            .build_int_compare(IntPredicate::UGT, end, a, "no_wrap")
            .map_err(build_error)?;
        let any = builder
            .build_and(any, no_wrap, "owned")
            .map_err(build_error)?;
        builder
            .build_return(Some(&any.as_basic_value_enum()))
            .map_err(build_error)?;
    }
    Ok(())
}

fn call_i64<'c>(
    builder: &Builder<'c>,
    function: FunctionValue<'c>,
) -> Result<IntValue<'c>, IrError> {
    call(builder, function, &[])
}
