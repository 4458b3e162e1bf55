/*
 * shadow_fakedrv.h — the fake CUDA driver and kcap_gpu.c stand-ins of the shadow-mode device
 * tests (test_capture_shadow_dev.c, test_capture_shadow_worker.c): host memory stands for
 * device memory; kernel launches, stream memory operations and event records are recorded
 * with the stream and whether the test's main thread made them; production, candidate and
 * the drainer's sink are counting stubs. Included by each test (one translation unit each).
 */
#ifndef SHADOW_FAKEDRV_H
#define SHADOW_FAKEDRV_H

#include "kcap_gpu_int.h"
#include "kcap_graphexec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "verify_attn.h"
#include "../testkit_vattn.h" /* TK_CHECK, QK, DV */

/* ---- the fake driver: host memory stands for device memory; launches are recorded ---- */
#define NL 64
static pthread_mutex_t g_fake_lock = PTHREAD_MUTEX_INITIALIZER; /* kcap's worker thread calls it too */
static struct {
    CUfunction f;
    CUstream st;
    int by_worker;             /* launched by a thread other than main's */
    unsigned long long h[3];   /* stream memory operations: address, value, flags */
    unsigned long long a0, a1, a2; /* poison: dst, bytes, the compare totals it resets */
    kcmp_args cmp;
    kstage_args gate;          /* the compare's: the gate its last block runs (ring 0: none) */
    kstage_args in, out;       /* kcap_stage_both's two phases */
} L[NL];
static int nl, n_alloc, capture_active = 1;
static size_t free_bytes = 8ull << 30;
static int write_never; /* 1: the GPU never runs the write of the word a stream waits for (a
                           wait ordered before it), other writes run; 2: no write runs (the side
                           stream has not reached the chain yet) */
static unsigned long long last_wait_addr;
static char fn_poison, fn_cmp, fn_stage_both, fn_wait, fn_write; /* their addresses are the CUfunctions
                                                                    (wait, write: the memory operations) */
