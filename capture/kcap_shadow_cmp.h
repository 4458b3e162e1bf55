/*
 * kcap_shadow_cmp.h — the interface of shadow mode's compare kernel (kcap_shadow_cmp.cuh):
 * the layouts of its arguments, its per-site device accumulators and its results in mapped
 * host memory, written once for the kernel (nvcc), libkcap's host code (cc) and the dev
 * harness (tests/capture/bench_shadow_kernels.cu); and its launch plan, how it spreads one
 * call's output tensors over warps and the block size and grid that follow, so the harness
 * times exactly the launches the library makes.
 *
 * Each tensor gets whole warps of its own (at least one), enough for its 16-byte loads at
 * `vpt` a thread, all issued before any is used: every thread then makes one round trip to
 * memory however many tensors the call has. A call whose outputs fit one block is judged by
 * that block, which publishes its result with no cross-block step. Beyond `max_warps` the
 * warps stride over their tensor.
 */
#ifndef KCAP_SHADOW_CMP_H
#define KCAP_SHADOW_CMP_H

#define KCAP_CMP_MAX 4       /* output tensors a compare judges */
#define KCAP_CMP_THREADS 1024 /* the compare's largest block */
#define KCAP_CMP_VPT 2       /* 16-byte loads in flight per thread, per pass */
#define KCAP_POISON_THREADS 256 /* the poison fill's block (kcap_shadow_poison) */

/* One output tensor, production's and the candidate's views of it. */
struct kcap_cmp_tensor {
    unsigned long long prod, cand; /* first element of each view */
    long long rows, row_elems;     /* rows of row_elems contiguous elements */
    long long n1, s0, s1;          /* row r at base + (r / n1) * s0 + (r % n1) * s1 (bytes) */
    int dtype;                     /* 0 bf16, 1 f16, 2 f32 */
    int pad;
    double atol, rtol;
};

struct kcap_cmp_acc {
    unsigned long long nonfinite, first_nonfinite, beyond;
    unsigned long long worst;   /* ratio's float bits << 32 | element (max wins) */
    unsigned long long max_abs; /* bits of a non-negative double (ordered as integers) */
};

struct kcap_cmp_dev { /* per site, device memory; zero except first_nonfinite = ~0 */
    struct kcap_cmp_acc t[KCAP_CMP_MAX];
    unsigned int blocks_done;
    /* a joined call that diverged: the staging block that takes ticket 0 publishes and runs
       the gate, then sets `decided`; the poison fill resets both (kcap_cmp_join) */
    unsigned int ticket;
    /* the running totals of kcap_cmp_out, kept here: the compare only writes host memory
       (a read of mapped memory is a PCIe round trip) */
    unsigned long long compared, diverged;
    unsigned int decided;
    int pad;
};

struct kcap_cmp_res {
    unsigned long long nonfinite, first_nonfinite, beyond, worst_elem;
    double max_abs, worst_ratio;
};

/* per site, mapped pinned host memory. What the drainer acts on is in single 8-byte stores,
   so the compare publishes it with no system fence (one cost 0.5 µs a call, H200): `verdict`
   and `tally` are each one store, and the results in t[] are for reading after the stream
   (tests, the dev harness); a kept divergence is judged again on the host. */
struct kcap_cmp_out {
    struct kcap_cmp_res t[KCAP_CMP_MAX];
    unsigned long long verdict; /* the call's gen << 32 | divergent (0 or 1) */
    /* running totals, for graph sites (whose replays the host does not see): calls compared
       << 32 | calls found divergent, each modulo 2^32 (kcap_cmp_tally_agreed); divergent calls
       the gate could not stage, with a system fence of their own (rare) */
    unsigned long long tally, lost;
};

#define KCAP_CMP_VERDICT(gen, divergent) ((unsigned long long)(gen) << 32 | (unsigned long long)(divergent))
#define KCAP_CMP_TALLY(compared, diverged) \
    ((unsigned long long)(compared) << 32 | ((unsigned long long)(diverged) & 0xffffffffull))

/* Calls judged in agreement, modulo 2^32, of a tally read in one load. */
static inline unsigned int kcap_cmp_tally_agreed(unsigned long long tally)
{
    return (unsigned int)(tally >> 32) - (unsigned int)tally;
}

/* How many agreed calls a tally adds to the `seen` already reported: the growth modulo 2^32
   (the drainer reads far more often than 2^31 replays), none when it went back (two
   executables of one captured graph replayed at once share a slot and may publish out of
   order: what one reported is not reported twice). */
static inline unsigned int kcap_cmp_tally_grown(unsigned long long tally, unsigned long long seen)
{
    int d = (int)(kcap_cmp_tally_agreed(tally) - (unsigned int)seen);
    return d > 0 ? (unsigned int)d : 0u;
}

