/*
 * test_capture_shadow_dev.c — shadow mode on the device (capture/kcap_gpu_shadow.c, _graph.c)
 * on a fake driver, no GPU: what a call captured into a graph puts on the stream (production,
 * poison over exactly the candidate's outputs, the candidate on a copy of the args whose
 * outputs are kcap's buffer, the compare reading production and candidate views, the gated
 * stage launches), that the sites of one capture share one buffer and a larger call gets a
 * new one, that a failing candidate or a rejected call leaves no gate and is never counted,
 * that the service's memory reserve is kept, that a candidate whose trial capture breaks (it
 * syncs its stream) never reaches the host's graph, and that the drainer's reading of the running
 * totals reports each replay once (agreed and lost), never a divergent one as agreed. Also
 * the dispatch (kcap_gpu_shadow): calls it will not judge (sync mode, graphs while
 * KCAP_SHADOW_GRAPHS=0) leave before any ring is made, and the eager path's stream order, with
 * a failing candidate recording the site's done event before the site is given back.
 * `test_capture_shadow_dev --bench N` instead times N eager shadowed calls on the fake driver,
 * whose calls cost nothing: kcap's own host work per call, without the driver's
 * (bench_shadow_host.sh, docs/PERF.md).
 * The GPU run of the same path is tests/capture/test_capture_gpu_shadow.sh (section 5).
 */
#include "kcap_gpu_int.h"
#include "kcap_graphexec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "verify_attn.h"
#include "../testkit_vattn.h" /* TK_CHECK, QK, DV */

/* ---- the fake driver: host memory stands for device memory; launches are recorded ---- */
#define NL 64
static struct {
    CUfunction f;
    unsigned long long a0, a1; /* poison: dst, bytes */
    kcmp_args cmp;
    kstage_args gate;          /* the compare's: the gate its last block runs (ring 0: none) */
    kstage_args in, out;       /* kcap_stage_both's two phases */
} L[NL];
static int nl, n_alloc, capture_active = 1;
static size_t free_bytes = 8ull << 30;
static char fn_poison, fn_cmp, fn_stage_both; /* their addresses are the CUfunctions */

