/*
 * vattn_fast7.cuh — v7, the fast verify-attention kernel for requests with more than 32
 * (token, head) rows, and v8, the same kernel with KS = 1 (key split) for requests of <= 32
 * rows over splits of more than 3 tiles (v3, vattn_fast3.cuh, takes splits of up to 3 tiles;
 * the rule is vattn_plan in verify_attn.cu). Uses vattn_common.cuh's helpers: ldmatrix / mma /
 * cp.async wrappers, request and split ranges, slot ring, the P V / rescale / epilogue steps
 * shared with v3.
 *
 * v8 (KS = 1): 32 rows per block; both groups hold them and take alternate tiles of the split
 * (group g: g, g + 2, ...), each in its own stage, refilled by the group itself after its P V,
 * with its own softmax state and kv_indices ring (warp 4g); after the loop group 1's (m, l, O)
 * is merged into group 0's in a fixed order (vattn_ks_merge), so results stay bitwise
 * deterministic. v7 with <= 32 rows would leave group 1 all padding: at (8,8,4,8192) v7 beat
 * v3 (48.5 against 53.2 us) with half its MMAs on zero rows; v8 does the same work as v3.
 *
 * Layout: 64 rows per block in two groups of 32 (group 0 = warps 0-3, group 1 = warps 4-7, so
 * each scheduler holds one warp of each); 32-key KV tiles in 2 cp.async stages. Per group:
 * S = Q K^T by warp (rs, kh) = (w & 1, w >> 1): rows 16 rs..+15 of the group, k-half kh (16
 * latent k16 steps with Q in registers, 2 rope steps with Q from smem), all 32 keys; the two
 * warps of a pair swap halves of their partials through smem (64-thread named barrier) and
 * each finishes the softmax of 8 rows. O = P V: warp w owns output columns 128 (w & 3)..+127 of
 * the group's 32 rows (128 fp32 registers). The groups only meet at the KV stages: group 1 (which
 * finishes with a stage last) refills it once the stage's "empty" mbarrier says group 0 is
 * done with it, and its copies arrive on the stage's "full" mbarrier
 * (cp.async.mbarrier.arrive.noinc), which both groups wait on. Warp 0 keeps the kv_indices
 * ring and starts each tile's rows into L2 two tiles ahead. Fixed summation order
 * everywhere: bitwise deterministic run to run.
 *
 * Softmax: lazy rescale (from v6): a row's reference max only moves when a tile exceeds it by
 * more than 2^8 (log2 units: 8), so P <= 256 and alpha is exactly 1 on almost every tile; the
 * group barrier that publishes P ORs "some alpha != 1" (bar.red.or) and O is rescaled only
 * then. exp2 is ex2.approx.ftz (one MUFU op; P below 2^-126 flushes to 0, irrelevant next to
 * the row max, which contributes exactly 1).
 *
 * KV stages are XOR-swizzled (see FastSmem7::kv): with v6's padded rows the cp.async copies
 * cost 1.8x their ideal shared-memory wavefronts.
 *
 * Against v6 (every warp through the same block-wide phases; in git and docs/PERF.md):
 * group-local barriers, one loader group on mbarriers instead of cp.async spread over the S
 * loop, and the swizzle: 1.05-1.07x v6 on the 8 bench configs (docs/PERF.md). Measured and
 * dropped: strictly alternating the groups' S phases (FlashAttention-3's ping-pong, two more
 * named barriers) and a reduction-free softmax fast path, both within noise.
 */

#ifndef VATTN_FAST7_CUH
#define VATTN_FAST7_CUH

#include "vattn_common.cuh"

namespace {

constexpr int BM7 = 64;
constexpr int KSTEPS7 = DV / 16 / 2;       /* 16 k16 steps of the 512 latent columns per k-half */
constexpr int RSTEPS7 = (QK - DV) / 16 / 2; /* 2 k16 steps of the 64 rope columns per k-half */
constexpr int QR_PITCH = QK - DV + 8;

constexpr int IDX_RING = 8; /* raw kv_indices in flight (cp.async): tiles j+2, j+3 (KS: j+2, j+4 per group) */

__device__ __forceinline__ void cp_async8(uint32_t dst, const void *src, int src_bytes)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async4(uint32_t dst, const void *src, int src_bytes)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}

