/*
 * vattn_fast7_parts.cuh — the building blocks of the v7 / v8 kernel (vattn_fast7.cuh), kept
 * apart so that the kernel reads as its loop: the block's shared-memory layout (FastSmem7: the
 * two swizzled KV stages, the P and partial-S buffers, the kv_indices ring, the rope columns of
 * Q, softmax state), the raw-index cp.async ring and its reads, named barriers (bar.sync /
 * bar.red.or with a thread count) and the stages' mbarriers, the tile loader (one group's
 * cp.async copies of a 32-key tile into the XOR-swizzled stage of vattn_swizzle.h,
 * arriving on the stage's "full" mbarrier), and the key-split merge of v8 (group 1's m, l, O
 * into group 0's, in a fixed order). Everything here is legal on sm_120 and sm_90 (cp.async,
 * ldmatrix, mbarrier; no TMA, wgmma or tcgen05).
 */

#ifndef VATTN_FAST7_PARTS_CUH
#define VATTN_FAST7_PARTS_CUH

#include "vattn_common.cuh"

namespace {
constexpr int BM7 = 64;
constexpr int KSTEPS7 = DV / 16 / 2;       /* 16 k16 steps of the 512 latent columns per k-half */
constexpr int RSTEPS7 = (QK - DV) / 16 / 2; /* 2 k16 steps of the 64 rope columns per k-half */
constexpr int QR_PITCH = QK - DV + 8;

constexpr int IDX_RING = 8; /* raw kv_indices in flight (cp.async): tiles j+2, j+3 (DEEP: ..j+4; KS: j+2, j+4 per group) */

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

/* Loop probes, for measuring where v7's tile time goes (dev builds with -DVATTN_DEV_MODES
 * only; VATTN_DEV_STAGE = 16 + bits, read per call): each bit leaves one step of the KV loop
 * out, so a timing difference is that step's share of the critical path. The outputs of a
 * probed call are not the attention. Without VATTN_DEV_MODES every probe is a constant false
 * and the kernels compile to the same machine code. */
enum {
    V7_PROBE_NOLOAD = 1,  /* no KV copies after the first two tiles (no L2 prefetch of rows either) */
    V7_PROBE_NOS = 2,     /* no S = Q K^T MMAs (nor their ldmatrix) */
    V7_PROBE_NOX = 4,     /* no S-partial exchange between the warps of a pair (nor its barrier) */
    V7_PROBE_NOPV = 8,    /* no O += P V (nor the rescale of O) */
    V7_PROBE_ON = 16,     /* set in every probe value */
    V7_PROBE_NOSM = 32,   /* no softmax shuffles or exponentials (P = the scaled S) */
    V7_PROBE_NORING = 64, /* no kv_indices ring work (tiles reuse landed rows) */
    V7_PROBE_NOBAR = 128  /* no top-of-tile and publish barriers of a group (races: timing only) */
};
#ifdef VATTN_DEV_MODES
#define V7_PROBE(p, bit) (((p).dev_stage & V7_PROBE_ON) != 0 && ((p).dev_stage & (bit)) != 0)
#else
#define V7_PROBE(p, bit) false
#endif

constexpr float VATTN_LAZY_TH = 8.0f; /* log2 of the largest P value allowed before a rescale */

__device__ __forceinline__ float vattn_ex2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

struct FastSmem7 {
    /* 2 stages (full / empty mbarriers below), rows of 1152 B without padding: the 16-byte
     * chunk c of row r sits at chunk c ^ (r & 7) (vattn_swz). Rows stay 128-byte aligned, so the
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

/* This lane's Q fragments (A operand of m16n8k16) for the 16 block rows from r0, latent columns
 * of k-half kh (kh * 256 + ks * 16 + 2 t4 | + 8); rows past M are 0. The fragment's upper rows
 * (a0, a2; accumulators c0, c1) are rows r0 + g for kh = 0 and r0 + g + 8 for kh = 1, the lower
 * ones the other 8: so each warp of an S pair keeps c0, c1 (the row it finishes) and gives c2,
 * c3 to its partner, with no per-tile select on kh. */
__device__ __forceinline__ void v7_load_q(const VattnParams &p, uint32_t (&qf)[KSTEPS7][4], int r0, int b, int kh,
                                          int lane)
{
    const int g = lane >> 2, t4 = lane & 3;
#pragma unroll
    for (int hr = 0; hr < 2; hr++) {
        const int r = r0 + g + (hr ^ kh) * 8;
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
}

/* The loading group's copies of tile `tile` into `stage` (t = its thread, 0..127): rows t >> 3
 * and +16, 8 threads per row (vattn_copy_row), arriving on the stage's "full" mbarrier. */
__device__ __forceinline__ void v7_load_tile(const VattnParams &p, FastSmem7 &sm, int stage, int tile, int t)
{
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int row = (t >> 3) + 16 * h;
        vattn_copy_row(p, smem_u32(&sm.kv[stage][0][0]), sm.rows[tile & 3][row], row, t & 7);
    }
    mbar_cp_async_arrive(&sm.full[stage]);
}

/* Key split (KS = 1), after the loop: group 1 hands its O (same fragment layout as the group
 * 0 thread 128 below it) to group 0 through its own stage (stage 1, which group 0 never read;
 * 32 KB per row half, so in two rounds), and group 0 merges it into its own in a fixed order:
 * m = max(m0, m1), O = O0 2^(m0 - m) + O1 2^(m1 - m), l likewise (a group that saw no key has
 * m = -inf: weight 0). The merged m, l go to alpha[0..31], alpha[32..63]. Called by every
 * thread after a block barrier (sm.m, sm.l final; both groups done reading their stages).
 * Measured and dropped (fifteenth session): a symmetric merge, each group handing the other the
 * 16-row half it does not write through its own stage (one exchange, one barrier) and both
 * groups writing the epilogue: within ±0.2 us of this one on every v8 serving row. */
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

} /* namespace */

#endif
