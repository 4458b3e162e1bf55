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
 * each finishes the softmax of 8 rows (the kh = 1 warp's Q fragments hold its rows in the other
 * order, so both keep c0, c1 and give c2, c3: no select per tile; -3 to -6 %, docs/PERF.md).
 * O = P V: warp w owns output columns 128 (w & 3)..+127 of the group's 32 rows (128 fp32
 * registers). The groups only meet at the KV stages: group 1 (which
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
#include "vattn_fast7_parts.cuh"

namespace {

/* KS = 0: 64 rows per block, the groups own rows 0-31 and 32-63 and share every KV tile.
 * KS = 1 (key split, v8): 32 rows per block, both groups hold the same 32 rows and take
 * alternate tiles (group g: tiles g, g + 2, ...), each in its own stage with its own softmax
 * state; group 1's (m, l, O) is merged into group 0's after the loop. For requests of <= 32
 * rows this keeps both groups on real rows (KS = 0 would give group 1 only padding). */
/* DEEP (KS = 0 only; the host's vattn_plan picks it for long splits of several row chunks):
 * the ring warp puts tile j+3's rows into L2 at tile j, two tiles of compute before group 1
 * copies them, and the index ring runs three tiles ahead. Measured (H200, sixteenth session,
 * docs/PERF.md): -1.5 to -2.5 % on the four multi-chunk long configs, +1.4 % at 32 tiles per
 * split, +0.7 to +1.9 % on single-chunk launches (one block reads each tile) when it was
 * unconditional; DEEP = 0 keeps the one-tile-ahead prefetch and its PTX. */
template <int FP16, int KS, int DEEP = 0>
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
    /* Q fragments: rows qrg*16 + g (+8), columns kh*256 + ks*16 + (2*t4 | 2*t4+8). KS = 1: loaded
     * first, since they depend on nothing the prologue reads: they travel while kv_indptr,
     * kv_indices and the first tile make their dependent round trips (as v3 does) */
    uint32_t qf[KSTEPS7][4];
    if (KS)
        v7_load_q(p, qf, mc * BMB + qrg * 16, b, kh, lane);
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
        if (DEEP) /* the deep ring's tile 3 */
            vattn_idx_async(p, sm, 3, start, key_begin, 3, bk.idx_end, lane);
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

    /* KS = 0: the Q fragments are loaded here, after the first tiles' copies were issued (loaded
     * first, as KS = 1 does, v7's loop ran 0.6-1.4 % slower on every long config: docs/PERF.md) */
    if (!KS)
        v7_load_q(p, qf, mc * BMB + qrg * 16, b, kh, lane);

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
        if (!KS && j > 0 && !V7_PROBE(p, V7_PROBE_NOBAR))
            bar_sync_named(V7_BAR_TOP + grp, 128); /* the group's P V(j-1) done: red, alpha free */
        {
            if (warp == lead && V7_PROBE(p, V7_PROBE_NORING)) {
                sm.rows[(j + 2) & 3][lane] = sm.rows[j & 3][lane]; /* the rows of a landed tile */
            } else if (warp == lead) {
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
                /* DEEP: tile j+3's rows into L2 now (tile 2's went at j = 0), the ring runs
                 * three tiles ahead; its slot (j+3) % IDX_RING landed with the wait above */
                constexpr bool deep = !KS && DEEP;
                const bool noload = V7_PROBE(p, V7_PROBE_NOLOAD);
                if ((!deep || j == 0) && !noload)
                    vattn_prefetch_row_l2(r2);
                if (deep && !noload)
                    vattn_prefetch_row_l2(
                        vattn_idx_row(p, sm, (j + 3) % IDX_RING, lane + (j + 3) * BN, rel_end, rel_pre, b, lane));
                /* KS: the group's tile after next is j + 4 */
                const int nxt = j + (KS || deep ? 4 : 3);
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
        vattn_sweep_bases(krow_addr, 4 * kh, (lane >> 3) & 1, lane & 7, kb);
        constexpr int K16 = 16 * QK * 2; /* keys 16..31 */
        if (!V7_PROBE(p, V7_PROBE_NOS)) {
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
                ldsm_x4(smem_u32(&sm.qr[qrg * 16 + (lane & 7) + (((lane >> 3) & 1) ^ kh) * 8]
                                       [(kh * RSTEPS7 + ks) * 16 + (lane >> 4) * 8]),
                        a[0], a[1], a[2], a[3]);
                /* rope chunks 64 + 2 (kh RSTEPS7 + ks) + ((lane >> 3) & 1) */
                const uint32_t kr =
                    krow_addr + (vattn_swz_chunk(lane & 7, DV / 8 + 2 * (kh * RSTEPS7 + ks) + ((lane >> 3) & 1)) << 4);
                ldsm_x4(kr, b0, b1, b2, b3);
                ldsm_x4(kr + K16, c0, c1, c2, c3);
                mma16816<FP16>(sacc[0], a, b0, b1);
                mma16816<FP16>(sacc[1], a, b2, b3);
                mma16816<FP16>(sacc[2], a, c0, c1);
                mma16816<FP16>(sacc[3], a, c2, c3);
            }
        }
        /* swap halves with the partner warp: each keeps the row it finishes (c0, c1: row Rw, by
         * the fragment order of v7_load_q and the rope ldmatrix above) and gives c2, c3 (row Rp) */
        float s[4][2];
        const bool nox = V7_PROBE(p, V7_PROBE_NOX);
#pragma unroll
        for (int nt = 0; nt < 4; nt++) {
            s[nt][0] = sacc[nt][0];
            s[nt][1] = sacc[nt][1];
            if (!nox)
                *reinterpret_cast<float2 *>(&sm.red[Rp][nt * 8 + 2 * t4]) = make_float2(sacc[nt][2], sacc[nt][3]);
        }
        if (!nox)
            bar_sync_named(V7_BAR_PAIR + rg, 64);
        const int lim_end = rel_end - j * BN, lim_pre = rel_pre - j * BN; /* tile-relative */
        const bool all_vis = BN <= lim_pre && BN <= lim_end;
        /* the partner's halves added (four reads from one address, immediate offsets), then the
         * tile's masked keys (one branch: only a split's last tiles have any) */
#pragma unroll
        for (int nt = 0; nt < 4; nt++) {
            const float2 o =
                nox ? make_float2(0.0f, 0.0f) : *reinterpret_cast<const float2 *>(&sm.red[Rw][nt * 8 + 2 * t4]);
            s[nt][0] = (s[nt][0] + o.x) * p.scale_log2;
            s[nt][1] = (s[nt][1] + o.y) * p.scale_log2;
        }
        if (!all_vis) {
#pragma unroll
            for (int nt = 0; nt < 4; nt++)
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
        float mx = -INFINITY;
#pragma unroll
        for (int nt = 0; nt < 4; nt++)
            mx = fmaxf(mx, fmaxf(s[nt][0], s[nt][1]));
        const bool nosm = V7_PROBE(p, V7_PROBE_NOSM);
        if (!nosm) {
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        }
        /* lazy rescale: the reference max moves only when the tile exceeds it by 2^8 */
        const bool move = !nosm && mx - m_run > VATTN_LAZY_TH;
        const float m_new = move ? mx : m_run;
        const float mu = m_new == -INFINITY ? 0.0f : m_new;
        const float alpha = move ? vattn_ex2(m_run - mu) : 1.0f;
        float rs = 0.0f;
        __syncwarp(); /* all partial reads of row Rw done before P overwrites it */
#pragma unroll
        for (int nt = 0; nt < 4; nt++) {
            const float e0 = nosm ? s[nt][0] : vattn_ex2(s[nt][0] - mu);
            const float e1 = nosm ? s[nt][1] : vattn_ex2(s[nt][1] - mu);
            rs += e0 + e1;
            *reinterpret_cast<uint32_t *>(vattn_p7(sm, Rw, nt * 8 + 2 * t4)) = vattn_pack2<FP16>(e0, e1);
        }
        if (!nosm) {
            rs += __shfl_xor_sync(0xffffffffu, rs, 1);
            rs += __shfl_xor_sync(0xffffffffu, rs, 2);
        }
        l_run = l_run * alpha + rs;
        m_run = m_new;
        if (t4 == 0)
            sm.alpha[Rw] = alpha;
        /* P and alpha of the group's 32 rows visible; does any of them need O rescaled? */
        const bool rescale =
            V7_PROBE(p, V7_PROBE_NOBAR) ? alpha != 1.0f : bar_red_or_named(V7_BAR_PUBLISH + grp, 128, alpha != 1.0f);
        if (rescale && !V7_PROBE(p, V7_PROBE_NOPV))
            vattn_rescale_o<2, 16>(oacc, sm.alpha, grp * 32, lane);

        /* O[group rows, warp's 128 cols] += P . V (rescaled above) */
        if (!V7_PROBE(p, V7_PROBE_NOPV)) {
            /* V rows kk*16 + (lane & 7) (+8 for lanes 8-15, 24-31), chunks 16 w4 + (lane >> 4) + 2 np */
            uint32_t vb[4];
            vattn_sweep_bases(smem_u32(&sm.kv[stage][(lane & 7) + ((lane >> 3) & 1) * 8][0]), 2 * w4, lane >> 4,
                              lane & 7, vb);
            vattn_pv_tile<FP16, 2, 16>(
                oacc, [&](int row, int col) { return smem_u32(vattn_p7(sm, row, col)); },
                [&](int kk, int np) { return vb[np & 3] + (np >> 2) * 128 + kk * (16 * QK * 2); }, grp * 32, lane);
        }

        if (KS) {
            if (j + 2 < ntiles) {
                bar_sync_named(V7_BAR_G1 + grp, 128); /* the group's reads of its stage done */
                if (V7_PROBE(p, V7_PROBE_NOLOAD))
                    mbar_arrive(&sm.full[stage]); /* the copies' arrival, without copies */
                else
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
            if (V7_PROBE(p, V7_PROBE_NOLOAD))
                mbar_arrive(&sm.full[stage]); /* the copies' arrival, without copies */
            else
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
