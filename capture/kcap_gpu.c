/*
 * kcap_gpu.c — issue 8: zero-stall capture on the GPU, eager and inside CUDA graphs.
 *
 * The calling thread never waits for the GPU. Per captured call it enqueues, on the call's
 * own stream, one staging kernel before the real call (inputs: kv_indptr, q rows, visibility,
 * kv_indices and the referenced KV rows, nnz = kv_indptr[bs] read on the device) and one
 * after it (outputs o, lse), into a slot of a device staging ring (kcap_gather.cu). The
 * kernel's last block rings a doorbell in mapped pinned host memory; a drainer thread of
 * ours polls the doorbells (plain memory reads, no CUDA call in any host function), copies
 * the slot to pinned host memory on its own side stream, frees the slot, rebuilds the call
 * from the staged bytes through kcap_call_record (with memory ops that map the call's
 * device addresses onto the staged copy) and hands the snapshot to the writer queue.
 *
 * During CUDA stream capture the two kernels become graph nodes, with a permanent "site"
 * each: at every replay the first block checks the ring's armed budget (a device word the
 * drainer keeps equal to what the host configuration still allows) — disarmed, every block
 * exits after that read; ring full → the replay's snapshot is dropped and counted on the
 * device. Calls captured while the process is dormant are seen because libkcap interposes
 * cudaStreamBeginCapture/EndCapture (kcap_interpose.c) and takes the slow path only while a
 * capture is open. Setup work done inside a capture (allocations, module load) runs with
 * the thread's capture mode exchanged to relaxed so it never invalidates the host's graph.
 */
#include "kcap_cap.h"
#include "kcap_cu.h"

#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define KCAP_MAX_SEGS 10
#define KCAP_EAGER_SITES 64
#define KCAP_GRAPH_SITES 1024
#define KCAP_NSITES (KCAP_EAGER_SITES + KCAP_GRAPH_SITES)
#define KCAP_HDR 64

/* Mirrors of the device structs in kcap_gather.cu (keep in sync). */
typedef struct {
    unsigned long long src;
    long long dst_off, row_bytes, nrows, s0, s1, n1;
    unsigned long long idx;
    int idx_size, pad;
    long long pool_rows;
} kseg;

typedef struct {
    unsigned long long ring, site, unused0, bell, indptr;
    long long slot_bytes, fixed_bytes, per_nnz_bytes;
    int nslots, bs, phase, nsegs, site_id, force;
    kseg seg[KCAP_MAX_SEGS];
} kstage_args;

typedef struct {
    unsigned long long slots;
    unsigned int armed, head, drops_full, drops_big;
    unsigned long long tickets;
    unsigned int state[]; /* [nslots] */
} kring_dev;

typedef struct {
    unsigned int arrived, ready, done;
    int slot;
    long long nnz;
    unsigned long long ticket;
} ksite_dev;

typedef struct {
    unsigned long long ticket;
    long long nnz;
    int site_id;
    int status;
    long long pad[5];
} kslot_hdr;

/* What the host remembers of a call site to rebuild its snapshots. */
typedef struct ksite {
    int used;
    int graph;
    vattn_args args;
    kcap_slot *sl;
    kseg seg_in[5], seg_out[2];
    int nin, nout;
    long long fixed_bytes;
    int status;
    uint64_t seq;
    atomic_int pending;    /* eager: launched, not yet drained */
    uint64_t launched_ns;
    CUevent done; /* eager sites: reusable once the phase-1 kernel has run */
} ksite;

typedef struct kring {
    const kcap_cu *cu;
    CUcontext ctx;
    CUdeviceptr hdr;     /* kring_dev + state[] */
    CUdeviceptr sites;   /* ksite_dev[KCAP_NSITES] */
    CUdeviceptr slots;   /* 0 until first armed */
    CUfunction stage, gate;
    int nslots;
    size_t slot_bytes;
    volatile unsigned long long *bell; /* pinned, mapped */
    unsigned long long *seen;
    void *host_buf;      /* pinned, one slot */
    CUstream side;
    ksite site[KCAP_NSITES];
    int next_eager, next_graph;
    unsigned int pushed_armed;
    unsigned int last_drops;
    pthread_t drainer;
    int drainer_running, stop;
} kring;

