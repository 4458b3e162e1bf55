/*
 * testkit_vattn.h — the test kit's random vattn_verify call (tests/testkit.h has the checks and
 * the generator): a case (tk_vcase, written as a designated initializer) gives bs, q_len, heads,
 * the prefix range, the visibility mode, index width, dtype, strides and gaps, or a fixed shape
 * (prefixes, pool size, slot ids that repeat); tk_vcall_build draws the rest (ragged prefixes,
 * a shuffled slot pool, values) and lays the call out so that a read of anything the call does
 * not own, or a write outside its outputs, shows: input gaps and unused pool rows hold NaN, o /
 * lse sit between guard bytes. Also the data random values miss (Q = 0, a hidden NaN/Inf key)
 * and the same call in the extend convention (tk_vext_build). One builder, so the kernel tests,
 * the formats tests and tools, the capture client and kcap_gen_snap all make their calls the
 * same way (and a fix to it reaches every one). Header-only, static.
 */
#ifndef KCAP_TESTKIT_VATTN_H
#define KCAP_TESTKIT_VATTN_H

#include "testkit.h"
#include "verify_attn.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define QK VATTN_HEAD_DIM_QK
#define DV VATTN_HEAD_DIM_V
#define POISON_BF16 TK_BF16_NAN
#define POISON_F16 TK_F16_NAN

enum { TK_VIS_CAUSAL_NULL, TK_VIS_CAUSAL, TK_VIS_TREE, TK_VIS_RANDOM, TK_VIS_FULL };
static inline const char *tk_vis_label(int vis)
{
    static const char *const names[] = {"causal(NULL)", "causal", "tree", "random", "full"};
    return vis >= 0 && vis <= TK_VIS_FULL ? names[vis] : "?";
}

/* One random verify call. Fields left out of a designated initializer take their defaults:
 * kv_stride 0 = a dense pool row (VATTN_HEAD_DIM_QK), sm_scale 0 = TK_VCASE_SCALE. */
#define TK_VCASE_SCALE 0.0625f /* about 1/sqrt(576 / 2.25): scores of O(1) on unit-range data */
/* Draws one Q or K entry of the dtype (bf16 when fp16 == 0). */
typedef uint16_t (*tk_vattn_val_fn)(tk_rng *r, int fp16);

typedef struct tk_vcase {
    const char *name;
    int bs, q_len, heads;
    int max_prefix; /* prefixes drawn in [0, max_prefix] */
    int zero_first; /* request 0 gets prefix 0 */
    int vis;        /* TK_VIS_* */
    int idx64, fp16;
    int q_gap_h, q_gap_t; /* extra elements between heads / after the last head */
    int kv_stride;        /* elements per pool row */
    int o_gap_h, o_gap_t;
    int no_lse;
    float sm_scale;
    int special; /* TK_SP_* */
    /* for callers that draw the shape themselves (kcap_gen_snap keeps its shapes, so its
     * benchmark figures stay comparable); 0 / NULL = the builder's own choice: */
    const int64_t *prefixes; /* [bs] prefix lengths, else drawn */
    int64_t num_slots;       /* pool rows, else 1.5x the keys used + 3 */
    int share_prefix;        /* requests b > 0 reuse request 0's prefix slots, as a radix cache */
    int pass_max_kv;         /* max_kv_len = the longest kv, else 0 (unknown) */
    tk_vattn_val_fn val;     /* Q and K entries, else tk_vattn_unit_val */
    /* slot ids drawn with replacement (tk_vattn_dup_indices): ids repeat, as shared prefixes
     * make them, and num_slots may be below the keys used (the formats tests' calls) */
    int dup_slots;
} tk_vcase;

/* TK_SP_ZERO_Q: Q = 0 and the rope columns of K = 0 (V is K's first 512 columns: K itself cannot
 * be 0). TK_SP_MASKED_NANV: per request one draft key with its visibility column cleared and its
 * whole cache row NaN / +Inf / -Inf. */
enum { TK_SP_NONE, TK_SP_ZERO_Q, TK_SP_MASKED_NANV };

#define TK_VCALL_GUARD_BYTES 256 /* around o and lse: a write past either end shows */
#define TK_VCALL_GUARD_BYTE 0xA5

