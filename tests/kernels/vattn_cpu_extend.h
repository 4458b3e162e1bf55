/*
 * vattn_cpu_extend.h — the vattn_extend part of test_verify_cpu.c. Every case of the random
 * table is also run in the extend convention (vattn_extend_util.h: draft rows in k_extend with
 * the pool's draft rows NaN, prefix-only kv_indices, SGLang's flattened mask with garbage in
 * its prefix columns and between requests): vs the float64 reference, bitwise equal to the
 * verify call (o and lse), guards and output gaps untouched. Then the extend argument table
 * (the new NULL / stride / alignment cases and their place in the check order) and the
 * extend device-data table (bad qo_indptr / kv_indptr / mask_indptr -> VATTN_ERR_INDPTR, bad
 * slot -> VATTN_ERR_INDEX_RANGE, outputs untouched). Included by test_verify_cpu.c after its
 * reference and compare (the random call: ../testkit_vattn.h; counts: tk_count).
 */
#ifndef VATTN_CPU_EXTEND_H
#define VATTN_CPU_EXTEND_H

#include "vattn_extend_util.h"

/* k_extend row gaps cycle through 0, 8 and 16 elements (multiples of 8: 16-byte rows) */
#define EXT_KGAP_STEP 8

static void run_extend_case(const tk_vcase *c, uint64_t seed, int kext_gap)
{
    g_rng = seed;
    tk_vcall B;
    vcall_build(c, &B);
    const int T = c->bs * c->q_len;
    double *ref_o = malloc(sizeof(double) * T * c->heads * DV), *ref_lse = malloc(sizeof(double) * T * c->heads);
    uint16_t *o_v = malloc(B.o_elems * 2);
    float *lse_v = malloc(B.lse_elems * 4);
    reference(&B, B.vis, ref_o, ref_lse);
    tk_vcall_poison(&B);
    const int rc_v = vattn_verify(&B.a, B.ws, B.ws_bytes, NULL);
    memcpy(o_v, B.o, B.o_elems * 2);
    memcpy(lse_v, B.lse, B.lse_elems * 4);
    vattn_ext_host X;
    vattn_ext_from_verify(&B.a, B.indptr, B.indices, B.vis, B.kv, B.kv_elems, kext_gap, &X);
    const size_t ws = vattn_extend_workspace_size(&X.e);
    tk_vcall_poison(&B);
    const int rc = vattn_extend(&X.e, B.ws, B.ws_bytes, NULL);
    char name[112];
    snprintf(name, sizeof name, "extend %s[bs%d q%d H%d %s %s %s kgap%d]", c->name, c->bs, c->q_len, c->heads,
             X.mask ? "mask" : "causal(NULL)", c->idx64 ? "i64" : "i32", c->fp16 ? "fp16" : "bf16", kext_gap);
    if (rc_v != VATTN_OK || ws != B.ws_bytes) {
        printf("FAIL %s: verify returned %d, extend workspace %zu vs verify's %zu\n", name, rc_v, ws, B.ws_bytes);
        tk_count(0);
    } else if (!call_ok("vattn_extend", name, rc, &B, ref_o, ref_lse)) {
        tk_count(0);
    } else if (memcmp(o_v, B.o, B.o_elems * 2) != 0 || memcmp(lse_v, B.lse, B.lse_elems * 4) != 0) {
        size_t k = 0;
        while (k < B.o_elems && o_v[k] == B.o[k])
            k++;
        printf("FAIL %s: not bitwise equal to vattn_verify (first o element differing: %zu)\n", name, k);
        tk_count(0);
    } else {
        printf("PASS %s: bitwise equal to vattn_verify\n", name);
        tk_count(1);
    }
    vattn_ext_free(&X);
    free(o_v);
    free(lse_v);
    free(ref_o);
    free(ref_lse);
    tk_vcall_free(&B);
}

/* ---- the extend argument and device-data tables ---- */
#define EM(name, body) \
    static void name(tk_vcall *B, vattn_ext_host *X) { vattn_extend_args *e = &X->e; (void)B; (void)e; body; }
