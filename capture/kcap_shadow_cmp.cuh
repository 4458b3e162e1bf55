/*
 * kcap_shadow_cmp.cuh — shadow mode's compare kernel, included by kcap_gather.cu (one PTX).
 *
 * kcap_shadow_cmp judges the candidate's outputs against production's on the call's stream,
 * with replay's rules (replay/kcap_compare.h): NaN/Inf classes first (a position whose class
 * differs is counted and the first one kept), then |got - want| > atol + rtol |want|, the
 * worst element by that ratio and the largest |got - want|. It runs after every shadowed call,
 * so it is built to be cheap (issue "Shadow mode": compare ≤ 5 µs; bench_shadow_kernels.cu
 * checks it against a double judge, then times it node by node and sweeps loads per thread
 * and block size). Measured on the H200, with its gate: 3.4–5.6 µs a node at the serving,
 * golden and 32k-context shapes (was 7.0–8.5), 29.9 µs at 32 MB (was 58). What it took:
 *   - a short chain of dependent instructions per element, since that, not the number of
 *     round trips, set the time: the NaN/Inf class tests once per 16-byte vector on the raw
 *     bits (kcap_cmp_nonfinite), then per finite element a subtract, an FMA, a max and the
 *     worst kept as the fraction d / band (kcap_cmp_scan), divided once per thread: no branch
 *     and no division per element (with them every extra load a thread made cost ~0.8 µs);
 *   - every tensor has warps of its own (kcap_shadow_cmp.h), all of a thread's 16-byte loads
 *     issued before any is used: one round trip to memory per thread whatever the number of
 *     tensors; beyond one block, many blocks of one load a thread (more, smaller blocks beat
 *     fewer with more loads a thread at every size measured);
 *   - a call whose outputs fit one block (≤ 32 KB) is judged and published by that block: no
 *     atomics or block count. Larger calls add the block totals atomically; before staging
 *     (every shadowed call whose candidate ran: kcap_cmp_args.defer) that is all the compare
 *     does, and the staging kernel after it, whose blocks start only once every compare block
 *     has ended, reads the totals, publishes and runs the gate (kcap_cmp_join): the kernel
 *     boundary the chain has anyway replaces a block count (compare's share of a call 3.8–4.2
 *     µs at the golden multi-block shapes against 5.0–5.2 with its own join, H200). Without
 *     staging (a failed candidate's graph nodes, the dev harness) each block's thread 0 counts
 *     its block with one acquire-release atomic and the last block's thread 0 reads the
 *     totals and publishes: that step costs 1.7–2.0 µs (bench_shadow_kernels' probes: ~1.0
 *     the count, 0.1–0.3 the data atomics, ~0.7 the last block's reads); fence, count, fence
 *     cost 0.3–0.6 µs more, and neither per-block slots nor a cluster's pre-reduction through
 *     distributed shared memory was faster (docs/PERF.md);
 *   - one block barrier for the block's totals (a multi-block call adds one before its
 *     count): each warp folds its lanes by shuffles of 32-bit quantities into a shared slot,
 *     then warp k folds tensor k's slots; the running totals are read at the kernel's start,
 *     not by the publisher at its end;
 *   - float arithmetic: bf16, fp16 and fp32 values are exact in float, and the target GPUs
 *     (sm_120) run double at 1/64 rate. |got - want| is rounded once (2^-24 relative), so
 *     only an element within that of its band can be judged differently from replay's
 *     double; element indices are 32-bit (an output of ≥ 2^32 elements reports its
 *     positions clamped);
 *   - the publisher writes mapped host memory with writes only (the running totals are
 *     counted in device memory) and no system fence: what the drainer acts on is one 8-byte
 *     store each (kcap_shadow_cmp.h: the verdict, the graph tally, the eager outcome), and
 *     the gate runs before them, inside the publisher, with no fence of its own. The fences
 *     of a publish that ordered its words cost 0.7–0.9 µs a call with a graph site's gate,
 *     1.0–1.4 with an eager gate (bench_shadow_kernels' publish probes, docs/PERF.md).
 * What is left of a one-block compare is ~1.6 µs of fixed cost (a compare of no tensor: the
 * node itself, 0.75 µs, the running totals' read and the writes) and the scan; a multi-block
 * call adds its data atomics (and, joining itself, its cross-block step).
 *
 * Where it reports otherwise than replay's double judge (the counts and the verdict agree;
 * only the worst element and the largest difference can differ, and a divergent call is
 * judged again on the host when it is kept): a difference that overflows float (fp32
 * values of opposite sign near 3e38) is +Inf; an element of band 0 (atol = rtol = 0, or
 * atol = 0 and want = 0) scores an infinite ratio where replay scores d; equal ratios go
 * to the larger index across threads; and the fraction compare d * wb > wd * band loses
 * the worst when both products overflow (|values| beyond ~1e19) or underflow (atol = 0
 * and values below ~1e-19), keeping an earlier, smaller one (a fix, e.g. the ratio by one
 * approximate reciprocal per element, waits for a GPU run that checks and times it).
 */