static kring *g_ring;
static pthread_mutex_t g_ring_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int g_log_gpu, g_log_ctx, g_log_sites, g_log_stage;

unsigned int kcap_device_budget(void); /* kcap_capture.c */
void kcap_graph_snapshot_taken(void);  /* kcap_capture.c */
void kcap_gpu_eager_settled(int captured); /* kcap_capture.c */

static CUstreamCaptureMode kcap_relax(const kcap_cu *cu)
{
    CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
    cu->cuThreadExchangeStreamCaptureMode(&m);
    return m;
}
static void kcap_unrelax(const kcap_cu *cu, CUstreamCaptureMode m)
{
    cu->cuThreadExchangeStreamCaptureMode(&m);
}

/* ---------------------------------------------------------------------------------- */
/* snapshot rebuild from a staged slot                                                  */

typedef struct {
    kring *r;
    ksite *s;
    const char *slot; /* host copy of the slot */
    long long nnz;
    int bad;
} kstaged;

static const kseg *staged_find(kstaged *st, const char *p, int *is_out)
{
    ksite *s = st->s;
    for (int k = 0; k < s->nin + s->nout; k++) {
        const kseg *g = k < s->nin ? &s->seg_in[k] : &s->seg_out[k - s->nin];
        if (g->idx)
            continue; /* KV rows: gather_rows only */
        long long rows = g->nrows < 0 ? st->nnz : g->nrows;
        long long span = g->nrows < 0 ? rows * g->row_bytes
                                      : (rows ? ((rows - 1) / (g->n1 > 0 ? g->n1 : 1)) * g->s0 +
                                                    ((rows - 1) % (g->n1 > 0 ? g->n1 : 1)) * g->s1 +
                                                    g->row_bytes
                                              : 0);
        const char *b = (const char *)(uintptr_t)g->src;
        if (p >= b && p < b + span) {
            *is_out = k >= s->nin;
            return g;
        }
    }
    return NULL;
}

static int st_copy(void *ctx, void *dst, const void *src, size_t n)
{
    kstaged *st = ctx;
    int o;
    const char *p = src;
    char *d = dst;
    while (n) {
        const kseg *g = staged_find(st, p, &o);
        if (!g)
            return st->bad = 1, -1;
        long long off = p - (const char *)(uintptr_t)g->src;
        long long base = g->nrows < 0 ? st->s->fixed_bytes : g->dst_off;
        if (g->nrows < 0 || g->nrows == 1) { /* dense */
            long long span = g->nrows < 0 ? st->nnz * g->row_bytes : g->row_bytes;
            size_t m = (size_t)(span - off) < n ? (size_t)(span - off) : n;
            memcpy(d, st->slot + base + off, m);
            d += m, p += m, n -= m;
            continue;
        }
        long long n1 = g->n1 > 0 ? g->n1 : 1, s1 = g->s1 > 0 ? g->s1 : g->row_bytes;
        long long t = off / g->s0, rem = off % g->s0, h = rem / s1, inner = rem % s1;
        size_t m;
        if (h < n1 && inner < g->row_bytes) {
            m = (size_t)(g->row_bytes - inner) < n ? (size_t)(g->row_bytes - inner) : n;
            memcpy(d, st->slot + base + (t * n1 + h) * g->row_bytes + inner, m);
        } else { /* a gap between rows of the view: never part of the stored tensor */
            long long to = h < n1 ? s1 - inner : g->s0 - rem;
            m = (size_t)to < n ? (size_t)to : n;
            memset(d, 0, m);
        }
        d += m, p += m, n -= m;
    }
    return 0;
}

