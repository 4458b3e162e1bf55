/*
 * kcap_gpu_shadow_graph.c — shadow mode inside CUDA graphs: a hooked call captured into a graph
 * while a candidate is on gets the candidate's work as nodes of the same graph, so it is judged
 * at every replay with no host work per replay.
 *
 * In capture order on the host's stream, after the production call: kcap_shadow_poison on the
 * candidate's outputs, the candidate's entry point (its kernels become nodes), kcap_shadow_cmp
 * into this site's compare slot, whose publisher is the gate (it stages the replay only when
 * it found a divergence and the graph budget has a unit; a multi-block compare's publisher is
 * block 0 of the staging kernel, kcap_cmp_join), and kcap_stage_both, which stages inputs and
 * both output sets. The compare keeps running totals in mapped host memory
 * (replays compared, found divergent; the gate adds divergent replays it could not stage), and
 * the drainer reports their growth per site (kcap_gpu_shadow_graph_settle); a staged divergence
 * reaches it as a doorbell and is rebuilt as for an eager call.
 *
 * Memory: the candidate's outputs and workspace are shared by the sites of one capture sequence
 * on one stream (stream order: one site's compare and staging are done before the next site's
 * candidate writes), at most KCAP_GCAND_MAX bytes for all graphs; beyond, calls are not judged.
 * Buffers are never freed: the graphs that use them may be replayed until the process ends.
 *
 * Before a candidate's first call goes into a host's graph it is tried in a throwaway capture
 * on a stream of kcap's (relaxed mode, the same arguments): one that is not capture-legal (a
 * sync or query of its stream, an illegal call) invalidates only that trial, and is then not
 * put into graphs at all (its graph calls are not judged). It runs in relaxed mode in the
 * host's capture too, so a call that relaxed mode allows (an allocation) never invalidates the
 * host's graph either.
 *
 * The nodes from the poison kernel to the compare are exactly the candidate's, so the clean twin
 * of the graph (kcap_graphexec.c) takes them out with kcap's own: with shadow off and capture
 * disarmed, a replay runs none of them.
 */
#include "kcap_gpu_int.h"
#include "kcap_graphexec.h"

#include <stdlib.h>
#include <string.h>

#define KCAP_GBUFS 64 /* capture sequences whose candidate buffer is remembered at once */

typedef struct {
    CUcontext ctx;
    cuuint64_t id; /* the capture sequence */
    CUstream st;
    CUdeviceptr p;
    size_t cap;
} kgbuf;

static kgbuf g_bufs[KCAP_GBUFS];
static int g_next_buf;
static atomic_int g_log_cap, g_log_launch;

volatile kcmp_out *kcap_gslot_out(kring *r, int slot)
{
    return &r->gcmp_out[slot / KCAP_GSLOT_CHUNK][slot % KCAP_GSLOT_CHUNK];
}

static CUdeviceptr gslot_dev(kring *r, int slot)
{
    return r->gcmp_dev[slot / KCAP_GSLOT_CHUNK] + (CUdeviceptr)(slot % KCAP_GSLOT_CHUNK) * sizeof(kcmp_dev);
}

/* One more compare slot (caller holds kcap_g_ring_lock; capture mode relaxed): -1 if none. */
static int gslot_new(kring *r)
{
    if (r->ngslots >= KCAP_GSLOT_CHUNK * KCAP_GSLOT_CHUNKS)
        return -1;
    int c = r->ngslots / KCAP_GSLOT_CHUNK;
    const kcap_cu *cu = r->cu;
    if (!r->gcmp_out[c]) {
        void *o = NULL;
        CUdeviceptr d = 0;
        kcmp_dev *init = calloc(KCAP_GSLOT_CHUNK, sizeof *init);
        CUresult e = init ? cu->cuMemHostAlloc(&o, sizeof(kcmp_out) * KCAP_GSLOT_CHUNK,
                                               CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE)
                          : CUDA_ERROR_OUT_OF_MEMORY;
        if (e == CUDA_SUCCESS)
            e = cu->cuMemAlloc(&d, sizeof(kcmp_dev) * KCAP_GSLOT_CHUNK);
        for (int i = 0; init && i < KCAP_GSLOT_CHUNK; i++)
            for (int k = 0; k < KCAP_CMP_MAX; k++)
                init[i].t[k].first_nonfinite = ~0ull;
        /* on our stream, waited for alone: a plain copy runs on the legacy stream, which
           a host's blocking capture stream would not allow */
        if (e == CUDA_SUCCESS)
            e = cu->cuMemcpyHtoDAsync(d, init, sizeof(kcmp_dev) * KCAP_GSLOT_CHUNK, r->side);
        if (e == CUDA_SUCCESS)
            e = cu->cuStreamSynchronize(r->side);
        free(init);
        if (e != CUDA_SUCCESS) {
            if (o)
                cu->cuMemFreeHost(o);
            if (d)
                cu->cuMemFree(d);
            return -1;
        }
        memset(o, 0, sizeof(kcmp_out) * KCAP_GSLOT_CHUNK);
        r->gcmp_dev[c] = d;
        r->gcmp_out[c] = o;
    }
    return r->ngslots++;
}

