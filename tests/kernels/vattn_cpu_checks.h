/*
 * vattn_cpu_checks.h — the parts of test_verify_cpu.c that are not the random-case table: the
 * argument-validation table (each bad argument must give its exact status code and leave the
 * outputs untouched), the misc ABI checks (status strings, version, backend) and the perturbed
 * test build (it must differ in exactly its one documented element, through vattn_verify and
 * through vattn_extend alike). Included by
 * test_verify_cpu.c (the random call: ../testkit_vattn.h; counts: tk_count), which
 * these checks reuse; kept apart so each file reads alone and stays short.
 */
#ifndef VATTN_CPU_CHECKS_H
#define VATTN_CPU_CHECKS_H

#include "vattn_extend_util.h"

/* seeds of the validation tables (row k draws from seed + k) and of the perturbed build's call */
#define VAL_SEED_VERIFY 0x1234567
#define VAL_SEED_EXTEND 0x7654321
#define PERTURB_SEED 99

/* ---- argument validation ---- */
/* A mutation of a valid call: of its verify form (B) or, for the extend table
 * (vattn_cpu_extend.h), of its extend form (X). */
typedef void (*mutate_fn)(tk_vcall *B, vattn_ext_host *X);
#define M(name, body) \
    static void name(tk_vcall *B, vattn_ext_host *X) { vattn_args *a = &B->a; (void)a; (void)X; body; }
M(m_none, )
M(m_struct0, a->struct_size = 0)
M(m_struct_small, a->struct_size = sizeof(vattn_args) - 8)
M(m_struct_big, a->struct_size = sizeof(vattn_args) + 64)
M(m_reserved, a->reserved0 = 1)
M(m_q_null, a->q = NULL)
M(m_kv_null, a->kv_cache = NULL)
M(m_indptr_null, a->kv_indptr = NULL)
M(m_indices_null, a->kv_indices = NULL)
M(m_o_null, a->o = NULL)
M(m_lse_null, a->lse = NULL)
M(m_vis_null, a->visibility = NULL)
M(m_dtype, a->dtype = 2)
M(m_dtype_neg, a->dtype = -1)
M(m_itype, a->index_type = 7)
M(m_bs0, a->bs = 0)
M(m_bs_neg, a->bs = -3)
M(m_q0, a->q_len = 0)
M(m_q65, a->q_len = 65)
M(m_h0, a->num_heads = 0)
M(m_h129, a->num_heads = 129)
M(m_slots0, a->num_slots = 0)
M(m_maxkv_neg, a->max_kv_len = -1)
M(m_qsh, a->q_stride_h = 575)
M(m_qst, a->q_stride_t = (a->num_heads - 1) * a->q_stride_h + 575)
M(m_qst_neg, a->q_stride_t = -a->q_stride_t)
M(m_kvs, a->kv_stride = 575)
M(m_kvs_huge, a->kv_stride = (int64_t)1 << 61)
M(m_osh, a->o_stride_h = 511)
M(m_ost, a->o_stride_t = (a->num_heads - 1) * a->o_stride_h + 511)
M(m_ost_huge, a->o_stride_t = INT64_MAX / 2)
M(m_scale0, a->sm_scale = 0.0f)
M(m_scale_neg, a->sm_scale = -0.0625f)
M(m_scale_nan, a->sm_scale = NAN)
M(m_scale_inf, a->sm_scale = INFINITY)
M(m_q_misal, a->q = (const char *)a->q + 1)
M(m_idx_misal, a->kv_indices = (const char *)a->kv_indices + 2)
M(m_lse_misal, a->lse = (float *)((char *)a->lse + 2))
M(m_ws_null, B->ws = NULL)
M(m_ws_small, B->ws_bytes -= 1)
M(m_ws_misal, B->ws = (char *)B->ws + 4; B->ws_bytes -= 0)
M(m_indptr0, B->indptr[0] = 1)
M(m_indptr_dec, B->indptr[2] = B->indptr[1] - 1)
M(m_kvlen_short, B->indptr[1] = B->indptr[0] + a->q_len - 1)
M(m_idx_neg, if (a->index_type == VATTN_INDEX_INT64) ((int64_t *)B->indices)[3] = -1;
  else ((int32_t *)B->indices)[3] = -1)
