; Cases for ir/guard/aligned.rs: each function's one load is proven
; aligned from its root where the name begins with `aligned_`, and is not
; where it begins with `tested_`.

@s = addrspace(3) global [256 x float] undef, align 4
@bytes = addrspace(3) global [256 x i8] undef, align 1

define float @aligned_element(ptr addrspace(1) %p, i64 %i) {
  %a = getelementptr inbounds float, ptr addrspace(1) %p, i64 %i
  %v = load float, ptr addrspace(1) %a, align 4
  ret float %v
}

define float @tested_byte_offset(ptr addrspace(1) %p, i64 %i) {
  %a = getelementptr inbounds i8, ptr addrspace(1) %p, i64 %i
  %v = load float, ptr addrspace(1) %a, align 4
  ret float %v
}

define float @aligned_constant_bytes(ptr addrspace(1) %p) {
  %a = getelementptr inbounds i8, ptr addrspace(1) %p, i64 8
  %v = load float, ptr addrspace(1) %a, align 4
  ret float %v
}

define float @tested_odd_constant(ptr addrspace(1) %p) {
  %a = getelementptr inbounds i8, ptr addrspace(1) %p, i64 6
  %v = load float, ptr addrspace(1) %a, align 4
  ret float %v
}

define float @aligned_shared_row(i64 %t) {
  %a = getelementptr inbounds [256 x float], ptr addrspace(3) @s, i64 0, i64 %t
  %v = load float, ptr addrspace(3) %a, align 4
  ret float %v
}

define i32 @tested_variable_less_aligned(i64 %t) {
  %a = getelementptr inbounds [256 x i8], ptr addrspace(3) @bytes, i64 0, i64 %t
  %w = getelementptr inbounds i8, ptr addrspace(3) %a, i64 0
  %v = load i32, ptr addrspace(3) %w, align 4
  ret i32 %v
}

define float @aligned_struct_field(ptr addrspace(1) %p, i64 %i) {
  %a = getelementptr inbounds { i8, float }, ptr addrspace(1) %p, i64 %i, i32 1
  %v = load float, ptr addrspace(1) %a, align 4
  ret float %v
}

define i16 @tested_struct_odd_field(ptr addrspace(1) %p, i64 %i) {
  %a = getelementptr inbounds { i8, i8, i16 }, ptr addrspace(1) %p, i64 %i, i32 1
  %v = load i16, ptr addrspace(1) %a, align 2
  ret i16 %v
}

define float @aligned_both_ways(ptr addrspace(1) %p, i64 %i, i1 %c) {
entry:
  br i1 %c, label %one, label %two
one:
  %a = getelementptr inbounds float, ptr addrspace(1) %p, i64 %i
  br label %join
two:
  %b = getelementptr inbounds i8, ptr addrspace(1) %p, i64 16
  br label %join
join:
  %q = phi ptr addrspace(1) [ %a, %one ], [ %b, %two ]
  %v = load float, ptr addrspace(1) %q, align 4
  ret float %v
}

define float @tested_one_way_odd(ptr addrspace(1) %p, i64 %i, i1 %c) {
  %a = getelementptr inbounds float, ptr addrspace(1) %p, i64 %i
  %b = getelementptr inbounds i8, ptr addrspace(1) %p, i64 2
  %q = select i1 %c, ptr addrspace(1) %a, ptr addrspace(1) %b
  %v = load float, ptr addrspace(1) %q, align 4
  ret float %v
}
