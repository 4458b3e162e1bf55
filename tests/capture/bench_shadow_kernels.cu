/*
 * bench_shadow_kernels.cu — dev harness of shadow mode's device work (llm.c style: check, then
 * time). Compiles libkcap's own kernels (capture/kcap_gather.cu, included) into a CUDA runtime
 * program and, for each output shape of the verify call (serving sizes, the golden corpus'
 * shapes, long context), first checks the compare against a double-precision host judge on
 * random data with planted differences (a value beyond tolerance, a NaN, an Inf, a changed
 * lse), then times every node shadow mode adds per call inside a CUDA graph: 32 copies of one
 * kernel (or of one call's chain: poison, compare with its gate, idle staging) in a dependent
 * chain, replayed behind a spin kernel so the events bracket GPU work only; per node = median
 * replay / 32. An empty kernel gives the floor of a node. The candidate itself is not here: its
 * time is its own (bench_graph_cost.sh measures whole calls). The compare is also checked and
 * timed at other loads a thread and block sizes (instances of its body, kSweep: how
 * kcap_shadow_cmp.h's choice was made; re-run it on a new GPU before changing that choice),
 * and timed with parts of its cross-block step left out (kJoinProbe: what each part costs)
 * and with its publish as it was (kPubProbe: what publishing with no system fence bought).
 *
 * Issue "Shadow mode" item 6: the compare ≤ 5 µs at the golden shapes. Output: one line per
 * (shape, node), then "check: N failed". Exit status 1 when a check failed.
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>
#include <algorithm>

#include "kcap_gather.cu"

#define CK(x)                                                                                       \
    do {                                                                                            \
        cudaError_t e_ = (x);                                                                       \
        if (e_ != cudaSuccess) {                                                                    \
            fprintf(stderr, "bench_shadow_kernels: %s: %s (line %d)\n", #x, cudaGetErrorString(e_), \
                    __LINE__);                                                                      \
            exit(2);                                                                                \
        }                                                                                           \
    } while (0)

static const int kLayers = 32, kReps = 25;
static const double kAtol = 1e-2, kRtol = 2e-2, kLseAtol = 1e-3, kLseRtol = 1e-3; /* any fixed set */

extern "C" __global__ void bench_empty(int) {}
extern "C" __global__ void bench_spin(long long cycles)
{
    long long t0 = clock64();
    while (clock64() - t0 < cycles)
        ;
}

struct shape {
    const char *name;
    int tokens, heads; /* o is [tokens, heads, 512] bf16, lse [tokens, heads] fp32 */
};

static const shape kShapes[] = {
    {"bs1 q2 h8 (serving, small)", 2, 8},       {"bs4 q4 h16 (serving)", 16, 16},
    {"bs8 q16 h8 (serving, wide)", 128, 8},     {"golden h128_q4", 4, 128},
    {"golden h16_q64", 64, 16},                 {"golden h64_q7 (odd)", 7, 64},
    {"golden h8_q1", 1, 8},                     {"bs8 q4 h16 (32k context)", 32, 16},
    {"bs32 q8 h128 (large batch)", 256, 128},
    {"h6 q3 (lse by element)", 3, 6}, /* lse rows of 24 B: the compare's element-at-a-time path */
};

