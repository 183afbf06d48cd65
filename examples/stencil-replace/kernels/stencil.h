// stencil.h: the host entry of kernels/stencil.cu.
#ifndef STENCIL_H
#define STENCIL_H

// One Jacobi sweep of the nx x ny array in into out, on the GPU with the
// stencil5 kernel. Returns nullptr on success, else what failed.
const char* stencil_gpu(const float* in, float* out, int nx, int ny);

#endif
