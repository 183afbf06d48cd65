//! Inline checks: an access whose pointer is computed from one known root
//! (a kernel's pointer parameter, or one of the module's own variables) is
//! checked in the kernel's own code against that root's range, with no
//! branch in the kernel's blocks; the others call the runtime's checks,
//! which walk the test's whole table (`guard_runtime.ll`).
//!
//! A kernel parameter's range is the test buffer that holds the
//! parameter's address, found once per thread at the kernel's entry
//! (`__gevo_range_of`); a variable's range is a constant. So an access
//! through parameter `a` that lands in another buffer is refused, as the
//! simulator refuses it. A refusal is recorded, once per run of accesses,
//! by inline assembly that only a refused access runs (the record written
//! out, or a call of the runtime in a kernel with many checks: record.rs),
//! with its own branch, so that no branch splits the LLVM block: see the
//! runtime's note on fused multiply-adds.

use super::super::error::IrError;
use super::super::llvm;
use super::plan::{Access, Base, Plan};
use super::record::{function_of, record, RECORD_REGISTERS};
use super::{
    build_error, entry_position, guard_error, runtime_function, runtime_global, side_effect_asm,
    Runtime,
};
use inkwell::builder::Builder;
use inkwell::context::Context;
use inkwell::module::Module;
use inkwell::types::FunctionType;
use inkwell::values::{AsValueRef, FunctionValue, InstructionValue, IntValue, PointerValue};
use inkwell::{AddressSpace, IntPredicate};

/// Fault kinds as `__gevo_guard_state[0]` holds them (`FaultKind`).
const GLOBAL_OUT_OF_BOUNDS: u64 = 1;
const SHARED_OUT_OF_BOUNDS: u64 = 2;
const GLOBAL_MISALIGNED: u64 = 3;
const SHARED_MISALIGNED: u64 = 5;

/// Records a refusal ([`record`]) when `$0` (refused) is not 0: kind
/// `$1`, site `$2`, address `$3`, in the state at `$4`. An access run that
/// passes costs one compare and branch. The branch is inside the assembly,
/// so the kernel's blocks stay whole; the labels are local to the braces
/// (PTX scopes labels by block), so copies of this code do not clash. One
/// copy per run of accesses, not per access, keeps ptxas's work small
/// (BENCHMARKS.md).
fn record_asm() -> String {
    format!(
        "{{
{RECORD_REGISTERS}setp.eq.u32 %gevo_f, $0, 0;
@%gevo_f bra GEVO_PASSED;
{}GEVO_PASSED:
}}",
        record("$4", "$1", "$2", "$3", "GEVO_PASSED")
    )
}

/// Calls the runtime's `__gevo_record` (kind `$1`, site `$2`, address `$3`)
/// when `$0` (refused) is not 0, in a function whose checks call
/// (`record::calling_functions`). The branch and the call are inside the
/// assembly, as in [`record_asm`]; the call's parameters are local to the
/// braces. `$4` is the function's address, unused by the text: the
/// reference keeps the function in the module, and its signature as
/// written, and makes code generation declare it before the kernels that
/// call it.
const RECORD_CALL_ASM: &str = "{
.reg .pred %gevo_f;
.param .b64 gevo_kind;
.param .b32 gevo_site;
.param .b64 gevo_address;
setp.eq.u32 %gevo_f, $0, 0;
@%gevo_f bra GEVO_PASSED;
st.param.b64 [gevo_kind], $1;
st.param.b32 [gevo_site], $2;
st.param.b64 [gevo_address], $3;
call __gevo_record, (gevo_kind, gevo_site, gevo_address);
GEVO_PASSED:
}";