/* Data random values miss, applied to a built call (a: sizes / strides / dtype / index type;
 * the host arrays alongside; vis: the explicit [bs][q_len][q_len] matrix, NULL only when
 * zero_q). zero_q: Q = 0 (owned elements) and the rope columns of every used K = 0 (V is K's
 * first 512 columns, so K itself cannot be 0): every score is 0. hidden_nan: per request b,
 * draft key (7 b + 1) % q_len is hidden from every query (its visibility column cleared) and
 * its whole cache row holds NaN / +Inf / -Inf. */
static inline void tk_vattn_special_data(const vattn_args *a, const int32_t *indptr, const void *indices, uint8_t *vis,
                                      uint16_t *q, uint16_t *kv, int zero_q, int hidden_nan)
{
    const int fp16 = a->dtype == VATTN_DTYPE_FP16, ql = a->q_len, H = a->num_heads, idx64 = a->index_type;
    const int64_t T = (int64_t)a->bs * ql;
#define VATTN_SLOT_AT(pos) (idx64 ? ((const int64_t *)indices)[pos] : (int64_t)((const int32_t *)indices)[pos])
    if (zero_q) {
        for (int64_t t = 0; t < T; t++)
            for (int h = 0; h < H; h++)
                memset(q + t * a->q_stride_t + h * a->q_stride_h, 0, QK * 2);
        for (int64_t i = 0; i < indptr[a->bs]; i++)
            memset(kv + VATTN_SLOT_AT(i) * a->kv_stride + DV, 0, (QK - DV) * 2);
    }
    if (hidden_nan) {
        const uint16_t pnan = fp16 ? POISON_F16 : POISON_BF16, pinf = fp16 ? TK_F16_INF : TK_BF16_INF;
        for (int b = 0; b < a->bs; b++) {
            const int d = (b * 7 + 1) % ql;
            const int64_t slot = VATTN_SLOT_AT(indptr[b + 1] - ql + d);
            for (int i = 0; i < ql; i++)
                vis[((size_t)b * ql + i) * ql + d] = 0;
            for (int ch = 0; ch < QK; ch++)
                kv[slot * a->kv_stride + ch] = ch % 3 == 0 ? pnan : ch % 3 == 1 ? pinf : (uint16_t)(pinf | TK_SIGN16);
        }
    }
#undef VATTN_SLOT_AT
}

/* A value of the dtype uniform in [-1, 1): the random call's default Q and K entries. */
static inline uint16_t tk_vattn_unit_val(tk_rng *r, int fp16) { return tk_enc_trunc(tk_unit(r) * 2.0 - 1.0, fp16); }

/* Uniform in [-1, 1) but never 0 nor tiny (|v| >= TK_VATTN_MIN_ABS): no score is trivially 0,
 * and a copy that lost the data (zeros) cannot pass for it. */
#define TK_VATTN_MIN_ABS (1.0 / 64)
static inline uint16_t tk_vattn_nonzero_val(tk_rng *r, int fp16)
{
    return tk_enc_trunc(tk_nonzero(r, TK_VATTN_MIN_ABS), fp16);
}

/* perm[0 .. used) as kv_indices (int64 when idx64, else int32) */
static inline void *tk_vattn_index_array(int idx64, const int64_t *perm, int64_t used)
{
    void *ix = malloc(used > 0 ? (size_t)used * (idx64 ? 8 : 4) : 8);
    for (int64_t i = 0; i < used; i++) {
        if (idx64)
            ((int64_t *)ix)[i] = perm[i];
        else
            ((int32_t *)ix)[i] = (int32_t)perm[i];
    }
    return ix;
}

/* The slots of `used` keys: perm (num_slots entries) becomes a random permutation of the pool
 * and its first `used` entries the returned kv_indices (int64 when idx64, else int32). */
static inline void *tk_vattn_indices(tk_rng *r, int idx64, int64_t used, int64_t num_slots, int64_t *perm)
{
    tk_shuffle(r, perm, num_slots);
    return tk_vattn_index_array(idx64, perm, used);
}

/* Slot ids that repeat: perm[0 .. used) drawn with replacement from the first
 * half of the pool (all of a pool under 4 rows), so some ids come twice even in a small call
 * and a larger pool keeps rows nobody references; returned as kv_indices. */
static inline void *tk_vattn_dup_indices(tk_rng *r, int idx64, int64_t used, int64_t num_slots, int64_t *perm)
{
    const int64_t range = num_slots < 4 ? num_slots : num_slots / 2;
    for (int64_t i = 0; i < used; i++)
        perm[i] = tk_range(r, 0, range - 1);
    return tk_vattn_index_array(idx64, perm, used);
}

