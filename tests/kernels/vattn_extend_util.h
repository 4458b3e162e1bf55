/*
 * vattn_extend_util.h — turns a host verify call into the equivalent vattn_extend call (SGLang's
 * target-verify convention), for the CPU and GPU kernel tests: the draft tokens' cache rows move
 * from their pool slots into k_extend (with a row gap of NaN), kv_indptr / kv_indices keep only
 * the prefix, qo_indptr = b * q_len, and the visibility matrix becomes SGLang's flattened
 * custom_mask whose PREFIX columns hold random garbage (zeros among it) and whose requests are
 * separated by garbage bytes: only the draft columns at mask_indptr[b] + i * kv_len + prefix + j
 * may be read. The pool copy has every draft row overwritten with NaN, so an extend call that
 * reads a draft key from the pool (or a mask byte it should not) cannot match the verify call,
 * which must be bitwise equal. Header-only, static; draws from g_rng (vattn_test_util.h).
 */
#ifndef VATTN_EXTEND_UTIL_H
#define VATTN_EXTEND_UTIL_H

#include "vattn_test_util.h"

#define VATTN_EXT_MASK_PAD 3 /* garbage bytes between two requests' mask rows */

typedef struct vattn_ext_host {
    vattn_extend_args e; /* host pointers (q, o, lse: the verify call's own) */
    uint16_t *kext, *kv; /* k_extend [T][kext_stride]; the pool copy, draft rows NaN */
    int32_t *qo, *indptr;
    void *indices;
    uint8_t *mask; /* NULL when the verify call is causal with visibility NULL */
    int64_t *mask_indptr;
    size_t kext_elems, kv_elems, mask_bytes, idx_bytes;
} vattn_ext_host;

/* a: the verify call (host pointers, strides, sizes); indptr / indices / kv: its host arrays
 * (kv_elems elements in the pool); vis: the explicit [bs][q_len][q_len] matrix (read only when
 * a->visibility is set). kext_gap: extra elements between k_extend rows. */
static void vattn_ext_from_verify(const vattn_args *a, const int32_t *indptr, const void *indices, const uint8_t *vis,
                                  const uint16_t *kv, size_t kv_elems, int kext_gap, vattn_ext_host *X)
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
    X->mask_indptr[0] = tk_int(&g_rng, VATTN_EXT_MASK_PAD + 1); /* need not start at 0 */
    for (int b = 0; b < bs; b++) {
        const int64_t prefix = indptr[b + 1] - indptr[b] - ql;
        X->qo[b] = b * ql;
        X->indptr[b + 1] = X->indptr[b] + (int32_t)prefix;
        X->mask_indptr[b + 1] = X->mask_indptr[b] + (int64_t)ql * (prefix + ql) + tk_int(&g_rng, VATTN_EXT_MASK_PAD + 1);
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
        X->mask_bytes = (size_t)X->mask_indptr[bs] + VATTN_EXT_MASK_PAD;
        X->mask = malloc(X->mask_bytes);
        for (size_t i = 0; i < X->mask_bytes; i++) /* garbage: half zeros, the rest anything */
            X->mask[i] = tk_int(&g_rng, 2) ? 0 : (uint8_t)tk_next(&g_rng);
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

static void vattn_ext_free(vattn_ext_host *X)
{
    free(X->kext);
    free(X->kv);
    free(X->qo);
    free(X->indptr);
    free(X->indices);
    free(X->mask);
    free(X->mask_indptr);
}

#endif /* VATTN_EXTEND_UTIL_H */