/* The candidate buffer of this capture sequence on this stream, at least `need` bytes (caller
 * holds kcap_g_ring_lock; capture mode relaxed). A larger need takes a new buffer: the sites
 * captured before keep the old one. 0 when the bound is reached or the device has no memory. */
static CUdeviceptr gbuf_get(kring *r, cuuint64_t id, CUstream st, size_t need)
{
    kgbuf *b = NULL;
    for (int i = 0; i < KCAP_GBUFS && !b; i++)
        if (g_bufs[i].p && g_bufs[i].ctx == r->ctx && g_bufs[i].id == id && g_bufs[i].st == st)
            b = &g_bufs[i];
    if (b && b->cap >= need)
        return b->p;
    if (r->gcand_bytes + need > KCAP_GCAND_MAX) {
        kcap_log_once(&g_log_cap, KCAP_LOG_WARN, "shadow mode: candidate buffers for CUDA graphs "
                      "reached %llu MiB; further graph calls are not judged (counted as not_judged)",
                      KCAP_GCAND_MAX >> 20);
        return 0;
    }
    /* as the staging ring: the service keeps its reserve of device memory (kcap_ring_reserve) */
    size_t free_b = 0, total_b = 0;
    CUdeviceptr p = 0;
    if (r->cu->cuMemGetInfo(&free_b, &total_b) != CUDA_SUCCESS ||
        free_b < need + kcap_ring_reserve(total_b)) {
        kcap_log_once(&g_log_cap, KCAP_LOG_WARN, "shadow mode: no device memory for a CUDA graph's "
                      "candidate buffer (%zu MiB free, the service keeps %llu MiB); further graph "
                      "calls are not judged (counted as not_judged)", free_b >> 20,
                      (unsigned long long)kcap_ring_reserve(total_b) >> 20);
        return 0;
    }
    if (r->cu->cuMemAlloc(&p, need ? need : 16) != CUDA_SUCCESS)
        return 0;
    r->gcand_bytes += need;
    if (!b) {
        b = &g_bufs[g_next_buf];
        g_next_buf = (g_next_buf + 1) % KCAP_GBUFS;
    }
    *b = (kgbuf){r->ctx, id, st, p, need};
    return p;
}

static atomic_int g_log_trial;
static pthread_mutex_t g_trial_lock = PTHREAD_MUTEX_INITIALIZER; /* the trial stream and its result */

/* The candidate (number cand_gen) in a throwaway capture on kcap's trial stream, once per
 * candidate: 1 when it captured cleanly (caller holds g_trial_lock; capture mode relaxed).
 * Nothing of it runs: a captured graph is destroyed unlaunched. */