static float bf2f(unsigned short b)
{
    unsigned int u = (unsigned int)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static unsigned short f2bf(float f)
{
    unsigned int u;
    memcpy(&u, &f, 4);
    return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

struct ref_res { /* the host judge, in double */
    unsigned long long nonfinite, first, beyond, worst_elem;
    double max_abs, worst_ratio;
};

/* The judge's ratio at element i (the device may pick another element of a near-equal ratio). */
static double ratio_at(const double *got, const double *want, unsigned long long i, double atol, double rtol)
{
    double d = fabs(got[i] - want[i]), band = atol + rtol * fabs(want[i]);
    return band > 0 ? d / band : (d > 0 ? INFINITY : 0);
}

static int cls(double v) { return isnan(v) ? 1 : isinf(v) ? (v > 0 ? 2 : 3) : 0; }

static ref_res judge(const double *got, const double *want, long long n, double atol, double rtol)
{
    ref_res r = {0, ~0ull, 0, ~0ull, 0, 0};
    for (long long i = 0; i < n; i++) {
        int cg = cls(got[i]), cw = cls(want[i]);
        if (cg != cw) {
            r.nonfinite++;
            if ((unsigned long long)i < r.first)
                r.first = i;
            continue;
        }
        if (cg)
            continue;
        double d = fabs(got[i] - want[i]), band = atol + rtol * fabs(want[i]);
        r.max_abs = d > r.max_abs ? d : r.max_abs;
        r.beyond += d > band;
        double ratio = band > 0 ? d / band : (d > 0 ? INFINITY : 0);
        if (ratio > r.worst_ratio) {
            r.worst_ratio = ratio;
            r.worst_elem = i;
        }
    }
    return r;
}

struct bufs {
    unsigned short *prod_o, *cand_o;
    float *prod_l, *cand_l;
    kcap_cmp_dev *dev;
    kcap_cmp_out *out, *out_dptr;
    long long no, nl;
};

static void fill_args(const shape &s, const bufs &b, kcap_cmp_args *a)
{
    memset(a, 0, sizeof *a);
    a->dev = (unsigned long long)b.dev;
    a->out = (unsigned long long)b.out_dptr;
    a->nt = 2;
    a->gen = 1;
    kcap_cmp_tensor *o = &a->t[0], *l = &a->t[1];
    o->prod = (unsigned long long)b.prod_o, o->cand = (unsigned long long)b.cand_o;
    o->rows = (long long)s.tokens * s.heads, o->row_elems = 512, o->n1 = 1, o->s0 = 1024, o->s1 = 0;
    o->dtype = 0, o->atol = kAtol, o->rtol = kRtol;
    l->prod = (unsigned long long)b.prod_l, l->cand = (unsigned long long)b.cand_l;
    l->rows = s.tokens, l->row_elems = s.heads, l->n1 = 1, l->s0 = s.heads * 4, l->s1 = 0;
    l->dtype = 2, l->atol = kLseAtol, l->rtol = kLseRtol;
}

/* A compare kernel and the launch shape it was built for: libkcap's (kcap_shadow_cmp, sized
 * by kcap_shadow_cmp.h as kcap_gpu_shadow.c does) and the sweep's instances of its body. */
typedef void (*cmp_kernel)(kcap_cmp_args, kcap_stage_args);
struct cmp_variant {
    const char *name;
    int vpt, threads;
    cmp_kernel fn;
};

template <int VPT, int THREADS, int POL = 0>
__global__ void __launch_bounds__(THREADS) bench_cmp(kcap_cmp_args a, kcap_stage_args g)
{
    kcap_cmp_run<VPT, POL>(a, g);
}

static const cmp_variant kLib = {"libkcap", KCAP_CMP_VPT, KCAP_CMP_THREADS, kcap_shadow_cmp};
static const cmp_variant kSweep[] = {
    {"vpt1 t256", 1, 256, bench_cmp<1, 256>},   {"vpt1 t512", 1, 512, bench_cmp<1, 512>},
    {"vpt1 t1024", 1, 1024, bench_cmp<1, 1024>}, {"vpt2 t256", 2, 256, bench_cmp<2, 256>},
    {"vpt2 t512", 2, 512, bench_cmp<2, 512>},   {"vpt2 t1024", 2, 1024, bench_cmp<2, 1024>},
    {"vpt4 t256", 4, 256, bench_cmp<4, 256>},
};
/* libkcap's own kernel (its VPT, its 1024-thread launch bound) under other plans: loads a
 * thread the plan assumes and block size. What kcap_cmp_plan's choice for grids of more than
 * one block is made from. */
static const cmp_variant kPlanProbe[] = {
    {"plan vpt1 t256", 1, 256, kcap_shadow_cmp},   {"plan vpt2 t256", 2, 256, kcap_shadow_cmp},
    {"plan vpt1 t512", 1, 512, kcap_shadow_cmp},   {"plan vpt2 t512", 2, 512, kcap_shadow_cmp},
    {"plan vpt1 t1024", 1, 1024, kcap_shadow_cmp}, {"plan vpt2 t1024", 2, 1024, kcap_shadow_cmp},
};
/* libkcap's compare with its publish as it was (kcap_shadow_cmp.cuh's POL bits), timed with
 * its gate: what each change of the publish bought. */
#define BENCH_PUB(name, pol) {name, KCAP_CMP_VPT, KCAP_CMP_THREADS, bench_cmp<KCAP_CMP_VPT, KCAP_CMP_THREADS, pol>}
static const cmp_variant kPubProbe[] = {
    BENCH_PUB("previous (fence.sc.sys, gen, then the gate)", KCAP_CMP_POL_PREV),
    BENCH_PUB("gate first, one fence.acq_rel.sys", KCAP_CMP_POL_FENCE),
};

/* The cross-block step by part, as timing probes (wrong results by design): every block
 * judges its share, then JOIN 0: no step at all, the grid's last block publishes its own
 * totals (the floor under any cross-block step); 1: the blocks are counted as libkcap counts
 * them, and the last to count publishes its own totals; 2: the blocks also add their totals
 * atomically, and the last still publishes its own (libkcap's compare = 2 + the last block's
 * reads of the totals). How the step was chosen: docs/PERF.md ("Shadow mode's compare,
 * cross-block step"). */
template <int VPT, int JOIN>
__global__ void __launch_bounds__(KCAP_CMP_THREADS) bench_cmp_join_probe(kcap_cmp_args a, kcap_stage_args g)
{
    kcap_cmp_dev *dev = (kcap_cmp_dev *)a.dev;
    __shared__ kcap_cmp_acc s_acc[KCAP_CMP_MAX];
    unsigned long long compared = 0, diverged = 0;
    if (threadIdx.x == 0)
        compared = VOL(unsigned long long, dev->compared), diverged = VOL(unsigned long long, dev->diverged);
    kcap_cmp_block_totals<VPT>(a, s_acc);
    if (JOIN == 2 && (threadIdx.x >> 5) < a.nt && (threadIdx.x & 31) == 0)
        kcap_cmp_acc_atomic(&dev->t[threadIdx.x >> 5], &s_acc[threadIdx.x >> 5]);
    __syncthreads();
    if (threadIdx.x != 0)
        return;
    if (JOIN == 0 ? blockIdx.x == gridDim.x - 1 : kcap_cmp_count(&dev->blocks_done) == gridDim.x - 1) {
        kcap_cmp_publish<0>(a, g, s_acc, compared, diverged);
        if (JOIN) { /* as libkcap's last block leaves them */
            for (int k = 0; k < a.nt; k++)
                dev->t[k].nonfinite = dev->t[k].beyond = dev->t[k].worst = dev->t[k].max_abs = 0,
                dev->t[k].first_nonfinite = ~0ull;
            dev->blocks_done = 0;
        }
    }
}
static const cmp_variant kJoinProbe[] = {
    {"none", KCAP_CMP_VPT, KCAP_CMP_THREADS, bench_cmp_join_probe<KCAP_CMP_VPT, 0>},
    {"count", KCAP_CMP_VPT, KCAP_CMP_THREADS, bench_cmp_join_probe<KCAP_CMP_VPT, 1>},
    {"atomics + count", KCAP_CMP_VPT, KCAP_CMP_THREADS, bench_cmp_join_probe<KCAP_CMP_VPT, 2>},
};

/* Queues variant v on `a`, planned as libkcap plans it (max_blocks: libkcap's grid bound) or,
 * with `fixed`, at the variant's own loads a thread and block size (max_warps: forced
 * striding when small). Returns the grid. */
static unsigned launch_cmp(const cmp_variant &v, kcap_cmp_args a, const kcap_stage_args &g, long long max_blocks,
                           cudaStream_t q, int fixed = 0, long long max_warps = 0)
{
    unsigned threads, blocks;
    if (fixed) {
        long long bytes[KCAP_CMP_MAX];
        for (int k = 0; k < a.nt; k++)
            bytes[k] = kcap_cmp_tensor_bytes(&a.t[k]);
        kcap_cmp_plan_fixed(a.nt, bytes, v.vpt, v.threads, max_warps ? max_warps : max_blocks * (v.threads / 32),
                            a.warp0, &threads, &blocks);
    } else {
        kcap_cmp_plan_args(&a, max_blocks, max_blocks / KCAP_STAGE_BLOCKS_PER_SM, &threads, &blocks); /* as libkcap's kcap_shadow_judge_launch */
    }
    v.fn<<<blocks, threads, 0, q>>>(a, g);
    return blocks;
}

static int checks_failed;

static void expect(int ok, const char *shape_name, const char *what, const char *kernel)
{
    if (!ok) {
        checks_failed++;
        printf("CHECK FAILED [%s] %s: %s\n", shape_name, kernel, what);
    }
}

static void verify_result(const shape &s, bufs &b, const char *kn, const char *label);

/* One compare (no gate) by variant v on the current candidate, its result against the judge.
 * The site's totals are reset first by the poison fill with nothing to poison, as libkcap's
 * fill before every candidate resets them: a deferred compare (check_chain, the timings)
 * leaves them to its staging kernel, and a compare that joins its own blocks starts from
 * them. */
static void check_once(const shape &s, bufs &b, const cmp_variant &v, long long max_blocks, const char *label,
                       int fixed = 0, long long max_warps = 0)
{
    kcap_cmp_args a;
    fill_args(s, b, &a);
    kcap_stage_args nogate;
    memset(&nogate, 0, sizeof nogate);
    memset((void *)b.out, 0, sizeof *b.out);
    kcap_shadow_poison<<<1, KCAP_POISON_THREADS>>>(0, 0, a.dev);
    launch_cmp(v, a, nogate, max_blocks, 0, fixed, max_warps);
    CK(cudaDeviceSynchronize());
    verify_result(s, b, v.name, label);
}

/* libkcap's compare as kcap_shadow_judge_launch queues it before staging: a multi-block compare
 * deferred (kcap_cmp_args.defer) and joined by kcap_stage_both, after the poison fill's reset of
 * the totals (here with nothing to poison). The ring has no memory, so a divergent call's gate
 * stages nothing, but its join still takes the ticket and waits for `decided`. eager: the gate
 * reports the outcome to mapped memory, checked too. Returns the grid. */
static unsigned chain_queue(const shape &s, bufs &b, const kcap_stage_args &in0, const kcap_stage_args &out,
                            unsigned nblocks, cudaStream_t q, unsigned long long poison_dst = 0,
                            unsigned long long poison_bytes = 0, unsigned pb = 1)
{
    kcap_cmp_args a;
    fill_args(s, b, &a);
    unsigned threads, blocks;
    kcap_cmp_plan_args(&a, nblocks, nblocks / KCAP_STAGE_BLOCKS_PER_SM, &threads, &blocks);
    kcap_stage_args in = in0;
    a.defer = blocks > 1;
    if (a.defer)
        in.cmp_dev = a.dev, in.cmp_out = a.out, in.cmp_nt = a.nt, in.cmp_gen = a.gen;
    kcap_shadow_poison<<<pb, KCAP_POISON_THREADS, 0, q>>>(poison_dst, poison_bytes, a.dev);
    kcap_shadow_cmp<<<blocks, threads, 0, q>>>(a, in);
    kcap_stage_both<<<nblocks, KCAP_STAGE_THREADS, 0, q>>>(in, out);
    return blocks;
}

/* A gate and staging that never capture: a ring with no memory, a site not valid, an eager
 * outcome word in mapped memory. */
struct idle_ring {
    kcap_ring_dev *ring;
    kcap_site_dev *site;
    unsigned long long *outcome, *outcome_d;
};
static idle_ring idle_ring_make()
{
    idle_ring r;
    CK(cudaMalloc(&r.ring, sizeof *r.ring));
    CK(cudaMalloc(&r.site, sizeof *r.site));
    CK(cudaMemset(r.ring, 0, sizeof *r.ring));
    CK(cudaMemset(r.site, 0, sizeof *r.site));
    CK(cudaHostAlloc(&r.outcome, 8, cudaHostAllocMapped));
    CK(cudaHostGetDevicePointer((void **)&r.outcome_d, r.outcome, 0));
    *r.outcome = 0;
    return r;
}
static void idle_ring_free(idle_ring &r)
{
    cudaFreeHost(r.outcome);
    cudaFree(r.ring), cudaFree(r.site);
}

static void check_chain(const shape &s, bufs &b, unsigned nblocks, const char *label, int eager)
{
    idle_ring ir = idle_ring_make();
    kcap_ring_dev *ring = ir.ring;
    kcap_site_dev *site = ir.site;
    unsigned long long *outcome = ir.outcome, *outcome_d = ir.outcome_d;
    kcap_stage_args in, out;
    memset(&in, 0, sizeof in);
    in.ring = (unsigned long long)ring, in.site = (unsigned long long)site, in.gen = 1;
    if (eager)
        in.force = 1, in.outcome = (unsigned long long)outcome_d;
    out = in;
    out.phase = 1, out.outcome = 0;
    memset((void *)b.out, 0, sizeof *b.out);
    unsigned blocks = chain_queue(s, b, in, out, nblocks, 0);
    CK(cudaDeviceSynchronize());
    char what[160];
    snprintf(what, sizeof what, "%s (chain: %s, %s gate)", label, blocks > 1 ? "joined by staging" : "one block",
             eager ? "eager" : "graph");
    verify_result(s, b, "libkcap", what);
    if (eager) {
        snprintf(what, sizeof what, "%s: eager outcome %#llx, want %#llx", label, *outcome, 1ull << 1);
        expect(*outcome == (1ull << 1), s.name, what, "libkcap chain"); /* gen 1, nothing staged */
    }
    idle_ring_free(ir);
}

/* b.out against the double judge of the current buffers. */
static void verify_result(const shape &s, bufs &b, const char *kn, const char *label)
{
    std::vector<unsigned short> po(b.no), co(b.no);
    std::vector<float> pl(b.nl), cl(b.nl);
    CK(cudaMemcpy(po.data(), b.prod_o, b.no * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(co.data(), b.cand_o, b.no * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(pl.data(), b.prod_l, b.nl * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(cl.data(), b.cand_l, b.nl * 4, cudaMemcpyDeviceToHost));
    std::vector<double> g(b.no), w(b.no);
    for (long long i = 0; i < b.no; i++)
        g[i] = bf2f(co[i]), w[i] = bf2f(po[i]);
    ref_res ro = judge(g.data(), w.data(), b.no, kAtol, kRtol);
    std::vector<double> gl(b.nl), wl(b.nl);
    for (long long i = 0; i < b.nl; i++)
        gl[i] = cl[i], wl[i] = pl[i];
    ref_res rl = judge(gl.data(), wl.data(), b.nl, kLseAtol, kLseRtol);
    char what[256];
    ref_res want[2] = {ro, rl};
    const double *gs[2] = {g.data(), gl.data()}, *ws[2] = {w.data(), wl.data()};
    const double at[2] = {kAtol, kLseAtol}, rt[2] = {kRtol, kLseRtol};
    for (int k = 0; k < 2; k++) {
        const kcap_cmp_res *r = &b.out->t[k];
        long long n = k ? b.nl : b.no;
        int worst_ok = r->worst_elem == want[k].worst_elem ||
                       (r->worst_elem < (unsigned long long)n &&
                        fabs(ratio_at(gs[k], ws[k], r->worst_elem, at[k], rt[k]) - want[k].worst_ratio) <=
                            1e-5 * want[k].worst_ratio);
        snprintf(what, sizeof what, "%s t%d nonfinite %llu/%llu first %llu/%llu beyond %llu/%llu worst %llu/%llu "
                 "max_abs %.6g/%.6g", label, k, r->nonfinite, want[k].nonfinite, r->first_nonfinite, want[k].first,
                 r->beyond, want[k].beyond, r->worst_elem, want[k].worst_elem, r->max_abs, want[k].max_abs);
        int ok = r->nonfinite == want[k].nonfinite && r->first_nonfinite == want[k].first &&
                 r->beyond == want[k].beyond && worst_ok &&
                 fabs(r->max_abs - want[k].max_abs) <= 1e-6 * (1 + want[k].max_abs);
        expect(ok, s.name, what, kn);
    }
    int div = ro.nonfinite || ro.beyond || rl.nonfinite || rl.beyond;
    unsigned long long verdict = b.out->verdict, compared = b.out->tally >> 32;
    snprintf(what, sizeof what, "%s verdict gen %llu divergent %llu, want 1 %d; compared %llu", label,
             verdict >> 32, verdict & 0xffffffffull, div, compared);
    expect(verdict == KCAP_CMP_VERDICT(1, div) && compared > 0, s.name, what, kn);
}

/* Median µs per node of a graph of kLayers launches queued by `launch` on `st`. */
template <class F> static double time_nodes(cudaStream_t st, F launch)
{
    cudaGraph_t g;
    cudaGraphExec_t x;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < kLayers; i++)
        launch(st);
    CK(cudaStreamEndCapture(st, &g));
    CK(cudaGraphInstantiate(&x, g, 0));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    CK(cudaGraphLaunch(x, st)); /* upload */
    std::vector<double> ts;
    for (int r = 0; r < kReps; r++) {
        bench_spin<<<1, 1, 0, st>>>(4000000);
        CK(cudaEventRecord(e0, st));
        CK(cudaGraphLaunch(x, st));
        CK(cudaEventRecord(e1, st));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        ts.push_back(ms * 1e3 / kLayers);
    }
    CK(cudaGetLastError());
    std::sort(ts.begin(), ts.end());
    cudaEventDestroy(e0), cudaEventDestroy(e1);
    cudaGraphExecDestroy(x), cudaGraphDestroy(g);
    return ts[ts.size() / 2];
}

/* One line: each variant at its own fixed plan (loads a thread, block size), timed with g. */
static void time_fixed_plans(const shape &s, const char *what, const cmp_variant *vs, size_t n, kcap_cmp_args a,
                             const kcap_stage_args &g, unsigned nblocks, cudaStream_t st, const char *unit)
{
    printf("[%-28s]   %s", s.name, what);
    for (size_t i = 0; i < n; i++) {
        unsigned gb = 0;
        double t = time_nodes(st, [&](cudaStream_t q) { gb = launch_cmp(vs[i], a, g, nblocks, q, 1); });
        printf(" %s %5.2f (grid %u) |", vs[i].name, t, gb);
    }
    printf("%s\n", unit);
}

int main(int argc, char **argv)
{
    int only_check = argc > 1 && !strcmp(argv[1], "--check");
    int sms = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const unsigned nblocks = KCAP_STAGE_BLOCKS_PER_SM * sms; /* libkcap's grid */
    cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, 0));
    printf("device %s (sm_%d%d, %d SMs); %d nodes per graph, median of %d replays\n", p.name, p.major, p.minor,
           sms, kLayers, kReps);
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    srand(12345);
    for (const shape &s : kShapes) {
        bufs b;
        b.no = (long long)s.tokens * s.heads * 512, b.nl = (long long)s.tokens * s.heads;
        CK(cudaMalloc(&b.prod_o, b.no * 2));
        CK(cudaMalloc(&b.cand_o, b.no * 2));
        CK(cudaMalloc(&b.prod_l, b.nl * 4));
        CK(cudaMalloc(&b.cand_l, b.nl * 4));
        CK(cudaMalloc(&b.dev, sizeof(kcap_cmp_dev)));
        CK(cudaHostAlloc(&b.out, sizeof(kcap_cmp_out), cudaHostAllocMapped));
        CK(cudaHostGetDevicePointer((void **)&b.out_dptr, b.out, 0));
        kcap_cmp_dev init;
        memset(&init, 0, sizeof init);
        for (int k = 0; k < KCAP_CMP_MAX; k++)
            init.t[k].first_nonfinite = ~0ull;
        CK(cudaMemcpy(b.dev, &init, sizeof init, cudaMemcpyHostToDevice));
        std::vector<unsigned short> po(b.no), co(b.no);
        std::vector<float> pl(b.nl), cl(b.nl);
        for (long long i = 0; i < b.no; i++) { /* random non-zero, small noise on the candidate */
            float v = (float)((rand() % 20001) - 10000) / 2500.f + 0.001f;
            po[i] = f2bf(v);
            co[i] = f2bf(v * (1.f + ((rand() % 3) - 1) * 0.004f));
        }
        for (long long i = 0; i < b.nl; i++)
            pl[i] = (float)(rand() % 1000) / 100.f + 1.f, cl[i] = pl[i] + ((rand() % 3) - 1) * 1e-4f;
        auto upload = [&]() {
            CK(cudaMemcpy(b.prod_o, po.data(), b.no * 2, cudaMemcpyHostToDevice));
            CK(cudaMemcpy(b.cand_o, co.data(), b.no * 2, cudaMemcpyHostToDevice));
            CK(cudaMemcpy(b.prod_l, pl.data(), b.nl * 4, cudaMemcpyHostToDevice));
            CK(cudaMemcpy(b.cand_l, cl.data(), b.nl * 4, cudaMemcpyHostToDevice));
        };
        {
            upload();
            check_once(s, b, kLib, nblocks, "agreeing");
            /* structure: one element far off at the last (head, token), a NaN, an Inf, lse off */
            std::vector<unsigned short> c2 = co;
            long long far = b.no - 77, nan_at = b.no / 3, inf_at = b.no / 2 + 5;
            c2[far] = f2bf(bf2f(po[far]) + 3.f);
            c2[nan_at] = 0x7fc0;
            c2[inf_at] = 0x7f80;
            CK(cudaMemcpy(b.cand_o, c2.data(), b.no * 2, cudaMemcpyHostToDevice));
            std::vector<float> l2 = cl;
            l2[b.nl - 1] += 0.5f;
            CK(cudaMemcpy(b.cand_l, l2.data(), b.nl * 4, cudaMemcpyHostToDevice));
            check_once(s, b, kLib, nblocks, "planted");
            check_once(s, b, kLib, nblocks, "planted, one striding block", 1, KCAP_CMP_THREADS / 32);
            for (const cmp_variant &v : kSweep)
                check_once(s, b, v, nblocks, "planted", 1);
            for (const cmp_variant &v : kPubProbe)
                check_once(s, b, v, nblocks, "planted");
            for (const cmp_variant &v : kPlanProbe)
                check_once(s, b, v, nblocks, "planted", 1);
            check_chain(s, b, nblocks, "planted", 0);
            check_chain(s, b, nblocks, "planted", 1);
            CK(cudaMemset(b.cand_o, 0xff, b.no * 2)); /* a candidate that wrote nothing */
            check_once(s, b, kLib, nblocks, "poisoned");
            check_chain(s, b, nblocks, "poisoned", 1);
            upload(); /* agreeing after divergent ones: the poison fill's reset of the totals */
            check_chain(s, b, nblocks, "agreeing after divergent", 0);
            check_chain(s, b, nblocks, "agreeing after divergent", 1);
        }
        upload();
        if (!only_check) {
            kcap_cmp_args a;
            fill_args(s, b, &a);
            unsigned long long bytes = (unsigned long long)b.no * 2;
            unsigned pb = (unsigned)std::min<unsigned long long>(std::max<unsigned long long>(
                (bytes / 16 + KCAP_POISON_THREADS - 1) / KCAP_POISON_THREADS, 1), nblocks);
            /* the chains' poison fills a scratch buffer of the outputs' size: the candidate's
               outputs stay as uploaded (agreeing, the usual call), as when a candidate rewrites
               them after the fill (poisoning them here timed a divergent call's chain) */
            void *scratch;
            CK(cudaMalloc(&scratch, bytes));
            unsigned long long pdst = (unsigned long long)scratch, pcand = (unsigned long long)b.cand_o;
            idle_ring ir = idle_ring_make();
            kcap_ring_dev *ring = ir.ring;
            kcap_site_dev *site = ir.site;
            unsigned long long *outcome_d = ir.outcome_d;
            kcap_stage_args in, out, nogate;
            memset(&in, 0, sizeof in);
            memset(&nogate, 0, sizeof nogate);
            in.ring = (unsigned long long)ring, in.site = (unsigned long long)site;
            out = in;
            out.phase = 1;
            kcap_stage_args in_eager = in; /* an eager call: the gate reports to mapped memory */
            in_eager.force = 1, in_eager.outcome = (unsigned long long)outcome_d;
            unsigned g_new = 0;
            double t_empty = time_nodes(st, [&](cudaStream_t q) { bench_empty<<<1, 32, 0, q>>>(0); });
            double t_cmp = time_nodes(st, [&](cudaStream_t q) { g_new = launch_cmp(kLib, a, nogate, nblocks, q); });
            kcap_cmp_args a_dev = a; /* results to device memory instead of mapped host memory */
            kcap_cmp_out *dout;
            CK(cudaMalloc(&dout, sizeof *dout));
            a_dev.out = (unsigned long long)dout;
            double t_cmp_dev = time_nodes(st, [&](cudaStream_t q) { launch_cmp(kLib, a_dev, nogate, nblocks, q); });
            kcap_cmp_args a0 = a, a1 = a;
            a0.nt = 0, a1.nt = 1;
            double t_nt0 = time_nodes(st, [&](cudaStream_t q) { launch_cmp(kLib, a0, nogate, nblocks, q); });
            double t_nt1 = time_nodes(st, [&](cudaStream_t q) { launch_cmp(kLib, a1, nogate, nblocks, q); });
            double t_g1 = time_nodes(st, [&](cudaStream_t q) {
                launch_cmp(kLib, a, nogate, nblocks, q, 1, KCAP_CMP_THREADS / 32); });
            printf("[%-28s]   probe: no tensors %5.2f, o only %5.2f, one striding block %5.2f us\n", s.name, t_nt0,
                   t_nt1, t_g1);
            time_fixed_plans(s, "sweep (loads per thread, block bound):", kSweep, sizeof kSweep / sizeof kSweep[0], a,
                             nogate, nblocks, st, "");
            if (g_new > 1) { /* one-block calls have no cross-block step */
                printf("[%-28s]   probe: the same grid with only part of the cross-block step:", s.name);
                for (const cmp_variant &v : kJoinProbe)
                    printf(" %s %5.2f |",
                           v.name, time_nodes(st, [&](cudaStream_t q) { launch_cmp(v, a, nogate, nblocks, q); }));
                printf(" (+ the last block's reads = compare) us\n");
            }
            time_fixed_plans(s, "plans of libkcap's compare, with gate:", kPlanProbe,
                             sizeof kPlanProbe / sizeof kPlanProbe[0], a, in, nblocks, st, " us");
            printf("[%-28s]   publish probes, with gate / eager gate:", s.name);
            for (const cmp_variant &v : kPubProbe) {
                double tg = time_nodes(st, [&](cudaStream_t q) { launch_cmp(v, a, in, nblocks, q); });
                double te = time_nodes(st, [&](cudaStream_t q) { launch_cmp(v, a, in_eager, nblocks, q); });
                printf(" %s %5.2f / %5.2f |", v.name, tg, te);
            }
            double tlg = time_nodes(st, [&](cudaStream_t q) { launch_cmp(kLib, a, in_eager, nblocks, q); });
            printf(" libkcap eager gate %5.2f us\n", tlg);
            cudaFree(dout);
            double t_cmpg = time_nodes(st, [&](cudaStream_t q) { launch_cmp(kLib, a, in, nblocks, q); });
            double t_poison = time_nodes(st, [&](cudaStream_t q) {
                kcap_shadow_poison<<<pb, KCAP_POISON_THREADS, 0, q>>>(pdst, bytes, 0); });
            double t_stage = time_nodes(st, [&](cudaStream_t q) {
                kcap_stage_both<<<nblocks, KCAP_STAGE_THREADS, 0, q>>>(in, out); });
            /* the chain as libkcap queues it (kcap_shadow_judge_launch): a multi-block compare
               joined by the staging kernel */
            double t_graph = time_nodes(st, [&](cudaStream_t q) { /* what a graph call adds */
                chain_queue(s, b, in, out, nblocks, q, pdst, bytes, pb); });
            double t_eager = time_nodes(st, [&](cudaStream_t q) { /* an eager call: the gate's outcome */
                chain_queue(s, b, in_eager, out, nblocks, q, pdst, bytes, pb); });
            /* the same with the compare joining its own blocks (as before the deferred join) */
            double t_graph_self = time_nodes(st, [&](cudaStream_t q) {
                kcap_shadow_poison<<<pb, KCAP_POISON_THREADS, 0, q>>>(pdst, bytes, a.dev);
                launch_cmp(kLib, a, in, nblocks, q);
                kcap_stage_both<<<nblocks, KCAP_STAGE_THREADS, 0, q>>>(in, out); });
            double t_eager_self = time_nodes(st, [&](cudaStream_t q) {
                kcap_shadow_poison<<<pb, KCAP_POISON_THREADS, 0, q>>>(pdst, bytes, a.dev);
                launch_cmp(kLib, a, in_eager, nblocks, q);
                kcap_stage_both<<<nblocks, KCAP_STAGE_THREADS, 0, q>>>(in_eager, out); });
            printf("[%-28s] o %7.1f KB | empty %5.2f | compare %5.2f, with gate %5.2f (grid %u) | poison %5.2f | "
                   "stage_both (idle) %5.2f | per call: graph %5.2f, eager %5.2f us\n",
                   s.name, bytes / 1024.0, t_empty, t_cmp, t_cmpg, g_new, t_poison, t_stage, t_graph, t_eager);
            double t_graph_div = time_nodes(st, [&](cudaStream_t q) { /* poisoned candidate: divergent */
                chain_queue(s, b, in, out, nblocks, q, pcand, bytes, pb); });
            double t_graph_self_div = time_nodes(st, [&](cudaStream_t q) {
                kcap_shadow_poison<<<pb, KCAP_POISON_THREADS, 0, q>>>(pcand, bytes, a.dev);
                launch_cmp(kLib, a, in, nblocks, q);
                kcap_stage_both<<<nblocks, KCAP_STAGE_THREADS, 0, q>>>(in, out); });
            printf("[%-28s]   divergent call (candidate poisoned, ring without memory): per call graph %5.2f, "
                   "compare joining its own blocks %5.2f us\n", s.name, t_graph_div, t_graph_self_div);
            printf("[%-28s]   compare's share of a call (per call - poison - idle staging): graph %5.2f, eager "
                   "%5.2f us | compare joining its own blocks: per call graph %5.2f, eager %5.2f, share %5.2f / "
                   "%5.2f us\n", s.name, t_graph - t_poison - t_stage, t_eager - t_poison - t_stage, t_graph_self,
                   t_eager_self, t_graph_self - t_poison - t_stage, t_eager_self - t_poison - t_stage);
            printf("[%-28s]   compare, results to device memory instead of mapped host memory %5.2f us\n",
                   s.name, t_cmp_dev);
            idle_ring_free(ir);
            cudaFree(scratch);
            upload();
            check_once(s, b, kLib, nblocks, "after timing");
            check_chain(s, b, nblocks, "after timing", 0); /* its accumulators reset each launch */
        }
        cudaFree(b.prod_o), cudaFree(b.cand_o), cudaFree(b.prod_l), cudaFree(b.cand_l), cudaFree(b.dev);
        cudaFreeHost(b.out);
    }
    printf("check: %d failed\n", checks_failed);
    return checks_failed ? 1 : 0;
}