/* The pool of a (num_slots rows of kv_stride): NaN everywhere but the QK channels of the rows
 * perm[0 .. used), drawn with val in that order (reading anything else poisons a result). */
static inline uint16_t *tk_vattn_pool(tk_rng *r, const vattn_args *a, const int64_t *perm, int64_t used,
                                      tk_vattn_val_fn val, size_t *elems)
{
    const int fp16 = a->dtype == VATTN_DTYPE_FP16;
    *elems = (size_t)a->num_slots * a->kv_stride;
    uint16_t *kv = malloc(*elems * 2);
    for (size_t i = 0; i < *elems; i++)
        kv[i] = fp16 ? POISON_F16 : POISON_BF16;
    for (int64_t i = 0; i < used; i++)
        for (int ch = 0; ch < QK; ch++)
            kv[perm[i] * a->kv_stride + ch] = val(r, fp16);
    return kv;
}

/* Q of T tokens with a's strides: NaN in the gaps, the owned elements drawn with val. */
static inline uint16_t *tk_vattn_q(tk_rng *r, const vattn_args *a, int64_t T, tk_vattn_val_fn val, size_t *elems)
{
    const int fp16 = a->dtype == VATTN_DTYPE_FP16;
    *elems = (size_t)T * a->q_stride_t;
    uint16_t *q = malloc(*elems * 2);
    for (size_t i = 0; i < *elems; i++)
        q[i] = fp16 ? POISON_F16 : POISON_BF16;
    for (int64_t t = 0; t < T; t++)
        for (int h = 0; h < a->num_heads; h++)
            for (int ch = 0; ch < QK; ch++)
                q[t * a->q_stride_t + h * a->q_stride_h + ch] = val(r, fp16);
    return q;
}

typedef struct tk_vcall {
    vattn_args a;
    uint16_t *q, *kv, *o;
    unsigned char *o_alloc, *lse_alloc; /* o / lse with TK_VCALL_GUARD_BYTES guard bytes each side */
    int32_t *indptr;
    void *indices;
    uint8_t *vis;
    float *lse;
    size_t q_elems, kv_elems, o_elems, lse_elems;
    void *ws; /* the caller's: the kit links no kernel library (kcap_gen_snap dlopens one) */
    size_t ws_bytes;
} tk_vcall;

/* Builds case c with draws from r: ragged prefixes, a shuffled pool 1.5x the keys used (or slot
 * ids that repeat, c->dup_slots), both index widths, strided q / o with NaN in every gap and
 * unused pool row, the explicit [bs][q_len][q_len] visibility matrix in B->vis whatever c->vis
 * (a->visibility is NULL only for TK_VIS_CAUSAL_NULL), o / lse between guard bytes. */