static CUresult CUDAAPI f_info3(CUstream s, CUstreamCaptureStatus *st, cuuint64_t *id, CUgraph *g,
                                const CUgraphNode **d, const void **e, size_t *n)
{
    (void)g, (void)d, (void)e, (void)n;
    *st = capture_active ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
    *id = (cuuint64_t)(uintptr_t)s; /* one capture sequence per stream here */
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_meminfo(size_t *f, size_t *t) { *f = free_bytes, *t = 16ull << 30; return CUDA_SUCCESS; }
static CUresult CUDAAPI f_alloc(CUdeviceptr *p, size_t n)
{
    void *m = calloc(1, n);
    n_alloc++;
    *p = (CUdeviceptr)(uintptr_t)m;
    return m ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
static CUresult CUDAAPI f_halloc(void **p, size_t n, unsigned int fl) { (void)fl; *p = calloc(1, n); return *p ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY; }
static CUresult CUDAAPI f_free(CUdeviceptr p) { free((void *)(uintptr_t)p); return CUDA_SUCCESS; }
static CUresult CUDAAPI f_hfree(void *p) { free(p); return CUDA_SUCCESS; }
static CUresult CUDAAPI f_htod(CUdeviceptr d, const void *s, size_t n, CUstream st) { (void)st; memcpy((void *)(uintptr_t)d, s, n); return CUDA_SUCCESS; }
static CUresult CUDAAPI f_sync(CUstream s) { (void)s; return CUDA_SUCCESS; }
static CUresult CUDAAPI f_mode(CUstreamCaptureMode *m) { (void)m; return CUDA_SUCCESS; }
/* the trial capture: invalidated when the candidate "syncs" the stream it captures on */
static int n_trials, trial_open, trial_invalid, cand_syncs;
static CUstream trial_stream;
static CUresult CUDAAPI f_screate(CUstream *s, unsigned int fl) { (void)fl; *s = (CUstream)0x7777; return CUDA_SUCCESS; }
static CUresult CUDAAPI f_begin(CUstream s, CUstreamCaptureMode m)
{
    (void)m;
    n_trials++;
    trial_open = 1, trial_invalid = 0, trial_stream = s;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_end(CUstream s, CUgraph *g)
{
    (void)s;
    trial_open = 0;
    *g = trial_invalid ? NULL : (CUgraph)0x8888;
    return trial_invalid ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED : CUDA_SUCCESS;
}
static CUresult CUDAAPI f_gdestroy(CUgraph g) { (void)g; return CUDA_SUCCESS; }
static CUresult CUDAAPI f_iscap(CUstream s, CUstreamCaptureStatus *st)
{
    (void)s;
    *st = capture_active ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_ctx(CUcontext *c) { *c = (CUcontext)0x1000; return CUDA_SUCCESS; }
static CUresult CUDAAPI f_ecreate(CUevent *e, unsigned int fl) { static char ev[64]; static int n; (void)fl; *e = (CUevent)&ev[n++ % 64]; return CUDA_SUCCESS; }
static CUevent recorded[NL];
static int nrec;
static CUresult CUDAAPI f_erecord(CUevent e, CUstream s) { (void)s; if (nrec < NL) recorded[nrec++] = e; return CUDA_SUCCESS; }
static CUresult CUDAAPI f_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                 unsigned bz, unsigned sh, CUstream st, void **params, void **extra)
{
    (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)sh, (void)st, (void)extra;
    if (nl >= NL)
        return CUDA_ERROR_INVALID_VALUE;
    L[nl].f = f;
    if (f == (CUfunction)&fn_poison) {
        L[nl].a0 = *(unsigned long long *)params[0];
        L[nl].a1 = *(unsigned long long *)params[1];
    } else if (f == (CUfunction)&fn_cmp) {
        L[nl].cmp = *(kcmp_args *)params[0];
        L[nl].gate = *(kstage_args *)params[1];
    } else if (f == (CUfunction)&fn_stage_both) {
        L[nl].in = *(kstage_args *)params[0];
        L[nl].out = *(kstage_args *)params[1];
    }
    nl++;
    return CUDA_SUCCESS;
}

static kcap_cu g_cu;
const kcap_cu *kcap_cu_load(const char **why) { (void)why; return &g_cu; }
const char *kcap_cu_errstr(const kcap_cu *cu, CUresult r) { (void)cu, (void)r; return "fake"; }

/* ---- what kcap_gpu.c provides, as this test needs it ---- */
pthread_mutex_t kcap_g_ring_lock = PTHREAD_MUTEX_INITIALIZER;
static kring g_r;
static ksite g_sites[KCAP_EAGER_SITES + 64];
CUstreamCaptureMode kcap_relax(const kcap_cu *cu) { (void)cu; return CU_STREAM_CAPTURE_MODE_RELAXED; }
void kcap_unrelax(const kcap_cu *cu, CUstreamCaptureMode m) { (void)cu, (void)m; }
ksite *kcap_site(kring *r, int sid) { return sid >= 0 && sid < r->nsites ? &g_sites[sid] : NULL; }
int kcap_site_new(kring *r) { return r->nsites < (int)(sizeof g_sites / sizeof g_sites[0]) ? r->nsites++ : -1; }
CUdeviceptr kcap_site_dev(kring *r, int sid) { (void)r; return (CUdeviceptr)(0x9000 + sid); }
static int n_ring_of;
kring *kcap_ring_of(const kcap_cu *cu, CUcontext ctx) { (void)cu, (void)ctx; n_ring_of++; return &g_r; }
int kcap_eager_site_take(kring *r, int lowest) { (void)r, (void)lowest; return g_sites[0].used && atomic_load(&g_sites[0].pending) ? -1 : 0; }
int kcap_ring_alloc_mem(kring *r, int may_wait) { (void)r, (void)may_wait; return -1; }
void kcap_stage_args_fill(kring *r, ksite *s, int sid, int phase, int force, kstage_args *p)
{
    (void)r;
    memset(p, 0, sizeof *p);
    p->ring = 0x7000;
    p->site = kcap_site_dev(r, sid);
    p->phase = phase;
    p->force = force;
    p->site_id = sid;
    p->nsegs = phase == 0 ? s->lay.nin : s->lay.nout;
}
static int n_nodes_added;
void kcap_graphexec_nodes_added(void) { n_nodes_added++; }

/* ---- the production call, the candidate, the sink ---- */
static int n_prod, n_cand, cand_status, prod_status;
static vattn_args cand_got;
static int prod(const void *a, void *ws, size_t wsb, void *st) { (void)a, (void)ws, (void)wsb, (void)st; n_prod++; return prod_status; }
static int cand(const void *a, void *ws, size_t wsb, void *st)
{
    (void)ws, (void)wsb;
    if (cand_syncs && trial_open && st == trial_stream)
        trial_invalid = 1; /* a stream sync during capture */
    if (trial_open)
        return cand_status; /* the trial: nothing recorded of it */
    memcpy(&cand_got, a, sizeof cand_got);
    n_cand++;
    return cand_status;
}
static int n_agreed, n_lost, n_other;
static unsigned long long last_gen;
static int sink(kcap_slot *sl, const void *args, int verdict, kcap_snapshot *snap, kcap_snapshot *c,
                uint64_t seq, const kcap_gpu_shadow_times *t)
{
    (void)sl, (void)args, (void)snap, (void)c, (void)seq;
    last_gen = t->cand_gen;
    verdict == KCAP_SHADOW_AGREED ? n_agreed++ : verdict == KCAP_SHADOW_LOST ? n_lost++ : n_other++;
    return 0;
}

#define AT(n) ((void *)(uintptr_t)(0x100000ull * (n)))
static vattn_args call_args(int bs, int H)
{
    vattn_args a = {.struct_size = sizeof a, .dtype = VATTN_DTYPE_BF16, .index_type = VATTN_INDEX_INT64,
                    .bs = bs, .q_len = 4, .num_heads = H, .num_slots = 4096, .sm_scale = 0.1f,
                    .q = AT(1), .q_stride_t = (int64_t)H * QK, .q_stride_h = QK, .kv_cache = AT(2),
                    .kv_stride = QK, .kv_indptr = AT(3), .kv_indices = AT(4), .visibility = NULL,
                    .o = AT(6), .o_stride_t = (int64_t)H * DV, .o_stride_h = DV, .lse = AT(7)};
    return a;
}

static unsigned long long g_gen = 5;
static int shadow_call(kcap_slot *sl, vattn_args *a, CUstream st, int *status, int *failed)
{
    nl = 0;
    return kcap_gpu_shadow_graph(&g_r, sl, a, NULL, 0, st, 1, cand, 4096, g_gen, status, failed);
}

#include <time.h>
static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

/* kcap's host work per eager shadowed call, the driver's calls costing nothing: production
 * and candidate are empty functions, the site is settled at once as the drainer would. */
static int bench(kcap_slot *sl, long n)
{
    kcap_config *cfg = kcap_cfg_mut();
    cfg->gpu_async = 1;
    capture_active = 0;
    atomic_store(&g_r.base, 0x4000);
    g_sites[0].done = (CUevent)0xd0;
    vattn_args a = call_args(8, 16);
    int status, failed;
    double best = 1e30;
    long records = 0; /* event records over the last repetition */
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now_ns();
        records = 0;
        for (long i = 0; i < n; i++) {
            nl = 0, nrec = 0;
            if (kcap_gpu_shadow(sl, &a, NULL, 0, (CUstream)0x51, (uint64_t)i, cand, 4096, 5, &status, &failed))
                return 1;
            records += nrec;
            atomic_store(&g_sites[0].pending, 0);
        }
        double per = (now_ns() - t0) / (double)n;
        best = per < best ? per : best;
    }
    printf("eager shadowed call, kcap's own host work (fake driver, no-op calls): %.0f ns/call "
           "(best of 5 x %ld); per call %d kernel launches of kcap's and %.2f event records (on average: "
           "timing on 1 call in 8) go to the driver, besides the production and candidate calls\n", best, n, nl,
           (double)records / (double)n);
    return 0;
}

int main(int argc, char **argv)
{
    g_cu.cuStreamGetCaptureInfo_v3 = f_info3;
    g_cu.cuMemGetInfo = f_meminfo;
    g_cu.cuMemAlloc = f_alloc;
    g_cu.cuMemHostAlloc = f_halloc;
    g_cu.cuMemFree = f_free;
    g_cu.cuMemFreeHost = f_hfree;
    g_cu.cuMemcpyHtoDAsync = f_htod;
    g_cu.cuStreamSynchronize = f_sync;
    g_cu.cuThreadExchangeStreamCaptureMode = f_mode;
    g_cu.cuLaunchKernel = f_launch;
    g_cu.cuStreamCreate = f_screate;
    g_cu.cuStreamBeginCapture = f_begin;
    g_cu.cuStreamEndCapture = f_end;
    g_cu.cuGraphDestroy = f_gdestroy;
    g_cu.cuStreamIsCapturing = f_iscap;
    g_cu.cuCtxGetCurrent = f_ctx;
    g_cu.cuEventCreate = f_ecreate;
    g_cu.cuEventRecord = f_erecord;
    g_r.cu = &g_cu;
    g_r.poison = (CUfunction)&fn_poison;
    g_r.cmp = (CUfunction)&fn_cmp;
    g_r.stage_both = (CUfunction)&fn_stage_both;
    g_r.nblocks = 8;
    g_r.nsites = KCAP_EAGER_SITES;
    kcap_gpu_set_shadow_sink(sink);
    kcap_slot sl;
    memset(&sl, 0, sizeof sl);
    sl.desc = kcap_call_find("vattn_verify");
    atomic_store(&sl.real, prod);
    TK_CHECK(sl.desc != NULL, "the vattn_verify description");
    if (argc == 3 && !strcmp(argv[1], "--bench"))
        return bench(&sl, atol(argv[2]));

    /* 1. one call in capture: the nodes, in stream order, and the site */
    vattn_args a = call_args(2, 16);
    int status = -1, failed = -1;
    CUstream st = (CUstream)0x51;
    int h = shadow_call(&sl, &a, st, &status, &failed);
    const size_t o_bytes = (size_t)2 * 4 * 16 * DV * 2, lse_bytes = (size_t)2 * 4 * 16 * 4;
    TK_CHECK(h == 2 && status == 0 && failed == 0 && n_prod == 1 && n_cand == 1 && n_trials == 1 && !trial_open,
             "graph nodes after one clean trial capture of the candidate (h %d)", h);
    TK_CHECK(nl == 3 && L[0].f == (CUfunction)&fn_poison && L[1].f == (CUfunction)&fn_cmp &&
                 L[2].f == (CUfunction)&fn_stage_both && L[2].in.phase == 0 && L[2].out.phase == 1 &&
                 !L[2].in.force && L[2].out.nsegs == 4,
             "poison, compare (its last block the gate), both staging phases in one launch (%d launches)", nl);
    unsigned long long buf = L[0].a0;
    TK_CHECK(L[0].a1 >= o_bytes + lse_bytes && L[0].a1 < o_bytes + lse_bytes + 2 * 256,
             "the poison covers the candidate's outputs only (%llu bytes)", L[0].a1);
    TK_CHECK((uintptr_t)cand_got.o >= buf && (uintptr_t)cand_got.lse >= buf + o_bytes &&
                 (uintptr_t)cand_got.lse < buf + L[0].a1 && cand_got.q == a.q && cand_got.kv_cache == a.kv_cache,
             "the candidate reads the service's inputs and writes kcap's buffer only");
    const kcmp_args *ca = &L[1].cmp;
    TK_CHECK(ca->nt == 2 && ca->t[0].prod == (uintptr_t)a.o && ca->t[0].cand == (uintptr_t)cand_got.o &&
                 ca->t[1].prod == (uintptr_t)a.lse && ca->t[1].cand == (uintptr_t)cand_got.lse &&
                 ca->t[0].dtype == 0 && ca->t[1].dtype == 2 && ca->t[0].rows == 2 * 4 * 16,
             "the compare views: production o / lse against the candidate's");
    TK_CHECK(L[1].gate.ring && L[1].gate.phase == 0 && L[1].gate.site == L[2].in.site && !L[1].gate.force &&
                 L[1].gate.lost == (uintptr_t)&kcap_gslot_out(&g_r, 0)->lost,
             "the compare gates this site's phase 0 and counts divergences it cannot stage as lost");
    ksite *s = kcap_site(&g_r, KCAP_EAGER_SITES);
    TK_CHECK(s && s->graph && s->shadow && s->cand_gen == 5 && s->lay.nout == 4 && s->gslot == 0 &&
                 n_nodes_added == 1,
             "site: graph, shadowed, candidate 5, production and candidate outputs staged");

    /* 2. the same capture shares the buffer; a larger call gets a new one; another stream too */
    int allocs = n_alloc;
    h = shadow_call(&sl, &a, st, &status, &failed);
    TK_CHECK(h == 2 && L[0].a0 == buf && n_alloc == allocs && n_trials == 1,
             "second site of the capture: the same buffer, no second trial");
    vattn_args big = call_args(8, 16);
    h = shadow_call(&sl, &big, st, &status, &failed);
    TK_CHECK(h == 2 && L[0].a0 != buf && n_alloc == allocs + 1, "a larger call: a new buffer");
    h = shadow_call(&sl, &a, (CUstream)0x52, &status, &failed);
    TK_CHECK(h == 2 && L[0].a0 != buf, "another capture: its own buffer");

    /* 3. a failing candidate: no gate, never counted; a rejected call: nothing of ours */
    cand_status = 3;
    h = shadow_call(&sl, &a, st, &status, &failed);
    ksite *fs = kcap_site(&g_r, g_r.nsites - 1);
    TK_CHECK(h == -1 && failed == 3 && status == 0 && nl == 2 && L[1].f == (CUfunction)&fn_cmp && !L[1].gate.ring &&
                 !fs->shadow,
             "failing candidate: poison and compare close its nodes, no gate, the site unjudged");
    cand_status = 0;
    prod_status = 7;
    int nc = n_cand;
    h = shadow_call(&sl, &a, st, &status, &failed);
    TK_CHECK(h == -1 && status == 7 && nl == 0 && n_cand == nc, "production rejects the call: no node of ours");
    prod_status = 0;

    /* 4. a candidate that breaks a capture (its trial): never in the host's graph, tried once */
    g_gen = 6;
    cand_syncs = 1;
    int np = n_prod;
    h = shadow_call(&sl, &a, st, &status, &failed);
    TK_CHECK(h == 1 && nl == 0 && n_prod == np && n_trials == 2 && !trial_open,
             "trial capture invalidated: not judged, nothing of ours on the host's stream, production left to the caller");
    h = shadow_call(&sl, &a, st, &status, &failed);
    TK_CHECK(h == 1 && nl == 0 && n_trials == 2, "the same candidate again: not tried again");
    cand_syncs = 0;
    g_gen = 7;
    h = shadow_call(&sl, &a, st, &status, &failed);
    TK_CHECK(h == 2 && n_trials == 3, "a new candidate: tried, then judged");
    g_gen = 5;

    /* 5. not in capture, or the service's memory reserve reached: not judged */
    capture_active = 0;
    TK_CHECK(shadow_call(&sl, &a, st, &status, &failed) == 1, "no capture active: not this path");
    capture_active = 1;
    free_bytes = 64ull << 20;
    vattn_args huge = call_args(16, 128);
    h = shadow_call(&sl, &huge, st, &status, &failed);
    TK_CHECK(h == 1 && nl == 0, "too little device memory for the service's reserve: not judged");
    free_bytes = 8ull << 30;

    /* 6. the drainer's reading: each replay reported once, by kind */
    volatile kcmp_out *o = kcap_gslot_out(&g_r, s->gslot);
    o->tally = KCAP_CMP_TALLY(5, 2), o->lost = 1;
    kcap_gpu_shadow_graph_settle(&g_r);
    TK_CHECK(n_agreed == 3 && n_lost == 1 && n_other == 0 && last_gen == 5,
             "5 replays, 2 divergent (1 staged, 1 lost): 3 agreed + 1 lost reported (%d, %d)", n_agreed, n_lost);
    kcap_gpu_shadow_graph_settle(&g_r);
    TK_CHECK(n_agreed == 3 && n_lost == 1, "read again: nothing twice");
    o->tally = KCAP_CMP_TALLY(6, 3); /* a divergent replay: no agreed one */
    kcap_gpu_shadow_graph_settle(&g_r);
    TK_CHECK(n_agreed == 3, "a divergent replay: no agreed reported for it");
    o->tally = KCAP_CMP_TALLY(7, 3);
    kcap_gpu_shadow_graph_settle(&g_r);
    TK_CHECK(n_agreed == 4 && n_lost == 1, "then an agreeing one: one more agreed (%d)", n_agreed);
    /* the counts are modulo 2^32: a long-running graph's tally wraps and is still read right */
    s->seen_agreed = 0xfffffffeull;
    o->tally = KCAP_CMP_TALLY(0x100000001ull, 3); /* 2^32 + 1 compared, 3 divergent: 2^32 - 2 agreed */
    kcap_gpu_shadow_graph_settle(&g_r);
    TK_CHECK(n_agreed == 4, "agreed count at 2^32 - 2 as seen: nothing new (%d)", n_agreed);
    o->tally = KCAP_CMP_TALLY(0x100000004ull, 3); /* compared wrapped: 3 more agreed */
    kcap_gpu_shadow_graph_settle(&g_r);
    TK_CHECK(n_agreed == 7 && s->seen_agreed == 0x100000001ull, "across the wrap: 3 more agreed (%d)", n_agreed);
    o->tally = KCAP_CMP_TALLY(0x100000003ull, 3); /* a tally that went back (two executables' replays) */
    kcap_gpu_shadow_graph_settle(&g_r);
    TK_CHECK(n_agreed == 7 && s->seen_agreed == 0x100000001ull, "a tally one behind: nothing reported (%d)", n_agreed);
    s->seen_agreed = 5; /* diverged's low half wrapped too: 2^32 + 10 compared, 2^32 + 5 divergent */
    o->tally = KCAP_CMP_TALLY(0x10000000aull, 0x100000005ull);
    kcap_gpu_shadow_graph_settle(&g_r);
    TK_CHECK(n_agreed == 7, "both halves wrapped, 5 agreed as seen: nothing new (%d)", n_agreed);
    o->tally = KCAP_CMP_TALLY(0x10000000dull, 0x100000005ull);
    kcap_gpu_shadow_graph_settle(&g_r);
    TK_CHECK(n_agreed == 10 && s->seen_agreed == 8, "then 3 agreeing replays: 3 reported (%d)", n_agreed);
    fs->gslot = s->gslot; /* an unjudged site (failed candidate) sharing nothing is skipped */
    int before = n_agreed;
    kcap_gpu_shadow_graph_settle(&g_r);
    TK_CHECK(n_agreed == before, "unjudged sites are never read");

    /* 7. the dispatch: what it will not judge leaves before any ring exists */
    kcap_config *cfg = kcap_cfg_mut();
    cfg->gpu_async = 0, cfg->shadow_graphs = 0;
    capture_active = 0;
    nl = 0;
    TK_CHECK(kcap_gpu_shadow(&sl, &a, NULL, 0, st, 1, cand, 4096, 5, &status, &failed) == 1 && n_ring_of == 0 &&
                 nl == 0, "sync mode, an eager call: not judged, no ring made");
    capture_active = 1;
    cfg->gpu_async = 1;
    TK_CHECK(kcap_gpu_shadow(&sl, &a, NULL, 0, st, 1, cand, 4096, 5, &status, &failed) == 1 && n_ring_of == 0,
             "a graph call while KCAP_SHADOW_GRAPHS=0: not judged, no ring made");
    cfg->shadow_graphs = 1;
    TK_CHECK(kcap_gpu_shadow(&sl, &a, NULL, 0, st, 1, cand, 4096, 5, &status, &failed) == 2 && n_ring_of == 1,
             "KCAP_SHADOW_GRAPHS=1: the graph path");

    /* 8. the eager path: production, poison, candidate, compare, gated staging, done event */
    capture_active = 0;
    atomic_store(&g_r.base, 0x4000); /* the ring's memory, as the drainer allocates it */
    g_sites[0].done = (CUevent)0xd0; /* made with the ring in kcap_gpu.c */
    nl = 0, nrec = 0;
    int np2 = n_prod;
    h = kcap_gpu_shadow(&sl, &a, NULL, 0, st, 9, cand, 4096, 5, &status, &failed);
    ksite *es = &g_sites[0];
    TK_CHECK(h == 0 && n_prod == np2 + 1 && nl == 3 && L[0].f == (CUfunction)&fn_poison && L[1].f == (CUfunction)&fn_cmp &&
                 L[1].gate.ring && L[1].gate.force && !L[1].gate.lost && L[2].f == (CUfunction)&fn_stage_both &&
                 L[2].in.force && L[2].out.phase == 1 && nrec == 5 && recorded[4] == es->done &&
                 es->shadow && es->cand_gen == 5 && atomic_load(&es->pending),
             "eager: poison, compare, gated staging, 4 timing events and the done event (%d launches, %d records)", nl, nrec);
    TK_CHECK((uintptr_t)cand_got.o == es->cand && L[0].a0 == es->cand, "eager: the candidate writes the site's buffer");
    atomic_store(&es->pending, 0); /* as the drainer would settle it */
    cand_status = 4;
    nl = 0, nrec = 0;
    h = kcap_gpu_shadow(&sl, &a, NULL, 0, st, 10, cand, 4096, 5, &status, &failed);
    TK_CHECK(h == -1 && failed == 4 && nl == 1 && nrec == 1 && recorded[0] == es->done && !es->timed &&
                 !atomic_load(&es->pending) && atomic_load(&es->launched),
             "eager, failing candidate (the second eager call: not timed, 1 call in 8 is): the done event "
             "recorded before the site is given back, no compare");
    cand_status = 0;

    /* 9. the drainer's reading of an eager call's outcome and verdict: the compare writes them
       with no fence between, so an outcome seen before its verdict waits for it */
    const unsigned int g9 = 41;
    const unsigned long long out_kept = (unsigned long long)g9 << 1 | 1, out_not = (unsigned long long)g9 << 1;
    TK_CHECK(kcap_eager_outcome((unsigned long long)(g9 - 1) << 1, 1, KCAP_CMP_VERDICT(g9, 0), g9) ==
                 KCAP_EAGER_WAIT, "outcome of the site's previous call: wait");
    TK_CHECK(kcap_eager_outcome(out_kept, 1, 0, g9) == KCAP_EAGER_STAGED, "staged: its doorbell settles it");
    TK_CHECK(kcap_eager_outcome(out_not, 0, 0, g9) == KCAP_EAGER_DROPPED, "not staged, not judged: dropped");
    TK_CHECK(kcap_eager_outcome(out_not, 1, KCAP_CMP_VERDICT(g9 - 1, 0), g9) == KCAP_EAGER_WAIT,
             "not staged, its verdict not seen yet (the previous call's is): wait, not settled unjudged");
    TK_CHECK(kcap_eager_outcome(out_not, 1, KCAP_CMP_VERDICT(g9, 0), g9) == KCAP_EAGER_AGREED, "agreed");
    TK_CHECK(kcap_eager_outcome(out_not, 1, KCAP_CMP_VERDICT(g9, 1), g9) == KCAP_EAGER_LOST,
             "divergent but not staged: lost");
    return tk_summary("test_capture_shadow_dev");
}
