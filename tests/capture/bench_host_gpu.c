/*
 * bench_host_gpu.c — host-thread time per eager vattn_verify call, from C (issue "Shadow mode"
 * item 6: host-thread time per call unchanged within noise). The torch client of
 * bench_capture_gpu.sh times the ctypes call with perf_counter, and its run-to-run spread
 * (±10 µs) is as large as what is being looked for; this client has no interpreter between
 * the clock and the call. It binds the library as ctypes does (dlopen + dlsym, so libkcap's
 * interposer sees it through dlsym), lays out one call of the given shape in device memory
 * (scattered page_size = 1 slots, a causal chain visibility), and times N calls, each after
 * the stream has drained and a gap (slept: the CPU and the driver cold, as between a
 * service's steps; or spun: warm), or in bursts of K calls back to back (--burst: a step's
 * layers, the host running ahead of the GPU). Stream time per call is also reported (events
 * outside the timed region, per burst / K). With --primitives it times, the same way, the driver calls shadow mode's worker
 * path makes on the calling thread, so a measured difference can be placed.
 *
 * Output: one JSON line. Run by bench_host_gpu.sh under each configuration (docs/PERF.md).
 */
#include "kcap_cu.h"
#include "verify_attn.h"
#include "../testkit.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef int (*verify_fn)(const vattn_args *, void *, size_t, void *);
typedef size_t (*wsize_fn)(const vattn_args *);

static const kcap_cu *cu;
static tk_rng rng_state;

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec * 1e-3;
}

/* gap_us ≥ 1000: slept (cold); below: spun (warm) */
static void gap(long gap_us)
{
    if (gap_us >= 1000) {
        usleep((useconds_t)gap_us);
        return;
    }
    double t0 = now_us();
    while (now_us() - t0 < (double)gap_us)
        ;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* p10 / median / p90 of v[0..n), sorted in place, as a JSON object */
static void print_stats(const char *name, double *v, int n, const char *sep)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    printf("\"%s\": {\"p10\": %.2f, \"median\": %.2f, \"p90\": %.2f}%s", name, v[n / 10], v[n / 2],
           v[n * 9 / 10], sep);
}

static CUdeviceptr dev_upload(const void *h, size_t n)
{
    CUdeviceptr p = 0;
    if (cu->cuMemAlloc(&p, n ? n : 1) || (h && n && cu->cuMemcpyHtoD(p, h, n))) {
        fprintf(stderr, "bench_host_gpu: device allocation or copy of %zu bytes failed\n", n);
        exit(1);
    }
    return p;
}