static int trial_capture(kring *r, kcap_call_fn cand, const void *cargs, void *cws, size_t cwsb,
                         unsigned long long cand_gen)
{
    const kcap_cu *cu = r->cu;
    if (r->trial_done && r->trial_gen == cand_gen)
        return r->trial_ok;
    int ok = 0, cst = -1;
    CUgraph g = NULL;
    CUresult e = cu->cuStreamBeginCapture && cu->cuStreamEndCapture ? CUDA_SUCCESS : CUDA_ERROR_NOT_SUPPORTED;
    if (e == CUDA_SUCCESS && !r->trial)
        e = cu->cuStreamCreate(&r->trial, CU_STREAM_NON_BLOCKING);
    if (e == CUDA_SUCCESS)
        e = cu->cuStreamBeginCapture(r->trial, CU_STREAM_CAPTURE_MODE_RELAXED);
    if (e == CUDA_SUCCESS) {
        cst = cand(cargs, cws, cwsb, r->trial);
        CUresult e2 = cu->cuStreamEndCapture(r->trial, &g); /* also ends an invalidated capture */
        ok = cst == KCAP_CALL_OK && e2 == CUDA_SUCCESS && g;
        if (g)
            cu->cuGraphDestroy(g);
        if (!ok)
            kcap_log_once(&g_log_trial, KCAP_LOG_WARN, "shadow mode: the candidate cannot be captured "
                          "into a CUDA graph (trial capture: candidate status %d, %s); its calls in "
                          "graphs are not judged (counted as not_judged)",
                          cst, kcap_cu_errstr(cu, e2));
    }
    r->trial_gen = cand_gen;
    r->trial_done = 1;
    r->trial_ok = ok;
    return ok;
}

int kcap_gpu_shadow_graph(kring *r, kcap_slot *sl, const void *a, void *ws, size_t wsb, CUstream st,
                          uint64_t seq, kcap_call_fn cand, size_t cand_wsb, uint64_t cand_gen,
                          int *status_out, int *cand_failed)
{
    const kcap_cu *cu = r->cu;
    const kcap_call_desc *d = sl->desc;
    kcap_call_fn real = atomic_load(&sl->real);
    *cand_failed = 0;
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    cuuint64_t id = 0;
    CUresult ie = cu->cuStreamGetCaptureInfo_v3 ? cu->cuStreamGetCaptureInfo_v3(st, &cs, &id, NULL, NULL, NULL, NULL)
                  : cu->cuStreamGetCaptureInfo_v2 ? cu->cuStreamGetCaptureInfo_v2(st, &cs, &id, NULL, NULL, NULL)
                                                  : CUDA_ERROR_NOT_SUPPORTED;
    if (d->args_size > KCAP_ARGS_MAX || !r->poison || ie != CUDA_SUCCESS || cs != CU_STREAM_CAPTURE_STATUS_ACTIVE)
        return 1;
    kcap_layout *lay = malloc(sizeof *lay);
    kcmp_args ca;
    memset(&ca, 0, sizeof ca);
    size_t off[KCAP_MAX_SEGS], out_bytes = 0;
    size_t need = 0;
    if (!lay || kcap_stage_layout(d, a, lay) ||
        (need = kcap_shadow_plan(lay, cand_wsb, off, &out_bytes), kcap_shadow_cmp_view(lay, off, &ca))) {
        free(lay);
        return 1;
    }
    pthread_mutex_lock(&kcap_g_ring_lock);
    CUstreamCaptureMode m = kcap_relax(cu);
    CUdeviceptr buf = gbuf_get(r, id, st, need);
    int slot = buf ? gslot_new(r) : -1;
    int sid = slot >= 0 ? kcap_site_new(r) : -1;
    if (slot >= 0 && sid < 0 && slot == r->ngslots - 1)
        r->ngslots--; /* no site for it: the slot goes back */
    kcap_unrelax(cu, m);
    ksite *s = sid >= 0 ? kcap_site(r, sid) : NULL;
    if (s) {
        /* shadow 0: judged (the drainer reads its totals) once its nodes are all in */
        kcap_site_fill(s, sl, a, seq, 1, 0, 0);
        s->gslot = slot;
        s->seen_agreed = s->seen_lost = 0;
        s->cand_gen = cand_gen;
        kcap_shadow_site_args(s, d, a, lay, buf, off);
    }
    void *cws = cand_wsb ? (void *)(uintptr_t)(buf + out_bytes) : NULL;
    pthread_mutex_unlock(&kcap_g_ring_lock);
    /* the candidate's host code runs under no lock of ours (only the trial's own) */
    int tried = 0;
    if (s) {
        pthread_mutex_lock(&g_trial_lock);
        m = kcap_relax(cu);
        _Alignas(16) unsigned char trial_args[KCAP_ARGS_MAX]; /* a copy, as for the real call */
        memcpy(trial_args, s->cargs, sl->desc->args_size);
        tried = trial_capture(r, cand, trial_args, cws, cand_wsb, cand_gen);
        kcap_unrelax(cu, m);
        pthread_mutex_unlock(&g_trial_lock);
    }
    if (!s || !tried) {
        free(lay);
        return 1; /* not judged: the caller runs the production call */
    }
    kcap_shadow_cmp_rebase(&ca, buf);
    free(lay);
    ca.dev = gslot_dev(r, slot);
    ca.out = (uintptr_t)kcap_gslot_out(r, slot);
    ca.gen = s->gen;
    int status = kcap_real(real, a, ws, wsb, st);
    s->status = status;
    *status_out = status;
    if (status != KCAP_CALL_OK) { /* rejected at capture: nothing of ours goes into the graph */
        atomic_fetch_add(&kcap_g_stats.skipped_invalid, 1);
        return -1;
    }
    CUresult e = kcap_shadow_poison_launch(r, buf, out_bytes, ca.dev, st);
    /* relaxed, as in its trial: a call that mode allows cannot invalidate the host's graph */
    int cst = KCAP_CALL_OK;
    if (e == CUDA_SUCCESS) { /* on a copy: what it changes never reaches the drainer's s->cargs */
        _Alignas(16) unsigned char run[KCAP_ARGS_MAX];
        memcpy(run, s->cargs, sl->desc->args_size);
        m = kcap_relax(cu);
        cst = cand(run, cws, cand_wsb, st);
        kcap_unrelax(cu, m);
    }
    /* the compare closes the candidate's nodes even when it failed (the twin needs both ends);
       then it runs no gate and nothing is staged */
    if (e == CUDA_SUCCESS)
        e = kcap_shadow_judge_launch(r, s, sid, 0, &ca, cst == KCAP_CALL_OK, st);
    if (e == CUDA_SUCCESS && cst != KCAP_CALL_OK) {
        *cand_failed = cst; /* its totals are never read: the site stays unjudged */
        kcap_graphexec_nodes_added();
        return -1;
    }
    kcap_graphexec_nodes_added();
    if (e != CUDA_SUCCESS) {
        atomic_fetch_add(&kcap_g_stats.failed_record, 1);
        kcap_log_once(&g_log_launch, KCAP_LOG_WARN, "shadow mode: putting the candidate, the compare "
                      "or staging into a CUDA graph failed: %s", kcap_cu_errstr(cu, e));
        return -1;
    }
    __atomic_store_n(&s->shadow, 1, __ATOMIC_RELEASE);
    return 2;
}