__device__ static inline float kcap_bits_to_float(unsigned int b, int dt)
{
    if (dt == 1)
        return __half2float(__ushort_as_half((unsigned short)b));
    return __uint_as_float(b << 16);
}

/* One thread's (then one warp's, block's) share of a tensor, all 32-bit. */
struct kcap_cmp_part {
    unsigned int nonfinite, beyond;
    unsigned int first;      /* first element whose NaN/Inf class differs; ~0: none */
    unsigned int worst_bits; /* float bits of the worst ratio (non-negative: ordered as integers) */
    unsigned int worst_i;    /* its element */
    unsigned int abs_bits;   /* float bits of the largest |got - want| */
};

/* A thread's worst so far as the fraction d / band, never divided while scanning: ratios are
 * compared as d1 * b2 > d2 * b1, so each element costs a few multiplies and selects and no
 * branch (the scan's cost is the chain of dependent instructions per element: a division
 * and a branch per element made the compare 2-3 times slower). */
struct kcap_cmp_scan {
    struct kcap_cmp_part p;
    float wd, wb; /* worst difference and its band; 0 / 1 while every difference is 0 */
};

#define KCAP_CMP_NONE 0xffffffffu
#define KCAP_CMP_LAST 0xfffffffeu /* the largest element index reported */

__device__ static inline int kcap_classf(float v) { return isnan(v) ? 1 : isinf(v) ? (v > 0.f ? 2 : 3) : 0; }

/* A finite pair's difference d and band: the largest |got - want|, the count beyond, the worst. */
__device__ static inline void kcap_cmp_take(struct kcap_cmp_scan *s, float d, float band, unsigned int i)
{
    s->p.abs_bits = max(s->p.abs_bits, __float_as_uint(d));
    s->p.beyond += d > band;
    int worse = d * s->wb > s->wd * band;
    s->wd = worse ? d : s->wd;
    s->wb = worse ? band : s->wb;
    s->p.worst_i = worse ? i : s->p.worst_i;
}

__device__ static inline void kcap_cmp_one(struct kcap_cmp_scan *s, float got, float want, unsigned int i,
                                           float atol, float rtol)
{
    int cg = kcap_classf(got), cw = kcap_classf(want);
    int differ = cg != cw, finite = !differ && !cg; /* the same NaN/Inf on both sides: equal */
    s->p.nonfinite += differ;
    s->p.first = differ && i < s->p.first ? i : s->p.first;
    /* a pair that is not finite takes d = 0: beyond nothing, worse than nothing */
    kcap_cmp_take(s, finite ? fabsf(got - want) : 0.f, fmaf(rtol, fabsf(want), atol), i);
}

/* kcap_cmp_one for a pair known to be finite on both sides (most vectors: the class tests
 * are made once per vector, on the raw bits, by kcap_cmp_nonfinite). */
__device__ static inline void kcap_cmp_one_finite(struct kcap_cmp_scan *s, float got, float want, unsigned int i,
                                                  float atol, float rtol)
{
    kcap_cmp_take(s, fabsf(got - want), fmaf(rtol, fabsf(want), atol), i);
}

