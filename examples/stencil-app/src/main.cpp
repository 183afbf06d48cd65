// stencil-app: runs the stencil5 kernel whose PTX gevo_optimize() built into
// this program, and checks it against a CPU reference.
//
//   stencil-app               says which PTX it carries, then runs and checks
//                             the kernel (needs cuda.h at build time and a GPU)
//   stencil-app --print-ptx   writes the embedded PTX to stdout, byte for byte
//   stencil-app --origin      writes which PTX it is ("original" or "evolved: ...")

#include "gevo_stencil.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

namespace {

#ifdef GEVO_HAVE_CUDA_H

// One Jacobi sweep, as stencil.cu computes it.
std::vector<float> reference(const std::vector<float>& in, int nx, int ny)
{
    std::vector<float> out(in.size());
    for (int y = 0; y < ny; y++) {
        for (int x = 0; x < nx; x++) {
            int i = y * nx + x;
            if (x == 0 || y == 0 || x == nx - 1 || y == ny - 1) {
                out[i] = in[i];
            } else {
                out[i] = 0.2f * (in[i] + in[i - nx] + in[i + nx] + in[i - 1] + in[i + 1]);
            }
        }
    }
    return out;
}

int fail(const char* what, CUresult r)
{
    const char* name = nullptr;
    cuGetErrorName(r, &name);
    std::fprintf(stderr, "stencil-app: %s: %s\n", what, name ? name : "unknown CUDA error");
    return 1;
}

int run_kernel()
{
    const int nx = 300, ny = 200;
    std::vector<float> in(static_cast<size_t>(nx) * ny);
    unsigned state = 12345;
    for (float& v : in) {
        state = state * 1664525u + 1013904223u;
        v = static_cast<float>(state >> 8) / 8388608.0f - 1.0f;  // in [-1, 1)
    }
    size_t bytes = in.size() * sizeof(float);

    CUresult r = cuInit(0);
    if (r != CUDA_SUCCESS)
        return fail("no CUDA driver or GPU (cuInit)", r);
    CUdevice device;
    CUcontext context;
    if ((r = cuDeviceGet(&device, 0)) != CUDA_SUCCESS)
        return fail("cuDeviceGet", r);
    if ((r = cuDevicePrimaryCtxRetain(&context, device)) != CUDA_SUCCESS)
        return fail("cuDevicePrimaryCtxRetain", r);
    if ((r = cuCtxSetCurrent(context)) != CUDA_SUCCESS)
        return fail("cuCtxSetCurrent", r);

    CUmodule module;
    CUfunction function;
    if ((r = gevo_load_stencil(&module, &function)) != CUDA_SUCCESS)
        return fail("loading the embedded PTX", r);

    CUdeviceptr d_in, d_out;
    if ((r = cuMemAlloc(&d_in, bytes)) != CUDA_SUCCESS || (r = cuMemAlloc(&d_out, bytes)) != CUDA_SUCCESS)
        return fail("cuMemAlloc", r);
    if ((r = cuMemcpyHtoD(d_in, in.data(), bytes)) != CUDA_SUCCESS)
        return fail("cuMemcpyHtoD", r);
    int x = nx, y = ny;
    void* args[] = {&d_in, &d_out, &x, &y};
    unsigned gx = (nx + 15) / 16, gy = (ny + 15) / 16;
    if ((r = cuLaunchKernel(function, gx, gy, 1, 16, 16, 1, 0, nullptr, args, nullptr)) != CUDA_SUCCESS)
        return fail("cuLaunchKernel", r);
    if ((r = cuCtxSynchronize()) != CUDA_SUCCESS)
        return fail("the kernel", r);
    std::vector<float> out(in.size());
    if ((r = cuMemcpyDtoH(out.data(), d_out, bytes)) != CUDA_SUCCESS)
        return fail("cuMemcpyDtoH", r);
    cuMemFree(d_in);
    cuMemFree(d_out);
    cuModuleUnload(module);
    cuDevicePrimaryCtxRelease(device);

    std::vector<float> want = reference(in, nx, ny);
    float worst = 0.0f;
    for (size_t i = 0; i < out.size(); i++)
        worst = std::fmax(worst, std::fabs(out[i] - want[i]));
    bool ok = worst <= 1e-5f;
    std::printf("stencil-app: %dx%d on the GPU: max |error| %g against the CPU: %s\n", nx, ny, worst,
                ok ? "ok" : "WRONG");
    return ok ? 0 : 1;
}

#endif

}  // namespace

int main(int argc, char** argv)
{
    if (argc == 2 && std::strcmp(argv[1], "--print-ptx") == 0) {
        size_t n = gevo_ptx_stencil_size();
        return std::fwrite(gevo_ptx_stencil(), 1, n, stdout) == n ? 0 : 1;
    }
    if (argc == 2 && std::strcmp(argv[1], "--origin") == 0) {
        std::printf("%s\n", gevo_ptx_stencil_origin());
        return 0;
    }
    if (argc != 1) {
        std::fprintf(stderr, "usage: %s [--print-ptx | --origin]\n", argv[0]);
        return 2;
    }
    std::printf("stencil-app: embedded PTX of %s: %s (%zu bytes)\n", gevo_ptx_stencil_entry(),
                gevo_ptx_stencil_origin(), gevo_ptx_stencil_size());
#ifdef GEVO_HAVE_CUDA_H
    return run_kernel();
#else
    std::printf("stencil-app: built without cuda.h, so it cannot run the kernel here\n");
    return 0;
#endif
}
