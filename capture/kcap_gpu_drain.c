/*
 * kcap_gpu_drain.c — the drainer thread of the zero-stall GPU path: everything that waits
 * on the GPU happens here, never on a host thread.
 *
 * It keeps the ring's memory (allocated within KCAP_RING_BYTES and what the device can
 * spare, handed back after the process has been disarmed for a while), grants the device
 * graph-replay budget units reserved on the host (and takes idle ones back), watches the doorbells in
 * mapped pinned memory, reads each finished region back through a pinned bounce buffer
 * straight into the snapshot's tensors (the host holds one copy of a snapshot, whatever its
 * size), releases the region in ticket order, rebuilds the call through kcap_call_record
 * with memory ops that map the call's device addresses onto the staged copy, and hands the
 * snapshot to the writer queue — waiting for room there rather than dropping, since the
 * ring already holds the bytes. Drops the device counts (ring full, larger than the ring,
 * no ring memory) are folded into the stats with one log line per reason.
 */
#include "kcap_gpu_int.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t g_mem_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int g_log_full, g_log_big, g_log_read, g_log_queue, g_log_cap;

#define KCAP_RELEASE_IDLE_NS 2000000000ull /* disarmed this long: give the ring's memory back */
#define KCAP_ALLOC_RETRY_NS 1000000000ull

/* Run kcap_ring_ctl on our stream and wait for it (the drainer, or a caller's first use). */
static CUresult kcap_ctl(kring *r, int op, unsigned long long v0, unsigned long long v1,
                         unsigned long long out[3])
{
    const kcap_cu *cu = r->cu;
    CUdeviceptr ring = r->hdr, o = r->ctl_out;
    void *params[] = {&ring, &op, &v0, &v1, &o};
    CUresult e = cu->cuLaunchKernel(r->ctl, 1, 1, 1, KCAP_ONE_WARP, 1, 1, 0, r->side, params, NULL);
    if (e == CUDA_SUCCESS)
        e = cu->cuMemcpyDtoHAsync(out, r->ctl_out, 3 * sizeof(unsigned long long), r->side);
    if (e == CUDA_SUCCESS)
        e = cu->cuStreamSynchronize(r->side);
    return e;
}

int kcap_ring_alloc_mem(kring *r, int may_wait)
{
    if (atomic_load(&r->base))
        return 0;
    if (!may_wait) {
        if (pthread_mutex_trylock(&g_mem_lock))
            return -1;
    } else {
        pthread_mutex_lock(&g_mem_lock);
    }
    if (atomic_load(&r->base) || kcap_now_ns() < r->alloc_retry_ns) {
        int have = atomic_load(&r->base) != 0;
        pthread_mutex_unlock(&g_mem_lock);
        return have ? 0 : -1;
    }
    const kcap_cu *cu = r->cu;
    CUstreamCaptureMode m = kcap_relax(cu);
    size_t fr = 0, tot = 0;
    CUresult e = cu->cuMemGetInfo(&fr, &tot);
    uint64_t want = kcap_cfg()->ring_bytes;
    uint64_t n = e == CUDA_SUCCESS ? kcap_ring_size(want, fr, tot) : 0;
    CUdeviceptr buf = 0;
    if (n)
        e = cu->cuMemAlloc(&buf, (size_t)n);
    unsigned long long out[3];
    if (n && e == CUDA_SUCCESS)
        e = kcap_ctl(r, 1, buf, n, out);
    if (n && e == CUDA_SUCCESS) {
        r->cap = n;
        atomic_store(&r->base, buf);
        kcap_log(KCAP_LOG_INFO, "GPU staging ring: %llu MiB (bound %llu MiB, %zu MiB were free)",
                 (unsigned long long)n >> 20, (unsigned long long)want >> 20, fr >> 20);
    } else {
        if (buf)
            cu->cuMemFree(buf);
        r->alloc_retry_ns = kcap_now_ns() + KCAP_ALLOC_RETRY_NS;
        kcap_gpu_nomem_log(fr, tot, want);
    }
    kcap_unrelax(cu, m);
    int ok = atomic_load(&r->base) != 0;
    pthread_mutex_unlock(&g_mem_lock);
    return ok ? 0 : -1;
}