/* Whether any element of the 16-byte vectors g, w is NaN or Inf (exponent all ones). */
template <int ET> __device__ static inline int kcap_cmp_nonfinite(uint4 g, uint4 w)
{
    const unsigned int e = ET == 2 ? 0x7f800000u : ET == 1 ? 0x7c007c00u : 0x7f807f80u;
    unsigned int x[8] = {g.x, g.y, g.z, g.w, w.x, w.y, w.z, w.w};
    int any = 0;
#pragma unroll
    for (int k = 0; k < 8; k++) {
        unsigned int t = x[k] & e;
        any |= ET == 2 ? t == e : ((t & 0xffffu) == (e & 0xffffu)) | ((t >> 16) == (e >> 16));
    }
    return any;
}

/* Row r's first byte: (r / n1) * s0 + (r % n1) * s1. */
__device__ static inline long long kcap_cmp_row(const struct kcap_cmp_tensor *t, long long r)
{
    return t->n1 == 1 ? r * t->s0 : (r / t->n1) * t->s0 + (r % t->n1) * t->s1;
}

__device__ static inline unsigned int kcap_cmp_elem(long long i)
{
    return i < (long long)KCAP_CMP_LAST ? (unsigned int)i : KCAP_CMP_LAST;
}

/* Element k of a 16-byte vector: ET 0 bf16, 1 fp16, 2 fp32 (a template, so no per-element
 * type test). */
template <int ET> __device__ static inline float kcap_cmp_lane(const unsigned int *w, int k)
{
    if (ET == 2)
        return __uint_as_float(w[k]);
    unsigned int b = (w[k >> 1] >> (16 * (k & 1))) & 0xffffu;
    return ET == 1 ? __half2float(__ushort_as_half((unsigned short)b)) : __uint_as_float(b << 16);
}

/* Thread `lt` of the `nth` threads given to tensor t, when its rows are whole 16-byte vectors:
 * VPT loads of each side issued before any is used. */
template <int VPT, int ET>
__device__ static void kcap_cmp_scan_vec(const struct kcap_cmp_tensor *t, unsigned int lt, unsigned int nth,
                                         struct kcap_cmp_scan *p)
{
    const int epv = ET == 2 ? 4 : 8;
    const float atol = (float)t->atol, rtol = (float)t->rtol;
    const unsigned int vpr = (unsigned int)(t->row_elems / epv), nv = (unsigned int)(t->rows * vpr);
    for (unsigned int v0 = lt; v0 < nv; v0 += VPT * nth) {
        uint4 g[VPT], w[VPT];
#pragma unroll
        for (int u = 0; u < VPT; u++) {
            unsigned int v = v0 + u * nth;
            if (v < nv) {
                unsigned int r = v / vpr, cv = v - r * vpr;
                long long off = kcap_cmp_row(t, r) + (long long)cv * 16;
                g[u] = *(const uint4 *)((const char *)t->cand + off);
                w[u] = *(const uint4 *)((const char *)t->prod + off);
            }
        }
#pragma unroll
        for (int u = 0; u < VPT; u++) {
            if (v0 + u * nth >= nv)
                break;
            /* vector v holds elements v * epv.. (a row is a whole number of vectors) */
            long long i0 = (long long)(v0 + u * nth) * epv;
            unsigned int ib = (unsigned int)(i0 < (long long)KCAP_CMP_LAST - epv ? i0 : KCAP_CMP_LAST - epv);
            unsigned int gw[4] = {g[u].x, g[u].y, g[u].z, g[u].w}, ww[4] = {w[u].x, w[u].y, w[u].z, w[u].w};
            if (kcap_cmp_nonfinite<ET>(g[u], w[u])) {
#pragma unroll
                for (int k = 0; k < epv; k++)
                    kcap_cmp_one(p, kcap_cmp_lane<ET>(gw, k), kcap_cmp_lane<ET>(ww, k), ib + k, atol, rtol);
            } else {
#pragma unroll
                for (int k = 0; k < epv; k++)
                    kcap_cmp_one_finite(p, kcap_cmp_lane<ET>(gw, k), kcap_cmp_lane<ET>(ww, k), ib + k, atol, rtol);
            }
        }
    }
}

