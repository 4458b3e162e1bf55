/*
 * vattn_fast5.cuh — v5 of the fast verify-attention kernel: the tile pipeline of v4 turned
 * so that the tensor pipe always has two independent streams of work.
 *
 * Included by verify_attn.cu inside its anonymous namespace (it uses that file's helpers:
 * ldmatrix/mma/cp.async wrappers, request and split ranges, the visibility rule).
 *
 * Why: v4 ran each 32-key tile as S -> softmax -> P.V with two block barriers, so each phase
 * waited on the latency of the one before (4 dependent S accumulators per warp, the kh = 1
 * warps idle during the softmax): ~5000 cycles per tile against ~1700 of MMA issue.
 * v5 (64 rows per block, 8 warps, 16-key tiles, NST cp.async stages):
 *   phase j = [ O += P(j-1) V(j-1)  interleaved with  S(j) = Q K(j)^T ] -> exchange -> softmax(j)
 * The P.V MMAs of the previous tile (32 independent accumulators per warp) fill the gaps of the
 * S chains of the current one. One block barrier and one pair barrier per tile:
 *   - S: warp (rg, kh) = (warp & 3, warp >> 2) owns rows rg*16..+15 and k-half kh (16 latent
 *     k16 steps with Q in registers, 2 rope steps with Q from smem), 16 keys, two accumulator
 *     chains (even / odd k steps) for ILP;
 *   - the pair (rg, 0), (rg, 1) swaps halves through smem (64-thread named barrier): kh = 0
 *     finishes rows rg*16 + g, kh = 1 rows rg*16 + 8 + g, so both warps run half the softmax
 *     with the row state (m, l) in registers;
 *   - P(j) and alpha(j) are double-buffered (P(j-1) is still being read by slower warps), the
 *     KV tile of j-1 stays resident for P V, so a tile load needs a third stage: NST = 3 or 4
 *     stages of 16 x 576 (loads issued NST - 2 tiles ahead).
 * Every shared buffer is XOR-swizzled by 16-byte chunk instead of padded (ldmatrix and the
 * fragment stores stay conflict-free) so that 4 stages fit in 99 KB.
 * Indices: warp 0 requests raw kv_indices by cp.async two tiles before it needs them, turns
 * them into range-checked slots PF tiles ahead of use and prefetches those rows into L2; the
 * tile loads of all threads then only read the slot ring (no global load on their path).
 * Fixed summation order everywhere: bitwise deterministic run to run.
 */

constexpr int BM5 = 64;                   /* (token, head) rows per block */
constexpr int BN5 = 16;                   /* keys per KV tile: one k16 step of P V */
constexpr int KS5 = DV / 16 / 2;          /* 16 latent k16 steps per k-half */
constexpr int RS5 = (QK - DV) / 16 / 2;   /* 2 rope k16 steps per k-half */
constexpr int CH5 = QK * 2 / 16;          /* 72 16-byte chunks per KV row */
constexpr int SR5 = 8;                    /* slot ring (tiles) */
constexpr int IR5 = 4;                    /* raw index ring (tiles) */
constexpr int V5_NST = 4;                 /* default stages */
constexpr int V5_PF = 4;                  /* default slot / L2 prefetch distance (tiles) */

template <int NST> struct FastSmem5 {
    uint16_t kv[NST][BN5][QK];  /* chunk c of row r at c ^ (r & 7) */
    float red[BM5][BN5];        /* S half exchange; chunk c of row r at c ^ ((r >> 1) & 3) */
    uint16_t p[2][BM5][BN5];    /* P(j) in p[j & 1]; chunk c of row r at c ^ ((r >> 2) & 1) */
    uint16_t qr[BM5][QK - DV];  /* Q rope columns; chunk c of row r at c ^ (r & 7) */
    float alpha[2][BM5];
    float2 ml[BM5];             /* final (m, l) of every row, for the epilogue */
    int64_t slots[SR5][BN5];    /* checked slot of each key, -1 = zero row */
    int64_t idx[IR5][BN5];      /* raw kv_indices (int32 or int64) as landed by cp.async */
    int bad;
};

