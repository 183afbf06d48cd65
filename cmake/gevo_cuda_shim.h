/*
 * gevo_cuda_shim.h: what a simple CUDA kernel needs from the CUDA headers,
 * for clang without a CUDA installation.
 *
 * gevo_optimize() force-includes this header (clang -include) only when
 * clang finds no CUDA installation and the kernel is compiled with
 * -nocudainc -nocudalib (docs/cmake.md). With CUDA installed it is not used:
 * clang includes the real headers itself.
 *
 * It provides the execution-space and memory-space attributes and the
 * built-in variables (threadIdx, blockIdx, blockDim, gridDim, from clang's
 * own resource headers). __syncthreads() is a clang builtin in CUDA device
 * mode. Math functions, atomics, warp intrinsics and anything else from the
 * CUDA headers are not here: kernels using them need a CUDA installation on
 * the build machine.
 */
#ifndef GEVO_CUDA_SHIM_H
#define GEVO_CUDA_SHIM_H

#ifndef __CUDA__
#error "gevo_cuda_shim.h is for CUDA device compilation (clang -x cuda --cuda-device-only)"
#endif

#include <__clang_cuda_builtin_vars.h>

#define __host__ __attribute__((host))
#define __device__ __attribute__((device))
#define __global__ __attribute__((global))
#define __shared__ __attribute__((shared))
#define __constant__ __attribute__((constant))
#define __managed__ __attribute__((managed))
#define __forceinline__ __inline__ __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...) __attribute__((launch_bounds(__VA_ARGS__)))

#endif /* GEVO_CUDA_SHIM_H */
