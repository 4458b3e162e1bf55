/*
 * kcap_devmem.c — device context, properties and device-memory kcap_mem_ops for replay.
 *
 * Uploads are queued. Rebuilding a pool at its captured slot ids writes thousands of
 * scattered ~1 KiB rows, and one synchronous cuMemcpyHtoD per row would make upload the
 * slowest step of a replay (KCAP_REPLAY_UPLOAD=sync keeps that path, for diagnosis: 3.6 s
 * against 2.5 s for the 20-snapshot H200 corpus, docs/PERF.md, Replay). So small copies are
 * staged into pinned memory and issued as async copies; the queue is flushed and the stream
 * synchronised before any other operation and whenever staging fills, so every op still
 * looks synchronous to its caller.
 *
 * Every operation runs on the one replay stream (copies, memsets, the kernel), never on the
 * legacy default stream, so ordering is explicit. (cuMemcpyBatchAsync was tried for the
 * flush: on the H200 with driver 580 it gave corrupt pools in one run and crashed the
 * process in the next, so it is not used.)
 */
#include "kcap_devmem.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STAGE_BYTES ((size_t)64 << 20) /* pinned staging for queued uploads */
#define STAGE_MAX_COPY ((size_t)1 << 20) /* larger copies go straight through */
#define QUEUE_MAX 65536

struct kcap_dev {
    const kcap_cu *cu;
    CUdevice dev;
    CUcontext ctx;
    CUstream stream;
    kcap_dev_info info;
    kcap_mem_ops ops;
    /* upload queue */
    unsigned char *stage; /* pinned, STAGE_BYTES; NULL = no queueing */
    size_t stage_used;
    size_t nq;
    CUdeviceptr *q_dst, *q_src;
    size_t *q_size;
    int failed;           /* a queued copy failed: reported by the next op */
};

int kcap_dev_error(const kcap_dev *d, CUresult r, kcap_error *err, const char *what)
{
    /* These leave the context unusable: say so, or every later case's failure looks like
     * a new, unrelated problem. */
    int sticky = r == CUDA_ERROR_ILLEGAL_ADDRESS || r == CUDA_ERROR_LAUNCH_FAILED ||
                 r == CUDA_ERROR_MISALIGNED_ADDRESS || r == CUDA_ERROR_ILLEGAL_INSTRUCTION ||
                 r == CUDA_ERROR_HARDWARE_STACK_ERROR || r == CUDA_ERROR_INVALID_PC ||
                 r == CUDA_ERROR_ASSERT || r == CUDA_ERROR_ECC_UNCORRECTABLE;
    return kcap_error_set(err, KCAP_ERR_CUDA, "%s: CUDA error %d (%s)%s", what, (int)r,
                          kcap_cu_errstr(d ? d->cu : NULL, r),
                          sticky ? "; the CUDA context is lost, later cases in this process "
                                   "will fail too"
                                 : "");
}

static CUdeviceptr dptr(const void *p) { return (CUdeviceptr)(uintptr_t)p; }

/* Issue every queued upload and wait for it; non-zero if any failed. */
static int flush(kcap_dev *d)
{
    int bad = d->failed;
    d->failed = 0;
    if (!d->nq)
        return bad;
    const kcap_cu *cu = d->cu;
    for (size_t i = 0; i < d->nq; i++)
        if (cu->cuMemcpyHtoDAsync(d->q_dst[i], (const void *)(uintptr_t)d->q_src[i],
                                  d->q_size[i], d->stream) != CUDA_SUCCESS)
            bad = 1;
    if (cu->cuStreamSynchronize(d->stream) != CUDA_SUCCESS)
        bad = 1;
    d->nq = 0;
    d->stage_used = 0;
    return bad;
}

int kcap_dev_sync(kcap_dev *d) { return flush(d) ? KCAP_ERR_CUDA : KCAP_OK; }

/* Wait for the stream; non-zero on failure. */
static int sync_stream(kcap_dev *d)
{
    return d->cu->cuStreamSynchronize(d->stream) != CUDA_SUCCESS;
}

