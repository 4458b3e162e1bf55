/*
 * verify_attn.cu — libverify_attn.so: the verify-attention ABI (verify_attn.h) on the GPU.
 *
 * Four kernels:
 *   vattn_ref_kernel      the reference: one block per (token, head), fp32 everywhere, keys
 *                         walked in order in chunks of 256 (one key per thread), written to
 *                         be easy to trust, not fast. vattn_verify_reference().
 *   vattn_fast7_kernel    v7 (vattn_fast7.cuh), the fast kernel (vattn_verify) when a request
 *                         has > 32 (token, head) rows: 64 rows per block in two independent
 *                         groups of 32, same tiles and split-K as v3 below, S reduced between
 *                         warp pairs, lazy rescale, XOR-swizzled KV stages on mbarriers.
 *   vattn_fast_kernel     v3, the fast kernel for <= 32 rows (VATTN_VARIANT=3|7 forces one;
 *                         dev knob), flash-decode split-K: a block owns
 *                         32 (token, head) rows of one request and one contiguous range of its
 *                         KV sequence. KV tiles of 32 rows arrive through kv_indices by cp.async
 *                         (2 stages); each smem tile serves both K (576 cols, S = Q K^T) and V
 *                         (first 512 cols, O += P V); bf16/fp16 mma.sync m16n8k16 with ldmatrix
 *                         operands, fp32 accumulators, online softmax in fp32 (log2 domain).
 *                         The blocks of one request that share a KV range have adjacent
 *                         blockIdx.x, so they run together and re-reads of a KV tile hit L2:
 *                         a KV row leaves HBM about once per request, not once per head.
 *   vattn_combine_kernel  merges the split partials (m, l, unnormalised O) in split order,
 *                         so results are bitwise identical run to run (no atomics anywhere).
 * Only sm_120-legal instructions (mma.sync, ldmatrix, cp.async): no wgmma, tcgen05 or TMA.
 * The call allocates nothing and never synchronises the host: legal under graph capture.
 * Invalid device data (kv_len < q_len, a bad kv_indptr, a slot outside [0, num_slots))
 * turns that request's outputs into NaN; no out-of-bounds address is ever formed.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "vattn_check.h"
#include "verify_attn.h"

namespace {

constexpr int QK = VATTN_HEAD_DIM_QK;
constexpr int DV = VATTN_HEAD_DIM_V;

/* ---------------------------------------------------------------- shared helpers ---- */

struct VattnParams {
    const uint16_t *q;
    int64_t q_st, q_sh;
    const uint16_t *kv;
    int64_t kv_stride;
    const int32_t *indptr;
    const void *indices;
    int idx64;
    const uint8_t *vis;
    uint16_t *o;
    int64_t o_st, o_sh;
    float *lse;
    int bs, q_len, H, M; /* M = q_len * H rows per request */
    int64_t num_slots;
    float sm_scale, scale_log2;
    /* fast kernel plan */
    int mchunks, nsplit, tiles_per_split, mpad;
    float *ws_o;  /* [bs][nsplit][mpad][512] unnormalised partial O */
    float2 *ws_ml; /* [bs][nsplit][mpad] (m in log2 units, l) */
};

template <int FP16> __device__ __forceinline__ float vattn_ld(uint16_t x)
{
    if (FP16)
        return __half2float(__ushort_as_half(x));
    return __bfloat162float(__ushort_as_bfloat16(x));
}

template <int FP16> __device__ __forceinline__ uint16_t vattn_st(float f)
{
    if (FP16)
        return __half_as_ushort(__float2half_rn(f));
    return __bfloat16_as_ushort(__float2bfloat16_rn(f));
}

template <int FP16> __device__ __forceinline__ uint32_t vattn_pack2(float lo, float hi)
{
    if (FP16) {
        __half2 h = __floats2half2_rn(lo, hi);
        return *reinterpret_cast<uint32_t *>(&h);
    }
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&h);
}

__device__ __forceinline__ int64_t vattn_slot(const VattnParams &p, int64_t pos)
{
    return p.idx64 ? reinterpret_cast<const int64_t *>(p.indices)[pos]
                   : (int64_t) reinterpret_cast<const int32_t *>(p.indices)[pos];
}

/* Request b's key range [start, start + kv_len) in kv_indices, or false when kv_indptr is
 * inconsistent: such a request gets NaN and its indices are never read. Bounding both ends
 * by [0, indptr[bs]] keeps every kv_indices read inside the array the caller described. */
__device__ __forceinline__ bool vattn_request_range(const VattnParams &p, int b, int64_t *start,
                                                    int64_t *kv_len)
{
    int64_t s = p.indptr[b], e = p.indptr[b + 1], total = p.indptr[p.bs];
    *start = s;
    *kv_len = e - s;
    return p.indptr[0] == 0 && s >= 0 && e >= s && e <= total && e - s >= p.q_len;
}