/* One call of (bs, heads, q_len, prefix) in device memory. */
static vattn_args make_call(int bs, int heads, int q_len, int prefix)
{
    const int D = VATTN_HEAD_DIM_QK, DV = VATTN_HEAD_DIM_V;
    int64_t slots = (int64_t)bs * (prefix + q_len) * 2 + 64;
    size_t pool_n = (size_t)slots * D, q_n = (size_t)bs * q_len * heads * D;
    uint16_t *pool = malloc(pool_n * 2), *q = malloc(q_n * 2);
    int64_t *perm = malloc(sizeof(int64_t) * (size_t)slots);
    int32_t *indptr = malloc(sizeof(int32_t) * (size_t)(bs + 1));
    uint8_t *vis = calloc((size_t)bs * q_len * q_len, 1);
    if (!pool || !q || !perm || !indptr || !vis) {
        fprintf(stderr, "bench_host_gpu: out of host memory\n");
        exit(1);
    }
    for (size_t i = 0; i < pool_n; i++)
        pool[i] = tk_bf16((float)(tk_unit(&rng_state) * 2 - 1));
    for (size_t i = 0; i < q_n; i++)
        q[i] = tk_bf16((float)(tk_unit(&rng_state) * 2 - 1));
    tk_shuffle(&rng_state, perm, slots);
    for (int b = 0; b <= bs; b++)
        indptr[b] = b * (prefix + q_len);
    for (int b = 0; b < bs; b++) /* a chain: token i sees tokens 0..i */
        for (int i = 0; i < q_len; i++)
            for (int j = 0; j <= i; j++)
                vis[((size_t)b * q_len + i) * q_len + j] = 1;
    vattn_args a = {0};
    a.struct_size = sizeof a;
    a.dtype = VATTN_DTYPE_BF16;
    a.index_type = VATTN_INDEX_INT64;
    a.bs = bs, a.q_len = q_len, a.num_heads = heads, a.num_slots = slots;
    a.max_kv_len = prefix + q_len;
    a.sm_scale = 0.0625f;
    a.q = (void *)(uintptr_t)dev_upload(q, q_n * 2);
    a.q_stride_t = (int64_t)heads * D, a.q_stride_h = D;
    a.kv_cache = (void *)(uintptr_t)dev_upload(pool, pool_n * 2);
    a.kv_stride = D;
    a.kv_indptr = (void *)(uintptr_t)dev_upload(indptr, sizeof(int32_t) * (size_t)(bs + 1));
    a.kv_indices = (void *)(uintptr_t)dev_upload(perm, sizeof(int64_t) * (size_t)indptr[bs]);
    a.visibility = (void *)(uintptr_t)dev_upload(vis, (size_t)bs * q_len * q_len);
    a.o = (void *)(uintptr_t)dev_upload(NULL, (size_t)bs * q_len * heads * DV * 2);
    a.o_stride_t = (int64_t)heads * DV, a.o_stride_h = DV;
    a.lse = (void *)(uintptr_t)dev_upload(NULL, sizeof(float) * (size_t)bs * q_len * heads);
    free(pool), free(q), free(perm), free(indptr), free(vis);
    return a;
}

/* the thread a condition variable wakes, as kcap's worker is woken */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static int g_posted, g_quit;
static void *sleeper(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&g_mu);
    while (!g_quit) {
        while (!g_posted && !g_quit)
            pthread_cond_wait(&g_cv, &g_mu);
        g_posted = 0;
    }
    pthread_mutex_unlock(&g_mu);
    return NULL;
}

/* an empty kernel, JIT-compiled from PTX: what one launch costs the calling thread */
static const char kEmptyPtx[] = ".version 7.8\n.target sm_52\n.address_size 64\n" /* JIT: any GPU */
                                ".visible .entry bench_empty()\n{\nret;\n}\n";

typedef CUresult (*batch_fn)(CUstream, unsigned int, CUstreamBatchMemOpParams *, unsigned int);

/* The calling thread's driver calls of shadow mode's worker path (and of alternatives to it),
 * one at a time. */
