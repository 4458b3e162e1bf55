/*
 * kcap_mem.c — the memory operations capture hands to kcap_call_record().
 *
 * Host memory: reads go through process_vm_readv on our own pid, so a bad pointer in a
 * call we record becomes an EFAULT (capture skipped, counted) instead of a SIGSEGV in the
 * host; where that syscall is filtered (seccomp) we fall back to memcpy. KV rows are read
 * with batched iovecs, one syscall per 1024 rows; the iovec arrays (32 KiB) live on the heap,
 * never on the calling thread's stack (a host thread may have a 16 KiB stack; the bytes are
 * part of the reservation of kcap_size.c).
 *
 * Device memory: through the CUDA driver loaded at run time (common/kcap_cu.h), only when
 * the host itself has loaded libcuda (a CPU-only process never gets a CUDA context from
 * us). Copies are enqueued on the call's own stream so inputs are read before the kernel
 * and outputs after it, in stream order; KV rows are gathered on the device by a small
 * kernel (embedded PTX, kcap_gather.cu) so only the referenced rows cross PCIe. This is the
 * synchronous path (the calling thread waits for its stream); kcap_gpu.c is the
 * zero-stall one. The host's current context is saved and restored around our work.
 */
#include "kcap_mem.h"
#include "kcap_log.h"
#include "kcap_cu.h"

#include <dlfcn.h>
#include <link.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#define KCAP_IOV_BATCH 1024
#define KCAP_GATHER_CHUNK (64u << 20)

static atomic_int g_vm_broken; /* process_vm_readv unavailable: use memcpy */

static int kcap_safe_read_iov(struct iovec *l, struct iovec *r, size_t cnt, size_t total)
{
    if (!atomic_load_explicit(&g_vm_broken, memory_order_relaxed)) {
        ssize_t got = process_vm_readv(getpid(), l, cnt, r, cnt, 0);
        if (got == (ssize_t)total)
            return 0;
        if (got >= 0 || (errno != ENOSYS && errno != EPERM))
            return -1; /* EFAULT, or transient (ENOMEM): this read fails, the next one retries */
        /* ENOSYS / EPERM (seccomp, hardened kernels): trust the pointers instead */
        atomic_store(&g_vm_broken, 1);
    }
    for (size_t i = 0; i < cnt; i++)
        memcpy(l[i].iov_base, r[i].iov_base, l[i].iov_len);
    return 0;
}

static int h_copy_to_host(void *ctx, void *dst, const void *src, size_t n)
{
    kcap_devctx *dc = ctx;
    if (n == 0)
        return 0;
    if (dc->max_copy && n > dc->max_copy)
        return dc->err = KCAP_ERR_FULL;
    /* process_vm_readv moves at most ~2 GB per call; chunk generously */
    const size_t step = 1u << 30;
    for (size_t off = 0; off < n; off += step) {
        size_t len = n - off < step ? n - off : step;
        struct iovec l = {(char *)dst + off, len}, r = {(char *)src + off, len};
        if (kcap_safe_read_iov(&l, &r, 1, len))
            return dc->err = KCAP_ERR_ARG;
    }
    return 0;
}

static int h_gather_rows(void *ctx, void *dst_host, const void *pool, size_t row_bytes,
                         size_t stride_bytes, const int64_t *rows, size_t nrows)
{
    kcap_devctx *dc = ctx;
    if (dc->max_copy && row_bytes && nrows > dc->max_copy / row_bytes)
        return dc->err = KCAP_ERR_FULL;
    if (nrows == 0)
        return 0;
    struct iovec *l = malloc(2 * KCAP_IOV_BATCH * sizeof *l);
    if (!l)
        return dc->err = KCAP_ERR_NOMEM;
    struct iovec *r = l + KCAP_IOV_BATCH;
    size_t i = 0;
    int rc = 0;
    while (!rc && i < nrows) {
        size_t cnt = 0, total = 0;
        for (; i < nrows && cnt < KCAP_IOV_BATCH; i++, cnt++) {
            if (rows[i] < 0 || (dc->num_slots && rows[i] >= dc->num_slots)) {
                rc = dc->err = KCAP_ERR_ARG;
                break;
            }
            l[cnt].iov_base = (char *)dst_host + i * row_bytes;
            l[cnt].iov_len = row_bytes;
            r[cnt].iov_base = (char *)pool + (size_t)rows[i] * stride_bytes;
            r[cnt].iov_len = row_bytes;
            total += row_bytes;
        }
        if (!rc && kcap_safe_read_iov(l, r, cnt, total))
            rc = dc->err = KCAP_ERR_ARG;
    }
    free(l);
    return rc;
}