static int dm_to_host(void *ctx, void *dst, const void *src, size_t n)
{
    kcap_dev *d = ctx;
    if (flush(d))
        return 1;
    if (!n)
        return 0;
    return d->cu->cuMemcpyDtoHAsync(dst, dptr(src), n, d->stream) != CUDA_SUCCESS ||
           sync_stream(d);
}

static int dm_from_host(void *ctx, void *dst, const void *src, size_t n)
{
    kcap_dev *d = ctx;
    if (!n)
        return 0;
    if (!d->stage || n > STAGE_MAX_COPY) {
        /* from pageable memory the async copy returns once src has been consumed */
        if (flush(d))
            return 1;
        return d->cu->cuMemcpyHtoDAsync(dptr(dst), src, n, d->stream) != CUDA_SUCCESS ||
               sync_stream(d);
    }
    size_t at = (d->stage_used + 63) & ~(size_t)63;
    if (at + n > STAGE_BYTES || d->nq == QUEUE_MAX) {
        if (flush(d))
            return 1;
        at = 0;
    }
    /* the caller may reuse src as soon as we return: the bytes are ours from here */
    memcpy(d->stage + at, src, n);
    d->q_dst[d->nq] = dptr(dst);
    d->q_src[d->nq] = (CUdeviceptr)(uintptr_t)(d->stage + at);
    d->q_size[d->nq++] = n;
    d->stage_used = at + n;
    return 0;
}

static void *dm_alloc(void *ctx, size_t n)
{
    kcap_dev *d = ctx;
    CUdeviceptr p = 0;
    if (flush(d))
        d->failed = 1;
    /* a zero-byte tensor still needs a distinct non-NULL pointer: the ABI rejects NULL */
    if (d->cu->cuMemAlloc(&p, n ? n : 256) != CUDA_SUCCESS)
        return NULL;
    return (void *)(uintptr_t)p;
}

static void dm_release(void *ctx, void *p)
{
    kcap_dev *d = ctx;
    if (flush(d))
        d->failed = 1; /* release cannot fail; the next op reports it */
    if (p)
        d->cu->cuMemFree(dptr(p));
}

static int dm_fill(void *ctx, void *dst, int byte, size_t n)
{
    kcap_dev *d = ctx;
    if (flush(d))
        return 1;
    if (!n)
        return 0;
    return d->cu->cuMemsetD8Async(dptr(dst), (unsigned char)byte, n, d->stream) !=
               CUDA_SUCCESS ||
           sync_stream(d);
}

static int dm_gather(void *ctx, void *dst_host, const void *pool, size_t row_bytes,
                     size_t pool_stride_bytes, const int64_t *rows, size_t nrows)
{
    kcap_dev *d = ctx;
    if (flush(d))
        return 1;
    for (size_t i = 0; i < nrows; i++)
        if (d->cu->cuMemcpyDtoHAsync((char *)dst_host + i * row_bytes,
                                     dptr(pool) + (CUdeviceptr)rows[i] * pool_stride_bytes,
                                     row_bytes, d->stream) != CUDA_SUCCESS)
            return 1;
    return sync_stream(d);
}

static int attr(kcap_dev *d, CUdevice_attribute a)
{
    int v = 0;
    if (d->cu->cuDeviceGetAttribute(&v, a, d->dev) != CUDA_SUCCESS)
        return 0;
    return v;
}

