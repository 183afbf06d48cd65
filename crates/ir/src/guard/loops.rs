//! Trip budgets: every loop header of the chosen kernels counts its trips
//! in a 32-bit register and, on every 64th trip, runs [`trip_asm`], which
//! tests the budgets: written out in assembly, not a call of the runtime,
//! since a call site, even one rarely taken, makes ptxas keep registers
//! live across it in the loop (ir/guard/record.rs). So a trip costs an
//! add, an and and a branch; a loop past its trip budget ends at the next
//! multiple of 64 trips (budgets are 8 times the original's most plus
//! 1,024), and a count would wrap only past 2^32 trips of one entry, which
//! the time budget ends long before.
//!
//! The count lives in a new block placed before the header: the header's
//! phis move into it, every edge into the header goes to it instead, and it
//! branches on to the header (through the slow path's call when due). The
//! header's own instructions stay one block, so code generation treats them
//! as in the ordinary build (it fuses multiplies and adds only within a
//! block). The count starts at 0 on every entry into the loop: a budget
//! bounds each loop entry's trips.

use super::super::error::IrError;
use super::super::llvm;
use super::plan::Loops;
use super::record::{record, RECORD_REGISTERS};
use super::{build_error, runtime_global, side_effect_asm, STATE_SYMBOL, TABLE_SYMBOL};
use inkwell::builder::Builder;
use inkwell::context::Context;
use inkwell::module::Module;
use inkwell::IntPredicate;

/// Trips between the slow path's visits (its budget tests, clock reads and
/// the most trips it records): a power of two, tested as `and TICK - 1`.
const TICK: u64 = 64;

/// The slow path of a loop header's count, every 64th trip (`$0` the trips
/// so far this entry, 32 bits, `$1` the site, `$2` the table, `$3` the
/// state). Past the trip budget (table word 0; 0 is none) the thread
/// records the trips (kind 4) and exits. Otherwise it raises the most trips
/// seen (state word 5, the calibration run's answer) and reads the clock:
/// the run's first reading is kept in state word 6, and a thread later
/// than the time budget (table word 127; 0 is none) after it records (kind
/// 6) and exits. Signed: another SM's first reading may be a little ahead
/// of this one's clock.
fn trip_asm() -> String {
    format!(
        "{{
{RECORD_REGISTERS}.reg .b64 %gevo_k;
.reg .b64 %gevo_s;
.reg .b64 %gevo_t;
.reg .b64 %gevo_now;
.reg .pred %gevo_g;
cvt.u64.u32 %gevo_now, $0;
ld.const.u64 %gevo_k, [$2];
setp.ne.u64 %gevo_g, %gevo_k, 0;
@!%gevo_g bra GEVO_MOST;
setp.gt.u64 %gevo_g, %gevo_now, %gevo_k;
@%gevo_g bra GEVO_OVER;
GEVO_MOST:
ld.volatile.global.u64 %gevo_s, [$3+40];
setp.gt.u64 %gevo_g, %gevo_now, %gevo_s;
@%gevo_g atom.global.max.u64 %gevo_s, [$3+40], %gevo_now;
ld.const.u64 %gevo_k, [$2+1016];
setp.eq.u64 %gevo_g, %gevo_k, 0;
@%gevo_g bra GEVO_ON;
mov.u64 %gevo_t, %globaltimer;
ld.volatile.global.u64 %gevo_s, [$3+48];
setp.ne.u64 %gevo_g, %gevo_s, 0;
@%gevo_g bra GEVO_SINCE;
atom.global.cas.b64 %gevo_s, [$3+48], 0, %gevo_t;
setp.eq.u64 %gevo_g, %gevo_s, 0;
selp.b64 %gevo_s, %gevo_t, %gevo_s, %gevo_g;
GEVO_SINCE:
sub.s64 %gevo_t, %gevo_t, %gevo_s;
setp.le.s64 %gevo_g, %gevo_t, %gevo_k;
@%gevo_g bra GEVO_ON;
{late}GEVO_OVER:
{over}GEVO_STOP:
exit;
GEVO_ON:
}}",
        late = record("$3", TIME_BUDGET, "$1", "%gevo_now", "GEVO_STOP"),
        over = record("$3", TRIP_BUDGET, "$1", "%gevo_now", "GEVO_STOP"),
    )
}

