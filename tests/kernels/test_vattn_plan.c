/*
 * test_vattn_plan.c — the fast kernels' launch policy (kernels/vattn_plan.h) on the CPU: which
 * kernel, grid, prefetch depth and workspace each call gets, for the H200 (132 SMs) and the
 * sm_120 target (188 SMs), without a GPU.
 *
 * Claims checked:
 *   1  the plans of the benchmark's serving and long-context rows on 132 SMs are the ones
 *      docs/PERF.md measured (v3 / v8 / v7 per shape class, one wave each, the deep prefetch on
 *      the four multi-chunk long configs and the two 64-tile ones);
 *   2  with the multi-wave search off (VATTN_DEV_WAVES=0; the production policy is the one of
 *      VATTN_PLAN_MULTIWAVE, 1 since the seventeenth session) the one-wave split count everywhere; on: where one wave
 *      leaves SMs idle and 2-4 waves model >= 10 % faster, the grid takes them (shapes of
 *      80-160 row blocks on 132 SMs; (4,64,16,32768) and (16,128,4,8192) on 188), splits of 2
 *      tiles instead of 1 at (2,16,4,1000) (half the partials), and the bench's other rows
 *      keep their measured plans;
 *   3  invariants over 20,000 random sizes (bs to 65535, hints to INT64_MAX) and seven SM counts
 *      (-5 to 1024), the candidate off and on: every split non-empty and at most 1024, the
 *      workspace exactly the partials' bytes, at most 4 waves unless one wave already needs
 *      more, a plan other than one wave's only with a modelled gain of 10 %, the kernel chosen
 *      from the one-wave 32-row plan, deep only for v7 with several row chunks and >= 64 tiles
 *      per split, never a modelled cost above the one-wave plan's, the production plan (no
 *      overrides) the one of VATTN_PLAN_MULTIWAVE;
 *   4  the dev build's forced variant, split count and depth are honoured; an absent hint sizes
 *      the grid for 1024 tiles, a hint below q_len gives one tile, an SM count below 1 is taken
 *      as 1, and hints beyond INT32_MAX (no kv_len can exceed it) plan as INT32_MAX (they
 *      overflowed the split length before, and crashed vattn_workspace_size from 2^37).
 */
#include "../testkit.h"
#include "vattn_plan.h"

typedef struct plan_case {
    int bs, H, q, prefix, sms;
    int variant, nsplit, tps, waves, deep;
    int multiwave; /* the plan with the multi-wave candidate 0: off, 1: on, 2: either way */
} plan_case;