/// The ranges found at kernel entries and the recording assembly.
pub(super) struct InlineChecks<'c> {
    /// (kernel, parameter index) -> where its buffer begins, and per
    /// access width the limit an access's offset must be below.
    parameters: Vec<((llvm::Value, u32), Range<'c>)>,
    /// The record written out, and the address of the runtime's state,
    /// where it records.
    written: (PointerValue<'c>, IntValue<'c>),
    /// The record that calls `__gevo_record`, and that function's address.
    calling: (PointerValue<'c>, IntValue<'c>),
    /// The functions whose checks call (`record::calling_functions`).
    calling_functions: Vec<llvm::Value>,
    record_type: FunctionType<'c>,
    /// The last record made and its call, which the next access in its
    /// run joins.
    open: Option<(Record<'c>, InstructionValue<'c>)>,
}

/// A root's range as its checks use it: an access of `bytes` at `address`
/// is inside when `address - begin < limit(bytes)` (unsigned), one
/// subtraction and one compare ([`limit`]). A write's limit is 0 where the
/// table marks the range read-only (an input the original leaves as it
/// was): the write is refused, and the host names it an input written.
struct Range<'c> {
    begin: IntValue<'c>,
    limits: Vec<(u64, IntValue<'c>)>,
    write_limits: Vec<(u64, IntValue<'c>)>,
}

impl<'c> Range<'c> {
    fn limit(&self, bytes: u64, writes: bool) -> IntValue<'c> {
        let limits = match writes {
            true => &self.write_limits,
            false => &self.limits,
        };
        limits
            .iter()
            .find(|(b, _)| *b == bytes)
            .map(|(_, limit)| *limit)
            .expect("every width a parameter is accessed with has its limit")
    }
}

/// The bound an access of `bytes` at `address` checks `address - begin`
/// against (unsigned, strictly below) for the range [begin, end):
/// `end - begin - bytes + 1`, or 0 (nothing inside) when the range holds
/// fewer than `bytes` or is empty (`__gevo_range_of` answers [1, 0) for
/// an address in no buffer). The same test as `begin <= address` and
/// `address + bytes <= end` without wrapping past the address space's top:
/// an address below `begin` wraps to an offset past every limit.
fn limit<'c>(
    builder: &Builder<'c>,
    begin: IntValue<'c>,
    end: IntValue<'c>,
    bytes: u64,
) -> Result<IntValue<'c>, IrError> {
    let i64_type = begin.get_type();
    let bytes = i64_type.const_int(bytes, false);
    let span = builder
        .build_int_sub(end, begin, "gevo.span")
        .map_err(build_error)?;
    let ordered = builder
        .build_int_compare(IntPredicate::UGE, end, begin, "gevo.ordered")
        .map_err(build_error)?;
    let holds = builder
        .build_int_compare(IntPredicate::UGE, span, bytes, "gevo.holds")
        .map_err(build_error)?;
    let fits = builder
        .build_and(ordered, holds, "gevo.fits")
        .map_err(build_error)?;
    let room = builder
        .build_int_sub(span, bytes, "gevo.room")
        .map_err(build_error)?;
    let room = builder
        .build_int_add(room, i64_type.const_int(1, false), "gevo.room")
        .map_err(build_error)?;
    Ok(builder
        .build_select(fits, room, i64_type.const_zero(), "gevo.limit")
        .map_err(build_error)?
        .into_int_value())
}

/// [`limit`] for a variable of `bytes`, a constant: a variable's range never
/// wraps past the address space's top, which LLVM cannot fold away from
/// its address (an add, a compare and a select in every check before).
fn variable_limit(bytes: u64, access_bytes: u64) -> u64 {
    (bytes + 1).saturating_sub(access_bytes)
}