static inline void tk_vcall_build(const tk_vcase *c, tk_rng *r, tk_vcall *B)
{
    memset(B, 0, sizeof *B);
    const int fp16 = c->fp16, T = c->bs * c->q_len, H = c->heads;
    vattn_args *a = &B->a;
    a->struct_size = sizeof(vattn_args);
    a->dtype = fp16 ? VATTN_DTYPE_FP16 : VATTN_DTYPE_BF16;
    a->index_type = c->idx64 ? VATTN_INDEX_INT64 : VATTN_INDEX_INT32;
    a->bs = c->bs;
    a->q_len = c->q_len;
    a->num_heads = H;
    a->sm_scale = c->sm_scale != 0.0f ? c->sm_scale : TK_VCASE_SCALE;
    a->q_stride_h = QK + c->q_gap_h;
    a->q_stride_t = (int64_t)(H - 1) * a->q_stride_h + QK + c->q_gap_t;
    a->o_stride_h = DV + c->o_gap_h;
    a->o_stride_t = (int64_t)(H - 1) * a->o_stride_h + DV + c->o_gap_t;
    a->kv_stride = c->kv_stride ? c->kv_stride : QK;

    B->indptr = malloc(sizeof(int32_t) * (c->bs + 1));
    B->indptr[0] = 0;
    for (int b = 0; b < c->bs; b++) {
        const int64_t prefix = c->prefixes ? c->prefixes[b]
                               : (b == 0 && c->zero_first) ? 0 : tk_int(r, c->max_prefix + 1);
        B->indptr[b + 1] = B->indptr[b] + (int32_t)prefix + c->q_len;
    }
    const int total = B->indptr[c->bs];
    /* pool: 1.5x the keys used, random permutation, the unused rows hold NaN */
    const int64_t num_slots = c->num_slots ? c->num_slots : total + total / 2 + 3;
    a->num_slots = num_slots;
    a->max_kv_len = 0;
    for (int b = 0; b < c->bs && c->pass_max_kv; b++)
        if (B->indptr[b + 1] - B->indptr[b] > a->max_kv_len)
            a->max_kv_len = B->indptr[b + 1] - B->indptr[b];
    /* a permutation of the pool, or (dup_slots) one id per key, which may outnumber the pool */
    int64_t *perm = malloc(sizeof(int64_t) * (num_slots > total ? num_slots : total));
    B->indices = c->dup_slots ? tk_vattn_dup_indices(r, c->idx64, total, num_slots, perm)
                              : tk_vattn_indices(r, c->idx64, total, num_slots, perm);
    const int64_t prefix0 = B->indptr[1] - c->q_len;
    for (int b = 1; b < c->bs && c->share_prefix; b++)
        for (int64_t pos = 0; pos < B->indptr[b + 1] - B->indptr[b] - c->q_len && pos < prefix0; pos++) {
            perm[B->indptr[b] + pos] = perm[pos]; /* request 0's slot at the same position */
            if (c->idx64)
                ((int64_t *)B->indices)[B->indptr[b] + pos] = perm[pos];
            else
                ((int32_t *)B->indices)[B->indptr[b] + pos] = (int32_t)perm[pos];
        }
    tk_vattn_val_fn val = c->val ? c->val : tk_vattn_unit_val;
    B->kv = tk_vattn_pool(r, a, perm, total, val, &B->kv_elems);
    free(perm);
    B->q = tk_vattn_q(r, a, T, val, &B->q_elems);

    /* visibility: explicit matrix for every mode (the test's reference always reads it) */
    const int ql = c->q_len;
    B->vis = malloc((size_t)c->bs * ql * ql);
    for (int b = 0; b < c->bs; b++) {
        uint8_t *m = B->vis + (size_t)b * ql * ql;
        int parent[VATTN_MAX_Q_LEN];
        for (int i = 0; i < ql; i++) {
            parent[i] = i == 0 ? -1 : tk_int(r, i);
            for (int j = 0; j < ql; j++) {
                uint8_t v = 0;
                switch (c->vis) {
                case TK_VIS_CAUSAL_NULL:
                case TK_VIS_CAUSAL: v = j <= i; break;
                case TK_VIS_RANDOM: v = tk_int(r, 3) == 0 ? (uint8_t)(1 + tk_int(r, 255)) : 0; break;
                case TK_VIS_FULL: v = 1; break;
                default: break;
                }
                m[i * ql + j] = v;
            }
            if (c->vis == TK_VIS_TREE) /* ancestors and self */
                for (int k = i; k >= 0; k = parent[k])
                    m[i * ql + k] = 1;
        }
        if (c->vis == TK_VIS_RANDOM && ql > 1)
            for (int j = 0; j < ql; j++)
                m[(ql - 1) * ql + j] = 0; /* guarantee one empty row per request */
    }
    a->visibility = c->vis == TK_VIS_CAUSAL_NULL ? NULL : B->vis;
    /* the reference below reads B->vis: a hidden key is cleared there too */
    tk_vattn_special_data(a, B->indptr, B->indices, B->vis, B->q, B->kv, c->special == TK_SP_ZERO_Q,
                       c->special == TK_SP_MASKED_NANV);

    B->o_elems = (size_t)T * a->o_stride_t;
    B->lse_elems = (size_t)T * H;
    B->o_alloc = malloc(B->o_elems * 2 + 2 * TK_VCALL_GUARD_BYTES);
    B->lse_alloc = malloc(B->lse_elems * 4 + 2 * TK_VCALL_GUARD_BYTES);
    memset(B->o_alloc, TK_VCALL_GUARD_BYTE, B->o_elems * 2 + 2 * TK_VCALL_GUARD_BYTES);
    memset(B->lse_alloc, TK_VCALL_GUARD_BYTE, B->lse_elems * 4 + 2 * TK_VCALL_GUARD_BYTES);
    B->o = (uint16_t *)(B->o_alloc + TK_VCALL_GUARD_BYTES);
    B->lse = (float *)(B->lse_alloc + TK_VCALL_GUARD_BYTES);
    a->q = B->q;
    a->kv_cache = B->kv;
    a->kv_indptr = B->indptr;
    a->kv_indices = B->indices;
    a->o = B->o;
    a->lse = c->no_lse ? NULL : B->lse;
}

