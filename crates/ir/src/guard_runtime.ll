; The guarded build's runtime, linked into a variant's module by ir/guard.rs
; (docs/evolve.md, "Guarded check builds"). Every guarded access calls one of
; the __gevo_check_* functions, which answer whether the access may go ahead;
; a refused access is redirected to scratch memory by the caller and the
; first refusal of the launch is recorded in @__gevo_guard_state. An access
; through a kernel parameter is checked inline instead, against the range
; @__gevo_range_of found at the kernel's entry. Loop headers count their
; trips inline, and their budgets are checked by assembly written out at
; each header (ir/guard/loops.rs), not here.
; Everything here but the state and the table is made internal after
; linking; the checks stay calls (see the attributes at the end).

; Written by the kernel, read back by the GPU worker:
; [0] fault kind (0 none, 1 global out of bounds, 2 shared out of bounds,
;     3 misaligned global, 4 trip budget, 5 misaligned shared, 6 time
;     budget, 7 divergent barrier), [1] site, [2] thread (x | y << 20 |
;     z << 40), [3] block (x | y << 32 | z << 48), [4] address (or trips, or
;     the other thread of a divergent barrier),
; [5] the most trips one entry into a loop made, in steps of 64 (the
;     calibration run's answer),
; [6] the run's first clock reading at a loop header (for the time budget).
@__gevo_guard_state = addrspace(1) externally_initialized global [8 x i64] zeroinitializer, align 8

; Filled in by the GPU worker before each guarded run of a test:
; [0] trip budget per thread (0: none), [1] range count, then begin/end
; address pairs of every buffer the test owns (at most 61), [125] the
; shared-memory poison pattern (its low 32 bits), [126] which of them are
; read-only (bit k for the k-th pair: inputs the original leaves as they
; were, which an inline-checked write refuses), and last, [127], the run's
; time budget in nanoseconds (0: none).
@__gevo_guard_table = addrspace(4) externally_initialized global [128 x i64] zeroinitializer, align 8

; Where refused accesses go instead (the caller picks the address space).
@__gevo_scratch = addrspace(1) global [32 x i64] zeroinitializer, align 16
@__gevo_scratch_shared = addrspace(3) global [8 x i64] undef, align 16

; Per warp of the block: the lanes that have not returned (ir/guard/
; barriers.rs), for the divergent-barrier check.
@__gevo_live = addrspace(3) global [32 x i32] undef, align 4

declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.tid.y()
declare i32 @llvm.nvvm.read.ptx.sreg.tid.z()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.y()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.z()
declare i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ntid.y()
declare i32 @llvm.nvvm.read.ptx.sreg.ntid.z()
declare i32 @llvm.nvvm.read.ptx.sreg.nctaid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.nctaid.y()
declare i32 @llvm.nvvm.read.ptx.sreg.laneid()
declare i32 @llvm.nvvm.activemask()
declare i32 @llvm.cttz.i32(i32, i1)
declare i1 @llvm.nvvm.isspacep.shared(ptr)
declare i1 @llvm.nvvm.isspacep.local(ptr)
declare i1 @llvm.nvvm.isspacep.const(ptr)

; Defined by ir/guard.rs in the variant's own module: whether [a, a + n)
; lies inside one of the module's global (__device__) or shared variables.
declare i1 @__gevo_module_global_ok(i64, i64)
declare i1 @__gevo_module_shared_ok(i64, i64)

define i64 @__gevo_dynamic_shared_bytes() #0 {
  %bytes = call i32 asm "mov.u32 $0, %dynamic_smem_size;", "=r"()
  %wide = zext i32 %bytes to i64
  ret i64 %wide
}

define void @__gevo_record(i64 %kind, i32 %site, i64 %address) #0 {
entry:
  %seen = load volatile i64, ptr addrspace(1) @__gevo_guard_state, align 8
  %free = icmp eq i64 %seen, 0
  br i1 %free, label %claim, label %done

claim:
  %pair = cmpxchg ptr addrspace(1) @__gevo_guard_state, i64 0, i64 %kind monotonic monotonic, align 8
  %won = extractvalue { i64, i1 } %pair, 1
  br i1 %won, label %write, label %done

