// Stands in for kernels/stencil.cu where nothing can compile it (no CUDA
// toolkit, and MODE REPLACE off): see CMakeLists.txt.
#include "stencil.h"

const char* stencil_gpu(const float*, float*, int, int)
{
    return "built without a CUDA compiler or toolkit, so it cannot run the kernel here";
}