/* The ring's warp (warp 0; KS: warp 4g for group g's tiles), lane = key of tile `tile`: its raw kv_indices entry starts its way into
 * sm.idx[buf][lane] (no register waits on it); from idx_end on (past the split, or a draft key
 * of vattn_extend, which has no entry) nothing is read. */
template <class Smem>
__device__ __forceinline__ void vattn_idx_async(const VattnParams &p, Smem &sm, int buf, int64_t start,
                                                int64_t key_begin, int tile, int64_t idx_end, int lane)
{
    const int64_t key = key_begin + (int64_t)tile * BN + lane;
    const bool in = key < idx_end;
    const uint32_t dst = smem_u32(&sm.idx[buf][lane]);
    if (p.idx64)
        cp_async8(dst, reinterpret_cast<const int64_t *>(p.indices) + (in ? start + key : 0), in ? 8 : 0);
    else
        cp_async4(dst, reinterpret_cast<const int32_t *>(p.indices) + (in ? start + key : 0), in ? 4 : 0);
}

/* P of block row `row`, key `col`, in the S-partial row of smem (see FastSmem7::red). */
template <class Smem> __device__ __forceinline__ uint16_t *vattn_p7(Smem &sm, int row, int col)
{
    return reinterpret_cast<uint16_t *>(&sm.red[row][0]) + 8 * ((row >> 2) & 1) + col;
}

/* Cache row of key `lane` of a tile from its landed raw index (vattn_checked_row: NULL past
 * key_end, outside the pool (which also marks the request bad) or a hidden draft key); key,
 * key_end and prefix relative to the split's first key. */
template <class Smem>
__device__ __forceinline__ const uint16_t *vattn_idx_row(const VattnParams &p, Smem &sm, int buf, int key,
                                                         int key_end, int prefix, int b, int lane)
{
    int64_t v = p.idx64 ? sm.idx[buf][lane] : (int64_t)(int32_t)sm.idx[buf][lane];
    return vattn_checked_row(p, sm, v, key, key_end, prefix, b);
}

__device__ __forceinline__ void vattn_prefetch_row_l2(const uint16_t *krow)
{
    if (!krow)
        return;
    const char *row = reinterpret_cast<const char *>(krow);
#pragma unroll
    for (int ln = 0; ln < QK * 2 / 128 + 1; ln++)
        asm volatile("prefetch.global.L2 [%0];\n" ::"l"(row + min(ln * 128, QK * 2 - 1)));
}

constexpr float VATTN_LAZY_TH = 8.0f; /* log2 of the largest P value allowed before a rescale */

__device__ __forceinline__ float vattn_ex2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

struct FastSmem7 {
    /* 2 stages (full / empty mbarriers below), rows of 1152 B without padding: the 16-byte
     * chunk c of row r sits at chunk c ^ (r & 7) (v7_swz). Rows stay 128-byte aligned, so the
     * cp.async copies of a row fill whole 128-byte lines (with v6's 1168-byte padded pitch
     * they cost 1.8x their ideal smem wavefronts: 15 % of the kernel's total), and the 8 rows
     * of every ldmatrix still land on 8 distinct bank groups. */
    uint16_t kv[2][BN][QK];
    /* Row r: the S partial written by the warp of the pair that does not finish row r (fp32),
     * then, once the finishing warp has read it, P (input dtype, A operand of O += P V) in
     * bytes 16*((r>>2)&1) .. +64 of the same row (the shift keeps the 160-byte row pitch
     * conflict-free for ldmatrix). A row is only touched by its own warp pair and, after the
     * group barrier, by the P V warps of its group. */
    float red[BM7][RED_PITCH];
    uint16_t qr[BM7][QR_PITCH];   /* Q rope columns (512..575): read by ldmatrix, saves 8 regs */
    float alpha[BM7], m[BM7], l[BM7]; /* m, l: final values only, for the epilogue */
    const uint16_t *rows[4][BN];  /* slot ring: cache rows, NULL = zero-fill (the ring's warp writes tile j+2 during tile j) */
    int64_t idx[IDX_RING][BN];    /* raw kv_indices in flight */
    int64_t ibase;                /* kv_indices position of the split's first key (the ring warps') */
    int iend;                     /* keys before it (split-relative) have a kv_indices entry */
    VattnMask mask;               /* the request's mask source (vattn_mask) */
    uint64_t full[2];             /* stage landed: 128 asynchronous arrivals (group 1's copies; KS: the stage's group's) */
    uint64_t empty[2];            /* group 0 done with the stage: 128 arrivals */
    int bad;
    uint8_t hidden[VATTN_MAX_Q_LEN]; /* draft keys no row of the block sees (vattn_hidden_drafts) */
};