static CUfunction fail_launch_of; /* f_launch refuses launches of this function */
static pthread_t main_thread;

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
static int n_screate;
static CUresult CUDAAPI f_screate(CUstream *s, unsigned int fl) { (void)fl; *s = (CUstream)(uintptr_t)(0x7777 + n_screate++); return CUDA_SUCCESS; }
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
static CUstream recorded_on[NL];
static int nrec, nrec_main;
static CUresult CUDAAPI f_erecord(CUevent e, CUstream s)
{
    pthread_mutex_lock(&g_fake_lock);
    if (nrec < NL)
        recorded_on[nrec] = s, recorded[nrec++] = e;
    nrec_main += pthread_equal(pthread_self(), main_thread) != 0;
    pthread_mutex_unlock(&g_fake_lock);
    return CUDA_SUCCESS;
}
static CUstream waited_st;
static CUevent waited_ev;
static CUresult CUDAAPI f_wait(CUstream s, CUevent e, unsigned int fl) { (void)fl; waited_st = s, waited_ev = e; return CUDA_SUCCESS; }
static CUresult CUDAAPI f_memset(CUdeviceptr p, unsigned char v, size_t n) { memset((void *)(uintptr_t)p, v, n); return CUDA_SUCCESS; }
static CUresult CUDAAPI f_setctx(CUcontext c) { (void)c; return CUDA_SUCCESS; }
static CUmoduleLoadingMode loading = CU_MODULE_EAGER_LOADING;
static CUresult CUDAAPI f_loadmode(CUmoduleLoadingMode *m) { *m = loading; return CUDA_SUCCESS; }
static CUresult CUDAAPI f_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                 unsigned bz, unsigned sh, CUstream st, void **params, void **extra);
/* stream memory operations, recorded as launches of fn_wait / fn_write */
static CUresult CUDAAPI f_waitv(CUstream s, CUdeviceptr a, cuuint32_t v, unsigned int fl)
{
    unsigned long long p[3] = {a, v, fl};
    return f_launch((CUfunction)&fn_wait, 0, 0, 0, 0, 0, 0, 0, s, (void **)p, NULL);
}
static CUresult CUDAAPI f_writev(CUstream s, CUdeviceptr a, cuuint32_t v, unsigned int fl)
{
    unsigned long long p[3] = {a, v, fl};
    return f_launch((CUfunction)&fn_write, 0, 0, 0, 0, 0, 0, 0, s, (void **)p, NULL);
}
static CUresult CUDAAPI f_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                 unsigned bz, unsigned sh, CUstream st, void **params, void **extra)
{
    (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)sh, (void)extra;
    pthread_mutex_lock(&g_fake_lock);
    if (nl >= NL) {
        pthread_mutex_unlock(&g_fake_lock);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (f == fail_launch_of) { /* a launch the test makes fail (recorded, then refused) */
        L[nl].f = f;
        L[nl++].st = st;
        pthread_mutex_unlock(&g_fake_lock);
        return CUDA_ERROR_LAUNCH_FAILED;
    }
    L[nl].f = f;
    L[nl].st = st;
    L[nl].by_worker = !pthread_equal(pthread_self(), main_thread);
    if (f == (CUfunction)&fn_wait || f == (CUfunction)&fn_write) { /* f_memop's */
        memcpy(L[nl].h, params, sizeof L[nl].h);
        if (f == (CUfunction)&fn_wait)
            last_wait_addr = L[nl].h[0];
        if (f == (CUfunction)&fn_write && write_never != 2 && !(write_never && L[nl].h[0] == last_wait_addr))
            *(volatile unsigned int *)(uintptr_t)L[nl].h[0] = (unsigned int)L[nl].h[1]; /* as the GPU will */
    }
    if (f == (CUfunction)&fn_poison) {
        L[nl].a0 = *(unsigned long long *)params[0];
        L[nl].a1 = *(unsigned long long *)params[1];
        L[nl].a2 = *(unsigned long long *)params[2];
    } else if (f == (CUfunction)&fn_cmp) {
        L[nl].cmp = *(kcmp_args *)params[0];
        L[nl].gate = *(kstage_args *)params[1];
    } else if (f == (CUfunction)&fn_stage_both) {
        L[nl].in = *(kstage_args *)params[0];
        L[nl].out = *(kstage_args *)params[1];
    }
    nl++;
    pthread_mutex_unlock(&g_fake_lock);
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
static int g_take_site; /* the eager site handed out */
int kcap_eager_site_take(kring *r, int lowest)
{
    (void)r, (void)lowest;
    ksite *s = &g_sites[g_take_site];
    return s->used && atomic_load(&s->pending) ? -1 : g_take_site;
}
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
static int n_prod, n_cand, cand_status, prod_status, cand_by_worker;
static void *cand_stream;
static vattn_args cand_got;
static int n_failed_cb, failed_cb_status;
static void fail_cb(const kcap_call_desc *d, int status, uint64_t seq, unsigned long long gen)
{
    (void)d, (void)seq, (void)gen;
    n_failed_cb++, failed_cb_status = status;
}
static int prod(const void *a, void *ws, size_t wsb, void *st) { (void)a, (void)ws, (void)wsb, (void)st; n_prod++; return prod_status; }
static int cand_sleep_ms;
static atomic_int cand_entered;
static int cand(const void *a, void *ws, size_t wsb, void *st)
{
    (void)ws, (void)wsb;
    if (cand_sleep_ms) { /* a candidate whose host code blocks */
        atomic_store(&cand_entered, 1);
        usleep((useconds_t)cand_sleep_ms * 1000);
    }
    if (cand_syncs && trial_open && st == trial_stream)
        trial_invalid = 1; /* a stream sync during capture */
    if (trial_open)
        return cand_status; /* the trial: nothing recorded of it */
    memcpy(&cand_got, a, sizeof cand_got);
    cand_by_worker = !pthread_equal(pthread_self(), main_thread);
    cand_stream = st;
    n_cand++;
    return cand_status;
}
static int n_agreed, n_lost, n_other, n_unjudged;
static unsigned long long last_gen;
static int sink(kcap_slot *sl, const void *args, int verdict, kcap_snapshot *snap, kcap_snapshot *c,
                uint64_t seq, const kcap_gpu_shadow_times *t)
{
    (void)sl, (void)args, (void)snap, (void)c, (void)seq;
    last_gen = t->cand_gen;
    verdict == KCAP_SHADOW_AGREED ? n_agreed++ : verdict == KCAP_SHADOW_LOST ? n_lost++
        : verdict == KCAP_SHADOW_UNJUDGED ? n_unjudged++ : n_other++;
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


/* The fake driver in kcap's table, the ring's kernels, the sink; the vattn_verify slot. */
static void fake_install(kcap_slot *sl)
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
    g_cu.cuStreamWaitEvent = f_wait;
    g_cu.cuMemsetD8 = f_memset;
    g_cu.cuCtxSetCurrent = f_setctx;
    g_cu.cuModuleGetLoadingMode = f_loadmode;
    main_thread = pthread_self();
    kcap_gpu_set_shadow_fail(fail_cb);
    g_r.cu = &g_cu;
    g_r.poison = (CUfunction)&fn_poison;
    g_r.cmp = (CUfunction)&fn_cmp;
    g_r.stage_both = (CUfunction)&fn_stage_both;
    g_r.nblocks = 8;
    g_r.nsites = KCAP_EAGER_SITES;
    kcap_gpu_set_shadow_sink(sink);
    memset(sl, 0, sizeof *sl);
    sl->desc = kcap_call_find("vattn_verify");
    atomic_store(&sl->real, prod);
}

#endif