M(m_idx_big, if (a->index_type == VATTN_INDEX_INT64) ((int64_t *)B->indices)[5] = a->num_slots;
  else ((int32_t *)B->indices)[5] = (int32_t)a->num_slots)

typedef struct vcase {
    const char *name;
    mutate_fn fn;
    int expect;
} vcase;

static const vcase vcases[] = {
    {.name = "valid", .fn = m_none, .expect = VATTN_OK},
    {.name = "struct_size=0", .fn = m_struct0, .expect = VATTN_ERR_STRUCT_SIZE},
    {.name = "struct_size short", .fn = m_struct_small, .expect = VATTN_ERR_STRUCT_SIZE},
    {.name = "struct_size larger (newer caller)", .fn = m_struct_big, .expect = VATTN_OK},
    {.name = "reserved0!=0", .fn = m_reserved, .expect = VATTN_ERR_STRUCT_SIZE},
    {.name = "q NULL", .fn = m_q_null, .expect = VATTN_ERR_NULL_POINTER},
    {.name = "kv_cache NULL", .fn = m_kv_null, .expect = VATTN_ERR_NULL_POINTER},
    {.name = "kv_indptr NULL", .fn = m_indptr_null, .expect = VATTN_ERR_NULL_POINTER},
    {.name = "kv_indices NULL", .fn = m_indices_null, .expect = VATTN_ERR_NULL_POINTER},
    {.name = "o NULL", .fn = m_o_null, .expect = VATTN_ERR_NULL_POINTER},
    {.name = "lse NULL (optional)", .fn = m_lse_null, .expect = VATTN_OK},
    {.name = "visibility NULL (causal)", .fn = m_vis_null, .expect = VATTN_OK},
    {.name = "dtype=2", .fn = m_dtype, .expect = VATTN_ERR_DTYPE},
    {.name = "dtype=-1", .fn = m_dtype_neg, .expect = VATTN_ERR_DTYPE},
    {.name = "index_type=7", .fn = m_itype, .expect = VATTN_ERR_INDEX_TYPE},
    {.name = "bs=0", .fn = m_bs0, .expect = VATTN_ERR_BATCH},
    {.name = "bs=-3", .fn = m_bs_neg, .expect = VATTN_ERR_BATCH},
    {.name = "q_len=0", .fn = m_q0, .expect = VATTN_ERR_Q_LEN},
    {.name = "q_len=65", .fn = m_q65, .expect = VATTN_ERR_Q_LEN},
    {.name = "num_heads=0", .fn = m_h0, .expect = VATTN_ERR_HEADS},
    {.name = "num_heads=129", .fn = m_h129, .expect = VATTN_ERR_HEADS},
    {.name = "num_slots=0", .fn = m_slots0, .expect = VATTN_ERR_NUM_SLOTS},
    {.name = "max_kv_len=-1", .fn = m_maxkv_neg, .expect = VATTN_ERR_NUM_SLOTS},
    {.name = "q_stride_h=575", .fn = m_qsh, .expect = VATTN_ERR_STRIDE},
    {.name = "q_stride_t overlaps heads", .fn = m_qst, .expect = VATTN_ERR_STRIDE},
    {.name = "q_stride_t negative", .fn = m_qst_neg, .expect = VATTN_ERR_STRIDE},
    {.name = "kv_stride=575", .fn = m_kvs, .expect = VATTN_ERR_STRIDE},
    {.name = "kv_stride*num_slots overflows", .fn = m_kvs_huge, .expect = VATTN_ERR_STRIDE},
    {.name = "o_stride_h=511", .fn = m_osh, .expect = VATTN_ERR_STRIDE},
    {.name = "o_stride_t overlaps heads", .fn = m_ost, .expect = VATTN_ERR_STRIDE},
    {.name = "o_stride_t*T overflows", .fn = m_ost_huge, .expect = VATTN_ERR_STRIDE},
    {.name = "sm_scale=0", .fn = m_scale0, .expect = VATTN_ERR_SCALE},
    {.name = "sm_scale<0", .fn = m_scale_neg, .expect = VATTN_ERR_SCALE},
    {.name = "sm_scale=NaN", .fn = m_scale_nan, .expect = VATTN_ERR_SCALE},
    {.name = "sm_scale=inf", .fn = m_scale_inf, .expect = VATTN_ERR_SCALE},
    {.name = "q misaligned", .fn = m_q_misal, .expect = VATTN_ERR_ALIGNMENT},
    {.name = "kv_indices misaligned", .fn = m_idx_misal, .expect = VATTN_ERR_ALIGNMENT},
    {.name = "lse misaligned", .fn = m_lse_misal, .expect = VATTN_ERR_ALIGNMENT},
    {.name = "workspace NULL", .fn = m_ws_null, .expect = VATTN_ERR_WORKSPACE},
    {.name = "workspace 1 byte short", .fn = m_ws_small, .expect = VATTN_ERR_WORKSPACE},
    {.name = "workspace misaligned", .fn = m_ws_misal, .expect = VATTN_ERR_ALIGNMENT},
    {.name = "kv_indptr[0]!=0", .fn = m_indptr0, .expect = VATTN_ERR_INDPTR},
    {.name = "kv_indptr decreasing", .fn = m_indptr_dec, .expect = VATTN_ERR_INDPTR},
    {.name = "kv_len<q_len", .fn = m_kvlen_short, .expect = VATTN_ERR_INDPTR},
    {.name = "kv_indices entry -1", .fn = m_idx_neg, .expect = VATTN_ERR_INDEX_RANGE},
    {.name = "kv_indices entry = num_slots", .fn = m_idx_big, .expect = VATTN_ERR_INDEX_RANGE},
};

