/*
 * test_capture_cmp_plan.c — shadow mode's compare launch plan (capture/kcap_shadow_cmp.h), on
 * the host: for a table of output sets (serving and golden shapes, odd sizes, many tensors,
 * outputs far beyond one wave), the plan's grid is walked exactly as kcap_shadow_cmp walks it
 * (global warp -> tensor by warp0, then each thread's VPT-strided passes) and every 16-byte
 * vector of every tensor must be visited exactly once; the grid stays within its bounds; a
 * set that one block covers is given one block (the kernel then skips its cross-block step)
 * and each of its threads makes a single pass; the sets bench_shadow_kernels timed get the plan
 * that was fastest there (132 SMs: 1 MB in 129 blocks of two loads a thread, not 257 of one;
 * 32 MB in blocks of 512 threads).
 */
#include "kcap_shadow_cmp.h"
#include "testkit.h"

#include <stdlib.h>

struct plan_case {
    const char *name;
    int nt;
    long long bytes[KCAP_CMP_MAX];
    long long max_blocks;
    int one_block; /* expected: 1 one block, 0 several */
    unsigned want_threads, want_blocks; /* the plan measured fastest (0: any) */
};
#define SMS 132 /* the H200's, with max_blocks 264 = KCAP_STAGE_BLOCKS_PER_SM of them */

static const struct plan_case k_cases[] = {
    {"golden h8_q1: o 8 KB + lse 32 B", 2, {8192, 32}, 264, 1, 0, 0},
    {"serving bs1 q2 h8: o 16 KB + lse 64 B", 2, {16384, 64}, 264, 1, 0, 0},
    {"a full block: o 31 KB + lse 1 KB (32 warps)", 2, {31744, 1024}, 264, 1, 0, 0},
    {"one warp over a block: o 31 KB + 16 B + lse 16 B", 2, {31744 + 16, 16}, 264, 0, 0, 0},
    {"serving bs4 q4 h16: o 256 KB + lse 1 KB", 2, {262144, 1024}, 264, 0, 256, 65},
    {"golden h64_q7: o 448 KB + lse 1792 B", 2, {458752, 1792}, 264, 0, 256, 113},
    {"golden h128_q4: o 512 KB + lse 2 KB", 2, {524288, 2048}, 264, 0, 256, 129},
    {"golden h16_q64: o 1 MB + lse 4 KB", 2, {1048576, 4096}, 264, 0, 256, 129},
    {"large batch: o 32 MB + lse 128 KB (strides)", 2, {33554432, 131072}, 264, 0, 512, 264},
    {"four tensors of odd sizes", 4, {48, 4096 + 16, 16, 1000000}, 264, 0, 0, 0},
    {"one tensor, tiny grid bound (strides)", 1, {1 << 22}, 2, 0, 0, 0},
    {"no tensor", 0, {0}, 264, 1, 0, 0},
};

/* Walks the kernel's loops over the plan; returns the number of visits of vector v of tensor
 * k in hits[k][v]. */
static void walk(const struct plan_case *c, const int *warp0, unsigned threads, unsigned blocks,
                 unsigned char **hits, int *max_passes)
{
    unsigned nwarps = threads / 32;
    *max_passes = 0;
    for (unsigned b = 0; b < blocks; b++)
        for (unsigned w = 0; w < nwarps; w++) {
            int gw = (int)(b * nwarps + w), k = -1;
            for (int j = 0; j < c->nt; j++)
                k = gw >= warp0[j] && gw < warp0[j + 1] ? j : k;
            if (k < 0)
                continue;
            unsigned nv = (unsigned)(c->bytes[k] / 16), nth = (unsigned)(warp0[k + 1] - warp0[k]) * 32;
            for (unsigned lane = 0; lane < 32; lane++) {
                unsigned lt = (unsigned)(gw - warp0[k]) * 32 + lane;
                int passes = 0;
                for (unsigned v0 = lt; v0 < nv; v0 += KCAP_CMP_VPT * nth, passes++)
                    for (int u = 0; u < KCAP_CMP_VPT; u++)
                        if (v0 + u * nth < nv)
                            hits[k][v0 + u * nth]++;
                *max_passes = passes > *max_passes ? passes : *max_passes;
            }
        }
}

int main(void)
{
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) {
        const struct plan_case *c = &k_cases[i];
        int before = tk_failures, warp0[KCAP_CMP_MAX + 1];
        unsigned threads = 0, blocks = 0;
        kcap_cmp_plan(c->nt, c->bytes, c->max_blocks, c->max_blocks > SMS ? SMS : c->max_blocks, warp0, &threads,
                      &blocks);
        if (c->want_threads)
            TK_CHECK(threads == c->want_threads && blocks == c->want_blocks,
                     "%s: %u blocks of %u threads, the fastest measured was %u of %u", c->name, blocks, threads,
                     c->want_blocks, c->want_threads);
        TK_CHECK(threads >= 32 && threads <= KCAP_CMP_THREADS && threads % 32 == 0, "%s: threads %u", c->name,
                 threads);
        TK_CHECK(blocks >= 1 && blocks <= (unsigned)(c->max_blocks > 1 ? c->max_blocks : 1), "%s: blocks %u", c->name,
                 blocks);
        TK_CHECK(warp0[0] == 0, "%s: warp0[0] %d", c->name, warp0[0]);
        for (int k = 0; k < c->nt; k++)
            TK_CHECK(warp0[k + 1] > warp0[k], "%s: tensor %d has no warp", c->name, k);
        TK_CHECK((long long)blocks * (threads / 32) >= warp0[c->nt], "%s: %u blocks of %u threads for %d warps",
                 c->name, blocks, threads, warp0[c->nt]);
        TK_CHECK((blocks == 1) == c->one_block, "%s: %u blocks, expected %s", c->name, blocks,
                 c->one_block ? "one" : "several");
        unsigned char *hits[KCAP_CMP_MAX];
        for (int k = 0; k < c->nt; k++)
            hits[k] = calloc((size_t)(c->bytes[k] / 16) + 1, 1);
        int max_passes = 0;
        walk(c, warp0, threads, blocks, hits, &max_passes);
        for (int k = 0; k < c->nt; k++) {
            long long nv = c->bytes[k] / 16, bad = -1;
            for (long long v = 0; v < nv && bad < 0; v++)
                bad = hits[k][v] != 1 ? v : -1;
            TK_CHECK(bad < 0, "%s: tensor %d vector %lld visited %d times", c->name, k, bad,
                     bad < 0 ? 1 : hits[k][bad]);
            free(hits[k]);
        }
        if (blocks == 1 && c->nt)
            TK_CHECK(max_passes == 1, "%s: one block, but a thread makes %d passes", c->name, max_passes);
        if (tk_failures == before)
            printf("ok   %s: %u block(s) of %u threads, %d warps, %d pass(es) a thread at most\n", c->name, blocks,
                   threads, warp0[c->nt], max_passes);
    }
    return tk_summary("test_capture_cmp_plan");
}
