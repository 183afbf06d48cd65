; Cases for ir/guard/poison.rs: in the guarded build, a kernel whose name
; begins with `fills_` fills the shared arrays its `; fills:` line names,
; in that order, then reaches a barrier, before its first own instruction
; (`%first`); a `plain_` kernel has no fill.
target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

@tile = internal addrspace(3) global [64 x float] undef, align 4
@a = internal addrspace(3) global [32 x i32] undef, align 4
@b = internal addrspace(3) global [5 x i8] undef, align 1
@dyn1 = external addrspace(3) global [0 x float], align 4
@dyn2 = external addrspace(3) global [0 x i32], align 4

declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare void @llvm.nvvm.barrier0()

; A static array, written, then the neighbour's element read.
; fills: @tile
define void @fills_static(ptr addrspace(1) %out) {
  %first = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %at = getelementptr inbounds [64 x float], ptr addrspace(3) @tile, i32 0, i32 %first
  store float 1.0, ptr addrspace(3) %at, align 4
  call void @llvm.nvvm.barrier0()
  %pair = xor i32 %first, 1
  %from = getelementptr inbounds [64 x float], ptr addrspace(3) @tile, i32 0, i32 %pair
  %v = load float, ptr addrspace(3) %from, align 4
  %to = getelementptr inbounds float, ptr addrspace(1) %out, i32 %first
  store float %v, ptr addrspace(1) %to, align 4
  ret void
}

; One array of its own, one through a device function it calls (an odd
; size, byte-aligned: the runtime's byte loop).
; fills: @a @b
define void @fills_own_and_callee(ptr addrspace(1) %out) {
  %first = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %at = getelementptr inbounds [32 x i32], ptr addrspace(3) @a, i32 0, i32 %first
  store i32 %first, ptr addrspace(3) %at, align 4
  %v = call i8 @helper(i32 %first)
  %to = getelementptr inbounds i8, ptr addrspace(1) %out, i32 %first
  store i8 %v, ptr addrspace(1) %to, align 1
  ret void
}

define internal i8 @helper(i32 %i) noinline {
  %at = getelementptr inbounds [5 x i8], ptr addrspace(3) @b, i32 0, i32 %i
  %v = load i8, ptr addrspace(3) %at, align 1
  ret i8 %v
}

; Two `extern __shared__` arrays, the same dynamic memory: one fill.
; fills: @dyn1
define void @fills_dynamic(ptr addrspace(1) %out) {
  %first = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %at = getelementptr inbounds float, ptr addrspace(3) @dyn1, i32 %first
  %v = load float, ptr addrspace(3) %at, align 4
  %at2 = getelementptr inbounds i32, ptr addrspace(3) @dyn2, i32 %first
  store i32 0, ptr addrspace(3) %at2, align 4
  %to = getelementptr inbounds float, ptr addrspace(1) %out, i32 %first
  store float %v, ptr addrspace(1) %to, align 4
  ret void
}

; Global memory only.
; fills:
define void @plain_global(ptr addrspace(1) %out) {
  %first = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %to = getelementptr inbounds i32, ptr addrspace(1) %out, i32 %first
  store i32 %first, ptr addrspace(1) %to, align 4
  ret void
}

; The module has shared arrays, this kernel uses none of them.
; fills:
define void @plain_beside_shared(ptr addrspace(1) %out) {
  %first = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %to = getelementptr inbounds float, ptr addrspace(1) %out, i32 %first
  store float 2.0, ptr addrspace(1) %to, align 4
  call void @llvm.nvvm.barrier0()
  ret void
}

!nvvm.annotations = !{!0, !1, !2, !3, !4}
!0 = !{ptr @fills_static, !"kernel", i32 1}
!1 = !{ptr @fills_own_and_callee, !"kernel", i32 1}
!2 = !{ptr @fills_dynamic, !"kernel", i32 1}
!3 = !{ptr @plain_global, !"kernel", i32 1}
!4 = !{ptr @plain_beside_shared, !"kernel", i32 1}
