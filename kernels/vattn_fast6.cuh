/*
 * vattn_fast6.cuh — v6, the fast verify-attention kernel for requests with more than 32
 * (token, head) rows. Included by verify_attn.cu inside its anonymous namespace (it uses that
 * file's helpers: ldmatrix / mma / cp.async wrappers, request and split ranges, slot ring).
 *
 * Layout: 64 rows per block, 32-key tiles in 2 cp.async stages, 8 warps. S = Q K^T: warp
 * (rg, kh) = (warp & 3, warp >> 2) owns rows rg*16..+15 and k-half kh (16 latent k16 steps
 * with Q in registers, 2 rope steps with Q from smem), all 32 keys; the two warps of a pair
 * swap halves of their partials through smem (64-thread named barrier) and each finishes the
 * softmax of 8 rows with m and l in registers. O = P V: warp w owns output columns
 * 64w..64w+63 of all 64 rows (128 fp32 regs). Two block barriers per tile. Fixed summation
 * order everywhere: bitwise deterministic run to run.
 *
 * v6 against v4 (the same tiles, split-K and warp roles; each step measured on its own, see
 * docs/PERF.md): the v4 profile was issue- and latency-bound at 2 warps per scheduler, with
 * the kh = 1 warps idle during the softmax.
 *   1. Lazy rescale: a row's reference max only moves when the tile max exceeds it by more
 *      than 2^8 (log2 units: 8), so P <= 256 and alpha is exactly 1 on almost every tile; the
 *      block barrier that publishes P also ORs "some alpha != 1" (bar.red), and O is rescaled
 *      (128 FMUL per thread) only then. O / l and lse are unchanged in exact arithmetic.
 *   2. Cheap tile loads: thread t copies row t >> 3, chunks (t & 7) + 8i: one slot read and one
 *      address per tile, nine cp.async with immediate offsets (v4 divided by 72 per chunk).
 *   3. Split softmax over both warps of a pair (v4: the kh = 0 warp did all 16 rows).
 *   4. SPREAD: the nine cp.async of tile j+1 are issued one per two k steps of the S loop, not
 *      in one burst after the barrier (the burst filled the LSU queue and every warp then
 *      waited on the reuse of its address registers: ~10 % of the stall samples).
 *   5. PIPE: the K fragments of k step s+1 are loaded before the MMAs of step s (double
 *      buffer: the ldmatrix latency was the largest stall inside the S loop).
 * exp2 is ex2.approx.ftz (one MUFU op; P below 2^-126 flushes to 0, irrelevant next to the row
 * max, which contributes exactly 1). Tried and dropped (docs/PERF.md): loading each tile with
 * 32 row-sized cp.async.bulk copies on an mbarrier (correct, but 1.4x slower); the L2
 * prefetch spread over all threads instead of warp 0 (2 % slower).
 */

constexpr int BM6 = 64;
constexpr int KSTEPS6 = DV / 16 / 2;       /* 16 k16 steps of the 512 latent columns per k-half */
constexpr int RSTEPS6 = (QK - DV) / 16 / 2; /* 2 k16 steps of the 64 rope columns per k-half */
constexpr int QR_PITCH = QK - DV + 8;

constexpr int IDX_RING = 8; /* raw kv_indices of tiles j+2, j+3 in flight (cp.async) */

struct FastSmem6 {
    uint16_t kv[2][BN][KV_PITCH];  /* 2 cp.async stages */
    /* Row r: the S partial written by the warp of the pair that does not finish row r (fp32),
     * then, once the finishing warp has read it, P (input dtype, A operand of O += P V) in
     * bytes 16*((r>>2)&1) .. +64 of the same row (the shift keeps the 160-byte row pitch
     * conflict-free for ldmatrix). A row is only ever touched by its own (rg) warp pair and,
     * after the block barrier, the P V readers. */
    float red[BM6][RED_PITCH];
    uint16_t qr[BM6][QR_PITCH];    /* Q rope columns (512..575): read by ldmatrix, saves 8 regs */
    float alpha[BM6], m[BM6], l[BM6]; /* m, l: final values only, for the epilogue */
    int64_t slots[4][BN];          /* slot ring, as in v3 */
    int64_t idx[IDX_RING][BN];     /* raw kv_indices of tiles j+2, j+3 (cp.async) */
    int bad;
};

