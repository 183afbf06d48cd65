/*
 * gevo_harness.h: what a host program needs to serve as a gevo harness
 * (docs/harness.md). Header only, C99 or C++, no CUDA headers needed.
 *
 *   gevo_harness h;
 *   gevo_open(&h, "stencil5", "stencil.ptx");   // $GEVO_PTX, else this file
 *   gevo_buffer in, out;
 *   gevo_buffer_new(&h, &in, bytes); gevo_buffer_upload(&h, &in, host_in);
 *   gevo_arg args[] = { gevo_buffer_arg(&in), gevo_buffer_arg(&out),
 *                       GEVO_VALUE(nx), GEVO_VALUE(ny) };
 *   gevo_launch(&h, grid, block, 0, 4, args);
 *   gevo_buffer_download(&h, &out, host_out);
 *   gevo_close(&h);                               // prints the timing line
 *
 * On the GPU the kernel is loaded from the PTX with the CUDA driver API
 * (libcuda.so.1, opened at run time) and each launch is timed with CUDA
 * events; gevo_close() prints `GEVO_KERNEL_MS=<total>`. When gevod runs the
 * program on its simulator it sets GEVO_SIMULATOR and GEVO_IR: each launch
 * then runs on the CPU through `$GEVO_SIMULATOR sim-launch` and
 * gevo_close() prints `GEVO_KERNEL_COST=<simulated cost>`.
 *
 * Every function returns 0 on success; otherwise gevo_error() says what
 * failed. A buffer may appear at most once among one launch's arguments,
 * and always as a whole (no offsets into it).
 */
#ifndef GEVO_HARNESS_H
#define GEVO_HARNESS_H

#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GEVO_HARNESS_VERSION 1

typedef struct gevo_buffer {
    void *host;               /* the simulator's copy (simulator mode) */
    unsigned long long device; /* CUdeviceptr (GPU mode) */
    size_t bytes;
} gevo_buffer;

typedef struct gevo_arg {
    const gevo_buffer *buffer; /* a buffer argument, or NULL */
    const void *value;         /* else the value's bytes */
    size_t size;
} gevo_arg;

static inline gevo_arg gevo_buffer_arg(const gevo_buffer *b)
{
    gevo_arg a;
    a.buffer = b;
    a.value = NULL;
    a.size = 0;
    return a;
}

static inline gevo_arg gevo_value_arg(const void *value, size_t size)
{
    gevo_arg a;
    a.buffer = NULL;
    a.value = value;
    a.size = size;
    return a;
}

#define GEVO_VALUE(v) gevo_value_arg(&(v), sizeof(v))

/* The few driver API entry points used, as their ABI has them. */
typedef struct gevo_cuda {
    void *lib;
    int (*Init)(unsigned);
    int (*DeviceGet)(int *, int);
    int (*PrimaryCtxRetain)(void **, int);
    int (*PrimaryCtxRelease)(int);
    int (*CtxSetCurrent)(void *);
    int (*ModuleLoadData)(void **, const void *);
    int (*ModuleGetFunction)(void **, void *, const char *);
    int (*ModuleUnload)(void *);
    int (*MemAlloc)(unsigned long long *, size_t);
    int (*MemFree)(unsigned long long);
    int (*MemcpyHtoD)(unsigned long long, const void *, size_t);
    int (*MemcpyDtoH)(void *, unsigned long long, size_t);
    int (*LaunchKernel)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                        unsigned, void *, void **, void **);
    int (*EventCreate)(void **, unsigned);
    int (*EventRecord)(void *, void *);
    int (*EventSynchronize)(void *);
    int (*EventElapsedTime)(float *, void *, void *);
    int (*EventDestroy)(void *);
    int (*GetErrorName)(int, const char **);
} gevo_cuda;

typedef struct gevo_harness {
    int simulate;           /* 1: launches run on gevod's simulator */
    char kernel[256];
    const char *simulator;  /* $GEVO_SIMULATOR */
    const char *ir;         /* $GEVO_IR */
    gevo_cuda cu;
    int device;
    void *context, *module, *function, *start, *stop;
    double kernel_ms;       /* GPU: summed event time of all launches */
    unsigned long long cost; /* simulator: summed cost of all launches */
    unsigned launches;
    char error[512];
} gevo_harness;

static inline int gevo_fail(gevo_harness *h, const char *format, ...)
{
    va_list ap;
    va_start(ap, format);
    vsnprintf(h->error, sizeof h->error, format, ap);
    va_end(ap);
    return -1;
}

static inline const char *gevo_error(const gevo_harness *h)
{
    return h->error;
}