/// `FaultKind::TripBudget` and `FaultKind::TimeBudget` as the state holds
/// them.
const TRIP_BUDGET: &str = "4";
const TIME_BUDGET: &str = "6";

pub(super) fn count_trips<'c>(
    context: &'c Context,
    module: &Module<'c>,
    builder: &Builder<'c>,
    all: &[Loops],
) -> Result<(), IrError> {
    let table = runtime_global(module, TABLE_SYMBOL)?;
    let i64_type = context.i64_type();
    let i32_type = context.i32_type();
    let trip_type = context.void_type().fn_type(
        &[
            i32_type.into(),
            i32_type.into(),
            i64_type.into(),
            i64_type.into(),
        ],
        false,
    );
    let trip = side_effect_asm(context, trip_type, &trip_asm(), "r,r,l,l,~{memory}");
    let table_address = table.const_to_int(i64_type);
    let state = runtime_global(module, STATE_SYMBOL)?.const_to_int(i64_type);
    for loops in all {
        for one in &loops.loops {
            let header = llvm::block_value(one.header);
            let counting = context.prepend_basic_block(header, "gevo.trips");
            let slow = context.insert_basic_block_after(counting, "gevo.trip");
            // The header's phis move into the counting block, in order.
            for phi in llvm::instructions(one.header)
                .into_iter()
                .take_while(|&i| llvm::is_phi(i))
            {
                let name = llvm::value_name(phi);
                let phi = llvm::instruction_value(phi);
                phi.remove_from_basic_block();
                builder.position_at_end(counting);
                builder.insert_instruction(&phi, Some(&name));
            }
            // Every edge into the header now enters the counting block.
            let mut edges = Vec::new();
            for block in llvm::blocks(loops.function) {
                if block == counting.as_mut_ptr() || block == slow.as_mut_ptr() {
                    continue;
                }
                let Some(&term) = llvm::instructions(block).last() else {
                    continue;
                };
                for (index, successor) in llvm::terminator_successors(term).into_iter().enumerate()
                {
                    if successor == one.header {
                        llvm::set_successor(term, index as u32, counting.as_mut_ptr());
                        edges.push(block);
                    }
                }
            }
            builder.position_at_end(counting);
            let trips = builder
                .build_phi(i32_type, "gevo.trips")
                .map_err(build_error)?;
            let now = builder
                .build_int_add(
                    trips.as_basic_value().into_int_value(),
                    i32_type.const_int(1, false),
                    "gevo.now",
                )
                .map_err(build_error)?;
            for &block in &edges {
                let from = llvm::block_value(block);
                if one.latches.contains(&block) {
                    trips.add_incoming(&[(&now, from)]);
                } else {
                    trips.add_incoming(&[(&i32_type.const_zero(), from)]);
                }
            }
            let low = builder
                .build_and(now, i32_type.const_int(TICK - 1, false), "gevo.low")
                .map_err(build_error)?;
            let due = builder
                .build_int_compare(IntPredicate::EQ, low, i32_type.const_zero(), "gevo.tick")
                .map_err(build_error)?;
            builder
                .build_conditional_branch(due, slow, header)
                .map_err(build_error)?;
            builder.position_at_end(slow);
            let site = i32_type.const_int(one.site as u64, false);
            builder
                .build_indirect_call(
                    trip_type,
                    trip,
                    &[now.into(), site.into(), table_address.into(), state.into()],
                    "",
                )
                .map_err(build_error)?;
            builder
                .build_unconditional_branch(header)
                .map_err(build_error)?;
        }
    }
    Ok(())
}
