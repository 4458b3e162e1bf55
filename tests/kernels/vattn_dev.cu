/*
 * vattn_dev.cu — dev harness and benchmark driver for libverify_attn.so (llm.c style: one
 * program that checks, then times, every kernel variant on a chosen shape).
 *
 *   vattn_dev [--fp16] BS H Q_LEN PREFIX   per kernel variant (VATTN_VARIANT=3, 7): check vs the
 *                                          reference on that shape, time it with its own split
 *                                          count and forced ones (VATTN_FORCE_NSPLIT)
 *   vattn_dev --bench                      issue 6's configs: the two ceilings measured by
 *                                          microbenchmarks (D2D copy kernel, mma.sync m16n8k16
 *                                          bf16 throughput kernel), then per config the fast and
 *                                          reference kernel times, bytes, FLOPs, roofline floor,
 *                                          and every variant checked and timed; CSV lines
 *                                          prefixed "csv," for scripts/bench_gpu.sh
 *   vattn_dev --serving                    issue 16's serving set (and the 8 configs above):
 *                                          per call in CUDA graphs, L2 warm and cold, and eager
 *                                          (vattn_dev_serving.cuh)
 *   vattn_dev --serving-breakdown          the same, and per serving row the time by stage
 *                                          (dev build timing variants) and a split-count sweep
 *   vattn_dev --gather                     the KV gather alone: full-occupancy loads and the
 *                                          fast kernels' loader shape (vattn_dev_gather.cuh)
 *   vattn_dev --mma-rate                   mma.sync throughput by warps per scheduler and
 *                                          accumulator chains per warp (vattn_dev_mma.cuh)
 *
 * Default timings use the production library build/lib/libverify_attn.so; the variant and
 * split-count knobs (VATTN_VARIANT, VATTN_FORCE_NSPLIT) need the dev build
 * build/tests/libverify_attn_dev.so (-DVATTN_DEV), which the runs that set them use.
 *
 * Data are random non-zero bf16 in (-1, 1) made on the GPU, slots a random permutation of the
 * pool (page_size 1 scatter), int64 indices, causal visibility. Times are medians over runs,
 * each run preceded by a 256 MB write that flushes the 60 MB L2.
 */
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include "verify_attn.h"

#define CK(call)                                                                              \
    do {                                                                                      \
        cudaError_t e_ = (call);                                                              \
        if (e_ != cudaSuccess) {                                                              \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)

typedef int (*vattn_fn)(const vattn_args *, void *, size_t, void *);
typedef size_t (*vattn_ws_fn)(const vattn_args *);
static vattn_fn g_fast, g_ref, g_dev_fast; /* production library; g_dev_fast: the dev build */
static vattn_ws_fn g_ws, g_dev_ws;
static const char *(*g_status)(int);

/* dlopens build/<rel> next to this program's build/tests/ (both libraries export the same
 * names: RTLD_LOCAL keeps them apart) */
static void *open_lib(const char *rel)
{
    char exe[PATH_MAX], path[PATH_MAX + 64];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        fprintf(stderr, "cannot read /proc/self/exe\n");
        exit(1);
    }
    exe[n] = 0;
    snprintf(path, sizeof path, "%s/../%s", dirname(exe), rel);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h || !dlsym(h, "vattn_verify") || !dlsym(h, "vattn_workspace_size")) {
        fprintf(stderr, "dlopen %s: %s\n", path, h ? "lacks the vattn ABI" : dlerror());
        exit(1);
    }
    return h;
}

static void load_lib(void)
{
    void *h = open_lib("lib/libverify_attn.so");
    g_fast = (vattn_fn)dlsym(h, "vattn_verify");
    g_ref = (vattn_fn)dlsym(h, "vattn_verify_reference");
    g_ws = (vattn_ws_fn)dlsym(h, "vattn_workspace_size");
    g_status = (const char *(*)(int))dlsym(h, "vattn_status_string");
    void *d = open_lib("tests/libverify_attn_dev.so");
    g_dev_fast = (vattn_fn)dlsym(d, "vattn_verify");
    g_dev_ws = (vattn_ws_fn)dlsym(d, "vattn_workspace_size");
}

