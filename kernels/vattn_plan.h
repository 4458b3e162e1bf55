/*
 * vattn_plan.h — the fast kernels' launch plan: which kernel (v3, v7, v8), the grid (row chunks
 * x KV splits x requests), v7's prefetch depth and the workspace, from the call's sizes and the
 * GPU's SM count alone. Pure host arithmetic in C (no CUDA, no environment), so the CPU suite
 * checks the policy on any machine (tests/kernels/test_vattn_plan.c) and verify_attn.cu launches
 * exactly what it says; the dev build's knobs come in through vattn_plan_force.
 *
 * The policy, each rule measured on the H200 (docs/PERF.md, issue 16):
 *  - splits fill one wave: one block per SM (the fast kernels hold the whole register file),
 *    so floor(SMs / blocks) splits, 1 once the row blocks fill the GPU;
 *  - multi-wave (VATTN_PLAN_MULTIWAVE, on since the seventeenth session measured it: -10 to
 *    -28 % on the six rows it re-plans, H100, docs/PERF.md; the dev build's VATTN_DEV_WAVES=0
 *    turns it off): a grid of 1-4 waves, splits filling them or one split
 *    length longer or twice as long, where it models at least 10 % faster (wave quantisation:
 *    128 row blocks leave 60 of sm_120's 188 SMs idle for the whole call; fewer partial bytes
 *    where splits of one tile write more partials than they save); the model is the one that
 *    fitted the split sweeps: ~2.3 us per 32-key tile of a block, ~5 us of prologue and
 *    epilogue per wave, the combine ~2 us plus ~1 us per MB of partials;
 *  - the kernel from the one-wave 32-row plan's tiles per split (the thresholds were measured
 *    on one-wave plans): v3 up to 3, v8 beyond at <= 32 rows per request and up to 17 above,
 *    v7 otherwise;
 *  - v7's deep L2 prefetch where several row chunks read each KV tile and splits are long.
 */
#ifndef VATTN_PLAN_H
#define VATTN_PLAN_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

enum {
    VATTN_PLAN_BN = 32,           /* keys per KV tile (the kernels' BN) */
    VATTN_PLAN_ROWS3 = 32,        /* rows per block of v3 and v8 (BM) */
    VATTN_PLAN_ROWS7 = 64,        /* rows per block of v7 (BM7) */
    VATTN_PLAN_MAX_SPLITS = 1024, /* the combine's limit (COMBINE_MAX_SPLITS) */
    VATTN_PLAN_DV = 512,          /* output columns: a partial row is DV floats + (m, l) */
    VATTN_PLAN_V3_MAX_TPS = 3,    /* v3 up to this many tiles per split */
    VATTN_PLAN_V8_MAX_TPS = 17,   /* v8 up to this many above 32 rows per request */
    VATTN_PLAN_DEEP_MIN_TPS = 64, /* v7's deep prefetch from this many tiles per split */
    VATTN_PLAN_MAX_WAVES = 4
};

/* The sizes that decide the plan, read alike from either convention's struct: the same
 * sizes give the same grid, split partition and workspace, hence the same bits. */
typedef struct vattn_sizes {
    int bs, q_len, H;
    int64_t num_slots, max_kv_len;
} vattn_sizes;

typedef struct vattn_fast_plan {
    int variant; /* 3 = vattn_fast_kernel (32 rows), 7 = vattn_fast7_kernel (64 rows), 8 = the same
                  * with its two groups on alternate KV tiles of 32 rows (key split) */
    int mchunks, nsplit, tiles_per_split, mpad;
    int waves; /* ceil(blocks / SMs) at one block per SM */
    int deep;  /* v7 only: vattn_fast7_kernel<FP16, 0, 1>, the L2 prefetch of tile j+3 (not j+2) */
    size_t ws_bytes;
} vattn_fast_plan;

/* The multi-wave plan (above); 0 gives the one-wave policy of the sixteenth session. */
#ifndef VATTN_PLAN_MULTIWAVE
#define VATTN_PLAN_MULTIWAVE 1
#endif

/* Dev-build overrides (the production library passes none in effect): variant 3 / 7 / 8 forces a
 * kernel, nsplit > 0 a split count, deep 0 / 1 (any value > 0: on) v7's prefetch depth and
 * waves 0 / 1 the multi-wave search (< 0: the default for either). */
typedef struct vattn_plan_force {
    int variant, nsplit, deep, waves;
} vattn_plan_force;

static inline int64_t vattn_plan_cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* ns splits of `tiles` tiles (clamped to [1, min(tiles, MAX_SPLITS)]): every split non-empty. */
static inline void vattn_plan_split(vattn_fast_plan *pl, int64_t tiles, int64_t ns)
{
    if (ns > tiles)
        ns = tiles;
    if (ns > VATTN_PLAN_MAX_SPLITS)
        ns = VATTN_PLAN_MAX_SPLITS;
    if (ns < 1)
        ns = 1;
    pl->tiles_per_split = (int)vattn_plan_cdiv(tiles, ns);
    pl->nsplit = (int)vattn_plan_cdiv(tiles, pl->tiles_per_split);
    if (pl->nsplit < 1)
        pl->nsplit = 1;
}

/* Modelled microseconds of a grid (H200 constants, the policy above): waves x (tiles of a
 * block + its fixed time), plus the combine and the partials' bytes when there are splits. */
