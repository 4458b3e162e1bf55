/*
 * vattn_gpu_extend.h — the vattn_extend part of test_verify_gpu.c. Each valid case is turned
 * into the equivalent extend call (vattn_extend_util.h: draft rows in a strided k_extend, the
 * pool's draft rows NaN, prefix-only kv_indices, SGLang's flattened mask with garbage prefix
 * columns); on the GPU the extend reference and the extend fast call must be bitwise equal to
 * the verify reference / fast call of the same case (o and lse), with the same workspace size,
 * guards intact, and the extend fast call replayed from a CUDA graph bitwise equal too. Then
 * invalid extend device data (qo_indptr[bs] != T, mask_indptr[bs] one entry short, kv_indptr
 * decreasing at its end, a prefix slot outside the pool): exactly the requests the header
 * names get NaN (o and lse), every other request keeps its verify bits, no CUDA error.
 * Included by test_verify_gpu.c after its helpers (record, run_kernel, fetch_out,
 * graph_replay, g_guard).
 */
#ifndef VATTN_GPU_EXTEND_H
#define VATTN_GPU_EXTEND_H

#include "vattn_extend_util.h"

typedef struct dext {
    vattn_extend_args e; /* device pointers */
    void *kext, *kv, *qo, *indptr, *indices, *mask, *mask_indptr;
} dext;

static void *dext_copy(const void *src, size_t n)
{
    void *d = NULL;
    CK(cudaMalloc(&d, n ? n : 8));
    if (n)
        CK(cudaMemcpy(d, src, n, cudaMemcpyHostToDevice));
    return d;
}

/* X on the device; q, o, lse and the workspace are the verify call's (D). */
static void dext_upload(const vattn_ext_host *X, const dcall *D, dext *E)
{
    const int bs = X->e.bs;
    E->e = X->e;
    E->kext = dext_copy(X->kext, X->kext_elems * 2);
    E->kv = dext_copy(X->kv, X->kv_elems * 2);
    E->qo = dext_copy(X->qo, sizeof(int32_t) * (bs + 1));
    E->indptr = dext_copy(X->indptr, sizeof(int32_t) * (bs + 1));
    E->indices = dext_copy(X->indices, X->idx_bytes);
    E->mask = X->mask ? dext_copy(X->mask, X->mask_bytes) : NULL;
    E->mask_indptr = dext_copy(X->mask_indptr, sizeof(int64_t) * (bs + 1));
    E->e.q = D->a.q;
    E->e.o = D->a.o;
    E->e.lse = D->a.lse;
    E->e.k_extend = E->kext;
    E->e.kv_cache = E->kv;
    E->e.qo_indptr = E->qo;
    E->e.kv_indptr = E->indptr;
    E->e.kv_indices = E->indices;
    E->e.custom_mask = E->mask;
    E->e.mask_indptr = E->mask ? E->mask_indptr : NULL;
}

static void dext_free(dext *E)
{
    void *p[] = {E->kext, E->kv, E->qo, E->indptr, E->indices, E->mask, E->mask_indptr};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
        if (p[i])
            cudaFree(p[i]);
}

static int launch_extend(const vlib *L, const void *args, const dcall *D, cudaStream_t st)
{
    return L->extend((const vattn_extend_args *)args, D->ws, D->ws_bytes, st);
}

/* Runs an extend entry point (poisoned outputs first) into o / lse; "" or why it failed. */
static void run_ext(vattn_ext_fn fn, const vlib *L, const hcall *B, dcall *D, const dext *E, uint16_t *o, float *lse,
                    char *why, size_t n)
{
    why[0] = 0;
    dcall_poison(B, D);
    const int rc = fn(&E->e, D->ws, D->ws_bytes, NULL);
    if (rc) {
        snprintf(why, n, " extend returned %d (%s) %s", rc, L->status(rc), L->cuerr());
        return;
    }
    sync_or_die(NULL);
    fetch_out(B, D, o, lse);
}

/* k_extend row gap of a case: strided when the case's pool or q is (a multiple of 8). */
static int ext_gap(const gcase *c) { return c->kv_stride - QK + (c->q_gap_h ? 16 : 0); }

/* Case c (valid) in the extend convention vs its verify results: ro / rlse the CPU reference,
 * o_r / lse_r the GPU reference, o_f / lse_f the fast call (eager). */
static void run_extend_agreement(const gcase *c, const char *name, const vlib *gpu, const hcall *B, dcall *D,
                                 const uint16_t *ro, const float *rlse, const uint16_t *o_r, const float *lse_r,
                                 const uint16_t *o_f, const float *lse_f)
{
    vattn_ext_host X;
    vattn_ext_from_verify(&B->a, B->indptr, B->indices, B->vis, B->kv, B->kv_elems, ext_gap(c), &X);
    dext E;
    dext_upload(&X, D, &E);
    uint16_t *o = malloc(B->o_elems * 2), *o1 = malloc(B->o_elems * 2);
    float *lse = malloc(B->lse_elems * 4), *lse1 = malloc(B->lse_elems * 4);
    char why[200];
    const size_t ws = gpu->ext_ws(&E.e);
    for (int fast = 0; fast < 2; fast++) {
        cmpres R;
        g_guard[0] = 0;
        run_ext(fast ? gpu->extend : gpu->extend_reference, gpu, B, D, &E, o, lse, why, sizeof why);
        memset(&R, 0, sizeof R);
        if (!why[0])
            compare_out(B, o, lse, ro, rlse, B->want_lse, &R);
        if (!why[0] && ws != D->ws_bytes)
            snprintf(why, sizeof why, " workspace %zu B, verify's %zu B", ws, D->ws_bytes);
        if (!why[0] && (memcmp(o, fast ? o_f : o_r, B->o_elems * 2) || memcmp(lse, fast ? lse_f : lse_r, B->lse_elems * 4)))
            snprintf(why, sizeof why, " not bitwise equal to vattn_verify%s", fast ? "" : "_reference");
        if (!why[0] && fast && !g_short) {
            graph_replay(gpu, launch_extend, &E.e, B, D, o_f, lse_f, o1, lse1, why, sizeof why);
            if (!why[0] && g_guard[0])
                snprintf(why, sizeof why, "%s", g_guard);
        }
        record(name, fast ? (g_short ? "ext-fast" : "ext-fast+g") : "ext-ref", &R, -1, why[0] ? why : g_guard);
    }
    free(o);
    free(o1);
    free(lse);
    free(lse1);
    dext_free(&E);
    vattn_ext_free(&X);
}