/* Named barriers (0 = __syncthreads), all of 128 threads (one group) except the pair's 64 */
enum {
    V7_BAR_PAIR = 1,    /* + 16-row group rg (0..3): the S partial swap of a warp pair */
    V7_BAR_PUBLISH = 5, /* + group: P (and alpha) of the group's 32 rows written */
    V7_BAR_TOP = 7,     /* + group: the group's P V of the previous tile done (red, alpha free) */
    V7_BAR_G1 = 9       /* group 1 done reading a stage before it refills it (key split: + group) */
};

__device__ __forceinline__ void bar_sync_named(int id, int nthreads)
{
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(nthreads) : "memory");
}

/* bar.red.or over a named barrier: 1 if any participating thread passes a non-zero cond. */
__device__ __forceinline__ int bar_red_or_named(int id, int nthreads, int cond)
{
    int r;
    asm volatile("{\n .reg .pred c, q;\n setp.ne.s32 c, %1, 0;\n bar.red.or.pred q, %2, %3, c;\n"
                 " selp.s32 %0, 1, 0, q;\n}\n"
                 : "=r"(r)
                 : "r"(cond), "r"(id), "r"(nthreads)
                 : "memory");
    return r;
}

__device__ __forceinline__ void mbar_init(uint64_t *bar, int count)
{
    asm volatile("mbarrier.init.shared.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint64_t *bar)
{
    asm volatile("{\n .reg .b64 st;\n mbarrier.arrive.shared.b64 st, [%0];\n}\n" ::"r"(smem_u32(bar)) : "memory");
}

/* The mbarrier fires once every earlier cp.async of this thread has landed. */
__device__ __forceinline__ void mbar_cp_async_arrive(uint64_t *bar)
{
    asm volatile("cp.async.mbarrier.arrive.noinc.shared.b64 [%0];\n" ::"r"(smem_u32(bar)) : "memory");
}

/* Waits until the phase with this parity has completed (acquire: its writes are visible). */
__device__ __forceinline__ void mbar_wait(uint64_t *bar, int parity)
{
    const uint32_t a = smem_u32(bar);
    uint32_t done;
    do {
        asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared.b64 p, [%1], %2;\n"
                     " selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done)
                     : "r"(a), "r"(parity)
                     : "memory");
    } while (!done);
}

/* Byte offset of 16-byte chunk `chunk` of row `row` in a swizzled KV stage. */
__device__ __forceinline__ uint32_t v7_swz(int row, int chunk)
{
    return (uint32_t)(row * (QK * 2) + ((chunk ^ (row & 7)) << 4));
}

/* This lane's 4 ldmatrix base addresses for a sweep over 16-byte chunks c0 + 2 s (s = 0, 1,
 * ...) of rows with r & 7 = r7, where c0 = 8 a + b (b = 0 or 1): with q = s & 3, chunk
 * (c0 + 2 s) ^ r7 = 8 (a + (s >> 2)) + (b ^ (r7 & 1)) + 2 (q ^ (r7 >> 1)), so step s reads
 * base[s & 3] + 128 (s >> 2): immediate offsets only, as without the swizzle. */
__device__ __forceinline__ void v7_sweep_bases(uint32_t row_addr, int a, int b, int r7, uint32_t (&base)[4])
{
#pragma unroll
    for (int q = 0; q < 4; q++)
        base[q] = row_addr + ((8 * a + (b ^ (r7 & 1)) + 2 * (q ^ (r7 >> 1))) << 4);
}

/* Group 1 (t = tid - 128): rows t >> 3 and +16 of tile `tile`, chunks (t & 7) + 8 i (stored
 * at 8 i + ((t & 7) ^ (row & 7)): the same immediate offsets for every i). */
__device__ __forceinline__ void v7_load_tile(const VattnParams &p, FastSmem7 &sm, int stage, int tile, int t)
{
    const int c0 = t & 7;
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int row = (t >> 3) + 16 * h;
        const uint16_t *krow = sm.rows[tile & 3][row];
        const uint16_t *src = (krow ? krow : p.kv) + c0 * 8;
        const int n = krow ? 16 : 0;
        const uint32_t dst = smem_u32(&sm.kv[stage][0][0]) + v7_swz(row, c0);
#pragma unroll
        for (int i = 0; i < CHUNKS_PER_ROW / 8; i++)
            cp_async16(dst + i * 128, src + i * 64, n);
    }
    mbar_cp_async_arrive(&sm.full[stage]);
}