static int st_gather(void *ctx, void *dst, const void *pool, size_t row_bytes, size_t stride,
                     const int64_t *rows, size_t nrows)
{
    kstaged *st = ctx;
    (void)rows;
    const kseg *g = &st->s->seg_in[4];
    if ((uintptr_t)pool != g->src || row_bytes != (size_t)g->row_bytes ||
        stride != (size_t)g->s0 || (long long)nrows != st->nnz)
        return st->bad = 1, -1;
    long long off = st->s->fixed_bytes + ((st->nnz * g->idx_size + 15) & ~15ll);
    memcpy(dst, st->slot + off, nrows * row_bytes);
    return 0;
}

static void kcap_drain_slot(kring *r, int slot)
{
    const kcap_cu *cu = r->cu;
    CUdeviceptr src = r->slots + (CUdeviceptr)slot * r->slot_bytes;
    CUresult e = cu->cuMemcpyDtoHAsync(r->host_buf, src, KCAP_HDR, r->side);
    if (e == CUDA_SUCCESS)
        e = cu->cuStreamSynchronize(r->side);
    kslot_hdr h;
    memcpy(&h, r->host_buf, sizeof h);
    ksite *s = (e == CUDA_SUCCESS && h.site_id >= 0 && h.site_id < KCAP_NSITES) ? &r->site[h.site_id] : NULL;
    if (s && s->used) {
        size_t isz = s->args.index_type == VATTN_INDEX_INT64 ? 8 : 4;
        size_t bytes = (size_t)s->fixed_bytes + (((size_t)h.nnz * isz + 15) & ~(size_t)15) +
                       (size_t)h.nnz * 1152;
        if (bytes > r->slot_bytes)
            bytes = r->slot_bytes;
        e = cu->cuMemcpyDtoHAsync(r->host_buf, src, bytes, r->side);
        if (e == CUDA_SUCCESS)
            e = cu->cuStreamSynchronize(r->side);
    }
    /* the slot is ours again as soon as its bytes are on the host */
    unsigned int zero = 0;
    CUresult e2 = cu->cuMemcpyHtoDAsync(r->hdr + offsetof(kring_dev, state) + (size_t)slot * 4,
                                        &zero, 4, r->side);
    if (e2 == CUDA_SUCCESS)
        cu->cuStreamSynchronize(r->side);
    if (!s || !s->used || e != CUDA_SUCCESS || h.status) {
        atomic_fetch_add(&kcap_g_stats.failed_record, 1);
        kcap_log_once(&g_log_stage, KCAP_LOG_WARN, "a staged GPU snapshot could not be read back "
                      "(%s)", e != CUDA_SUCCESS ? kcap_cu_errstr(cu, e) : "bad slot or index");
        return;
    }
    kstaged st = {r, s, r->host_buf, h.nnz, 0};
    kcap_mem_ops ops = {0};
    ops.ctx = &st;
    ops.copy_to_host = st_copy;
    ops.gather_rows = st_gather;
    const kcap_call_desc *d = kcap_call_find(kcap_call_name(s->sl->call));
    kcap_error err = {0};
    kcap_snapshot *snap = kcap_snapshot_create();
    int rc = snap && d ? kcap_call_record(d, &s->args, KCAP_ARG_IN, &ops, snap, &err) : KCAP_ERR_NOMEM;
    if (!rc)
        rc = kcap_call_record(d, &s->args, KCAP_ARG_OUT, &ops, snap, &err);
    uint64_t seq = s->graph ? (uint64_t)h.ticket - 1 : s->seq;
    if (!rc) {
        kcap_devctx dc = {0};
        dc.cu = cu;
        kcap_fill_meta(s->sl, &snap->meta, seq, &dc);
        snap->meta.in_stream_capture = s->graph;
        snap->meta.call_status = s->status;
    }
    if (rc) {
        atomic_fetch_add(&kcap_g_stats.failed_record, 1);
        kcap_log_once(&g_log_stage, KCAP_LOG_WARN, "rebuilding a staged GPU snapshot failed: %s",
                      err.msg[0] ? err.msg : kcap_err_string(rc));
        kcap_snapshot_free(snap);
        return;
    }
    if (kcap_queue_push(snap, seq, snap->meta.rank)) {
        atomic_fetch_add(&kcap_g_stats.dropped_queue, 1);
        kcap_snapshot_free(snap);
        return;
    }
    atomic_fetch_add(&kcap_g_stats.captured, 1);
    atomic_fetch_add(&kcap_g_stats.bytes_accepted, kcap_snapshot_bytes(snap));
    if (s->graph) {
        atomic_fetch_add(&kcap_g_stats.graph_captured, 1);
        kcap_graph_snapshot_taken();
    }
    atomic_store(&s->pending, 0);
}

