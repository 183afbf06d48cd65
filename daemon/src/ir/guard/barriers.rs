//! Barriers in the guarded build. Every `__syncthreads()` (`bar.sync 0`,
//! which the lanes of a warp must reach together) becomes the barrier that
//! lanes may reach apart (`barrier.sync 0`): a variant that makes a barrier
//! divergent within a warp hangs at the aligned one, and a hang costs the
//! GPU worker; at the unaligned one the lanes arrive one by one and the run
//! ends. For a variant whose lanes stay together the two are the same
//! barrier.
//!
//! So that such a variant is also rejected (its ordinary build, which is
//! timed, would hang), each barrier of the chosen kernels reads the lanes
//! that reach it together (`activemask`) and, after it, compares them with
//! the warp's lanes that have not returned (`__gevo_live`, set at the
//! kernel's entry and cleared at each return): a live lane that was not
//! among them reached it apart. After the barrier, because the barrier
//! waits for every lane that is still heading for a return.

use super::super::error::IrError;
use super::super::llvm;
use super::plan::Plan;
use super::{build_error, guard_error, ALIGNED_BARRIER};
use inkwell::context::Context;
use inkwell::intrinsics::Intrinsic;
use inkwell::module::Module;
use inkwell::values::{AnyValueEnum, AsValueRef, BasicValue, FunctionValue};

pub(super) fn unalign_and_check<'c>(
    context: &'c Context,
    module: &Module<'c>,
    plan: &Plan,
) -> Result<(), IrError> {
    let Some(aligned) = module.get_function(ALIGNED_BARRIER) else {
        return Ok(());
    };
    let intrinsic = |name: &str| {
        Intrinsic::find(name)
            .and_then(|i| i.get_declaration(module, &[]))
            .ok_or_else(|| guard_error(format!("no {name} intrinsic")))
    };
    let unaligned = intrinsic("llvm.nvvm.barrier.sync")?;
    let activemask = intrinsic("llvm.nvvm.activemask")?;
    let runtime = |name: &str| {
        module
            .get_function(name)
            .ok_or_else(|| guard_error(format!("the guard runtime lacks {name}")))
    };
    let check = runtime("__gevo_barrier_check")?;
    let mut calls = Vec::new();
    let mut next = aligned.as_global_value().as_pointer_value().get_first_use();
    while let Some(u) = next {
        if let AnyValueEnum::InstructionValue(inst) = u.get_user() {
            calls.push(inst);
        }
        next = u.get_next_use();
    }
    let builder = context.create_builder();
    let id = context.i32_type().const_zero();
    for call in calls {
        builder.position_before(&call);
        let checked = plan.barriers.iter().find(|b| b.call == call.as_value_ref());
        let arrived = match checked {
            Some(_) => Some(call_i32(&builder, activemask)?),
            None => None,
        };
        builder
            .build_call(unaligned, &[id.into()], "")
            .map_err(build_error)?;
        if let (Some(barrier), Some(arrived)) = (checked, arrived) {
            let site = context.i32_type().const_int(barrier.site as u64, false);
            builder
                .build_call(check, &[arrived.into(), site.into()], "")
                .map_err(build_error)?;
        }
        call.erase_from_basic_block();
    }
    // The live lanes, in every kernel with a checked barrier.
    let init = runtime("__gevo_live_init")?;
    let exit = runtime("__gevo_live_exit")?;
    let mut kernels: Vec<llvm::Value> = plan.barriers.iter().map(|b| b.function).collect();
    kernels.dedup();
    for kernel in kernels {
        let blocks = llvm::blocks(kernel);
        let first = llvm::instructions(blocks[0])
            .into_iter()
            .find(|&i| llvm::opcode(i) != llvm_sys::LLVMOpcode::LLVMAlloca)
            .expect("a block ends in a terminator");
        builder.position_before(&llvm::instruction_value(first));
        builder.build_call(init, &[], "").map_err(build_error)?;
        for block in blocks {
            let last = *llvm::instructions(block)
                .last()
                .expect("a block ends in a terminator");
            if llvm::opcode(last) == llvm_sys::LLVMOpcode::LLVMRet {
                builder.position_before(&llvm::instruction_value(last));
                builder.build_call(exit, &[], "").map_err(build_error)?;
            }
        }
    }
    Ok(())
}

fn call_i32<'c>(
    builder: &inkwell::builder::Builder<'c>,
    function: FunctionValue<'c>,
) -> Result<inkwell::values::IntValue<'c>, IrError> {
    builder
        .build_call(function, &[], "gevo.arrived")
        .map_err(build_error)?
        .try_as_basic_value()
        .basic()
        .map(|v| v.into_int_value())
        .ok_or_else(|| guard_error("activemask answers nothing".into()))
}