/* Disarmed and idle: hand the memory back, if no region is in flight (the device decides,
 * under the ring's lock, so no gate can place one meanwhile). */
static void kcap_ring_free_mem(kring *r)
{
    unsigned long long out[3] = {0, 0, 0};
    pthread_mutex_lock(&g_mem_lock);
    CUdeviceptr b = atomic_load(&r->base);
    if (b && kcap_ctl(r, 2, 0, 0, out) == CUDA_SUCCESS && out[0]) {
        atomic_store(&r->base, 0);
        r->cu->cuMemFree(b);
        kcap_log(KCAP_LOG_INFO, "GPU staging ring released (disarmed)");
    }
    pthread_mutex_unlock(&g_mem_lock);
}

/* ---------------------------------------------------------------------------------- */
/* read-back                                                                            */

typedef struct {
    kring *r;
    ksite *s;
    CUdeviceptr region;  /* device address of the region */
    const char *fixed;   /* host copy of the fixed part */
    long long count[KCAP_NCOUNTS]; /* the counts the device read */
} kstaged;

/* Device bytes to host memory through the pinned bounce buffer. */
static int kcap_dev_read(kring *r, void *dst, CUdeviceptr src, size_t n)
{
    const kcap_cu *cu = r->cu;
    char *d = dst;
    while (n) {
        size_t m = n < KCAP_BOUNCE_BYTES ? n : KCAP_BOUNCE_BYTES;
        if (cu->cuMemcpyDtoHAsync(r->bounce, src, m, r->side) != CUDA_SUCCESS ||
            cu->cuStreamSynchronize(r->side) != CUDA_SUCCESS)
            return -1;
        memcpy(d, r->bounce, m);
        d += m, src += m, n -= m;
    }
    return 0;
}

/* The segment (not pool rows: those are gathered) whose source span holds the call's device
 * address p, its rows and its offset in the region; NULL when none. */
static const kseg *staged_find(const kstaged *st, const char *p, long long *rows, long long *off)
{
    const kcap_layout *l = &st->s->lay;
    for (int k = 0; k < l->nin + l->nout; k++) {
        const kseg *g = k < l->nin ? &l->seg_in[k] : &l->seg_out[k - l->nin];
        long long n = kcap_seg_rows(g, st->count);
        if (!g->src || g->idx || n <= 0)
            continue;
        long long n1 = g->n1 > 0 ? g->n1 : 1, last = n - 1;
        long long span = (last / n1) * g->s0 + (last % n1) * g->s1 + g->row_bytes;
        const char *b = (const char *)(uintptr_t)g->src;
        if (p >= b && p < b + span) {
            *rows = n;
            *off = k < l->nin ? kcap_seg_offset(l, k, st->count) : g->dst_off;
            return g;
        }
    }
    return NULL;
}

/* Stored bytes of a segment at region offset `off`: from the host copy of the fixed part,
 * or (counted segments, after it) straight from the device. */
static int st_read(kstaged *st, void *dst, long long off, size_t n)
{
    if (off + (long long)n <= st->s->lay.fixed_bytes) {
        memcpy(dst, st->fixed + off, n);
        return 0;
    }
    return kcap_dev_read(st->r, dst, st->region + (CUdeviceptr)off, n);
}

