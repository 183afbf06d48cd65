/* The CPU that assembling PTX in process costs: each PTX file given is
 * assembled through the CUDA toolkit's nvJitLink library, a handle each, and
 * written as OUTDIR/K.cubin (K counts the files from 0). The first file pays
 * the library's start and is reported apart; the rest, their mean CPU (user
 * and system) per module. nvJitLink's cache is off (`-no-cache`). scripts/ptxas-in-process.sh builds and runs it.
 *
 *   nvjitlink_cost OUTDIR ARCH FILE...      ARCH: sm_90, say
 */
#include <nvJitLink.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

static double cpu_seconds(void) {
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    return r.ru_utime.tv_sec + r.ru_utime.tv_usec * 1e-6 + r.ru_stime.tv_sec + r.ru_stime.tv_usec * 1e-6;
}

static char *read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        exit(1);
    }
    fseek(f, 0, SEEK_END);
    *size = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc(*size + 1);
    if (fread(text, 1, *size, f) != *size) {
        perror(path);
        exit(1);
    }
    text[*size] = 0;
    fclose(f);
    return text;
}

/* The module's cubin (its size in *size), or NULL with nvJitLink's log. */
static char *assemble(const char *ptx, size_t size, const char *name, const char *arch_option, size_t *cubin_size) {
    nvJitLinkHandle handle;
    /* Without its cache: a module assembled before would cost nothing. */
    const char *options[] = {arch_option, "-no-cache"};
    if (nvJitLinkCreate(&handle, 2, options) != NVJITLINK_SUCCESS) {
        fprintf(stderr, "nvJitLinkCreate failed for %s\n", arch_option);
        exit(1);
    }
    nvJitLinkResult result = nvJitLinkAddData(handle, NVJITLINK_INPUT_PTX, ptx, size + 1, name);
    if (result == NVJITLINK_SUCCESS)
        result = nvJitLinkComplete(handle);
    char *cubin = NULL;
    if (result == NVJITLINK_SUCCESS) {
        nvJitLinkGetLinkedCubinSize(handle, cubin_size);
        cubin = malloc(*cubin_size);
        nvJitLinkGetLinkedCubin(handle, cubin);
    } else {
        size_t log_size = 0;
        nvJitLinkGetErrorLogSize(handle, &log_size);
        char *log = malloc(log_size + 1);
        nvJitLinkGetErrorLog(handle, log);
        fprintf(stderr, "%s: nvJitLink error %d: %s\n", name, (int)result, log);
        free(log);
    }
    nvJitLinkDestroy(&handle);
    return cubin;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: nvjitlink_cost OUTDIR ARCH FILE...\n");
        return 2;
    }
    char arch_option[64];
    snprintf(arch_option, sizeof arch_option, "-arch=%s", argv[2]);
    double after_first = 0;
    int counted = 0, failed = 0;
    for (int k = 3; k < argc; k++) {
        size_t size, cubin_size = 0;
        char *ptx = read_file(argv[k], &size);
        double started = cpu_seconds();
        char *cubin = assemble(ptx, size, argv[k], arch_option, &cubin_size);
        double spent = cpu_seconds() - started;
        free(ptx);
        if (!cubin) {
            failed++;
            continue;
        }
        if (k == 3) {
            fprintf(stderr, "the first module, with the library's start: %.1f ms\n", spent * 1e3);
        } else {
            after_first += spent;
            counted++;
        }
        char path[4096];
        snprintf(path, sizeof path, "%s/%d.cubin", argv[1], k - 3);
        FILE *out = fopen(path, "wb");
        if (!out || fwrite(cubin, 1, cubin_size, out) != cubin_size) {
            perror(path);
            return 1;
        }
        fclose(out);
        free(cubin);
    }
    printf("%.2f %d %d\n", counted ? after_first / counted * 1e3 : 0.0, counted, failed);
    return failed ? 1 : 0;
}