/* Key split (KS = 1), after the loop: group 1 hands its O (same fragment layout as the group
 * 0 thread 128 below it) to group 0 through its own stage (stage 1, which group 0 never read;
 * 32 KB per row half, so in two rounds), and group 0 merges it into its own in a fixed order:
 * m = max(m0, m1), O = O0 2^(m0 - m) + O1 2^(m1 - m), l likewise (a group that saw no key has
 * m = -inf: weight 0). The merged m, l go to alpha[0..31], alpha[32..63]. Called by every
 * thread after a block barrier (sm.m, sm.l final; both groups done reading their stages). */
__device__ __forceinline__ void vattn_ks_merge(FastSmem7 &sm, float (&oacc)[2][16][4], int grp, int tid, int lane)
{
    float4 *xfer = reinterpret_cast<float4 *>(&sm.kv[1][0][0]); /* [16 float4][128 threads]: 32 KB */
    const int t = tid & 127, g = lane >> 2;
    if (grp == 0 && tid < 32) {
        const float m0 = sm.m[tid], m1 = sm.m[32 + tid], m = fmaxf(m0, m1);
        const float a0 = m0 == -INFINITY ? 0.0f : exp2f(m0 - m), a1 = m1 == -INFINITY ? 0.0f : exp2f(m1 - m);
        sm.alpha[tid] = m;
        sm.alpha[32 + tid] = sm.l[tid] * a0 + sm.l[32 + tid] * a1;
    }
#pragma unroll
    for (int mt = 0; mt < 2; mt++) {
        if (mt == 1)
            __syncthreads(); /* group 0 done reading round 0 */
        if (grp == 1) {
#pragma unroll
            for (int nt = 0; nt < 16; nt++)
                xfer[nt * 128 + t] = make_float4(oacc[mt][nt][0], oacc[mt][nt][1], oacc[mt][nt][2], oacc[mt][nt][3]);
        }
        __syncthreads();
        if (grp == 1)
            continue;
#pragma unroll
        for (int hr = 0; hr < 2; hr++) {
            const int row = mt * 16 + g + hr * 8;
            const float m0 = sm.m[row], m1 = sm.m[32 + row], m = fmaxf(m0, m1);
            const float a0 = m0 == -INFINITY ? 0.0f : exp2f(m0 - m), a1 = m1 == -INFINITY ? 0.0f : exp2f(m1 - m);
#pragma unroll
            for (int nt = 0; nt < 16; nt++) {
                const float4 o1 = xfer[nt * 128 + t];
                oacc[mt][nt][2 * hr] = oacc[mt][nt][2 * hr] * a0 + (hr ? o1.z : o1.x) * a1;
                oacc[mt][nt][2 * hr + 1] = oacc[mt][nt][2 * hr + 1] * a0 + (hr ? o1.w : o1.y) * a1;
            }
        }
    }
}

/* KS = 0: 64 rows per block, the groups own rows 0-31 and 32-63 and share every KV tile.
 * KS = 1 (key split, v8): 32 rows per block, both groups hold the same 32 rows and take
 * alternate tiles (group g: tiles g, g + 2, ...), each in its own stage with its own softmax
 * state; group 1's (m, l, O) is merged into group 0's after the loop. For requests of <= 32
 * rows this keeps both groups on real rows (KS = 0 would give group 1 only padding). */