/* max_kv_len = prefix + q (as the benchmark passes it) */
#define BOTH .multiwave = 2
#define ON .multiwave = 1
#define OFF .multiwave = 0
static const plan_case cases[] = {
    /* claim 1: the bench's rows on the H200 (with or without the candidate) */
    {1, 8, 2, 512, 132, 3, 17, 1, 1, 0, BOTH},
    {1, 16, 4, 1024, 132, 3, 33, 1, 1, 0, BOTH},
    {2, 16, 4, 1000, 132, 3, 32, 1, 1, 0, OFF},
    {2, 16, 4, 1000, 132, 3, 16, 2, 1, 0, ON}, /* 2 tiles per split: half the partials */
    {1, 16, 16, 4096, 132, 8, 15, 9, 1, 0, BOTH},
    {4, 16, 8, 2048, 132, 8, 8, 9, 1, 0, BOTH},
    {16, 16, 4, 1024, 132, 8, 4, 9, 1, 0, BOTH},
    {1, 128, 4, 4096, 132, 8, 8, 17, 1, 0, BOTH},
    {8, 8, 4, 8192, 132, 8, 16, 17, 1, 0, BOTH},
    {1, 16, 16, 32768, 132, 7, 33, 32, 1, 0, BOTH},
    {1, 16, 16, 185000, 132, 7, 33, 176, 1, 1, BOTH},
    {1, 16, 4, 185000, 132, 7, 132, 44, 1, 0, BOTH},
    {8, 16, 4, 32768, 132, 7, 16, 65, 1, 0, BOTH},
    {4, 16, 16, 32768, 132, 7, 8, 129, 1, 1, BOTH},
    {4, 64, 16, 32768, 132, 7, 2, 513, 1, 1, BOTH},
    {16, 128, 4, 8192, 132, 7, 1, 257, 1, 1, BOTH},
    {32, 16, 8, 4096, 132, 7, 2, 65, 1, 1, BOTH},
    {64, 16, 16, 2048, 132, 7, 1, 65, 2, 1, BOTH},
    /* claim 2: the candidate takes several waves where one leaves SMs idle (off: one wave) */
    {10, 128, 4, 8192, 132, 7, 1, 257, 1, 1, OFF},
    {24, 16, 8, 8192, 132, 7, 2, 129, 1, 1, OFF},
    {3, 64, 16, 16384, 132, 7, 2, 257, 1, 1, OFF},
    {5, 128, 16, 4096, 132, 7, 1, 129, 2, 1, OFF},
    {4, 64, 16, 32768, 188, 7, 2, 513, 1, 1, OFF},
    {16, 128, 4, 8192, 188, 7, 1, 257, 1, 1, OFF},
    {10, 128, 4, 8192, 132, 7, 3, 86, 2, 1, ON},
    {24, 16, 8, 8192, 132, 7, 5, 52, 2, 0, ON},
    {3, 64, 16, 16384, 132, 7, 8, 65, 3, 1, ON},
    {5, 128, 16, 4096, 132, 7, 3, 43, 4, 0, ON},
    {4, 16, 2, 1024, 132, 3, 33, 1, 1, 0, OFF},
    {4, 16, 2, 1024, 132, 3, 17, 2, 1, 0, ON},
    {3, 128, 16, 4096, 132, 7, 1, 129, 1, 1, BOTH}, /* 3 waves model only 2 % faster: one wave kept */
    /* the sm_120 table of docs/PERF.md (188 SMs) */
    {1, 8, 2, 512, 188, 3, 17, 1, 1, 0, BOTH},
    {1, 16, 4, 1024, 188, 3, 33, 1, 1, 0, BOTH},
    {2, 16, 4, 1000, 188, 3, 32, 1, 1, 0, OFF},
    {2, 16, 4, 1000, 188, 3, 16, 2, 1, 0, ON}, /* 2 tiles per split: half the partials */
    {1, 16, 16, 4096, 188, 8, 22, 6, 1, 0, BOTH},
    {4, 16, 8, 2048, 188, 8, 11, 6, 1, 0, BOTH},
    {16, 16, 4, 1024, 188, 8, 5, 7, 1, 0, BOTH},
    {1, 128, 4, 4096, 188, 8, 11, 12, 1, 0, BOTH},
    {8, 8, 4, 8192, 188, 8, 22, 12, 1, 0, BOTH},
    {1, 16, 16, 32768, 188, 7, 47, 22, 1, 0, BOTH},
    {1, 16, 16, 185000, 188, 7, 47, 124, 1, 1, BOTH},
    {1, 16, 4, 185000, 188, 7, 187, 31, 1, 0, BOTH},
    {8, 16, 4, 32768, 188, 7, 23, 45, 1, 0, BOTH},
    {4, 16, 16, 32768, 188, 7, 11, 94, 1, 1, BOTH},
    {4, 64, 16, 32768, 188, 7, 8, 129, 3, 1, ON},
    {16, 128, 4, 8192, 188, 7, 4, 65, 3, 1, ON},
    {32, 16, 8, 4096, 188, 7, 2, 65, 1, 1, BOTH},
    {64, 16, 16, 2048, 188, 7, 1, 65, 2, 1, BOTH},
};

static vattn_sizes sizes(int bs, int H, int q, int64_t max_kv_len)
{
    vattn_sizes a = {bs, q, H, 1 << 20, max_kv_len};
    return a;
}

