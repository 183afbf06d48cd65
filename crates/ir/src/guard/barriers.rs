//! Barriers in the guarded build. Every `__syncthreads()` (`bar.sync 0`,
//! which the lanes of a warp must reach together) becomes the barrier that
//! lanes may reach apart (`barrier.sync 0`): a variant that makes a barrier
//! divergent within a warp hangs at the aligned one, and a hang costs the
//! GPU worker; at the unaligned one the lanes arrive one by one and the run
//! ends. For a variant whose lanes stay together the two are the same
//! barrier.
//!
//! So that such a variant is also rejected (its ordinary build, which is
//! timed, would hang), each barrier of the chosen kernels that the lanes of
//! a warp are not proven to reach together (`uniform.rs`) is checked:
//! - at the kernel's entry each warp writes its lanes as live
//!   (`__gevo_live_init`), and each return clears the returning lane (in a
//!   kernel with a checked barrier);
//! - before the barrier, the lanes wait for the warp's live lanes at any
//!   barrier site and read which lanes are with them (`activemask`): they
//!   poll until the lanes with them are the live ones (a lane returning
//!   meanwhile stops being live), and then go on to the barrier;
//! - lanes still apart after the poll are checked at once, before the
//!   barrier (lanes of the warp held elsewhere, where a loop the others go
//!   on in ends, say, would keep the barrier waiting for ever), except in
//!   the original's calibration run, which has no time budget: there they
//!   first wait in `bar.warp.sync`, after which the lanes at the same site
//!   go on together (without it, lanes that took different paths to one
//!   barrier may reach it apart though the code is sound). A live lane not
//!   with them is recorded (as `record.rs` says: by the check's own
//!   assembly, or by the runtime's `__gevo_barrier_check` in a kernel with
//!   many checks), and the lane exits: lanes that went on apart would pair
//!   their next warp syncs with different barriers and could wait for each
//!   other for ever.
//!
//! A check after the barrier, as there once was, could not fail once the
//! poll had passed: the lanes here were the live ones, and lanes clear
//! only their own bit, at a return.
//!
//! Checks are added only where every `__syncthreads()` of the module is in
//! a chosen kernel: a lane waiting at an unchecked one would never join the
//! warp sync of a checked one.

use super::super::error::IrError;
use super::super::llvm;
use super::plan::Plan;
use super::record::{record, RECORD_REGISTERS};
#[cfg(doc)]
use super::FaultKind;
use super::{
    build_error, entry_position, guard_error, runtime_function, runtime_global, side_effect_asm,
    ALIGNED_BARRIER, STATE_SYMBOL, TABLE_SYMBOL,
};
use inkwell::attributes::AttributeLoc;
use inkwell::builder::Builder;
use inkwell::context::Context;
use inkwell::intrinsics::Intrinsic;
use inkwell::module::Module;
use inkwell::values::{AsValueRef, BasicMetadataValueEnum, InstructionValue, PointerValue};

/// Waits for the warp's live lanes (their word at `$0`) and checks that
/// the lanes here are all of them. First it polls, up to 1,024 times,
/// until the lanes here (`activemask`) are the live ones: a lane on its
/// way to a return clears its bit meanwhile, where a warp sync naming it
/// would wait for it for ever (a warp sync with an exited lane in its mask
/// is undefined, and hung on the GPU). Together, the usual case, they go
/// on to the barrier at once: the poll has just compared the live lanes
/// with the lanes here, and neither can change before the barrier (lanes
/// only clear their own bit, at a return). Lanes still apart after the
/// poll: in a run with a time budget (the table's last word, `$1` the
/// table) they are checked at once (lanes held elsewhere, say where the
/// others' loop ends, would keep the barrier waiting); in the calibration
/// run of the original (no budget) the warp sync first brings them
/// together, as lanes that took different paths to one barrier need, and
/// then they are checked. `check` is that check's text ([`apart_check`]
/// or [`APART_CHECK_CALL`]), which reads the lanes here from `%gevo_here`.
fn converge_and_check_asm(check: &str) -> String {
    format!(
        "{{
.reg .b32 %gevo_live;
.reg .b32 %gevo_here;
.reg .b32 %gevo_polls;
.reg .b64 %gevo_budget;
.reg .pred %gevo_q;
mov.u32 %gevo_polls, 1024;
GEVO_POLL:
ld.volatile.shared.u32 %gevo_live, [$0];
activemask.b32 %gevo_here;
setp.eq.u32 %gevo_q, %gevo_here, %gevo_live;
@%gevo_q bra GEVO_TOGETHER;
sub.u32 %gevo_polls, %gevo_polls, 1;
setp.ne.u32 %gevo_q, %gevo_polls, 0;
@%gevo_q bra GEVO_POLL;
ld.const.u64 %gevo_budget, [$1+1016];
setp.ne.u64 %gevo_q, %gevo_budget, 0;
@%gevo_q bra GEVO_STILL_APART;
bar.warp.sync %gevo_live;
activemask.b32 %gevo_here;
GEVO_STILL_APART:
{check}GEVO_TOGETHER:
}}"
    )
}

