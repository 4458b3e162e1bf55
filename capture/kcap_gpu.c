/*
 * kcap_gpu.c — zero-stall capture on the GPU, eager and inside CUDA graphs: the call side.
 *
 * The calling thread never waits for the GPU. Per captured call it enqueues, on the call's
 * own stream, a one-thread gate and a staging kernel before the real call (its input tensors,
 * laid out from the call's description by kcap_stage_layout.c: index pointers, strided
 * views, the index tensors and the pool rows they reference, whose counts such as
 * kv_indptr[bs] are read on the device) and a staging kernel after it (the outputs), into a
 * region of the device staging ring sized to that snapshot (kcap_gather.cu, kcap_ring.h). The drainer thread
 * (kcap_gpu_drain.c) reads finished regions back and turns them into snapshots.
 *
 * During CUDA stream capture the three kernels become graph nodes with a permanent "site"
 * each (56 bytes of device memory, in chunks allocated as graphs are captured, no fixed cap
 * a service can reach): at every replay the gate checks the graph budget the drainer keeps
 * on the device — spent, every kernel exits after reading two words. Calls captured while
 * the process is dormant are seen because libkcap interposes cudaStreamBeginCapture/
 * EndCapture (kcap_interpose.c) and takes the slow path while a capture is open. Setup work
 * done inside a capture (allocations, module load) runs with the thread's capture mode
 * exchanged to relaxed, so it never invalidates the host's graph.
 */
#include "kcap_gpu_int.h"
#include "kcap_graphexec.h"

#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static kring *g_ring;
pthread_mutex_t kcap_g_ring_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int g_log_gpu, g_log_ctx, g_log_sites, g_log_stage, g_log_nomem;

CUstreamCaptureMode kcap_relax(const kcap_cu *cu)
{
    CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
    cu->cuThreadExchangeStreamCaptureMode(&m);
    return m;
}

void kcap_unrelax(const kcap_cu *cu, CUstreamCaptureMode m) { cu->cuThreadExchangeStreamCaptureMode(&m); }

ksite *kcap_site(kring *r, int sid)
{
    /* the drainer reads sites while host threads add them: nsites is published (release)
       only after the site's chunk exists */
    if (sid < 0 || sid >= __atomic_load_n(&r->nsites, __ATOMIC_ACQUIRE))
        return NULL;
    ksite *h = r->site_host[sid / KCAP_SITE_CHUNK];
    return h ? &h[sid % KCAP_SITE_CHUNK] : NULL;
}

CUdeviceptr kcap_site_dev(kring *r, int sid)
{
    return r->site_dev[sid / KCAP_SITE_CHUNK] + (CUdeviceptr)(sid % KCAP_SITE_CHUNK) * sizeof(ksite_dev);
}

/* One more site (caller holds kcap_g_ring_lock): a new chunk every KCAP_SITE_CHUNK sites. */
int kcap_site_new(kring *r)
{
    if (r->nsites >= KCAP_SITE_CHUNK * KCAP_SITE_CHUNKS)
        return -1;
    int c = r->nsites / KCAP_SITE_CHUNK;
    if (!r->site_host[c]) {
        const kcap_cu *cu = r->cu;
        ksite *h = calloc(KCAP_SITE_CHUNK, sizeof *h);
        CUdeviceptr d = 0;
        CUstreamCaptureMode m = kcap_relax(cu);
        CUresult e = h ? cu->cuMemAlloc(&d, KCAP_SITE_CHUNK * sizeof(ksite_dev)) : CUDA_ERROR_OUT_OF_MEMORY;
        if (e == CUDA_SUCCESS)
            e = cu->cuMemsetD8Async(d, 0, KCAP_SITE_CHUNK * sizeof(ksite_dev), r->side);
        if (e == CUDA_SUCCESS)
            e = cu->cuStreamSynchronize(r->side);
        kcap_unrelax(cu, m);
        if (e != CUDA_SUCCESS) {
            if (d)
                cu->cuMemFree(d);
            free(h);
            return -1;
        }
        r->site_dev[c] = d;
        r->site_host[c] = h;
    }
    int sid = r->nsites;
    __atomic_store_n(&r->nsites, sid + 1, __ATOMIC_RELEASE);
    return sid;
}