__device__ __forceinline__ void cp_async8(uint32_t dst, const void *src, int src_bytes)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async4(uint32_t dst, const void *src, int src_bytes)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}

/* Warp 0, lane = key of tile `tile`: its raw kv_indices entry starts its way into
 * sm.idx[buf][lane] (no register waits on it); past key_end nothing is read. */
template <class Smem>
__device__ __forceinline__ void vattn_idx_async(const VattnParams &p, Smem &sm, int buf, int64_t start,
                                                int64_t key_begin, int tile, int64_t key_end, int lane)
{
    const int64_t key = key_begin + (int64_t)tile * BN + lane;
    const bool in = key < key_end;
    const uint32_t dst = smem_u32(&sm.idx[buf][lane]);
    if (p.idx64)
        cp_async8(dst, reinterpret_cast<const int64_t *>(p.indices) + (in ? start + key : 0), in ? 8 : 0);
    else
        cp_async4(dst, reinterpret_cast<const int32_t *>(p.indices) + (in ? start + key : 0), in ? 4 : 0);
}

__device__ __forceinline__ uint16_t *vattn_p6(FastSmem6 &sm, int row, int col)
{
    return reinterpret_cast<uint16_t *>(&sm.red[row][0]) + 8 * ((row >> 2) & 1) + col;
}

__device__ __forceinline__ void bar_sync_named(int id, int nthreads)
{
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(nthreads) : "memory");
}

/* Slot of key `lane` of a tile from its landed raw index: -1 past key_end or outside the pool
 * (which also marks the request bad). */
template <class Smem>
__device__ __forceinline__ int64_t vattn_idx_slot(const VattnParams &p, Smem &sm, int buf, int64_t key,
                                                  int64_t key_end, int lane)
{
    int64_t v = p.idx64 ? sm.idx[buf][lane] : (int64_t)(int32_t)sm.idx[buf][lane];
    if (key >= key_end)
        return -1;
    if (v < 0 || v >= p.num_slots) {
        sm.bad = 1;
        return -1;
    }
    return v;
}

__device__ __forceinline__ void vattn_prefetch_row_l2(const VattnParams &p, int64_t slot)
{
    if (slot < 0)
        return;
    const char *row = reinterpret_cast<const char *>(p.kv + slot * p.kv_stride);
#pragma unroll
    for (int ln = 0; ln < QK * 2 / 128 + 1; ln++)
        asm volatile("prefetch.global.L2 [%0];\n" ::"l"(row + min(ln * 128, QK * 2 - 1)));
}

constexpr float V6_LAZY_TH = 8.0f; /* log2 of the largest P value allowed before a rescale */

__device__ __forceinline__ float vattn_ex2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

/* This thread's share of KV tile `tile`: row t >> 3, 16-byte chunks (t & 7) + 8 i, i = 0..8
 * (each row: 8 threads x 9 chunks = 72 chunks = 1152 B); one slot read, one address. */
struct V6Load {
    const uint16_t *src;
    uint32_t dst;
    int n; /* 16, or 0: zero-fill (no slot) */
    __device__ __forceinline__ void init(const VattnParams &p, FastSmem6 &sm, int stage, int tile, int tid)
    {
        static_assert(BN * 8 == NTHREADS && CHUNKS_PER_ROW == 72, "one row per 8 threads");
        const int row = tid >> 3, c0 = tid & 7;
        const int64_t slot = sm.slots[tile & 3][row];
        src = (slot >= 0 ? p.kv + slot * p.kv_stride : p.kv) + c0 * 8;
        n = slot >= 0 ? 16 : 0;
        dst = smem_u32(&sm.kv[stage][row][c0 * 8]);
    }
    __device__ __forceinline__ void chunk(int i) const { cp_async16(dst + i * 128, src + i * 64, n); }
};

__device__ __forceinline__ void v6_load_tile(const VattnParams &p, FastSmem6 &sm, int stage, int tile, int tid)
{
    V6Load ld;
    ld.init(p, sm, stage, tile, tid);
#pragma unroll
    for (int i = 0; i < CHUNKS_PER_ROW / 8; i++)
        ld.chunk(i);
}

/* Tuning steps of v6, as template flags so that each can be measured on its own (dev builds
 * carry the other combinations, see vattn_launch_fast). */
enum { V6_LAZY = 1, V6_SPREAD = 2, V6_PIPE = 4 };

