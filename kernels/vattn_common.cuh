/*
 * vattn_common.cuh — device code shared by every kernel of libverify_attn.so: the kernel
 * parameter block (VattnParams), dtype conversions, the key source and mask source of both
 * calling conventions (vattn_verify: drafts in the pool, a [q_len][q_len] visibility matrix;
 * vattn_extend: drafts in k_extend, SGLang's flattened custom mask), the split rule, the
 * ldmatrix / mma.sync / cp.async wrappers, the swizzled stages' ldmatrix bases (the layout
 * itself is vattn_swizzle.h), the slot ring, and the P V, rescale and epilogue steps the two
 * fast kernels (v3 in vattn_fast3.cuh, v7 in vattn_fast7.cuh) share. Kept in one header so
 * the rules that decide which keys a request has, where each lives, which a query sees and
 * which slots are valid are written once for every kernel and both conventions.
 * Only sm_120-legal instructions (mma.sync, ldmatrix, cp.async): no wgmma, tcgen05 or TMA.
 * Header of the single translation unit verify_attn.cu (everything in an anonymous namespace).
 */
#ifndef VATTN_COMMON_CUH
#define VATTN_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "verify_attn.h"
#include "vattn_swizzle.h"

namespace {

constexpr int QK = VATTN_HEAD_DIM_QK;
constexpr int DV = VATTN_HEAD_DIM_V;

/* ---------------------------------------------------------------- shared helpers ---- */

/* Programmatic dependent launch (PTX griddepcontrol, sm_90 and later, sm_120 included): the fast
 * and combine kernels are launched with programmaticStreamSerializationAllowed, so their blocks
 * may start while the previous kernel of the stream is still running (their launch and block
 * scheduling overlap that kernel's tail). vattn_pdl_wait() comes first in each of them, before
 * ANY global read or write (the inputs may come from the previous kernel, which may also still
 * read what we are about to write): it returns once every prerequisite grid has completed and
 * its memory is visible. vattn_pdl_trigger() lets the next kernel of the stream be launched
 * early (it waits the same way; one launched without the attribute waits for us to finish as
 * usual). The fast kernels trigger after their KV loop, not at their start, so the combine's
 * blocks are placed once the fast blocks are near their end (a guess at why PDL cost 3 us at
 * (1,16,16,4096), whose split grid fills every SM: moving the trigger left 2.2 us of it, so the
 * host launches such grids without PDL, verify_attn.cu). Without the attribute both return at
 * once. */
__device__ __forceinline__ void vattn_pdl_wait() { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }
__device__ __forceinline__ void vattn_pdl_trigger() { asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory"); }

/* One call of either convention. The kernels only see it through the key source and mask
 * source below, so vattn_verify and vattn_extend share every kernel and, for the same keys in
 * the same order, every bit of the result. */
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
    /* extend convention (vattn_extend_args), ext = 1: draft key d of request b is row
     * b * q_len + d of kext, kv_indptr / kv_indices cover the prefix only, qo_indptr must be
     * b * q_len, and the mask is SGLang's flattened rows (cmask, mask_indptr; NULL = causal) */
    int ext;
    const uint16_t *kext;
    int64_t kext_stride;
    const int32_t *qo_indptr;
    const uint8_t *cmask;
    const int64_t *mask_indptr;
    /* fast kernel plan */
    int mchunks, nsplit, tiles_per_split, mpad;
    int dev_stage; /* dev build only (VATTN_DEV_STAGE, timing variants): 1 = every fast block returns
                      at once, 2 = no KV tiles (prologue and epilogue only), 3 = no KV tiles and no
                      epilogue (prologue only); 0 = the real call */
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

/* Request b's keys: kv_len of them, the first `prefix` through kv_indices[start ..], then its
 * q_len draft keys. vattn_verify: the range kv_indices[indptr[b] .. indptr[b+1]) holds all
 * kv_len keys (the last q_len are the drafts, also through kv_indices). vattn_extend: the range
 * is the prefix only and the drafts are rows of kext. False when the request's device data is
 * inconsistent (kv_indptr, and for vattn_extend qo_indptr / mask_indptr): such a request gets
 * NaN and none of its indices or mask bytes are read. Bounding every range by its array's last
 * entry (indptr[bs], mask_indptr[bs]) keeps every read inside the arrays the caller described.
 * An extend prefix is capped below 2^31 - 2^8 keys so key positions stay in 32 bits (v7). */
__device__ __forceinline__ bool vattn_request_range(const VattnParams &p, int b, int64_t *start,
                                                    int64_t *kv_len, int64_t *prefix)
{
    const int64_t s = p.indptr[b], e = p.indptr[b + 1], total = p.indptr[p.bs];
    bool ok = p.indptr[0] == 0 && s >= 0 && e >= s && e <= total;
    *start = s;
    if (!p.ext) {
        *kv_len = e - s;
        *prefix = e - s - p.q_len;
        return ok && e - s >= p.q_len;
    }
    *prefix = e - s;
    *kv_len = e - s + p.q_len;
    ok = ok && e - s < ((int64_t)1 << 31) - 256 && p.qo_indptr[b] == (int64_t)b * p.q_len &&
         p.qo_indptr[b + 1] == (int64_t)(b + 1) * p.q_len;
    if (ok && p.cmask) {
        const int64_t m0 = p.mask_indptr[b], m1 = p.mask_indptr[b + 1], mend = p.mask_indptr[p.bs];
        ok = m0 >= 0 && m1 >= m0 && m1 - m0 >= (int64_t)p.q_len * *kv_len && m1 <= mend;
    }
    return ok;
}

/* The mask source: draft key jj is visible to draft query i of a request iff
 * rows[i * stride + jj] != 0, or jj <= i (causal) when rows is NULL. vattn_verify:
 * visibility[b] ([q_len][q_len]); vattn_extend: custom_mask from mask_indptr[b], rows of
 * prefix + q_len entries of which only the draft columns (from `prefix` on) are read. Only for a
 * request vattn_request_range accepted. */
struct VattnMask {
    const uint8_t *rows;
    int64_t stride;
};

__device__ __forceinline__ VattnMask vattn_mask(const VattnParams &p, int b, int64_t prefix)
{
    VattnMask m;
    if (p.ext) {
        m.stride = prefix + p.q_len;
        m.rows = p.cmask ? p.cmask + p.mask_indptr[b] + prefix : nullptr;
    } else {
        m.stride = p.q_len;
        m.rows = p.vis ? p.vis + (int64_t)b * p.q_len * p.q_len : nullptr;
    }
    return m;
}

__device__ __forceinline__ bool vattn_visible(const uint8_t *rows, int64_t stride, int i, int64_t jj)
{
    if (!rows)
        return jj <= i;
    return rows[(int64_t)i * stride + jj] != 0;
}

/* The key source for draft keys of the extend convention: row d of request b in kext. */
__device__ __forceinline__ const uint16_t *vattn_draft_row(const VattnParams &p, int b, int64_t d)
{
    return p.kext + ((int64_t)b * p.q_len + d) * p.kext_stride;
}

/* ------------------------------------------------------------ fast-kernel tiles ---- */

constexpr int BN = 32;            /* keys per KV tile */
constexpr int NWARPS = 8;
constexpr int NTHREADS = NWARPS * 32;
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
 * nothing); prefix = keys before the draft block; idx_end = keys before it have a kv_indices
 * entry (key_end for vattn_verify, at most prefix for vattn_extend); ntiles = BN-key tiles of
 * the split. */
struct VattnBlockKeys {
    int64_t start, prefix, key_begin, key_end, idx_end;
    int ntiles;
    bool ok;
};

__device__ __forceinline__ VattnBlockKeys vattn_block_keys(const VattnParams &p, int b, int sp)
{
    VattnBlockKeys k;
    int64_t kv_len = 0;
    k.ok = vattn_request_range(p, b, &k.start, &kv_len, &k.prefix);
    k.key_begin = k.key_end = 0;
    if (k.ok)
        vattn_split_range(kv_len, sp, p.nsplit, &k.key_begin, &k.key_end);
    k.idx_end = p.ext && k.prefix < k.key_end ? k.prefix : k.key_end;
    k.ntiles = k.key_end > k.key_begin ? (int)((k.key_end - k.key_begin + BN - 1) / BN) : 0;
#ifdef VATTN_DEV
    if (p.dev_stage == 2 || p.dev_stage == 3) /* timing variants: no KV tiles */
        k.ntiles = 0;
#endif
    return k;
}

constexpr int CHUNKS_PER_ROW = QK * 2 / 16; /* 72 cp.async chunks of 16 B per KV row */

__device__ __forceinline__ uint32_t smem_u32(const void *ptr)
{
    return (uint32_t)__cvta_generic_to_shared(ptr);
}

/* The KV stages' XOR swizzle (vattn_swizzle.h: vattn_swz, VATTN_SWEEP_CHUNK, vattn_v3_kchunk).
 * This lane's 4 ldmatrix base addresses for a sweep over 16-byte chunks 8 a + b + 2 s of rows
 * with r & 7 = r7: step s reads base[s & 3] + 128 (s >> 2), immediate offsets only. */
static_assert(QK * 2 == VATTN_SWZ_ROW_BYTES && CHUNKS_PER_ROW == VATTN_SWZ_CHUNKS, "vattn_swizzle.h: KV row size");
__device__ __forceinline__ void vattn_sweep_bases(uint32_t row_addr, int a, int b, int r7, uint32_t (&base)[4])
{
#pragma unroll
    for (int q = 0; q < 4; q++)
        base[q] = row_addr + (VATTN_SWEEP_CHUNK(a, b, r7, q) << 4);
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
/* One loader thread's share of KV row `row` of a tile: chunks c0 + 8 i (i = 0..8) of the cache
 * row krow into the XOR-swizzled stage at smem address `stage` (vattn_swizzle.h: stored at
 * 8 i + (c0 ^ (row & 7)), so one address and immediate offsets). A row without an address
 * (krow NULL) is zero-filled from a valid one (the pool's row 0). v3's and v7's loaders both
 * copy tiles this way: 8 threads per row. */
__device__ __forceinline__ void vattn_copy_row(const VattnParams &p, uint32_t stage, const uint16_t *krow, int row,
                                               int c0)
{
    static_assert(CHUNKS_PER_ROW % 8 == 0, "8 loader threads per KV row");
    const uint16_t *src = (krow ? krow : p.kv) + c0 * 8;
    const int n = krow ? 16 : 0;
    const uint32_t dst = stage + vattn_swz(row, c0);
#pragma unroll
    for (int i = 0; i < CHUNKS_PER_ROW / 8; i++)
        cp_async16(dst + i * 128, src + i * 64, n);
}
/* Waits for this thread's committed cp.async groups only: copies issued since its last commit
 * (v8's KV copies, tracked by an mbarrier instead) are not waited for. */
__device__ __forceinline__ void cp_async_wait_committed() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }

/* Draft keys of request b that no query with a row in block row chunk mc (bm rows) sees
 * (mask: the request's mask source, vattn_mask): hidden[d] = 1 for draft key d (warp 0 writes
 * all VATTN_MAX_Q_LEN entries, 0 when the block's split holds no draft key). The slot ring
 * drops them (vattn_checked_row): their rows are zero-filled, never read. Why: such a key has
 * P = 0 in every row of the block, but mma.sync computes 0 * V, so an Inf / NaN V row (a draft
 * slot the caller never wrote) would turn the outputs into NaN where the reference skips the
 * key. For finite V it changes nothing but possibly the sign of an exact zero (O gains 0 * 0
 * instead of 0 * V; the key's S is masked to -inf in every row of the block whatever K holds).
 * Queries of one block that differ in what they see still share the tile: a key seen by one
 * query of the block is loaded for all. A byte per key, not a bit mask: one LDS.U8 in the
 * ring, no 64-bit shifts (v7 runs at the register limit). */
__device__ __forceinline__ void vattn_hidden_drafts(const VattnParams &p, uint8_t *hidden, VattnMask mask, int mc,
                                                    int bm, bool has_draft, int lane)
{
    bool seen0 = false, seen1 = false; /* draft keys lane, lane + 32 seen by a query of the block */
    if (has_draft) { /* uniform over the warp */
        const int r0 = mc * bm, r1 = min(p.M, r0 + bm) - 1;
        /* no early exit: the mask loads of several queries are in flight together (this
         * runs in the block's prologue, on the path to the first tile) */
#pragma unroll 4
        for (int i = r0 / p.H; i <= r1 / p.H; i++) {
            seen0 |= lane < p.q_len && vattn_visible(mask.rows, mask.stride, i, lane);
            seen1 |= lane + 32 < p.q_len && vattn_visible(mask.rows, mask.stride, i, lane + 32);
        }
    }
    hidden[lane] = has_draft && lane < p.q_len && !seen0;
    hidden[lane + 32] = has_draft && lane + 32 < p.q_len && !seen1;
}

/* The key source of the slot ring: the cache row of key `key` of request b (counted from the
 * same origin as key_end and prefix), v = its raw kv_indices entry (ignored where the key has
 * none: a draft key of vattn_extend, whose row is in kext). NULL (zero-fill) past the split's
 * end, for a slot outside the pool (which also raises sm.bad: the request becomes NaN; checked
 * first, so a bad slot is found even when hidden) and for a draft key in sm.hidden
 * (vattn_hidden_drafts). The ring holds row addresses, so the loaders never ask where a key
 * lives. */
template <class Smem, class I>
__device__ __forceinline__ const uint16_t *vattn_checked_row(const VattnParams &p, Smem &sm, int64_t v, I key,
                                                             I key_end, I prefix, int b)
{
    if (key >= key_end)
        return nullptr;
    const I d = key - prefix; /* < q_len <= 64: key < key_end <= prefix + q_len */
    if (p.ext && d >= 0)
        return sm.hidden[d] ? nullptr : vattn_draft_row(p, b, d);
    if (v < 0 || v >= p.num_slots) {
        sm.bad = 1;
        return nullptr;
    }
    if (d >= 0 && sm.hidden[d])
        return nullptr;
    return p.kv + v * p.kv_stride;
}

/* The raw kv_indices entry of key `key` of the request (0 where it has none: past the split,
 * or from idx_end on, VattnBlockKeys). Apart from vattn_checked_row so the prologues can
 * read the first tiles' entries while another warp reads the mask (vattn_hidden_drafts, which
 * the check needs): two round trips to memory in parallel instead of one after the other. */
__device__ __forceinline__ int64_t vattn_ring_slot(const VattnParams &p, int64_t start, int64_t key, int64_t key_end,
                                                   int64_t idx_end)
{
    return key < key_end && key < idx_end ? vattn_slot(p, start + key) : 0;
}

/* Row of key `key` of the request for the slot ring (vattn_checked_row), its kv_indices entry
 * read here (vattn_ring_slot). The ring is filled two tiles ahead by warp 0 so no cp.async
 * waits on a kv_indices load. */
template <class Smem>
__device__ __forceinline__ const uint16_t *vattn_ring_row(const VattnParams &p, Smem &sm, int64_t start, int64_t key,
                                                          int64_t key_end, int64_t idx_end, int64_t prefix, int b)
{
    if (key >= key_end)
        return nullptr;
    return vattn_checked_row(p, sm, vattn_ring_slot(p, start, key, key_end, idx_end), key, key_end, prefix, b);
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
            if (mc * bm + row >= p.M) /* padding rows: the combine never reads them */
                continue;
            float *o = p.ws_o + (pbase + row) * DV + col0 + 2 * t4;
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
                *reinterpret_cast<float2 *>(o + nt * 8) = make_float2(oacc[mt][nt][2 * hr], oacc[mt][nt][2 * hr + 1]);
        }
    if (srow >= 0 && mc * bm + srow < p.M)
        p.ws_ml[pbase + srow] = make_float2(nan_out ? NAN : m[srow], l[srow]);
}

} /* namespace */

#endif /* VATTN_COMMON_CUH */