/* The ring's staging buffer is allocated once, by whichever comes first: the drainer (when
 * `kcap arm` sets a budget) or a calling thread. Serialised, and published only once the
 * device-side header points at it and it is cleared: a caller that saw r->slots early could
 * otherwise launch staging kernels at a buffer the device does not know yet, and two threads
 * could each allocate one (the first call's snapshot then staged into the other buffer). */
static pthread_mutex_t g_slots_lock = PTHREAD_MUTEX_INITIALIZER;

static int kcap_ring_alloc_slots(kring *r)
{
    if (__atomic_load_n(&r->slots, __ATOMIC_ACQUIRE))
        return 0;
    pthread_mutex_lock(&g_slots_lock);
    if (r->slots) {
        pthread_mutex_unlock(&g_slots_lock);
        return 0;
    }
    const kcap_cu *cu = r->cu;
    CUstreamCaptureMode m = kcap_relax(cu);
    CUdeviceptr buf = 0;
    CUresult e = cu->cuMemAlloc(&buf, (size_t)r->nslots * r->slot_bytes);
    if (e == CUDA_SUCCESS) /* slot headers must never look like a finished capture; on our
                              stream, completed below, never racing the host's stream */
        e = cu->cuMemsetD8Async(buf, 0, (size_t)r->nslots * r->slot_bytes, r->side);
    if (e == CUDA_SUCCESS) {
        unsigned long long p = buf;
        e = cu->cuMemcpyHtoDAsync(r->hdr, &p, sizeof p, r->side);
        if (e == CUDA_SUCCESS)
            e = cu->cuStreamSynchronize(r->side);
    }
    if (e == CUDA_SUCCESS)
        __atomic_store_n(&r->slots, buf, __ATOMIC_RELEASE);
    else if (buf)
        cu->cuMemFree(buf);
    kcap_unrelax(cu, m);
    pthread_mutex_unlock(&g_slots_lock);
    if (e != CUDA_SUCCESS)
        kcap_log_once(&g_log_gpu, KCAP_LOG_WARN, "cannot allocate the %zu-byte GPU staging ring: %s",
                      (size_t)r->nslots * r->slot_bytes, kcap_cu_errstr(cu, e));
    return e == CUDA_SUCCESS ? 0 : -1;
}