static int st_copy(void *ctx, void *dst, const void *src, size_t n)
{
    kstaged *st = ctx;
    const char *p = src;
    char *d = dst;
    while (n) {
        long long rows, base;
        const kseg *g = staged_find(st, p, &rows, &base);
        if (!g)
            return -1;
        long long off = p - (const char *)(uintptr_t)g->src;
        long long n1 = g->n1 > 0 ? g->n1 : 1, s1 = g->s1 > 0 ? g->s1 : g->row_bytes;
        size_t m;
        if (n1 == 1 && g->s0 == g->row_bytes) { /* dense: the stored bytes in order */
            long long left = rows * g->row_bytes - off;
            m = (size_t)left < n ? (size_t)left : n;
            if (st_read(st, d, base + off, m))
                return -1;
        } else {
            long long t = off / g->s0, rem = off % g->s0, h = rem / s1, inner = rem % s1;
            if (h < n1 && inner < g->row_bytes) {
                m = (size_t)(g->row_bytes - inner) < n ? (size_t)(g->row_bytes - inner) : n;
                if (st_read(st, d, base + (t * n1 + h) * g->row_bytes + inner, m))
                    return -1;
            } else { /* a gap between rows of the view: never part of the stored tensor */
                long long to = h < n1 ? s1 - inner : g->s0 - rem;
                m = (size_t)to < n ? (size_t)to : n;
                memset(d, 0, m);
            }
        }
        d += m, p += m, n -= m;
    }
    return 0;
}

static int st_gather(void *ctx, void *dst, const void *pool, size_t row_bytes, size_t stride,
                     const int64_t *rows, size_t nrows)
{
    kstaged *st = ctx;
    (void)rows; /* the device gathered exactly these rows, in this order */
    const kcap_layout *l = &st->s->lay;
    for (int k = 0; k < l->nin; k++) {
        const kseg *g = &l->seg_in[k];
        if (!g->idx || (uintptr_t)pool != g->src || row_bytes != (size_t)g->row_bytes ||
            stride != (size_t)g->s0 || (long long)nrows != kcap_seg_rows(g, st->count))
            continue;
        return st_read(st, dst, kcap_seg_offset(l, k, st->count), nrows * row_bytes);
    }
    return -1;
}

/* Reserve room in the writer queue for a snapshot and its transient copy, waiting for the
 * writer rather than dropping (the ring holds the bytes meanwhile); 0 when reserved, -1 when
 * it never fits (larger than what KCAP_QUEUE_BYTES leaves snapshots) or we are stopping. */
static int kcap_wait_queue(kring *r, size_t bytes)
{
    if (bytes > kcap_queue_room()) {
        kcap_log_once(&g_log_queue, KCAP_LOG_WARN,
                      "a %zu-byte GPU snapshot is larger than the %zu bytes KCAP_QUEUE_BYTES=%llu "
                      "leaves snapshots: dropped and counted as queue; raise KCAP_QUEUE_BYTES",
                      bytes, kcap_queue_room(), (unsigned long long)kcap_cfg()->queue_bytes);
        return -1;
    }
    while (kcap_queue_reserve(bytes)) {
        if (atomic_load(&r->stop))
            return -1;
        struct timespec ts = {0, KCAP_QUEUE_WAIT_NS};
        nanosleep(&ts, NULL);
    }
    return 0;
}

/* Push the released front to the device (tail may only grow: a stale value is safe). */
static void kcap_push_tail(kring *r)
{
    const kcap_cu *cu = r->cu;
    unsigned long long v[2] = {r->books->tail, r->books->tail_ticket};
    if (cu->cuMemcpyHtoDAsync(r->hdr + offsetof(kring_dev, tail), &v[0], 8, r->side) == CUDA_SUCCESS &&
        cu->cuMemcpyHtoDAsync(r->hdr + offsetof(kring_dev, tail_ticket), &v[1], 8, r->side) == CUDA_SUCCESS)
        cu->cuStreamSynchronize(r->side);
}