/* The ring of the current context, created on first use (NULL: none possible). */
static kring *kcap_ring_get(const kcap_cu *cu, CUcontext ctx)
{
    pthread_mutex_lock(&kcap_g_ring_lock);
    kring *r = g_ring;
    if (r) {
        pthread_mutex_unlock(&kcap_g_ring_lock);
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
        pthread_mutex_unlock(&kcap_g_ring_lock);
        return NULL;
    }
    r->cu = cu;
    r->ctx = ctx;
    r->books = calloc(1, sizeof *r->books);
    CUstreamCaptureMode m = kcap_relax(cu);
    CUresult e = r->books ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
    const char *what = "no staging kernel";
    int ok = kcap_gather_ptx[0] != 0;
    if (ok && e == CUDA_SUCCESS) e = cu->cuModuleLoadData(&r->mod, kcap_gather_ptx);
    if (ok && e == CUDA_SUCCESS) e = cu->cuModuleGetFunction(&r->stage, r->mod, "kcap_stage");
    if (ok && e == CUDA_SUCCESS) e = cu->cuModuleGetFunction(&r->gate, r->mod, "kcap_stage_gate");
    if (ok && e == CUDA_SUCCESS) e = cu->cuModuleGetFunction(&r->ctl, r->mod, "kcap_ring_ctl");
    if (ok && e == CUDA_SUCCESS && (cu->cuModuleGetFunction(&r->cmp, r->mod, "kcap_shadow_cmp") ||
                                    cu->cuModuleGetFunction(&r->poison, r->mod, "kcap_shadow_poison") ||
                                    cu->cuModuleGetFunction(&r->stage_both, r->mod, "kcap_stage_both")))
        r->cmp = NULL; /* shadow mode then does not judge device calls */
    CUdevice dev = 0;
    int sms = 0;
    if (ok && e == CUDA_SUCCESS) e = cu->cuCtxGetDevice(&dev);
    if (ok && e == CUDA_SUCCESS)
        e = cu->cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
    r->nblocks = KCAP_STAGE_BLOCKS_PER_SM * (sms > 0 ? sms : KCAP_STAGE_SMS_UNKNOWN);
    if (ok && e == CUDA_SUCCESS) e = cu->cuMemAlloc(&r->hdr, sizeof(kring_dev));
    if (ok && e == CUDA_SUCCESS) e = cu->cuMemAlloc(&r->ctl_out, 4 * sizeof(unsigned long long));
    void *bell = NULL, *outc = NULL;
    if (ok && e == CUDA_SUCCESS)
        e = cu->cuMemHostAlloc(&bell, sizeof(kbell) * KCAP_RING_NREC,
                               CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE);
    if (ok && e == CUDA_SUCCESS)
        e = cu->cuMemHostAlloc(&outc, sizeof(unsigned long long) * KCAP_EAGER_SITES,
                               CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE);
    if (ok && e == CUDA_SUCCESS) {
        memset(bell, 0, sizeof(kbell) * KCAP_RING_NREC);
        memset(outc, 0, sizeof(unsigned long long) * KCAP_EAGER_SITES);
        r->bell = bell;
        r->outcome = outc;
        e = cu->cuMemHostAlloc(&r->bounce, KCAP_BOUNCE_BYTES, CU_MEMHOSTALLOC_PORTABLE);
    }
    if (ok && e == CUDA_SUCCESS && r->cmp) {
        void *co = NULL;
        kcmp_dev *init = calloc(KCAP_EAGER_SITES, sizeof *init);
        e = init ? cu->cuMemHostAlloc(&co, sizeof(kcmp_out) * KCAP_EAGER_SITES,
                                      CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE)
                 : CUDA_ERROR_OUT_OF_MEMORY;
        if (e == CUDA_SUCCESS) {
            memset(co, 0, sizeof(kcmp_out) * KCAP_EAGER_SITES);
            r->cmp_out = co;
            e = cu->cuMemAlloc(&r->cmp_dev, sizeof(kcmp_dev) * KCAP_EAGER_SITES);
        }
        for (int i = 0; init && i < KCAP_EAGER_SITES; i++)
            for (int k = 0; k < KCAP_CMP_MAX; k++)
                init[i].t[k].first_nonfinite = ~0ull;
        if (e == CUDA_SUCCESS)
            e = cu->cuMemcpyHtoD(r->cmp_dev, init, sizeof(kcmp_dev) * KCAP_EAGER_SITES);
        free(init);
    }
    if (ok && e == CUDA_SUCCESS) e = cu->cuStreamCreate(&r->side, CU_STREAM_NON_BLOCKING);
    /* Clear the header on OUR stream and wait for that alone: a plain cuMemsetD8 runs on the
     * legacy stream, which is not ordered with a host's non-blocking stream. */
    if (ok && e == CUDA_SUCCESS) e = cu->cuMemsetD8Async(r->hdr, 0, sizeof(kring_dev), r->side);
    if (ok && e == CUDA_SUCCESS) e = cu->cuStreamSynchronize(r->side);
    for (int i = 0; ok && e == CUDA_SUCCESS && i < KCAP_EAGER_SITES; i++) {
        if (kcap_site_new(r) != i) {
            e = CUDA_ERROR_OUT_OF_MEMORY;
            break;
        }
        e = cu->cuEventCreate(&kcap_site(r, i)->done, CU_EVENT_DISABLE_TIMING);
    }
    kcap_unrelax(cu, m);
    if (!ok || e != CUDA_SUCCESS) {
        kcap_log_once(&g_log_gpu, KCAP_LOG_WARN, "zero-stall GPU capture unavailable (%s); using "
                      "the synchronous path", !ok ? what : kcap_cu_errstr(cu, e));
        r->stage = NULL;
        pthread_mutex_unlock(&kcap_g_ring_lock);
        return NULL;
    }
    kcap_ring_books_init(r->books);
    /* capture is on: the memory now, once, rather than dropping the first calls */
    if (kcap_gpu_armed())
        kcap_ring_alloc_mem(r, 1);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    r->drainer_running = pthread_create(&r->drainer, NULL, kcap_drainer_main, r) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_mutex_unlock(&kcap_g_ring_lock);
    return r;
}

