/*
 * test_verify_gpu.c — both kernels of libverify_attn.so (fast and reference) against
 * libverify_attn_cpu.so over a table of verify calls (GPU_TESTS, `make test-gpu`).
 *
 * Per case: random non-zero bf16/fp16 data, a random slot permutation through a pool with NaN
 * in every row and gap the call must not read, outputs poisoned before every run; NaN/Inf
 * positions matched first, then rel L2 <= 1e-2, a per-element bound and lse; the worst
 * element is reported by (request, token, head, channel). The fast kernel must be bitwise
 * identical over 3 runs. Invalid device data (slot outside the pool, kv_len < q_len) must give
 * NaN for exactly that request and no CUDA error. Every run must leave the guard regions
 * around o and lse untouched (vattn_gpu_common.h). Data random values miss (gcase.special):
 * Q = 0 (each output row exactly the mean of its visible V rows, vs float64 directly), a hidden
 * draft key whose cache row is NaN/Inf, a pool 8x larger than used and all NaN outside the
 * used rows, empty prefixes and single-key requests. The fast kernel captured in a CUDA graph
 * (cudaStreamBeginCapture on a non-blocking stream) and replayed must be bitwise equal to the
 * eager call. Every valid case runs again in the extend convention (vattn_gpu_extend.h): the
 * extend reference / fast call / its graph replay bitwise equal to the verify ones, and invalid
 * extend device data NaNs exactly the requests it names. A summary table ends the output.
 * Exit 77 when there is no GPU.
 * With VATTN_VARIANT, VATTN_FORCE_NSPLIT, VATTN_DEV_DEEP or VATTN_DEV_WAVES set it tests the dev build
 * build/tests/libverify_attn_dev.so (the production library reads no environment).
 */
#include "vattn_gpu_common.h"

#include <time.h>