/* ---- microbenchmarks: the two ceilings ---- */
__global__ void copy_kernel(const uint4 *__restrict__ src, uint4 *__restrict__ dst, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = src[i];
}

constexpr int MMA_CHAINS = 8;
/* CH independent chains of mma.sync m16n8k16 bf16 per warp, iters times; each warp's clock64
 * cycles go to cycles[] (vattn_dev_mma.cuh's rates per warp). The ceiling below is CH = 8. */
template <int CH> __global__ void mma_rate_kernel(float *out, long long *cycles, int iters, uint32_t seed)
{
    uint32_t a[4], b[2];
    for (int k = 0; k < 4; k++)
        a[k] = (seed * (threadIdx.x + 7 * k + 1)) & 0x3f7f3f7fu; /* finite bf16 pairs */
    for (int k = 0; k < 2; k++)
        b[k] = (seed * (threadIdx.x + 13 * k + 3)) & 0x3f7f3f7fu;
    float c[CH][4] = {};
    const long long t0 = clock64();
    for (int it = 0; it < iters; it++) {
#pragma unroll
        for (int ch = 0; ch < CH; ch++)
            asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                         "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                         : "+f"(c[ch][0]), "+f"(c[ch][1]), "+f"(c[ch][2]), "+f"(c[ch][3])
                         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
    float s = 0;
    for (int ch = 0; ch < CH; ch++)
        s += c[ch][0] + c[ch][1] + c[ch][2] + c[ch][3];
    const long long t1 = clock64(); /* iters x CH MMAs: the last chains' tail is < 0.1 % of it */
    if (s == 1234.5f) /* practically never: keeps the chains alive */
        out[threadIdx.x] = s;
    if ((threadIdx.x & 31) == 0)
        cycles[blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5)] = t1 - t0;
}

__global__ void fill_bf16(uint16_t *p, size_t n, uint64_t seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;
        x ^= x >> 31;
        x *= 0xBF58476D1CE4E5B9ull;
        x ^= x >> 29;
        const int s = (int)(x & 1), e = -1 - (int)((x >> 1) % 7);
        p[i] = (uint16_t)((s << 15) | ((e + 127) << 7) | ((x >> 8) & 0x7f));
    }
}

static void *g_flush;
static const size_t FLUSH_BYTES = 256u << 20;
__global__ void read_flush_kernel(const uint4 *p, size_t n, unsigned *out)
{
    unsigned a = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        a ^= p[i].x;
    if (a == 0x9e3779b9u) /* practically never: keeps the loads */
        *out = a;
}
/* 1: the flush reads FLUSH_BYTES instead of writing them, so L2 is left clean (--gather) */
static int g_flush_read;
static unsigned *g_flush_out;
static void flush_l2(void)
{
    if (g_flush_read)
        read_flush_kernel<<<1056, 512>>>((const uint4 *)g_flush, FLUSH_BYTES / 16, g_flush_out);
    else
        CK(cudaMemsetAsync(g_flush, (int)(rand() & 0xff), FLUSH_BYTES, 0));
}

/* median time in ms of fn() over reps runs, L2 flushed before each */
template <class F> static double time_median(F fn, int reps)
{
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    std::vector<float> ts;
    fn(); /* warm-up */
    CK(cudaDeviceSynchronize());
    for (int r = 0; r < reps; r++) {
        flush_l2();
        CK(cudaEventRecord(a, 0));
        fn();
        CK(cudaEventRecord(b, 0));
        CK(cudaEventSynchronize(b));
        float ms;
        CK(cudaEventElapsedTime(&ms, a, b));
        ts.push_back(ms);
    }
    std::sort(ts.begin(), ts.end());
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return ts[ts.size() / 2];
}

static double measure_copy_bw(void)
{
    const size_t bytes = 2ull << 30;
    void *src, *dst;
    CK(cudaMalloc(&src, bytes));
    CK(cudaMalloc(&dst, bytes));
    fill_bf16<<<1024, 256>>>((uint16_t *)src, bytes / 2, 1);
    int sms;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    double ms = time_median([&] { copy_kernel<<<sms * 8, 512>>>((const uint4 *)src, (uint4 *)dst, bytes / 16); }, 10);
    CK(cudaGetLastError());
    cudaFree(src);
    cudaFree(dst);
    return 2.0 * bytes / (ms * 1e-3); /* read + write */
}