static void *kcap_drainer_main(void *arg)
{
    kring *r = arg;
    const kcap_cu *cu = r->cu;
    cu->cuCtxSetCurrent(r->ctx);
    int idle = 0;
    while (!r->stop) {
        unsigned int want = kcap_device_budget();
        if (want && !r->slots)
            kcap_ring_alloc_slots(r);
        if (r->slots && want != r->pushed_armed) {
            if (cu->cuMemcpyHtoDAsync(r->hdr + offsetof(kring_dev, armed), &want, 4, r->side) ==
                    CUDA_SUCCESS &&
                cu->cuStreamSynchronize(r->side) == CUDA_SUCCESS)
                r->pushed_armed = want;
        }
        int got = 0;
        for (int i = 0; r->slots && i < r->nslots; i++) {
            unsigned long long b = r->bell[i];
            if (b != r->seen[i]) {
                r->seen[i] = b;
                kcap_drain_slot(r, i);
                got = 1;
            }
        }
        if (r->slots && !(++idle & 63)) { /* device drop counters now and then */
            unsigned int dr[2];
            if (cu->cuMemcpyDtoHAsync(dr, r->hdr + offsetof(kring_dev, drops_full), 8, r->side) ==
                    CUDA_SUCCESS &&
                cu->cuStreamSynchronize(r->side) == CUDA_SUCCESS) {
                unsigned int tot = dr[0] + dr[1];
                if (tot != r->last_drops) {
                    atomic_fetch_add(&kcap_g_stats.dropped_ring_full, tot - r->last_drops);
                    r->last_drops = tot;
                }
            }
        }
        if (!got) {
            struct timespec ts = {0, want ? 100000L : 20000000L};
            nanosleep(&ts, NULL);
        }
    }
    return NULL;
}

/* The ring of the current context, created on first use (NULL: none possible). */
static kring *kcap_ring_get(const kcap_cu *cu, CUcontext ctx)
{
    pthread_mutex_lock(&g_ring_lock);
    kring *r = g_ring;
    if (r) {
        pthread_mutex_unlock(&g_ring_lock);
        if (r->ctx != ctx) {
            kcap_log_once(&g_log_ctx, KCAP_LOG_WARN, "zero-stall capture serves one CUDA context; "
                          "calls on another use the synchronous path");
            return NULL;
        }
        return r->stage ? r : NULL;
    }
    r = calloc(1, sizeof *r);
    g_ring = r;
    if (!r) {
        pthread_mutex_unlock(&g_ring_lock);
        return NULL;
    }
    r->cu = cu;
    r->ctx = ctx;
    const kcap_config *c = kcap_cfg();
    /* slots of 32 MiB (or the whole ring if smaller), at least 2 */
    r->slot_bytes = 32u << 20;
    if (c->ring_bytes / 2 < r->slot_bytes)
        r->slot_bytes = (size_t)(c->ring_bytes / 2) & ~(size_t)255;
    r->nslots = (int)(c->ring_bytes / r->slot_bytes);
    if (r->nslots > 256)
        r->nslots = 256;
    CUstreamCaptureMode m = kcap_relax(cu);
    void *fn = NULL, *gate = NULL;
    CUresult e = CUDA_SUCCESS;
    int ok = kcap_dev_module(cu, NULL, &fn, &gate) == 0;
    r->stage = fn;
    r->gate = gate;
    size_t hb = sizeof(kring_dev) + (size_t)r->nslots * 4;
    if (ok) e = cu->cuMemAlloc(&r->hdr, hb);
    if (ok && e == CUDA_SUCCESS) e = cu->cuMemAlloc(&r->sites, sizeof(ksite_dev) * KCAP_NSITES);
    void *bell = NULL;
    if (ok && e == CUDA_SUCCESS)
        e = cu->cuMemHostAlloc(&bell, sizeof(unsigned long long) * (size_t)r->nslots,
                               CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE);
    if (ok && e == CUDA_SUCCESS) {
        memset(bell, 0, sizeof(unsigned long long) * (size_t)r->nslots);
        r->bell = bell;
        e = cu->cuMemHostAlloc(&r->host_buf, r->slot_bytes, CU_MEMHOSTALLOC_PORTABLE);
    }
    if (ok && e == CUDA_SUCCESS)
        e = cu->cuStreamCreate(&r->side, CU_STREAM_NON_BLOCKING);
    /* Clear the new buffers on OUR stream and wait for that alone: a plain cuMemsetD8 runs on
     * the legacy stream, which is not ordered with a host's non-blocking stream, so it could
     * land after the first staging kernel and wipe what it staged. */
    if (ok && e == CUDA_SUCCESS) e = cu->cuMemsetD8Async(r->hdr, 0, hb, r->side);
    if (ok && e == CUDA_SUCCESS)
        e = cu->cuMemsetD8Async(r->sites, 0, sizeof(ksite_dev) * KCAP_NSITES, r->side);
    if (ok && e == CUDA_SUCCESS) e = cu->cuStreamSynchronize(r->side);
    for (int i = 0; ok && e == CUDA_SUCCESS && i < KCAP_EAGER_SITES; i++)
        e = cu->cuEventCreate(&r->site[i].done, CU_EVENT_DISABLE_TIMING);
    kcap_unrelax(cu, m);
    r->seen = calloc((size_t)r->nslots, sizeof *r->seen);
    if (!ok || e != CUDA_SUCCESS || !r->seen) {
        kcap_log_once(&g_log_gpu, KCAP_LOG_WARN, "zero-stall GPU capture unavailable (%s); using "
                      "the synchronous path", !ok ? "no staging kernel" : kcap_cu_errstr(cu, e));
        r->stage = NULL;
        pthread_mutex_unlock(&g_ring_lock);
        return NULL;
    }
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    r->drainer_running = pthread_create(&r->drainer, NULL, kcap_drainer_main, r) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_mutex_unlock(&g_ring_lock);
    return r;
}

