//! How a check records a fault in the runtime's state: written out inside
//! the check's inline assembly (inline_check.rs, barriers.rs), or a call
//! of the runtime (`__gevo_record`, `__gevo_barrier_check` in
//! `guard_runtime.ll`), chosen per kernel.
//!
//! A call site, even one a check branches around, makes ptxas keep the
//! registers live across it where the calling convention says, which cost
//! the stencil's guarded run a quarter of its time and reduce's a fifth.
//! Written out, each check carries its own copy of the record: in a kernel
//! with many checks (lu's diagonal kernel, unrolled, has 25 barriers) the
//! copies made the guarded run slower, not faster, and ptxas slower too.
//! So a kernel with at most [`MOST_WRITTEN_OUT`] check sites writes its
//! records out, and a larger one calls (BENCHMARKS.md, "Records written
//! out"). Either way the first fault claims state[0] with its kind; its
//! site, thread, block and address follow.

use super::super::llvm;
use super::plan::Plan;

/// The most check sites a kernel may have and still write its records out:
/// checked accesses (not those that take another's check: repeated.rs,
/// nor those proven inside their variable: in_bounds.rs),
/// and two per checked barrier, whose poll and check are
/// twice an access's text (the weight the threshold was measured with,
/// when a barrier had a check before and after it).
pub(super) const MOST_WRITTEN_OUT: usize = 48;

/// The function that holds the planned instruction `inst`.
pub(super) fn function_of(inst: llvm::Value) -> llvm::Value {
    llvm::block_function(llvm::parent(inst).expect("a planned instruction is in a block"))
}

/// The functions of `plan` whose checks call the runtime to record: those
/// with more than [`MOST_WRITTEN_OUT`] check sites.
pub(super) fn calling_functions(plan: &Plan) -> Vec<llvm::Value> {
    let mut sites: Vec<(llvm::Value, usize)> = Vec::new();
    let accesses = plan
        .accesses
        .iter()
        .filter(|a| a.reuses.is_none() && !a.in_bounds)
        .map(|a| (function_of(a.inst), 1));
    let barriers = plan
        .barriers
        .iter()
        .filter(|b| b.checked())
        .map(|b| (b.function, 2));
    for (kernel, count) in accesses.chain(barriers) {
        match sites.iter_mut().find(|(k, _)| *k == kernel) {
            Some((_, n)) => *n += count,
            None => sites.push((kernel, count)),
        }
    }
    sites
        .into_iter()
        .filter(|&(_, n)| n > MOST_WRITTEN_OUT)
        .map(|(kernel, _)| kernel)
        .collect()
}

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