static void primitives(CUstream st, int n, long gap_us)
{
    CUevent ev;
    CUmodule mod;
    CUfunction empty;
    CUdeviceptr dword = 0;
    unsigned int *word = NULL;
    batch_fn batch = (batch_fn)dlsym(cu->handle, "cuStreamBatchMemOp_v2");
    if (cu->cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING) ||
        cu->cuMemHostAlloc((void **)&word, 64, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE) ||
        cu->cuModuleLoadData(&mod, kEmptyPtx) || cu->cuModuleGetFunction(&empty, mod, "bench_empty") ||
        cu->cuMemAlloc(&dword, 64) || cu->cuMemsetD8(dword, 1, 4) || !batch) {
        fprintf(stderr, "bench_host_gpu: event, mapped memory, module or cuStreamBatchMemOp failed\n");
        exit(1);
    }
    word[0] = 1, word[1] = 0; /* the waits are satisfied: their submission is what is timed */
    CUstreamBatchMemOpParams ops[2];
    memset(ops, 0, sizeof ops);
    ops[0].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
    ops[0].writeValue.address = (CUdeviceptr)(uintptr_t)&word[1];
    ops[0].writeValue.value = 1;
    ops[1].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
    ops[1].waitValue.address = (CUdeviceptr)(uintptr_t)&word[0];
    ops[1].waitValue.value = 1;
    ops[1].waitValue.flags = CU_STREAM_WAIT_VALUE_GEQ;
    pthread_t th;
    pthread_create(&th, NULL, sleeper, NULL);
    double *v = malloc(sizeof(double) * (size_t)n);
    static const char *names[] = {"cuStreamIsCapturing", "cuCtxGetCurrent", "cuEventRecord", "cuStreamWaitValue32",
                                  "record+wait", "cond_signal", "cuLaunchKernel(empty)",
                                  "cuStreamWaitValue32(device word)", "cuStreamBatchMemOp(write+wait)"};
    const int nk = (int)(sizeof names / sizeof *names);
    printf("{\"primitives\": {");
    int bad = 0;
    for (int k = 0; k < nk; k++) {
        for (int i = 0; i < n; i++) {
            cu->cuStreamSynchronize(st);
            gap(gap_us);
            CUstreamCaptureStatus cs;
            CUcontext c;
            double t0 = now_us();
            if (k == 0)
                bad += cu->cuStreamIsCapturing(st, &cs) != CUDA_SUCCESS;
            else if (k == 1)
                bad += cu->cuCtxGetCurrent(&c) != CUDA_SUCCESS;
            else if (k == 2)
                bad += cu->cuEventRecord(ev, st) != CUDA_SUCCESS;
            else if (k == 3)
                bad += cu->cuStreamWaitValue32(st, (CUdeviceptr)(uintptr_t)word, 1, CU_STREAM_WAIT_VALUE_GEQ) != CUDA_SUCCESS;
            else if (k == 4) {
                bad += cu->cuEventRecord(ev, st) != CUDA_SUCCESS;
                bad += cu->cuStreamWaitValue32(st, (CUdeviceptr)(uintptr_t)word, 1, CU_STREAM_WAIT_VALUE_GEQ) != CUDA_SUCCESS;
            } else if (k == 5) {
                pthread_mutex_lock(&g_mu);
                g_posted = 1;
                pthread_cond_signal(&g_cv);
                pthread_mutex_unlock(&g_mu);
            } else if (k == 6)
                bad += cu->cuLaunchKernel(empty, 1, 1, 1, 32, 1, 1, 0, st, NULL, NULL) != CUDA_SUCCESS;
            else if (k == 7)
                bad += cu->cuStreamWaitValue32(st, dword, 1, CU_STREAM_WAIT_VALUE_GEQ) != CUDA_SUCCESS;
            else
                bad += batch(st, 2, ops, 0) != CUDA_SUCCESS;
            v[i] = now_us() - t0;
        }
        print_stats(names[k], v, n, k < nk - 1 ? ", " : "");
    }
    printf("}, \"failed_calls\": %d, \"gap_us\": %ld, \"n\": %d}\n", bad, gap_us, n);
    pthread_mutex_lock(&g_mu);
    g_quit = 1;
    pthread_cond_signal(&g_cv);
    pthread_mutex_unlock(&g_mu);
    pthread_join(th, NULL);
    free(v);
}

static int usage(void)
{
    fprintf(stderr, "usage: bench_host_gpu --lib LIB.so [--shape BS,H,Q,PREFIX] [-n N] [--gap-us US] "
                    "[--burst K] [--primitives]\n");
    return 2;
}