/* Fields not named are 0 (vattn_gpu_common.h: gcase); kv_stride and sm_scale are always named. */
static const gcase cases[] = {
    {.name = "h8-q1-128k", .bs = 2, .H = 8, .q_len = 1, .max_prefix = 131072, .vis = VIS_CAUSAL_NULL,
     .idx64 = 1, .kv_stride = 576, .sm_scale = 0.0625f},
    {.name = "h16-q4-32k-ragged", .bs = 4, .H = 16, .q_len = 4, .max_prefix = 32768, .ragged = 1,
     .zero_first = 1, .vis = VIS_TREE, .kv_stride = 576, .sm_scale = 0.0625f},
    {.name = "h16-q16-bs64", .bs = 64, .H = 16, .q_len = 16, .max_prefix = 300, .ragged = 1, .zero_first = 1,
     .vis = VIS_CAUSAL_NULL, .idx64 = 1, .kv_stride = 576, .sm_scale = 0.0625f},
    {.name = "h32-q7-tree-strd", .bs = 8, .H = 32, .q_len = 7, .max_prefix = 3000, .ragged = 1,
     .vis = VIS_TREE, .q_gap_h = 8, .q_gap_t = 16, .kv_stride = 656, .o_gap_h = 8, .o_gap_t = 24,
     .sm_scale = 0.1f},
    {.name = "h64-q8-fp16", .bs = 3, .H = 64, .q_len = 8, .max_prefix = 8000, .ragged = 1, .vis = VIS_CAUSAL,
     .idx64 = 1, .fp16 = 1, .kv_stride = 576, .sm_scale = 0.0625f},
    {.name = "h128-q2-randvis", .bs = 5, .H = 128, .q_len = 2, .max_prefix = 5000, .ragged = 1,
     .zero_first = 1, .vis = VIS_RANDOM, .kv_stride = 584, .sm_scale = 0.0625f},
    {.name = "h128-q16-strided", .bs = 2, .H = 128, .q_len = 16, .max_prefix = 2000, .ragged = 1,
     .vis = VIS_CAUSAL_NULL, .idx64 = 1, .q_gap_h = 16, .q_gap_t = 8, .kv_stride = 576, .o_gap_h = 16,
     .sm_scale = 0.0625f},
    {.name = "h16-q64-tree-fp16", .bs = 2, .H = 16, .q_len = 64, .max_prefix = 1000, .ragged = 1,
     .vis = VIS_TREE, .fp16 = 1, .kv_stride = 576, .sm_scale = 0.0625f},
    {.name = "h8-q2-bs64-ragged", .bs = 64, .H = 8, .q_len = 2, .max_prefix = 20000, .ragged = 1,
     .zero_first = 1, .vis = VIS_TREE, .idx64 = 1, .kv_stride = 576, .no_lse = 1, .sm_scale = 0.0625f},
    {.name = "h32-q4-prefix0", .bs = 4, .H = 32, .q_len = 4, .max_prefix = 0, .vis = VIS_RANDOM,
     .kv_stride = 576, .sm_scale = 0.0625f},
    {.name = "h16-q16-128k", .bs = 1, .H = 16, .q_len = 16, .max_prefix = 131072, .vis = VIS_CAUSAL_NULL,
     .idx64 = 1, .kv_stride = 576, .sm_scale = 0.0625f},
    {.name = "h64-q1-peaked", .bs = 6, .H = 64, .q_len = 1, .max_prefix = 12000, .ragged = 1,
     .vis = VIS_CAUSAL_NULL, .kv_stride = 576, .sm_scale = 0.5f},
    {.name = "h128-q4-fp16-32k", .bs = 1, .H = 128, .q_len = 4, .max_prefix = 32768, .vis = VIS_TREE,
     .idx64 = 1, .fp16 = 1, .kv_stride = 576, .sm_scale = 0.0625f},
    /* max_kv_len hint far below the real lengths, and absent: same results, no lost keys */
    {.name = "h16-q8-32k-hintlow", .bs = 3, .H = 16, .q_len = 8, .max_prefix = 32768, .ragged = 1,
     .vis = VIS_TREE, .idx64 = 1, .kv_stride = 576, .sm_scale = 0.0625f, .hint = 1},
    {.name = "h32-q4-8k-hint0", .bs = 4, .H = 32, .q_len = 4, .max_prefix = 8192, .ragged = 1,
     .zero_first = 1, .vis = VIS_CAUSAL_NULL, .kv_stride = 576, .sm_scale = 0.0625f, .hint = 2},
    /* data random values miss (SP_*, vattn_gpu_common.h); pool_mult: pool = that multiple of the keys */
    /* the default plan's kernel in the name (vattn_plan in verify_attn.cu): v3 for splits of
     * <= 3 tiles, v8 (v7's key-split form) for longer ones at <= 32 rows, v7 */
    {.name = "zeroq-h8-q4-v8", .bs = 3, .H = 8, .q_len = 4, .max_prefix = 5000, .ragged = 1, .zero_first = 1,
     .vis = VIS_TREE, .idx64 = 1, .kv_stride = 576, .sm_scale = 0.0625f, .special = SP_ZERO_Q},
    {.name = "zeroq-h8-q4-v3", .bs = 3, .H = 8, .q_len = 4, .max_prefix = 1000, .ragged = 1, .zero_first = 1,
     .vis = VIS_TREE, .idx64 = 1, .kv_stride = 576, .sm_scale = 0.0625f, .special = SP_ZERO_Q},
    {.name = "zeroq-h64-q8-v7", .bs = 2, .H = 64, .q_len = 8, .max_prefix = 20000, .ragged = 1,
     .vis = VIS_CAUSAL_NULL, .kv_stride = 576, .sm_scale = 0.0625f, .special = SP_ZERO_Q},
    {.name = "zeroq-fp16-h16-q2", .bs = 4, .H = 16, .q_len = 2, .max_prefix = 1000, .ragged = 1,
     .zero_first = 1, .vis = VIS_CAUSAL, .fp16 = 1, .kv_stride = 576, .sm_scale = 0.0625f,
     .special = SP_ZERO_Q},
    {.name = "nanv-h8-q4-v8", .bs = 4, .H = 8, .q_len = 4, .max_prefix = 4000, .ragged = 1, .zero_first = 1,
     .vis = VIS_TREE, .idx64 = 1, .kv_stride = 576, .sm_scale = 0.0625f, .special = SP_MASKED_NANV},
    /* every split 4 tiles (128 keys a request, 32 splits): both v8 groups run 2 tiles a block */
    {.name = "even-h8-q4-v8", .bs = 4, .H = 8, .q_len = 4, .max_prefix = 4092, .vis = VIS_CAUSAL, .idx64 = 1,
     .kv_stride = 576, .sm_scale = 0.0625f},
    {.name = "nanv-h8-q4-v3", .bs = 4, .H = 8, .q_len = 4, .max_prefix = 1000, .ragged = 1, .zero_first = 1,
     .vis = VIS_TREE, .idx64 = 1, .kv_stride = 576, .sm_scale = 0.0625f, .special = SP_MASKED_NANV},
    {.name = "nanv-h16-q16-v7", .bs = 3, .H = 16, .q_len = 16, .max_prefix = 5000, .ragged = 1,
     .vis = VIS_CAUSAL, .kv_stride = 576, .sm_scale = 0.0625f, .special = SP_MASKED_NANV},
    {.name = "nanv-h128-q4-fp16", .bs = 2, .H = 128, .q_len = 4, .max_prefix = 700, .ragged = 1,
     .zero_first = 1, .vis = VIS_RANDOM, .idx64 = 1, .fp16 = 1, .kv_stride = 576, .sm_scale = 0.0625f,
     .special = SP_MASKED_NANV},
    {.name = "nanv-h16-q1", .bs = 3, .H = 16, .q_len = 1, .max_prefix = 300, .ragged = 1, .zero_first = 1,
     .vis = VIS_CAUSAL, .kv_stride = 576, .sm_scale = 0.0625f, .special = SP_MASKED_NANV},
    {.name = "nanpool-h16-q4-x8", .bs = 4, .H = 16, .q_len = 4, .max_prefix = 4000, .ragged = 1,
     .vis = VIS_TREE, .idx64 = 1, .kv_stride = 576, .sm_scale = 0.0625f, .pool_mult = 8},
    {.name = "prefix0-h16-q8", .bs = 3, .H = 16, .q_len = 8, .max_prefix = 0, .vis = VIS_TREE,
     .kv_stride = 576, .sm_scale = 0.0625f},
    {.name = "onekey-h16-q1", .bs = 5, .H = 16, .q_len = 1, .max_prefix = 0, .vis = VIS_CAUSAL_NULL,
     .idx64 = 1, .kv_stride = 576, .sm_scale = 0.0625f},
    /* grids vattn_plan.h's multi-wave plan (VATTN_PLAN_MULTIWAVE, on; VATTN_DEV_WAVES=0 turns it
     * off in the dev build) takes on 132 SMs, against the one-wave plan: 80 v7 row blocks 1 x 250 tiles -> 3 splits x 84 (2 waves, deep);
     * 48 fp16 blocks 2 x 125 -> 5 x 50 (2 waves, deep off); v3's 32 splits of one tile -> 16 of 2 */
    {.name = "waves-h64-q8-bs10", .bs = 10, .H = 64, .q_len = 8, .max_prefix = 8000, .vis = VIS_CAUSAL_NULL,
     .kv_stride = 576, .sm_scale = 0.0625f},
    {.name = "waves-fp16-h32-q8-bs12", .bs = 12, .H = 32, .q_len = 8, .max_prefix = 8000, .vis = VIS_TREE,
     .idx64 = 1, .fp16 = 1, .kv_stride = 576, .sm_scale = 0.0625f},
    {.name = "waves-h16-q2-bs4-v3", .bs = 4, .H = 16, .q_len = 2, .max_prefix = 1000, .vis = VIS_CAUSAL,
     .kv_stride = 576, .sm_scale = 0.0625f},
    {.name = "onekey-h128-q1", .bs = 2, .H = 128, .q_len = 1, .max_prefix = 0, .vis = VIS_CAUSAL_NULL,
     .kv_stride = 576, .sm_scale = 0.0625f},
};

