/*
 * vattn_fast3.cuh — v3, the fast verify-attention kernel (vattn_verify) for requests with at
 * most 32 (token, head) rows (M = q_len * H <= 32), where v7's 64-row block would be mostly
 * padding. Flash-decode split-K: a block owns 32 rows of one request and one contiguous range
 * of its KV sequence (grid: row chunk, split, request). KV tiles of 32 rows arrive through
 * kv_indices by cp.async (2 stages, XOR-swizzled as v7's: vattn_swz); each smem tile
 * serves both K (576 cols, S = Q K^T) and V (first 512 cols, O += P V); bf16/fp16 mma.sync
 * m16n8k16 with ldmatrix operands, fp32 accumulators, online softmax in fp32 (log2 domain).
 * Q fragments stay in registers; 8 warps = 4 k-quarters x 2 key halves, the partial S summed
 * in fixed order through smem; three block barriers per tile. A k-quarter is every fourth k16
 * step (kq, kq + 4, ..., kq + 32), not 144 contiguous columns: in the swizzled stage its
 * ldmatrix sweep is then one base address per lane plus immediate offsets (a contiguous
 * quarter starts at chunk 18 kq, where the XOR breaks the sweep's fixed stride). The blocks
 * of one request that share a KV range have adjacent blockIdx.x, so re-reads of a KV tile
 * hit L2.
 * Shared steps (slot ring, P V, epilogue) are in vattn_common.cuh.
 */
#ifndef VATTN_FAST3_CUH
#define VATTN_FAST3_CUH

#include "vattn_common.cuh"