/* Draft key jj visible to draft query i of request b. */
__device__ __forceinline__ bool vattn_visible(const VattnParams &p, int b, int i, int64_t jj)
{
    if (!p.vis)
        return jj <= i;
    return p.vis[((int64_t)b * p.q_len + i) * p.q_len + jj] != 0;
}

/* ------------------------------------------------------------------ reference ---- */

constexpr int REF_THREADS = 256;

template <int FP16> __global__ void __launch_bounds__(REF_THREADS) vattn_ref_kernel(VattnParams p)
{
    __shared__ float qs[QK];
    __shared__ float ps[REF_THREADS];
    __shared__ int64_t slots[REF_THREADS];
    __shared__ float red[REF_THREADS];
    __shared__ int bad;
    const int h = blockIdx.x, t = blockIdx.y, tid = threadIdx.x;
    const int b = t / p.q_len, i = t % p.q_len;
    int64_t start, kv_len;
    const bool ok = vattn_request_range(p, b, &start, &kv_len);
    const int64_t prefix = kv_len - p.q_len;
    uint16_t *o = p.o + t * p.o_st + h * p.o_sh;
    if (tid == 0)
        bad = !ok;
    for (int c = tid; c < QK; c += REF_THREADS)
        qs[c] = vattn_ld<FP16>(p.q[t * p.q_st + h * p.q_sh + c]);
    __syncthreads();
    float m = -INFINITY, l = 0.0f, acc0 = 0.0f, acc1 = 0.0f;
    for (int64_t base = 0; ok && base < kv_len; base += REF_THREADS) {
        const int64_t j = base + tid;
        float s = -INFINITY;
        int64_t slot = -1;
        if (j < kv_len) {
            /* every slot of the request is range-checked, visible or not, as the fast kernel
             * loads them all */
            slot = vattn_slot(p, start + j);
            if (slot < 0 || slot >= p.num_slots) {
                bad = 1;
                slot = -1;
            } else if (j >= prefix && !vattn_visible(p, b, i, j - prefix)) {
                slot = -1;
            } else {
                const uint16_t *k = p.kv + slot * p.kv_stride;
                float d = 0.0f;
                for (int c = 0; c < QK; c++)
                    d += qs[c] * vattn_ld<FP16>(k[c]);
                s = p.sm_scale * d;
            }
        }
        /* block max, fixed tree order */
        red[tid] = s;
        __syncthreads();
        for (int w = REF_THREADS / 2; w > 0; w >>= 1) {
            if (tid < w)
                red[tid] = fmaxf(red[tid], red[tid + w]);
            __syncthreads();
        }
        const float m_new = fmaxf(m, red[0]);
        const float m_use = m_new == -INFINITY ? 0.0f : m_new;
        __syncthreads();
        const float pj = slot >= 0 ? expf(s - m_use) : 0.0f;
        ps[tid] = pj;
        slots[tid] = slot;
        red[tid] = pj;
        __syncthreads();
        for (int w = REF_THREADS / 2; w > 0; w >>= 1) {
            if (tid < w)
                red[tid] += red[tid + w];
            __syncthreads();
        }
        const float alpha = expf(m - m_use);
        l = l * alpha + red[0];
        acc0 *= alpha;
        acc1 *= alpha;
        m = m_new;
        const int n = kv_len - base < REF_THREADS ? (int)(kv_len - base) : REF_THREADS;
        for (int jj = 0; jj < n; jj++) {
            if (slots[jj] < 0)
                continue;
            const uint16_t *v = p.kv + slots[jj] * p.kv_stride;
            acc0 += ps[jj] * vattn_ld<FP16>(v[tid]);
            acc1 += ps[jj] * vattn_ld<FP16>(v[tid + REF_THREADS]);
        }
        __syncthreads();
    }
    __syncthreads();
    const bool nan_out = bad != 0;
    const bool empty = l == 0.0f;
    const float inv = empty ? 0.0f : 1.0f / l;
    o[tid] = vattn_st<FP16>(nan_out ? NAN : acc0 * inv);
    o[tid + REF_THREADS] = vattn_st<FP16>(nan_out ? NAN : acc1 * inv);
    if (p.lse && tid == 0)
        p.lse[(int64_t)t * p.H + h] = nan_out ? NAN : empty ? -INFINITY : m + logf(l);
}

/* ------------------------------------------------------------------ fast kernel ---- */

constexpr int BM = 32;            /* (token, head) rows per block */
constexpr int BN = 32;            /* keys per KV tile */
constexpr int NWARPS = 8;
constexpr int NTHREADS = NWARPS * 32;
constexpr int KV_PITCH = QK + 8;  /* +16 B per row: ldmatrix rows land on distinct banks */
constexpr int P_PITCH = BN + 8;
constexpr int RED_PITCH = BN + 8; /* float2 stores of a half-warp hit 32 distinct banks */

