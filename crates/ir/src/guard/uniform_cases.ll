; Cases for ir/guard/uniform.rs: each function's one barrier is reached
; together by the lanes of a warp where the name begins with `together_`,
; and is not proven so where it begins with `apart_`.

declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
declare void @llvm.nvvm.barrier0()

; Straight-line code.
define void @together_straight() {
  call void @llvm.nvvm.barrier0()
  ret void
}

; After the join of a branch on the thread's index.
define void @together_after_join(ptr addrspace(1) %p) {
entry:
  %t = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %c = icmp ult i32 %t, 16
  br i1 %c, label %then, label %join
then:
  store i32 1, ptr addrspace(1) %p
  br label %join
join:
  call void @llvm.nvvm.barrier0()
  ret void
}

; Inside a branch on the thread's index.
define void @apart_in_branch() {
entry:
  %t = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %c = icmp ult i32 %t, 16
  br i1 %c, label %then, label %done
then:
  call void @llvm.nvvm.barrier0()
  br label %done
done:
  ret void
}

; Inside a branch on the block's index: the same for the whole block.
define void @together_branch_on_block() {
entry:
  %b = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %c = icmp ult i32 %b, 16
  br i1 %c, label %then, label %done
then:
  call void @llvm.nvvm.barrier0()
  br label %done
done:
  ret void
}

; In a loop bounded by the block's size, stepping a uniform stride.
define void @together_uniform_loop() {
entry:
  %n = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  br label %loop
loop:
  %s = phi i32 [ 1, %entry ], [ %next, %loop ]
  call void @llvm.nvvm.barrier0()
  %next = shl i32 %s, 1
  %more = icmp ult i32 %next, %n
  br i1 %more, label %loop, label %done
done:
  ret void
}

; In a loop whose bound is the thread's index: lanes leave it apart.
define void @apart_divergent_loop() {
entry:
  %t = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  br label %loop
loop:
  %s = phi i32 [ 1, %entry ], [ %next, %loop ]
  call void @llvm.nvvm.barrier0()
  %next = shl i32 %s, 1
  %more = icmp ult i32 %next, %t
  br i1 %more, label %loop, label %done
done:
  ret void
}

; A uniform-looking loop whose stride comes from a phi at the join of a
; divergent branch.
define void @apart_stride_from_divergent_join() {
entry:
  %t = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %n = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %c = icmp ult i32 %t, 16
  br i1 %c, label %one, label %two
one:
  br label %join
two:
  br label %join
join:
  %step = phi i32 [ 1, %one ], [ 2, %two ]
  br label %loop
loop:
  %s = phi i32 [ 0, %join ], [ %next, %loop ]
  call void @llvm.nvvm.barrier0()
  %next = add i32 %s, %step
  %more = icmp ult i32 %next, %n
  br i1 %more, label %loop, label %done
done:
  ret void
}

; Lanes past the end return first; the rest reach the barrier together.
define void @together_after_early_return(i32 %len) {
entry:
  %t = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %out = icmp uge i32 %t, %len
  br i1 %out, label %leave, label %work
leave:
  ret void
work:
  call void @llvm.nvvm.barrier0()
  ret void
}

; Lanes leave a barrier loop on their index and meet again after it,
; where they wait for the lane still looping.
define void @apart_leaving_lanes_wait_after_the_loop(ptr addrspace(1) %p) {
entry:
  %t = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  br label %loop
loop:
  %s = phi i32 [ 1, %entry ], [ %next, %loop ]
  call void @llvm.nvvm.barrier0()
  %next = shl i32 %s, 1
  %m = and i32 %next, %t
  %more = icmp eq i32 %m, 0
  br i1 %more, label %loop, label %after
after:
  store i32 %s, ptr addrspace(1) %p
  ret void
}

; A condition loaded from memory may differ between lanes.
define void @apart_branch_on_load(ptr addrspace(1) %p) {
entry:
  %v = load i32, ptr addrspace(1) %p
  %c = icmp eq i32 %v, 0
  br i1 %c, label %then, label %done
then:
  call void @llvm.nvvm.barrier0()
  br label %done
done:
  ret void
}

; A loop no lane ever leaves.
define void @apart_endless() {
entry:
  br label %loop
loop:
  call void @llvm.nvvm.barrier0()
  br label %loop
}