/// Finds, at `function`'s entry, the range of its parameter `index`, with
/// a limit per width the plan's accesses through it use.
fn parameter_range<'c>(
    context: &'c Context,
    module: &Module<'c>,
    builder: &Builder<'c>,
    plan: &Plan,
    range_of: FunctionValue<'c>,
    function: llvm::Value,
    index: u32,
) -> Result<Range<'c>, IrError> {
    let base = Some(Base::KernelParameter { function, index });
    let i64_type = context.i64_type();
    builder.position_before(&entry_position(function));
    let pointer = module
        .get_function(&llvm::value_name(function))
        .expect("a planned kernel is in its module")
        .get_nth_param(index)
        .expect("a planned parameter exists")
        .into_pointer_value();
    let address = builder
        .build_ptr_to_int(pointer, i64_type, "gevo.param")
        .map_err(build_error)?;
    let range = builder
        .build_call(range_of, &[address.into()], "gevo.range")
        .map_err(build_error)?
        .try_as_basic_value()
        .basic()
        .ok_or_else(|| guard_error("__gevo_range_of answers nothing".into()))?
        .into_struct_value();
    let begin = builder
        .build_extract_value(range, 0, "gevo.begin")
        .map_err(build_error)?
        .into_int_value();
    let end = builder
        .build_extract_value(range, 1, "gevo.end")
        .map_err(build_error)?
        .into_int_value();
    let read_only = builder
        .build_extract_value(range, 2, "gevo.read_only")
        .map_err(build_error)?
        .into_int_value();
    let read_only = builder
        .build_int_compare(
            IntPredicate::NE,
            read_only,
            i64_type.const_zero(),
            "gevo.ro",
        )
        .map_err(build_error)?;
    let widths = |writes: bool| {
        let mut widths: Vec<u64> = plan
            .accesses
            .iter()
            .filter(|a| a.base == base && (!writes || a.writes()))
            .map(|a| a.bytes)
            .collect();
        widths.sort_unstable();
        widths.dedup();
        widths
    };
    let limits: Vec<(u64, IntValue<'c>)> = widths(false)
        .into_iter()
        .map(|bytes| Ok((bytes, limit(builder, begin, end, bytes)?)))
        .collect::<Result<_, IrError>>()?;
    let written = widths(true);
    let write_limits = limits
        .iter()
        .filter(|(bytes, _)| written.contains(bytes))
        .map(|&(bytes, readable)| {
            let writable = builder
                .build_select(read_only, i64_type.const_zero(), readable, "gevo.wlimit")
                .map_err(build_error)?;
            Ok((bytes, writable.into_int_value()))
        })
        .collect::<Result<_, IrError>>()?;
    Ok(Range {
        begin,
        limits,
        write_limits,
    })
}

/// The fault a refused access reports: out of bounds, or misaligned where
/// the alignment test failed, in the shared or global space.
fn fault_kind<'c>(
    context: &'c Context,
    builder: &Builder<'c>,
    shared: bool,
    aligned: IntValue<'c>,
) -> Result<IntValue<'c>, IrError> {
    let i64_type = context.i64_type();
    let (out_of_bounds, misaligned) = if shared {
        (SHARED_OUT_OF_BOUNDS, SHARED_MISALIGNED)
    } else {
        (GLOBAL_OUT_OF_BOUNDS, GLOBAL_MISALIGNED)
    };
    let kind = builder
        .build_select(
            aligned,
            i64_type.const_int(out_of_bounds, false),
            i64_type.const_int(misaligned, false),
            "gevo.kind",
        )
        .map_err(build_error)?;
    Ok(kind.into_int_value())
}

/// What one record call reports: whether an access of its run was refused,
/// and the first refused access's kind, site and address.
#[derive(Clone, Copy)]
struct Record<'c> {
    refused: IntValue<'c>,
    kind: IntValue<'c>,
    site: IntValue<'c>,
    address: IntValue<'c>,
}