/* Keys [begin, end) of split `sp` of a request with kv_len keys. The split count is fixed by
 * the grid (sized from the max_kv_len hint, never from data), but each request divides its OWN
 * length among the splits on the device: a wrong or absent hint costs speed, never keys, and
 * the partition of a request does not depend on num_slots or on the other requests. */
__device__ __forceinline__ void vattn_split_range(int64_t kv_len, int sp, int nsplit,
                                                  int64_t *begin, int64_t *end)
{
    const int64_t tiles = (kv_len + BN - 1) / BN;
    const int64_t tps = (tiles + nsplit - 1) / nsplit;
    const int64_t b = (int64_t)sp * tps * BN, e = b + tps * BN;
    *begin = b < kv_len ? b : kv_len;
    *end = e < kv_len ? e : kv_len;
}

/* The keys block (row chunk, split sp, request b) of a fast kernel works on: ok = the request's
 * range is valid; [key_begin, key_end) = split sp of it (empty for a bad request, which reads
 * nothing); prefix = keys before the draft block; ntiles = BN-key tiles of the split. */
struct VattnBlockKeys {
    int64_t start, prefix, key_begin, key_end;
    int ntiles;
    bool ok;
};

__device__ __forceinline__ VattnBlockKeys vattn_block_keys(const VattnParams &p, int b, int sp)
{
    VattnBlockKeys k;
    int64_t kv_len = 0;
    k.ok = vattn_request_range(p, b, &k.start, &kv_len);
    k.prefix = kv_len - p.q_len;
    k.key_begin = k.key_end = 0;
    if (k.ok)
        vattn_split_range(kv_len, sp, p.nsplit, &k.key_begin, &k.key_end);
    k.ntiles = k.key_end > k.key_begin ? (int)((k.key_end - k.key_begin + BN - 1) / BN) : 0;
    return k;
}

constexpr int KSTEPS = QK / 16 / 4; /* 9 k16 steps per k-quarter of the S product */
constexpr int CHUNKS_PER_ROW = QK * 2 / 16; /* 72 cp.async chunks of 16 B per KV row */

struct FastSmem {
    uint16_t kv[2][BN][KV_PITCH];  /* 2 cp.async stages */
    float red[4][BM][RED_PITCH];   /* S partials of the 4 k-quarters, summed in fixed order */
    uint16_t p[BM][P_PITCH];       /* P in the input dtype, A operand of O += P V */
    float m[BM], l[BM], alpha[BM]; /* online-softmax state (m in log2 units) */
    int64_t slots[4][BN];          /* slot ring: tile t's rows in slots[t & 3], -1 = zero-fill */
    int bad;
};

__device__ __forceinline__ uint32_t smem_u32(const void *ptr)
{
    return (uint32_t)__cvta_generic_to_shared(ptr);
}

__device__ __forceinline__ void ldsm_x4(uint32_t addr, uint32_t &r0, uint32_t &r1, uint32_t &r2,
                                        uint32_t &r3)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
}

__device__ __forceinline__ void ldsm_x4_t(uint32_t addr, uint32_t &r0, uint32_t &r1,
                                          uint32_t &r2, uint32_t &r3)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
}

/* Not volatile: a pure register operation, so ptxas may interleave it with the ldmatrix
 * loads (which stay volatile so they never cross a barrier). */
template <int FP16>
__device__ __forceinline__ void mma16816(float *c, const uint32_t *a, uint32_t b0, uint32_t b1)
{
    if (FP16)
        asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
                     "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    else
        asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                     "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void cp_async16(uint32_t dst, const void *src, int src_bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
                 "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n"); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n"); }

/* Slot of key `key` of the request for the slot ring: -1 (zero-fill) past the split's end
 * or for a slot outside the pool (which also raises sm.bad: the request becomes NaN). The
 * ring is filled two tiles ahead by warp 0 so no cp.async waits on a kv_indices load. */
template <class Smem>
__device__ __forceinline__ int64_t vattn_ring_slot(const VattnParams &p, Smem &sm, int64_t start,
                                                   int64_t key, int64_t key_end)
{
    if (key >= key_end)
        return -1;
    const int64_t slot = vattn_slot(p, start + key);
    if (slot < 0 || slot >= p.num_slots) {
        sm.bad = 1;
        return -1;
    }
    return slot;
}

/* Issues the cp.async copies of KV tile `tile` into `stage` from the slot ring; rows without
 * a slot are zero-filled from a valid address (the pool's row 0). */
template <class Smem>
__device__ __forceinline__ void vattn_load_tile(const VattnParams &p, Smem &sm, int stage,
                                                int tile, int tid)
{
#pragma unroll
    for (int k = 0; k < BN * CHUNKS_PER_ROW / NTHREADS; k++) {
        const int c = tid + k * NTHREADS, row = c / CHUNKS_PER_ROW, col = c % CHUNKS_PER_ROW;
        const int64_t slot = sm.slots[tile & 3][row];
        const uint16_t *src = slot >= 0 ? p.kv + slot * p.kv_stride + col * 8 : p.kv;
        cp_async16(smem_u32(&sm.kv[stage][row][col * 8]), src, slot >= 0 ? 16 : 0);
    }
}