static int64_t tiles_of(const vattn_sizes *a)
{
    int64_t maxkv = a->max_kv_len > 0 ? a->max_kv_len : (int64_t)VATTN_PLAN_MAX_SPLITS * VATTN_PLAN_BN;
    if (maxkv < a->q_len)
        maxkv = a->q_len;
    if (maxkv > INT32_MAX) /* no request holds more keys (kv_indptr is int32) */
        maxkv = INT32_MAX;
    return (maxkv + VATTN_PLAN_BN - 1) / VATTN_PLAN_BN;
}

/* the candidate forced off / on; the production library's plan (no overrides) is the one of
 * VATTN_PLAN_MULTIWAVE (1 in this tree) */
static const vattn_plan_force k_off = {0, 0, -1, 0}, k_on = {0, 0, -1, 1};

/* Claim 3 for one plan of sizes a on sms SMs. */
static void check_invariants(const vattn_sizes *a, int sms, const vattn_plan_force *f)
{
    const vattn_fast_plan pl = vattn_plan_for(a, sms, f);
    const int64_t tiles = tiles_of(a), M = (int64_t)a->q_len * a->H;
    const int bm = pl.variant == 7 ? VATTN_PLAN_ROWS7 : VATTN_PLAN_ROWS3;
    const int s = sms < 1 ? 1 : sms;
    const int ok_variant = pl.variant == 3 || pl.variant == 7 || pl.variant == 8;
    TK_CHECK(ok_variant, "bs %d H %d q %d kv %lld sms %d: variant %d", a->bs, a->H, a->q_len,
             (long long)a->max_kv_len, sms, pl.variant);
    if (!ok_variant)
        return;
    TK_CHECK(pl.mchunks == (M + bm - 1) / bm && pl.mpad == pl.mchunks * bm, "mchunks %d mpad %d for M %lld",
             pl.mchunks, pl.mpad, (long long)M);
    TK_CHECK(pl.nsplit >= 1 && pl.nsplit <= VATTN_PLAN_MAX_SPLITS && pl.nsplit <= tiles, "nsplit %d of %lld tiles",
             pl.nsplit, (long long)tiles);
    TK_CHECK((int64_t)pl.nsplit * pl.tiles_per_split >= tiles && (int64_t)(pl.nsplit - 1) * pl.tiles_per_split < tiles,
             "%d splits x %d tiles do not partition %lld tiles (or one is empty)", pl.nsplit, pl.tiles_per_split,
             (long long)tiles);
    const int64_t blocks = (int64_t)a->bs * pl.mchunks;
    TK_CHECK(pl.waves == (blocks * pl.nsplit + s - 1) / s, "waves %d", pl.waves);
    const vattn_fast_plan one = vattn_plan_grid(a, sms, pl.variant, 0, 0);
    TK_CHECK(pl.waves <= VATTN_PLAN_MAX_WAVES || pl.nsplit == one.nsplit,
             "bs %d H %d q %d kv %lld sms %d: %d waves beyond the one-wave plan's %d splits", a->bs, a->H, a->q_len,
             (long long)a->max_kv_len, sms, pl.waves, one.nsplit);
    TK_CHECK(pl.nsplit == one.nsplit || vattn_plan_cost(&pl, a->bs, s) < 0.9 * vattn_plan_cost(&one, a->bs, s),
             "bs %d H %d q %d kv %lld sms %d: %d splits instead of one wave's %d without a 10 %% modelled gain", a->bs,
             a->H, a->q_len, (long long)a->max_kv_len, sms, pl.nsplit, one.nsplit);
    if (f->waves == 0)
        TK_CHECK(pl.nsplit == one.nsplit, "plan of %d splits with the candidate off, one wave %d", pl.nsplit,
                 one.nsplit);
    const vattn_fast_plan dflt = vattn_plan_for(a, sms, NULL);
    if (f->waves == VATTN_PLAN_MULTIWAVE)
        TK_CHECK(dflt.nsplit == pl.nsplit && dflt.variant == pl.variant && dflt.deep == pl.deep,
                 "the production plan (%d splits) is not the one of VATTN_PLAN_MULTIWAVE = %d (%d)", dflt.nsplit,
                 VATTN_PLAN_MULTIWAVE, pl.nsplit);
    TK_CHECK(vattn_plan_cost(&pl, a->bs, s) <= vattn_plan_cost(&one, a->bs, s), "modelled cost above one wave's");
    const size_t ws = pl.nsplit == 1 ? 0 : (size_t)a->bs * pl.nsplit * pl.mpad * (VATTN_PLAN_DV * 4 + 8);
    TK_CHECK(pl.ws_bytes == ws, "workspace %zu, partials %zu", pl.ws_bytes, ws);
    TK_CHECK(pl.deep == (pl.variant == 7 && pl.mchunks > 1 && pl.tiles_per_split >= VATTN_PLAN_DEEP_MIN_TPS),
             "deep %d for v%d, %d chunks, %d tiles per split", pl.deep, pl.variant, pl.mchunks, pl.tiles_per_split);
    /* the kernel from the one-wave 32-row plan */
    const vattn_fast_plan p3 = vattn_plan_grid(a, sms, 3, 0, 0);
    const int want = p3.tiles_per_split <= 3 ? 3 : (M <= 32 || p3.tiles_per_split <= 17) ? 8 : 7;
    TK_CHECK(pl.variant == want, "variant %d, rule %d (32-row plan: %d tiles per split)", pl.variant, want,
             p3.tiles_per_split);
}

