/*
 * heat: a small application around the stencil5 kernel, and a gevo harness
 * for it (docs/harness.md). It diffuses a random grid for a number of
 * Jacobi sweeps, ping-ponging two buffers on the GPU, and writes the final
 * grid; gevod evolves the kernel by running this whole program.
 *
 *   heat --nx 64 --ny 48 --steps 4 --seed 1 --out DIR [--ptx FILE]
 *
 * The kernel's PTX comes from $GEVO_PTX when gevod runs it, else from
 * --ptx (default stencil.ptx). The result is DIR/grid.f32 (nx*ny floats,
 * row-major). Exit status 0 on success, 1 on any failure.
 */
#include "gevo_harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int usage(const char *self)
{
    fprintf(stderr, "usage: %s --nx N --ny N --steps N --seed N --out DIR [--ptx FILE]\n", self);
    return 2;
}

int main(int argc, char **argv)
{
    long nx = 0, ny = 0, steps = 0, seed = 0;
    const char *out = NULL, *ptx = "stencil.ptx";
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        if (!strcmp(k, "--nx"))
            nx = atol(v);
        else if (!strcmp(k, "--ny"))
            ny = atol(v);
        else if (!strcmp(k, "--steps"))
            steps = atol(v);
        else if (!strcmp(k, "--seed"))
            seed = atol(v);
        else if (!strcmp(k, "--out"))
            out = v;
        else if (!strcmp(k, "--ptx"))
            ptx = v;
        else
            return usage(argv[0]);
    }
    if (argc % 2 != 1 || nx < 1 || ny < 1 || steps < 1 || !out)
        return usage(argv[0]);

    size_t cells = (size_t)nx * (size_t)ny, bytes = cells * sizeof(float);
    float *grid = malloc(bytes);
    if (!grid)
        return 1;
    unsigned state = (unsigned)seed * 2654435761u + 1u;
    for (size_t i = 0; i < cells; i++) {
        state = state * 1664525u + 1013904223u;
        grid[i] = (float)(state >> 8) / 8388608.0f - 1.0f; /* in [-1, 1) */
    }

    gevo_harness h;
    gevo_buffer a, b;
    if (gevo_open(&h, "stencil5", ptx) || gevo_buffer_new(&h, &a, bytes)
        || gevo_buffer_new(&h, &b, bytes) || gevo_buffer_upload(&h, &a, grid)) {
        fprintf(stderr, "heat: %s\n", gevo_error(&h));
        return 1;
    }
    int x = (int)nx, y = (int)ny;
    unsigned grid_dims[3] = {(unsigned)((nx + 15) / 16), (unsigned)((ny + 15) / 16), 1};
    unsigned block[3] = {16, 16, 1};
    gevo_buffer *from = &a, *to = &b;
    for (long s = 0; s < steps; s++) {
        gevo_arg args[4] = {gevo_buffer_arg(from), gevo_buffer_arg(to), GEVO_VALUE(x), GEVO_VALUE(y)};
        if (gevo_launch(&h, grid_dims, block, 0, 4, args)) {
            fprintf(stderr, "heat: step %ld: %s\n", s, gevo_error(&h));
            return 1;
        }
        gevo_buffer *t = from;
        from = to;
        to = t;
    }
    if (gevo_buffer_download(&h, from, grid) || gevo_write_output(&h, out, "grid.f32", grid, bytes)) {
        fprintf(stderr, "heat: %s\n", gevo_error(&h));
        return 1;
    }
    gevo_buffer_free(&h, &a);
    gevo_buffer_free(&h, &b);
    gevo_close(&h);
    free(grid);
    return 0;
}