write:
  %site64 = zext i32 %site to i64
  store volatile i64 %site64, ptr addrspace(1) getelementptr inbounds ([8 x i64], ptr addrspace(1) @__gevo_guard_state, i64 0, i64 1), align 8
  %tx = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %ty = call i32 @llvm.nvvm.read.ptx.sreg.tid.y()
  %tz = call i32 @llvm.nvvm.read.ptx.sreg.tid.z()
  %tx64 = zext i32 %tx to i64
  %ty64 = zext i32 %ty to i64
  %tz64 = zext i32 %tz to i64
  %tys = shl i64 %ty64, 20
  %tzs = shl i64 %tz64, 40
  %txy = or i64 %tx64, %tys
  %thread = or i64 %txy, %tzs
  store volatile i64 %thread, ptr addrspace(1) getelementptr inbounds ([8 x i64], ptr addrspace(1) @__gevo_guard_state, i64 0, i64 2), align 8
  %bx = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %by = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.y()
  %bz = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.z()
  %bx64 = zext i32 %bx to i64
  %by64 = zext i32 %by to i64
  %bz64 = zext i32 %bz to i64
  %bys = shl i64 %by64, 32
  %bzs = shl i64 %bz64, 48
  %bxy = or i64 %bx64, %bys
  %block = or i64 %bxy, %bzs
  store volatile i64 %block, ptr addrspace(1) getelementptr inbounds ([8 x i64], ptr addrspace(1) @__gevo_guard_state, i64 0, i64 3), align 8
  store volatile i64 %address, ptr addrspace(1) getelementptr inbounds ([8 x i64], ptr addrspace(1) @__gevo_guard_state, i64 0, i64 4), align 8
  br label %done

done:
  ret void
}

define i1 @__gevo_check_global(i64 %a, i64 %n, i64 %align, i32 %site) #0 {
entry:
  %mask = add i64 %align, -1
  %low = and i64 %a, %mask
  %aligned = icmp eq i64 %low, 0
  br i1 %aligned, label %ranges, label %misaligned

misaligned:
  call void @__gevo_record(i64 3, i32 %site, i64 %a)
  ret i1 false

ranges:
  %count = load i64, ptr addrspace(4) getelementptr inbounds ([128 x i64], ptr addrspace(4) @__gevo_guard_table, i64 0, i64 1), align 8
  %end = add i64 %a, %n
  ; An access that wraps past the top of the address space (a pointer of
  ; -4, say) ends "below" every range's end: refused before the compares.
  %wraps = icmp ule i64 %end, %a
  br i1 %wraps, label %refused, label %loop

loop:
  %i = phi i64 [ 0, %ranges ], [ %next, %body ]
  %more = icmp ult i64 %i, %count
  br i1 %more, label %body, label %statics

body:
  %twice = shl i64 %i, 1
  %at = add i64 %twice, 2
  %begin_at = getelementptr inbounds [128 x i64], ptr addrspace(4) @__gevo_guard_table, i64 0, i64 %at
  %begin = load i64, ptr addrspace(4) %begin_at, align 8
  %end_at = getelementptr inbounds i64, ptr addrspace(4) %begin_at, i64 1
  %limit = load i64, ptr addrspace(4) %end_at, align 8
  %after = icmp uge i64 %a, %begin
  %before = icmp ule i64 %end, %limit
  %inside = and i1 %after, %before
  %next = add i64 %i, 1
  br i1 %inside, label %ok, label %loop

statics:
  %own = call i1 @__gevo_module_global_ok(i64 %a, i64 %n)
  br i1 %own, label %ok, label %refused

ok:
  ret i1 true

refused:
  call void @__gevo_record(i64 1, i32 %site, i64 %a)
  ret i1 false
}

define i1 @__gevo_check_shared(i64 %a, i64 %n, i64 %align, i32 %site) #0 {
entry:
  %mask = add i64 %align, -1
  %low = and i64 %a, %mask
  %aligned = icmp eq i64 %low, 0
  br i1 %aligned, label %inside, label %misaligned

misaligned:
  call void @__gevo_record(i64 5, i32 %site, i64 %a)
  ret i1 false

inside:
  %own = call i1 @__gevo_module_shared_ok(i64 %a, i64 %n)
  br i1 %own, label %ok, label %refused