static inline int gevo_cuda_fail(gevo_harness *h, const char *what, int r)
{
    const char *name = NULL;
    if (h->cu.GetErrorName)
        h->cu.GetErrorName(r, &name);
    return gevo_fail(h, "%s: %s (%d)", what, name ? name : "CUDA error", r);
}

/* The first of `names` that libcuda exports (newer ABI versions first). */
static inline void *gevo_cuda_symbol(void *lib, const char *const *names)
{
    for (; *names; names++) {
        void *f = dlsym(lib, *names);
        if (f)
            return f;
    }
    return NULL;
}

static inline int gevo_cuda_open(gevo_harness *h)
{
    gevo_cuda *c = &h->cu;
    c->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!c->lib)
        return gevo_fail(h, "no CUDA driver: %s", dlerror());
#define GEVO_SYM(field, ...)                                                          \
    do {                                                                              \
        static const char *const names_[] = {__VA_ARGS__, NULL};                      \
        void *f_ = gevo_cuda_symbol(c->lib, names_);                                  \
        if (!f_)                                                                      \
            return gevo_fail(h, "libcuda.so.1 lacks %s", names_[0]);                  \
        memcpy(&c->field, &f_, sizeof f_);                                            \
    } while (0)
    GEVO_SYM(Init, "cuInit");
    GEVO_SYM(DeviceGet, "cuDeviceGet");
    GEVO_SYM(PrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    GEVO_SYM(PrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease");
    GEVO_SYM(CtxSetCurrent, "cuCtxSetCurrent");
    GEVO_SYM(ModuleLoadData, "cuModuleLoadData");
    GEVO_SYM(ModuleGetFunction, "cuModuleGetFunction");
    GEVO_SYM(ModuleUnload, "cuModuleUnload");
    GEVO_SYM(MemAlloc, "cuMemAlloc_v2");
    GEVO_SYM(MemFree, "cuMemFree_v2");
    GEVO_SYM(MemcpyHtoD, "cuMemcpyHtoD_v2");
    GEVO_SYM(MemcpyDtoH, "cuMemcpyDtoH_v2");
    GEVO_SYM(LaunchKernel, "cuLaunchKernel");
    GEVO_SYM(EventCreate, "cuEventCreate");
    GEVO_SYM(EventRecord, "cuEventRecord");
    GEVO_SYM(EventSynchronize, "cuEventSynchronize");
    GEVO_SYM(EventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime");
    GEVO_SYM(EventDestroy, "cuEventDestroy_v2", "cuEventDestroy");
    GEVO_SYM(GetErrorName, "cuGetErrorName");
#undef GEVO_SYM
    return 0;
}

/* A whole file, NUL-terminated; NULL (with errno) when it cannot be read. */
static inline char *gevo_read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    char *data = NULL;
    long n;
    if (!f)
        return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0
        && (data = (char *)malloc((size_t)n + 1)) != NULL) {
        if (fread(data, 1, (size_t)n, f) == (size_t)n) {
            data[n] = '\0';
            if (size)
                *size = (size_t)n;
        } else {
            free(data);
            data = NULL;
        }
    }
    fclose(f);
    return data;
}

static inline int gevo_write_file(const char *path, const void *data, size_t bytes)
{
    FILE *f = fopen(path, "wb");
    int ok;
    if (!f)
        return -1;
    ok = fwrite(data, 1, bytes, f) == bytes;
    return (fclose(f) == 0 && ok) ? 0 : -1;
}

/*
 * Loads `kernel` from the PTX in $GEVO_PTX, else from `fallback_ptx` (a
 * file); on the simulator (under gevod) from $GEVO_IR instead.
 */