template <int FP16, int KS>
__global__ void __launch_bounds__(NTHREADS, 1) vattn_fast7_kernel(VattnParams p)
{
    extern __shared__ __align__(16) unsigned char smem_raw[];
    FastSmem7 &sm = *reinterpret_cast<FastSmem7 *>(smem_raw);
    const int mc = blockIdx.x, sp = blockIdx.y, b = blockIdx.z;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int g = lane >> 2, t4 = lane & 3;
    const int grp = warp >> 2, w4 = warp & 3;
    const int rg = grp * 2 + (w4 & 1), kh = w4 >> 1; /* S role: 16-row group of the smem rows, k-half */
    /* rows of the block: BMB; smem row R (red, P, alpha, m, l: 64 of them) is block row
     * R - qoff (KS: each group's rows 0-31 are the block's 32 rows) */
    constexpr int BMB = KS ? BM7 / 2 : BM7;
    const int qoff = KS ? grp * 32 : 0;
    const int lead = KS ? grp * 4 : 0; /* the warp that keeps the group's kv_indices ring */
    const int qrg = KS ? (w4 & 1) : rg; /* 16-row group of the block's Q rows */
    vattn_pdl_wait(); /* before any global access */
#ifdef VATTN_DEV
    if (p.dev_stage == 1) /* timing variant: the launch alone */
        return;
#endif
    const VattnBlockKeys bk = vattn_block_keys(p, b, sp);
    const int64_t start = bk.start, prefix = bk.prefix, key_begin = bk.key_begin, key_end = bk.key_end;
    const int ntiles = bk.ntiles;
    const bool ok = bk.ok;
    /* In the loop, key positions relative to the split's first key, in 32 bits (the kernel sits
     * at the 255-register limit; 64-bit limits made ptxas spill on sm_120). Exact: kv_indptr is
     * int32, so 0 <= rel_end < 2^31, and rel_pre >= rel_end - q_len (the prefix ends q_len keys
     * before the request does), so the tile-relative limits stay in [-(q_len + BN), 2^31). */
    const int rel_end = (int)(key_end - key_begin), rel_pre = ok ? (int)(prefix - key_begin) : 0;

    if (tid == 0) {
        sm.bad = !ok;
        sm.ibase = start + key_begin;
        sm.iend = (int)(bk.idx_end - key_begin); /* 32 bits like rel_end (below); < 0: no entry in the split */
        mbar_init(&sm.full[0], 128);
        mbar_init(&sm.full[1], 128);
        mbar_init(&sm.empty[0], 128);
        mbar_init(&sm.empty[1], 128);
    }
#pragma unroll
    for (int k = 0; k < BMB * 8 / NTHREADS; k++) { /* Q rope: BMB rows x 8 chunks of 16 B */
        const int c = tid + k * NTHREADS, row = c >> 3, col = (c & 7) * 8, r = mc * BMB + row;
        uint4 v = make_uint4(0u, 0u, 0u, 0u);
        if (r < p.M)
            v = *reinterpret_cast<const uint4 *>(p.q + ((int64_t)b * p.q_len + r / p.H) * p.q_st +
                                                 (r % p.H) * p.q_sh + DV + col);
        *reinterpret_cast<uint4 *>(&sm.qr[row][col]) = v;
    }
    /* warp 0 reads the kv_indices entries of tiles 0 and 1 (and starts tile 2's) while warp 1
     * reads the mask (hidden draft keys); then warp 0 checks them into the slot ring */
    int64_t raw0 = 0, raw1 = 0;
    if (warp == 0) {
        raw0 = vattn_ring_slot(p, start, key_begin + lane, key_end, bk.idx_end);
        raw1 = vattn_ring_slot(p, start, key_begin + BN + lane, key_end, bk.idx_end);
        vattn_idx_async(p, sm, 2, start, key_begin, 2, bk.idx_end, lane);
        cp_async_commit();
    } else if (warp == 1) {
        const VattnMask mask = ok ? vattn_mask(p, b, prefix) : VattnMask{nullptr, 0};
        if (lane == 0)
            sm.mask = mask;
        vattn_hidden_drafts(p, sm.hidden, mask, mc, BMB, ntiles > 0 && key_end > prefix, lane);
    } else if (KS && warp == 4) { /* group 1's ring: its first refill is tile 3 */
        vattn_idx_async(p, sm, 3, start, key_begin, 3, bk.idx_end, lane);
        cp_async_commit();
    }
    __syncthreads();
    if (warp == 0) {
        sm.rows[0][lane] = vattn_checked_row(p, sm, raw0, key_begin + lane, key_end, prefix, b);
        sm.rows[1][lane] = vattn_checked_row(p, sm, raw1, key_begin + BN + lane, key_end, prefix, b);
    }
    __syncthreads(); /* slots of tiles 0, 1 and the mbarrier inits visible */
    if (KS) { /* group g's first tile g into its stage g */
        if (grp < ntiles)
            v7_load_tile(p, sm, grp, grp, tid - 128 * grp);
    } else if (grp == 1) {
        if (ntiles > 0)
            v7_load_tile(p, sm, 0, 0, tid - 128);
        if (ntiles > 1)
            v7_load_tile(p, sm, 1, 1, tid - 128);
    }

    /* Q fragments: rows rg*16 + g (+8), columns kh*256 + ks*16 + (2*t4 | 2*t4+8) */
    uint32_t qf[KSTEPS7][4];
#pragma unroll
    for (int hr = 0; hr < 2; hr++) {
        const int r = mc * BMB + qrg * 16 + g + hr * 8;
        const uint32_t *src = nullptr;
        if (r < p.M)
            src = reinterpret_cast<const uint32_t *>(p.q + ((int64_t)b * p.q_len + r / p.H) * p.q_st +
                                                     (r % p.H) * p.q_sh + kh * (KSTEPS7 * 16));
#pragma unroll
        for (int ks = 0; ks < KSTEPS7; ks++) {
            qf[ks][hr] = src ? src[ks * 8 + t4] : 0u;
            qf[ks][hr + 2] = src ? src[ks * 8 + 4 + t4] : 0u;
        }
    }

    float oacc[2][16][4];
#pragma unroll
    for (int mt = 0; mt < 2; mt++)
#pragma unroll
        for (int nt = 0; nt < 16; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                oacc[mt][nt][e] = 0.0f;
    /* this lane finishes row Rw of the softmax (kh = 0: rows rg*16 + g, kh = 1: + 8) */
    const int Rw = rg * 16 + kh * 8 + g, Rp = rg * 16 + (1 - kh) * 8 + g;
    float m_run = -INFINITY, l_run = 0.0f;

    for (int j = KS ? grp : 0; j < ntiles; j += KS ? 2 : 1) {
        const int stage = KS ? grp : j & 1;
        const int parity = (j >> 1) & 1; /* the stage's (j >> 1)-th use (KS: j = grp + 2 n, so n = j >> 1) */
        /* KS: the group's refill barrier after P V(j-2) already freed red and alpha */
        if (!KS && j > 0)
            bar_sync_named(V7_BAR_TOP + grp, 128); /* the group's P V(j-1) done: red, alpha free */
        {
            if (warp == lead) {
                /* indices of tile j+2 landed: range-checked into the slot ring (group 1 copies
                 * the tile after its P V of tile j; KS: this group) and its rows start into L2;
                 * tile j+3's (KS: j+4's) indices are requested. KS: this warp also loads KV;
                 * its copies of tile j, issued after its last commit, are left to the full
                 * wait below (waiting for them here put the index work behind the tile's
                 * landing on every tile) */
                cp_async_wait_committed();
                const uint16_t *r2 =
                    vattn_idx_row(p, sm, (j + 2) % IDX_RING, lane + (j + 2) * BN, rel_end, rel_pre, b, lane);
                sm.rows[(j + 2) & 3][lane] = r2;
                vattn_prefetch_row_l2(r2);
                /* KS: the group's tile after next is j + 4 */
                const int nxt = j + (KS ? 4 : 3);
                vattn_idx_async(p, sm, nxt % IDX_RING, sm.ibase, 0, nxt, sm.iend, lane);
                cp_async_commit();
            }
        }
        mbar_wait(&sm.full[stage], parity);

        /* S (partial over this warp's k-half) = Q[16 rows] . K[32 keys]^T, K fragments of
         * k step s+1 loaded before the MMAs of step s */
        float sacc[4][4];
#pragma unroll
        for (int nt = 0; nt < 4; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                sacc[nt][e] = 0.0f;
        /* lane's K row (lane & 7) + 8 (lane >> 4) (+16 for the second ldmatrix), chunks
         * 32 kh + ((lane >> 3) & 1) + 2 ks */
        const int krow = (lane & 7) + ((lane >> 4) << 3);
        const uint32_t krow_addr = smem_u32(&sm.kv[stage][krow][0]);
        uint32_t kb[4];
        v7_sweep_bases(krow_addr, 4 * kh, (lane >> 3) & 1, lane & 7, kb);
        constexpr int K16 = 16 * QK * 2; /* keys 16..31 */
        uint32_t kf[2][8];
        ldsm_x4(kb[0], kf[0][0], kf[0][1], kf[0][2], kf[0][3]);
        ldsm_x4(kb[0] + K16, kf[0][4], kf[0][5], kf[0][6], kf[0][7]);
#pragma unroll
        for (int ks = 0; ks < KSTEPS7; ks++) {
            const int cb = ks & 1;
            if (ks + 1 < KSTEPS7) {
                const uint32_t ka = kb[(ks + 1) & 3] + ((ks + 1) >> 2) * 128;
                ldsm_x4(ka, kf[cb ^ 1][0], kf[cb ^ 1][1], kf[cb ^ 1][2], kf[cb ^ 1][3]);
                ldsm_x4(ka + K16, kf[cb ^ 1][4], kf[cb ^ 1][5], kf[cb ^ 1][6], kf[cb ^ 1][7]);
            }
            mma16816<FP16>(sacc[0], qf[ks], kf[cb][0], kf[cb][1]);
            mma16816<FP16>(sacc[1], qf[ks], kf[cb][2], kf[cb][3]);
            mma16816<FP16>(sacc[2], qf[ks], kf[cb][4], kf[cb][5]);
            mma16816<FP16>(sacc[3], qf[ks], kf[cb][6], kf[cb][7]);
        }
#pragma unroll
        for (int ks = 0; ks < RSTEPS7; ks++) {
            uint32_t a[4], b0, b1, b2, b3, c0, c1, c2, c3;
            ldsm_x4(smem_u32(&sm.qr[qrg * 16 + (lane & 7) + ((lane >> 3) & 1) * 8]
                                   [(kh * RSTEPS7 + ks) * 16 + (lane >> 4) * 8]),
                    a[0], a[1], a[2], a[3]);
            /* rope chunks 64 + 2 (kh RSTEPS7 + ks) + ((lane >> 3) & 1) */
            const uint32_t kr =
                krow_addr + (((DV / 8 + 2 * (kh * RSTEPS7 + ks) + ((lane >> 3) & 1)) ^ (lane & 7)) << 4);
            ldsm_x4(kr, b0, b1, b2, b3);
            ldsm_x4(kr + K16, c0, c1, c2, c3);
            mma16816<FP16>(sacc[0], a, b0, b1);
            mma16816<FP16>(sacc[1], a, b2, b3);
            mma16816<FP16>(sacc[2], a, c0, c1);
            mma16816<FP16>(sacc[3], a, c2, c3);
        }
        /* swap halves with the partner warp: each keeps the row it finishes */
        float s[4][2];
#pragma unroll
        for (int nt = 0; nt < 4; nt++) {
            const float2 give = kh ? make_float2(sacc[nt][0], sacc[nt][1]) : make_float2(sacc[nt][2], sacc[nt][3]);
            s[nt][0] = kh ? sacc[nt][2] : sacc[nt][0];
            s[nt][1] = kh ? sacc[nt][3] : sacc[nt][1];
            *reinterpret_cast<float2 *>(&sm.red[Rp][nt * 8 + 2 * t4]) = give;
        }
        bar_sync_named(V7_BAR_PAIR + rg, 64);
        const int lim_end = rel_end - j * BN, lim_pre = rel_pre - j * BN; /* tile-relative */
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
                        const int r = mc * BMB + Rw - qoff;
                        vis = vattn_visible(sm.mask.rows, sm.mask.stride, r < p.M ? r / p.H : 0, kk - lim_pre);
                    }
                    if (!vis)
                        s[nt][e] = -INFINITY;
                }
            }
            mx = fmaxf(mx, fmaxf(s[nt][0], s[nt][1]));
        }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        /* lazy rescale: the reference max moves only when the tile exceeds it by 2^8 */
        const bool move = mx - m_run > VATTN_LAZY_TH;
        const float m_new = move ? mx : m_run;
        const float mu = m_new == -INFINITY ? 0.0f : m_new;
        const float alpha = move ? vattn_ex2(m_run - mu) : 1.0f;
        float rs = 0.0f;
        __syncwarp(); /* all partial reads of row Rw done before P overwrites it */
