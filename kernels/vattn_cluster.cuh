/*
 * vattn_cluster.cuh — the split-K merge inside a thread-block cluster, for both fast kernels.
 * Why: at serving sizes the split partials (fp32, 2 KB per row per split) were the largest
 * bytes of a call — written to the workspace, written back from L2, read again by
 * vattn_combine_kernel — and that second kernel is a second launch and a dependent round trip
 * (epilogue + combine: 3-13 us of a 10-36 us call, docs/PERF.md). When the C splits of one
 * (row chunk, request) run as one cluster (grid dimension y, C <= 8: portable on sm_90 and
 * sm_120), each block leaves its unnormalised O in its own shared memory (the KV stages, free
 * after the loop) and the blocks merge them through distributed shared memory: every block
 * reads all C partials of 1/C of the elements, weighs them in split order (the same
 * arithmetic as the combine kernel, so results stay bitwise deterministic run to run) and
 * writes o / lse directly when the cluster holds every split of the request (nparts = 1: no
 * workspace, no second kernel), else one partial per cluster for the combine (C times fewer
 * bytes). v7's 64 rows x 512 columns of fp32 (128 KB) do not fit in shared memory at once, so
 * its O goes through in two windows of 256 columns; v3's 32 rows in one of 512.
 * The plan (verify_attn.cu) chooses C; cluster = 1 keeps vattn_fast_epilogue's path.
 */
#ifndef VATTN_CLUSTER_CUH
#define VATTN_CLUSTER_CUH

#include <cooperative_groups.h>

#include "vattn_common.cuh"