impl<'c> InlineChecks<'c> {
    /// Finds, at the entry of every kernel with an inline-checked access,
    /// the range of each parameter such an access uses.
    pub(super) fn new(
        context: &'c Context,
        module: &Module<'c>,
        builder: &Builder<'c>,
        plan: &Plan,
        calling: &[llvm::Value],
    ) -> Result<Self, IrError> {
        let i64_type = context.i64_type();
        let range_of = runtime_function(module, "__gevo_range_of")?;
        let state = runtime_global(module, super::STATE_SYMBOL)?.const_to_int(i64_type);
        let recorder = runtime_function(module, "__gevo_record")?
            .as_global_value()
            .as_pointer_value()
            .const_to_int(i64_type);
        let mut parameters = Vec::new();
        for access in &plan.accesses {
            let Some(Base::KernelParameter { function, index }) = access.base else {
                continue;
            };
            if parameters.iter().any(|(key, _)| *key == (function, index)) {
                continue;
            }
            let range = parameter_range(context, module, builder, plan, range_of, function, index)?;
            parameters.push(((function, index), range));
        }
        let record_type = context.void_type().fn_type(
            &[
                context.i32_type().into(),
                i64_type.into(),
                context.i32_type().into(),
                i64_type.into(),
                i64_type.into(),
            ],
            false,
        );
        let asm = |text: &str| side_effect_asm(context, record_type, text, "r,l,r,l,l");
        Ok(InlineChecks {
            parameters,
            written: (asm(&record_asm()), state),
            calling: (asm(RECORD_CALL_ASM), recorder),
            calling_functions: calling.to_vec(),
            record_type,
            open: None,
        })
    }

    /// Checks `access`'s one pointer (its operand of `inst`) inline and
    /// redirects it to the runtime's scratch memory (in the root's address
    /// space, as the access then is) when refused. Answers false, having
    /// added nothing, for an access without a known root or whose pointer's
    /// address space does not allow it (the caller then calls the
    /// runtime's check).
    pub(super) fn guard(
        &mut self,
        context: &'c Context,
        module: &Module<'c>,
        builder: &Builder<'c>,
        access: &Access,
        inst: InstructionValue<'c>,
        runtime: &Runtime<'c>,
    ) -> Result<bool, IrError> {
        if access.base.is_none() {
            return Ok(false);
        }
        let at = access.pointers[0];
        let i64_type = context.i64_type();
        let pointer = inst
            .get_operand(at)
            .and_then(|o| o.value())
            .expect("a planned operand is a value")
            .into_pointer_value();
        let space = llvm::pointer_address_space(llvm::type_of(pointer.as_value_ref()));
        // The access is made in its root's own address space (a generic
        // pointer cast to it, as code generation would infer it had the
        // guard not selected between two generic pointers).
        let Some((own, begin, limit)) = self.root_range(context, module, access, space) else {
            return Ok(false);
        };
        let compared = if space == own {
            pointer
        } else if space == 0 {
            builder
                .build_address_space_cast(
                    pointer,
                    context.ptr_type(AddressSpace::from(own as u16)),
                    "gevo.in",
                )
                .map_err(build_error)?
        } else {
            return Ok(false);
        };
        let scratch = runtime.scratch_in(context, own);
        let shared = llvm::pointer_address_space(llvm::type_of(compared.as_value_ref())) == 3;
        let address = builder
            .build_ptr_to_int(compared, i64_type, "gevo.a")
            .map_err(build_error)?;
        let compare = |predicate, l: IntValue<'c>, r: IntValue<'c>| {
            builder
                .build_int_compare(predicate, l, r, "gevo.cmp")
                .map_err(build_error)
        };
        let offset = builder
            .build_int_sub(address, begin, "gevo.offset")
            .map_err(build_error)?;
        let inside = compare(IntPredicate::ULT, offset, limit)?;
        // Proven aligned (aligned.rs): the constant folds the test away.
        let aligned = if access.aligned {
            context.bool_type().const_all_ones()
        } else {
            let low = builder
                .build_and(
                    address,
                    i64_type.const_int(access.align - 1, false),
                    "gevo.low",
                )
                .map_err(build_error)?;
            compare(IntPredicate::EQ, low, i64_type.const_zero())?
        };
        let ok = builder
            .build_and(inside, aligned, "gevo.ok")
            .map_err(build_error)?;
        let kind = fault_kind(context, builder, shared, aligned)?;
        let guarded = builder
            .build_select(ok, compared, scratch, "gevo.p")
            .map_err(build_error)?;
        inst.set_operand(at, guarded);
        let refused = builder.build_not(ok, "gevo.refused").map_err(build_error)?;
        let this = Record {
            refused,
            kind,
            site: context.i32_type().const_int(access.site as u64, false),
            address,
        };
        self.record(context, builder, this, inst)?;
        Ok(true)
    }