#pragma unroll
        for (int nt = 0; nt < 4; nt++) {
            const float e0 = vattn_ex2(s[nt][0] - mu), e1 = vattn_ex2(s[nt][1] - mu);
            rs += e0 + e1;
            *reinterpret_cast<uint32_t *>(vattn_p7(sm, Rw, nt * 8 + 2 * t4)) = vattn_pack2<FP16>(e0, e1);
        }
        rs += __shfl_xor_sync(0xffffffffu, rs, 1);
        rs += __shfl_xor_sync(0xffffffffu, rs, 2);
        l_run = l_run * alpha + rs;
        m_run = m_new;
        if (t4 == 0)
            sm.alpha[Rw] = alpha;
        /* P and alpha of the group's 32 rows visible; does any of them need O rescaled? */
        if (bar_red_or_named(V7_BAR_PUBLISH + grp, 128, alpha != 1.0f))
            vattn_rescale_o<2, 16>(oacc, sm.alpha, grp * 32, lane);

        /* O[group rows, warp's 128 cols] += P . V (rescaled above) */
        {
            /* V rows kk*16 + (lane & 7) (+8 for lanes 8-15, 24-31), chunks 16 w4 + (lane >> 4) + 2 np */
            uint32_t vb[4];
            v7_sweep_bases(smem_u32(&sm.kv[stage][(lane & 7) + ((lane >> 3) & 1) * 8][0]), 2 * w4, lane >> 4,
                           lane & 7, vb);
            vattn_pv_tile<FP16, 2, 16>(
                oacc, [&](int row, int col) { return smem_u32(vattn_p7(sm, row, col)); },
                [&](int kk, int np) { return vb[np & 3] + (np >> 2) * 128 + kk * (16 * QK * 2); }, grp * 32, lane);
        }

        if (KS) {
            if (j + 2 < ntiles) {
                bar_sync_named(V7_BAR_G1 + grp, 128); /* the group's reads of its stage done */
                v7_load_tile(p, sm, stage, j + 2, tid - 128 * grp);
            }
        } else if (grp == 0) {
            /* every thread arrives for its own reads of the stage (one lane per warp after a
             * __syncwarp is enough under the PTX memory model, but compute-sanitizer racecheck
             * cannot see that ordering and reports every stage as a hazard) */
            mbar_arrive(&sm.empty[stage]);
        } else if (j + 2 < ntiles) {
            bar_sync_named(V7_BAR_G1, 128);                 /* group 1's reads of the stage done */
            mbar_wait(&sm.empty[stage], (j >> 1) & 1);      /* group 0's too */
            v7_load_tile(p, sm, stage, j + 2, tid - 128);
        }
    }
    if (KS && grp == 1 && (ntiles & 1)) {
        /* With an odd tile count group 0 ran one tile more, so three block-level barrier
         * instructions more (pair, publish, refill) than group 1. Group 1 runs the same three
         * on its own ids, which orders nothing: compute-sanitizer racecheck matches barrier
         * intervals by each warp's count of barriers, so with unequal counts it reported
         * every access of vattn_ks_merge's hand-off (ordered by its __syncthreads) as a hazard
         * (184,320 on nanv-h8-q4-v8; 0 on the even case even-h8-q4-v8) */
        bar_sync_named(V7_BAR_PAIR + rg, 64);
        bar_red_or_named(V7_BAR_PUBLISH + grp, 128, 0);
        if (ntiles >= 3)
            bar_sync_named(V7_BAR_G1 + grp, 128);
    }
    if (t4 == 0) {
        sm.m[Rw] = m_run;
        sm.l[Rw] = l_run;
    }
    cp_async_wait_all(); /* the ring warps' index copies past the last tile */
    vattn_pdl_trigger(); /* the combine kernel may be launched (it waits for this grid to end) */
#ifdef VATTN_DEV
    if (p.dev_stage == 3) /* timing variant: no epilogue */
        return;
#endif
    __syncthreads(); /* final m, l, bad visible to every thread; both groups done with the stages */
    if (KS) {
        vattn_ks_merge(sm, oacc, grp, tid, lane);
        if (grp == 0) /* the merged (m, l) are in alpha[0..31] / alpha[32..63] (visible: merge's barriers) */
            vattn_fast_epilogue<FP16, 2, 16>(p, sm.alpha, sm.alpha + 32, sm.bad != 0, oacc, BMB, 0, w4 * 128, mc, sp,
                                             b, lane, w4 == 0 ? lane : -1);
        return;
    }
    /* lse / (m, l) of each row by a thread of the row's own group (warps 0 and 4) */
    vattn_fast_epilogue<FP16, 2, 16>(p, sm.m, sm.l, sm.bad != 0, oacc, BM7, grp * 32, w4 * 128, mc, sp, b, lane,
                                     w4 == 0 ? grp * 32 + lane : -1);
}

} /* namespace */

#endif /* VATTN_FAST7_CUH */