/// Compares the warp's live lanes (their word at `$0`) with the lanes here
/// (`%gevo_here`); where they differ, a live lane was not with them: the
/// fault is recorded ([`record`], site `$2`, the state at `$3`) with that
/// lane as the address (packed as [`FaultKind::DivergentBarrier`] says),
/// and the lane exits (it stays live: its warp's other lanes see the same
/// and exit; lanes that went on apart would pair their warp syncs with
/// different barriers and could wait for each other for ever). The host,
/// not this code, turns the linear index into x, y and z, because the
/// divisions that takes made ptxas half again slower on lu's sixty checks.
fn apart_check() -> String {
    format!(
        "{{
{RECORD_REGISTERS}.reg .b32 %gevo_l;
.reg .b32 %gevo_x;
.reg .b32 %gevo_d;
.reg .b32 %gevo_t;
.reg .b32 %gevo_n;
.reg .b64 %gevo_v;
.reg .pred %gevo_p;
ld.volatile.shared.u32 %gevo_l, [$0];
setp.eq.u32 %gevo_p, %gevo_l, %gevo_here;
@%gevo_p bra GEVO_CHECKED;
not.b32 %gevo_x, %gevo_here;
and.b32 %gevo_x, %gevo_l, %gevo_x;
xor.b32 %gevo_d, %gevo_l, %gevo_here;
setp.eq.u32 %gevo_p, %gevo_x, 0;
selp.b32 %gevo_x, %gevo_d, %gevo_x, %gevo_p;
brev.b32 %gevo_x, %gevo_x;
clz.b32 %gevo_x, %gevo_x;
mov.u32 %gevo_t, %tid.z;
mov.u32 %gevo_n, %ntid.y;
mov.u32 %gevo_d, %tid.y;
mad.lo.u32 %gevo_t, %gevo_t, %gevo_n, %gevo_d;
mov.u32 %gevo_n, %ntid.x;
mov.u32 %gevo_d, %tid.x;
mad.lo.u32 %gevo_t, %gevo_t, %gevo_n, %gevo_d;
and.b32 %gevo_t, %gevo_t, 0xFFFFFFE0;
add.u32 %gevo_t, %gevo_t, %gevo_x;
shl.b32 %gevo_n, %gevo_n, 16;
or.b32 %gevo_t, %gevo_t, %gevo_n;
mov.u32 %gevo_n, %ntid.y;
mov.b64 %gevo_v, {{%gevo_t, %gevo_n}};
{}GEVO_APART:
exit;
GEVO_CHECKED:
}}
",
        record("$3", DIVERGENT_BARRIER, "$2", "%gevo_v", "GEVO_APART")
    )
}

/// [`apart_check`] in a function whose checks call
/// (`record::calling_functions`): the runtime's `__gevo_barrier_check`
/// (the live word `$0`, the lanes here, site `$2`) records and exits,
/// called only when the lanes differ. `$3`, the function's address, keeps
/// it in the module and declared.
const APART_CHECK_CALL: &str = "{
.reg .b32 %gevo_l;
.reg .pred %gevo_p;
.param .b64 gevo_at;
.param .b32 gevo_arrived;
.param .b32 gevo_site;
ld.volatile.shared.u32 %gevo_l, [$0];
setp.eq.u32 %gevo_p, %gevo_l, %gevo_here;
@%gevo_p bra GEVO_CHECKED;
st.param.b64 [gevo_at], $0;
st.param.b32 [gevo_arrived], %gevo_here;
st.param.b32 [gevo_site], $2;
call __gevo_barrier_check, (gevo_at, gevo_arrived, gevo_site);
GEVO_CHECKED:
}
";

/// `FaultKind::DivergentBarrier` as the state holds it.
const DIVERGENT_BARRIER: &str = "7";

