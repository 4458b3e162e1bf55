/*
 * kcap_gpu_shadow.c — shadow mode on the GPU (kcap_gpu.h): a candidate kernel judged on the
 * production call's own stream, without the host ever waiting for the GPU.
 *
 * Per shadowed eager call, in stream order: the production call (the service's outputs, as
 * always); a poison fill of the candidate's outputs (a candidate that writes nothing is seen
 * as NaN, never as agreement); the candidate's entry point on a copy of the args whose output
 * and workspace pointers are this site's buffers (it never writes service memory; it reads
 * the service's inputs, which the production call does not modify); kcap_shadow_cmp
 * (kcap_shadow_cmp.cuh: replay's rules, the result to mapped host memory), whose publisher is
 * the gate: it stages the call only when it found a divergence; then kcap_stage_both, both
 * staging phases in one launch, the candidate's outputs included. A multi-block compare leaves
 * its join, publish and gate to kcap_stage_both (kcap_cmp_join), and the poison fill resets
 * its totals. Agreeing calls cost the candidate + poison + compare + one kernel that exits at
 * once (bench_shadow_kernels.cu); the drainer (kcap_gpu_drain.c) settles them from the
 * compare's result and rebuilds divergent ones with both output sets.
 *
 * Calls inside CUDA graph capture take the same steps as graph nodes
 * (kcap_gpu_shadow_graph.c); the helpers both paths share are here.
 */
#include "kcap_gpu_int.h"

#include <stdlib.h>
#include <string.h>

#include "kcap_compare.h" /* replay/: the default tolerances */

#define KCAP_CAND_ALIGN 256 /* each candidate buffer starts on its own 256-byte line */
/* Eager calls timed for the slow-candidate check (production and candidate, by events): the
 * first, then one in this many. Four event records are four driver calls on the service's
 * thread; a candidate that is slow is slow on every call, so a sample finds it
 * (KCAP_SHADOW_MAX_SLOWDOWN's streak counts timed calls). */
#define KCAP_SHADOW_TIME_EVERY 8

static atomic_ulong g_eager_calls;

static kcap_gpu_shadow_sink g_sink;
static atomic_int g_log_launch;

void kcap_gpu_set_shadow_sink(kcap_gpu_shadow_sink f) { g_sink = f; }

static _Atomic(kcap_gpu_shadow_tol_fn) g_tol;
void kcap_gpu_set_shadow_tol(kcap_gpu_shadow_tol_fn f) { atomic_store(&g_tol, f); }

int kcap_gpu_shadow_report(kring *r, ksite *s, int verdict, kcap_snapshot *snap, kcap_snapshot *cand)
{
    kcap_gpu_shadow_times t = {-1, -1, s->cand_gen};
    float ms;
    /* a timed call has its four events (made before any was recorded) */
    if (s->timed && r->cu->cuEventElapsedTime(&ms, s->tev[0], s->tev[1]) == CUDA_SUCCESS)
        t.prod_us = ms * 1e3;
    if (s->timed && r->cu->cuEventElapsedTime(&ms, s->tev[2], s->tev[3]) == CUDA_SUCCESS)
        t.cand_us = ms * 1e3;
    return g_sink ? g_sink(s->sl, s->args, verdict, snap, cand, s->seq, &t) : 0;
}

static size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

/* Bytes a static output segment's view spans from its first row. */
static size_t seg_span(const kseg *g)
{
    long long n1 = g->n1 > 0 ? g->n1 : 1, last = g->nrows - 1;
    if (g->nrows <= 0)
        return 0;
    return (size_t)((last / n1) * g->s0 + (last % n1) * g->s1 + g->row_bytes);
}

size_t kcap_shadow_plan(const kcap_layout *lay, size_t cand_wsb, size_t *off, size_t *out_bytes)
{
    size_t need = 0;
    for (int k = 0; k < lay->nout; k++) {
        off[k] = need;
        need += align_up(seg_span(&lay->seg_out[k]), KCAP_CAND_ALIGN);
    }
    *out_bytes = need;
    return need + align_up(cand_wsb, KCAP_CAND_ALIGN);
}