template <int N> __device__ __forceinline__ void cp_async_wait_group()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

/* Warp 0, lane < 16: the raw kv_indices entry of key `lane` of tile `tile` into idx[tile % IR5]. */
template <class Smem>
__device__ __forceinline__ void v5_idx_async(const VattnParams &p, Smem &sm, int start, int key_begin,
                                             int key_end, int tile, int lane)
{
    const int key = key_begin + tile * BN5 + lane;
    const bool in = key < key_end;
    const uint32_t dst = smem_u32(&sm.idx[tile % IR5][lane]);
    if (p.idx64)
        cp_async8(dst, reinterpret_cast<const int64_t *>(p.indices) + (in ? start + key : 0), in ? 8 : 0);
    else
        cp_async4(dst, reinterpret_cast<const int32_t *>(p.indices) + (in ? start + key : 0), in ? 4 : 0);
}

/* Range check of a raw index: -1 past key_end or outside the pool (the latter marks the
 * request bad: its outputs become NaN). */
template <class Smem>
__device__ __forceinline__ int64_t v5_check_slot(const VattnParams &p, Smem &sm, int64_t v, int key, int key_end)
{
    if (key >= key_end)
        return -1;
    if (v < 0 || v >= p.num_slots) {
        sm.bad = 1;
        return -1;
    }
    return v;
}

/* All threads: cp.async of KV tile `tile` (16 rows x 72 chunks) into its stage, from the slot ring. */
template <int NST>
__device__ __forceinline__ void v5_load_tile(const VattnParams &p, FastSmem5<NST> &sm, int tile, int tid)
{
    uint16_t(*dst)[QK] = sm.kv[tile % NST];
    const int64_t *slots = sm.slots[tile % SR5];
#pragma unroll
    for (int k = 0; k < (BN5 * CH5 + NTHREADS - 1) / NTHREADS; k++) {
        const int c = tid + k * NTHREADS;
        if (BN5 * CH5 % NTHREADS == 0 || c < BN5 * CH5) {
            const int row = c / CH5, col = c % CH5;
            const int64_t slot = slots[row];
            const uint16_t *src = slot >= 0 ? p.kv + slot * p.kv_stride + col * 8 : p.kv;
            cp_async16(smem_u32(&dst[row][(col ^ (row & 7)) * 8]), src, slot >= 0 ? 16 : 0);
        }
    }
}

/* float offset of (row, col) in red, col even (float2 granularity) */
__device__ __forceinline__ int v5_red_off(int row, int col)
{
    return row * BN5 + ((((col >> 2) ^ ((row >> 1) & 3))) << 2) + (col & 3);
}

/* element offset of (row, col) in one P buffer, col even */
__device__ __forceinline__ int v5_p_off(int row, int col)
{
    return row * BN5 + (((col >> 3) ^ ((row >> 2) & 1)) << 3) + (col & 7);
}

/* Per-thread state of the v5 block, kept in registers across phases. */
struct V5Regs {
    uint32_t qf[KS5][4];  /* Q latent fragments: rows rg*16 + g (+8), cols kh*256 + ks*16 + .. */
    float o[4][8][4];     /* O[64 rows][warp's 64 columns], unnormalised */
    float m, l;           /* online-softmax state of row rg*16 + kh*8 + g (log2 units) */
};

/*
 * One phase of the pipeline. DO_PV: O = alpha(j-1) O + P(j-1) V(j-1). DO_S: S(j), the pair
 * exchange and the softmax of tile j, writing P(j) and alpha(j). The caller issues the loads
 * and the block barrier around it.
 */