/* Frees what tk_vcall_build allocated, and ws when the caller set it. */
static inline void tk_vcall_free(tk_vcall *B)
{
    free(B->q);
    free(B->kv);
    free(B->o_alloc);
    free(B->indptr);
    free(B->indices);
    free(B->vis);
    free(B->lse_alloc);
    free(B->ws);
}

/* 1 when the four guard regions around o and lse still hold TK_VCALL_GUARD_BYTE */
static inline int tk_vcall_guards_ok(const tk_vcall *B)
{
    const unsigned char *g[4] = {B->o_alloc, B->o_alloc + TK_VCALL_GUARD_BYTES + B->o_elems * 2, B->lse_alloc,
                                 B->lse_alloc + TK_VCALL_GUARD_BYTES + B->lse_elems * 4};
    for (int k = 0; k < 4; k++)
        for (int i = 0; i < TK_VCALL_GUARD_BYTES; i++)
            if (g[k][i] != TK_VCALL_GUARD_BYTE)
                return 0;
    return 1;
}

static inline void tk_vcall_poison(tk_vcall *B)
{
    const uint16_t p = B->a.dtype == VATTN_DTYPE_FP16 ? POISON_F16 : POISON_BF16;
    for (size_t i = 0; i < B->o_elems; i++)
        B->o[i] = p;
    uint32_t nanbits = 0x7fc00123u;
    for (size_t i = 0; i < B->lse_elems; i++)
        memcpy(&B->lse[i], &nanbits, 4);
}

/* ---- the same call in the extend convention (vattn_extend_args, SGLang's target verify) ----
 * The draft tokens' cache rows move from their pool slots into k_extend (with a row gap of
 * NaN), kv_indptr / kv_indices keep only the prefix, qo_indptr = b * q_len, and the visibility
 * matrix becomes SGLang's flattened custom_mask whose PREFIX columns hold random garbage (zeros
 * among it) and whose requests are separated by garbage bytes: only the draft columns at
 * mask_indptr[b] + i * kv_len + prefix + j may be read. The pool copy has every draft row
 * overwritten with NaN, so an extend call that reads a draft key from the pool (or a mask byte
 * it should not) cannot match the verify call, which must be bitwise equal. The draft slots
 * must be distinct from every prefix slot (not c->dup_slots). */
#define TK_VEXT_MASK_PAD 3 /* garbage bytes between two requests' mask rows */

typedef struct tk_vext {
    vattn_extend_args e; /* host pointers (q, o, lse: the verify call's own) */
    uint16_t *kext, *kv; /* k_extend [T][kext_stride]; the pool copy, draft rows NaN */
    int32_t *qo, *indptr;
    void *indices;
    uint8_t *mask; /* NULL when the verify call is causal with visibility NULL */
    int64_t *mask_indptr;
    size_t kext_elems, kv_elems, mask_bytes, idx_bytes;
} tk_vext;

/* r: the garbage draws; a: the verify call (host pointers, strides, sizes); indptr / indices /
 * kv: its host arrays (kv_elems elements in the pool); vis: the explicit [bs][q_len][q_len]
 * matrix (read only when a->visibility is set). kext_gap: extra elements between k_extend rows. */