int kcap_shadow_cmp_view(const kcap_layout *lay, const size_t *off, kcmp_args *ca)
{
    if (lay->nout > KCAP_CMP_MAX || 2 * lay->nout > KCAP_MAX_SEGS)
        return -1;
    for (int k = 0; k < lay->nout; k++) {
        const kseg *g = &lay->seg_out[k];
        kcap_dtype dt = (kcap_dtype)lay->seg_out_dtype[k];
        size_t es = kcap_dtype_size(dt);
        int code = dt == KCAP_DT_BF16 ? 0 : dt == KCAP_DT_F16 ? 1 : dt == KCAP_DT_F32 ? 2 : -1;
        if (g->counter != KCAP_SEG_STATIC || g->idx || code < 0 || !es || g->row_bytes % (long long)es)
            return -1; /* integer, counted or odd outputs: not a call this compare judges */
        kcap_gpu_shadow_tol_fn tf = atomic_load(&g_tol);
        kcap_cmp_tol tol = tf ? tf(dt) : kcap_cmp_default_tol(dt);
        kcmp_tensor *t = &ca->t[k];
        t->prod = g->src;
        t->cand = off[k];
        t->rows = g->nrows;
        t->row_elems = g->row_bytes / (long long)es;
        t->n1 = g->n1 > 0 ? g->n1 : 1;
        t->s0 = g->s0;
        t->s1 = g->s1;
        t->dtype = code;
        t->atol = tol.atol;
        t->rtol = tol.rtol;
    }
    ca->nt = lay->nout;
    return 0;
}

void kcap_shadow_cmp_rebase(kcmp_args *ca, CUdeviceptr cand)
{
    for (int k = 0; k < ca->nt; k++)
        ca->t[k].cand += cand;
}

void kcap_shadow_site_args(ksite *s, const kcap_call_desc *d, const void *a, const kcap_layout *lay,
                           CUdeviceptr cand, const size_t *off)
{
    /* the candidate's args: its outputs and workspace are ours */
    memcpy(s->cargs, a, d->args_size);
    for (int k = 0; k < lay->nout; k++) {
        void *p = (void *)(uintptr_t)(cand + off[k]);
        memcpy(s->cargs + d->args[lay->seg_out_arg[k]].offset, &p, sizeof p);
    }
    /* phase 1 stages the candidate's outputs too: static segments after the fixed part */
    s->lay = *lay;
    for (int k = 0; k < lay->nout; k++) {
        kseg c = lay->seg_out[k];
        c.src = cand + off[k];
        c.dst_off = s->lay.fixed_bytes;
        s->lay.fixed_bytes += (long long)align_up((size_t)(c.nrows * c.row_bytes), 16);
        s->lay.seg_out[lay->nout + k] = c;
        s->lay.seg_out_arg[lay->nout + k] = lay->seg_out_arg[k];
    }
    s->lay.nout = 2 * lay->nout;
}

CUresult kcap_shadow_judge_launch(kring *r, ksite *s, int sid, int force, kcmp_args *ca, int stage,
                                  CUstream st)
{
    kstage_args in, out;
    memset(&in, 0, sizeof in); /* ring 0: the compare runs no gate */
    if (stage) {
        kcap_stage_args_fill(r, s, sid, 0, force, &in);
        kcap_stage_args_fill(r, s, sid, 1, force, &out);
        if (s->graph) /* replays the host never sees: a divergence not staged is counted */
            in.lost = (uintptr_t)&kcap_gslot_out(r, s->gslot)->lost;
    }
    void *cp[] = {ca, &in}, *sp[] = {&in, &out};
    unsigned threads, blocks;
    kcap_cmp_plan_args(ca, r->nblocks, r->nblocks / KCAP_STAGE_BLOCKS_PER_SM, &threads, &blocks);
    /* a multi-block compare followed by staging leaves its join to the staging kernel: the
       kernel boundary replaces its block count (kcap_cmp_join; the poison fill before the
       candidate reset the totals) */
    ca->defer = stage && blocks > 1;
    if (ca->defer) {
        in.cmp_dev = ca->dev, in.cmp_out = ca->out;
        in.cmp_nt = ca->nt, in.cmp_gen = ca->gen;
    }
    CUresult e = r->cu->cuLaunchKernel(r->cmp, blocks, 1, 1, threads, 1, 1, 0, st, cp, NULL);
    if (e == CUDA_SUCCESS && stage) /* enough threads to stream the KV rows; agreeing, they exit at once */
        e = r->cu->cuLaunchKernel(r->stage_both, (unsigned)r->nblocks, 1, 1, KCAP_STAGE_THREADS, 1, 1, 0,
                                  st, sp, NULL);
    return e;
}