/// Makes every `__syncthreads()` the unaligned barrier and checks those of
/// the chosen kernels; the checks in the functions `calling` record by
/// calling the runtime.
pub(super) fn unalign_and_check<'c>(
    context: &'c Context,
    module: &Module<'c>,
    plan: &Plan,
    calling: &[llvm::Value],
) -> Result<(), IrError> {
    let Some(aligned) = module.get_function(ALIGNED_BARRIER) else {
        return Ok(());
    };
    let unaligned = Intrinsic::find("llvm.nvvm.barrier.sync")
        .and_then(|i| i.get_declaration(module, &[]))
        .ok_or_else(|| guard_error("no llvm.nvvm.barrier.sync intrinsic".into()))?;
    // Every use of the intrinsic is a call of it.
    let calls: Vec<InstructionValue<'c>> = llvm::users(aligned.as_value_ref())
        .into_iter()
        .map(llvm::instruction_value)
        .collect();
    let checked = calls.len() == plan.barriers.len();
    let builder = context.create_builder();
    let lives = if checked {
        live_lanes(module, &builder, plan)?
    } else {
        Vec::new()
    };
    let state = runtime_global(module, STATE_SYMBOL)?.const_to_int(context.i64_type());
    let checker = runtime_function(module, "__gevo_barrier_check")?
        .as_global_value()
        .as_pointer_value()
        .const_to_int(context.i64_type());
    let table = runtime_global(module, TABLE_SYMBOL)?.const_to_int(context.i64_type());
    // The live word, the table, the site, and the state it records in or
    // the runtime function it calls.
    let check_type = context.void_type().fn_type(
        &[
            context.i64_type().into(),
            context.i64_type().into(),
            context.i32_type().into(),
            context.i64_type().into(),
        ],
        false,
    );
    let constraints = "l,l,r,l,~{memory}";
    let written = side_effect_asm(
        context,
        check_type,
        &converge_and_check_asm(&apart_check()),
        constraints,
    );
    let calling = |function| calling.contains(&function);
    let call_check = side_effect_asm(
        context,
        check_type,
        &converge_and_check_asm(APART_CHECK_CALL),
        constraints,
    );
    let convergent = context.create_enum_attribute(
        inkwell::attributes::Attribute::get_named_enum_kind_id("convergent"),
        0,
    );
    let id = context.i32_type().const_zero();
    for call in calls {
        builder.position_before(&call);
        let barrier = plan
            .barriers
            .iter()
            .find(|b| b.call == call.as_value_ref())
            .filter(|b| checked && b.checked());
        // Before the barrier: lanes that would reach it apart end here.
        if let Some(b) = barrier {
            let word = builder
                .build_ptr_to_int(live_of(&lives, b.function), context.i64_type(), "gevo.live")
                .map_err(build_error)?;
            let site = context.i32_type().const_int(b.site as u64, false);
            let (check, operand) = match calling(b.function) {
                true => (call_check, checker),
                false => (written, state),
            };
            let args: [BasicMetadataValueEnum; 4] =
                [word.into(), table.into(), site.into(), operand.into()];
            builder
                .build_indirect_call(check_type, check, &args, "")
                .map_err(build_error)?
                .add_attribute(AttributeLoc::Function, convergent);
        }
        builder
            .build_call(unaligned, &[id.into()], "")
            .map_err(build_error)?;
        call.erase_from_basic_block();
    }
    Ok(())
}

/// Every kernel with a checked barrier writes its warp's live lanes at the
/// entry and clears each lane at a return. Answers each kernel's word.
fn live_lanes<'c>(
    module: &Module<'c>,
    builder: &Builder<'c>,
    plan: &Plan,
) -> Result<Vec<(llvm::Value, PointerValue<'c>)>, IrError> {
    let init = runtime_function(module, "__gevo_live_init")?;
    let exit = runtime_function(module, "__gevo_live_exit")?;
    let mut kernels: Vec<llvm::Value> = plan
        .barriers
        .iter()
        .filter(|b| b.checked())
        .map(|b| b.function)
        .collect();
    kernels.dedup();
    let mut lives = Vec::new();
    for kernel in kernels {
        builder.position_before(&entry_position(kernel));
        let live = builder
            .build_call(init, &[], "gevo.live")
            .map_err(build_error)?
            .try_as_basic_value()
            .basic()
            .ok_or_else(|| guard_error("__gevo_live_init answers nothing".into()))?
            .into_pointer_value();
        for block in llvm::blocks(kernel) {
            let last = *llvm::instructions(block)
                .last()
                .expect("a block ends in a terminator");
            if llvm::opcode(last) == llvm_sys::LLVMOpcode::LLVMRet {
                builder.position_before(&llvm::instruction_value(last));
                builder
                    .build_call(exit, &[live.into()], "")
                    .map_err(build_error)?;
            }
        }
        lives.push((kernel, live));
    }
    Ok(lives)
}

fn live_of<'c>(lives: &[(llvm::Value, PointerValue<'c>)], kernel: llvm::Value) -> PointerValue<'c> {
    lives
        .iter()
        .find(|(k, _)| *k == kernel)
        .map(|(_, live)| *live)
        .expect("every kernel with a checked barrier has its live word")
}