    /// The address space an access through `access`'s root is made in, and
    /// the root's begin and limit for it; none where the inline check cannot
    /// be used (a parameter through a pointer of another space, a variable
    /// not in the module).
    fn root_range(
        &self,
        context: &'c Context,
        module: &Module<'c>,
        access: &Access,
        space: u32,
    ) -> Option<(u32, IntValue<'c>, IntValue<'c>)> {
        let i64_type = context.i64_type();
        Some(match access.base {
            Some(Base::KernelParameter { function, index }) if matches!(space, 0 | 1) => {
                let (_, range) = self
                    .parameters
                    .iter()
                    .find(|(key, _)| *key == (function, index))
                    .expect("every parameter's range is found at entry");
                (1, range.begin, range.limit(access.bytes, access.writes()))
            }
            Some(Base::Variable { global, bytes }) => {
                let own = llvm::pointer_address_space(llvm::type_of(global));
                let variable = module.get_global(&llvm::value_name(global))?;
                let begin = variable.as_pointer_value().const_to_int(i64_type);
                let room = variable_limit(bytes, access.bytes);
                (own, begin, i64_type.const_int(room, false))
            }
            _ => return None,
        })
    }

    /// Records `this` access's refusal before `inst`, in one call with the
    /// accesses before it in its run (the last record call of the block,
    /// with no call between that could end or stop the thread): a refused
    /// access goes on to scratch memory, so reporting it a few
    /// instructions later changes nothing, and one call per run instead of
    /// one per access spares ptxas most of its time on unrolled kernels.
    fn record(
        &mut self,
        context: &'c Context,
        builder: &Builder<'c>,
        this: Record<'c>,
        inst: InstructionValue<'c>,
    ) -> Result<(), IrError> {
        let joined = match self.open.take() {
            Some((open, call)) if in_one_run(call.as_value_ref(), inst.as_value_ref()) => {
                llvm::erase(call.as_value_ref());
                // The run's first refusal is the one reported.
                let first = |before: IntValue<'c>, now: IntValue<'c>| {
                    builder
                        .build_select(open.refused, before, now, "gevo.first")
                        .map(|v| v.into_int_value())
                        .map_err(build_error)
                };
                Record {
                    refused: builder
                        .build_or(open.refused, this.refused, "gevo.any_refused")
                        .map_err(build_error)?,
                    kind: first(open.kind, this.kind)?,
                    site: first(open.site, this.site)?,
                    address: first(open.address, this.address)?,
                }
            }
            _ => this,
        };
        let refused = builder
            .build_int_z_extend(joined.refused, context.i32_type(), "gevo.refused32")
            .map_err(build_error)?;
        let calls = self
            .calling_functions
            .contains(&function_of(inst.as_value_ref()));
        let (record, operand) = if calls { self.calling } else { self.written };
        let call = builder
            .build_indirect_call(
                self.record_type,
                record,
                &[
                    refused.into(),
                    joined.kind.into(),
                    joined.site.into(),
                    joined.address.into(),
                    operand.into(),
                ],
                "",
            )
            .map_err(build_error)?;
        self.open = Some((joined, llvm::instruction_value(call.as_value_ref())));
        Ok(())
    }
}