static inline int gevo_open(gevo_harness *h, const char *kernel, const char *fallback_ptx)
{
    const char *ptx_path = getenv("GEVO_PTX");
    char *ptx;
    int r;
    memset(h, 0, sizeof *h);
    if (strlen(kernel) >= sizeof h->kernel)
        return gevo_fail(h, "kernel name too long");
    strcpy(h->kernel, kernel);
    h->simulator = getenv("GEVO_SIMULATOR");
    h->ir = getenv("GEVO_IR");
    if (h->simulator && *h->simulator) {
        if (!h->ir || !*h->ir)
            return gevo_fail(h, "GEVO_SIMULATOR is set but GEVO_IR is not");
        h->simulate = 1;
        return 0;
    }
    if (!ptx_path || !*ptx_path)
        ptx_path = fallback_ptx;
    if (!ptx_path)
        return gevo_fail(h, "no PTX: GEVO_PTX is not set and there is no fallback");
    if (gevo_cuda_open(h))
        return -1;
    if (!(ptx = gevo_read_file(ptx_path, NULL)))
        return gevo_fail(h, "cannot read the PTX %s: %s", ptx_path, strerror(errno));
    if ((r = h->cu.Init(0)) || (r = h->cu.DeviceGet(&h->device, 0))
        || (r = h->cu.PrimaryCtxRetain(&h->context, h->device))
        || (r = h->cu.CtxSetCurrent(h->context))) {
        free(ptx);
        return gevo_cuda_fail(h, "no usable GPU", r);
    }
    r = h->cu.ModuleLoadData(&h->module, ptx);
    free(ptx);
    if (r)
        return gevo_cuda_fail(h, ptx_path, r);
    if ((r = h->cu.ModuleGetFunction(&h->function, h->module, kernel)))
        return gevo_cuda_fail(h, kernel, r);
    if ((r = h->cu.EventCreate(&h->start, 0)) || (r = h->cu.EventCreate(&h->stop, 0)))
        return gevo_cuda_fail(h, "cuEventCreate", r);
    return 0;
}

static inline int gevo_buffer_new(gevo_harness *h, gevo_buffer *b, size_t bytes)
{
    int r;
    memset(b, 0, sizeof *b);
    b->bytes = bytes;
    if (h->simulate) {
        b->host = calloc(bytes ? bytes : 1, 1);
        return b->host ? 0 : gevo_fail(h, "out of memory (%zu bytes)", bytes);
    }
    if ((r = h->cu.MemAlloc(&b->device, bytes ? bytes : 1)))
        return gevo_cuda_fail(h, "cuMemAlloc", r);
    return 0;
}

static inline int gevo_buffer_upload(gevo_harness *h, gevo_buffer *b, const void *data)
{
    int r;
    if (h->simulate) {
        memcpy(b->host, data, b->bytes);
        return 0;
    }
    if ((r = h->cu.MemcpyHtoD(b->device, data, b->bytes)))
        return gevo_cuda_fail(h, "cuMemcpyHtoD", r);
    return 0;
}

static inline int gevo_buffer_download(gevo_harness *h, const gevo_buffer *b, void *data)
{
    int r;
    if (h->simulate) {
        memcpy(data, b->host, b->bytes);
        return 0;
    }
    if ((r = h->cu.MemcpyDtoH(data, b->device, b->bytes)))
        return gevo_cuda_fail(h, "cuMemcpyDtoH", r);
    return 0;
}

static inline void gevo_buffer_free(gevo_harness *h, gevo_buffer *b)
{
    if (h->simulate)
        free(b->host);
    else if (b->device)
        h->cu.MemFree(b->device);
    memset(b, 0, sizeof *b);
}

/* One launch on the simulator: the buffers go to files, gevod runs the
   kernel's IR over them, and they come back. */