/* Report the growth of every graph site's totals: agreed replays, and divergent ones the gate
 * could not stage (lost). Staged divergences come as doorbells (kcap_drain_one). The counts
 * of replays compared and found divergent come in one 8-byte word (one store by the compare,
 * one load here, modulo 2^32 each), so a reading is always of one replay's end. */
void kcap_gpu_shadow_graph_settle(kring *r)
{
    int n = __atomic_load_n(&r->nsites, __ATOMIC_ACQUIRE);
    for (int i = KCAP_EAGER_SITES; i < n; i++) {
        ksite *s = kcap_site(r, i);
        if (!s || !s->graph || !__atomic_load_n(&s->shadow, __ATOMIC_ACQUIRE))
            continue;
        volatile kcmp_out *o = kcap_gslot_out(r, s->gslot);
        unsigned long long tally = o->tally, lost = o->lost;
        unsigned int grown = kcap_cmp_tally_grown(tally, s->seen_agreed);
        for (; grown; grown--, s->seen_agreed++) {
            atomic_fetch_add(&kcap_g_stats.shadow_not_kept, 1);
            kcap_gpu_shadow_report(r, s, KCAP_SHADOW_AGREED, NULL, NULL);
        }
        for (; s->seen_lost < lost; s->seen_lost++)
            kcap_gpu_shadow_report(r, s, KCAP_SHADOW_LOST, NULL, NULL);
    }
}

void kcap_gpu_shadow_graph_atfork_child(void)
{
    /* the parent's buffers are not the child's (no CUDA after fork) */
    memset(g_bufs, 0, sizeof g_bufs);
    g_next_buf = 0;
    pthread_mutex_init(&g_trial_lock, NULL);
}