template <int FP16, int FLAGS>
__global__ void __launch_bounds__(NTHREADS, 1) vattn_fast6_kernel(VattnParams p)
{
    constexpr bool LAZY = FLAGS & V6_LAZY, SPREAD = FLAGS & V6_SPREAD, PIPE = FLAGS & V6_PIPE;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    FastSmem6 &sm = *reinterpret_cast<FastSmem6 *>(smem_raw);
    const int mc = blockIdx.x, sp = blockIdx.y, b = blockIdx.z;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int g = lane >> 2, t4 = lane & 3;
    const int rg = warp & 3, kh = warp >> 2;

    int64_t start64, kv_len64;
    const bool ok = vattn_request_range(p, b, &start64, &kv_len64);
    /* key positions in int64: a request may hold up to 2^31 - 1 keys, and tile indices run
     * a few tiles past the split's end */
    const int64_t start = start64, kv_len = kv_len64;
    const int64_t prefix = kv_len - p.q_len;
    int64_t kb64 = 0, se64 = 0; /* a bad request reads nothing: [0, 0) */
    if (ok)
        vattn_split_range(kv_len64, sp, p.nsplit, &kb64, &se64);
    const int64_t key_begin = kb64, key_end = se64;
    const int ntiles = key_end > key_begin ? (int)((key_end - key_begin + BN - 1) / BN) : 0;

    if (tid == 0)
        sm.bad = !ok;
#pragma unroll
    for (int k = 0; k < BM6 * 8 / NTHREADS; k++) { /* Q rope: 64 rows x 8 chunks of 16 B */
        const int c = tid + k * NTHREADS, row = c >> 3, col = (c & 7) * 8, r = mc * BM6 + row;
        uint4 v = make_uint4(0u, 0u, 0u, 0u);
        if (r < p.M)
            v = *reinterpret_cast<const uint4 *>(p.q + ((int64_t)b * p.q_len + r / p.H) * p.q_st +
                                                 (r % p.H) * p.q_sh + DV + col);
        *reinterpret_cast<uint4 *>(&sm.qr[row][col]) = v;
    }
    __syncthreads();
    if (warp == 0) {
        sm.slots[0][lane] = vattn_ring_slot(p, sm, start, key_begin + lane, key_end);
        sm.slots[1][lane] = vattn_ring_slot(p, sm, start, key_begin + BN + lane, key_end);
        vattn_idx_async(p, sm, 2, start, key_begin, 2, key_end, lane);
    }
    __syncthreads();
    if (ntiles > 0) {
        v6_load_tile(p, sm, 0, 0, tid);
        cp_async_commit();
    }

    /* Q fragments: rows rg*16 + g (+8), columns kh*256 + ks*16 + (2*t4 | 2*t4+8) */
    uint32_t qf[KSTEPS6][4];
#pragma unroll
    for (int hr = 0; hr < 2; hr++) {
        const int r = mc * BM6 + rg * 16 + g + hr * 8;
        const uint32_t *src = nullptr;
        if (r < p.M)
            src = reinterpret_cast<const uint32_t *>(p.q + ((int64_t)b * p.q_len + r / p.H) * p.q_st +
                                                     (r % p.H) * p.q_sh + kh * (KSTEPS6 * 16));
#pragma unroll
        for (int ks = 0; ks < KSTEPS6; ks++) {
            qf[ks][hr] = src ? src[ks * 8 + t4] : 0u;
            qf[ks][hr + 2] = src ? src[ks * 8 + 4 + t4] : 0u;
        }
    }

    float oacc[4][8][4];
#pragma unroll
    for (int mt = 0; mt < 4; mt++)
#pragma unroll
        for (int nt = 0; nt < 8; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                oacc[mt][nt][e] = 0.0f;
    /* this lane finishes row Rw of the softmax (kh = 0: rows rg*16 + g, kh = 1: + 8) */
    const int Rw = rg * 16 + kh * 8 + g, Rp = rg * 16 + (1 - kh) * 8 + g;
    float m_run = -INFINITY, l_run = 0.0f;

    for (int j = 0; j < ntiles; j++) {
        const int stage = j & 1;
        cp_async_wait_all();
        __syncthreads(); /* tile j landed; PV(j-1) done: the other stage, red and p are free */
        const bool load_next = j + 1 < ntiles;
        V6Load ld;
        if (SPREAD) {
            if (load_next)
                ld.init(p, sm, stage ^ 1, j + 1, tid);
        } else if (load_next) {
            v6_load_tile(p, sm, stage ^ 1, j + 1, tid);
            cp_async_commit();
        }
        if (warp == 0) {
            /* indices of tile j+2 landed (cp.async issued one tile ago): range-checked into
             * the slot ring (its cp.async is issued next tile) and its rows start into L2;
             * tile j+3's indices are requested */
            const int64_t s2 =
                vattn_idx_slot(p, sm, (j + 2) % IDX_RING, key_begin + lane + (int64_t)(j + 2) * BN, key_end, lane);
            sm.slots[(j + 2) & 3][lane] = s2;
            vattn_prefetch_row_l2(p, s2);
            vattn_idx_async(p, sm, (j + 3) % IDX_RING, start, key_begin, j + 3, key_end, lane);
            cp_async_commit();
        }

        /* S (partial over this warp's k-half) = Q[16 rows] . K[32 keys]^T */
        float sacc[4][4];
#pragma unroll
        for (int nt = 0; nt < 4; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                sacc[nt][e] = 0.0f;
        const uint32_t kbase = smem_u32(
            &sm.kv[stage][(lane & 7) + ((lane >> 4) << 3)][kh * (KSTEPS6 * 16) + ((lane >> 3) & 1) * 8]);
        /* PIPE: K fragments double-buffered, k step s+1 loaded before the MMAs of step s */
        uint32_t kf[2][8];
        if (PIPE) {
            ldsm_x4(kbase, kf[0][0], kf[0][1], kf[0][2], kf[0][3]);
            ldsm_x4(kbase + 16 * KV_PITCH * 2, kf[0][4], kf[0][5], kf[0][6], kf[0][7]);
        }
#pragma unroll
        for (int ks = 0; ks < KSTEPS6; ks++) {
            if (SPREAD && (ks & 1) == 0 && ks / 2 < CHUNKS_PER_ROW / 8 && load_next)
                ld.chunk(ks / 2);
            const int cb = PIPE ? ks & 1 : 0;
            if (!PIPE) {
                ldsm_x4(kbase + ks * 32, kf[0][0], kf[0][1], kf[0][2], kf[0][3]);
                ldsm_x4(kbase + 16 * KV_PITCH * 2 + ks * 32, kf[0][4], kf[0][5], kf[0][6], kf[0][7]);
            } else if (ks + 1 < KSTEPS6) {
                ldsm_x4(kbase + (ks + 1) * 32, kf[cb ^ 1][0], kf[cb ^ 1][1], kf[cb ^ 1][2], kf[cb ^ 1][3]);
                ldsm_x4(kbase + 16 * KV_PITCH * 2 + (ks + 1) * 32, kf[cb ^ 1][4], kf[cb ^ 1][5], kf[cb ^ 1][6],
                        kf[cb ^ 1][7]);
            }
            mma16816<FP16>(sacc[0], qf[ks], kf[cb][0], kf[cb][1]);
            mma16816<FP16>(sacc[1], qf[ks], kf[cb][2], kf[cb][3]);
            mma16816<FP16>(sacc[2], qf[ks], kf[cb][4], kf[cb][5]);
            mma16816<FP16>(sacc[3], qf[ks], kf[cb][6], kf[cb][7]);
        }
#pragma unroll
        for (int ks = 0; ks < RSTEPS6; ks++) {
            uint32_t a[4], b0, b1, b2, b3, c0, c1, c2, c3;
            ldsm_x4(smem_u32(&sm.qr[rg * 16 + (lane & 7) + ((lane >> 3) & 1) * 8]
                                   [(kh * RSTEPS6 + ks) * 16 + (lane >> 4) * 8]),
                    a[0], a[1], a[2], a[3]);
            const uint32_t kr = kbase + ((DV - kh * (KSTEPS6 * 16)) + (kh * RSTEPS6 + ks) * 16) * 2;
            ldsm_x4(kr, b0, b1, b2, b3);
            ldsm_x4(kr + 16 * KV_PITCH * 2, c0, c1, c2, c3);
            mma16816<FP16>(sacc[0], a, b0, b1);
            mma16816<FP16>(sacc[1], a, b2, b3);
            mma16816<FP16>(sacc[2], a, c0, c1);
            mma16816<FP16>(sacc[3], a, c2, c3);
        }
        if (SPREAD && load_next) {
            if (CHUNKS_PER_ROW / 8 > KSTEPS6 / 2)
                ld.chunk(CHUNKS_PER_ROW / 8 - 1);
            cp_async_commit();
        }

        /* swap halves with the partner warp: each keeps the row it finishes (kh is a run-time
         * value: select, never index a register array with it) */
        float s[4][2];
#pragma unroll
        for (int nt = 0; nt < 4; nt++) {
            const float2 give = kh ? make_float2(sacc[nt][0], sacc[nt][1]) : make_float2(sacc[nt][2], sacc[nt][3]);
            s[nt][0] = kh ? sacc[nt][2] : sacc[nt][0];
            s[nt][1] = kh ? sacc[nt][3] : sacc[nt][1];
            *reinterpret_cast<float2 *>(&sm.red[Rp][nt * 8 + 2 * t4]) = give;
        }
        bar_sync_named(1 + rg, 64);
        const int64_t kt0 = key_begin + (int64_t)j * BN;
        const int64_t lim_end = key_end - kt0, lim_pre = prefix - kt0; /* tile-relative */
        const bool all_vis = BN <= lim_pre && BN <= lim_end;
        float mx = -INFINITY;
#pragma unroll
        for (int nt = 0; nt < 4; nt++) {
            const float2 o = *reinterpret_cast<const float2 *>(&sm.red[Rw][nt * 8 + 2 * t4]);
            s[nt][0] = (s[nt][0] + o.x) * p.scale_log2;
            s[nt][1] = (s[nt][1] + o.y) * p.scale_log2;
            if (!all_vis) {
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const int kk = nt * 8 + 2 * t4 + e;
                    bool vis = kk < lim_end;
                    if (vis && kk >= lim_pre) {
                        const int r = mc * BM6 + Rw;
                        vis = vattn_visible(p, b, r < p.M ? r / p.H : 0, kk - lim_pre);
                    }
                    if (!vis)
                        s[nt][e] = -INFINITY;
                }
            }
            mx = fmaxf(mx, fmaxf(s[nt][0], s[nt][1]));
        }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        /* LAZY: keep the reference max unless the tile exceeds it by more than 2^8 */
        /* (mx - m_run, not m_run + TH: the sum rounds for |m_run| >= 2^27, the difference of
         * close values does not; -inf - -inf is NaN: no move) */
        const bool move = LAZY ? mx - m_run > V6_LAZY_TH : mx > m_run;
        const float m_new = move ? mx : m_run;
        const float mu = m_new == -INFINITY ? 0.0f : m_new;
        const float alpha = move ? vattn_ex2(m_run - mu) : 1.0f;
        float rs = 0.0f;
        __syncwarp(); /* all partial reads of row Rw done before P overwrites it */
#pragma unroll
        for (int nt = 0; nt < 4; nt++) {
            const float e0 = vattn_ex2(s[nt][0] - mu), e1 = vattn_ex2(s[nt][1] - mu);
            rs += e0 + e1;
            *reinterpret_cast<uint32_t *>(vattn_p6(sm, Rw, nt * 8 + 2 * t4)) = vattn_pack2<FP16>(e0, e1);
        }
        rs += __shfl_xor_sync(0xffffffffu, rs, 1);
        rs += __shfl_xor_sync(0xffffffffu, rs, 2);
        l_run = l_run * alpha + rs;
        m_run = m_new;
        if (t4 == 0)
            sm.alpha[Rw] = alpha;
        /* P and alpha of all 64 rows visible; does any row need O rescaled? */
        const int rescale = __syncthreads_or(alpha != 1.0f);

        /* O[:, warp's 64 cols] = alpha * O + P . V */
        if (rescale)
            vattn_rescale_o<BM6 / 16>(oacc, sm.alpha, lane);
        vattn_pv_tile<FP16, BM6 / 16>(
            oacc, [&](int row, int col) { return smem_u32(vattn_p6(sm, row, col)); }, &sm.kv[stage][0][0], warp, lane);
    }
    if (t4 == 0) {
        sm.m[Rw] = m_run;
        sm.l[Rw] = l_run;
    }
    cp_async_wait_all(); /* warp 0's index copies past the last tile */
    __syncthreads();     /* final m, l, bad visible to every thread */
    vattn_fast_epilogue<FP16, BM6 / 16>(p, sm.m, sm.l, sm.bad != 0, oacc, mc, sp, b, warp, lane, tid);
}