static double measure_mma_peak(void)
{
    int sms;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const int iters = 4096, blocks = sms * 4, threads = 256;
    float *out;
    long long *cycles;
    CK(cudaMalloc(&out, 4096));
    CK(cudaMalloc(&cycles, (size_t)blocks * (threads / 32) * sizeof(long long)));
    double ms = time_median(
        [&] { mma_rate_kernel<MMA_CHAINS><<<blocks, threads>>>(out, cycles, iters, 2654435761u); }, 10);
    CK(cudaGetLastError());
    cudaFree(out);
    cudaFree(cycles);
    double flops = (double)blocks * (threads / 32) * iters * MMA_CHAINS * (2.0 * 16 * 8 * 16);
    return flops / (ms * 1e-3);
}

/* ---- one problem on the device ---- */
struct Problem {
    vattn_args a;
    uint16_t *q, *kv, *o, *o2;
    int32_t *indptr;
    int64_t *idx;
    float *lse;
    void *ws;
    size_t ws_bytes;
    /* the production library's workspace, kept by with_ws: its reference entry point checks the
     * workspace against the production plan, which a dev-forced kernel's plan may undercut
     * (v3 forced at (1,16,16,185000): 16 splits against v7's 33, VATTN_ERR_WORKSPACE) */
    void *ref_ws;
    size_t ref_ws_bytes;
    int64_t total, kv_len;
};

static void make_problem(Problem &P, int bs, int H, int ql, int prefix, int fp16, uint64_t seed)
{
    memset(&P, 0, sizeof P);
    const int64_t kv_len = prefix + ql, total = kv_len * bs, num_slots = total + total / 8 + 1;
    P.total = total;
    P.kv_len = kv_len;
    std::vector<int64_t> perm(num_slots);
    for (int64_t i = 0; i < num_slots; i++)
        perm[i] = i;
    srand((unsigned)seed);
    for (int64_t i = num_slots - 1; i > 0; i--)
        std::swap(perm[i], perm[((int64_t)rand() * RAND_MAX + rand()) % (i + 1)]);
    std::vector<int32_t> indptr(bs + 1);
    for (int b = 0; b <= bs; b++)
        indptr[b] = (int32_t)(b * kv_len);
    const int64_t T = (int64_t)bs * ql;
    CK(cudaMalloc(&P.q, T * H * 576 * 2));
    CK(cudaMalloc(&P.kv, num_slots * 576 * 2));
    CK(cudaMalloc(&P.o, T * H * 512 * 2));
    CK(cudaMalloc(&P.o2, T * H * 512 * 2));
    CK(cudaMalloc(&P.lse, T * H * 4));
    CK(cudaMalloc(&P.indptr, (bs + 1) * 4));
    CK(cudaMalloc(&P.idx, total * 8));
    fill_bf16<<<1024, 256>>>(P.q, T * H * 576, seed * 3 + 1);
    fill_bf16<<<4096, 256>>>(P.kv, num_slots * 576, seed * 3 + 2);
    CK(cudaMemcpy(P.indptr, indptr.data(), (bs + 1) * 4, cudaMemcpyHostToDevice));
    if (const char *hot = getenv("VATTN_DEV_HOT_ROWS")) { /* every index in the first N slots: KV hot in L2 */
        const long long n = atoll(hot);
        if (n < 1) {
            fprintf(stderr, "VATTN_DEV_HOT_ROWS=%s: expected a slot count >= 1\n", hot);
            exit(2);
        }
        for (int64_t i = 0; i < total; i++)
            perm[i] %= n;
    }
    CK(cudaMemcpy(P.idx, perm.data(), total * 8, cudaMemcpyHostToDevice));
    vattn_args &a = P.a;
    a.struct_size = sizeof(vattn_args);
    a.dtype = fp16 ? VATTN_DTYPE_FP16 : VATTN_DTYPE_BF16;
    a.index_type = VATTN_INDEX_INT64;
    a.bs = bs;
    a.q_len = ql;
    a.num_heads = H;
    a.num_slots = num_slots;
    a.max_kv_len = kv_len;
    a.sm_scale = 0.0625f;
    a.q = P.q;
    a.q_stride_h = 576;
    a.q_stride_t = (int64_t)H * 576;
    a.kv_cache = P.kv;
    a.kv_stride = 576;
    a.kv_indptr = P.indptr;
    a.kv_indices = P.idx;
    a.visibility = NULL;
    a.o = P.o;
    a.o_stride_h = 512;
    a.o_stride_t = (int64_t)H * 512;
    a.lse = P.lse;
    P.ws_bytes = g_ws(&a);
    P.ws = NULL;
    if (P.ws_bytes)
        CK(cudaMalloc(&P.ws, P.ws_bytes));
    P.ref_ws = P.ws;
    P.ref_ws_bytes = P.ws_bytes;
    CK(cudaDeviceSynchronize());
}