kring *kcap_ring_of(const kcap_cu *cu, CUcontext ctx) { return kcap_ring_get(cu, ctx); }

void kcap_stage_args_fill(kring *r, ksite *s, int sid, int phase, int force, kstage_args *p)
{
    memset(p, 0, sizeof *p);
    p->ring = r->hdr;
    p->site = kcap_site_dev(r, sid);
    p->bell = (uintptr_t)r->bell;
    p->outcome = force ? (uintptr_t)&r->outcome[sid] : 0;
    for (int c = 0; c < KCAP_NCOUNTS; c++) {
        p->count_src[c] = s->lay.count_src[c];
        p->count_size[c] = s->lay.count_size[c];
    }
    p->ncounts = s->lay.ncounts;
    p->fixed_bytes = s->lay.fixed_bytes;
    p->phase = phase;
    p->site_id = sid;
    p->force = force;
    p->gen = s->gen;
    int n = phase == 0 ? s->lay.nin : s->lay.nout;
    p->nsegs = n;
    memcpy(p->seg, phase == 0 ? s->lay.seg_in : s->lay.seg_out, sizeof(kseg) * (size_t)n);
}

CUresult kcap_stage_launch(kring *r, ksite *s, int sid, int phase, int force, CUstream st)
{
    kstage_args p;
    kcap_stage_args_fill(r, s, sid, phase, force, &p);
    void *params[] = {&p};
    CUresult e = CUDA_SUCCESS;
    if (phase == 0) /* one thread decides for both phases of this launch */
        e = r->cu->cuLaunchKernel(r->gate, 1, 1, 1, KCAP_ONE_WARP, 1, 1, 0, st, params, NULL);
    /* enough threads to stream the KV rows at full bandwidth; not capturing they exit at once */
    if (e == CUDA_SUCCESS)
        e = r->cu->cuLaunchKernel(r->stage, (unsigned)r->nblocks, 1, 1, KCAP_STAGE_THREADS, 1, 1, 0,
                                  st, params, NULL);
    return e;
}