static inline void tk_vext_build(tk_rng *r, const vattn_args *a, const int32_t *indptr, const void *indices,
                                 const uint8_t *vis, const uint16_t *kv, size_t kv_elems, int kext_gap, tk_vext *X)
{
    const int bs = a->bs, ql = a->q_len, fp16 = a->dtype == VATTN_DTYPE_FP16;
    const int isz = a->index_type == VATTN_INDEX_INT64 ? 8 : 4;
    const uint16_t nan_in = fp16 ? POISON_F16 : POISON_BF16;
    const int64_t T = (int64_t)bs * ql;
    memset(X, 0, sizeof *X);
    vattn_extend_args *e = &X->e;
    e->struct_size = sizeof *e;
    e->dtype = a->dtype;
    e->index_type = a->index_type;
    e->bs = bs;
    e->q_len = ql;
    e->num_heads = a->num_heads;
    e->num_slots = a->num_slots;
    e->max_kv_len = a->max_kv_len;
    e->sm_scale = a->sm_scale;
    e->q = a->q;
    e->q_stride_t = a->q_stride_t;
    e->q_stride_h = a->q_stride_h;
    e->kv_stride = a->kv_stride;
    e->o = a->o;
    e->o_stride_t = a->o_stride_t;
    e->o_stride_h = a->o_stride_h;
    e->lse = a->lse;
    e->k_extend_stride = QK + kext_gap;

    X->qo = malloc(sizeof(int32_t) * (bs + 1));
    X->indptr = malloc(sizeof(int32_t) * (bs + 1));
    X->mask_indptr = malloc(sizeof(int64_t) * (bs + 1));
    X->indptr[0] = 0;
    X->mask_indptr[0] = tk_int(r, TK_VEXT_MASK_PAD + 1); /* need not start at 0 */
    for (int b = 0; b < bs; b++) {
        const int64_t prefix = indptr[b + 1] - indptr[b] - ql;
        X->qo[b] = b * ql;
        X->indptr[b + 1] = X->indptr[b] + (int32_t)prefix;
        X->mask_indptr[b + 1] = X->mask_indptr[b] + (int64_t)ql * (prefix + ql) + tk_int(r, TK_VEXT_MASK_PAD + 1);
    }
    X->qo[bs] = bs * ql;
    X->idx_bytes = (size_t)X->indptr[bs] * isz;
    X->indices = malloc(X->idx_bytes ? X->idx_bytes : 8);
    X->kext_elems = (size_t)T * e->k_extend_stride;
    X->kext = malloc(X->kext_elems * 2);
    for (size_t i = 0; i < X->kext_elems; i++)
        X->kext[i] = nan_in;
    X->kv_elems = kv_elems;
    X->kv = malloc(kv_elems * 2);
    memcpy(X->kv, kv, kv_elems * 2);
    for (int b = 0; b < bs; b++) {
        const int64_t st = indptr[b], prefix = indptr[b + 1] - st - ql;
        memcpy((char *)X->indices + (size_t)X->indptr[b] * isz, (const char *)indices + (size_t)st * isz,
               (size_t)prefix * isz);
        for (int d = 0; d < ql; d++) {
            const int64_t pos = st + prefix + d;
            const int64_t slot = isz == 8 ? ((const int64_t *)indices)[pos] : ((const int32_t *)indices)[pos];
            memcpy(X->kext + ((int64_t)b * ql + d) * e->k_extend_stride, kv + slot * a->kv_stride, QK * 2);
            for (int c = 0; c < QK; c++)
                X->kv[slot * a->kv_stride + c] = nan_in;
        }
    }
    if (a->visibility) {
        X->mask_bytes = (size_t)X->mask_indptr[bs] + TK_VEXT_MASK_PAD;
        X->mask = malloc(X->mask_bytes);
        for (size_t i = 0; i < X->mask_bytes; i++) /* garbage: half zeros, the rest anything */
            X->mask[i] = tk_int(r, 2) ? 0 : (uint8_t)tk_next(r);
        for (int b = 0; b < bs; b++) {
            const int64_t prefix = X->indptr[b + 1] - X->indptr[b], kv_len = prefix + ql;
            for (int i = 0; i < ql; i++)
                for (int j = 0; j < ql; j++)
                    X->mask[X->mask_indptr[b] + i * kv_len + prefix + j] = vis[((size_t)b * ql + i) * ql + j];
        }
    }
    e->k_extend = X->kext;
    e->kv_cache = X->kv;
    e->qo_indptr = X->qo;
    e->kv_indptr = X->indptr;
    e->kv_indices = X->indices;
    e->custom_mask = X->mask;
    e->mask_indptr = X->mask ? X->mask_indptr : NULL;
}

/* Frees what tk_vext_build allocated (q, o and lse are the verify call's). */
static inline void tk_vext_free(tk_vext *X)
{
    free(X->kext);
    free(X->kv);
    free(X->qo);
    free(X->indptr);
    free(X->indices);
    free(X->mask);
    free(X->mask_indptr);
}

#endif /* KCAP_TESTKIT_VATTN_H */