typedef struct row {
    char name[40], kernel[12], worst[40];
    double rel, lse_err;
    int det, ok;
    char why[200];
} row;
static row rows[320];
static int nrows, nfail;

static void record(const char *name, const char *kernel, const cmpres *R, int det, const char *extra)
{
    if (nrows >= (int)(sizeof rows / sizeof rows[0])) {
        printf("FAIL %s %s: too many result rows\n", name, kernel);
        nfail++;
        return;
    }
    row *r = &rows[nrows++];
    snprintf(r->name, sizeof r->name, "%s", name);
    snprintf(r->kernel, sizeof r->kernel, "%s", kernel);
    snprintf(r->worst, sizeof r->worst, "(%d,%d,%d,%d)", R->wb, R->wt, R->wh, R->wc);
    r->rel = R->rel;
    r->lse_err = R->lse_err;
    r->det = det;
    r->ok = R->ok && det != 0 && !extra[0];
    snprintf(r->why, sizeof r->why, "%s%s", R->why, extra);
    nfail += !r->ok;
    printf("%s %-20s %-9s rel_l2=%.2e worst=%.2e at (req %d, tok %d, head %d, ch %d) lse_err=%.1e det=%s %s\n",
           r->ok ? "PASS" : "FAIL", name, kernel, R->rel, R->worst, R->wb, R->wt, R->wh, R->wc,
           R->lse_err, det < 0 ? "n/a" : det ? "yes" : "NO", r->why);
}

