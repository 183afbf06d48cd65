//! The PTX that records a fault in the runtime's state, written out inside
//! the checks' inline assembly (inline_check.rs, barriers.rs) rather than
//! called: a call site, even one a check branches around, makes ptxas keep
//! the registers live across it where the calling convention says, and so
//! cost guarded runs time at every check although it never runs
//! (BENCHMARKS.md, "Records written out"). It does what the runtime's
//! `__gevo_record` does (`guard_runtime.ll`): the first fault claims
//! state[0] with its kind; its site, thread, block and address follow.

/// The registers [`record`]'s text uses: declared once at the top of the
/// assembly's braces, before its first instruction.
pub(super) const RECORD_REGISTERS: &str = ".reg .pred %gevo_f;
.reg .b64 %gevo_w;
.reg .b32 %gevo_a;
.reg .b32 %gevo_b;
.reg .b32 %gevo_c;
";

/// Records kind `kind` at site `site` (a 32-bit operand) with `address`
/// (64-bit) in the state at `state` unless a fault is recorded already,
/// then goes on to `done` (a label of the caller's braces). The thread is
/// packed as x | y << 20 | z << 40, the block as x | y << 32 | z << 48.
pub(super) fn record(state: &str, kind: &str, site: &str, address: &str, done: &str) -> String {
    format!(
        "ld.volatile.global.u64 %gevo_w, [{state}];
setp.ne.u64 %gevo_f, %gevo_w, 0;
@%gevo_f bra {done};
atom.global.cas.b64 %gevo_w, [{state}], 0, {kind};
setp.ne.u64 %gevo_f, %gevo_w, 0;
@%gevo_f bra {done};
cvt.u64.u32 %gevo_w, {site};
st.volatile.global.u64 [{state}+8], %gevo_w;
mov.u32 %gevo_a, %tid.x;
mov.u32 %gevo_b, %tid.y;
shl.b32 %gevo_b, %gevo_b, 20;
or.b32 %gevo_a, %gevo_a, %gevo_b;
mov.u32 %gevo_c, %tid.z;
shl.b32 %gevo_c, %gevo_c, 8;
mov.b64 %gevo_w, {{%gevo_a, %gevo_c}};
st.volatile.global.u64 [{state}+16], %gevo_w;
mov.u32 %gevo_a, %ctaid.x;
mov.u32 %gevo_b, %ctaid.y;
mov.u32 %gevo_c, %ctaid.z;
shl.b32 %gevo_c, %gevo_c, 16;
or.b32 %gevo_b, %gevo_b, %gevo_c;
mov.b64 %gevo_w, {{%gevo_a, %gevo_b}};
st.volatile.global.u64 [{state}+24], %gevo_w;
st.volatile.global.u64 [{state}+32], {address};
bra {done};
"
    )
}