/* One argument table in one convention (ext: vattn_extend on the extend form of each call):
 * each row's exact status, and outputs untouched when it is an error. */
static void run_validation_table(const vcase *tab, size_t n, int idx64, int ext)
{
    /* bs 3, q_len 4, H 4, prefixes in [0, 9]: kv_indices has >= 12 entries for the verify
     * index mutations ([3], [5]); the extend ones (first / last prefix entry) need one prefix
     * key among the 3 requests, else they change nothing and their row fails */
    static const tk_vcase base = {.name = "validation", .bs = 3, .q_len = 4, .heads = 4, .max_prefix = 9,
     .vis = TK_VIS_TREE};
    for (size_t k = 0; k < n; k++) {
        tk_vcase c = base;
        c.idx64 = idx64;
        g_rng = (ext ? VAL_SEED_EXTEND : VAL_SEED_VERIFY) + k;
        tk_vcall B;
        vcall_build(&c, &B);
        void *ws_orig = B.ws;
        vattn_ext_host X;
        memset(&X, 0, sizeof X);
        if (ext)
            vattn_ext_from_verify(&B.a, B.indptr, B.indices, B.vis, B.kv, B.kv_elems, 8, &X);
        tab[k].fn(&B, &X);
        tk_vcall_poison(&B);
        const int rc = ext ? vattn_extend(&X.e, B.ws, B.ws_bytes, NULL) : vattn_verify(&B.a, B.ws, B.ws_bytes, NULL);
        const uint16_t p = POISON_BF16;
        int untouched = 1;
        if (tab[k].expect != VATTN_OK) {
            for (size_t i = 0; i < B.o_elems; i++)
                untouched &= B.o[i] == p;
            for (size_t i = 0; i < B.lse_elems; i++)
                untouched &= isnan(B.lse[i]);
        }
        const int ok = rc == tab[k].expect && untouched;
        tk_count(ok);
        printf("%s %svalidation %-40s %s -> %d (%s)%s\n", ok ? "PASS" : "FAIL", ext ? "extend " : "", tab[k].name,
               idx64 ? "i64" : "i32", rc, vattn_status_string(rc), untouched ? "" : " : OUTPUT WRITTEN");
        if (rc != tab[k].expect)
            printf("     expected %d (%s)\n", tab[k].expect, vattn_status_string(tab[k].expect));
        B.ws = ws_orig;
        if (ext)
            vattn_ext_free(&X);
        tk_vcall_free(&B);
    }
    /* the NULL args pointer */
    const int rc = ext ? vattn_extend(NULL, NULL, 0, NULL) : vattn_verify(NULL, NULL, 0, NULL);
    printf("%s %svalidation args=NULL -> %d\n", rc == VATTN_ERR_NULL_ARGS ? "PASS" : "FAIL", ext ? "extend " : "", rc);
    tk_count(rc == VATTN_ERR_NULL_ARGS);
}