namespace {

constexpr int BM = 32;            /* (token, head) rows per block */
constexpr int P_PITCH = BN + 8;
constexpr int KSTEPS = QK / 16 / 4; /* 9 k16 steps per k-quarter of the S product (steps kq + 4 ks) */

struct FastSmem {
    uint16_t kv[2][BN][QK];        /* 2 cp.async stages, swizzled (vattn_swz) */
    float red[4][BM][RED_PITCH];   /* S partials of the 4 k-quarters, summed in fixed order */
    uint16_t p[BM][P_PITCH];       /* P in the input dtype, A operand of O += P V */
    float m[BM], l[BM], alpha[BM]; /* online-softmax state (m in log2 units) */
    const uint16_t *rows[4][BN];   /* slot ring: tile t's cache rows in rows[t & 3], NULL = zero-fill */
    VattnMask mask;                /* the request's mask source (vattn_mask) */
    int bad;
    uint8_t hidden[VATTN_MAX_Q_LEN]; /* draft keys no row of the block sees (vattn_hidden_drafts) */
};

/* Issues the cp.async copies of KV tile `tile` into `stage` from the slot ring: thread t copies
 * its share of row t >> 3 (vattn_copy_row: 8 threads per row, one slot read and one address per
 * thread). */
__device__ __forceinline__ void vattn_load_tile(const VattnParams &p, FastSmem &sm, int stage, int tile, int tid)
{
    static_assert(BN * 8 == NTHREADS, "v3 loader: the block copies a tile, 8 threads per KV row");
    const int row = tid >> 3;
    vattn_copy_row(p, smem_u32(&sm.kv[stage][0][0]), sm.rows[tile & 3][row], row, tid & 7);
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
    vattn_pdl_wait(); /* before any global access */
#ifdef VATTN_DEV
    if (p.dev_stage == 1) /* timing variant: the launch alone */
        return;
#endif
    /* Q fragments of this warp's k-quarter for the block's 32 rows, kept in registers for the
     * whole KV range: A operand of m16n8k16 (rows g / g+8, cols 2*t4 / 2*t4+8). Loaded first:
     * they depend on nothing the prologue reads, so they travel while kv_indptr, kv_indices and
     * the first KV tile make their dependent round trips (as the last loads before the loop they
     * were on its critical path: 36 KB of Q per block against a 36 KB tile). */
    uint32_t qf[2][KSTEPS][4];
#pragma unroll
    for (int mt = 0; mt < 2; mt++)
#pragma unroll
        for (int hr = 0; hr < 2; hr++) {
            const int r = mc * BM + mt * 16 + g + hr * 8;
            const uint32_t *src = nullptr;
            if (r < p.M) {
                const int i = r / p.H, h = r % p.H;
                src = reinterpret_cast<const uint32_t *>(p.q + ((int64_t)b * p.q_len + i) * p.q_st + h * p.q_sh +
                                                         kq * 16);
            }
#pragma unroll
            for (int ks = 0; ks < KSTEPS; ks++) { /* k16 step kq + 4 ks: 32 uint32 further per ks */
                qf[mt][ks][hr] = src ? src[ks * 32 + t4] : 0u;
                qf[mt][ks][hr + 2] = src ? src[ks * 32 + 4 + t4] : 0u;
            }
        }

    const VattnBlockKeys bk = vattn_block_keys(p, b, sp);
    const int64_t start = bk.start, prefix = bk.prefix, key_begin = bk.key_begin, key_end = bk.key_end;
    const int64_t idx_end = bk.idx_end;
    const int ntiles = bk.ntiles;
    const bool ok = bk.ok;

    if (tid < BM) {
        sm.m[tid] = -INFINITY;
        sm.l[tid] = 0.0f;
    }
    if (tid == 0)
        sm.bad = !ok;
    /* slot ring prologue: warp 0 reads the kv_indices entries of tiles 0-2 while warp 1 reads
     * the mask (hidden draft keys); then warp 0 checks them into the ring: tiles 0 and 1 into
     * smem, tile 2 in a register */
    int64_t raw[3] = {0, 0, 0};
    if (warp == 0) {
#pragma unroll
        for (int t = 0; t < 3; t++)
            raw[t] = vattn_ring_slot(p, start, key_begin + t * BN + lane, key_end, idx_end);
    } else if (warp == 1) {
        const VattnMask mask = ok ? vattn_mask(p, b, prefix) : VattnMask{nullptr, 0};
        if (lane == 0)
            sm.mask = mask;
        vattn_hidden_drafts(p, sm.hidden, mask, mc, BM, ntiles > 0 && key_end > prefix, lane);
    }
    __syncthreads();
    const uint16_t *pref = nullptr;
    if (warp == 0) {
        sm.rows[0][lane] = vattn_checked_row(p, sm, raw[0], key_begin + lane, key_end, prefix, b);
        sm.rows[1][lane] = vattn_checked_row(p, sm, raw[1], key_begin + BN + lane, key_end, prefix, b);
        pref = vattn_checked_row(p, sm, raw[2], key_begin + 2 * BN + lane, key_end, prefix, b);
    }
    __syncthreads();
    if (ntiles > 0) {
        vattn_load_tile(p, sm, 0, 0, tid);
        cp_async_commit();
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
            sm.rows[(j + 2) & 3][lane] = pref;
            /* and tile j+2's rows start their way into L2 now: with only two smem stages
             * (the 99 KB limit) this is what keeps a second tile of HBM reads in flight */
            if (pref) {
                const char *row = reinterpret_cast<const char *>(pref);
#pragma unroll
                for (int ln = 0; ln < QK * 2 / 128 + 1; ln++)
                    asm volatile("prefetch.global.L2 [%0];\n" ::"l"(row + min(ln * 128, QK * 2 - 1)));
            }
            pref = vattn_ring_row(p, sm, start, key_begin + (int64_t)(j + 3) * BN + lane, key_end, idx_end, prefix, b);
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
        /* lane's K row nh*16 + (lane & 7) + 8 (lane >> 4); k16 step kq + 4 ks, half (lane >> 3) & 1,
         * is stored at vattn_v3_kchunk + 8 ks */
        const uint32_t kbase = smem_u32(&sm.kv[stage][nh * 16 + (lane & 7) + ((lane >> 4) << 3)][0]) +
                               (vattn_v3_kchunk(kq, (lane >> 3) & 1, lane & 7) << 4);
#pragma unroll
        for (int ks = 0; ks < KSTEPS; ks++) {
            uint32_t b0, b1, b2, b3;
            ldsm_x4(kbase + ks * 128, b0, b1, b2, b3);
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
                    vis = vattn_visible(sm.mask.rows, sm.mask.stride, si, key - prefix);
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
            /* the 8 lanes of the row have read sm.m[srow] (m_old) before lane 0 replaces it:
             * __shfl_xor_sync orders execution, not shared memory (racecheck's WAR hazard) */
            __syncwarp();
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
        /* V rows kk*16 + (lane & 7) (+8 for lanes 8-15, 24-31), chunks 8 warp + (lane >> 4) + 2 np */
        uint32_t vb[4];
        vattn_sweep_bases(smem_u32(&sm.kv[stage][(lane & 7) + ((lane >> 3) & 1) * 8][0]), warp, lane >> 4, lane & 7,
                          vb);
        vattn_pv_tile<FP16, BM / 16, 8>(
            oacc, [&](int row, int col) { return smem_u32(&sm.p[row][col]); },
            [&](int kk, int np) { return vb[np] + kk * (16 * QK * 2); }, 0, lane);
    }
    __syncthreads(); /* final m, l, bad visible to every thread */
    vattn_pdl_trigger(); /* the combine kernel may be launched (it waits for this grid to end) */
#ifdef VATTN_DEV
    if (p.dev_stage == 3) /* timing variant: no epilogue */
        return;
#endif

    vattn_fast_epilogue<FP16, BM / 16, 8>(p, sm.m, sm.l, sm.bad != 0, oacc, BM, 0, warp * 64, mc, sp, b, lane,
                                           tid < BM ? tid : -1);
}

} /* namespace */

#endif /* VATTN_FAST3_CUH */
