/*
 * kcap_callrec.c — recording one call (apitrace shape: inputs, the real call, outputs, the
 * same return value), on the host's calling thread.
 *
 * What this path promises the host: it reads host memory only through the
 * fault-safe ops (process_vm_readv: a bad pointer is a skipped snapshot, never a SIGSEGV);
 * it reserves what it will allocate against KCAP_QUEUE_BYTES before allocating it (the bound
 * comes from the call description, kcap_size.c), so a full queue costs the host no copy; it
 * keeps its state on the heap (<= 4 KiB of the caller's stack); and a call the library
 * rejects is never kept, whatever capture thought of its arguments.
 */
#include "kcap_callrec.h"
#include "kcap_gpu.h"
#include "kcap_log.h"
#include "kcap_mem.h"
#include "kcap_meta.h"
#include "kcap_queue.h"
#include "kcap_shadow.h"
#include "kcap_size.h"
#include "kcap_state.h"

#include <stdlib.h>

static atomic_int g_log_invalid, g_log_graph, g_log_record, g_log_full, g_log_cap,
    g_log_host_data, g_log_huge;

/* The per-call state, on the heap: the calling thread's stack may be 16 KiB. */
typedef struct kcap_call_ctx {
    kcap_devctx dc;
    kcap_mem_ops ops;
    kcap_error err;
} kcap_call_ctx;

static void kcap_log_full(void)
{
    kcap_log_once(&g_log_full, KCAP_LOG_WARN,
                  "queue full (KCAP_QUEUE_BYTES=%llu bounds all of kcap's host memory): "
                  "snapshots dropped and counted", (unsigned long long)kcap_cfg()->queue_bytes);
}

static void kcap_log_cap(void)
{
    kcap_log_once(&g_log_cap, KCAP_LOG_WARN,
                  "KCAP_MAX_BYTES=%llu reached: further snapshots that do not fit are "
                  "dropped and counted", (unsigned long long)kcap_cfg()->max_bytes);
}

/* The real call for a snapshot that will not be kept: the library's verdict decides how it
 * is counted (a call it rejects is `invalid` whatever stopped us). */
static int kcap_real_uncaptured(kcap_call_fn real, const void *a, void *ws, size_t wsb,
                                void *stream, atomic_ullong *counter)
{
    int status = kcap_real(real, a, ws, wsb, stream);
    atomic_fetch_add(status != KCAP_CALL_OK ? &kcap_g_stats.skipped_invalid : counter, 1);
    kcap_unreserve();
    return status;
}

/* Shadow mode: a call the production library ran (status 0) dropped before its candidate
 * ran is in the summary as not judged. Returns status. */
static int shadow_unjudged(int status)
{
    if (status == KCAP_CALL_OK && kcap_shadow_on())
        kcap_shadow_not_judged();
    return status;
}

int kcap_call_accepted(kcap_slot *sl, kcap_call_fn real, const void *a, const void *ws,
                       size_t wsb)
{
    const kcap_call_desc *d = sl->desc;
    if (!d || !a)
        return 0;
    kcap_call_library(real); /* the library's own workspace rule for the checker */
    return !d->check || d->check(a, ws, wsb, kcap_lib_workspace_size(a)) == KCAP_CALL_OK;
}