enum { EXT_BAD_QO, EXT_BAD_MASK, EXT_BAD_KVPTR, EXT_BAD_SLOT };
static const char *const ext_bad_name[] = {"+ext-badqo", "+ext-badmask", "+ext-badkvptr", "+ext-badslot"};

/* Invalid extend device data on case c (bs >= 3, an explicit mask): the bad requests' o and
 * lse all NaN, every other request bitwise equal to the verify call on the valid data. */
static void run_extend_invalid(const gcase *c, const vlib *gpu, int kind)
{
    hcall B;
    hcall_build(c, &B);
    dcall D;
    dcall_upload(&B, &D);
    dcall_ws(&D, gpu);
    const int bs = B.a.bs, ql = B.a.q_len, H = B.a.num_heads;
    uint16_t *ov[2], *o = malloc(B.o_elems * 2);
    float *lv[2], *lse = malloc(B.lse_elems * 4);
    char why[200] = "", name[48];
    snprintf(name, sizeof name, "%s%s", c->name, ext_bad_name[kind]);
    int verify_rc = 0;
    for (int f = 0; f < 2; f++) {
        ov[f] = malloc(B.o_elems * 2);
        lv[f] = malloc(B.lse_elems * 4);
        verify_rc |= run_kernel(f ? gpu->verify : gpu->reference, gpu, &B, &D, ov[f], lv[f]);
    }
    vattn_ext_host X;
    vattn_ext_from_verify(&B.a, B.indptr, B.indices, B.vis, B.kv, B.kv_elems, ext_gap(c), &X);
    /* the requests each corruption must turn into NaN (verify_attn.h, vattn_request_range) */
    int bad[4] = {-1, -1, -1, -1};
    switch (kind) {
    case EXT_BAD_QO: X.qo[bs] = bs * ql + 1, bad[0] = bs - 1; break;
    case EXT_BAD_MASK: X.mask_indptr[bs] = X.mask_indptr[bs - 1] + (int64_t)ql * (X.indptr[bs] - X.indptr[bs - 1] + ql) - 1;
        bad[0] = bs - 1; break;
    /* e < s for the last request, e > kv_indptr[bs] for the one before it */
    case EXT_BAD_KVPTR: X.indptr[bs] = X.indptr[bs - 1] - 1, bad[0] = bs - 1, bad[1] = bs - 2; break;
    default:
        if (X.indptr[2] > X.indptr[1]) { /* request 1's first prefix slot */
            if (B.a.index_type == VATTN_INDEX_INT64)
                ((int64_t *)X.indices)[X.indptr[1]] = B.a.num_slots;
            else
                ((int32_t *)X.indices)[X.indptr[1]] = -1;
            bad[0] = 1;
        }
    }
    dext E;
    dext_upload(&X, &D, &E);
    for (int f = 0; f < 2; f++) {
        cmpres R; /* the check is "why" alone: bad requests NaN, the others verify's bits */
        memset(&R, 0, sizeof R);
        R.ok = 1;
        g_guard[0] = 0;
        run_ext(f ? gpu->extend : gpu->extend_reference, gpu, &B, &D, &E, o, lse, why, sizeof why);
        if (verify_rc)
            snprintf(why, sizeof why, " the verify call on the valid data failed");
        int nbad = 0;
        for (int b = 0; b < bs && !why[0]; b++) {
            const int isbad = b == bad[0] || b == bad[1];
            nbad += isbad;
            for (int64_t t = (int64_t)b * ql; t < (int64_t)(b + 1) * ql && !why[0]; t++)
                for (int h = 0; h < H && !why[0]; h++) {
                    const size_t k0 = t * B.a.o_stride_t + h * B.a.o_stride_h;
                    const float l = lse[t * H + h];
                    int same = memcmp(o + k0, ov[f] + k0, DV * 2) == 0 && (!B.want_lse || memcmp(&l, &lv[f][t * H + h], 4) == 0);
                    int nan = !B.want_lse || isnan(l);
                    for (int ch = 0; ch < DV; ch++)
                        nan &= isnan(tk_dec(o[k0 + ch], B.a.dtype == VATTN_DTYPE_FP16));
                    if (isbad ? !nan : !same)
                        snprintf(why, sizeof why, " request %d token %lld head %d: %s", b, (long long)(t % ql), h,
                                 isbad ? "not NaN" : "differs from vattn_verify");
                }
        }
        if (!why[0] && !nbad)
            snprintf(why, sizeof why, " the corruption found nothing to corrupt");
        record(name, f ? "ext-fast" : "ext-ref", &R, -1, why[0] ? why : g_guard);
    }
    dext_free(&E);
    vattn_ext_free(&X);
    for (int f = 0; f < 2; f++) {
        free(ov[f]);
        free(lv[f]);
    }
    free(o);
    free(lse);
    dcall_free(&D);
    hcall_free(&B);
}

#endif /* VATTN_GPU_EXTEND_H */