/* One doorbell: read the region back into a snapshot, release it, queue the snapshot. */
static void kcap_drain_one(kring *r, const kbell *b)
{
    ksite *s = kcap_site(r, b->site_id);
    int ok = s && (s->graph || s->gen == b->gen) && !b->status;
    /* the region bounds the snapshot's tensors; its fixed part is held twice for a while */
    size_t bytes = (size_t)(b->end - b->start) + (s ? (size_t)s->lay.fixed_bytes : 0), reserved = 0;
    kcap_snapshot *snap = NULL;
    kcap_error err = {0};
    char *fixed = NULL;
    int rc = ok ? 0 : KCAP_ERR_CORRUPT, not_kept = 0, reported = 0, kept = 0;
    if (!rc && kcap_wait_queue(r, bytes))
        rc = KCAP_ERR_FULL;
    else if (!rc)
        reserved = bytes;
    CUdeviceptr base = atomic_load(&r->base);
    if (!rc && !(fixed = malloc(s->lay.fixed_bytes ? (size_t)s->lay.fixed_bytes : 1)))
        rc = KCAP_ERR_NOMEM;
    CUdeviceptr region = base + (CUdeviceptr)(b->start % r->cap);
    if (!rc && kcap_dev_read(r, fixed, region, (size_t)s->lay.fixed_bytes))
        rc = KCAP_ERR_IO;
    if (!rc) {
        kstaged st = {r, s, region, fixed, {b->count[0], b->count[1]}};
        kcap_mem_ops ops = {0};
        ops.ctx = &st;
        ops.copy_to_host = st_copy;
        ops.gather_rows = st_gather;
        const kcap_call_desc *d = s->sl->desc;
        snap = kcap_snapshot_create();
        rc = snap ? kcap_call_record(d, s->args, KCAP_ARG_IN, &ops, snap, &err) : KCAP_ERR_NOMEM;
        if (!rc)
            rc = kcap_call_record(d, s->args, KCAP_ARG_OUT, &ops, snap, &err);
        if (!rc && s->shadow && !s->graph && kcap_shadow_async_let_go(b->site_id, s->gen)) {
            /* the service went on before this chain had read its inputs: not a finding */
            kcap_gpu_shadow_report(r, s, KCAP_SHADOW_UNJUDGED, NULL, NULL);
            not_kept = reported = 1;
        } else if (!rc && s->shadow && s->status == KCAP_CALL_OK) {
            /* the compare found a divergence: the candidate's outputs were staged too */
            kcap_snapshot *cs = kcap_snapshot_create();
            rc = cs ? kcap_call_record_scalars(d, s->cargs, cs, &err) : KCAP_ERR_NOMEM;
            if (!rc)
                rc = kcap_call_record(d, s->cargs, KCAP_ARG_OUT, &ops, cs, &err);
            if (!rc) {
                reported = 1;
                kept = kcap_gpu_shadow_report(r, s, KCAP_SHADOW_DIVERGED, snap, cs);
                not_kept = !kept;
            }
            kcap_snapshot_free(cs);
        }
    }
    /* a staged divergence that could not be read back is still in the summary: divergent,
       lost (or, let go, unjudged); a stale doorbell (another call holds the site now) is not
       that call's */
    if (s && (s->graph || s->gen == b->gen) && s->shadow && s->status == KCAP_CALL_OK && !reported)
        kcap_gpu_shadow_report(r, s, !s->graph && kcap_shadow_async_let_go(b->site_id, b->gen)
                                         ? KCAP_SHADOW_UNJUDGED : KCAP_SHADOW_LOST, NULL, NULL);
    free(fixed);
    /* the region is free again as soon as its bytes are on the host */
    if (kcap_ring_books_done(r->books, b->ticket, b->end) > 0)
        kcap_push_tail(r);
    uint64_t seq = s && s->graph ? (uint64_t)b->ticket - 1 : s ? s->seq : 0;
    int invalid = !rc && s->status != KCAP_CALL_OK; /* the library rejected the call: not kept */
    if (invalid)
        rc = KCAP_ERR_ARG;
    if (!rc && not_kept) /* shadow: judged (agreed on the host's exact rule, or capped) */
        rc = KCAP_ERR_ARG;
    int by_cap = 0;
    if (!rc && !kcap_bytes_fit(kcap_snapshot_bytes(snap))) {
        rc = KCAP_ERR_FULL;
        by_cap = 1;
    }
    if (!rc) {
        kcap_devctx dc = {0};
        dc.cu = r->cu;
        snprintf(snap->meta.tags, sizeof snap->meta.tags, "%s", s->tags);
        kcap_fill_meta(s->sl, &snap->meta, seq);
        kcap_dev_meta(&dc, &snap->meta);
        snap->meta.in_stream_capture = s->graph;
        snap->meta.call_status = s->status;
        size_t nb = kcap_snapshot_bytes(snap);
        if (kcap_queue_push_reserved(snap, seq, snap->meta.rank, reserved)) {
            rc = KCAP_ERR_FULL; /* the reservation is still ours: given back below */
            atomic_fetch_sub(&kcap_g_stats.bytes_accepted, nb);
        } else {
            reserved = 0; /* it became the queued snapshot's bytes */
        }
    }
    kcap_queue_unreserve(reserved);
    if (kept && rc) /* kept by the summary's count, but no file will hold it */
        kcap_gpu_shadow_report(r, s, KCAP_SHADOW_UNKEPT, snap, NULL);
    if (not_kept) {
        atomic_fetch_add(&kcap_g_stats.shadow_not_kept, 1);
    } else if (invalid) {
        atomic_fetch_add(&kcap_g_stats.skipped_invalid, 1);
    } else if (by_cap) {
        atomic_fetch_add(&kcap_g_stats.dropped_cap, 1);
        kcap_log_once(&g_log_cap, KCAP_LOG_WARN, "KCAP_MAX_BYTES=%llu reached: further snapshots "
                      "that do not fit are dropped and counted",
                      (unsigned long long)kcap_cfg()->max_bytes);
    } else if (rc == KCAP_ERR_FULL) {
        atomic_fetch_add(&kcap_g_stats.dropped_queue, 1);
    } else if (rc) {
        atomic_fetch_add(&kcap_g_stats.failed_record, 1);
        kcap_log_once(&g_log_read, KCAP_LOG_WARN, "a staged GPU snapshot could not be read back: %s",
                      b->status ? "an index was outside the pool" : !ok ? "bad doorbell"
                      : err.msg[0] ? err.msg : kcap_err_string(rc));
    }
    if (rc)
        kcap_snapshot_free(snap);
    else
        atomic_fetch_add(&kcap_g_stats.captured, 1);
    if (s && s->graph) { /* the unit the device took was granted (reserved) by us */
        r->graph_settled++;
        if (r->granted)
            r->granted--;
        if (!rc)
            atomic_fetch_add(&kcap_g_stats.graph_captured, 1);
        kcap_gpu_unit_settled(!rc);
    } else if (s && s->gen == b->gen && atomic_exchange(&s->pending, 0)) {
        kcap_gpu_unit_settled(!rc);
    }
}

