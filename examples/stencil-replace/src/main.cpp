// stencil-replace: runs the stencil5 kernel through its <<<...>>> launch in
// kernels/stencil.cu and checks it against a CPU reference. With MODE
// REPLACE in effect that launch runs the PTX gevo_optimize() chose.
//
//   stencil-replace               says which code the launch runs, then runs
//                                 and checks the kernel (needs a GPU)
//   stencil-replace --origin      which PTX gevo chose ("original" or "evolved: ...")
//   stencil-replace --replaced    "yes" when the launch runs that PTX, else "no"
//   stencil-replace --print-ptx   the chosen PTX, byte for byte

// Only the declarations: this program uses the runtime API, not cuda.h.
#define GEVO_NO_LOAD_HELPERS 1
#include "gevo_stencil.h"
#include "stencil.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

namespace {

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
    if (argc == 2 && std::strcmp(argv[1], "--replaced") == 0) {
        std::printf("%s\n", GEVO_stencil_REPLACED ? "yes" : "no");
        return 0;
    }
    if (argc != 1) {
        std::fprintf(stderr, "usage: %s [--origin | --replaced | --print-ptx]\n", argv[0]);
        return 2;
    }

    if (GEVO_stencil_REPLACED)
        std::printf("stencil-replace: the launch runs gevo's PTX of %s: %s\n", gevo_ptx_stencil_entry(),
                    gevo_ptx_stencil_origin());
    else
        std::printf("stencil-replace: the launch runs the ordinary build's code (MODE REPLACE is off)\n");

    const int nx = 300, ny = 200;
    std::vector<float> in(static_cast<size_t>(nx) * ny);
    unsigned state = 12345;
    for (float& v : in) {
        state = state * 1664525u + 1013904223u;
        v = static_cast<float>(state >> 8) / 8388608.0f - 1.0f;  // in [-1, 1)
    }
    std::vector<float> out(in.size());
    if (const char* error = stencil_gpu(in.data(), out.data(), nx, ny)) {
        std::fprintf(stderr, "stencil-replace: %s\n", error);
        return 1;
    }

    std::vector<float> want = reference(in, nx, ny);
    float worst = 0.0f;
    for (size_t i = 0; i < out.size(); i++)
        worst = std::fmax(worst, std::fabs(out[i] - want[i]));
    bool ok = worst <= 1e-5f;
    std::printf("stencil-replace: %dx%d on the GPU: max |error| %g against the CPU: %s\n", nx, ny, worst,
                ok ? "ok" : "WRONG");
    return ok ? 0 : 1;
}