void kcap_mem_host_ops(kcap_devctx *dc, kcap_mem_ops *ops)
{
    *ops = *kcap_host_mem_ops(); /* plain host memory (formats' ops) ... */
    ops->ctx = dc;
    ops->copy_to_host = h_copy_to_host; /* ... except that reads of the host's pointers never fault */
    ops->gather_rows = h_gather_rows;
}

/* ------------------------------------------------------------------------------------ */
/* device                                                                                */

static atomic_int g_cuda_seen; /* the host has loaded libcuda (sticky) */

/* dl_iterate_phdr callback: 1 (stop) at the driver library (libcuda.so.1, or the
 * unversioned libcuda.so a host may dlopen). */
static int kcap_is_libcuda(struct dl_phdr_info *info, size_t size, void *ud)
{
    (void)size, (void)ud;
    const char *n = info->dlpi_name, *b = n ? strrchr(n, '/') : NULL;
    b = b ? b + 1 : n;
    return b && (!strcmp(b, "libcuda.so.1") || !strcmp(b, "libcuda.so"));
}

/* The driver API when the host has loaded libcuda. Looked up by walking the loaded objects,
 * not with dlopen(RTLD_NOLOAD): a failing dlopen runs the loader's error path, which with
 * lazy binding needs more stack than a small host thread has (a 16 KiB caller died there). */
static const kcap_cu *kcap_cu_if_loaded(void)
{
    if (!atomic_load_explicit(&g_cuda_seen, memory_order_relaxed)) {
        if (!dl_iterate_phdr(kcap_is_libcuda, NULL))
            return NULL;
        atomic_store(&g_cuda_seen, 1);
    }
    return kcap_cu_load(NULL);
}

int kcap_mem_classify(const void *ptr, const void **cu_out, void **ctx_out)
{
    const kcap_cu *cu = kcap_cu_if_loaded();
    if (!cu || !ptr)
        return 0;
    unsigned int mt = 0;
    if (cu->cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)ptr) !=
        CUDA_SUCCESS)
        return 0;
    if (mt != CU_MEMORYTYPE_DEVICE && mt != CU_MEMORYTYPE_UNIFIED)
        return 0; /* pinned host memory: the CPU library's business, read it directly */
    CUcontext c = NULL;
    if (cu->cuPointerGetAttribute(&c, CU_POINTER_ATTRIBUTE_CONTEXT, (CUdeviceptr)ptr) !=
            CUDA_SUCCESS ||
        !c)
        return 0;
    *cu_out = cu;
    *ctx_out = c;
    return 1;
}

int kcap_dev_push(kcap_devctx *dc, void **saved)
{
    const kcap_cu *cu = dc->cu;
    CUcontext cur = NULL;
    if (cu->cuCtxGetCurrent(&cur) != CUDA_SUCCESS)
        return -1;
    *saved = cur;
    if (cur != (CUcontext)dc->ctx && cu->cuCtxSetCurrent((CUcontext)dc->ctx) != CUDA_SUCCESS)
        return -1;
    return 0;
}

void kcap_dev_pop(kcap_devctx *dc, void *saved)
{
    const kcap_cu *cu = dc->cu;
    CUcontext cur = NULL;
    if (cu->cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur != (CUcontext)saved)
        cu->cuCtxSetCurrent((CUcontext)saved);
}