/* Thread `lt` of the `nth` threads given to tensor t: its elements. */
template <int VPT>
__device__ static void kcap_cmp_scan_tensor(const struct kcap_cmp_tensor *t, unsigned int lt, unsigned int nth,
                                            struct kcap_cmp_scan *p)
{
    const int es = t->dtype == 2 ? 4 : 2;
    const long long rb = t->row_elems * es;
    int vec = rb % 16 == 0 && ((t->prod | t->cand | (unsigned long long)t->s0 |
                                (unsigned long long)(t->n1 == 1 ? 0 : t->s1)) % 16) == 0 &&
              t->rows * (rb / 16) < 0x7fffffffll;
    if (vec) {
        if (t->dtype == 2)
            kcap_cmp_scan_vec<VPT, 2>(t, lt, nth, p);
        else if (t->dtype == 1)
            kcap_cmp_scan_vec<VPT, 1>(t, lt, nth, p);
        else
            kcap_cmp_scan_vec<VPT, 0>(t, lt, nth, p);
        return;
    }
    const float atol = (float)t->atol, rtol = (float)t->rtol;
    const long long n = t->rows * t->row_elems; /* odd strides or row sizes: one element a step */
    for (long long i = lt; i < n; i += nth) {
        long long r = i / t->row_elems, c = i - r * t->row_elems;
        const char *pg = (const char *)t->cand + kcap_cmp_row(t, r) + c * es;
        const char *pw = (const char *)t->prod + kcap_cmp_row(t, r) + c * es;
        float got = es == 4 ? *(const float *)pg : kcap_bits_to_float(*(const unsigned short *)pg, t->dtype);
        float want = es == 4 ? *(const float *)pw : kcap_bits_to_float(*(const unsigned short *)pw, t->dtype);
        kcap_cmp_one(p, got, want, kcap_cmp_elem(i), atol, rtol);
    }
}

/* The warp's 32 parts folded into every lane's (32-bit shuffles; `p` of an idle lane is the
 * neutral part). */
__device__ static void kcap_cmp_fold_warp(struct kcap_cmp_part *p)
{
    for (int o = 16; o; o >>= 1) {
        unsigned int nf = __shfl_xor_sync(0xffffffffu, p->nonfinite, o);
        unsigned int by = __shfl_xor_sync(0xffffffffu, p->beyond, o);
        unsigned int fi = __shfl_xor_sync(0xffffffffu, p->first, o);
        unsigned int wb = __shfl_xor_sync(0xffffffffu, p->worst_bits, o);
        unsigned int wi = __shfl_xor_sync(0xffffffffu, p->worst_i, o);
        unsigned int ab = __shfl_xor_sync(0xffffffffu, p->abs_bits, o);
        p->nonfinite += nf, p->beyond += by;
        p->first = min(p->first, fi);
        if (wb > p->worst_bits || (wb == p->worst_bits && wi > p->worst_i))
            p->worst_bits = wb, p->worst_i = wi;
        p->abs_bits = max(p->abs_bits, ab);
    }
}

/* The worst of a part in kcap_cmp_acc's packed form: ratio bits << 32 | element; 0 while no
 * difference is seen. */
__device__ static inline unsigned long long kcap_cmp_worst(const struct kcap_cmp_part *p)
{
    return p->worst_bits ? ((unsigned long long)p->worst_bits << 32) | p->worst_i : 0ull;
}

/* Timing probes of the publish (bench_shadow_kernels.cu, POL bits; libkcap's compare is POL
 * 0): FENCE the gate first, then one fence.acq_rel.sys before the words the drainer reads;
 * PREV the publish with fences: fence.sc.sys before those words, then the gate, with a
 * fence.sc.sys after an eager outcome and a GPU fence after the site (close to the earlier
 * publish, which also wrote two small words more before its fence). */
#define KCAP_CMP_POL_FENCE 1
#define KCAP_CMP_POL_PREV 2