static inline int gevo_simulate_launch(gevo_harness *h, const unsigned grid[3],
                                       const unsigned block[3], unsigned shared, int nargs,
                                       const gevo_arg *args)
{
    const char *tmp = getenv("TMPDIR");
    char dir[4096], path[4200], launch[4200], result[4200];
    FILE *f;
    int i, status, failed = 0;
    unsigned long long cost = 0;
    pid_t pid;
    snprintf(dir, sizeof dir, "%s/gevo-launch-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir))
        return gevo_fail(h, "mkdtemp in %s: %s", dir, strerror(errno));
    snprintf(launch, sizeof launch, "%s/launch.txt", dir);
    snprintf(result, sizeof result, "%s/result.txt", dir);
    if (!(f = fopen(launch, "w"))) {
        failed = gevo_fail(h, "%s: %s", launch, strerror(errno));
        goto done;
    }
    fprintf(f, "gevo-launch 1\ngrid %u %u %u\nblock %u %u %u\nshared %u\n", grid[0], grid[1],
            grid[2], block[0], block[1], block[2], shared);
    for (i = 0; i < nargs && !failed; i++) {
        if (args[i].buffer) {
            snprintf(path, sizeof path, "%s/arg%d.bin", dir, i);
            if (gevo_write_file(path, args[i].buffer->host, args[i].buffer->bytes))
                failed = gevo_fail(h, "%s: %s", path, strerror(errno));
            fprintf(f, "buffer %s\n", path);
        } else {
            size_t k;
            fprintf(f, "value ");
            for (k = 0; k < args[i].size; k++)
                fprintf(f, "%02x", ((const unsigned char *)args[i].value)[k]);
            fprintf(f, "\n");
        }
    }
    if (fclose(f) != 0 && !failed)
        failed = gevo_fail(h, "%s: %s", launch, strerror(errno));
    if (failed)
        goto done;
    fflush(NULL);
    pid = fork();
    if (pid < 0) {
        failed = gevo_fail(h, "fork: %s", strerror(errno));
        goto done;
    }
    if (pid == 0) {
        execl(h->simulator, h->simulator, "sim-launch", "--ir", h->ir, "--kernel", h->kernel,
              "--launch", launch, "--result", result, (char *)NULL);
        fprintf(stderr, "gevo_harness: cannot run %s: %s\n", h->simulator, strerror(errno));
        _exit(127);
    }
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        failed = gevo_fail(h, "launch %u of %s failed on the simulator (its message is above)",
                           h->launches + 1, h->kernel);
        goto done;
    }
    for (i = 0; i < nargs && !failed; i++) {
        size_t n = 0;
        char *data;
        if (!args[i].buffer)
            continue;
        snprintf(path, sizeof path, "%s/arg%d.bin", dir, i);
        data = gevo_read_file(path, &n);
        if (!data || n != args[i].buffer->bytes)
            failed = gevo_fail(h, "%s: cannot read the buffer back", path);
        else
            memcpy(args[i].buffer->host, data, n);
        free(data);
    }
    if (!failed) {
        char *text = gevo_read_file(result, NULL);
        if (!text || sscanf(text, "cost %llu", &cost) != 1)
            failed = gevo_fail(h, "%s: no cost", result);
        free(text);
        h->cost += cost;
    }
done:
    for (i = 0; i < nargs; i++) {
        snprintf(path, sizeof path, "%s/arg%d.bin", dir, i);
        unlink(path);
    }
    unlink(launch);
    unlink(result);
    rmdir(dir);
    return failed;
}

/* Launches the kernel: grid and block are {x, y, z}; `shared` is the
   dynamic shared memory in bytes. Returns once the kernel has finished. */
static inline int gevo_launch(gevo_harness *h, const unsigned grid[3], const unsigned block[3],
                              unsigned shared, int nargs, const gevo_arg *args)
{
    void *params[64];
    float ms = 0;
    int i, r;
    if (nargs > 64)
        return gevo_fail(h, "more than 64 kernel arguments");
    if (h->simulate) {
        if (gevo_simulate_launch(h, grid, block, shared, nargs, args))
            return -1;
        h->launches++;
        return 0;
    }
    for (i = 0; i < nargs; i++)
        params[i] = args[i].buffer ? (void *)&args[i].buffer->device : (void *)args[i].value;
    if ((r = h->cu.EventRecord(h->start, NULL)))
        return gevo_cuda_fail(h, "cuEventRecord", r);
    if ((r = h->cu.LaunchKernel(h->function, grid[0], grid[1], grid[2], block[0], block[1],
                                block[2], shared, NULL, params, NULL)))
        return gevo_cuda_fail(h, "cuLaunchKernel", r);
    if ((r = h->cu.EventRecord(h->stop, NULL)) || (r = h->cu.EventSynchronize(h->stop)))
        return gevo_cuda_fail(h, "the kernel", r);
    if ((r = h->cu.EventElapsedTime(&ms, h->start, h->stop)))
        return gevo_cuda_fail(h, "cuEventElapsedTime", r);
    h->kernel_ms += ms;
    h->launches++;
    return 0;
}

/* Writes `bytes` of `data` to `<dir>/<name>` (dir: the `{out}` directory). */
static inline int gevo_write_output(gevo_harness *h, const char *dir, const char *name,
                                    const void *data, size_t bytes)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (gevo_write_file(path, data, bytes))
        return gevo_fail(h, "%s: %s", path, strerror(errno));
    return 0;
}

/* Prints the timing line gevod reads and releases the GPU. */
static inline void gevo_close(gevo_harness *h)
{
    if (h->simulate) {
        printf("GEVO_KERNEL_COST=%llu\n", h->cost);
    } else if (h->cu.lib) {
        if (h->launches)
            printf("GEVO_KERNEL_MS=%.6f\n", h->kernel_ms);
        if (h->start)
            h->cu.EventDestroy(h->start);
        if (h->stop)
            h->cu.EventDestroy(h->stop);
        if (h->module)
            h->cu.ModuleUnload(h->module);
        if (h->context)
            h->cu.PrimaryCtxRelease(h->device);
    }
    fflush(stdout);
}

#ifdef __cplusplus
}
#endif

#endif /* GEVO_HARNESS_H */
