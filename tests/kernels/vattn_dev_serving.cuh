/*
 * vattn_dev_serving.cuh — `vattn_dev --serving`: issue 16's serving-size benchmark of the
 * production library (build/lib/libverify_attn.so). At serving sizes the kernel's time is
 * mostly fixed latency, so a per-call median with a host launch in between measures the host
 * more than the kernel; here every figure is per call inside a CUDA graph of SERVING_CALLS
 * back-to-back calls, the way a server replays a decode step:
 *   warm   the graph of N calls (the same inputs, so L2 holds what fits: the hot-cache case)
 *   cold   the graph of N (flush, call) pairs, minus the graph of the N flushes alone: each call
 *          starts with L2 (60 MB on an H200) overwritten by a write kernel over 2x L2
 *   eager  N calls launched from the host back to back (includes the library's host work)
 * and per row the roofline floor of vattn_dev --bench (max(unique bytes / D2D copy bandwidth,
 * FLOPs / mma.sync peak), both ceilings measured in this run), time / floor and time - floor
 * (the fixed overhead the latency work is after). Part of vattn_dev.cu, included after its
 * helpers (Problem, make_problem, check_fast_vs_ref, bytes_of, flops_of, the ceilings, CK).
 * Every CUDA call is checked; any failure exits non-zero with the call that failed.
 */
#ifndef VATTN_DEV_SERVING_CUH
#define VATTN_DEV_SERVING_CUH

static const int SERVING_CALLS = 20; /* calls per graph */
static const int SERVING_REPS = 15;  /* timed graph launches per figure (median) */
static int g_serving_breakdown;      /* --serving-breakdown: also serving_breakdown() per serving row */

/* (bs, H, q_len, prefix) of issue 16's serving set */
static const int k_serving_cfg[][4] = {{1, 8, 2, 512},    {1, 16, 4, 1024},  {2, 16, 4, 1000},
                                       {1, 16, 16, 4096}, {4, 16, 8, 2048},  {16, 16, 4, 1024},
                                       {1, 128, 4, 4096}, {8, 8, 4, 8192},   {1, 16, 16, 32768}};
/* Shapes vattn_plan.h's multi-wave plan (VATTN_PLAN_MULTIWAVE 1, on since the seventeenth
 * session; built with 0 they time the one-wave plan, the baseline) plans differently on
 * 132 SMs: row blocks that leave SMs idle in one wave (80-160
 * blocks of one per SM) get 2-4 waves, and (4,16,2,1024)'s 33 splits of one tile (like the
 * serving row (2,16,4,1000)) become 17 of two. The same quantisation hits two long configs
 * on sm_120's 188 SMs (docs/PERF.md). */
static const int k_waves_cfg[][4] = {{10, 128, 4, 8192}, {24, 16, 8, 8192}, {3, 64, 16, 16384}, {5, 128, 16, 4096},
                                     {4, 16, 2, 1024}};

__global__ void serving_flush_kernel(uint4 *buf, size_t n, uint32_t v)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        buf[i] = make_uint4(v, v, v, v);
}

struct ServingFlush {
    uint4 *buf;
    size_t n; /* uint4 elements */
    int blocks;
};

static void serving_flush(const ServingFlush &F, cudaStream_t st)
{
    serving_flush_kernel<<<F.blocks, 512, 0, st>>>(F.buf, F.n, 0x5a5a5a5au);
    CK(cudaGetLastError());
}

static void serving_call(vattn_fn fn, Problem &P, cudaStream_t st)
{
    const int rc = fn(&P.a, P.ws, P.ws_bytes, st);
    if (rc) {
        fprintf(stderr, "vattn_verify failed: %d (%s)\n", rc, g_status(rc));
        exit(1);
    }
}