/* O[MT m-tiles from row0][NT n8 tiles] *= alpha of each row (alpha: smem, one per block row). */
template <int MT, int NT>
__device__ __forceinline__ void vattn_rescale_o(float (&oacc)[MT][NT][4], const float *alpha, int row0, int lane)
{
    const int g = lane >> 2;
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
        const float a0 = alpha[row0 + mt * 16 + g], a1 = alpha[row0 + mt * 16 + g + 8];
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
            oacc[mt][nt][0] *= a0;
            oacc[mt][nt][1] *= a0;
            oacc[mt][nt][2] *= a1;
            oacc[mt][nt][3] *= a1;
        }
    }
}

/* O[MT m-tiles from row0][NT n8 tiles] += P . V over one 32-key tile: P (input dtype) at
 * smem address paddr(block row, key) (A operand by ldmatrix); V by ldmatrix.trans, this lane's
 * address for k16 step kk and n8-tile pair np given by vaddr(kk, np) (the caller's layout). */
template <int FP16, int MT, int NT, class PAddr, class VAddr>
__device__ __forceinline__ void vattn_pv_tile(float (&oacc)[MT][NT][4], PAddr paddr, VAddr vaddr, int row0,
                                              int lane)
{
#pragma unroll
    for (int kk = 0; kk < BN / 16; kk++) {
        uint32_t pa[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
            ldsm_x4(paddr(row0 + mt * 16 + (lane & 7) + ((lane >> 3) & 1) * 8, kk * 16 + (lane >> 4) * 8),
                    pa[mt][0], pa[mt][1], pa[mt][2], pa[mt][3]);
#pragma unroll
        for (int np = 0; np < NT / 2; np++) {
            uint32_t b0, b1, b2, b3;
            ldsm_x4_t(vaddr(kk, np), b0, b1, b2, b3);
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                mma16816<FP16>(oacc[mt][2 * np], pa[mt], b0, b1);
                mma16816<FP16>(oacc[mt][2 * np + 1], pa[mt], b2, b3);
            }
        }
    }
}

/* Epilogue of the fast kernels (bm rows per block; this warp holds MT m16 tiles from block
 * row row0 and NT n8 tiles from output column col0; this thread writes lse or (m, l) of block
 * row srow, none when -1): with one split, O / l and lse straight to the outputs; else the
 * split's unnormalised O and (m, l) for the combine kernel (NaN m marks a bad request).
 * m, l: the rows' final softmax state (m in log2 units). */
template <int FP16, int MT, int NT>
__device__ __forceinline__ void vattn_fast_epilogue(const VattnParams &p, const float *m, const float *l,
                                                    bool nan_out, float (&oacc)[MT][NT][4], int bm, int row0,
                                                    int col0, int mc, int sp, int b, int lane, int srow)
{
    const int g = lane >> 2, t4 = lane & 3;
    if (p.nsplit == 1) {
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int hr = 0; hr < 2; hr++) {
                const int row = row0 + mt * 16 + g + hr * 8, r = mc * bm + row;
                if (r >= p.M)
                    continue;
                const int i = r / p.H, h = r % p.H;
                const float inv = l[row] == 0.0f ? 0.0f : 1.0f / l[row];
                uint16_t *o = p.o + ((int64_t)b * p.q_len + i) * p.o_st + h * p.o_sh + col0 + 2 * t4;
#pragma unroll
                for (int nt = 0; nt < NT; nt++) {
                    const float v0 = nan_out ? NAN : oacc[mt][nt][2 * hr] * inv;
                    const float v1 = nan_out ? NAN : oacc[mt][nt][2 * hr + 1] * inv;
                    *reinterpret_cast<uint32_t *>(o + nt * 8) = vattn_pack2<FP16>(v0, v1);
                }
            }
        if (p.lse && srow >= 0) {
            const int r = mc * bm + srow;
            if (r < p.M) {
                const float v = nan_out ? NAN
                                : l[srow] == 0.0f ? -INFINITY
                                                  : (m[srow] + log2f(l[srow])) * 0.69314718055994531f;
                p.lse[((int64_t)b * p.q_len + r / p.H) * p.H + r % p.H] = v;
            }
        }
        return;
    }
    const int64_t pbase = ((int64_t)b * p.nsplit + sp) * p.mpad + (int64_t)mc * bm;
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int hr = 0; hr < 2; hr++) {
            const int row = row0 + mt * 16 + g + hr * 8;
            float *o = p.ws_o + (pbase + row) * DV + col0 + 2 * t4;
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
                *reinterpret_cast<float2 *>(o + nt * 8) = make_float2(oacc[mt][nt][2 * hr], oacc[mt][nt][2 * hr + 1]);
        }
    if (srow >= 0)
        p.ws_ml[pbase + srow] = make_float2(nan_out ? NAN : m[srow], l[srow]);
}