static void free_problem(Problem &P)
{
    cudaFree(P.q);
    cudaFree(P.kv);
    cudaFree(P.o);
    cudaFree(P.o2);
    cudaFree(P.lse);
    cudaFree(P.indptr);
    cudaFree(P.idx);
    if (P.ws)
        cudaFree(P.ws);
}

static void run_or_die(vattn_fn fn, Problem &P, uint16_t *o)
{
    vattn_args a = P.a;
    a.o = o;
    const bool ref = fn == g_ref;
    int rc = fn(&a, ref ? P.ref_ws : P.ws, ref ? P.ref_ws_bytes : P.ws_bytes, NULL);
    if (rc) {
        fprintf(stderr, "vattn call failed: %d (%s)\n", rc, g_status(rc));
        exit(1);
    }
}

static int g_fp16;
static double bf16d(uint16_t h)
{
    if (g_fp16) {
        __half_raw r;
        r.x = h;
        return __half2float(__half(r));
    }
    uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}

/* fast (the production library's unless `fast` is given) vs reference on the device results:
 * rel L2 and NaN count */
static double check_fast_vs_ref(Problem &P, int *nan_count, vattn_fn fast = nullptr)
{
    const size_t n = (size_t)P.a.bs * P.a.q_len * P.a.num_heads * 512;
    CK(cudaMemset(P.o, 0xff, n * 2));
    CK(cudaMemset(P.o2, 0xff, n * 2));
    run_or_die(g_ref, P, P.o2);
    run_or_die(fast ? fast : g_fast, P, P.o);
    CK(cudaDeviceSynchronize());
    std::vector<uint16_t> a(n), b(n);
    CK(cudaMemcpy(a.data(), P.o, n * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(b.data(), P.o2, n * 2, cudaMemcpyDeviceToHost));
    double num = 0, den = 0;
    int nans = 0;
    for (size_t i = 0; i < n; i++) {
        double x = bf16d(a[i]), y = bf16d(b[i]);
        if (!std::isfinite(x) || !std::isfinite(y)) {
            nans++;
            continue;
        }
        num += (x - y) * (x - y);
        den += y * y;
    }
    *nan_count = nans;
    return sqrt(num / den);
}

static double flops_of(const Problem &P)
{
    return 2.0 * P.a.bs * P.a.q_len * P.a.num_heads * (double)P.kv_len * (576 + 512);
}
static double bytes_of(const Problem &P)
{
    const double T = (double)P.a.bs * P.a.q_len, H = P.a.num_heads;
    return (double)P.total * 576 * 2 /* each KV row once */ + P.total * 8.0 /* indices */ +
           T * H * 576 * 2 + T * H * 512 * 2 + T * H * 4;
}

/* The same data with a workspace sized by the dev build for the current VATTN_* knobs. */
static Problem with_ws(const Problem &P)
{
    Problem Q = P;
    Q.ws_bytes = g_dev_ws(&Q.a);
    Q.ws = NULL;
    if (Q.ws_bytes)
        CK(cudaMalloc(&Q.ws, Q.ws_bytes));
    return Q;
}

/* Kernel variants of the library (VATTN_VARIANT, dev build; kernels/vattn_fast3.cuh): v3 = 32 rows per
 * block with the 4-way k-split S reduction, v7 = 64 rows in two independent groups of 32,
 * pair-wise S reduction, lazy rescale, swizzled KV stages, v8 = v7's kernel with its groups on
 * alternate tiles of 32 rows (kernels/vattn_fast7.cuh). v4, v5 and v6 live in git history (docs/PERF.md has their figures). */
static const int g_variants[] = {3, 7, 8};

static int dev_mode(int fp16, int bs, int H, int ql, int prefix)
{
    Problem P;
    g_fp16 = fp16;
    make_problem(P, bs, H, ql, prefix, fp16, 7);
    const double fl = flops_of(P), by = bytes_of(P);
    auto report = [&](const char *name, double ms) {
        printf("%-22s %10.4f %9.1f %9.1f\n", name, ms, by / ms * 1e-6, fl / ms * 1e-9);
    };
    int bad = 0;
    printf("%-22s %10s %9s %9s\n", "variant", "ms", "GB/s", "TFLOP/s");
    report("reference", time_median([&] { run_or_die(g_ref, P, P.o2); }, 3));
    for (int v : g_variants) {
        char env[16], name[40];
        snprintf(env, sizeof env, "%d", v);
        setenv("VATTN_VARIANT", env, 1);
        Problem Q = with_ws(P);
        int nans;
        double rel = check_fast_vs_ref(Q, &nans, g_dev_fast);
        const int ok = rel <= 1e-2 && nans == 0;
        bad |= !ok;
        printf("v%d check vs reference: rel L2 %.3e, non-finite %d -> %s\n", v, rel, nans, ok ? "OK" : "MISMATCH");
        snprintf(name, sizeof name, "v%d (auto split)", v);
        report(name, time_median([&] { run_or_die(g_dev_fast, Q, Q.o); }, 20));
        if (Q.ws)
            cudaFree(Q.ws);
        const int forced[] = {1, 8, 33, 66, 132, 264};
        for (int ns : forced) {
            snprintf(env, sizeof env, "%d", ns);
            setenv("VATTN_FORCE_NSPLIT", env, 1);
            Problem R = with_ws(P);
            snprintf(name, sizeof name, "v%d nsplit<=%d", v, ns);
            report(name, time_median([&] { run_or_die(g_dev_fast, R, R.o); }, 10));
            if (R.ws)
                cudaFree(R.ws);
        }
        unsetenv("VATTN_FORCE_NSPLIT");
    }
    unsetenv("VATTN_VARIANT");
    free_problem(P);
    return bad;
}

/* (bs, H, q_len, prefix) of issue 6's bench: the long-context configs */
static const int k_bench_cfg[][4] = {{1, 16, 16, 185000}, {1, 16, 4, 185000}, {8, 16, 4, 32768}, {4, 16, 16, 32768},
                                     {4, 64, 16, 32768},  {16, 128, 4, 8192}, {32, 16, 8, 4096}, {64, 16, 16, 2048}};

static int bench_mode(void)
{
    const double bw = measure_copy_bw(), peak = measure_mma_peak();
    printf("ceilings: D2D copy %.0f GB/s (read+write), mma.sync m16n8k16 bf16 %.1f TFLOP/s\n", bw * 1e-9,
           peak * 1e-12);
    printf("csv,ceiling,%.6e,%.6e\n", bw, peak);
    int bad = 0;
    for (auto &c : k_bench_cfg) {
        Problem P;
        make_problem(P, c[0], c[1], c[2], c[3], 0, 11);
        int nans;
        double rel = check_fast_vs_ref(P, &nans);
        bad |= !(rel <= 1e-2 && nans == 0);
        double t_fast = time_median([&] { run_or_die(g_fast, P, P.o); }, 20);
        double t_ref = time_median([&] { run_or_die(g_ref, P, P.o2); }, 3);
        /* every kernel variant forced, checked and timed (the default is one of them) */
        for (int v : g_variants) {
            char env[16];
            snprintf(env, sizeof env, "%d", v);
            setenv("VATTN_VARIANT", env, 1);
            Problem Q = with_ws(P);
            int vn;
            const double vrel = check_fast_vs_ref(Q, &vn, g_dev_fast);
            bad |= !(vrel <= 1e-2 && vn == 0);
            const double tv = time_median([&] { run_or_die(g_dev_fast, Q, Q.o); }, 20);
            printf("  variant v%d: %.4f ms (%.1f TFLOP/s), check rel %.1e, non-finite %d\n", v, tv,
                   flops_of(P) / tv * 1e-9, vrel, vn);
            if (Q.ws)
                cudaFree(Q.ws);
        }
        unsetenv("VATTN_VARIANT");
        if (getenv("VATTN_BENCH_EXTRA")) {
            /* extra knobs, checked and timed: per-call env knobs of the library (a dev build,
             * -DVATTN_DEV_MODES, may add kernel steps under measurement) */
            const char *knobs[][3] = {{"7", "VATTN_FORCE_NSPLIT", "132"}};
            for (auto &k : knobs) {
                setenv("VATTN_VARIANT", k[0], 1);
                setenv(k[1], k[2], 1);
                Problem Q = with_ws(P);
                int kn = 0;
                const double krel = check_fast_vs_ref(Q, &kn, g_dev_fast);
                const double tv = time_median([&] { run_or_die(g_dev_fast, Q, Q.o); }, 20);
                printf("  v%s %s=%s: %.4f ms (%.1f TFLOP/s), check rel %.1e, non-finite %d\n", k[0], k[1], k[2],
                       tv, flops_of(P) / tv * 1e-9, krel, kn);
                if (Q.ws)
                    cudaFree(Q.ws);
                unsetenv(k[1]);
            }
            unsetenv("VATTN_VARIANT");
        }
        const double fl = flops_of(P), by = bytes_of(P);
        const double floor_ms = std::max(by / bw, fl / peak) * 1e3;
        printf("cfg bs=%d H=%d q=%d prefix=%d: fast %.4f ms (%.0f GB/s, %.1f TFLOP/s, %.2fx floor %.4f ms), "
               "ref %.3f ms, check rel %.1e\n",
               c[0], c[1], c[2], c[3], t_fast, by / t_fast * 1e-6, fl / t_fast * 1e-9, t_fast / floor_ms,
               floor_ms, t_ref, rel);
        printf("csv,cfg,%d,%d,%d,%d,%.6f,%.6f,%.6e,%.6e,%.6f,%.3e\n", c[0], c[1], c[2], c[3], t_fast, t_ref,
               by, fl, floor_ms, rel);
        free_problem(P);
    }
    return bad;
}

#include "vattn_dev_gather.cuh"
#include "vattn_dev_serving.cuh"
#include "vattn_dev_mma.cuh"

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
        printf("no CUDA device: skipped\n");
        return 77;
    }
    load_lib();
    CK(cudaMalloc(&g_flush, FLUSH_BYTES));
    CK(cudaMalloc(&g_flush_out, 64));
    if (argc > 1 && !strcmp(argv[1], "--bench"))
        return bench_mode();
    if (argc > 1 && !strcmp(argv[1], "--gather"))
        return gather_mode();
    if (argc > 1 && !strcmp(argv[1], "--mma-rate"))
        return mma_rate_mode();
    if (argc > 1 && (!strcmp(argv[1], "--serving") || !strcmp(argv[1], "--serving-breakdown"))) {
        g_serving_breakdown = !strcmp(argv[1], "--serving-breakdown");
        return serving_mode();
    }
    int fp16 = 0, k = 1;
    if (argc > 1 && !strcmp(argv[1], "--fp16")) {
        fp16 = 1;
        k = 2;
    }
    if (argc - k != 4) {
        fprintf(stderr, "usage: vattn_dev [--fp16] BS H Q_LEN PREFIX | vattn_dev --bench | vattn_dev --serving | vattn_dev --gather | vattn_dev --mma-rate\n");
        return 2;
    }
    return dev_mode(fp16, atoi(argv[k]), atoi(argv[k + 1]), atoi(argv[k + 2]), atoi(argv[k + 3]));
}