int kcap_dev_open(int ordinal, kcap_dev **out, kcap_error *err)
{
    *out = NULL;
    const char *why = NULL;
    const kcap_cu *cu = kcap_cu_load(&why);
    if (!cu)
        return kcap_error_set(err, KCAP_ERR_UNSUPPORTED, "no usable GPU: %s",
                              why ? why : "CUDA driver not available");
    kcap_dev *d = calloc(1, sizeof *d);
    if (!d)
        return kcap_error_set(err, KCAP_ERR_NOMEM, "out of memory");
    d->cu = cu;
    CUresult r;
    int count = 0;
    cu->cuDeviceGetCount(&count);
    if (ordinal < 0 || ordinal >= count) {
        free(d);
        return kcap_error_set(err, KCAP_ERR_ARG, "no CUDA device %d (this machine has %d)",
                              ordinal, count);
    }
    if ((r = cu->cuDeviceGet(&d->dev, ordinal)) != CUDA_SUCCESS ||
        (r = cu->cuDevicePrimaryCtxRetain(&d->ctx, d->dev)) != CUDA_SUCCESS) {
        kcap_dev_error(d, r, err, "cannot open CUDA device");
        free(d);
        return KCAP_ERR_CUDA;
    }
    if ((r = cu->cuCtxSetCurrent(d->ctx)) != CUDA_SUCCESS ||
        (r = cu->cuStreamCreate(&d->stream, CU_STREAM_DEFAULT)) != CUDA_SUCCESS) {
        kcap_dev_error(d, r, err, "cannot set up the CUDA context");
        free(d);
        return KCAP_ERR_CUDA;
    }
    kcap_dev_info *in = &d->info;
    cu->cuDeviceGetName(in->name, sizeof in->name, d->dev);
    in->cc_major = attr(d, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
    in->cc_minor = attr(d, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    in->sm_count = attr(d, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
    in->l2_bytes = (size_t)attr(d, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
    in->mem_clock_khz = attr(d, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE);
    in->bus_width_bits = attr(d, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH);
    /* double data rate: two transfers per clock on each of bus_width bits */
    in->peak_bw_gbs = in->mem_clock_khz * 1e3 * (in->bus_width_bits / 8.0) * 2.0 / 1e9;
    cu->cuMemGetInfo(&in->free_bytes, &in->total_bytes);

    /* Upload queue. Without pinned staging (allocation refused) every copy is direct. */
    const char *mode = getenv("KCAP_REPLAY_UPLOAD");
    void *stage = NULL;
    d->q_dst = malloc(QUEUE_MAX * sizeof *d->q_dst);
    d->q_src = malloc(QUEUE_MAX * sizeof *d->q_src);
    d->q_size = malloc(QUEUE_MAX * sizeof *d->q_size);
    if (!(mode && !strcmp(mode, "sync")) && d->q_dst && d->q_src && d->q_size &&
        cu->cuMemHostAlloc(&stage, STAGE_BYTES, 0) == CUDA_SUCCESS)
        d->stage = stage;
    snprintf(in->upload_mode, sizeof in->upload_mode, "%s", d->stage ? "async" : "sync");

    d->ops.ctx = d;
    d->ops.copy_to_host = dm_to_host;
    d->ops.copy_from_host = dm_from_host;
    d->ops.alloc = dm_alloc;
    d->ops.release = dm_release;
    d->ops.fill = dm_fill;
    d->ops.gather_rows = dm_gather;
    *out = d;
    return KCAP_OK;
}

void kcap_dev_free(kcap_dev *d)
{
    if (!d)
        return;
    flush(d);
    if (d->stream) {
        d->cu->cuStreamSynchronize(d->stream);
        d->cu->cuStreamDestroy(d->stream);
    }
    if (d->stage)
        d->cu->cuMemFreeHost(d->stage);
    free(d->q_dst);
    free(d->q_src);
    free(d->q_size);
    /* The primary context stays retained: the kernel library's cudart may still hold
     * state in it until process exit, and releasing it here would tear that down. */
    free(d);
}

const kcap_cu *kcap_dev_cu(const kcap_dev *d) { return d->cu; }
CUstream kcap_dev_stream(const kcap_dev *d) { return d->stream; }
const kcap_dev_info *kcap_dev_get_info(const kcap_dev *d) { return &d->info; }

size_t kcap_dev_free_bytes(const kcap_dev *d)
{
    size_t f = 0, t = 0;
    if (d->cu->cuMemGetInfo(&f, &t) != CUDA_SUCCESS)
        return 0;
    return f;
}

const kcap_mem_ops *kcap_dev_mem_ops(kcap_dev *d) { return &d->ops; }