CUresult kcap_shadow_poison_launch(kring *r, CUdeviceptr p, size_t bytes, CUdeviceptr cmp_dev, CUstream st)
{
    unsigned long long dst = p, n = bytes, dev = cmp_dev;
    void *params[] = {&dst, &n, &dev};
    size_t want = (bytes / 16 + KCAP_POISON_THREADS - 1) / KCAP_POISON_THREADS;
    unsigned blocks = want < 1 ? 1 : want > (size_t)r->nblocks ? (unsigned)r->nblocks : (unsigned)want;
    return r->cu->cuLaunchKernel(r->poison, blocks, 1, 1, KCAP_POISON_THREADS, 1, 1, 0, st, params, NULL);
}

/* Timing event k of a timed call (a failed record only loses this call's timing). */
static void time_mark(const kcap_cu *cu, ksite *s, int k, CUstream st)
{
    if (s->timed)
        cu->cuEventRecord(s->tev[k], st);
}

CUresult kcap_shadow_eager_chain(kring *r, ksite *s, int sid, CUstream st, int *cst)
{
    const kcap_cu *cu = r->cu;
    *cst = KCAP_CALL_OK;
    CUresult e = kcap_shadow_poison_launch(r, s->cand, s->cand_out, s->ca.dev, st);
    void *cws = s->cand_wsb ? (void *)(uintptr_t)(s->cand + s->cand_out) : NULL;
    time_mark(cu, s, 2, st);
    /* the candidate gets a copy: what it changes in it never reaches the drainer's reading of
       s->cargs */
    _Alignas(16) unsigned char run[KCAP_ARGS_MAX];
    memcpy(run, s->cargs, s->sl->desc->args_size);
    if (e == CUDA_SUCCESS)
        *cst = s->cand_fn(run, cws, s->cand_wsb, st);
    time_mark(cu, s, 3, st);
    if (e == CUDA_SUCCESS && *cst == KCAP_CALL_OK)
        e = kcap_shadow_judge_launch(r, s, sid, 1, &s->ca, 1, st);
    return e;
}

/* A site given back before anything of it reached the GPU's staging. */
static void site_release(ksite *s)
{
    atomic_store(&s->pending, 0);
    atomic_store(&s->launched, 1);
}