/* One thread publishes the call's totals (acc[k], in kcap_cmp_acc's packed forms) to mapped
 * host memory and runs the gate (g.ring 0: none). No system fence: what the drainer acts on
 * (the verdict, the tally, the eager outcome) is one 8-byte store each, read in one load, and
 * it waits for the verdict of an outcome it sees (kcap_gpu_drain.c); the results are read
 * after the stream. The site the gate writes is read by the staging kernel, after this
 * launch's end. */
template <int POL>
__device__ static int kcap_cmp_publish_to(unsigned long long devp, unsigned long long outp, int nt, unsigned int gen,
                                          const struct kcap_stage_args &g, const struct kcap_cmp_acc *acc,
                                          unsigned long long compared, unsigned long long diverged)
{
    struct kcap_cmp_dev *dev = (struct kcap_cmp_dev *)devp;
    struct kcap_cmp_out *out = (struct kcap_cmp_out *)outp;
    int divergent = 0;
    for (int k = 0; k < nt; k++) {
        struct kcap_cmp_res *res = &out->t[k];
        unsigned long long w = acc[k].worst;
        res->nonfinite = acc[k].nonfinite;
        res->first_nonfinite = acc[k].first_nonfinite;
        res->beyond = acc[k].beyond;
        res->worst_elem = w ? (w & 0xffffffffull) : ~0ull;
        res->worst_ratio = (double)__uint_as_float((unsigned int)(w >> 32));
        res->max_abs = __longlong_as_double((long long)acc[k].max_abs);
        divergent |= acc[k].nonfinite != 0 || acc[k].beyond != 0;
    }
    dev->compared = ++compared;
    if (divergent)
        dev->diverged = ++diverged;
    int valid = 0, gate = g.ring != 0 && !(POL & KCAP_CMP_POL_PREV);
    if (gate)
        valid = kcap_gate_decide(g, divergent);
    if (POL & KCAP_CMP_POL_FENCE)
        asm volatile("fence.acq_rel.sys;" ::: "memory");
    if (POL & KCAP_CMP_POL_PREV)
        __threadfence_system();
    VOL(unsigned long long, out->tally) = KCAP_CMP_TALLY(compared, diverged);
    VOL(unsigned long long, out->verdict) = KCAP_CMP_VERDICT(gen, divergent);
    if (gate)
        kcap_gate_outcome(g, valid);
    if (g.ring && (POL & KCAP_CMP_POL_PREV)) {
        kcap_gate_outcome(g, kcap_gate_decide(g, divergent));
        if (g.outcome)
            __threadfence_system();
        __threadfence();
    }
    return valid;
}

template <int POL>
__device__ static void kcap_cmp_publish(const struct kcap_cmp_args &a, const struct kcap_stage_args &g,
                                        const struct kcap_cmp_acc *acc, unsigned long long compared,
                                        unsigned long long diverged)
{
    kcap_cmp_publish_to<POL>(a.dev, a.out, a.nt, a.gen, g, acc, compared, diverged);
}

/* This block's totals of each tensor, launched as kcap_shadow_cmp.h says (global warp w works
 * on tensor k where warp0[k] <= w < warp0[k+1]): warp k's lane 0 writes s_acc[k]; no barrier
 * follows, so that lane may go on to add them to the call's totals at once. */