ok:
  ret i1 true

refused:
  call void @__gevo_record(i64 2, i32 %site, i64 %a)
  ret i1 false
}

; A generic pointer: shared memory is checked as shared, the stack and
; constant memory are not checked (docs/evolve.md says why), anything else
; is checked as global memory.
define i1 @__gevo_check_generic(ptr %p, i64 %n, i64 %align, i32 %site) #0 {
entry:
  %is_shared = call i1 @llvm.nvvm.isspacep.shared(ptr %p)
  br i1 %is_shared, label %shared, label %not_shared

shared:
  %s = addrspacecast ptr %p to ptr addrspace(3)
  %sa = ptrtoint ptr addrspace(3) %s to i64
  %shared_ok = call i1 @__gevo_check_shared(i64 %sa, i64 %n, i64 %align, i32 %site)
  ret i1 %shared_ok

not_shared:
  %is_local = call i1 @llvm.nvvm.isspacep.local(ptr %p)
  %is_const = call i1 @llvm.nvvm.isspacep.const(ptr %p)
  %unchecked = or i1 %is_local, %is_const
  br i1 %unchecked, label %ok, label %global

ok:
  ret i1 true

global:
  %ga = ptrtoint ptr %p to i64
  %global_ok = call i1 @__gevo_check_global(i64 %ga, i64 %n, i64 %align, i32 %site)
  ret i1 %global_ok
}

; The range of the test's buffer that holds %a, for a kernel parameter's
; pointer, and 1 where the table marks it read-only (else 0): found once
; per thread at the kernel's entry, so that an access through that
; parameter is checked inline against this one range
; (ir/guard/inline_check.rs). No buffer holds %a: the empty range {1, 0},
; which no access fits.
define { i64, i64, i64 } @__gevo_range_of(i64 %a) #0 {
entry:
  %count = load i64, ptr addrspace(4) getelementptr inbounds ([128 x i64], ptr addrspace(4) @__gevo_guard_table, i64 0, i64 1), align 8
  br label %loop

loop:
  %i = phi i64 [ 0, %entry ], [ %next, %body ]
  %more = icmp ult i64 %i, %count
  br i1 %more, label %body, label %none

body:
  %twice = shl i64 %i, 1
  %at = add i64 %twice, 2
  %begin_at = getelementptr inbounds [128 x i64], ptr addrspace(4) @__gevo_guard_table, i64 0, i64 %at
  %begin = load i64, ptr addrspace(4) %begin_at, align 8
  %end_at = getelementptr inbounds i64, ptr addrspace(4) %begin_at, i64 1
  %limit = load i64, ptr addrspace(4) %end_at, align 8
  %after = icmp uge i64 %a, %begin
  %before = icmp ult i64 %a, %limit
  %inside = and i1 %after, %before
  %next = add i64 %i, 1
  br i1 %inside, label %found, label %loop

found:
  %read_only_bits = load i64, ptr addrspace(4) getelementptr inbounds ([128 x i64], ptr addrspace(4) @__gevo_guard_table, i64 0, i64 126), align 8
  %shifted = lshr i64 %read_only_bits, %i
  %read_only = and i64 %shifted, 1
  %r0 = insertvalue { i64, i64, i64 } undef, i64 %begin, 0
  %r1 = insertvalue { i64, i64, i64 } %r0, i64 %limit, 1
  %r2 = insertvalue { i64, i64, i64 } %r1, i64 %read_only, 2
  ret { i64, i64, i64 } %r2

none:
  ret { i64, i64, i64 } { i64 1, i64 0, i64 0 }
}

;; Divergent barriers (ir/guard/barriers.rs). A __syncthreads() is an
;; aligned barrier: the lanes of a warp that have not returned must reach it
;; together, or it hangs. The guarded build's barrier is the unaligned one,
;; which lanes may reach apart. Before it, each barrier site polls until the
;; lanes with it (activemask) are the warp's live lanes; lanes still apart
;; after the poll are compared with them, and end there.