struct kcap_cmp_args {
    unsigned long long dev, out;
    int nt;
    unsigned int gen;
    struct kcap_cmp_tensor t[KCAP_CMP_MAX];
    int warp0[KCAP_CMP_MAX + 1]; /* kcap_cmp_plan: tensor k's warps are [warp0[k], warp0[k+1]) */
    /* 1: a multi-block compare whose staging kernel joins it: the blocks only add their totals
       to dev, and kcap_stage_both (args cmp_*) reads them, publishes and runs the gate; the
       poison fill before the candidate resets them. 0: the compare joins its blocks itself */
    int defer;
};

/* bytes[k]: tensor k's bytes; vpt: loads a thread issues at once; max_threads: the block size
 * bound; max_warps ≥ nt. Out: tensor k owns global warps [warp0[k], warp0[k+1]), and the
 * launch's block size and grid. */
static inline void kcap_cmp_plan_fixed(int nt, const long long *bytes, int vpt, int max_threads,
                                       long long max_warps, int *warp0, unsigned *threads, unsigned *blocks)
{
    long long w[KCAP_CMP_MAX], total = 0;
    for (int k = 0; k < nt; k++) {
        long long per_warp = 32ll * 16 * vpt;
        w[k] = (bytes[k] + per_warp - 1) / per_warp;
        w[k] = w[k] < 1 ? 1 : w[k];
        total += w[k];
    }
    if (total > max_warps) { /* long outputs: fewer warps, each striding over its tensor */
        long long scaled = 0;
        for (int k = 0; k < nt; k++) {
            w[k] = w[k] * (max_warps - nt) / total;
            w[k] = w[k] < 1 ? 1 : w[k];
            scaled += w[k];
        }
        total = scaled;
    }
    warp0[0] = 0;
    for (int k = 0; k < nt; k++)
        warp0[k + 1] = warp0[k] + (int)w[k];
    long long per_block = max_threads / 32;
    *threads = total >= per_block ? (unsigned)max_threads : (unsigned)(32 * (total < 1 ? 1 : total));
    *blocks = (unsigned)((total + (*threads / 32) - 1) / (*threads / 32));
    if (*blocks < 1)
        *blocks = 1;
}

/* libkcap's choice, from bench_shadow_kernels' sweeps on the H200: outputs that one block of
 * KCAP_CMP_THREADS threads covers with KCAP_CMP_VPT loads each (32 KB) are judged by that
 * block alone (a cross-block step costs 1.7–2.0 µs). Larger ones by blocks of
 * KCAP_CMP_MULTI_THREADS threads of one load each while that grid fits one block per SM (up to
 * ~512 KB: more, smaller blocks were faster there); past it with two loads each, half the
 * blocks to count (the count is one atomic per block on one address, ~3.6 ns each: at 1 MB,
 * 129 blocks took 5.02 µs with the gate where 257 took 5.29); and past that (outputs of many
 * MB, grids at max_blocks) blocks of twice the threads (32 MB: 26.5 µs against 30.1). */
#define KCAP_CMP_MULTI_THREADS 256
static inline void kcap_cmp_plan(int nt, const long long *bytes, long long max_blocks, long long sms, int *warp0,
                                 unsigned *threads, unsigned *blocks)
{
    kcap_cmp_plan_fixed(nt, bytes, KCAP_CMP_VPT, KCAP_CMP_THREADS, KCAP_CMP_THREADS / 32, warp0, threads, blocks);
    int fits = 1;
    for (int k = 0; k < nt; k++)
        fits &= bytes[k] <= (long long)(warp0[k + 1] - warp0[k]) * 32 * 16 * KCAP_CMP_VPT;
    if (fits)
        return;
    static const int vpt[3] = {1, KCAP_CMP_VPT, KCAP_CMP_VPT};
    static const int nth[3] = {KCAP_CMP_MULTI_THREADS, KCAP_CMP_MULTI_THREADS, 2 * KCAP_CMP_MULTI_THREADS};
    for (int i = 0; i < 3; i++) { /* the first that fits one block per SM, else the last */
        kcap_cmp_plan_fixed(nt, bytes, vpt[i], nth[i], max_blocks * (nth[i] / 32), warp0, threads, blocks);
        if ((long long)*blocks <= sms)
            return;
    }
}

/* Tensor t's bytes (dtype 2: fp32, else 2-byte elements). */
static inline long long kcap_cmp_tensor_bytes(const struct kcap_cmp_tensor *t)
{
    return t->rows * t->row_elems * (t->dtype == 2 ? 4 : 2);
}

/* kcap_cmp_plan for the tensors of `a`, into a->warp0. */
static inline void kcap_cmp_plan_args(struct kcap_cmp_args *a, long long max_blocks, long long sms,
                                      unsigned *threads, unsigned *blocks)
{
    long long bytes[KCAP_CMP_MAX];
    for (int k = 0; k < a->nt; k++)
        bytes[k] = kcap_cmp_tensor_bytes(&a->t[k]);
    kcap_cmp_plan(a->nt, bytes, max_blocks, sms, a->warp0, threads, blocks);
}

#endif