template <int VPT>
__device__ static void kcap_cmp_block_totals(const struct kcap_cmp_args &a, struct kcap_cmp_acc *s_acc)
{
    __shared__ struct kcap_cmp_part s_warp[32];
    __shared__ int s_tensor[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
    const int gw = blockIdx.x * nwarps + warp;
    int k = -1;
    for (int j = 0; j < a.nt; j++)
        k = gw >= a.warp0[j] && gw < a.warp0[j + 1] ? j : k;
    struct kcap_cmp_scan sc = {{0, 0, KCAP_CMP_NONE, 0, 0, 0}, 0.f, 1.f};
    if (k >= 0)
        kcap_cmp_scan_tensor<VPT>(&a.t[k], (unsigned int)(gw - a.warp0[k]) * 32 + lane,
                                  (unsigned int)(a.warp0[k + 1] - a.warp0[k]) * 32, &sc);
    struct kcap_cmp_part p = sc.p; /* the worst fraction divided once */
    float ratio = sc.wb > 0.f ? sc.wd / sc.wb : (sc.wd > 0.f ? __int_as_float(0x7f800000) : 0.f);
    p.worst_bits = ratio > 0.f ? __float_as_uint(ratio) : 0u;
    kcap_cmp_fold_warp(&p);
    if (lane == 0)
        s_warp[warp] = p, s_tensor[warp] = k;
    __syncthreads();
    if (warp < a.nt) { /* warp j folds tensor j's warps of this block */
        struct kcap_cmp_part q = {0, 0, KCAP_CMP_NONE, 0, 0, 0};
        if (lane < nwarps && s_tensor[lane] == warp)
            q = s_warp[lane];
        kcap_cmp_fold_warp(&q);
        if (lane == 0) {
            struct kcap_cmp_acc *acc = &s_acc[warp];
            acc->nonfinite = q.nonfinite, acc->beyond = q.beyond;
            acc->first_nonfinite = q.first == KCAP_CMP_NONE ? ~0ull : q.first;
            acc->worst = kcap_cmp_worst(&q);
            acc->max_abs = (unsigned long long)__double_as_longlong((double)__uint_as_float(q.abs_bits));
        }
    }
}

/* acc added into the call's totals d (device memory), atomically. */
__device__ static inline void kcap_cmp_acc_atomic(struct kcap_cmp_acc *d, const struct kcap_cmp_acc *acc)
{
    if (acc->nonfinite)
        atomicAdd(&d->nonfinite, acc->nonfinite);
    if (acc->beyond)
        atomicAdd(&d->beyond, acc->beyond);
    if (acc->first_nonfinite != ~0ull)
        atomicMin(&d->first_nonfinite, acc->first_nonfinite);
    if (acc->worst)
        atomicMax(&d->worst, acc->worst);
    if (acc->max_abs)
        atomicMax(&d->max_abs, acc->max_abs);
}

/* The block count's atomic with acquire and release semantics at GPU scope: what this block
 * wrote before it (and, by the barrier before it, what the block's other threads wrote) is
 * visible to the block that counts after it; the last block sees every block's totals. One
 * instruction in place of fence, count, fence (0.3–0.6 µs less per multi-block call, H200);
 * a release count with the acquire as a fence in the last block only was 0.26–0.31 µs slower. */
__device__ static inline unsigned int kcap_cmp_count(unsigned int *c)
{
    unsigned int old;
    asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(old) : "l"(c) : "memory");
    return old;
}