/* First guard region found written since the case began ("" = none). */
static char g_guard[160];
static int g_short; /* a NAME filter was given: no graph replays (short compute-sanitizer runs) */

static void sync_or_die(cudaStream_t st)
{
    cudaError_t e = st ? cudaStreamSynchronize(st) : cudaDeviceSynchronize();
    if (e != cudaSuccess) {
        printf("     CUDA error after the kernel: %s\n", cudaGetErrorString(e));
        exit(1); /* the context is gone: nothing else can run */
    }
}

static void fetch_out(const hcall *B, const dcall *D, uint16_t *o, float *lse)
{
    CK(cudaMemcpy(o, D->o, B->o_elems * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(lse, D->lse, B->lse_elems * 4, cudaMemcpyDeviceToHost));
    if (!g_guard[0])
        dcall_guards(D, g_guard, sizeof g_guard);
}

/* Runs `fn` (poisoned outputs first) and copies o / lse back. */
static int run_kernel(vattn_fn fn, const vlib *L, const hcall *B, dcall *D, uint16_t *o, float *lse)
{
    dcall_poison(B, D);
    int rc = fn(&D->a, D->ws, D->ws_bytes, NULL);
    if (rc) {
        printf("     kernel returned %d (%s) %s\n", rc, L->status(rc), L->cuerr());
        return rc;
    }
    sync_or_die(NULL);
    fetch_out(B, D, o, lse);
    return 0;
}

/* One call of the library on a stream (graph capture): the verify or the extend convention. */
typedef int (*launch_fn)(const vlib *L, const void *args, const dcall *D, cudaStream_t st);

static int launch_verify(const vlib *L, const void *args, const dcall *D, cudaStream_t st)
{
    return L->verify((const vattn_args *)args, D->ws, D->ws_bytes, st);
}

/* The fast call (`launch`) captured in a CUDA graph on a non-blocking stream, replayed twice
 * (poisoned outputs before each): both replays bitwise equal to the eager o / lse. "" = equal. */
static void graph_replay(const vlib *L, launch_fn launch, const void *args, const hcall *B, dcall *D,
                         const uint16_t *o_eager, const float *lse_eager, uint16_t *o, float *lse, char *why, size_t n)
{
    cudaStream_t st;
    cudaGraph_t g;
    cudaGraphExec_t ge;
    why[0] = 0;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    const int rc = launch(L, args, D, st);
    const cudaError_t ec = cudaStreamEndCapture(st, &g);
    if (rc || ec != cudaSuccess) {
        snprintf(why, n, " graph capture: status %d (%s) %s, end capture: %s", rc, L->status(rc), L->cuerr(),
                 cudaGetErrorString(ec));
        if (ec == cudaSuccess)
            cudaGraphDestroy(g);
        cudaGetLastError();
        CK(cudaStreamDestroy(st));
        return;
    }
    CK(cudaGraphInstantiate(&ge, g, 0));
    for (int k = 0; k < 2 && !why[0]; k++) {
        dcall_poison(B, D);
        CK(cudaDeviceSynchronize()); /* the poison (legacy stream, async memset) lands first */
        CK(cudaGraphLaunch(ge, st));
        sync_or_die(st);
        fetch_out(B, D, o, lse);
        if (memcmp(o, o_eager, B->o_elems * 2) != 0 || memcmp(lse, lse_eager, B->lse_elems * 4) != 0)
            snprintf(why, n, " graph replay %d not bitwise equal to the eager call", k + 1);
    }
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(g));
    CK(cudaStreamDestroy(st));
}