namespace {

constexpr int VATTN_MAX_CLUSTER = 8;  /* portable cluster size (sm_90, sm_120) */
constexpr int VATTN_CLUSTER_ROWS = 64; /* rows per block of the larger kernel (v7) */

/* Per block row: the weight of each split of the cluster, the merged max (log2 units) and sum
 * of the softmax, and whether any split of the cluster saw a bad slot. In the block's own
 * S-partial area (free after the loop), never read by another block. */
struct VattnClusterScratch {
    float w[VATTN_MAX_CLUSTER][VATTN_CLUSTER_ROWS];
    float M[VATTN_CLUSTER_ROWS], L[VATTN_CLUSTER_ROWS];
    int bad;
};

/* Every thread of every block of the cluster: the writes before it (this block's window,
 * m, l, bad) are visible to the reads of all blocks after it (release / acquire). */
__device__ __forceinline__ void vattn_cluster_sync()
{
    asm volatile("barrier.cluster.arrive.release.aligned;\n"
                 "barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

/* The same shared-memory object in block `rank` of the cluster (a generic address). */
template <class T> __device__ __forceinline__ const T *vattn_remote(const T *local, int rank)
{
    return cooperative_groups::this_cluster().map_shared_rank(const_cast<T *>(local), (unsigned)rank);
}

/* Epilogue of a fast kernel launched in clusters of p.cluster splits (grid y), after a
 * __syncthreads() that follows its KV loop: m, l (final softmax state per block row, m in log2
 * units), *bad and the KV stages (xbuf, >= bm x (W + 8) floats) are free to use. This warp holds
 * O of MT m16 tiles from block row row0 and NT n8 tiles from column col0 (all inside one window
 * of W columns). Partial index of the cluster: sp / cluster; block rank sp % cluster. */
template <int FP16, int MT, int NT>
__device__ __forceinline__ void vattn_cluster_epilogue(const VattnParams &p, const float *m, const float *l,
                                                       const int *bad, float (&oacc)[MT][NT][4], int bm, int row0,
                                                       int col0, float *xbuf, int W, VattnClusterScratch &cs,
                                                       int mc, int sp, int b, int tid, int lane)
{
    const int C = p.cluster, rank = sp % C, part = sp / C;
    const int pitch = W + 8; /* float2 stores of a half-warp on 32 distinct banks */
    const int g = lane >> 2, t4 = lane & 3;
    const int n4 = W / 4, items = bm * n4;
    const int lo = rank * items / C, hi = (rank + 1) * items / C;
    const float *src[VATTN_MAX_CLUSTER];
#pragma unroll
    for (int s = 0; s < VATTN_MAX_CLUSTER; s++)
        src[s] = s < C ? vattn_remote(xbuf, s) : xbuf;
    for (int c_lo = 0; c_lo < DV; c_lo += W) {
        if (col0 >= c_lo && col0 < c_lo + W) { /* this warp's columns are in the window */
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int hr = 0; hr < 2; hr++) {
                    float *dst = xbuf + (row0 + mt * 16 + g + hr * 8) * pitch + (col0 - c_lo) + 2 * t4;
#pragma unroll
                    for (int nt = 0; nt < NT; nt++)
                        *reinterpret_cast<float2 *>(dst + nt * 8) =
                            make_float2(oacc[mt][nt][2 * hr], oacc[mt][nt][2 * hr + 1]);
                }
        }
        vattn_cluster_sync(); /* every block's window (and, the first time, m, l, bad) written */
        if (c_lo == 0) {
            /* split weights per row, in split order: the combine kernel's arithmetic */
            if (tid < bm) {
                float ms[VATTN_MAX_CLUSTER], ls[VATTN_MAX_CLUSTER], mmax = -INFINITY;
#pragma unroll
                for (int s = 0; s < VATTN_MAX_CLUSTER; s++)
                    if (s < C) {
                        ms[s] = vattn_remote(m, s)[tid];
                        ls[s] = vattn_remote(l, s)[tid];
                        mmax = fmaxf(mmax, ms[s]);
                    }
                const float m_use = mmax == -INFINITY ? 0.0f : mmax;
                float L = 0.0f;
#pragma unroll
                for (int s = 0; s < VATTN_MAX_CLUSTER; s++)
                    if (s < C) {
                        const float w = ms[s] == -INFINITY ? 0.0f : exp2f(ms[s] - m_use);
                        cs.w[s][tid] = w;
                        L += w * ls[s];
                    }
                cs.M[tid] = mmax;
                cs.L[tid] = L;
            }
            if (tid == bm) {
                int any = 0;
                for (int s = 0; s < C; s++)
                    any |= *vattn_remote(bad, s);
                cs.bad = any;
            }
            __syncthreads();
        }
        /* this block's share of the window: all C partials of elements [lo, hi) */
        for (int it = lo + tid; it < hi; it += NTHREADS) {
            const int row = it / n4, c4 = it - row * n4, r = mc * bm + row;
            if (r >= p.M) /* padding rows */
                continue;
            float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
            for (int s = 0; s < VATTN_MAX_CLUSTER; s++)
                if (s < C) {
                    const float4 v = *reinterpret_cast<const float4 *>(src[s] + row * pitch + c4 * 4);
                    const float w = cs.w[s][row];
                    acc.x += w * v.x;
                    acc.y += w * v.y;
                    acc.z += w * v.z;
                    acc.w += w * v.w;
                }
            const int col = c_lo + c4 * 4;
            if (p.nparts == 1) {
                const float L = cs.L[row], inv = L == 0.0f ? 0.0f : 1.0f / L;
                const bool nan_out = cs.bad != 0;
                uint16_t *o = p.o + ((int64_t)b * p.q_len + r / p.H) * p.o_st + (r % p.H) * p.o_sh + col;
                const uint32_t lo2 = vattn_pack2<FP16>(nan_out ? NAN : acc.x * inv, nan_out ? NAN : acc.y * inv);
                const uint32_t hi2 = vattn_pack2<FP16>(nan_out ? NAN : acc.z * inv, nan_out ? NAN : acc.w * inv);
                *reinterpret_cast<uint2 *>(o) = make_uint2(lo2, hi2);
            } else {
                float *o = p.ws_o + (((int64_t)b * p.nparts + part) * p.mpad + r) * DV + col;
                *reinterpret_cast<float4 *>(o) = acc;
            }
        }
        vattn_cluster_sync(); /* no block rewrites its window or exits while another reads it */
    }
    if (rank == 0 && tid < bm && mc * bm + tid < p.M) {
        const int r = mc * bm + tid;
        const float M = cs.M[tid], L = cs.L[tid];
        if (p.nparts > 1)
            p.ws_ml[((int64_t)b * p.nparts + part) * p.mpad + r] = make_float2(cs.bad ? NAN : M, L);
        else if (p.lse)
            p.lse[((int64_t)b * p.q_len + r / p.H) * p.H + r % p.H] =
                cs.bad ? NAN : L == 0.0f ? -INFINITY : (M + log2f(L)) * 0.69314718055994531f;
    }
}

} /* namespace */

#endif /* VATTN_CLUSTER_CUH */