template <int FP16, int NST, bool DO_PV, bool DO_S>
__device__ __forceinline__ void v5_phase(const VattnParams &p, FastSmem5<NST> &sm, V5Regs &R, int j,
                                         int b, int mc, int key_begin, int key_end, int prefix, int warp,
                                         int lane)
{
    const int g = lane >> 2, t4 = lane & 3, rg = warp & 3, kh = warp >> 2;
    const int x = lane & 7, bsel = (lane >> 3) & 1, hsel = lane >> 4;

    /* ---- P V operands of tile j-1 ---- */
    uint32_t pa[4][4];
    uint32_t vrow = 0;
    if constexpr (DO_PV) {
        const int pb = (j - 1) & 1;
#pragma unroll
        for (int mt = 0; mt < 4; mt++) {
            const float a0 = sm.alpha[pb][mt * 16 + g], a1 = sm.alpha[pb][mt * 16 + g + 8];
#pragma unroll
            for (int nt = 0; nt < 8; nt++) {
                R.o[mt][nt][0] *= a0;
                R.o[mt][nt][1] *= a0;
                R.o[mt][nt][2] *= a1;
                R.o[mt][nt][3] *= a1;
            }
        }
        /* A = P rows mt*16 + (lane & 7) + bsel*8, key chunk hsel (swizzled by row bit 2) */
        const uint32_t prow = smem_u32(&sm.p[pb][x + bsel * 8][0]) + ((hsel ^ ((lane >> 2) & 1)) << 4);
#pragma unroll
        for (int mt = 0; mt < 4; mt++)
            ldsm_x4(prow + mt * 16 * BN5 * 2, pa[mt][0], pa[mt][1], pa[mt][2], pa[mt][3]);
        /* B = V rows (keys) x + bsel*8, columns warp*64 + np*16 + hsel*8 */
        vrow = smem_u32(&sm.kv[(j - 1) % NST][x + bsel * 8][warp * 64]);
    }
    auto pv_np = [&](int np) {
        uint32_t b0, b1, b2, b3;
        ldsm_x4_t(vrow + (((2 * np + hsel) ^ x) << 4), b0, b1, b2, b3);
#pragma unroll
        for (int mt = 0; mt < 4; mt++) {
            mma16816<FP16>(R.o[mt][2 * np], pa[mt], b0, b1);
            mma16816<FP16>(R.o[mt][2 * np + 1], pa[mt], b2, b3);
        }
    };

    if constexpr (!DO_S) {
#pragma unroll
        for (int np = 0; np < 4; np++)
            pv_np(np);
        return;
    } else {

    /* ---- S(j): rows rg*16.., 16 keys, k-half kh; two chains (even / odd k steps) ---- */
    float sc[2][2][4];
#pragma unroll
    for (int c = 0; c < 2; c++)
#pragma unroll
        for (int nt = 0; nt < 2; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                sc[c][nt][e] = 0.0f;
    /* B = K rows (keys) x + hsel*8, chunk kh*32 + 2ks + bsel */
    const uint32_t krow = smem_u32(&sm.kv[j % NST][x + hsel * 8][0]);
    const int ky = bsel ^ x;
#pragma unroll
    for (int ks = 0; ks < KS5; ks++) {
        uint32_t b0, b1, b2, b3;
        ldsm_x4(krow + ((kh * 32 + (2 * ks & ~7) + ((2 * ks & 7) ^ ky)) << 4), b0, b1, b2, b3);
        mma16816<FP16>(sc[ks & 1][0], R.qf[ks], b0, b1);
        mma16816<FP16>(sc[ks & 1][1], R.qf[ks], b2, b3);
        if constexpr (DO_PV)
            if ((ks & 3) == 3)
                pv_np(ks >> 2);
    }
#pragma unroll
    for (int rs = 0; rs < RS5; rs++) {
        uint32_t a[4], b0, b1, b2, b3;
        const int qrow = rg * 16 + x + bsel * 8;
        ldsm_x4(smem_u32(&sm.qr[qrow][0]) + (((kh * 4 + 2 * rs + hsel) ^ x) << 4), a[0], a[1], a[2], a[3]);
        ldsm_x4(krow + ((64 + ((kh * 4 + 2 * rs + bsel) ^ x)) << 4), b0, b1, b2, b3);
        mma16816<FP16>(sc[rs & 1][0], a, b0, b1);
        mma16816<FP16>(sc[rs & 1][1], a, b2, b3);
    }

    /* ---- pair exchange: kh = 0 finishes rows rg*16 + g, kh = 1 rows rg*16 + 8 + g ---- */
    float s[2][2]; /* [nt][e] of my row */
    {
        /* kh is a run-time value: select, never index a register array with it */
        float gv[2][2], kv[2][2];
#pragma unroll
        for (int nt = 0; nt < 2; nt++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const float lo = sc[0][nt][e] + sc[1][nt][e], hi = sc[0][nt][e + 2] + sc[1][nt][e + 2];
                gv[nt][e] = kh ? lo : hi;
                kv[nt][e] = kh ? hi : lo;
            }
        const int wr = rg * 16 + (1 - kh) * 8 + g, my = rg * 16 + kh * 8 + g;
#pragma unroll
        for (int nt = 0; nt < 2; nt++)
            *reinterpret_cast<float2 *>(&sm.red[0][0] + v5_red_off(wr, nt * 8 + 2 * t4)) =
                make_float2(gv[nt][0], gv[nt][1]);
        bar_sync_named(1 + rg, 64);
#pragma unroll
        for (int nt = 0; nt < 2; nt++) {
            const float2 o = *reinterpret_cast<const float2 *>(&sm.red[0][0] + v5_red_off(my, nt * 8 + 2 * t4));
            s[nt][0] = (kv[nt][0] + o.x) * p.scale_log2;
            s[nt][1] = (kv[nt][1] + o.y) * p.scale_log2;
        }
    }

    /* ---- online softmax of my row over the tile's 16 keys ---- */
    const int Rw = rg * 16 + kh * 8 + g;
    const int kt0 = key_begin + j * BN5;
    const int lim_end = key_end - kt0, lim_pre = prefix - kt0; /* tile-relative */
    if (!(BN5 <= lim_pre && BN5 <= lim_end)) {
        const int r = mc * BM5 + Rw;
        const int i = r < p.M ? r / p.H : 0;
#pragma unroll
        for (int nt = 0; nt < 2; nt++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int kk = nt * 8 + 2 * t4 + e;
                bool vis = kk < lim_end;
                if (vis && kk >= lim_pre)
                    vis = vattn_visible(p, b, i, kk - lim_pre);
                if (!vis)
                    s[nt][e] = -INFINITY;
            }
    }
    float mx = fmaxf(fmaxf(s[0][0], s[0][1]), fmaxf(s[1][0], s[1][1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float m_new = fmaxf(R.m, mx);
    const float mu = m_new == -INFINITY ? 0.0f : m_new;
    const float alpha = exp2f(R.m - mu);
    float rs = 0.0f;
    uint16_t *pw = &sm.p[j & 1][0][0];
#pragma unroll
    for (int nt = 0; nt < 2; nt++) {
        const float e0 = exp2f(s[nt][0] - mu), e1 = exp2f(s[nt][1] - mu);
        rs += e0 + e1;
        *reinterpret_cast<uint32_t *>(pw + v5_p_off(Rw, nt * 8 + 2 * t4)) = vattn_pack2<FP16>(e0, e1);
    }
    rs += __shfl_xor_sync(0xffffffffu, rs, 1);
    rs += __shfl_xor_sync(0xffffffffu, rs, 2);
    R.l = R.l * alpha + rs;
    R.m = m_new;
    if (t4 == 0)
        sm.alpha[j & 1][Rw] = alpha;
    } /* DO_S */
}

/* Warp 0's index work of phase j (lane < 16): the raw index of tile j + PF (landed: requested
 * two phases ago) becomes a checked slot in the ring and its KV row is prefetched into L2;
 * the raw index of tile j + PF + 2 is requested (joins this phase's cp.async group). */
template <int NST, int PF>
__device__ __forceinline__ void v5_index_work(const VattnParams &p, FastSmem5<NST> &sm, int j, int start,
                                              int key_begin, int key_end, int lane)
{
    if (lane >= BN5)
        return;
    const int t = j + PF, key = key_begin + t * BN5 + lane;
    const int64_t raw = p.idx64 ? sm.idx[t % IR5][lane] : (int64_t)(int32_t)sm.idx[t % IR5][lane];
    const int64_t slot = v5_check_slot(p, sm, raw, key, key_end);
    sm.slots[t % SR5][lane] = slot;
    vattn_prefetch_row_l2(p, slot);
    v5_idx_async(p, sm, start, key_begin, key_end, t + 2, lane);
}

template <int FP16, int NST, int PF>
__global__ void __launch_bounds__(NTHREADS, 1) vattn_fast5_kernel(VattnParams p)
{
    constexpr int D = NST - 2; /* tiles loaded ahead of the one S works on */
    static_assert(D >= 1 && D <= 2, "3 or 4 stages");
    static_assert(PF >= D + 1 && PF - D + 2 <= SR5, "slot ring too small for this distance");
    extern __shared__ __align__(16) unsigned char smem_raw[];
    FastSmem5<NST> &sm = *reinterpret_cast<FastSmem5<NST> *>(smem_raw);
    const int mc = blockIdx.x, sp = blockIdx.y, b = blockIdx.z;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int g = lane >> 2, t4 = lane & 3, rg = warp & 3, kh = warp >> 2;

    int64_t start64, kv_len64;
    const bool ok = vattn_request_range(p, b, &start64, &kv_len64);
    const int start = (int)start64, kv_len = (int)kv_len64;
    const int prefix = kv_len - p.q_len;
    int64_t kb64 = 0, se64 = 0; /* a bad request reads nothing: [0, 0) */
    if (ok)
        vattn_split_range(kv_len64, sp, p.nsplit, &kb64, &se64);
    const int key_begin = (int)kb64, key_end = (int)se64;
    const int ntiles = key_end > key_begin ? (key_end - key_begin + BN5 - 1) / BN5 : 0;

    if (tid == 0)
        sm.bad = !ok;
#pragma unroll
    for (int k = 0; k < BM5 * 8 / NTHREADS; k++) { /* Q rope: 64 rows x 8 chunks of 16 B */
        const int c = tid + k * NTHREADS, row = c >> 3, ch = c & 7, r = mc * BM5 + row;
        uint4 v = make_uint4(0u, 0u, 0u, 0u);
        if (r < p.M)
            v = *reinterpret_cast<const uint4 *>(p.q + ((int64_t)b * p.q_len + r / p.H) * p.q_st +
                                                 (r % p.H) * p.q_sh + DV + ch * 8);
        *reinterpret_cast<uint4 *>(&sm.qr[row][(ch ^ (row & 7)) * 8]) = v;
    }
    __syncthreads(); /* sm.bad initialised before warp 0 may raise it */
    if (warp == 0 && lane < BN5) {
        /* slots of tiles 0 .. PF-1 now; tiles D .. PF-1 start into L2 (0 .. D-1 are loaded
         * next); raw indices of tiles PF, PF+1 requested (landed by phases 0, 1) */
        for (int t = 0; t < PF; t++) {
            const int key = key_begin + t * BN5 + lane;
            const int64_t slot = key < key_end ? v5_check_slot(p, sm, vattn_slot(p, start + key), key, key_end) : -1;
            sm.slots[t % SR5][lane] = slot;
            if (t >= D)
                vattn_prefetch_row_l2(p, slot);
        }
        v5_idx_async(p, sm, start, key_begin, key_end, PF, lane);
        v5_idx_async(p, sm, start, key_begin, key_end, PF + 1, lane);
    }
    __syncthreads(); /* slot ring visible */
#pragma unroll
    for (int t = 0; t < D; t++) {
        if (t < ntiles)
            v5_load_tile(p, sm, t, tid);
        cp_async_commit();
    }

    V5Regs R;
#pragma unroll
    for (int hr = 0; hr < 2; hr++) {
        const int r = mc * BM5 + rg * 16 + g + hr * 8;
        const uint32_t *src = nullptr;
        if (r < p.M)
            src = reinterpret_cast<const uint32_t *>(p.q + ((int64_t)b * p.q_len + r / p.H) * p.q_st +
                                                     (r % p.H) * p.q_sh + kh * (KS5 * 16));
#pragma unroll
        for (int ks = 0; ks < KS5; ks++) {
            R.qf[ks][hr] = src ? src[ks * 8 + t4] : 0u;
            R.qf[ks][hr + 2] = src ? src[ks * 8 + 4 + t4] : 0u;
        }
    }
#pragma unroll
    for (int mt = 0; mt < 4; mt++)
#pragma unroll
        for (int nt = 0; nt < 8; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                R.o[mt][nt][e] = 0.0f;
    R.m = -INFINITY;
    R.l = 0.0f;
    cp_async_wait_group<D - 1>();
    __syncthreads(); /* tile 0 landed */

    /* phase j: loads of tile j + D, then [P V of tile j-1 || S of tile j], softmax of tile j */
    for (int j = 0; j < ntiles; j++) {
        if (warp == 0)
            v5_index_work<NST, PF>(p, sm, j, start, key_begin, key_end, lane);
        if (j + D < ntiles)
            v5_load_tile(p, sm, j + D, tid);
        cp_async_commit();
        if (j == 0)
            v5_phase<FP16, NST, false, true>(p, sm, R, j, b, mc, key_begin, key_end, prefix, warp, lane);
        else
            v5_phase<FP16, NST, true, true>(p, sm, R, j, b, mc, key_begin, key_end, prefix, warp, lane);
        cp_async_wait_group<D - 1>();
        __syncthreads(); /* tile j+1 landed; P(j), alpha(j) visible; tile j-1's stage, red free */
    }
    if (ntiles > 0)
        v5_phase<FP16, NST, true, false>(p, sm, R, ntiles, b, mc, key_begin, key_end, prefix, warp, lane);
    if (t4 == 0)
        sm.ml[rg * 16 + kh * 8 + g] = make_float2(R.m, R.l);
    cp_async_wait_all(); /* warp 0's index copies past the last tile */
    __syncthreads();     /* (m, l) of every row and bad visible */

    const bool nan_out = sm.bad != 0;
    if (p.nsplit == 1) {
#pragma unroll
        for (int mt = 0; mt < 4; mt++)
#pragma unroll
            for (int hr = 0; hr < 2; hr++) {
                const int row = mt * 16 + g + hr * 8, r = mc * BM5 + row;
                if (r >= p.M)
                    continue;
                const int i = r / p.H, h = r % p.H;
                const float l = sm.ml[row].y;
                const float inv = l == 0.0f ? 0.0f : 1.0f / l;
                uint16_t *o = p.o + ((int64_t)b * p.q_len + i) * p.o_st + h * p.o_sh + warp * 64 + 2 * t4;
#pragma unroll
                for (int nt = 0; nt < 8; nt++) {
                    const float v0 = nan_out ? NAN : R.o[mt][nt][2 * hr] * inv;
                    const float v1 = nan_out ? NAN : R.o[mt][nt][2 * hr + 1] * inv;
                    *reinterpret_cast<uint32_t *>(o + nt * 8) = vattn_pack2<FP16>(v0, v1);
                }
            }
        if (p.lse && tid < BM5) {
            const int r = mc * BM5 + tid;
            if (r < p.M) {
                const float2 ml = sm.ml[tid];
                const float v = nan_out ? NAN
                                : ml.y == 0.0f ? -INFINITY
                                               : (ml.x + log2f(ml.y)) * 0.69314718055994531f;
                p.lse[((int64_t)b * p.q_len + r / p.H) * p.H + r % p.H] = v;
            }
        }
        return;
    }
    const int64_t pbase = ((int64_t)b * p.nsplit + sp) * p.mpad + (int64_t)mc * BM5;
#pragma unroll
    for (int mt = 0; mt < 4; mt++)
#pragma unroll
        for (int hr = 0; hr < 2; hr++) {
            const int row = mt * 16 + g + hr * 8;
            float *o = p.ws_o + (pbase + row) * DV + warp * 64 + 2 * t4;
#pragma unroll
            for (int nt = 0; nt < 8; nt++)
                *reinterpret_cast<float2 *>(o + nt * 8) = make_float2(R.o[mt][nt][2 * hr], R.o[mt][nt][2 * hr + 1]);
        }
    if (tid < BM5) {
        const float2 ml = sm.ml[tid];
        p.ws_ml[pbase + tid] = make_float2(nan_out ? NAN : ml.x, ml.y);
    }
}