/* Eager launches the device chose not to capture (ring full, ...): settle them now, so the
 * budget unit goes back and the site is free. */
static void kcap_settle_eager_drops(kring *r)
{
    for (int i = 0; i < KCAP_EAGER_SITES; i++) {
        ksite *s = kcap_site(r, i);
        if (!atomic_load(&s->pending))
            continue;
        int judged = s->shadow && r->cmp_out;
        unsigned long long o = r->outcome[i];
        int k = kcap_eager_outcome(o, judged, judged ? r->cmp_out[i].verdict : 0, s->gen);
        if (k == KCAP_EAGER_WAIT || k == KCAP_EAGER_STAGED || !atomic_exchange(&s->pending, 0))
            continue;
        /* let go before its candidate ran (its inputs may have changed): no verdict */
        int unjudged = judged && kcap_shadow_async_let_go(i, s->gen);
        /* a shadowed call the compare found in agreement was not staged: judged, not kept */
        if (k == KCAP_EAGER_AGREED || (unjudged && k != KCAP_EAGER_LOST)) /* a lost one is the ring's drop */
            atomic_fetch_add(&kcap_g_stats.shadow_not_kept, 1);
        if (judged)
            kcap_gpu_shadow_report(r, s, unjudged ? KCAP_SHADOW_UNJUDGED : k == KCAP_EAGER_AGREED ? KCAP_SHADOW_AGREED
                                                                                        : KCAP_SHADOW_LOST,
                                   NULL, NULL);
        kcap_gpu_unit_settled(0);
    }
}