/* An eager site that may take a new call: never used, or its last call has run on the GPU
 * and was settled (drained, or dropped by the device) by the drainer. */
static int kcap_eager_free(const kcap_cu *cu, ksite *o)
{
    if (!o->used)
        return 1;
    if (!atomic_load(&o->launched) || atomic_load(&o->pending))
        return 0;
    /* an event query on a host thread would invalidate another thread's global-mode graph
       capture: relaxed mode for the query */
    CUstreamCaptureMode m = kcap_relax(cu);
    int done = cu->cuEventQuery(o->done) == CUDA_SUCCESS;
    kcap_unrelax(cu, m);
    return done;
}

int kcap_eager_site_take(kring *r, int lowest)
{
    for (int k = 0; k < KCAP_EAGER_SITES; k++) {
        int i = lowest ? k : (r->next_eager + k) % KCAP_EAGER_SITES;
        if (kcap_eager_free(r->cu, kcap_site(r, i))) {
            r->next_eager = (i + 1) % KCAP_EAGER_SITES;
            return i;
        }
    }
    return -1;
}

int kcap_gpu_capture(kcap_slot *sl, const void *a, void *ws, size_t wsb, void *stream,
                     uint64_t seq, int in_capture, int *status_out)
{
    kcap_call_fn real = atomic_load(&sl->real);
    const kcap_config *c = kcap_cfg();
    if (!c->gpu_async && !in_capture)
        return 1;
    /* where the tensors go, from the description; a call the staging kernels cannot lay out
       takes the synchronous path (eager) or is counted as not captured (graph) */
    kcap_layout *lay = malloc(sizeof *lay);
    if (!lay || sl->desc->args_size > KCAP_ARGS_MAX || kcap_stage_layout(sl->desc, a, lay)) {
        free(lay);
        return 1;
    }
    const kcap_cu *cu = kcap_cu_load(NULL);
    CUcontext ctx = NULL;
    if (!cu || cu->cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || !ctx) {
        free(lay);
        return 1;
    }
    kring *r = kcap_ring_get(cu, ctx);
    if (!r) {
        free(lay);
        return 1;
    }
    if (!in_capture && !atomic_load(&r->base) && kcap_ring_alloc_mem(r, 0)) {
        /* no memory to stage into: waiting for the GPU (the synchronous path) is not an
           option for the zero-stall mode, so the call is dropped and counted */
        atomic_fetch_add(&kcap_g_stats.dropped_ring_nomem, 1);
        *status_out = kcap_real(real, a, ws, wsb, stream);
        free(lay);
        return -1;
    }
    int sid = -1;
    pthread_mutex_lock(&kcap_g_ring_lock);
    if (in_capture) {
        sid = kcap_site_new(r);
    } else {
        sid = kcap_eager_site_take(r, 0);
    }
    ksite *s = sid >= 0 ? kcap_site(r, sid) : NULL;
    if (s) {
        kcap_site_fill(s, sl, a, seq, in_capture, 0, !in_capture);
        s->lay = *lay;
    }
    pthread_mutex_unlock(&kcap_g_ring_lock);
    free(lay);
    if (!s) {
        if (in_capture)
            kcap_log_once(&g_log_sites, KCAP_LOG_WARN, "more than %d graph call sites; further "
                          "ones are not captured (counted as sites)", KCAP_SITE_CHUNK * KCAP_SITE_CHUNKS);
        else
            kcap_log_once(&g_log_sites, KCAP_LOG_WARN, "all %d eager staging sites are busy "
                          "(calls faster than the GPU runs them); counted as sites", KCAP_EAGER_SITES);
        atomic_fetch_add(&kcap_g_stats.dropped_sites, 1);
        *status_out = kcap_real(real, a, ws, wsb, stream);
        return -1;
    }
    CUstream st = (CUstream)stream;
    CUresult e = kcap_stage_launch(r, s, sid, 0, !in_capture, st);
    int status = kcap_real(real, a, ws, wsb, stream);
    s->status = status;
    if (e == CUDA_SUCCESS)
        e = kcap_stage_launch(r, s, sid, 1, !in_capture, st);
    if (e == CUDA_SUCCESS && !in_capture)
        e = cu->cuEventRecord(s->done, st);
    *status_out = status;
    int failed = e != CUDA_SUCCESS;
    /* a failed eager launch is the caller's to settle (-1: it gives the unit back), unless
       the drainer settled it already from what the gate did (then 0: settled) */
    int ours = failed && !in_capture && atomic_exchange(&s->pending, 0);
    /* only now may another call take this site: before the event is recorded, a drained site
       would look finished while this call's kernels are still queued */
    atomic_store(&s->launched, 1);
    if (failed) {
        /* a gate that ran may hold a region no doorbell will publish: the ring front then
           stays there and later calls that do not fit are dropped and counted (a launch
           failure means the context is failing anyway; capture/README.md, Known limits) */
        atomic_fetch_add(&kcap_g_stats.failed_record, 1);
        kcap_log_once(&g_log_stage, KCAP_LOG_WARN, "launching the staging kernel failed: %s",
                      kcap_cu_errstr(cu, e));
        return in_capture || ours ? -1 : 0;
    }
    if (in_capture)
        kcap_graphexec_nodes_added(); /* graphs are walked for a clean twin from now on */
    return in_capture ? 2 : 0;
}