/// Whether `to` follows `from` in its block with no call between that may
/// end the thread or hold it (a barrier, a trap, a function of the module
/// or inline assembly); intrinsics such as fused multiply-adds do neither.
fn in_one_run(from: llvm::Value, to: llvm::Value) -> bool {
    if llvm::parent(from) != llvm::parent(to) {
        return false;
    }
    let mut at = llvm::next_instruction(from);
    while let Some(inst) = at {
        if inst == to {
            return true;
        }
        if llvm::is_call(inst) && !returns_at_once(inst) {
            return false;
        }
        at = llvm::next_instruction(inst);
    }
    false
}

/// Intrinsics that wait for other threads or end this one.
const HOLDING_INTRINSICS: [&str; 5] = [
    "llvm.nvvm.barrier",
    "llvm.nvvm.bar.",
    "llvm.nvvm.exit",
    "llvm.trap",
    "llvm.debugtrap",
];

fn returns_at_once(call: llvm::Value) -> bool {
    llvm::calls_intrinsic(call)
        && llvm::called_function(call).is_some_and(|callee| {
            let name = llvm::value_name(callee);
            !HOLDING_INTRINSICS.iter().any(|p| name.starts_with(p))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A builder at the end of a function's only block (it folds constants).
    fn builder_in_a_function(context: &Context) -> (Module<'_>, Builder<'_>) {
        let builder = context.create_builder();
        let module = context.create_module("limits");
        let function = module.add_function("f", context.void_type().fn_type(&[], false), None);
        builder.position_at_end(context.append_basic_block(function, "entry"));
        (module, builder)
    }

    /// `address - begin < limit` answers what `begin <= address`,
    /// `address + bytes <= end` and no wrap past the top of the address
    /// space answer, constants folded by the builder.
    #[test]
    fn an_offset_below_its_limit_is_an_access_inside_its_range() {
        let context = Context::create();
        let (_module, builder) = builder_in_a_function(&context);
        let i64_type = context.i64_type();
        let top = u64::MAX;
        // (begin, end, bytes, address, inside)
        for (begin, end, bytes, address, inside) in [
            (100, 108, 4, 100, true),
            (100, 108, 4, 104, true),
            (100, 108, 4, 105, false),
            (100, 108, 4, 99, false),
            (100, 108, 4, 96, false),
            (100, 108, 8, 100, true),
            (100, 108, 16, 100, false),
            (100, 100, 1, 100, false),
            // No buffer holds the address: `__gevo_range_of`'s [1, 0).
            (1, 0, 4, 0, false),
            (1, 0, 4, 1, false),
            // An access whose end wraps past the top.
            (0, top, 4, top - 3, false),
            (0, top, 4, top - 4, true),
            (16, top, 4, 12, false),
        ] {
            let c = |v: u64| i64_type.const_int(v, false);
            let limit = limit(&builder, c(begin), c(end), bytes).unwrap();
            let offset = c(address).const_sub(c(begin));
            let below = offset.get_zero_extended_constant().unwrap()
                < limit.get_zero_extended_constant().unwrap();
            assert_eq!(
                below, inside,
                "[{begin}, {end}), {bytes} bytes at {address}"
            );
        }
    }

    /// A variable's constant limit is what [`limit`] answers for its range
    /// at an address that does not wrap.
    #[test]
    fn a_variable_limit_is_its_range_limit() {
        let context = Context::create();
        let (_module, builder) = builder_in_a_function(&context);
        let c = |v: u64| context.i64_type().const_int(v, false);
        // (variable bytes, access bytes)
        for (bytes, access) in [
            (1296, 4),
            (1296, 8),
            (4, 4),
            (4, 8),
            (0, 1),
            (7, 8),
            (8, 16),
            (64, 1),
        ] {
            let expected = limit(&builder, c(4096), c(4096 + bytes), access).unwrap();
            assert_eq!(
                Some(variable_limit(bytes, access)),
                expected.get_zero_extended_constant(),
                "{bytes} bytes, an access of {access}"
            );
        }
    }
}