/* Device drop counters into the stats, with one line per reason saying what to do. */
static int kcap_read_device(kring *r, kring_dev *h)
{
    const kcap_cu *cu = r->cu;
    if (cu->cuMemcpyDtoHAsync(h, r->hdr, sizeof *h, r->side) != CUDA_SUCCESS ||
        cu->cuStreamSynchronize(r->side) != CUDA_SUCCESS)
        return -1;
    unsigned int now[3] = {h->drops_full, h->drops_big, h->drops_nomem};
    atomic_ullong *ctr[3] = {&kcap_g_stats.dropped_ring_full, &kcap_g_stats.dropped_ring_big,
                             &kcap_g_stats.dropped_ring_nomem};
    for (int k = 0; k < 3; k++) {
        if (now[k] == r->last_drops[k])
            continue;
        atomic_fetch_add(ctr[k], now[k] - r->last_drops[k]);
        r->last_drops[k] = now[k];
        if (k == 0)
            kcap_log_once(&g_log_full, KCAP_LOG_WARN,
                          "GPU staging ring full (%llu MiB): calls dropped and counted as ring_full; "
                          "the writer is slower than the calls — select fewer (KCAP_EVERY, "
                          "KCAP_CALLS) or raise KCAP_RING_BYTES", r->cap >> 20);
        else if (k == 1)
            kcap_log_once(&g_log_big, KCAP_LOG_WARN,
                          "a %llu-byte snapshot is larger than the GPU staging ring (%llu bytes): "
                          "dropped and counted as too_big; raise KCAP_RING_BYTES above it",
                          h->big_need, r->cap);
        else
            kcap_gpu_nomem_log(0, 0, kcap_cfg()->ring_bytes);
    }
    return 0;
}

/* No replay takes another granted unit (graph_limit = graph_taken, under the device lock);
 * the units the device has not taken go back to the host budget. 0 on success. */
static int kcap_take_back(kring *r)
{
    unsigned long long out[3];
    if (kcap_ctl(r, 3, 0, 0, out) != CUDA_SUCCESS)
        return -1;
    unsigned long long inflight = out[2] - r->graph_settled; /* taken, not yet drained */
    while (r->granted > inflight) {
        r->granted--;
        kcap_gpu_unit_settled(0);
    }
    r->pushed_limit = out[2];
    return 0;
}

/* Armed, host calls were turned away for want of a unit, and the device has left its granted
 * units unused for KCAP_GRANT_IDLE_NS (graphs exist but are not being replayed): take them
 * back so that those calls can have them, and grant none for as long. */
static void kcap_take_back_idle(kring *r, const kring_dev *h, uint64_t now)
{
    if (h->graph_taken != r->last_taken) {
        r->last_taken = h->graph_taken;
        r->last_taken_ns = now;
        return;
    }
    unsigned long long away = kcap_gpu_turned_away();
    unsigned long long inflight = h->graph_taken - r->graph_settled;
    if (r->granted > inflight && now - r->last_taken_ns > KCAP_GRANT_IDLE_NS &&
        away != r->last_turned_away && !kcap_take_back(r)) {
        r->grant_hold_until_ns = now + KCAP_GRANT_IDLE_NS;
        r->last_taken_ns = now;
        r->last_turned_away = away;
    }
}