#include "vattn_gpu_extend.h"

/* SP_ZERO_Q: vattn_check_mean (vattn_test_util.h) as a result row */
static void check_mean(const hcall *B, const uint16_t *o, const float *lse, int check_lse, cmpres *R)
{
    vattn_meanres M;
    vattn_check_mean(&B->a, B->indptr, B->indices, B->a.visibility, B->kv, o, check_lse ? lse : NULL, &M);
    memset(R, 0, sizeof *R);
    R->ok = !M.why[0];
    R->rel = M.worst_ratio; /* for this check: worst error in units of its tolerance */
    R->worst = M.worst;
    R->lse_err = M.lse_err;
    R->wb = M.wb, R->wt = M.wt, R->wh = M.wh, R->wc = M.wc;
    snprintf(R->why, sizeof R->why, "%s", M.why);
}

static void run_case(const gcase *c, const vlib *gpu, const vlib *cpu, int invalid)
{
    hcall B;
    hcall_build(c, &B);
    uint16_t *ro = malloc(B.o_elems * 2), *o = malloc(B.o_elems * 2), *o1 = malloc(B.o_elems * 2);
    float *rlse = malloc(B.lse_elems * 4), *lse = malloc(B.lse_elems * 4), *lse1 = malloc(B.lse_elems * 4);
    uint16_t *o_r = malloc(B.o_elems * 2); /* the GPU reference's o / lse, for vattn_extend */
    float *lse_r = malloc(B.lse_elems * 4);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = cpu_reference(&B, cpu, ro, rlse);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (rc) {
        printf("FAIL %s: CPU reference returned %d\n", c->name, rc);
        nfail++;
        goto out;
    }
    char name[40];
    snprintf(name, sizeof name, "%s%s", c->name, invalid == 1 ? "+badslot" : invalid == 2 ? "+badlen" : "");
    if (invalid) {
        /* corrupt one request; the expected result is the reference with that request NaN */
        const int ql = B.a.q_len, H = B.a.num_heads, fp16 = B.a.dtype == VATTN_DTYPE_FP16;
        int bad_b;
        if (invalid == 1) {
            bad_b = B.a.bs > 1 ? 1 : 0;
            int64_t pos = B.indptr[bad_b]; /* first key of the request */
            if (B.a.index_type == VATTN_INDEX_INT64)
                ((int64_t *)B.indices)[pos] = B.a.num_slots + 5;
            else
                ((int32_t *)B.indices)[pos] = -7;
        } else {
            bad_b = B.a.bs - 1;
            B.indptr[B.a.bs] = B.indptr[bad_b] + ql - 1;
        }
        for (int i = 0; i < ql; i++)
            for (int h = 0; h < H; h++) {
                int64_t t = (int64_t)bad_b * ql + i;
                for (int ch = 0; ch < DV; ch++)
                    ro[t * B.a.o_stride_t + h * B.a.o_stride_h + ch] = fp16 ? POISON_F16 : POISON_BF16;
                rlse[t * H + h] = NAN;
            }
    }
    dcall D;
    dcall_upload(&B, &D);
    dcall_ws(&D, gpu);
    const int check_lse = B.want_lse;
    cmpres R;
    char extra[200];
    g_guard[0] = 0;
    rc = run_kernel(gpu->reference, gpu, &B, &D, o, lse);
    if (rc) {
        memset(&R, 0, sizeof R);
        snprintf(R.why, sizeof R.why, "status %d", rc);
        R.ok = 0;
    } else {
        compare_out(&B, o, lse, ro, rlse, check_lse, &R);
    }
    record(name, "ref", &R, -1, g_guard);
    memcpy(o_r, o, B.o_elems * 2);
    memcpy(lse_r, lse, B.lse_elems * 4);
    if (!rc && c->special == SP_ZERO_Q) {
        check_mean(&B, o, lse, check_lse, &R);
        record(name, "ref=mean", &R, -1, "");
    }
    g_guard[0] = 0;
    rc = run_kernel(gpu->verify, gpu, &B, &D, o, lse);
    if (rc) {
        memset(&R, 0, sizeof R);
        snprintf(R.why, sizeof R.why, "status %d", rc);
        record(name, "fast", &R, 0, "");
    } else {
        compare_out(&B, o, lse, ro, rlse, check_lse, &R);
        int det = 1;
        for (int k = 0; k < 2; k++) {
            run_kernel(gpu->verify, gpu, &B, &D, o1, lse1);
            det &= memcmp(o, o1, B.o_elems * 2) == 0 && memcmp(lse, lse1, B.lse_elems * 4) == 0;
        }
        record(name, "fast", &R, det, g_guard);
        if (c->special == SP_ZERO_Q) {
            cmpres M;
            check_mean(&B, o, lse, check_lse, &M);
            record(name, "fast=mean", &M, -1, "");
        }
        if (!invalid && !g_short) { /* graph replay vs this eager result */
            graph_replay(gpu, launch_verify, &D.a, &B, &D, o, lse, o1, lse1, extra, sizeof extra);
            cmpres G;
            memset(&G, 0, sizeof G);
            G.ok = !extra[0] && !g_guard[0];
            snprintf(G.why, sizeof G.why, "%s%s", extra, g_guard);
            record(name, "graph", &G, -1, "");
        }
        if (!invalid) /* the same call in the extend convention: bitwise the same results */
            run_extend_agreement(c, name, gpu, &B, &D, ro, rlse, o_r, lse_r, o, lse);
    }
    printf("     (bs %d, H %d, q_len %d, keys %lld, ws %zu B, cpu ref %.1f s)\n", c->bs, c->H, c->q_len,
           (long long)B.total, D.ws_bytes,
           (t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec));
    dcall_free(&D);
out:
    free(ro);
    free(o);
    free(o1);
    free(o_r);
    free(lse_r);
    free(rlse);
    free(lse);
    free(lse1);
    hcall_free(&B);
}