EM(em_none, )
EM(em_struct_small, e->struct_size = sizeof(vattn_extend_args) - 8)
EM(em_reserved, e->reserved0 = 2)
EM(em_kext_null, e->k_extend = NULL)
EM(em_qo_null, e->qo_indptr = NULL)
EM(em_mask_indptr_null, e->mask_indptr = NULL)
EM(em_mask_both_null, e->custom_mask = NULL; e->mask_indptr = NULL)
EM(em_mask_only_indptr, e->custom_mask = NULL)
EM(em_kext_null_dtype, e->k_extend = NULL; e->dtype = 2)
EM(em_q0, e->q_len = 0)
EM(em_kvs, e->kv_stride = 575)
EM(em_kexs, e->k_extend_stride = 575)
EM(em_kexs_huge, e->k_extend_stride = (int64_t)1 << 61)
EM(em_kexs_scale, e->k_extend_stride = 575; e->sm_scale = 0.0f)
EM(em_scale0, e->sm_scale = 0.0f)
EM(em_kext_misal, e->k_extend = (const char *)e->k_extend + 1)
EM(em_qo_misal, e->qo_indptr = (const int32_t *)((const char *)e->qo_indptr + 2))
EM(em_mip_misal, e->mask_indptr = (const int64_t *)((const char *)e->mask_indptr + 4))
EM(em_kext_misal_ws, e->k_extend = (const char *)e->k_extend + 1; B->ws = NULL)
EM(em_ws_small, B->ws_bytes -= 1)
EM(em_qo1, X->qo[1] = e->q_len + 1)
EM(em_qo_last, X->qo[e->bs] = e->bs * e->q_len - 1)
EM(em_indptr0, X->indptr[0] = 1)
EM(em_indptr_dec, X->indptr[2] = X->indptr[1] - 1)
EM(em_mip_short, X->mask_indptr[1] -= 1 + VATTN_EXT_MASK_PAD)
EM(em_mip_dec, X->mask_indptr[2] = X->mask_indptr[1] - 1)
EM(em_mip_neg, X->mask_indptr[0] = -1)
EM(em_prefix0, for (int b = 0; b <= e->bs; b++) X->indptr[b] = 0)
EM(em_idx_neg, if (X->indptr[e->bs] < 1) return;
   if (e->index_type == VATTN_INDEX_INT64) ((int64_t *)X->indices)[0] = -1;
   else ((int32_t *)X->indices)[0] = -1)
EM(em_idx_big, const int32_t last = X->indptr[e->bs] - 1; if (last < 0) return;
   if (e->index_type == VATTN_INDEX_INT64) ((int64_t *)X->indices)[last] = e->num_slots;
   else ((int32_t *)X->indices)[last] = (int32_t)e->num_slots)