/* Describe the call's tensors as staging segments (offsets in the slot). */
static void kcap_site_layout(ksite *s, const vattn_args *a)
{
    long long T = (long long)a->bs * a->q_len, H = a->num_heads;
    long long off = KCAP_HDR;
    int isz = a->index_type == VATTN_INDEX_INT64 ? 8 : 4;
    memset(s->seg_in, 0, sizeof s->seg_in);
    memset(s->seg_out, 0, sizeof s->seg_out);
#define R16(x) (((x) + 15) & ~15ll)
    kseg *g = &s->seg_in[0]; /* kv_indptr */
    g->src = (uintptr_t)a->kv_indptr, g->dst_off = off, g->row_bytes = 4ll * (a->bs + 1);
    g->nrows = 1, g->n1 = 1, g->s0 = g->row_bytes;
    off += R16(g->row_bytes);
    g = &s->seg_in[1]; /* q rows */
    g->src = (uintptr_t)a->q, g->dst_off = off, g->row_bytes = 2 * VATTN_HEAD_DIM_QK;
    g->nrows = T * H, g->n1 = H, g->s0 = 2 * a->q_stride_t, g->s1 = 2 * a->q_stride_h;
    off += R16(g->row_bytes * T * H);
    int n = 2;
    if (a->visibility) {
        g = &s->seg_in[n++];
        g->src = (uintptr_t)a->visibility, g->dst_off = off;
        g->row_bytes = (long long)a->bs * a->q_len * a->q_len, g->nrows = 1, g->n1 = 1;
        g->s0 = g->row_bytes;
        off += R16(g->row_bytes);
    }
    kseg *o = &s->seg_out[0];
    o->src = (uintptr_t)a->o, o->dst_off = off, o->row_bytes = 2 * VATTN_HEAD_DIM_V;
    o->nrows = T * H, o->n1 = H, o->s0 = 2 * a->o_stride_t, o->s1 = 2 * a->o_stride_h;
    off += R16(o->row_bytes * T * H);
    s->nout = 1;
    if (a->lse) {
        o = &s->seg_out[s->nout++];
        o->src = (uintptr_t)a->lse, o->dst_off = off, o->row_bytes = 4 * T * H, o->nrows = 1;
        o->n1 = 1, o->s0 = o->row_bytes;
        off += R16(o->row_bytes);
    }
    s->fixed_bytes = off;
    g = &s->seg_in[n++]; /* kv_indices (flat, nnz entries) */
    g->src = (uintptr_t)a->kv_indices, g->row_bytes = isz, g->nrows = -1, g->n1 = 1, g->s0 = isz;
    g->idx_size = isz;
    /* KV rows selected by kv_indices: always the last input segment, index 4 when visibility
       is present; keep a fixed place for st_gather */
    kseg kv = {0};
    kv.src = (uintptr_t)a->kv_cache, kv.row_bytes = 2 * VATTN_HEAD_DIM_QK, kv.nrows = -1;
    kv.s0 = 2 * a->kv_stride, kv.idx = (uintptr_t)a->kv_indices, kv.idx_size = isz;
    kv.pool_rows = a->num_slots;
    if (n == 3) { /* no visibility: pad so the KV segment sits at index 4 */
        s->seg_in[3] = s->seg_in[2];
        memset(&s->seg_in[2], 0, sizeof s->seg_in[2]);
        s->seg_in[2].nrows = 0; /* an empty segment */
        n = 4;
    }
    s->seg_in[4] = kv;
    s->nin = 5;
#undef R16
}