template <int FP16>
__global__ void __launch_bounds__(NTHREADS, 1) vattn_fast_kernel(VattnParams p)
{
    extern __shared__ __align__(16) unsigned char smem_raw[];
    FastSmem &sm = *reinterpret_cast<FastSmem *>(smem_raw);
    const int mc = blockIdx.x, sp = blockIdx.y, b = blockIdx.z;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int g = lane >> 2, t4 = lane & 3;
    const int kq = warp & 3, nh = warp >> 2; /* S product: k-quarter, key half */
    const VattnBlockKeys bk = vattn_block_keys(p, b, sp);
    const int64_t start = bk.start, prefix = bk.prefix, key_begin = bk.key_begin, key_end = bk.key_end;
    const int ntiles = bk.ntiles;
    const bool ok = bk.ok;

    if (tid < BM) {
        sm.m[tid] = -INFINITY;
        sm.l[tid] = 0.0f;
    }
    if (tid == 0)
        sm.bad = !ok;
    __syncthreads();
    /* slot ring prologue: tiles 0 and 1 into smem, tile 2 in a register (warp 0) */
    int64_t pref = -1;
    if (warp == 0) {
        sm.slots[0][lane] = vattn_ring_slot(p, sm, start, key_begin + lane, key_end);
        sm.slots[1][lane] = vattn_ring_slot(p, sm, start, key_begin + BN + lane, key_end);
        pref = vattn_ring_slot(p, sm, start, key_begin + 2 * BN + lane, key_end);
    }
    __syncthreads();
    if (ntiles > 0) {
        vattn_load_tile(p, sm, 0, 0, tid);
        cp_async_commit();
    }

    /* Q fragments of this warp's k-quarter for the block's 32 rows, kept in registers for the
     * whole KV range: A operand of m16n8k16 (rows g / g+8, cols 2*t4 / 2*t4+8). */
    uint32_t qf[2][KSTEPS][4];
#pragma unroll
    for (int mt = 0; mt < 2; mt++)
#pragma unroll
        for (int hr = 0; hr < 2; hr++) {
            const int r = mc * BM + mt * 16 + g + hr * 8;
            const uint32_t *src = nullptr;
            if (r < p.M) {
                const int i = r / p.H, h = r % p.H;
                src = reinterpret_cast<const uint32_t *>(
                    p.q + ((int64_t)b * p.q_len + i) * p.q_st + h * p.q_sh + kq * (KSTEPS * 16));
            }
#pragma unroll
            for (int ks = 0; ks < KSTEPS; ks++) {
                qf[mt][ks][hr] = src ? src[ks * 8 + t4] : 0u;
                qf[mt][ks][hr + 2] = src ? src[ks * 8 + 4 + t4] : 0u;
            }
        }

    float oacc[2][8][4];
#pragma unroll
    for (int mt = 0; mt < 2; mt++)
#pragma unroll
        for (int nt = 0; nt < 8; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                oacc[mt][nt][e] = 0.0f;

    /* softmax role: 8 threads per row, 4 keys each */
    const int srow = tid >> 3, skey = (tid & 7) * 4;
    const int sr = mc * BM + srow;
    const int si = sr < p.M ? sr / p.H : 0;

    for (int j = 0; j < ntiles; j++) {
        const int stage = j & 1;
        cp_async_wait_all();
        __syncthreads(); /* tile j landed; PV(j-1) done: the other stage, red and p are free */
        if (j + 1 < ntiles) {
            vattn_load_tile(p, sm, stage ^ 1, j + 1, tid);
            cp_async_commit();
        }
        /* ring: tile j+2's slots (loaded one tile ago) go to smem, read after the next
         * barrier; tile j+3's load is issued now and has a whole tile to arrive */
        if (warp == 0) {
            sm.slots[(j + 2) & 3][lane] = pref;
            /* and tile j+2's rows start their way into L2 now: with only two smem stages
             * (the 99 KB limit) this is what keeps a second tile of HBM reads in flight */
            if (pref >= 0) {
                const char *row = reinterpret_cast<const char *>(p.kv + pref * p.kv_stride);
#pragma unroll
                for (int ln = 0; ln < QK * 2 / 128 + 1; ln++)
                    asm volatile("prefetch.global.L2 [%0];\n" ::"l"(row + min(ln * 128, QK * 2 - 1)));
            }
            pref = vattn_ring_slot(p, sm, start, key_begin + (int64_t)(j + 3) * BN + lane, key_end);
        }

        /* S partial = Q[:, kq-quarter] . K[nh-half keys, kq-quarter]^T */
        float sacc[2][2][4];
#pragma unroll
        for (int mt = 0; mt < 2; mt++)
#pragma unroll
            for (int nt = 0; nt < 2; nt++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    sacc[mt][nt][e] = 0.0f;
        const uint32_t kbase = smem_u32(
            &sm.kv[stage][nh * 16 + (lane & 7) + ((lane >> 4) << 3)][kq * (KSTEPS * 16) + ((lane >> 3) & 1) * 8]);
#pragma unroll
        for (int ks = 0; ks < KSTEPS; ks++) {
            uint32_t b0, b1, b2, b3;
            ldsm_x4(kbase + ks * 32, b0, b1, b2, b3);
#pragma unroll
            for (int mt = 0; mt < 2; mt++) {
                mma16816<FP16>(sacc[mt][0], qf[mt][ks], b0, b1);
                mma16816<FP16>(sacc[mt][1], qf[mt][ks], b2, b3);
            }
        }
#pragma unroll
        for (int mt = 0; mt < 2; mt++)
#pragma unroll
            for (int nt = 0; nt < 2; nt++) {
                const int col = nh * 16 + nt * 8 + 2 * t4;
                *reinterpret_cast<float2 *>(&sm.red[kq][mt * 16 + g][col]) =
                    make_float2(sacc[mt][nt][0], sacc[mt][nt][1]);
                *reinterpret_cast<float2 *>(&sm.red[kq][mt * 16 + g + 8][col]) =
                    make_float2(sacc[mt][nt][2], sacc[mt][nt][3]);
            }
        __syncthreads();

        /* online softmax of the tile, fixed summation order */
        {
            const int64_t kt0 = key_begin + (int64_t)j * BN + skey;
            float s[4], pv[4];
            float tmax = -INFINITY;
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int kc = skey + e;
                float v = ((sm.red[0][srow][kc] + sm.red[1][srow][kc]) + sm.red[2][srow][kc]) +
                          sm.red[3][srow][kc];
                const int64_t key = kt0 + e;
                bool vis = key < key_end;
                if (vis && key >= prefix)
                    vis = vattn_visible(p, b, si, key - prefix);
                s[e] = vis ? v * p.scale_log2 : -INFINITY;
                tmax = fmaxf(tmax, s[e]);
            }
            const float m_old = sm.m[srow];
            tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 1));
            tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 2));
            tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 4));
            const float m_new = fmaxf(m_old, tmax);
            const float m_use = m_new == -INFINITY ? 0.0f : m_new;
            float psum = 0.0f;