int kcap_capture_one(kcap_slot *sl, kcap_call_fn real, const void *a, void *ws,
                     size_t wsb, void *stream, uint64_t seq)
{
    const kcap_call_desc *d = sl->desc;
    if (kcap_cfg()->shadow[0] && !kcap_shadow_on()) {
        /* a process in shadow mode keeps divergences only: with its candidate off (--off, a
           failing or slow candidate, one that never loaded) it keeps nothing, rather than
           capturing every call in full */
        atomic_fetch_add(&kcap_g_stats.shadow_not_kept, 1);
        kcap_unreserve();
        return kcap_real(real, a, ws, wsb, stream);
    }
    if (!kcap_call_accepted(sl, real, a, ws, wsb)) {
        /* the real library rejects this call too (and writes nothing): nothing to keep */
        atomic_fetch_add(&kcap_g_stats.skipped_invalid, 1);
        kcap_log_once(&g_log_invalid, KCAP_LOG_INFO,
                      "a %s call with invalid arguments was not captured", d->name);
        kcap_unreserve();
        return kcap_real(real, a, ws, wsb, stream);
    }
    if (kcap_queue_backoff()) {
        /* writes keep failing (disk full...): nothing is copied until the next retry */
        atomic_fetch_add(&kcap_g_stats.dropped_backoff, 1);
        kcap_unreserve();
        return shadow_unjudged(kcap_real(real, a, ws, wsb, stream));
    }
    if (!kcap_queue_would_fit(0)) {
        atomic_fetch_add(&kcap_g_stats.dropped_queue, 1);
        kcap_log_full();
        kcap_unreserve();
        return shadow_unjudged(kcap_real(real, a, ws, wsb, stream));
    }
    kcap_devctx dc = {0};
    kcap_mem_ops ops;
    dc.stream = stream;
    int dev = kcap_mem_classify(kcap_call_tensor_ptr(d, a, d->probe), &dc.cu, &dc.ctx);
    void *saved_ctx = NULL;
    if (dev) {
        if (kcap_dev_push(&dc, &saved_ctx)) {
            atomic_fetch_add(&kcap_g_stats.failed_record, 1);
            kcap_unreserve();
            return shadow_unjudged(kcap_real(real, a, ws, wsb, stream));
        }
        int capturing = kcap_dev_stream_capturing(&dc);
        if (kcap_shadow_on()) {
            /* shadow mode keeps only divergent calls: zero-stall calls are judged on the
               device, eager ones and those in CUDA graph capture (kcap_gpu_shadow.c); the
               others run alone, kept nowhere */
            int status = 0;
            int h = kcap_shadow_device(sl, a, ws, wsb, stream, seq, &status);
            kcap_dev_pop(&dc, saved_ctx);
            if (h == 1) {
                if (capturing)
                    kcap_shadow_skip_device();
                atomic_fetch_add(&kcap_g_stats.shadow_not_kept, 1);
                kcap_unreserve();
                return kcap_real(real, a, ws, wsb, stream);
            }
            if (h < 0 || h == 2) /* dropped, or graph nodes (judged at every replay) */
                kcap_unreserve();
            return status;
        }
        if (capturing || kcap_cfg()->gpu_async) {
            int status = 0;
            int h = kcap_gpu_capture(sl, a, ws, wsb, stream, seq, capturing, &status);
            if (h != 1) {
                kcap_dev_pop(&dc, saved_ctx);
                /* dropped, or graph nodes (the device counts those): give the unit back;
                   staged (h == 0): the drainer settles it (kcap_gpu_unit_settled), since
                   the device may still drop it (ring full) */
                if (h < 0 || h == 2)
                    kcap_unreserve();
                return status;
            }
            if (capturing) {
                /* no device-side staging available: never break the host's graph capture */
                kcap_dev_pop(&dc, saved_ctx);
                atomic_fetch_add(&kcap_g_stats.skipped_graph, 1);
                kcap_log_once(&g_log_graph, KCAP_LOG_WARN,
                              "%s called during CUDA stream capture: not captured (counted)",
                              d->name);
                kcap_unreserve();
                return kcap_real(real, a, ws, wsb, stream);
            }
        }
        kcap_mem_dev_ops(&dc, &ops);
    } else {
        kcap_mem_host_ops(&dc, &ops);
    }
    kcap_call_ctx *cx = calloc(1, sizeof *cx);
    if (!cx) {
        if (dev)
            kcap_dev_pop(&dc, saved_ctx);
        atomic_fetch_add(&kcap_g_stats.failed_record, 1);
        kcap_unreserve();
        return shadow_unjudged(kcap_real(real, a, ws, wsb, stream));
    }
    cx->dc = dc;
    cx->dc.num_slots = kcap_call_pool_rows(d, a, &cx->err); /* the gathered rows' range */
    cx->ops = ops;
    cx->ops.ctx = &cx->dc;
    kcap_error *err = &cx->err;

    /* Reserve what recording will allocate BEFORE allocating it; every host read on the way
       (kv_indptr here, all tensors below) goes through the fault-safe ops. */
    size_t bound = 0;
    int status;
    if (kcap_call_bound(d, a, &cx->ops, KCAP_GATHER_SCRATCH, &bound, err)) {
        if (dev)
            kcap_dev_pop(&cx->dc, saved_ctx);
        status = kcap_real_uncaptured(real, a, ws, wsb, stream, &kcap_g_stats.failed_record);
        free(cx);
        return shadow_unjudged(status);
    }
    if (kcap_queue_reserve(bound)) {
        if (dev)
            kcap_dev_pop(&cx->dc, saved_ctx);
        status = shadow_unjudged(kcap_real_uncaptured(real, a, ws, wsb, stream, &kcap_g_stats.dropped_queue));
        if (status == KCAP_CALL_OK && bound > kcap_queue_room())
            kcap_log_once(&g_log_huge, KCAP_LOG_WARN, "a %s snapshot may need %zu bytes, more "
                          "than KCAP_QUEUE_BYTES=%llu leaves beside the writer's buffers (%zu): "
                          "such calls are dropped and counted", d->name, bound,
                          (unsigned long long)kcap_cfg()->queue_bytes, kcap_queue_room());
        else if (status == KCAP_CALL_OK)
            kcap_log_full();
        free(cx);
        return status;
    }
    /* kv_indptr changed under us: the copy fails, memory stays bounded; a single tensor over
       KCAP_MAX_BYTES fails at once instead of being copied for nothing */
    const uint64_t max_bytes = kcap_cfg()->max_bytes;
    int by_cap = max_bytes && max_bytes < bound;
    cx->dc.max_copy = by_cap ? (size_t)max_bytes : bound;

    kcap_snapshot *snap = kcap_snapshot_create();
    int rc = snap ? kcap_call_record(d, a, KCAP_ARG_IN, &cx->ops, snap, err)
                  : kcap_error_set(err, KCAP_ERR_NOMEM, "out of memory for a snapshot");
    uint64_t t0 = kcap_now_ns();
    status = kcap_real(real, a, ws, wsb, stream);
    uint64_t prod_ns = kcap_now_ns() - t0;
    if (!rc && status == KCAP_CALL_OK)
        rc = kcap_call_record(d, a, KCAP_ARG_OUT, &cx->ops, snap, err);
    /* shadow mode keeps only the calls where the candidate disagrees */
    int shadow_agrees = 0, shadow_kept = 0;
    unsigned long long shadow_gen = 0;
    if (!rc && status == KCAP_CALL_OK && kcap_shadow_on()) {
        shadow_agrees = dev || !kcap_shadow_judge(sl, a, snap, seq, prod_ns, &shadow_gen); /* dev: switched on meanwhile */
        shadow_kept = !shadow_agrees;
        if (dev)
            kcap_shadow_not_judged();
    } else if (rc) { /* its recording failed (KCAP_MAX_BYTES, memory) */
        shadow_unjudged(status);
    }
    if (dev) {
        if (!rc) {
            snap->meta.in_stream_capture = 0;
            kcap_fill_meta(sl, &snap->meta, seq);
            if (cx->dc.cu)
                kcap_dev_meta(&cx->dc, &snap->meta);
        }
        kcap_dev_pop(&cx->dc, saved_ctx);
    } else if (!rc) {
        kcap_fill_meta(sl, &snap->meta, seq);
    }
    atomic_ullong *drop = NULL;
    if (shadow_agrees) { /* accounted for: selected = captured + dropped + failed + not kept */
        atomic_fetch_add(&kcap_g_stats.shadow_not_kept, 1);
        free(cx);
        kcap_snapshot_free(snap);
        kcap_queue_unreserve(bound);
        kcap_unreserve();
        return status;
    }
    if (status != KCAP_CALL_OK) {
        drop = &kcap_g_stats.skipped_invalid; /* the library rejected it: nothing to keep */
        kcap_log_once(&g_log_host_data, KCAP_LOG_INFO, "a %s call the library rejected (status "
                      "%d) was not captured", d->name, status);
    } else if (rc && cx->dc.err == KCAP_ERR_FULL && by_cap) {
        drop = &kcap_g_stats.dropped_cap;
        kcap_log_cap();
    } else if (rc && cx->dc.err == KCAP_ERR_FULL) {
        drop = &kcap_g_stats.dropped_queue;
        kcap_log_full();
    } else if (rc) {
        drop = &kcap_g_stats.failed_record;
        kcap_log_once(&g_log_record, KCAP_LOG_WARN, "recording %s #%llu failed: %s (%s)",
                      d->name, (unsigned long long)seq,
                      err->msg[0] ? err->msg : kcap_err_string(err->code), kcap_err_string(rc));
    }
    size_t bytes = drop ? 0 : kcap_snapshot_bytes(snap);
    if (!drop) {
        snap->meta.call_status = status;
        if (!kcap_bytes_fit(bytes)) {
            drop = &kcap_g_stats.dropped_cap;
            kcap_log_cap();
        } else if (kcap_queue_push_reserved(snap, seq, snap->meta.rank, bound)) {
            atomic_fetch_sub(&kcap_g_stats.bytes_accepted, bytes);
            drop = &kcap_g_stats.dropped_queue;
            kcap_log_full();
        } else {
            bound = 0; /* the queue owns the reservation now */
        }
    }
    free(cx);
    if (drop && shadow_kept) /* judged and kept, but no file will hold it */
        kcap_shadow_keep_failed(sl, snap, shadow_gen);
    if (drop) {
        atomic_fetch_add(drop, 1);
        kcap_snapshot_free(snap);
        kcap_queue_unreserve(bound);
        kcap_unreserve();
        return status;
    }
    atomic_fetch_add(&kcap_g_stats.captured, 1);
    kcap_commit();
    return status;
}