int kcap_gpu_shadow(kcap_slot *sl, const void *a, void *ws, size_t wsb, void *stream,
                    uint64_t seq, kcap_call_fn cand, size_t cand_wsb, unsigned long long cand_gen,
                    int *status_out, int *cand_failed)
{
    kcap_call_fn real = atomic_load(&sl->real);
    const kcap_call_desc *d = sl->desc;
    *cand_failed = 0;
    if (d->args_size > KCAP_ARGS_MAX)
        return 1;
    const kcap_cu *cu = kcap_cu_load(NULL);
    CUstream st = (CUstream)stream;
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    if (!cu || cu->cuStreamIsCapturing(st, &cs) != CUDA_SUCCESS)
        return 1;
    /* the calls this path does not judge leave before any of its setup (ring, module, drainer) */
    int graph = cs == CU_STREAM_CAPTURE_STATUS_ACTIVE;
    if (graph ? !kcap_cfg()->shadow_graphs /* KCAP_SHADOW_GRAPHS=0: graph calls not shadowed */
              : cs != CU_STREAM_CAPTURE_STATUS_NONE /* a capture the host's error invalidated */ ||
                    !kcap_cfg()->gpu_async) /* KCAP_GPU_MODE=sync: eager calls not shadowed */
        return 1;
    CUcontext ctx = NULL;
    kring *r = NULL;
    if (cu->cuCtxGetCurrent(&ctx) == CUDA_SUCCESS && ctx)
        r = kcap_ring_of(cu, ctx);
    if (!r || !r->cmp)
        return 1;
    if (graph)
        return kcap_gpu_shadow_graph(r, sl, a, ws, wsb, st, seq, cand, cand_wsb, cand_gen, status_out,
                                     cand_failed);
    kcap_layout *lay = malloc(sizeof *lay);
    kcmp_args ca;
    memset(&ca, 0, sizeof ca);
    size_t off[KCAP_MAX_SEGS], out_bytes = 0, need = 0;
    /* a call the compare cannot judge is not judged (before a site is taken) */
    if (!lay || kcap_stage_layout(d, a, lay) ||
        (need = kcap_shadow_plan(lay, cand_wsb, off, &out_bytes), kcap_shadow_cmp_view(lay, off, &ca))) {
        free(lay);
        return 1;
    }
    if (!atomic_load(&r->base) && kcap_ring_alloc_mem(r, 0)) {
        atomic_fetch_add(&kcap_g_stats.dropped_ring_nomem, 1);
        *status_out = kcap_real(real, a, ws, wsb, stream);
        free(lay);
        return -1;
    }
    pthread_mutex_lock(&kcap_g_ring_lock);
    int sid = kcap_eager_site_take(r, 1);
    ksite *s = sid >= 0 ? kcap_site(r, sid) : NULL;
    if (s) {
        kcap_site_fill(s, sl, a, seq, 0, 1, 1);
        s->cand_gen = cand_gen;
        s->timed = atomic_fetch_add(&g_eager_calls, 1) % KCAP_SHADOW_TIME_EVERY == 0;
    }
    pthread_mutex_unlock(&kcap_g_ring_lock);
    CUresult e = CUDA_SUCCESS;
    for (int k = 0; s && s->timed && k < 4 && e == CUDA_SUCCESS; k++)
        if (!s->tev[k]) { /* the site's timing events, once */
            CUstreamCaptureMode m = kcap_relax(cu);
            e = cu->cuEventCreate(&s->tev[k], CU_EVENT_DEFAULT);
            kcap_unrelax(cu, m);
            if (e != CUDA_SUCCESS)
                s->tev[k] = NULL;
        }
    if (s && s->cand_cap < need && e == CUDA_SUCCESS) {
        /* the site is free: its last call has run, so its old buffers are idle */
        CUstreamCaptureMode m = kcap_relax(cu);
        if (s->cand)
            cu->cuMemFree(s->cand);
        s->cand = 0, s->cand_cap = 0;
        e = cu->cuMemAlloc(&s->cand, need);
        kcap_unrelax(cu, m);
        if (e == CUDA_SUCCESS)
            s->cand_cap = need;
    }
    if (s && e == CUDA_SUCCESS)
        kcap_shadow_cmp_rebase(&ca, s->cand);
    if (!s || e != CUDA_SUCCESS) {
        if (s)
            site_release(s);
        atomic_fetch_add(s ? &kcap_g_stats.failed_record : &kcap_g_stats.dropped_sites, 1);
        *status_out = kcap_real(real, a, ws, wsb, stream);
        free(lay);
        return -1;
    }
    kcap_shadow_site_args(s, d, a, lay, s->cand, off);
    free(lay);
    time_mark(cu, s, 0, st);
    int status = kcap_real(real, a, ws, wsb, stream);
    time_mark(cu, s, 1, st);
    s->status = status;
    *status_out = status;
    if (status != KCAP_CALL_OK) { /* the library rejected it: nothing to judge */
        site_release(s);
        atomic_fetch_add(&kcap_g_stats.skipped_invalid, 1);
        return -1;
    }
    ca.dev = r->cmp_dev + (CUdeviceptr)sid * sizeof(kcmp_dev);
    ca.out = (uintptr_t)&r->cmp_out[sid];
    ca.gen = s->gen;
    s->ca = ca;
    s->cand_fn = cand, s->cand_wsb = cand_wsb, s->cand_out = out_bytes;
    if (!kcap_shadow_async_submit(r, s, sid, st))
        return 0; /* kcap's worker thread queues the rest, the service's thread is done */
    int cst = KCAP_CALL_OK;
    e = kcap_shadow_eager_chain(r, s, sid, st, &cst);
    if (e == CUDA_SUCCESS && cst != KCAP_CALL_OK) {
        *cand_failed = cst; /* it wrote nothing of the service's: the caller switches it off */
        /* whatever it queued before failing must finish before this site's buffers are
           reallocated: the site is free again only once this event has run */
        cu->cuEventRecord(s->done, st);
        site_release(s);
        return -1;
    }
    /* also after a failed launch: what was queued (a compare adding into the site's totals)
       must end before the site is taken again, and kcap_eager_free waits for this event */
    CUresult er = cu->cuEventRecord(s->done, st);
    if (e == CUDA_SUCCESS)
        e = er;
    if (e == CUDA_SUCCESS)
        kcap_shadow_async_warm(sl->call, cand_gen);
    int ours = e != CUDA_SUCCESS && atomic_exchange(&s->pending, 0);
    atomic_store(&s->launched, 1);
    if (e != CUDA_SUCCESS) {
        atomic_fetch_add(&kcap_g_stats.failed_record, 1);
        kcap_log_once(&g_log_launch, KCAP_LOG_WARN, "shadow mode: launching the compare or "
                      "staging failed: %s", kcap_cu_errstr(cu, e));
        return ours ? -1 : 0;
    }
    return 0;
}
