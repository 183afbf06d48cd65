/*
 * texture_fetch_functions.h: an empty stand-in, for clang 19 with CUDA 13 or
 * newer.
 *
 * CUDA 13 removed this header (with the texture references it declared), but
 * clang 19's CUDA wrapper header (__clang_cuda_runtime_wrapper.h) still
 * includes it, so every CUDA compilation with such a toolkit stops with
 * "'texture_fetch_functions.h' file not found" (later LLVM no longer
 * includes it: llvm/llvm-project#151766). gevo_optimize() puts this
 * directory last on clang's include path (-idirafter), so a toolkit that
 * still ships the real header is unaffected, and one without it gets
 * nothing: which is what it has.
 */