#pragma unroll
            for (int e = 0; e < 4; e++) {
                pv[e] = exp2f(s[e] - m_use);
                psum += pv[e];
            }
            psum += __shfl_xor_sync(0xffffffffu, psum, 1);
            psum += __shfl_xor_sync(0xffffffffu, psum, 2);
            psum += __shfl_xor_sync(0xffffffffu, psum, 4);
            *reinterpret_cast<uint2 *>(&sm.p[srow][skey]) =
                make_uint2(vattn_pack2<FP16>(pv[0], pv[1]), vattn_pack2<FP16>(pv[2], pv[3]));
            if ((tid & 7) == 0) {
                const float alpha = exp2f(m_old - m_use);
                sm.alpha[srow] = alpha;
                sm.l[srow] = sm.l[srow] * alpha + psum;
                sm.m[srow] = m_new;
            }
        }
        __syncthreads();

        /* O[:, warp's 64 cols] = alpha * O + P . V */
        vattn_rescale_o<BM / 16, 8>(oacc, sm.alpha, 0, lane);
        /* V rows kk*16 + (lane & 7) (+8 for lanes 8-15, 24-31), columns 64 warp + 8 (lane >> 4) */
        const uint32_t vbase =
            smem_u32(&sm.kv[stage][(lane & 7) + ((lane >> 3) & 1) * 8][warp * 64 + (lane >> 4) * 8]);
        vattn_pv_tile<FP16, BM / 16, 8>(
            oacc, [&](int row, int col) { return smem_u32(&sm.p[row][col]); },
            [&](int kk, int np) { return vbase + (kk * 16 * KV_PITCH + np * 16) * 2; }, 0, lane);
    }
    __syncthreads(); /* final m, l, bad visible to every thread */

    vattn_fast_epilogue<FP16, BM / 16, 8>(p, sm.m, sm.l, sm.bad != 0, oacc, BM, 0, warp * 64, mc, sp, b, lane,
                                           tid < BM ? tid : -1);
}

/* ------------------------------------------------------------ fast kernel v7 ---- */
#include "vattn_fast7.cuh"

/* One block per (request, row). The split weights are computed once into smem (the max over
 * splits is order-free). Then G groups of 128 threads (4 channels each) sum the partial O of
 * the splits s = group (mod G) in ascending order, 8 loads in flight per thread, and group 0
 * adds the G group sums in group order: a fixed order for a given split count, so bitwise
 * deterministic. G = 4 from COMBINE_WIDE_SPLITS splits up: with 132 splits of a 64-row
 * request one group was a chain of 17 dependent round trips to memory (-7.6 % of the whole
 * call at (1,16,4,185000)); with few splits the wide block only costs (+14 % at 2 splits). */
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

/* ------------------------------------------------------------------ host side ---- */

thread_local char g_cuda_err[256];

