/*
 * stencil.cu: one Jacobi sweep of a 2-D 5-point stencil, shared-memory tiled
 * (the kernel of examples/stencil-app), and the host code that launches it
 * with <<<...>>>.
 *
 *   interior cells:  out[y][x] = 0.2f * (in[y][x] + in[y-1][x] + in[y+1][x]
 *                                        + in[y][x-1] + in[y][x+1])
 *   boundary cells (x == 0, y == 0, x == nx-1, y == ny-1) copy in[y][x].
 *
 * A plain CUDA source. With gevo_optimize(... MODE REPLACE) its host side is
 * compiled against the fatbin of the PTX gevo chose, so the launch below runs
 * that PTX; otherwise the project's CUDA compiler builds it as usual.
 */

#define TILE 16

extern "C" __global__ void stencil5(const float* in, float* out, int nx, int ny)
{
    __shared__ float tile[TILE + 2][TILE + 2];

    int tx = threadIdx.x, ty = threadIdx.y;
    int gx = blockIdx.x * TILE + tx;
    int gy = blockIdx.y * TILE + ty;
    int lx = tx + 1, ly = ty + 1;
    bool inside = gx < nx && gy < ny;

    float c = inside ? in[gy * nx + gx] : 0.0f;
    tile[ly][lx] = c;

    if (tx == 0)
        tile[ly][0] = (gx > 0 && gy < ny) ? in[gy * nx + gx - 1] : 0.0f;
    if (tx == TILE - 1)
        tile[ly][TILE + 1] = (gx + 1 < nx && gy < ny) ? in[gy * nx + gx + 1] : 0.0f;
    if (ty == 0)
        tile[0][lx] = (gy > 0 && gx < nx) ? in[(gy - 1) * nx + gx] : 0.0f;
    if (ty == TILE - 1)
        tile[TILE + 1][lx] = (gy + 1 < ny && gx < nx) ? in[(gy + 1) * nx + gx] : 0.0f;

    if (tx == 0 && ty == 0) {
        tile[0][0] = 0.0f;
        tile[0][TILE + 1] = 0.0f;
        tile[TILE + 1][0] = 0.0f;
        tile[TILE + 1][TILE + 1] = 0.0f;
    }

    __syncthreads();
    __syncthreads();

    if (!inside)
        return;

    float r;
    if (gx == 0 || gy == 0 || gx == nx - 1 || gy == ny - 1) {
        r = c;
    } else {
        r = 0.2f * (tile[ly][lx] + tile[ly - 1][lx] + tile[ly + 1][lx]
                    + tile[ly][lx - 1] + tile[ly][lx + 1]);
    }
    out[gy * nx + gx] = r;
}

/*
 * The host side. It is hidden from device compilation (__CUDA_ARCH__ is
 * defined there), so the kernel's device IR can be emitted without the CUDA
 * runtime's headers, as gevo does on machines without a CUDA toolkit.
 */
#ifndef __CUDA_ARCH__

#include "stencil.h"

#include <cstdio>

namespace {

char message[256];

const char* failed(const char* what, cudaError_t e)
{
    std::snprintf(message, sizeof message, "%s: %s (%s)", what, cudaGetErrorName(e),
                  cudaGetErrorString(e));
    return message;
}

}  // namespace

const char* stencil_gpu(const float* in, float* out, int nx, int ny)
{
    int devices = 0;
    cudaError_t e = cudaGetDeviceCount(&devices);
    if (e != cudaSuccess)
        return failed("no usable CUDA device", e);
    if (devices == 0)
        return "no usable CUDA device: none found";

    size_t bytes = static_cast<size_t>(nx) * ny * sizeof(float);
    float *d_in = nullptr, *d_out = nullptr;
    if ((e = cudaMalloc(&d_in, bytes)) != cudaSuccess || (e = cudaMalloc(&d_out, bytes)) != cudaSuccess)
        return failed("cudaMalloc", e);
    if ((e = cudaMemcpy(d_in, in, bytes, cudaMemcpyHostToDevice)) != cudaSuccess)
        return failed("cudaMemcpy to the GPU", e);

    dim3 block(TILE, TILE);
    dim3 grid((nx + TILE - 1) / TILE, (ny + TILE - 1) / TILE);
    stencil5<<<grid, block>>>(d_in, d_out, nx, ny);
    if ((e = cudaGetLastError()) != cudaSuccess)
        return failed("launching stencil5", e);
    if ((e = cudaDeviceSynchronize()) != cudaSuccess)
        return failed("running stencil5", e);

    if ((e = cudaMemcpy(out, d_out, bytes, cudaMemcpyDeviceToHost)) != cudaSuccess)
        return failed("cudaMemcpy from the GPU", e);
    cudaFree(d_in);
    cudaFree(d_out);
    return nullptr;
}

#endif