static CUresult kcap_launch(kring *r, ksite *s, int sid, int phase, int force, CUstream st)
{
    kstage_args p;
    memset(&p, 0, sizeof p);
    p.ring = r->hdr;
    p.site = r->sites + (CUdeviceptr)sid * sizeof(ksite_dev);
    p.bell = (uintptr_t)r->bell;
    p.indptr = (uintptr_t)s->args.kv_indptr;
    p.slot_bytes = (long long)r->slot_bytes;
    p.fixed_bytes = s->fixed_bytes;
    int isz = s->args.index_type == VATTN_INDEX_INT64 ? 8 : 4;
    p.per_nnz_bytes = isz + 2 * VATTN_HEAD_DIM_QK;
    p.fixed_bytes = s->fixed_bytes;
    p.nslots = r->nslots;
    p.bs = s->args.bs;
    p.phase = phase;
    p.site_id = sid;
    p.force = force;
    if (phase == 0) {
        p.nsegs = s->nin;
        memcpy(p.seg, s->seg_in, sizeof(kseg) * (size_t)s->nin);
    } else {
        p.nsegs = s->nout;
        memcpy(p.seg, s->seg_out, sizeof(kseg) * (size_t)s->nout);
    }
    /* fixed_bytes + 16 of slack for the kv rows' alignment */
    p.fixed_bytes = s->fixed_bytes;
    void *params[] = {&p};
    CUresult e = CUDA_SUCCESS;
    if (phase == 0) /* one thread decides for both phases of this launch */
        e = r->cu->cuLaunchKernel(r->gate, 1, 1, 1, 32, 1, 1, 0, st, params, NULL);
    /* enough blocks to stream the KV rows at full bandwidth; disarmed they exit at once */
    if (e == CUDA_SUCCESS)
        e = r->cu->cuLaunchKernel(r->stage, 264, 1, 1, 256, 1, 1, 0, st, params, NULL);
    return e;
}