int vattn_cuda_fail(cudaError_t e, const char *what)
{
    snprintf(g_cuda_err, sizeof g_cuda_err, "%s: %s (%s)", what, cudaGetErrorName(e),
             cudaGetErrorString(e));
    return e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver ? VATTN_ERR_NO_DEVICE
                                                                        : VATTN_ERR_CUDA;
}

/* The fast kernel's grid for these sizes. Workspace and launch both come from here, so the
 * split count seen by vattn_workspace_size() is the one the call uses on the same device. */
struct FastPlan {
    int variant; /* 3 = vattn_fast_kernel (32 rows), 7 = vattn_fast7_kernel (64 rows) */
    int mchunks, nsplit, tiles_per_split, mpad;
    size_t ws_bytes;
};

/* Kernel variant for these sizes: v7 (64 rows per block) once a request has more than 32
 * (token, head) rows, v3 below that (a 64-row block would be mostly padding).
 * VATTN_VARIANT=3|7 (dev knob, read per call, like VATTN_FORCE_NSPLIT) forces one. */
int vattn_variant(const vattn_args *a)
{
    const char *force = getenv("VATTN_VARIANT");
    if (force && (atoi(force) == 3 || atoi(force) == 7))
        return atoi(force);
    return a->q_len * a->num_heads > BM ? 7 : 3;
}

int vattn_sm_count(void)
{
    int dev = 0, n = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n < 1) {
        cudaGetLastError(); /* do not leave a sticky-looking error for the caller */
        return 1;
    }
    return n;
}

FastPlan vattn_plan(const vattn_args *a, int sms)
{
    FastPlan pl;
    const int M = a->q_len * a->num_heads;
    pl.variant = vattn_variant(a);
    const int bm = pl.variant == 3 ? BM : BM7;
    pl.mchunks = (M + bm - 1) / bm;
    pl.mpad = pl.mchunks * bm;
    /* The hint caps the split count (no point splitting 100 keys 30 ways); without one the
     * grid is sized for the GPU alone. Never num_slots: a replay that remaps the pool must get
     * the same partition, hence the same bits. */
    int64_t maxkv = a->max_kv_len > 0 ? a->max_kv_len : (int64_t)COMBINE_MAX_SPLITS * BN;
    if (maxkv < a->q_len)
        maxkv = a->q_len;
    const int64_t tiles = (maxkv + BN - 1) / BN;
    /* one block per SM (90-99 KB smem, 256 threads of 230+ regs): fill one wave */
    int64_t blocks = (int64_t)a->bs * pl.mchunks;
    int64_t ns = blocks >= sms ? 1 : sms / blocks;
    const char *force = getenv("VATTN_FORCE_NSPLIT"); /* dev harness knob, not ABI */
    if (force && atoi(force) > 0)
        ns = atoi(force);
    if (ns > tiles)
        ns = tiles;
    if (ns > COMBINE_MAX_SPLITS)
        ns = COMBINE_MAX_SPLITS;
    if (ns < 1)
        ns = 1;
    pl.tiles_per_split = (int)((tiles + ns - 1) / ns);
    pl.nsplit = (int)((tiles + pl.tiles_per_split - 1) / pl.tiles_per_split);
    if (pl.nsplit < 1)
        pl.nsplit = 1;
    pl.ws_bytes = pl.nsplit == 1 ? 0
                                 : (size_t)a->bs * pl.nsplit * pl.mpad * (DV * sizeof(float) + sizeof(float2));
    return pl;
}

VattnParams vattn_params(const vattn_args *a)
{
    VattnParams p;
    p.q = (const uint16_t *)a->q;
    p.q_st = a->q_stride_t;
    p.q_sh = a->q_stride_h;
    p.kv = (const uint16_t *)a->kv_cache;
    p.kv_stride = a->kv_stride;
    p.indptr = a->kv_indptr;
    p.indices = a->kv_indices;
    p.idx64 = a->index_type == VATTN_INDEX_INT64;
    p.vis = a->visibility;
    p.o = (uint16_t *)a->o;
    p.o_st = a->o_stride_t;
    p.o_sh = a->o_stride_h;
    p.lse = a->lse;
    p.bs = a->bs;
    p.q_len = a->q_len;
    p.H = a->num_heads;
    p.M = a->q_len * a->num_heads;
    p.num_slots = a->num_slots;
    p.sm_scale = a->sm_scale;
    p.scale_log2 = a->sm_scale * 1.4426950408889634f;
    p.mchunks = p.nsplit = p.tiles_per_split = p.mpad = 0;
    p.ws_o = nullptr;
    p.ws_ml = nullptr;
    return p;
}