int main(int argc, char **argv)
{
    const char *lib = NULL;
    int bs = 8, heads = 8, q_len = 16, prefix = 4096, n = 200, prim = 0, burst = 1;
    long gap_us = 30000;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--primitives")) {
            prim = 1;
            continue;
        }
        if (i + 1 >= argc)
            return usage();
        const char *a = argv[i], *v = argv[++i];
        if (!strcmp(a, "--lib"))
            lib = v;
        else if (!strcmp(a, "--shape")) {
            if (sscanf(v, "%d,%d,%d,%d", &bs, &heads, &q_len, &prefix) != 4)
                return usage();
        } else if (!strcmp(a, "-n"))
            n = atoi(v);
        else if (!strcmp(a, "--gap-us"))
            gap_us = atol(v);
        else if (!strcmp(a, "--burst"))
            burst = atoi(v);
        else
            return usage();
    }
    if (!lib || n < 10 || bs < 1 || heads < 1 || heads > VATTN_MAX_HEADS || q_len < 1 ||
        q_len > VATTN_MAX_Q_LEN || prefix < 0 || gap_us < 0 || burst < 1)
        return usage();
    rng_state = tk_seed(1);
    const char *why = "";
    CUdevice dev;
    CUcontext ctx;
    CUstream st;
    cu = kcap_cu_load(&why);
    if (!cu || cu->cuDeviceGet(&dev, 0) || cu->cuDevicePrimaryCtxRetain(&ctx, dev) || cu->cuCtxSetCurrent(ctx) ||
        cu->cuStreamCreate(&st, CU_STREAM_NON_BLOCKING)) {
        fprintf(stderr, "bench_host_gpu: no GPU: %s\n", why);
        return 1;
    }
    if (prim) {
        primitives(st, n, gap_us);
        return 0;
    }
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    verify_fn verify = h ? (verify_fn)dlsym(h, "vattn_verify") : NULL;
    wsize_fn wsize = h ? (wsize_fn)dlsym(h, "vattn_workspace_size") : NULL;
    if (!verify || !wsize) {
        fprintf(stderr, "bench_host_gpu: %s: %s\n", lib, h ? "does not export the vattn ABI" : dlerror());
        return 1;
    }
    vattn_args a = make_call(bs, heads, q_len, prefix);
    size_t wsb = wsize(&a);
    void *ws = wsb ? (void *)(uintptr_t)dev_upload(NULL, wsb) : NULL;
    CUevent e0, e1;
    if (cu->cuEventCreate(&e0, CU_EVENT_DEFAULT) || cu->cuEventCreate(&e1, CU_EVENT_DEFAULT))
        return 1;
    double *host = malloc(sizeof(double) * (size_t)n), *stream = malloc(sizeof(double) * (size_t)n);
    /* bursts of `burst` calls back to back (a step of a service's layers), the stream drained
       and the gap between bursts; three calls first: modules loaded, rings allocated */
    int m = 0; /* stream times: one per burst, per call */
    for (int i = -3; i < n;) {
        int k = i < 0 ? 1 : (burst < n - i ? burst : n - i);
        cu->cuStreamSynchronize(st);
        gap(gap_us);
        cu->cuEventRecord(e0, st);
        for (int j = 0; j < k; j++) {
            double t0 = now_us();
            int rc = verify(&a, ws, wsb, st);
            double t1 = now_us();
            if (rc != VATTN_OK) {
                fprintf(stderr, "bench_host_gpu: call %d failed (status %d)\n", i + j, rc);
                return 1;
            }
            if (i >= 0)
                host[i + j] = t1 - t0;
        }
        cu->cuEventRecord(e1, st);
        if (cu->cuStreamSynchronize(st)) {
            fprintf(stderr, "bench_host_gpu: the stream failed after call %d\n", i + k - 1);
            return 1;
        }
        float ms = 0.f;
        if (cu->cuEventElapsedTime(&ms, e0, e1) != CUDA_SUCCESS)
            ms = -1.f; /* shows as a negative stream time, not as a fast one */
        if (i >= 0)
            stream[m++] = (double)ms * 1000.0 / k;
        i += k;
    }
    printf("{");
    print_stats("host_us", host, n, ", ");
    print_stats("stream_us", stream, m, ", ");
    printf("\"shape\": [%d, %d, %d, %d], \"gap_us\": %ld, \"burst\": %d, \"n\": %d}\n", bs, heads, q_len, prefix,
           gap_us, burst, n);
    free(host), free(stream);
    return 0;
}