int kcap_gpu_capture(kcap_slot *sl, const vattn_args *a, void *ws, size_t wsb, void *stream,
                     uint64_t seq, int in_capture, int *status_out)
{
    kcap_vattn_fn real = atomic_load(&sl->real);
    const kcap_config *c = kcap_cfg();
    if (!c->gpu_async && !in_capture)
        return 1;
    const kcap_cu *cu = kcap_cu_load(NULL);
    CUcontext ctx = NULL;
    if (!cu || cu->cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || !ctx)
        return 1;
    kring *r = kcap_ring_get(cu, ctx);
    if (!r)
        return 1;
    if (!in_capture && kcap_ring_alloc_slots(r))
        return 1;
    int sid = -1;
    pthread_mutex_lock(&g_ring_lock);
    if (in_capture) {
        if (r->next_graph < KCAP_GRAPH_SITES)
            sid = KCAP_EAGER_SITES + r->next_graph++;
    } else {
        int i = r->next_eager;
        /* an eager site is reusable once its last phase-1 kernel ran and was drained */
        /* (a dropped capture never rings: after a second it is presumed dropped) */
        ksite *o = &r->site[i];
        if (!o->used || (cu->cuEventQuery(o->done) == CUDA_SUCCESS &&
                         (!atomic_load(&o->pending) ||
                          kcap_now_ns() - o->launched_ns > 1000000000ull))) {
            sid = i;
            r->next_eager = (i + 1) % KCAP_EAGER_SITES;
        }
    }
    if (sid >= 0) {
        ksite *s = &r->site[sid];
        s->used = 1;
        s->graph = in_capture;
        memcpy(&s->args, a, sizeof *a);
        s->sl = sl;
        s->seq = seq;
        s->launched_ns = kcap_now_ns();
        atomic_store(&s->pending, !in_capture);
        kcap_site_layout(s, a);
    }
    pthread_mutex_unlock(&g_ring_lock);
    if (sid < 0) {
        if (in_capture)
            kcap_log_once(&g_log_sites, KCAP_LOG_WARN, "more than %d graph call sites; further "
                          "ones are not captured", KCAP_GRAPH_SITES);
        atomic_fetch_add(&kcap_g_stats.dropped_sites, 1);
        *status_out = real(a, ws, wsb, stream);
        return -1;
    }
    ksite *s = &r->site[sid];
    CUstream st = (CUstream)stream;
    CUresult e = kcap_launch(r, s, sid, 0, !in_capture, st);
    int status = real(a, ws, wsb, stream);
    s->status = status;
    if (e == CUDA_SUCCESS)
        e = kcap_launch(r, s, sid, 1, 0, st);
    if (e == CUDA_SUCCESS && !in_capture)
        cu->cuEventRecord(s->done, st);
    *status_out = status;
    if (e != CUDA_SUCCESS) {
        atomic_fetch_add(&kcap_g_stats.failed_record, 1);
        kcap_log_once(&g_log_stage, KCAP_LOG_WARN, "launching the staging kernel failed: %s",
                      kcap_cu_errstr(cu, e));
        return -1;
    }
    return in_capture ? 2 : 0;
}

void kcap_gpu_shutdown(int timeout_ms)
{
    kring *r = g_ring;
    if (!r || !r->drainer_running)
        return;
    /* let the drainer pick up what the GPU has finished: wait for the eager sites' events
       (bounded), then one more drain pass */
    uint64_t end = kcap_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    const kcap_cu *cu = r->cu;
    for (int i = 0; i < KCAP_EAGER_SITES; i++)
        while (r->site[i].used && cu->cuEventQuery(r->site[i].done) == CUDA_ERROR_NOT_READY &&
               kcap_now_ns() < end)
            usleep(1000);
    for (int pass = 0; pass < 3 && kcap_now_ns() < end; pass++)
        usleep(5000);
    r->stop = 1;
    pthread_join(r->drainer, NULL);
    r->drainer_running = 0;
    /* final device drop count for the stats line */
    unsigned int dr[2];
    if (r->slots && cu->cuMemcpyDtoHAsync(dr, r->hdr + offsetof(kring_dev, drops_full), 8, r->side) ==
            CUDA_SUCCESS && cu->cuStreamSynchronize(r->side) == CUDA_SUCCESS &&
        dr[0] + dr[1] != r->last_drops) {
        atomic_fetch_add(&kcap_g_stats.dropped_ring_full, dr[0] + dr[1] - r->last_drops);
        r->last_drops = dr[0] + dr[1];
    }
}

void kcap_gpu_atfork_child(void)
{
    /* CUDA does not survive fork: the child never touches the parent's ring */
    g_ring = NULL;
    pthread_mutex_init(&g_ring_lock, NULL);
}