template <int FP16> int vattn_launch_fast(const vattn_args *a, void *ws, cudaStream_t st)
{
    const FastPlan pl = vattn_plan(a, vattn_sm_count());
    VattnParams p = vattn_params(a);
    p.mchunks = pl.mchunks;
    p.nsplit = pl.nsplit;
    p.tiles_per_split = pl.tiles_per_split;
    p.mpad = pl.mpad;
    if (pl.nsplit > 1) {
        p.ws_o = (float *)ws;
        p.ws_ml = (float2 *)((char *)ws + (size_t)a->bs * pl.nsplit * pl.mpad * DV * sizeof(float));
    }
    cudaError_t e;
    if (pl.variant == 7) {
        void (*kern)(VattnParams) = vattn_fast7_kernel<FP16>;
        e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sizeof(FastSmem7));
        if (e != cudaSuccess)
            return vattn_cuda_fail(e, "cudaFuncSetAttribute(vattn_fast7_kernel)");
        kern<<<dim3(pl.mchunks, pl.nsplit, a->bs), NTHREADS, sizeof(FastSmem7), st>>>(p);
        if ((e = cudaGetLastError()) != cudaSuccess)
            return vattn_cuda_fail(e, "launch vattn_fast7_kernel");
    } else {
        e = cudaFuncSetAttribute(vattn_fast_kernel<FP16>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 (int)sizeof(FastSmem));
        if (e != cudaSuccess)
            return vattn_cuda_fail(e, "cudaFuncSetAttribute(vattn_fast_kernel)");
        vattn_fast_kernel<FP16><<<dim3(pl.mchunks, pl.nsplit, a->bs), NTHREADS, sizeof(FastSmem), st>>>(p);
        if ((e = cudaGetLastError()) != cudaSuccess)
            return vattn_cuda_fail(e, "launch vattn_fast_kernel");
    }
    if (pl.nsplit > 1) {
        if (pl.nsplit >= COMBINE_WIDE_SPLITS)
            vattn_combine_kernel<FP16, 4><<<dim3(p.M, a->bs), 512, 0, st>>>(p);
        else
            vattn_combine_kernel<FP16, 1><<<dim3(p.M, a->bs), 128, 0, st>>>(p);
        if ((e = cudaGetLastError()) != cudaSuccess)
            return vattn_cuda_fail(e, "launch vattn_combine_kernel");
    }
    return VATTN_OK;
}

template <int FP16> int vattn_launch_ref(const vattn_args *a, cudaStream_t st)
{
    VattnParams p = vattn_params(a);
    vattn_ref_kernel<FP16><<<dim3(a->num_heads, a->bs * a->q_len), REF_THREADS, 0, st>>>(p);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return vattn_cuda_fail(e, "launch vattn_ref_kernel");
    return VATTN_OK;
}

int vattn_device_ok(void)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n < 1) {
        if (e == cudaSuccess)
            e = cudaErrorNoDevice;
        return vattn_cuda_fail(e, "cudaGetDeviceCount");
    }
    return VATTN_OK;
}

} /* namespace */

static_assert(sizeof(FastSmem) <= 99 * 1024, "sm_120 allows at most 99 KB of shared memory per block");
static_assert(sizeof(FastSmem7) <= 99 * 1024, "sm_120 allows at most 99 KB of shared memory per block");

extern "C" {

VATTN_API int vattn_abi_version(void) { return VATTN_ABI_VERSION; }

VATTN_API const char *vattn_backend(void) { return "cuda"; }

VATTN_API const char *vattn_status_string(int status) { return vattn_status_message(status); }

VATTN_API const char *vattn_last_cuda_error(void) { return g_cuda_err; }

VATTN_API size_t vattn_workspace_size(const vattn_args *a)
{
    if (!a || a->bs < 1 || a->q_len < 1 || a->q_len > VATTN_MAX_Q_LEN || a->num_heads < 1 ||
        a->num_heads > VATTN_MAX_HEADS || a->num_slots < 1 || a->max_kv_len < 0)
        return (size_t)-1;
    return vattn_plan(a, vattn_sm_count()).ws_bytes;
}

VATTN_API int vattn_verify(const vattn_args *a, void *workspace, size_t workspace_bytes,
                           void *stream)
{
    g_cuda_err[0] = 0;
    int rc = vattn_check_args(a, workspace, workspace_bytes, 1);
    if (rc)
        return rc;
    if ((rc = vattn_device_ok()))
        return rc;
    cudaStream_t st = (cudaStream_t)stream;
    return a->dtype == VATTN_DTYPE_FP16 ? vattn_launch_fast<1>(a, workspace, st)
                                        : vattn_launch_fast<0>(a, workspace, st);
}

VATTN_API int vattn_verify_reference(const vattn_args *a, void *workspace,
                                     size_t workspace_bytes, void *stream)
{
    g_cuda_err[0] = 0;
    int rc = vattn_check_args(a, workspace, workspace_bytes, 1);
    if (rc)
        return rc;
    if ((rc = vattn_device_ok()))
        return rc;
    cudaStream_t st = (cudaStream_t)stream;
    return a->dtype == VATTN_DTYPE_FP16 ? vattn_launch_ref<1>(a, st) : vattn_launch_ref<0>(a, st);
}

} /* extern "C" */