int kcap_gpu_own_kind(const void *f)
{
    kring *r = g_ring;
    if (!f || !r || !r->stage)
        return 0;
    if (f == (const void *)r->poison)
        return 2;
    if (f == (const void *)r->cmp)
        return 3;
    return f == (const void *)r->stage || f == (const void *)r->gate || f == (const void *)r->ctl ||
           (r->stage_both && f == (const void *)r->stage_both);
}

int kcap_gpu_own_function(const void *f) { return kcap_gpu_own_kind(f) != 0; }

/* Exit: let the drainer finish what the GPU has staged (bounded), then stop it. */
void kcap_gpu_shutdown(int timeout_ms)
{
    kring *r = g_ring;
    kcap_shadow_async_stop(); /* calls from now on launch their candidates themselves */
    if (!r || !r->drainer_running)
        return;
    uint64_t end = kcap_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    const kcap_cu *cu = r->cu;
    for (int i = 0; i < KCAP_EAGER_SITES; i++)
        while (kcap_site(r, i)->used && cu->cuEventQuery(kcap_site(r, i)->done) == CUDA_ERROR_NOT_READY &&
               kcap_now_ns() < end)
            usleep(KCAP_SHUTDOWN_POLL_US);
    atomic_store(&r->all_drained, 0);
    while (!atomic_load(&r->all_drained) && kcap_now_ns() < end)
        usleep(KCAP_SHUTDOWN_DRAIN_US);
    atomic_store(&r->stop, 1);
    pthread_join(r->drainer, NULL);
    r->drainer_running = 0;
}

void kcap_gpu_atfork_child(void)
{
    /* CUDA does not survive fork: the child never touches the parent's ring */
    g_ring = NULL;
    pthread_mutex_init(&kcap_g_ring_lock, NULL);
    kcap_gpu_shadow_graph_atfork_child();
    kcap_shadow_async_atfork_child();
}

void kcap_gpu_nomem_log(unsigned long long free_b, unsigned long long total_b, unsigned long long want)
{
    kcap_log_once(&g_log_nomem, KCAP_LOG_WARN,
                  "no GPU staging ring: %llu MiB free of %llu MiB, and kcap leaves the service "
                  "%llu MiB (KCAP_RING_BYTES=%llu MiB asked); calls are dropped and counted as "
                  "no_device_memory — free device memory, lower KCAP_RING_BYTES, or use "
                  "KCAP_GPU_MODE=sync for eager calls",
                  free_b >> 20, total_b >> 20, (unsigned long long)kcap_ring_reserve(total_b) >> 20,
                  want >> 20);
}