int kcap_dev_stream_capturing(kcap_devctx *dc)
{
    const kcap_cu *cu = dc->cu;
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    CUresult r = cu->cuStreamIsCapturing((CUstream)dc->stream, &st);
    if (r != CUDA_SUCCESS)
        return 1; /* cannot tell (e.g. legacy stream during global capture): stay hands-off */
    return st != CU_STREAM_CAPTURE_STATUS_NONE;
}

void kcap_dev_meta(kcap_devctx *dc, kcap_meta *m)
{
    const kcap_cu *cu = dc->cu;
    CUdevice dev;
    if (cu->cuCtxGetDevice(&dev) == CUDA_SUCCESS) {
        /* no rank variable (SGLang passes tp_rank as an argument, not in the environment):
           the ordinal of the device the call ran on names the worker */
        if (m->rank < 0)
            m->rank = (int)dev;
        if (cu->cuDeviceGetName(m->device_name, (int)sizeof m->device_name, dev) != CUDA_SUCCESS)
            m->device_name[0] = '\0';
        cu->cuDeviceGetAttribute(&m->cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
        cu->cuDeviceGetAttribute(&m->cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
    }
    cu->cuDriverGetVersion(&m->driver_version);
    /* the runtime the host uses, if it exports one (torch's libcudart does) */
    int (*rtv)(int *) = (int (*)(int *))dlsym(RTLD_DEFAULT, "cudaRuntimeGetVersion");
    if (rtv && rtv(&m->runtime_version) != 0)
        m->runtime_version = 0;
}

/* Per-context module with the gather kernels (a module belongs to one context). */
typedef struct kcap_modent {
    CUcontext ctx;
    CUmodule mod;
    CUfunction fn[3];
    int ok;
} kcap_modent;
static kcap_modent g_mods[16];
static pthread_mutex_t g_mod_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int g_log_ptx;

/* Functions of the embedded PTX for the current context; 0 when available. */
int kcap_dev_module(const void *cuv, void **fn_gather, void **fn_stage, void **fn_gate)
{
    const kcap_cu *cu = cuv;
    if (!kcap_gather_ptx[0])
        return -1;
    CUcontext cur = NULL;
    if (cu->cuCtxGetCurrent(&cur) != CUDA_SUCCESS || !cur)
        return -1;
    pthread_mutex_lock(&g_mod_lock);
    kcap_modent *e = NULL;
    for (int i = 0; i < 16 && !e; i++)
        if (g_mods[i].ctx == cur)
            e = &g_mods[i];
    if (!e) {
        for (int i = 0; i < 16 && !e; i++)
            if (!g_mods[i].ctx)
                e = &g_mods[i];
        if (e) {
            e->ctx = cur;
            static const char *const names[3] = {"kcap_gather_rows", "kcap_stage",
                                                 "kcap_stage_gate"};
            CUresult r = cu->cuModuleLoadData(&e->mod, kcap_gather_ptx);
            e->ok = r == CUDA_SUCCESS;
            for (int k = 0; k < 3 && e->ok; k++)
                e->ok = cu->cuModuleGetFunction(&e->fn[k], e->mod, names[k]) == CUDA_SUCCESS;
            if (!e->ok)
                kcap_log_once(&g_log_ptx, KCAP_LOG_WARN,
                              "cannot load the gather kernels (%s); using row copies",
                              kcap_cu_errstr(cu, r));
        }
    }
    int ok = e && e->ok;
    if (ok) {
        if (fn_gather)
            *fn_gather = e->fn[0];
        if (fn_stage)
            *fn_stage = e->fn[1];
        if (fn_gate)
            *fn_gate = e->fn[2];
    }
    pthread_mutex_unlock(&g_mod_lock);
    return ok ? 0 : -1;
}

static int d_fail(kcap_devctx *dc, CUresult r)
{
    if (!dc->err) {
        dc->err = KCAP_ERR_CUDA;
        dc->cu_err = (int)r;
    }
    return -1;
}

static int d_copy_to_host(void *ctx, void *dst, const void *src, size_t n)
{
    kcap_devctx *dc = ctx;
    const kcap_cu *cu = dc->cu;
    if (n == 0)
        return 0;
    if (dc->max_copy && n > dc->max_copy)
        return dc->err = KCAP_ERR_FULL;
    CUstream s = (CUstream)dc->stream;
    CUresult r = cu->cuMemcpyDtoHAsync(dst, (CUdeviceptr)src, n, s);
    if (r == CUDA_SUCCESS)
        r = cu->cuStreamSynchronize(s);
    return r == CUDA_SUCCESS ? 0 : d_fail(dc, r);
}

static int d_gather_rows(void *ctx, void *dst_host, const void *pool, size_t row_bytes,
                         size_t stride_bytes, const int64_t *rows, size_t nrows)
{
    kcap_devctx *dc = ctx;
    const kcap_cu *cu = dc->cu;
    CUstream s = (CUstream)dc->stream;
    if (nrows == 0)
        return 0;
    if (!row_bytes || (dc->max_copy && nrows > dc->max_copy / row_bytes))
        return dc->err = KCAP_ERR_FULL;
    for (size_t i = 0; i < nrows; i++)
        if (rows[i] < 0 || (dc->num_slots && rows[i] >= dc->num_slots))
            return dc->err = KCAP_ERR_ARG;
    void *fn = NULL;
    CUresult r = CUDA_SUCCESS;
    if (kcap_dev_module(cu, &fn, NULL, NULL) == 0) {
        size_t chunk = KCAP_GATHER_CHUNK / row_bytes;
        if (chunk == 0)
            chunk = 1;
        if (chunk > nrows)
            chunk = nrows;
        CUdeviceptr didx = 0, dout = 0;
        r = cu->cuMemAlloc(&didx, chunk * sizeof(int64_t));
        if (r == CUDA_SUCCESS)
            r = cu->cuMemAlloc(&dout, chunk * row_bytes);
        for (size_t off = 0; r == CUDA_SUCCESS && off < nrows; off += chunk) {
            size_t n = nrows - off < chunk ? nrows - off : chunk;
            r = cu->cuMemcpyHtoDAsync(didx, rows + off, n * sizeof(int64_t), s);
            if (r != CUDA_SUCCESS)
                break;
            CUdeviceptr src = (CUdeviceptr)pool;
            long long sb = (long long)stride_bytes, rb = (long long)row_bytes,
                      nn = (long long)n;
            void *params[] = {&src, &sb, &rb, &didx, &nn, &dout};
            unsigned grid = (unsigned)(n < 65535 ? n : 65535);
            r = cu->cuLaunchKernel((CUfunction)fn, grid, 1, 1, 128, 1, 1, 0, s, params, NULL);
            if (r == CUDA_SUCCESS)
                r = cu->cuMemcpyDtoHAsync((char *)dst_host + off * row_bytes, dout, n * row_bytes, s);
            if (r == CUDA_SUCCESS)
                r = cu->cuStreamSynchronize(s);
        }
        if (dout)
            cu->cuMemFree(dout);
        if (didx)
            cu->cuMemFree(didx);
        if (r == CUDA_SUCCESS)
            return 0;
        if (r != CUDA_ERROR_OUT_OF_MEMORY)
            return d_fail(dc, r);
        /* no room for the scratch rows on a full GPU: row copies need none */
    }
    for (size_t i = 0; i < nrows && r == CUDA_SUCCESS; i++)
        r = cu->cuMemcpyDtoHAsync((char *)dst_host + i * row_bytes,
                                  (CUdeviceptr)pool + (size_t)rows[i] * stride_bytes, row_bytes, s);
    if (r == CUDA_SUCCESS)
        r = cu->cuStreamSynchronize(s);
    return r == CUDA_SUCCESS ? 0 : d_fail(dc, r);
}

void kcap_mem_dev_ops(kcap_devctx *dc, kcap_mem_ops *ops)
{
    memset(ops, 0, sizeof *ops);
    ops->ctx = dc;
    ops->copy_to_host = d_copy_to_host;
    ops->gather_rows = d_gather_rows;
}