; The thread's index in its block, counted as warps are.
define i32 @__gevo_linear_thread() #0 {
  %x = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %y = call i32 @llvm.nvvm.read.ptx.sreg.tid.y()
  %z = call i32 @llvm.nvvm.read.ptx.sreg.tid.z()
  %nx = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %ny = call i32 @llvm.nvvm.read.ptx.sreg.ntid.y()
  %zy = mul i32 %z, %ny
  %row = add i32 %zy, %y
  %rows = mul i32 %row, %nx
  %linear = add i32 %rows, %x
  ret i32 %linear
}

define ptr addrspace(3) @__gevo_live_word() #0 {
  %linear = call i32 @__gevo_linear_thread()
  %warp = lshr i32 %linear, 5
  %at = getelementptr inbounds [32 x i32], ptr addrspace(3) @__gevo_live, i32 0, i32 %warp
  ret ptr addrspace(3) %at
}

; At a kernel's entry, where a warp's lanes are together: lane 0 writes
; them as the warp's live lanes (a predicated store: no lane leaves early).
; Answers the warp's word, which the kernel keeps for its barriers.
define ptr addrspace(3) @__gevo_live_init() #0 {
  %mask = call i32 @llvm.nvvm.activemask()
  %lane = call i32 @llvm.nvvm.read.ptx.sreg.laneid()
  %at = call ptr addrspace(3) @__gevo_live_word()
  %address = ptrtoint ptr addrspace(3) %at to i64
  call void asm sideeffect "{\0A.reg .pred %gevo_l;\0Asetp.eq.u32 %gevo_l, $0, 0;\0A@%gevo_l st.volatile.shared.u32 [$1], $2;\0A}", "r,l,r"(i32 %lane, i64 %address, i32 %mask)
  ret ptr addrspace(3) %at
}

; At a kernel's return: the lanes returning together are no longer live,
; cleared by one of them (one shared atomic a warp, not one a lane). The
; fence orders the clear before the threads' exit, which a waiting
; barrier counts.
define void @__gevo_live_exit(ptr addrspace(3) %at) #0 {
  %address = ptrtoint ptr addrspace(3) %at to i64
  call void asm sideeffect "{\0A.reg .b32 %gevo_m, %gevo_n, %gevo_b, %gevo_l;\0A.reg .pred %gevo_p;\0Aactivemask.b32 %gevo_m;\0Aneg.s32 %gevo_n, %gevo_m;\0Aand.b32 %gevo_n, %gevo_n, %gevo_m;\0Amov.u32 %gevo_l, %laneid;\0Amov.u32 %gevo_b, 1;\0Ashl.b32 %gevo_b, %gevo_b, %gevo_l;\0Asetp.eq.u32 %gevo_p, %gevo_n, %gevo_b;\0Anot.b32 %gevo_m, %gevo_m;\0A@%gevo_p red.shared.and.b32 [$0], %gevo_m;\0Amembar.cta;\0A}", "l,~{memory}"(i64 %address)
  ret void
}

; Before a barrier reached by the lanes %arrived still apart after the
; poll, in a kernel whose checks call the runtime (ir/guard/record.rs): a
; live lane of the warp that is not among them reaches it apart (or
; another barrier). Recorded with that
; lane as the address (its linear index | x size << 16 | y size << 32, as
; the written-out check packs it), and the lane exits (it stays live: its
; warp's other lanes see the same and exit).
define void @__gevo_barrier_check(ptr addrspace(3) %at, i32 %arrived, i32 %site) #0 {
entry:
  %live = load volatile i32, ptr addrspace(3) %at, align 4
  %together = icmp eq i32 %live, %arrived
  br i1 %together, label %done, label %apart

apart:
  %missing = xor i32 %arrived, -1
  %away = and i32 %live, %missing
  %differ = xor i32 %live, %arrived
  %none_away = icmp eq i32 %away, 0
  %pick = select i1 %none_away, i32 %differ, i32 %away
  %other_lane = call i32 @llvm.cttz.i32(i32 %pick, i1 true)
  %linear = call i32 @__gevo_linear_thread()
  %base = and i32 %linear, -32
  %other = add i32 %base, %other_lane
  %nx = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %ny = call i32 @llvm.nvvm.read.ptx.sreg.ntid.y()
  %other64 = zext i32 %other to i64
  %nx64 = zext i32 %nx to i64
  %ny64 = zext i32 %ny to i64
  %nxs = shl i64 %nx64, 16
  %nys = shl i64 %ny64, 32
  %with_x = or i64 %other64, %nxs
  %packed = or i64 %with_x, %nys
  call void @__gevo_record(i64 7, i32 %site, i64 %packed)
  ; The lane ends here: lanes that go on apart would pair their warp syncs
  ; with different barriers and could wait for each other for ever.
  call void asm sideeffect "exit;", ""()
  br label %done

done:
  ret void
}