static const gcase *find_case(const char *name)
{
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        if (!strcmp(cases[k].name, name))
            return &cases[k];
    fprintf(stderr, "no case %s\n", name);
    exit(1);
}

/* test_verify_gpu [NAME]: with NAME, only the cases whose name contains it (and not the
 * invalid-data runs or the graph replays): a short run for compute-sanitizer. */
int main(int argc, char **argv)
{
    const char *only = argc > 1 ? argv[1] : NULL;
    g_short = only != NULL;
    setvbuf(stdout, NULL, _IOLBF, 0);
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
        printf("no CUDA device: skipped\n");
        return 77;
    }
    vlib gpu, cpu;
    static const char *const knobs[] = {"VATTN_VARIANT", "VATTN_FORCE_NSPLIT", "VATTN_DEV_DEEP", "VATTN_DEV_WAVES"};
    int dev = 0;
    for (size_t k = 0; k < sizeof knobs / sizeof knobs[0]; k++)
        dev |= getenv(knobs[k]) != NULL;
    if (dev) {
        printf("VATTN_VARIANT=%s VATTN_FORCE_NSPLIT=%s VATTN_DEV_DEEP=%s VATTN_DEV_WAVES=%s: testing the dev build "
               "build/tests/libverify_attn_dev.so\n",
               getenv(knobs[0]) ? getenv(knobs[0]) : "", getenv(knobs[1]) ? getenv(knobs[1]) : "",
               getenv(knobs[2]) ? getenv(knobs[2]) : "", getenv(knobs[3]) ? getenv(knobs[3]) : "");
        vlib_open_in(&gpu, "tests", "libverify_attn_dev.so");
    } else {
        vlib_open(&gpu, "libverify_attn.so");
    }
    vlib_open(&cpu, "libverify_attn_cpu.so");
    const int nc = (int)(sizeof cases / sizeof cases[0]);
    for (int k = 0; k < nc; k++) {
        g_rng = 0x9E3779B97F4A7C15ull ^ (uint64_t)(k + 1) * 0x100000001B3ull;
        if (!only || strstr(cases[k].name, only))
            run_case(&cases[k], &gpu, &cpu, 0);
    }
    if (!only) {
        /* invalid device data: NaN for that request only, never a crash */
        g_rng = 4242;
        run_case(&cases[1], &gpu, &cpu, 1);
        g_rng = 4243;
        run_case(&cases[5], &gpu, &cpu, 1);
        g_rng = 4244;
        run_case(&cases[3], &gpu, &cpu, 2);
        /* invalid extend device data, on a v7 (> 32 rows), a v8 and a v3 (<= 32 rows) case */
        for (int kind = EXT_BAD_QO; kind <= EXT_BAD_SLOT; kind++) {
            g_rng = 4250 + kind;
            run_extend_invalid(find_case("h32-q7-tree-strd"), &gpu, kind);
            g_rng = 4260 + kind;
            run_extend_invalid(find_case("nanv-h8-q4-v3"), &gpu, kind);
            g_rng = 4270 + kind;
            run_extend_invalid(find_case("nanv-h8-q4-v8"), &gpu, kind);
        }
    }
    if (!nrows) {
        printf("no case matches '%s'\n", only);
        return 2;
    }

    printf("\n(kernel ref=mean / fast=mean: Q = 0 vs the float64 mean of the visible V rows, rel L2 column = worst\n"
           " error in units of its tolerance; graph: CUDA-graph replay bitwise equal to eager, guards intact)\n");
    printf("| case | kernel | rel L2 | worst (req,tok,head,ch) | lse err | bitwise det | result |\n");
    printf("|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < nrows; i++)
        printf("| %s | %s | %.2e | %s | %.1e | %s | %s |\n", rows[i].name, rows[i].kernel, rows[i].rel,
               rows[i].worst, rows[i].lse_err, rows[i].det < 0 ? "-" : rows[i].det ? "yes" : "NO",
               rows[i].ok ? "PASS" : "FAIL");
    printf("%s: %d of %d checks failed\n", nfail ? "FAILED" : "OK", nfail, nrows);
    return nfail ? 1 : 0;
}
