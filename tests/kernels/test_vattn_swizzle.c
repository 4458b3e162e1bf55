/*
 * test_vattn_swizzle.c — the fast kernels' KV-stage layout (kernels/vattn_swizzle.h) on the CPU.
 * Every ldmatrix and cp.async address of v3, v7 and v8 into a KV stage comes from those
 * functions, so a wrong XOR here would show only as wrong attention on a GPU. This test shows
 * it without one.
 *
 * Claims checked:
 *   1  the layout is a permutation of each row's 72 chunks that keeps every chunk inside its
 *      aligned group of 8, so each 128-byte line of a row is filled by 8 chunk copies; rows are
 *      1152 bytes and stay 128-byte aligned;
 *   2  ldmatrix is conflict-free: the 8 rows of an 8x8 matrix (rows 8m .. 8m + 7, one logical
 *      chunk) are stored at 8 distinct 16-byte positions of a 128-byte span, i.e. 8 distinct
 *      groups of 4 banks;
 *   3  the 4-base sweep (VATTN_SWEEP_CHUNK: base q = s & 3, plus 8 (s >> 2)) reads exactly the
 *      stored chunk c0 + 2 s for every c0 = 8 a + b and step of a row (v7's K and V sweeps, v3's
 *      V sweep are instances);
 *   4  v3's S product: k-quarter kq's step ks (k16 step kq + 4 ks, half h) is read at
 *      vattn_v3_kchunk + 8 ks, the layout's chunk 2 (kq + 4 ks) + h, and the four quarters
 *      cover the 36 k16 steps of a 576-wide row exactly once. Contiguous quarters (steps 9 kq +
 *      ks) would have no fixed stride there, which is why v3 interleaves them;
 *   5  v3's loader: thread t's copies vattn_swz(row, c0) + 128 i (row t >> 3, c0 = t & 7) are
 *      the layout's chunks c0 + 8 i, and the 256 threads' copies cover every chunk of a 32-row
 *      tile exactly once.
 */
#include "../testkit.h"
#include "vattn_swizzle.h"

enum { ROWS = 32, THREADS = 256 };

int main(void)
{
    /* 1: a permutation inside each aligned group of 8; 128-byte aligned rows */
    TK_CHECK(VATTN_SWZ_ROW_BYTES == VATTN_SWZ_CHUNKS * 16 && VATTN_SWZ_ROW_BYTES % 128 == 0, "row of %d bytes",
             VATTN_SWZ_ROW_BYTES);
    for (int r = 0; r < ROWS; r++) {
        int seen[VATTN_SWZ_CHUNKS] = {0}, bad = 0;
        for (int c = 0; c < VATTN_SWZ_CHUNKS; c++) {
            const int s = vattn_swz_chunk(r, c);
            if (s < 0 || s >= VATTN_SWZ_CHUNKS || s / 8 != c / 8 || seen[s]++)
                bad++;
            if (vattn_swz(r, c) != (uint32_t)(r * VATTN_SWZ_ROW_BYTES + 16 * s))
                bad++;
        }
        TK_CHECK(bad == 0, "row %d: %d chunks stored outside their line or twice", r, bad);
    }

    /* 2: the 8 rows of an ldmatrix 8x8 matrix hit 8 distinct 16-byte positions of their line */
    for (int m = 0; m < ROWS / 8; m++)
        for (int c = 0; c < VATTN_SWZ_CHUNKS; c++) {
            unsigned pos = 0;
            for (int r = 8 * m; r < 8 * m + 8; r++)
                pos |= 1u << (vattn_swz_chunk(r, c) & 7);
            TK_CHECK(pos == 0xffu, "rows %d..%d, chunk %d: positions 0x%02x (a bank conflict)", 8 * m, 8 * m + 7, c,
                     pos);
        }

    /* 3: the 4-base sweep equals the layout for every start 8 a + b and step inside the row */
    int sweeps = 0, sweep_bad = 0;
    for (int a = 0; a < VATTN_SWZ_CHUNKS / 8; a++)
        for (int b = 0; b < 2; b++)
            for (int r7 = 0; r7 < 8; r7++)
                for (int s = 0; 8 * a + b + 2 * s < VATTN_SWZ_CHUNKS; s++) {
                    sweeps++;
                    if (VATTN_SWEEP_CHUNK(a, b, r7, s & 3) + 8 * (s >> 2) != vattn_swz_chunk(r7, 8 * a + b + 2 * s))
                        sweep_bad++;
                }
    TK_CHECK(sweep_bad == 0, "%d of %d sweep steps read another chunk than the layout's", sweep_bad, sweeps);

    /* 4: v3's interleaved k-quarters */
    int steps[VATTN_SWZ_CHUNKS / 2] = {0}, kbad = 0, contiguous_fixed = 0;
    for (int kq = 0; kq < 4; kq++)
        for (int ks = 0; ks < 9; ks++)
            steps[kq + 4 * ks]++;
    for (int t = 0; t < VATTN_SWZ_CHUNKS / 2; t++)
        TK_CHECK(steps[t] == 1, "k16 step %d taken by %d quarters", t, steps[t]);
    for (int kq = 0; kq < 4; kq++)
        for (int h = 0; h < 2; h++)
            for (int r7 = 0; r7 < 8; r7++) {
                int fixed = 1;
                for (int ks = 0; ks < 9; ks++) {
                    if (vattn_v3_kchunk(kq, h, r7) + 8 * ks != vattn_swz_chunk(r7, 2 * (kq + 4 * ks) + h))
                        kbad++;
                    if (ks > 0 && vattn_swz_chunk(r7, 2 * (9 * kq + ks) + h) - vattn_swz_chunk(r7, 2 * (9 * kq) + h) !=
                                      2 * ks)
                        fixed = 0;
                }
                contiguous_fixed += fixed;
            }
    TK_CHECK(kbad == 0, "%d v3 K sweep steps read another chunk than the layout's", kbad);
    TK_CHECK(contiguous_fixed < 4 * 2 * 8, "contiguous quarters had a fixed stride in every lane: no reason to interleave");

    /* 5: v3's loader */
    int cover[ROWS][VATTN_SWZ_CHUNKS] = {{0}}, lbad = 0;
    for (int t = 0; t < THREADS; t++) {
        const int row = t >> 3, c0 = t & 7;
        for (int i = 0; i < VATTN_SWZ_CHUNKS / 8; i++) {
            if (vattn_swz(row, c0) + 128u * (uint32_t)i != vattn_swz(row, c0 + 8 * i))
                lbad++;
            cover[row][c0 + 8 * i]++;
        }
    }
    for (int r = 0; r < ROWS; r++)
        for (int c = 0; c < VATTN_SWZ_CHUNKS; c++)
            if (cover[r][c] != 1)
                lbad++;
    TK_CHECK(lbad == 0, "v3 loader: %d copies at a wrong place or chunks not copied exactly once", lbad);
    return tk_summary("test_vattn_swizzle");
}