; At a kernel's entry (ir/guard/poison.rs): the block's threads together
; fill [%base, %base + %bytes) of shared memory with the poison word, so
; that a read of bytes no thread of this block wrote gives the poison and
; not what an earlier block left there. The word is the table's pattern
; with its low 20 bits mixed with the block's index: the pattern's sign,
; exponent and high mantissa bits stay (all ones make every float and
; double read a NaN), and the low bits differ from block to block. Whole
; words where %base is 4-aligned, then the remaining bytes.
define void @__gevo_poison_shared(ptr addrspace(3) %base, i64 %bytes) #0 {
entry:
  %pattern64 = load i64, ptr addrspace(4) getelementptr inbounds ([128 x i64], ptr addrspace(4) @__gevo_guard_table, i64 0, i64 125), align 8
  %pattern = trunc i64 %pattern64 to i32
  %bx = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %by = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.y()
  %bz = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.z()
  %gx = call i32 @llvm.nvvm.read.ptx.sreg.nctaid.x()
  %gy = call i32 @llvm.nvvm.read.ptx.sreg.nctaid.y()
  %bzy = mul i32 %bz, %gy
  %brow = add i32 %bzy, %by
  %brows = mul i32 %brow, %gx
  %block = add i32 %brows, %bx
  %hashed = mul i32 %block, -1640531535
  %low = lshr i32 %hashed, 12
  %word = xor i32 %pattern, %low
  %linear = call i32 @__gevo_linear_thread()
  %thread = zext i32 %linear to i64
  %nx = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %ny = call i32 @llvm.nvvm.read.ptx.sreg.ntid.y()
  %nz = call i32 @llvm.nvvm.read.ptx.sreg.ntid.z()
  %nxy = mul i32 %nx, %ny
  %n32 = mul i32 %nxy, %nz
  %n = zext i32 %n32 to i64
  %address = ptrtoint ptr addrspace(3) %base to i64
  %misaligned = and i64 %address, 3
  %aligned = icmp eq i64 %misaligned, 0
  %all_words = lshr i64 %bytes, 2
  %words = select i1 %aligned, i64 %all_words, i64 0
  br label %word_loop

word_loop:
  %w = phi i64 [ %thread, %entry ], [ %w_next, %word_body ]
  %more_words = icmp ult i64 %w, %words
  br i1 %more_words, label %word_body, label %bytes_start

word_body:
  %w_at = getelementptr inbounds i32, ptr addrspace(3) %base, i64 %w
  store i32 %word, ptr addrspace(3) %w_at, align 4
  %w_next = add i64 %w, %n
  br label %word_loop

bytes_start:
  %done_bytes = shl i64 %words, 2
  %b_first = add i64 %done_bytes, %thread
  br label %byte_loop

byte_loop:
  %b = phi i64 [ %b_first, %bytes_start ], [ %b_next, %byte_body ]
  %more_bytes = icmp ult i64 %b, %bytes
  br i1 %more_bytes, label %byte_body, label %done

byte_body:
  %b_lane = and i64 %b, 3
  %b_shift64 = shl i64 %b_lane, 3
  %b_shift = trunc i64 %b_shift64 to i32
  %b_word = lshr i32 %word, %b_shift
  %b_value = trunc i32 %b_word to i8
  %b_at = getelementptr inbounds i8, ptr addrspace(3) %base, i64 %b
  store i8 %b_value, ptr addrspace(3) %b_at, align 1
  %b_next = add i64 %b, %n
  br label %byte_loop

done:
  ret void
}

; Not inlined: the kernel's own blocks stay as they were (a check inlined
; with its branches would split them, and code generation fuses a multiply
; and an add only within one block: the guarded build's floating-point
; results would differ from the ordinary build's). The checks that are
; inlined (ir/guard/inline_check.rs) have no branches.
attributes #0 = { noinline nounwind }