void *kcap_drainer_main(void *arg)
{
    kring *r = arg;
    const kcap_cu *cu = r->cu;
    cu->cuCtxSetCurrent(r->ctx);
    kcap_relax(cu); /* this thread's CUDA calls never disturb a host's graph capture */
    unsigned long long max_seen = 0;
    uint64_t last_read = 0;
    r->idle_since_ns = kcap_now_ns();
    while (!atomic_load(&r->stop)) {
        int want = kcap_gpu_armed();
        uint64_t now = kcap_now_ns();
        unsigned long long out[3];
        if (want) {
            r->idle_since_ns = now;
            r->revoked = 0;
            if (!atomic_load(&r->base))
                kcap_ring_alloc_mem(r, 1);
            /* grant the device units reserved on the host first: eager calls and graph
               replays then draw on one exact budget. Under a limit, only once the process
               has graph call sites (an eager-only process never lends its units away) and
               not while a take-back holds (the host's eager calls get the units then);
               without one, at once, so that the first replay of a new graph is captured. */
            if (kcap_gpu_unlimited() ||
                (r->nsites > KCAP_EAGER_SITES && now >= r->grant_hold_until_ns)) {
                unsigned long long before = r->granted;
                while (r->granted < KCAP_GRAPH_GRANT && kcap_gpu_unit_take())
                    r->granted++;
                if (r->granted != before)
                    r->last_taken_ns = now; /* the idle clock starts with the grant */
            }
            unsigned long long limit = r->graph_settled + r->granted;
            if (limit != r->pushed_limit && kcap_ctl(r, 0, limit, 0, out) == CUDA_SUCCESS)
                r->pushed_limit = limit;
        } else if (!r->revoked && !kcap_take_back(r)) {
            r->revoked = 1; /* disarmed: no replay takes another unit */
        }
        int got = 0;
        /* doorbells from the front to a little past the newest seen (streams may finish out
           of order) */
        unsigned long long t0 = r->books->tail_ticket + 1, t1 = (max_seen > t0 ? max_seen : t0) + KCAP_BELL_LOOKAHEAD;
        if (t1 - t0 > KCAP_RING_NREC)
            t1 = t0 + KCAP_RING_NREC;
        for (unsigned long long t = t0; t < t1; t++) {
            unsigned i = (unsigned)(t % KCAP_RING_NREC);
            if (r->bell[i].ticket != t || r->seen[i] == t)
                continue;
            __atomic_thread_fence(__ATOMIC_ACQUIRE);
            kbell b;
            memcpy(&b, (const void *)&r->bell[i], sizeof b);
            r->seen[i] = t;
            if (t > max_seen)
                max_seen = t;
            kcap_drain_one(r, &b);
            got = 1;
        }
        kcap_settle_eager_drops(r);
        if (now - last_read > (want ? KCAP_DEV_READ_ARMED_NS : KCAP_DEV_READ_IDLE_NS))
            kcap_gpu_shadow_graph_settle(r); /* graph replays' compare totals */
        if (now - last_read > (want ? KCAP_DEV_READ_ARMED_NS : KCAP_DEV_READ_IDLE_NS)) {
            kring_dev h;
            if (!kcap_read_device(r, &h)) {
                int pending = 0;
                for (int i = 0; i < KCAP_EAGER_SITES; i++)
                    pending |= atomic_load(&kcap_site(r, i)->pending);
                atomic_store(&r->all_drained, h.tickets == r->books->tail_ticket && !pending);
                if (want)
                    kcap_take_back_idle(r, &h, now);
            }
            last_read = now;
        }
        if (!want && atomic_load(&r->base) && now - r->idle_since_ns > KCAP_RELEASE_IDLE_NS &&
            r->books->tail_ticket == max_seen)
            kcap_ring_free_mem(r);
        if (!got) {
            struct timespec ts = {0, (long)(want ? KCAP_DRAIN_POLL_ARMED_NS : KCAP_DRAIN_POLL_IDLE_NS)};
            nanosleep(&ts, NULL);
        }
    }
    kcap_gpu_shadow_graph_settle(r); /* graph replays run since the last reading */
    /* final device drop count for the stats line */
    kring_dev h;
    kcap_read_device(r, &h);
    return NULL;
}