static inline double vattn_plan_cost(const vattn_fast_plan *pl, int bs, int sms)
{
    const int64_t waves = vattn_plan_cdiv((int64_t)bs * pl->mchunks * pl->nsplit, sms);
    double us = (double)waves * (pl->tiles_per_split * 2.3 + 5.0);
    if (pl->nsplit > 1)
        us += 2.0 + (double)bs * pl->nsplit * pl->mpad * (VATTN_PLAN_DV * 4 + 8) * 1e-6;
    return us;
}

/* The grid of one kernel variant. multiwave = 0: the one-wave split count (the plan the
 * kernel thresholds were measured on); a forced split count disables the wave search. */
static inline vattn_fast_plan vattn_plan_grid(const vattn_sizes *a, int sms, int variant, int force_nsplit,
                                              int multiwave)
{
    vattn_fast_plan pl;
    memset(&pl, 0, sizeof pl);
    const int64_t M = (int64_t)a->q_len * a->H;
    const int bm = variant == 7 ? VATTN_PLAN_ROWS7 : VATTN_PLAN_ROWS3;
    if (sms < 1)
        sms = 1;
    pl.variant = variant;
    pl.mchunks = (int)vattn_plan_cdiv(M, bm);
    pl.mpad = pl.mchunks * bm;
    /* The hint caps the split count (no point splitting 100 keys 30 ways); without one the
     * grid is sized for the GPU alone. Never num_slots: a replay that remaps the pool must get
     * the same partition, hence the same bits. */
    int64_t maxkv = a->max_kv_len > 0 ? a->max_kv_len : (int64_t)VATTN_PLAN_MAX_SPLITS * VATTN_PLAN_BN;
    if (maxkv < a->q_len)
        maxkv = a->q_len;
    /* kv_indptr is int32, so no request holds more keys; a larger hint (up to INT64_MAX) once
     * overflowed tiles_per_split and divided by zero in vattn_workspace_size */
    if (maxkv > INT32_MAX)
        maxkv = INT32_MAX;
    const int64_t tiles = vattn_plan_cdiv(maxkv, VATTN_PLAN_BN);
    const int64_t blocks = (int64_t)a->bs * pl.mchunks;
    vattn_plan_split(&pl, tiles, force_nsplit > 0 ? force_nsplit : blocks >= sms ? 1 : sms / blocks);
    if (multiwave && force_nsplit <= 0) {
        const double one_wave = vattn_plan_cost(&pl, a->bs, sms);
        double best = one_wave;
        vattn_fast_plan chosen = pl;
        /* per wave count w: the splits that fill w waves, and the same with one tile more or
         * twice the tiles per split (fewer partials: the one-wave rows of 1 tile per split
         * and 128 blocks, e.g. (2,16,4,1000), modelled 11 % faster at 2 tiles) */
        for (int w = 1; w <= VATTN_PLAN_MAX_WAVES; w++) {
            vattn_fast_plan c = pl;
            vattn_plan_split(&c, tiles, (int64_t)w * sms / blocks);
            const int tps = c.tiles_per_split;
            for (int k = 0; k < 3; k++) {
                if (k > 0)
                    vattn_plan_split(&c, tiles, vattn_plan_cdiv(tiles, k == 1 ? tps + 1 : 2 * (int64_t)tps));
                if (vattn_plan_cdiv(blocks * c.nsplit, sms) > VATTN_PLAN_MAX_WAVES)
                    continue;
                const double us = vattn_plan_cost(&c, a->bs, sms);
                if (us < 0.9 * one_wave && us < best) {
                    best = us;
                    chosen = c;
                }
            }
        }
        pl = chosen;
    }
    pl.waves = (int)vattn_plan_cdiv(blocks * pl.nsplit, sms);
    pl.deep = variant == 7 && pl.mchunks > 1 && pl.tiles_per_split >= VATTN_PLAN_DEEP_MIN_TPS;
    pl.ws_bytes = pl.nsplit == 1 ? 0
                                 : (size_t)a->bs * pl.nsplit * pl.mpad * (VATTN_PLAN_DV * sizeof(float) + 2 * sizeof(float));
    return pl;
}

/* The plan of a call: the kernel per shape class, then its grid. */
static inline vattn_fast_plan vattn_plan_for(const vattn_sizes *a, int sms, const vattn_plan_force *f)
{
    const int fv = f ? f->variant : 0, fns = f ? f->nsplit : 0;
    const int mw = f && f->waves >= 0 ? f->waves : VATTN_PLAN_MULTIWAVE;
    vattn_fast_plan pl;
    if (fv == 3 || fv == 7 || fv == 8) {
        pl = vattn_plan_grid(a, sms, fv, fns, mw);
    } else {
        const vattn_fast_plan p3 = vattn_plan_grid(a, sms, 3, fns, 0);
        const int v = p3.tiles_per_split <= VATTN_PLAN_V3_MAX_TPS ? 3
                      : (int64_t)a->q_len * a->H <= VATTN_PLAN_ROWS3 || p3.tiles_per_split <= VATTN_PLAN_V8_MAX_TPS
                          ? 8
                          : 7;
        /* v3 and v8 share the 32-row grid: without the multi-wave search it is p3's */
        if (v == 7 || mw)
            pl = vattn_plan_grid(a, sms, v, fns, mw);
        else {
            pl = p3;
            pl.variant = v;
        }
    }
    if (f && f->deep >= 0)
        pl.deep = f->deep && pl.variant == 7;
    return pl;
}

#endif /* VATTN_PLAN_H */