int main(void)
{
    int nbad = 0;
    const int ncases = (int)(sizeof cases / sizeof cases[0]);
    int nplans = 0;
    for (int i = 0; i < ncases; i++) {
        const plan_case *c = &cases[i];
        const vattn_sizes a = sizes(c->bs, c->H, c->q, (int64_t)c->prefix + c->q);
        for (int mw = 0; mw < 2; mw++) {
            if (c->multiwave != 2 && c->multiwave != mw)
                continue;
            const vattn_plan_force *f = mw ? &k_on : &k_off;
            const vattn_fast_plan pl = vattn_plan_for(&a, c->sms, f);
            const int ok = tk_count(pl.variant == c->variant && pl.nsplit == c->nsplit &&
                                    pl.tiles_per_split == c->tps && pl.waves == c->waves && pl.deep == c->deep);
            nbad += !ok;
            nplans++;
            printf("%s %-10s (%d,%d,%d,%d) on %d SMs: v%d %d x %d tiles, %d chunks, %d waves, deep %d, ws %.1f MB",
                   ok ? "PASS" : "FAIL", mw ? "waves on" : "waves off", c->bs, c->H, c->q, c->prefix, c->sms,
                   pl.variant, pl.nsplit, pl.tiles_per_split, pl.mchunks, pl.waves, pl.deep, pl.ws_bytes * 1e-6);
            if (!ok)
                printf(" (expected v%d %d x %d, %d waves, deep %d)", c->variant, c->nsplit, c->tps, c->waves,
                       c->deep);
            printf("\n");
            check_invariants(&a, c->sms, f);
        }
    }

    /* claim 3: random sizes */
    tk_rng r = tk_seed(0x5eed0f9a7ull);
    static const int sms_set[] = {1, 7, 132, 188, 1024, 0, -5};
    for (int i = 0; i < 20000; i++) {
        const int hint = tk_int(&r, 10);
        const int64_t kv = hint == 0   ? 0
                           : hint < 4  ? tk_range(&r, 1, 4096)
                           : hint < 8  ? tk_range(&r, 1, 300000)
                           : hint == 8 ? tk_range(&r, 1, (int64_t)1 << 40)
                                       : INT64_MAX - tk_range(&r, 0, 1000);
        const vattn_sizes a = sizes(tk_int(&r, 10) ? 1 + tk_int(&r, 96) : 1 + tk_int(&r, 65535), 1 + tk_int(&r, 128),
                                    1 + tk_int(&r, 64), kv);
        check_invariants(&a, sms_set[i % 7], i % 2 ? &k_on : &k_off);
    }

    /* claim 4: forced knobs, edge sizes */
    const vattn_sizes a = sizes(4, 16, 4, 32768 + 4);
    vattn_plan_force f = {8, 0, -1, -1};
    TK_CHECK(vattn_plan_for(&a, 132, &f).variant == 8, "forced v8");
    f.variant = 7, f.nsplit = 7;
    vattn_fast_plan pl = vattn_plan_for(&a, 132, &f);
    TK_CHECK(pl.variant == 7 && pl.nsplit == 7 && pl.tiles_per_split == 147, "forced 7 splits: %d x %d", pl.nsplit,
             pl.tiles_per_split);
    f.nsplit = 0, f.deep = 1;
    TK_CHECK(vattn_plan_for(&a, 132, &f).deep == 1, "forced deep on v7");
    f.variant = 3;
    TK_CHECK(vattn_plan_for(&a, 132, &f).deep == 0, "deep forced on v3 stays off");
    const vattn_sizes multi = sizes(4, 16, 16, 32768 + 16); /* 4 row chunks, 129 tiles per split: deep */
    f.variant = 0, f.deep = 0;
    TK_CHECK(vattn_plan_for(&multi, 132, NULL).deep == 1 && vattn_plan_for(&multi, 132, &f).deep == 0,
             "deep by rule, forced off");
    /* no hint: the grid is sized for 1024 tiles (32768 keys) */
    const vattn_sizes nohint = sizes(1, 16, 16, 0), below = sizes(1, 16, 16, 3);
    f.deep = -1, f.nsplit = 1;
    pl = vattn_plan_for(&nohint, 132, &f);
    TK_CHECK(pl.nsplit == 1 && pl.tiles_per_split == VATTN_PLAN_MAX_SPLITS, "no hint, one split: %d tiles",
             pl.tiles_per_split);
    pl = vattn_plan_for(&nohint, 4096, NULL);
    TK_CHECK(pl.nsplit * pl.tiles_per_split == VATTN_PLAN_MAX_SPLITS, "no hint on 4096 SMs: %d x %d", pl.nsplit,
             pl.tiles_per_split);
    pl = vattn_plan_for(&below, 132, NULL);
    TK_CHECK(pl.nsplit == 1 && pl.tiles_per_split == 1 && pl.ws_bytes == 0, "hint below q_len: one tile, no split");
    /* an SM count below 1 is taken as 1 */
    const vattn_fast_plan one_sm = vattn_plan_for(&a, 1, NULL);
    for (int sms = -3; sms <= 0; sms++) {
        pl = vattn_plan_for(&a, sms, NULL);
        TK_CHECK(pl.variant == one_sm.variant && pl.nsplit == one_sm.nsplit && pl.waves == one_sm.waves,
                 "%d SMs: v%d %d splits %d waves, 1 SM: v%d %d %d", sms, pl.variant, pl.nsplit, pl.waves,
                 one_sm.variant, one_sm.nsplit, one_sm.waves);
    }
    /* hints beyond any int32 kv_len: the plan of the largest one (these overflowed
     * tiles_per_split before, and from 2^37 divided by zero in vattn_workspace_size) */
    const vattn_sizes cap = sizes(1, 16, 4, INT32_MAX);
    const vattn_fast_plan pcap = vattn_plan_for(&cap, 132, NULL);
    static const int64_t huge[] = {(int64_t)INT32_MAX + 1, (int64_t)1 << 36, (int64_t)3 << 35, (int64_t)1 << 37,
                                   INT64_MAX - 31, INT64_MAX};
    for (size_t k = 0; k < sizeof huge / sizeof huge[0]; k++) {
        const vattn_sizes h = sizes(1, 16, 4, huge[k]);
        pl = vattn_plan_for(&h, 132, NULL);
        TK_CHECK(pl.nsplit == pcap.nsplit && pl.tiles_per_split == pcap.tiles_per_split && pl.tiles_per_split > 0 &&
                     pl.ws_bytes == pcap.ws_bytes,
                 "hint %lld: %d x %d, ws %zu (hint 2^31-1: %d x %d)", (long long)huge[k], pl.nsplit,
                 pl.tiles_per_split, pl.ws_bytes, pcap.nsplit, pcap.tiles_per_split);
    }
    printf("%d of %d plans as expected\n", nplans - nbad, nplans);
    return tk_summary("test_vattn_plan");
}