__device__ static inline unsigned long long kcap_cmp_ld_relaxed_gpu(const unsigned long long *p)
{
    unsigned long long v;
    asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

/* The call's totals of nt tensors into acc (GPU-scope loads); whether any is divergent. */
__device__ static int kcap_cmp_read_totals(const struct kcap_cmp_dev *dev, int nt, struct kcap_cmp_acc *acc)
{
    int divergent = 0;
    for (int k = 0; k < nt && k < KCAP_CMP_MAX; k++) {
        const struct kcap_cmp_acc *d = &dev->t[k];
        acc[k].nonfinite = kcap_cmp_ld_relaxed_gpu(&d->nonfinite);
        acc[k].beyond = kcap_cmp_ld_relaxed_gpu(&d->beyond);
        acc[k].first_nonfinite = kcap_cmp_ld_relaxed_gpu(&d->first_nonfinite);
        acc[k].worst = kcap_cmp_ld_relaxed_gpu(&d->worst);
        acc[k].max_abs = kcap_cmp_ld_relaxed_gpu(&d->max_abs);
        divergent |= acc[k].nonfinite != 0 || acc[k].beyond != 0;
    }
    return divergent;
}

/* The totals of nt tensors back to their neutral values (first_nonfinite ~0, the rest 0). */
__device__ static void kcap_cmp_reset_totals(struct kcap_cmp_dev *dev, int nt)
{
    for (int k = 0; k < nt; k++) {
        struct kcap_cmp_acc *d = &dev->t[k];
        d->nonfinite = d->beyond = d->worst = d->max_abs = 0;
        d->first_nonfinite = ~0ull;
    }
}

/* The last block's thread 0: the call's totals (every block's, acquired by its count) read,
 * published, then reset for the next launch (which runs after this one's end), after the
 * publish so that the drainer's words are written first. */
template <int POL>
__device__ static void kcap_cmp_publish_totals(const struct kcap_cmp_args &a, const struct kcap_stage_args &g,
                                               unsigned long long compared, unsigned long long diverged)
{
    struct kcap_cmp_dev *dev = (struct kcap_cmp_dev *)a.dev;
    struct kcap_cmp_acc acc[KCAP_CMP_MAX];
    kcap_cmp_read_totals(dev, a.nt, acc);
    kcap_cmp_publish<POL>(a, g, acc, compared, diverged);
    kcap_cmp_reset_totals(dev, a.nt);
    dev->blocks_done = 0;
}

/* g: the call's staging arguments (phase 0); the publisher runs the gate with them, so an
 * agreeing call costs no gate node of its own (g.ring 0: no gate). */
template <int VPT, int POL>
__device__ static void kcap_cmp_run(const struct kcap_cmp_args &a, const struct kcap_stage_args &g)
{
    struct kcap_cmp_dev *dev = (struct kcap_cmp_dev *)a.dev;
    __shared__ struct kcap_cmp_acc s_acc[KCAP_CMP_MAX];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    /* the running totals, read now so that the publisher does not wait for them at the end
       (only the previous launch, which has ended, wrote them) */
    unsigned long long compared = 0, diverged = 0;
    if (threadIdx.x == 0 && !a.defer)
        compared = VOL(unsigned long long, dev->compared), diverged = VOL(unsigned long long, dev->diverged);
    kcap_cmp_block_totals<VPT>(a, s_acc);
    if (gridDim.x == 1) { /* the block's totals are the call's */
        __syncthreads();
        if (threadIdx.x == 0)
            kcap_cmp_publish<POL>(a, g, s_acc, compared, diverged);
        return;
    }
    if (warp < a.nt && lane == 0) /* into the call's totals */
        kcap_cmp_acc_atomic(&dev->t[warp], &s_acc[warp]);
    if (a.defer) /* the staging kernel after this launch's end joins the blocks (kcap_cmp_join) */
        return;
    __syncthreads(); /* every warp's totals are in before thread 0 counts the block */
    if (threadIdx.x == 0 && kcap_cmp_count(&dev->blocks_done) == gridDim.x - 1)
        kcap_cmp_publish_totals<POL>(a, g, compared, diverged);
}

extern "C" __global__ void __launch_bounds__(KCAP_CMP_THREADS)
    kcap_shadow_cmp(struct kcap_cmp_args a, struct kcap_stage_args g)
{
    kcap_cmp_run<KCAP_CMP_VPT, 0>(a, g);
}

/* A deferred compare's join (kcap_cmp_args.defer), by thread 0 of every block of the staging
 * kernel that follows it on the stream: the compare's blocks have all ended, so their totals
 * are complete without a block count (what the compare's own join costs: an acquire-release
 * count and the last block's reads, 1.6-1.9 µs at the golden multi-block shapes, H200). Every
 * block reads them and finds the same verdict. Agreeing (the usual case): block 0 publishes
 * as the compare would (kcap_cmp_publish_to, the gate with nothing wanted) and every block
 * leaves, with no atomic. Divergent: the block that draws ticket 0 publishes and runs the gate
 * (it places the region and writes the site), then sets `decided`; the others wait for it:
 * that block is running and waits for no other block of this grid, and the wait is bounded
 * anyway (KCAP_CMP_JOIN_WAIT_NS: a slot shared by concurrent replays). The
 * poison fill before the next candidate resets the totals, ticket and decided (the totals
 * are read by every block here, so no block of this grid may reset them). Returns whether
 * the call is divergent (then the block stages, reading the site the gate wrote). */
#define KCAP_CMP_JOIN_WAIT_NS 20000000ull /* 20 ms: the gate of one call takes microseconds */
__device__ static int kcap_cmp_join(const struct kcap_stage_args &in)
{
    struct kcap_cmp_dev *dev = (struct kcap_cmp_dev *)in.cmp_dev;
    struct kcap_cmp_acc acc[KCAP_CMP_MAX];
    unsigned long long compared = 0, diverged = 0;
    if (blockIdx.x == 0)
        compared = VOL(unsigned long long, dev->compared), diverged = VOL(unsigned long long, dev->diverged);
    if (!kcap_cmp_read_totals(dev, in.cmp_nt, acc)) {
        if (blockIdx.x == 0)
            kcap_cmp_publish_to<0>(in.cmp_dev, in.cmp_out, in.cmp_nt, in.cmp_gen, in, acc, compared, diverged);
        return 0;
    }
    if (atomicAdd(&dev->ticket, 1u) == 0u) {
        if (blockIdx.x != 0)
            compared = VOL(unsigned long long, dev->compared), diverged = VOL(unsigned long long, dev->diverged);
        kcap_cmp_publish_to<0>(in.cmp_dev, in.cmp_out, in.cmp_nt, in.cmp_gen, in, acc, compared, diverged);
        __threadfence(); /* the site before the flag */
        atomicExch(&dev->decided, 1u);
    } else {
        /* bounded, so that no stream can hang here: two executables of one captured graph
           replayed at once share the slot (kcap_shadow_cmp.h), and the other's poison fill may
           reset the flag after it was set; such a call's snapshot may then be wrong (README,
           Known limits), its stream goes on */
        unsigned long long t0, t;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
        do {
            if (VOL(unsigned int, dev->decided) != 0u)
                break;
            __nanosleep(64);
            asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
        } while (t - t0 < KCAP_CMP_JOIN_WAIT_NS);
        __threadfence(); /* the flag before the site */
    }
    return 1;
}

/* Shadow mode: both phases in one launch (inputs and outputs are all ready after the compare),
 * one node less per call, after a deferred compare its join too. The copies write disjoint
 * parts of the region; phase 1's tail counts blocks that finished both. */
extern "C" __global__ void kcap_stage_both(struct kcap_stage_args in, struct kcap_stage_args out)
{
    if (in.cmp_dev) {
        __shared__ int s_go;
        if (threadIdx.x == 0)
            s_go = kcap_cmp_join(in);
        __syncthreads();
        if (!s_go)
            return;
    }
    if (kcap_stage_run(in, 0)) {
        __syncthreads(); /* s_valid and friends are read again by phase 1 */
        kcap_stage_run(out, 1);
    }
}

/* Shadow mode: the candidate's outputs poisoned (0xFF bytes: NaN in bf16, fp16 and fp32)
 * before it runs, so a candidate that writes nothing is seen as NaN, never as agreement.
 * A kernel of ours rather than a memset, so that inside a CUDA graph the candidate's nodes
 * are exactly those between this node and the compare's (kcap_graphexec.c takes them all
 * out of a clean twin). cmp_dev (0: none): the site's compare totals, reset here for a
 * deferred compare (kcap_cmp_join), which leaves them to its staging kernel. */
extern "C" __global__ void kcap_shadow_poison(unsigned long long dst, unsigned long long bytes,
                                              unsigned long long cmp_dev)
{
    if (cmp_dev && blockIdx.x == 0 && threadIdx.x == 0) {
        struct kcap_cmp_dev *dev = (struct kcap_cmp_dev *)cmp_dev;
        kcap_cmp_reset_totals(dev, KCAP_CMP_MAX);
        dev->ticket = 0;
        dev->decided = 0;
    }
    unsigned char *d = (unsigned char *)dst;
    unsigned long long words = bytes / 16, stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < words; i += stride)
        ((uint4 *)d)[i] = make_uint4(~0u, ~0u, ~0u, ~0u);
    for (unsigned long long i = words * 16 + (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
         i < bytes; i += stride)
        d[i] = 0xFF;
}