static void run_validation(int idx64) { run_validation_table(vcases, sizeof vcases / sizeof vcases[0], idx64, 0); }

static void run_misc(void)
{
    int ok = 1;
    /* every status has its own message; unknown codes get the generic one */
    for (int i = 0; i < VATTN_STATUS_COUNT; i++) {
        const char *s = vattn_status_string(i);
        ok &= s && *s && strcmp(s, vattn_status_string(-1)) != 0;
        for (int j = 0; j < i; j++)
            ok &= strcmp(s, vattn_status_string(j)) != 0;
    }
    ok &= vattn_status_string(VATTN_STATUS_COUNT) == vattn_status_string(-1);
    ok &= vattn_abi_version() == VATTN_ABI_VERSION && strcmp(vattn_backend(), "cpu") == 0;
    ok &= vattn_last_cuda_error() && vattn_last_cuda_error()[0] == 0;
    vattn_args a = {.bs = 0, .q_len = 1, .num_heads = 1, .num_slots = 1};
    ok &= vattn_workspace_size(&a) == (size_t)-1 && vattn_workspace_size(NULL) == (size_t)-1;
    printf("%s misc: status strings, abi version, backend, workspace_size(invalid)\n",
           ok ? "PASS" : "FAIL");
    tk_count(ok);
}

/* The perturbed test build must differ from this library in exactly its documented element:
 * (last request, first draft token, last head, channel 77), by about +0.5. */
static void run_perturbed(void)
{
    char exe[PATH_MAX], path[PATH_MAX + 64];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        printf("FAIL perturbed: cannot read /proc/self/exe\n");
        tk_count(0);
        return;
    }
    exe[n] = 0;
    snprintf(path, sizeof path, "%s/libverify_attn_cpu_perturbed.so", dirname(exe));
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        printf("FAIL perturbed: dlopen %s: %s\n", path, dlerror());
        tk_count(0);
        return;
    }
    int (*pv)(const vattn_args *, void *, size_t, void *) =
        (int (*)(const vattn_args *, void *, size_t, void *))dlsym(h, "vattn_verify");
    int (*pe)(const vattn_extend_args *, void *, size_t, void *) =
        (int (*)(const vattn_extend_args *, void *, size_t, void *))dlsym(h, "vattn_extend");
    tk_vcase c = cases[2]; /* bs 2, q 16, H 16 */
    g_rng = PERTURB_SEED;
    tk_vcall B;
    vcall_build(&c, &B);
    vattn_ext_host X;
    vattn_ext_from_verify(&B.a, B.indptr, B.indices, B.vis, B.kv, B.kv_elems, 8, &X);
    uint16_t *o0 = malloc(B.o_elems * 2);
    /* both entry points of the perturbed build, each against the same one of this library */
    for (int ext = 0; ext < 2; ext++) {
        tk_vcall_poison(&B);
        int rc0 = ext ? vattn_extend(&X.e, B.ws, B.ws_bytes, NULL) : vattn_verify(&B.a, B.ws, B.ws_bytes, NULL);
        memcpy(o0, B.o, B.o_elems * 2);
        tk_vcall_poison(&B);
        int rc1 = ext ? (pe ? pe(&X.e, B.ws, B.ws_bytes, NULL) : -1) : (pv ? pv(&B.a, B.ws, B.ws_bytes, NULL) : -1);
        const vattn_args *a = &B.a;
        size_t target = (size_t)((a->bs - 1) * a->q_len) * a->o_stride_t +
                        (size_t)(a->num_heads - 1) * a->o_stride_h + 77;
        size_t ndiff = 0;
        for (size_t i = 0; i < B.o_elems; i++)
            ndiff += o0[i] != B.o[i];
        double d = tk_dec(B.o[target], 0) - tk_dec(o0[target], 0);
        int ok = rc0 == 0 && rc1 == 0 && ndiff == 1 && o0[target] != B.o[target] && fabs(d - 0.5) < 0.02;
        printf("%s perturbed build (%s): %zu element(s) differ, delta at documented element %.4f\n",
               ok ? "PASS" : "FAIL", ext ? "vattn_extend" : "vattn_verify", ndiff, d);
        tk_count(ok);
    }
    free(o0);
    vattn_ext_free(&X);
    tk_vcall_free(&B);
    dlclose(h);
}

#endif /* VATTN_CPU_CHECKS_H */
