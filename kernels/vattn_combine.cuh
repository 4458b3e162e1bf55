/*
 * vattn_combine.cuh — vattn_combine_kernel: merges the split-K partials of the fast kernels
 * (per split: m in log2 units, l, unnormalised O in the workspace) into o and lse, in split
 * index order, so results are bitwise identical run to run (no atomics anywhere). Launched
 * by vattn_launch_fast (verify_attn.cu) after the fast kernel whenever nsplit > 1.
 */
#ifndef VATTN_COMBINE_CUH
#define VATTN_COMBINE_CUH

#include "vattn_common.cuh"

namespace {


/* One block per (request, row). The split weights are computed once into smem (the max over
 * splits is order-free). Then G groups of 128 threads (4 channels each) sum the partial O of
 * the splits s = group (mod G) in ascending order, 8 loads in flight per thread, and group 0
 * adds the G group sums in group order: a fixed order for a given split count, so bitwise
 * deterministic. G = 4 from COMBINE_WIDE_SPLITS splits up: with 132 splits of a 64-row
 * request one group was a chain of 17 dependent round trips to memory (-7.6 % of the whole
 * call at (1,16,4,185000)); with few splits the wide block only costs (+14 % at 2 splits).
 * Tried for issue 16: G = 4 from 12 splits and an L1 prefetch of the partials before the
 * (m, l) pass: no gain where it was meant to help, +1.4-2.9 us where the rows are many (13-15
 * splits of 128-512 rows, docs/PERF.md): at serving sizes the combine is bound by the bytes of
 * the partials (written back from a dirty L2 and read again), not by its load batches. Nor did
 * 16 loads in flight per thread instead of 8 (G = 1; fifteenth session: within ±0.3 us on
 * every serving row, e.g. 9.2 / 8.9 us at (1,8,2,512) against 8.9 for 8). Nor did the wide
 * form split across two blocks by columns (G = 8 over 256 channels, grid z = 2, so 128 blocks
 * instead of 64 at (1,16,4,185000); sixteenth session: 110.9 against 111.8 / 111.5 us, within
 * the instance's spread, predicted -1.5).
 * Launched with programmatic dependent launch (vattn_pdl_wait). */
constexpr int COMBINE_MAX_SPLITS = 1024; /* vattn_plan caps nsplit at this */
constexpr int COMBINE_WIDE_SPLITS = 64;

template <int FP16, int G> __global__ void __launch_bounds__(128 * G, 8 / G) vattn_combine_kernel(VattnParams p)
{
    constexpr int COMBINE_THREADS = 128 * G;
    __shared__ float wsm[COMBINE_MAX_SPLITS], wl[COMBINE_MAX_SPLITS];
    __shared__ float red_m[COMBINE_THREADS / 32];
    __shared__ int red_bad[COMBINE_THREADS / 32];
    __shared__ float4 part[G > 1 ? G - 1 : 1][128];
    const int r = blockIdx.x, b = blockIdx.y, tid = threadIdx.x;
    vattn_pdl_wait(); /* launched while the fast kernel runs: its partials are visible after this */
    vattn_pdl_trigger();
    const int64_t base = (int64_t)b * p.nsplit * p.mpad + r;

    float mmax = -INFINITY;
    int bad = 0;
    for (int s = tid; s < p.nsplit; s += COMBINE_THREADS) {
        const float m = p.ws_ml[base + (int64_t)s * p.mpad].x;
        bad |= isnan(m);
        mmax = fmaxf(mmax, m); /* fmaxf ignores NaN */
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        mmax = fmaxf(mmax, __shfl_xor_sync(0xffffffffu, mmax, o));
        bad |= __shfl_xor_sync(0xffffffffu, bad, o);
    }
    if ((tid & 31) == 0) {
        red_m[tid >> 5] = mmax;
        red_bad[tid >> 5] = bad;
    }
    __syncthreads();
    mmax = red_m[0];
    bad = red_bad[0];
#pragma unroll
    for (int w = 1; w < COMBINE_THREADS / 32; w++) {
        mmax = fmaxf(mmax, red_m[w]);
        bad |= red_bad[w];
    }
    const float m_use = mmax == -INFINITY ? 0.0f : mmax;
    for (int s = tid; s < p.nsplit; s += COMBINE_THREADS) {
        const float2 ml = p.ws_ml[base + (int64_t)s * p.mpad];
        /* an empty split (m = -inf) weighs 0 and its O partial is all zero */
        const float w = ml.x == -INFINITY ? 0.0f : exp2f(ml.x - m_use);
        wsm[s] = w;
        wl[s] = w * ml.y;
    }
    __syncthreads();
    const int c4 = tid & 127, grp = tid >> 7;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    const float *po = p.ws_o + base * DV + c4 * 4;
    const int64_t step = (int64_t)p.mpad * DV;
    int s = grp;
    for (; s + 7 * G < p.nsplit; s += 8 * G) {
        float4 v[8];
#pragma unroll
        for (int k = 0; k < 8; k++)
            v[k] = *reinterpret_cast<const float4 *>(po + (s + k * G) * step);
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const float w = wsm[s + k * G];
            acc[0] += w * v[k].x;
            acc[1] += w * v[k].y;
            acc[2] += w * v[k].z;
            acc[3] += w * v[k].w;
        }
    }
    for (; s < p.nsplit; s += G) {
        const float4 v = *reinterpret_cast<const float4 *>(po + s * step);
        const float w = wsm[s];
        acc[0] += w * v.x;
        acc[1] += w * v.y;
        acc[2] += w * v.z;
        acc[3] += w * v.w;
    }
    if (G > 1) {
        if (grp > 0)
            part[grp - 1][c4] = make_float4(acc[0], acc[1], acc[2], acc[3]);
        __syncthreads();
        if (grp > 0)
            return;
    }
#pragma unroll
    for (int g2 = 0; g2 < G - 1; g2++) {
        const float4 q = part[g2][c4];
        acc[0] += q.x;
        acc[1] += q.y;
        acc[2] += q.z;
        acc[3] += q.w;
    }
    float L = 0.0f;
    for (int k = 0; k < p.nsplit; k++) /* every thread, same order: same L */
        L += wl[k];
    const int i = r / p.H, h = r % p.H;
    const float inv = L == 0.0f ? 0.0f : 1.0f / L;
    uint16_t *o = p.o + ((int64_t)b * p.q_len + i) * p.o_st + h * p.o_sh + c4 * 4;
    const uint32_t lo = vattn_pack2<FP16>(bad ? NAN : acc[0] * inv, bad ? NAN : acc[1] * inv);
    const uint32_t hi = vattn_pack2<FP16>(bad ? NAN : acc[2] * inv, bad ? NAN : acc[3] * inv);
    *reinterpret_cast<uint2 *>(o) = make_uint2(lo, hi);
    if (p.lse && c4 == 0)
        p.lse[((int64_t)b * p.q_len + i) * p.H + h] =
            bad ? NAN : L == 0.0f ? -INFINITY : (mmax + log2f(L)) * 0.69314718055994531f;
}

} /* namespace */

#endif /* VATTN_COMBINE_CUH */
