/*
 * stencil.cu: one Jacobi sweep of a 2-D 5-point stencil, shared-memory tiled
 * (the stencil of tests/fixtures/kernels/, as an application would have it).
 *
 *   interior cells:  out[y][x] = 0.2f * (in[y][x] + in[y-1][x] + in[y+1][x]
 *                                        + in[y][x-1] + in[y][x+1])
 *   boundary cells (x == 0, y == 0, x == nx-1, y == ny-1) copy in[y][x].
 *
 * Row-major nx x ny arrays; launch with 16x16 blocks and a grid of
 * ceil(nx/16) x ceil(ny/16). It carries inefficiencies gevo removes: a second
 * __syncthreads() right after the first, stores to halo corners nobody reads,
 * and a reload of the centre value from shared memory.
 *
 * A plain CUDA source: with a CUDA installation clang includes the CUDA
 * headers; without one, gevo_optimize() supplies the little it needs.
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