static const vcase ext_vcases[] = {
    {.name = "valid", .fn = em_none, .expect = VATTN_OK},
    {.name = "struct_size short", .fn = em_struct_small, .expect = VATTN_ERR_STRUCT_SIZE},
    {.name = "reserved0!=0", .fn = em_reserved, .expect = VATTN_ERR_STRUCT_SIZE},
    {.name = "k_extend NULL", .fn = em_kext_null, .expect = VATTN_ERR_NULL_POINTER},
    {.name = "qo_indptr NULL", .fn = em_qo_null, .expect = VATTN_ERR_NULL_POINTER},
    {.name = "mask_indptr NULL with custom_mask", .fn = em_mask_indptr_null,
     .expect = VATTN_ERR_NULL_POINTER},
    {.name = "custom_mask + mask_indptr NULL (causal)", .fn = em_mask_both_null, .expect = VATTN_OK},
    {.name = "mask_indptr without custom_mask", .fn = em_mask_only_indptr, .expect = VATTN_OK},
    {.name = "k_extend NULL before dtype=2", .fn = em_kext_null_dtype, .expect = VATTN_ERR_NULL_POINTER},
    {.name = "q_len=0", .fn = em_q0, .expect = VATTN_ERR_Q_LEN},
    {.name = "kv_stride=575", .fn = em_kvs, .expect = VATTN_ERR_STRIDE},
    {.name = "k_extend_stride=575", .fn = em_kexs, .expect = VATTN_ERR_STRIDE},
    {.name = "k_extend_stride*T overflows", .fn = em_kexs_huge, .expect = VATTN_ERR_STRIDE},
    {.name = "k_extend_stride before sm_scale", .fn = em_kexs_scale, .expect = VATTN_ERR_STRIDE},
    {.name = "sm_scale=0", .fn = em_scale0, .expect = VATTN_ERR_SCALE},
    {.name = "k_extend misaligned", .fn = em_kext_misal, .expect = VATTN_ERR_ALIGNMENT},
    {.name = "qo_indptr misaligned", .fn = em_qo_misal, .expect = VATTN_ERR_ALIGNMENT},
    {.name = "mask_indptr misaligned", .fn = em_mip_misal, .expect = VATTN_ERR_ALIGNMENT},
    {.name = "k_extend misaligned before workspace", .fn = em_kext_misal_ws, .expect = VATTN_ERR_ALIGNMENT},
    {.name = "workspace 1 byte short", .fn = em_ws_small, .expect = VATTN_ERR_WORKSPACE},
    {.name = "qo_indptr[1]!=q_len", .fn = em_qo1, .expect = VATTN_ERR_INDPTR},
    {.name = "qo_indptr[bs]!=T", .fn = em_qo_last, .expect = VATTN_ERR_INDPTR},
    {.name = "kv_indptr[0]!=0", .fn = em_indptr0, .expect = VATTN_ERR_INDPTR},
    {.name = "kv_indptr decreasing", .fn = em_indptr_dec, .expect = VATTN_ERR_INDPTR},
    {.name = "mask_indptr short by one entry", .fn = em_mip_short, .expect = VATTN_ERR_INDPTR},
    {.name = "mask_indptr decreasing", .fn = em_mip_dec, .expect = VATTN_ERR_INDPTR},
    {.name = "mask_indptr[0]<0", .fn = em_mip_neg, .expect = VATTN_ERR_INDPTR},
    {.name = "every prefix empty", .fn = em_prefix0, .expect = VATTN_OK},
    {.name = "kv_indices entry -1", .fn = em_idx_neg, .expect = VATTN_ERR_INDEX_RANGE},
    {.name = "kv_indices entry = num_slots", .fn = em_idx_big, .expect = VATTN_ERR_INDEX_RANGE},
};

/* The extend workspace size: (size_t)-1 for invalid sizes, else vattn_workspace_size's. */
static void run_extend_ws(void)
{
    vattn_extend_args e = {.bs = 2, .q_len = 65, .num_heads = 1, .num_slots = 1};
    int ok = vattn_extend_workspace_size(NULL) == (size_t)-1 && vattn_extend_workspace_size(&e) == (size_t)-1;
    e.q_len = 4;
    vattn_args a = {.bs = 2, .q_len = 4, .num_heads = 1, .num_slots = 1};
    ok &= vattn_extend_workspace_size(&e) == vattn_workspace_size(&a) && vattn_workspace_size(&a) != (size_t)-1;
    printf("%s extend workspace size: invalid -> (size_t)-1, valid = vattn_workspace_size\n", ok ? "PASS" : "FAIL");
    tk_count(ok);
}

static void run_extend_all(void)
{
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        run_extend_case(&cases[k], CPU_SEED_EXTEND ^ (k * CPU_SEED_STEP + 7), (int)(k % 3) * EXT_KGAP_STEP);
    for (int idx64 = 0; idx64 < 2; idx64++)
        run_validation_table(ext_vcases, sizeof ext_vcases / sizeof ext_vcases[0], idx64, 1);
    run_extend_ws();
}

#endif /* VATTN_CPU_EXTEND_H */