/* body() enqueues on st; captured into an executable graph */
template <class F> static cudaGraphExec_t serving_graph(cudaStream_t st, F body)
{
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    body();
    CK(cudaStreamEndCapture(st, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    CK(cudaGraphDestroy(g));
    return ge;
}

/* median ms of fn() (enqueues on st) over SERVING_REPS, after one untimed run */
template <class F> static double serving_median(cudaStream_t st, F fn)
{
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    fn();
    CK(cudaStreamSynchronize(st));
    std::vector<float> ts;
    for (int r = 0; r < SERVING_REPS; r++) {
        CK(cudaEventRecord(a, st));
        fn();
        CK(cudaEventRecord(b, st));
        CK(cudaEventSynchronize(b));
        float ms;
        CK(cudaEventElapsedTime(&ms, a, b));
        ts.push_back(ms);
    }
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    std::sort(ts.begin(), ts.end());
    return ts[ts.size() / 2];
}

struct ServingRow {
    int cfg[4];
    const char *set;
    double eager, warm, cold, flush, floor_us, rel; /* per call, µs (rel: check vs reference) */
    int nans, compute_bound;
};

/* Per call µs of fn on P in graphs of SERVING_CALLS calls: warm (back to back) and cold (each
 * after an L2 flush, the flush graph's own time subtracted); eager (host launches) if asked. */
static void serving_times(vattn_fn fn, Problem &P, const ServingFlush &F, cudaStream_t st, double *warm_us,
                          double *cold_us, double *flush_us, double *eager_us)
{
    const double us = 1e3 / SERVING_CALLS; /* ms per N calls -> µs per call */
    cudaGraphExec_t warm = serving_graph(st, [&] {
        for (int k = 0; k < SERVING_CALLS; k++)
            serving_call(fn, P, st);
    });
    cudaGraphExec_t cold = serving_graph(st, [&] {
        for (int k = 0; k < SERVING_CALLS; k++) {
            serving_flush(F, st);
            serving_call(fn, P, st);
        }
    });
    cudaGraphExec_t flush = serving_graph(st, [&] {
        for (int k = 0; k < SERVING_CALLS; k++)
            serving_flush(F, st);
    });
    *warm_us = serving_median(st, [&] { CK(cudaGraphLaunch(warm, st)); }) * us;
    const double fl = serving_median(st, [&] { CK(cudaGraphLaunch(flush, st)); }) * us;
    *cold_us = serving_median(st, [&] { CK(cudaGraphLaunch(cold, st)); }) * us - fl;
    if (flush_us)
        *flush_us = fl;
    if (eager_us)
        *eager_us = serving_median(st, [&] {
                        for (int k = 0; k < SERVING_CALLS; k++)
                            serving_call(fn, P, st);
                    }) * us;
    CK(cudaGraphExecDestroy(warm));
    CK(cudaGraphExecDestroy(cold));
    CK(cudaGraphExecDestroy(flush));
}

/* The dev build with knobs set (name=value pairs, NULL-terminated; unset afterwards), on P's
 * data with a workspace for those knobs: warm / cold µs per call. */
static void serving_dev_times(Problem &P, const char *const *knobs, const ServingFlush &F, cudaStream_t st,
                              double *warm_us, double *cold_us)
{
    for (int k = 0; knobs[k]; k += 2)
        setenv(knobs[k], knobs[k + 1], 1);
    Problem Q = with_ws(P);
    serving_times(g_dev_fast, Q, F, st, warm_us, cold_us, nullptr, nullptr);
    if (Q.ws)
        cudaFree(Q.ws);
    for (int k = 0; knobs[k]; k += 2)
        unsetenv(knobs[k]);
}

/* Where the time of a serving call goes (cold graph, dev build timing variants, each a
 * difference of two variants): launch = every fast block returns at once (no combine);
 * prologue = no KV tiles, no epilogue, no combine, minus launch; epilogue (the split partials'
 * writes) = no KV tiles, no combine, minus that; tiles = no combine minus that;
 * combine = the whole call minus no combine; PDL = the whole call without programmatic
 * dependent launch minus with it. Then the split count swept (VATTN_FORCE_NSPLIT, cold and
 * warm): the data for the per-shape split policy. */
static void serving_breakdown(Problem &P, const ServingFlush &F, cudaStream_t st)
{
    static const char *const k_full[] = {nullptr};
    static const char *const k_launch[] = {"VATTN_DEV_STAGE", "1", "VATTN_DEV_NOCOMBINE", "1", nullptr};
    static const char *const k_prologue[] = {"VATTN_DEV_STAGE", "3", "VATTN_DEV_NOCOMBINE", "1", nullptr};
    static const char *const k_epilogue[] = {"VATTN_DEV_STAGE", "2", "VATTN_DEV_NOCOMBINE", "1", nullptr};
    static const char *const k_nocombine[] = {"VATTN_DEV_NOCOMBINE", "1", nullptr};
    static const char *const k_nopdl[] = {"VATTN_DEV_PDL", "0", nullptr};
    double w[6], c[6];
    const char *const *v[6] = {k_full, k_launch, k_prologue, k_epilogue, k_nocombine, k_nopdl};
    for (int i = 0; i < 6; i++)
        serving_dev_times(P, v[i], F, st, &w[i], &c[i]);
    printf("breakdown bs=%d H=%d q=%d prefix=%lld (cold us): call %.1f = launch %.1f + prologue %.1f + epilogue "
           "%.1f + tiles %.1f + combine %.1f; without PDL %.1f (PDL saves %.1f); warm: call %.1f, launch %.1f, "
           "prologue %.1f, epilogue %.1f, no-combine %.1f, no PDL %.1f\n",
           P.a.bs, P.a.num_heads, P.a.q_len, (long long)(P.kv_len - P.a.q_len), c[0], c[1], c[2] - c[1], c[3] - c[2],
           c[4] - c[3], c[0] - c[4], c[5], c[5] - c[0], w[0], w[1], w[2] - w[1], w[3] - w[2], w[4], w[5]);
    printf("csv,breakdown,%d,%d,%d,%lld,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f\n", P.a.bs,
           P.a.num_heads, P.a.q_len, (long long)(P.kv_len - P.a.q_len), c[0], c[1], c[2], c[3], c[4], c[5], w[0], w[1],
           w[2], w[3], w[4], w[5]);
    static const int k_ns[] = {1, 2, 3, 4, 6, 8, 12, 16, 24, 33, 48, 66, 132};
    printf("splits bs=%d H=%d q=%d prefix=%lld (cold/warm us):", P.a.bs, P.a.num_heads, P.a.q_len,
           (long long)(P.kv_len - P.a.q_len));
    const int64_t tiles = (P.kv_len + 31) / 32;
    for (int ns : k_ns) {
        if (ns > tiles)
            break;
        char val[16];
        snprintf(val, sizeof val, "%d", ns);
        const char *const knob[] = {"VATTN_FORCE_NSPLIT", val, nullptr};
        double wn, cn;
        serving_dev_times(P, knob, F, st, &wn, &cn);
        printf(" ns%d %.1f/%.1f", ns, cn, wn);
    }
    printf("\n");
}

static ServingRow serving_row(const int *c, const char *set, const ServingFlush &F, cudaStream_t st, double bw,
                              double peak)
{
    ServingRow R;
    memcpy(R.cfg, c, sizeof R.cfg);
    R.set = set;
    Problem P;
    make_problem(P, c[0], c[1], c[2], c[3], 0, 13);
    R.rel = check_fast_vs_ref(P, &R.nans);
    serving_times(g_fast, P, F, st, &R.warm, &R.cold, &R.flush, &R.eager);
    const double by = bytes_of(P), fl = flops_of(P);
    R.compute_bound = fl / peak > by / bw;
    R.floor_us = std::max(by / bw, fl / peak) * 1e6;
    printf("serving %-7s bs=%d H=%d q=%d prefix=%d: eager %.1f us, graph warm %.1f us, graph cold %.1f us "
           "(flush %.1f us subtracted), floor %.1f us (%s), cold/floor %.2fx, check rel %.1e, non-finite %d\n",
           set, c[0], c[1], c[2], c[3], R.eager, R.warm, R.cold, R.flush, R.floor_us,
           R.compute_bound ? "mma-bound" : "bytes-bound", R.cold / R.floor_us, R.rel, R.nans);
    printf("csv,serving,%s,%d,%d,%d,%d,%.3f,%.3f,%.3f,%.3f,%.3f,%.6e,%.6e,%.3e\n", set, c[0], c[1], c[2], c[3],
           R.eager, R.warm, R.cold, R.flush, R.floor_us, by, fl, R.rel);
    if (g_serving_breakdown && !strcmp(set, "serving"))
        serving_breakdown(P, F, st);
    if (getenv("VATTN_SERVING_VARIANTS") && !strcmp(set, "serving")) {
        /* each kernel variant forced (dev build): the data for the variant rule */
        printf("variants bs=%d H=%d q=%d prefix=%d (cold/warm us):", c[0], c[1], c[2], c[3]);
        for (const char *v : {"3", "7", "8"}) {
            const char *const knob[] = {"VATTN_VARIANT", v, nullptr};
            double wv, cv;
            serving_dev_times(P, knob, F, st, &wv, &cv);
            printf(" v%s %.1f/%.1f", v, cv, wv);
        }
        printf("\n");
    }
    if (const char *probes = getenv("VATTN_SERVING_PROBES")) {
        /* "16,17,...": the dev build's VATTN_DEV_STAGE values timed in turn (16 + bits of v7's loop
         * probes, vattn_fast7_parts.cuh; a library built with -DVATTN_DEV_MODES) */
        printf("probes bs=%d H=%d q=%d prefix=%d (cold/warm us):", c[0], c[1], c[2], c[3]);
        char val[16];
        for (const char *s = probes; *s;) {
            const size_t n = strcspn(s, ",");
            snprintf(val, sizeof val, "%.*s", (int)(n < sizeof val - 1 ? n : sizeof val - 1), s);
            const char *const knob[] = {"VATTN_DEV_STAGE", val, nullptr};
            double wv, cv;
            serving_dev_times(P, knob, F, st, &wv, &cv);
            printf(" s%s %.1f/%.1f", val, cv, wv);
            s += n + (s[n] == ',');
        }
        printf("\n");
    }
    free_problem(P);
    return R;
}

static int serving_mode(void)
{
    int dev = 0, l2 = 0, sms = 0;
    cudaDeviceProp prop;
    CK(cudaGetDevice(&dev));
    CK(cudaGetDeviceProperties(&prop, dev));
    CK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    ServingFlush F;
    const size_t flush_bytes = std::max((size_t)2 * (size_t)l2, (size_t)128 << 20);
    F.n = flush_bytes / sizeof(uint4);
    F.blocks = sms * 4;
    CK(cudaMalloc(&F.buf, flush_bytes));
    const double bw = measure_copy_bw(), peak = measure_mma_peak();
    printf("serving bench on %s (%d SMs, L2 %d MB, flush %zu MB per call): D2D copy %.0f GB/s, mma.sync bf16 %.1f "
           "TFLOP/s; per call in graphs of %d calls, median of %d launches\n",
           prop.name, sms, l2 >> 20, flush_bytes >> 20, bw * 1e-9, peak * 1e-12, SERVING_CALLS, SERVING_REPS);
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    std::vector<ServingRow> rows;
    if (const char *shapes = getenv("VATTN_SERVING_SHAPES")) { /* "bs,H,q,prefix;..." instead of the set */
        int c[4], n = 0;
        const char *s = shapes;
        for (; sscanf(s, "%d,%d,%d,%d%n", &c[0], &c[1], &c[2], &c[3], &n) == 4; s++) {
            rows.push_back(serving_row(c, "serving", F, st, bw, peak));
            s += n;
            if (*s != ';')
                break;
        }
        if (rows.empty() || *s) {
            fprintf(stderr, "VATTN_SERVING_SHAPES=%s: expected bs,H,q,prefix[;bs,H,q,prefix...], stopped at '%s'\n",
                    shapes, s);
            return 2;
        }
    } else
        for (auto &c : k_serving_cfg)
            rows.push_back(serving_row(c, "serving", F, st, bw, peak));
    if (!getenv("VATTN_SERVING_ONLY")) { /* set: the serving rows alone (a shorter dev run) */
        for (auto &c : k_bench_cfg)
            rows.push_back(serving_row(c, "long", F, st, bw, peak));
        for (auto &c : k_waves_cfg)
            rows.push_back(serving_row(c, "waves", F, st, bw, peak));
    }
    CK(cudaStreamDestroy(st));
    CK(cudaFree(F.buf));
    int bad = 0;
    printf("\n| set | bs | H | q | prefix | eager us | graph warm us | graph cold us | floor us | cold/floor | "
           "cold - floor us | warm - floor us | check |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (const ServingRow &R : rows) {
        const int ok = R.rel <= 1e-2 && R.nans == 0;
        bad |= !ok;
        printf("| %s | %d | %d | %d | %d | %.1f | %.1f | %.1f | %.1f%s | %.2f | %.1f | %.1f | %s |\n", R.set, R.cfg[0],
               R.cfg[1], R.cfg[2], R.cfg[3], R.eager, R.warm, R.cold, R.floor_us, R.compute_bound ? " (mma)" : "",
               R.cold / R.floor_us, R.cold - R.floor_us, R.warm - R.floor_us, ok ? "ok" : "MISMATCH");
    }
    printf("(floor = max(unique bytes / copy bandwidth, FLOPs / mma.sync peak); cold = per call after a %zu MB "
           "L2 flush, the flush's own time subtracted)\n",
           flush_bytes >> 20);
    return bad;
}

#endif /* VATTN_DEV_SERVING_CUH */
