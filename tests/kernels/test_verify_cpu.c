/*
 * test_verify_cpu.c — libverify_attn_cpu.so against an independent float64 computation.
 *
 * Each case of the table builds a random verify call (ragged prefixes including 0, causal /
 * tree / random visibility, both index widths, bf16 and fp16, strided views with gaps, a
 * random slot permutation through a pool larger than needed), poisons the outputs with NaN
 * bit patterns, runs the library and compares with a naive per-query softmax in double over
 * the explicit list of visible keys. Input gaps and unused pool rows hold NaN, so a read of
 * anything the call does not own poisons the result; output gaps must stay poisoned, and the
 * guard regions around o and lse untouched. Data random values miss (tk_vcase.special): Q = 0
 * (each output row the float64 mean of its visible V rows, vattn_check_mean), a draft key
 * hidden from every query whose cache row is NaN/Inf (outputs finite, equal to the reference).
 * Then the argument-validation table, misc ABI checks and the perturbed test build
 * (vattn_cpu_checks.h), and vattn_extend (vattn_cpu_extend.h): every case again in SGLang's
 * extend convention, bitwise equal to vattn_verify and vs float64, and its argument and
 * device-data tables. One line per case; exit 1 on any failure.
 */
#include "verify_attn.h"
#include "vattn_test_util.h"
#include "kcap_compare.h"

#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Seeds: case k of the table draws from CPU_SEED_CASES ^ (k * CPU_SEED_STEP + 1) (the golden
 * ratio and the FNV prime: neighbouring cases far apart), its extend form from
 * CPU_SEED_EXTEND in the same way (vattn_cpu_extend.h). */
#define CPU_SEED_CASES 0x9E3779B97F4A7C15ull
#define CPU_SEED_EXTEND 0x51ED2701ull
#define CPU_SEED_STEP 0x100000001B3ull

/* The random cases: every field not named takes tk_vcase's default (0, a dense pool row,
 * TK_VCASE_SCALE). Seeds are derived from the index (main), so appending keeps the others. */
static const tk_vcase cases[] = {
    {.name = "tiny", .bs = 1, .q_len = 1, .heads = 1, .max_prefix = 0, .zero_first = 1,
     .vis = TK_VIS_CAUSAL_NULL},
    {.name = "ragged-causal", .bs = 3, .q_len = 4, .heads = 8, .max_prefix = 37, .zero_first = 1,
     .vis = TK_VIS_CAUSAL_NULL, .idx64 = 1},
    {.name = "tree-q16", .bs = 2, .q_len = 16, .heads = 16, .max_prefix = 100, .vis = TK_VIS_TREE,
     .sm_scale = 0.1f},
    {.name = "random-vis-empty-rows", .bs = 4, .q_len = 7, .heads = 32, .max_prefix = 20, .zero_first = 1,
     .vis = TK_VIS_RANDOM, .idx64 = 1},
    {.name = "h128-strided", .bs = 2, .q_len = 16, .heads = 128, .max_prefix = 40, .vis = TK_VIS_CAUSAL,
     .q_gap_h = 8, .q_gap_t = 24, .kv_stride = 656, .o_gap_h = 16, .o_gap_t = 40},
    {.name = "fp16-tree-strided", .bs = 5, .q_len = 2, .heads = 3, .max_prefix = 30, .zero_first = 1,
     .vis = TK_VIS_TREE, .fp16 = 1, .q_gap_h = 64, .q_gap_t = 8, .kv_stride = 1152, .o_gap_h = 8,
     .sm_scale = 0.2f},
    {.name = "fp16-q16-h64-nolse", .bs = 1, .q_len = 16, .heads = 64, .max_prefix = 300,
     .vis = TK_VIS_CAUSAL_NULL, .idx64 = 1, .fp16 = 1, .no_lse = 1},
    {.name = "bs8-q1-ragged", .bs = 8, .q_len = 1, .heads = 16, .max_prefix = 200, .zero_first = 1,
     .vis = TK_VIS_CAUSAL_NULL, .idx64 = 1, .kv_stride = 584},
    {.name = "prefix0-empty-rows-fp16", .bs = 2, .q_len = 3, .heads = 128, .max_prefix = 0, .zero_first = 1,
     .vis = TK_VIS_RANDOM, .fp16 = 1, .o_gap_t = 8},
    {.name = "full-vis", .bs = 3, .q_len = 8, .heads = 5, .max_prefix = 17, .vis = TK_VIS_FULL, .idx64 = 1,
     .q_gap_t = 16},
    {.name = "q64-max", .bs = 1, .q_len = 64, .heads = 2, .max_prefix = 10, .vis = TK_VIS_TREE, .idx64 = 1},
    {.name = "peaked-scale", .bs = 2, .q_len = 4, .heads = 16, .max_prefix = 64, .vis = TK_VIS_CAUSAL_NULL,
     .sm_scale = 0.8f},
    {.name = "peaked-fp16", .bs = 2, .q_len = 4, .heads = 16, .max_prefix = 64, .zero_first = 1,
     .vis = TK_VIS_TREE, .idx64 = 1, .fp16 = 1, .sm_scale = 0.8f},
    {.name = "h1-q16-long", .bs = 1, .q_len = 16, .heads = 1, .max_prefix = 700, .vis = TK_VIS_RANDOM},
    {.name = "zeroq-tree", .bs = 3, .q_len = 4, .heads = 8, .max_prefix = 300, .zero_first = 1,
     .vis = TK_VIS_TREE, .idx64 = 1, .special = TK_SP_ZERO_Q},
    {.name = "zeroq-causal-fp16", .bs = 2, .q_len = 2, .heads = 16, .max_prefix = 500,
     .vis = TK_VIS_CAUSAL_NULL, .fp16 = 1, .o_gap_t = 8, .special = TK_SP_ZERO_Q},
    {.name = "nanv-tree", .bs = 3, .q_len = 4, .heads = 8, .max_prefix = 100, .zero_first = 1,
     .vis = TK_VIS_TREE, .idx64 = 1, .special = TK_SP_MASKED_NANV},
    {.name = "nanv-random-fp16", .bs = 2, .q_len = 8, .heads = 4, .max_prefix = 60, .vis = TK_VIS_RANDOM,
     .fp16 = 1, .kv_stride = 584, .special = TK_SP_MASKED_NANV},
    {.name = "nanv-q1", .bs = 3, .q_len = 1, .heads = 16, .max_prefix = 40, .zero_first = 1,
     .vis = TK_VIS_CAUSAL, .special = TK_SP_MASKED_NANV},
    {.name = "prefix0-h16-q8", .bs = 3, .q_len = 8, .heads = 16, .max_prefix = 0, .zero_first = 1,
     .vis = TK_VIS_TREE},
    {.name = "onekey-h16-q1", .bs = 4, .q_len = 1, .heads = 16, .max_prefix = 0, .zero_first = 1,
     .vis = TK_VIS_CAUSAL_NULL, .idx64 = 1},
};

/* The kit's random call (draws from g_rng) with a workspace of this library's size. */
static void vcall_build(const tk_vcase *c, tk_vcall *B)
{
    tk_vcall_build(c, &g_rng, B);
    B->ws_bytes = vattn_workspace_size(&B->a);
    B->ws = aligned_alloc(64, B->ws_bytes ? (B->ws_bytes + 63) / 64 * 64 : 64);
}

/* float64 reference: for each query, list its visible keys, softmax, weighted sum.
 * Rows are decoded to double once (the naive loops below then stay cheap enough for CI). */
static void reference(const tk_vcall *B, const uint8_t *vis, double *ref_o, double *ref_lse)
{
    const vattn_args *a = &B->a;
    const int fp16 = a->dtype == VATTN_DTYPE_FP16, ql = a->q_len, H = a->num_heads;
    int64_t maxlen = 0;
    for (int b = 0; b < a->bs; b++)
        if (B->indptr[b + 1] - B->indptr[b] > maxlen)
            maxlen = B->indptr[b + 1] - B->indptr[b];
    double *kd = malloc(sizeof(double) * maxlen * QK); /* the request's rows, kv_indices order */
    int *keys = malloc(sizeof(int) * maxlen);
    double *s = malloc(sizeof(double) * maxlen);
    double qd[QK];
    for (int b = 0; b < a->bs; b++) {
        const int64_t st = B->indptr[b], len = B->indptr[b + 1] - st, prefix = len - ql;
        for (int64_t j = 0; j < len; j++) {
            int64_t slot = a->index_type == VATTN_INDEX_INT64 ? ((int64_t *)B->indices)[st + j]
                                                              : ((int32_t *)B->indices)[st + j];
            for (int c = 0; c < QK; c++)
                kd[j * QK + c] = tk_dec(B->kv[slot * a->kv_stride + c], fp16);
        }
        for (int i = 0; i < ql; i++) {
            int n = 0;
            for (int64_t j = 0; j < len; j++)
                if (j < prefix || vis[(size_t)b * ql * ql + i * ql + (j - prefix)])
                    keys[n++] = (int)j;
            const int64_t t = (int64_t)b * ql + i;
            for (int h = 0; h < H; h++) {
                double *o = ref_o + (t * H + h) * DV;
                for (int c = 0; c < QK; c++)
                    qd[c] = tk_dec(B->q[t * a->q_stride_t + h * a->q_stride_h + c], fp16);
                for (int c = 0; c < DV; c++)
                    o[c] = 0.0;
                if (n == 0) {
                    ref_lse[t * H + h] = -INFINITY;
                    continue;
                }
                double mx = -INFINITY, sum = 0.0;
                for (int k = 0; k < n; k++) {
                    const double *row = kd + (int64_t)keys[k] * QK;
                    double d = 0.0;
                    for (int c = 0; c < QK; c++)
                        d += qd[c] * row[c];
                    s[k] = (double)a->sm_scale * d;
                    if (s[k] > mx)
                        mx = s[k];
                }
                for (int k = 0; k < n; k++) {
                    double w = exp(s[k] - mx);
                    sum += w;
                    const double *row = kd + (int64_t)keys[k] * QK;
                    for (int c = 0; c < DV; c++)
                        o[c] += w * row[c];
                }
                for (int c = 0; c < DV; c++)
                    o[c] /= sum;
                ref_lse[t * H + h] = mx + log(sum);
            }
        }
    }
    free(kd);
    free(keys);
    free(s);
}

/* Tolerances of the float64 comparison. o: rel L2 <= O_REL_L2, and since one wrong element
 * barely moves a norm over a big output, every element within O_ELEM_TOL of (|ref| +
 * rms(ref)) too (bf16 output rounding alone is <= 2^-9 |ref|). lse: within LSE_TOL of
 * (1 + |ref|) (fp32 accumulation), -inf exactly where the reference has it. */
#define O_REL_L2 1e-2
#define O_ELEM_TOL 1e-2
#define LSE_TOL 1e-4

/* (req, tok, head[, ch]) of a flat index into a dense [T][H][inner] tensor, for messages */
static void where(char *buf, size_t n, int64_t flat, int ql, int H, int inner)
{
    const int64_t t = flat / ((int64_t)H * inner), h = flat / inner % H, c = flat % inner;
    if (inner > 1)
        snprintf(buf, n, "(req %lld, tok %lld, head %lld, ch %lld)", (long long)(t / ql), (long long)(t % ql),
                 (long long)h, (long long)c);
    else
        snprintf(buf, n, "(req %lld, tok %lld, head %lld)", (long long)(t / ql), (long long)(t % ql), (long long)h);
}

/* Compares B's outputs with the reference through replay's kcap_compare (the one definition of
 * "correct": NaN/Inf positions first, then the tolerance band, worst element by index), on a
 * dense float64 copy of the owned elements; the output gaps must still hold the poison.
 * Prints one line; returns 1 on pass. */
static int compare(const char *name, const tk_vcall *B, const double *ref_o, const double *ref_lse)
{
    const vattn_args *a = &B->a;
    const int fp16 = a->dtype == VATTN_DTYPE_FP16, ql = a->q_len, H = a->num_heads;
    const int64_t T = (int64_t)a->bs * ql;
    const size_t n_o = (size_t)T * H * DV, n_lse = (size_t)T * H;
    const uint16_t p = fp16 ? POISON_F16 : POISON_BF16;
    char why[256] = "", at[96] = "";
    double *got = malloc(sizeof(double) * (n_o > n_lse ? n_o : n_lse)), ss = 0.0;
    for (int64_t t = 0; t < T; t++)
        for (int h = 0; h < H; h++)
            for (int c = 0; c < DV; c++)
                got[(t * H + h) * DV + c] = tk_dec(B->o[t * a->o_stride_t + h * a->o_stride_h + c], fp16);
    for (size_t i = 0; i < n_o; i++)
        ss += ref_o[i] * ref_o[i];
    const double rms = sqrt(ss / (double)n_o);
    const kcap_cmp_tol otol = {.atol = O_ELEM_TOL * rms, .rtol = O_ELEM_TOL};
    kcap_cmp_result ro, rl = {.max_abs = 0};
    kcap_compare(KCAP_DT_F64, got, ref_o, n_o, &otol, &ro);
    where(at, sizeof at, ro.worst > 0 ? ro.worst : 0, ql, H, DV);
    /* 1: NaN/Inf positions (the reference has none in o) and untouched gaps */
    if (ro.nonfinite_mismatch)
        snprintf(why, sizeof why, "non-finite o at %s", at);
    for (size_t i = 0; i < B->o_elems && !why[0]; i++) {
        int64_t t = (int64_t)(i / a->o_stride_t), r = (int64_t)(i % a->o_stride_t);
        int h = (int)(r / a->o_stride_h), c = (int)(r % a->o_stride_h);
        if (!(h < H && c < DV) && B->o[i] != p)
            snprintf(why, sizeof why, "output gap element %zu (token %lld) was written", i, (long long)t);
    }
    /* 2: rel L2 over o, then every element */
    if (!why[0] && !(ro.rel_l2 <= O_REL_L2))
        snprintf(why, sizeof why, "rel L2 %.3e > %g", ro.rel_l2, O_REL_L2);
    if (!why[0] && ro.n_beyond)
        snprintf(why, sizeof why, "element %s = %g, ref %g: beyond %g*(|ref|+rms %.3g) (%zu such)", at,
                 ro.worst_got, ro.worst_want, O_ELEM_TOL, rms, ro.n_beyond);
    /* 3: lse */
    if (a->lse) {
        const kcap_cmp_tol ltol = {.atol = LSE_TOL, .rtol = LSE_TOL};
        for (size_t i = 0; i < n_lse; i++)
            got[i] = a->lse[i];
        kcap_compare(KCAP_DT_F64, got, ref_lse, n_lse, &ltol, &rl);
        if (!why[0] && !rl.pass) {
            where(at, sizeof at, rl.worst, ql, H, 1);
            snprintf(why, sizeof why, "lse %s = %g, ref %g%s", at, rl.worst_got, rl.worst_want,
                     rl.worst_kind == KCAP_WORST_NONFINITE ? " (-inf / NaN positions differ)" : "");
        }
    } else {
        for (size_t i = 0; i < B->lse_elems && !why[0]; i++)
            if (!isnan(B->lse[i]))
                snprintf(why, sizeof why, "lse written although lse == NULL");
    }
    where(at, sizeof at, ro.worst > 0 ? ro.worst : 0, ql, H, DV);
    printf("%s %-28s rel_l2=%.2e max_abs=%.2e, worst at %s, lse max_abs=%.1e%s%s\n", why[0] ? "FAIL" : "PASS",
           name, ro.rel_l2, ro.max_abs, at, rl.max_abs, why[0] ? " : " : "", why);
    free(got);
    return !why[0];
}

/* The library call `what` of case `name` returned rc: OK, its outputs match the float64
 * reference (compare) and the guards around o and lse are intact. Prints the failure. */
static int call_ok(const char *what, const char *name, int rc, const tk_vcall *B, const double *ref_o,
                   const double *ref_lse)
{
    if (rc != VATTN_OK) {
        printf("FAIL %s: %s returned %d (%s)\n", name, what, rc, vattn_status_string(rc));
        return 0;
    }
    if (!compare(name, B, ref_o, ref_lse))
        return 0;
    if (!tk_vcall_guards_ok(B)) {
        printf("FAIL %s: a guard region around o or lse was written\n", name);
        return 0;
    }
    return 1;
}

static void run_case(const tk_vcase *c, uint64_t seed)
{
    g_rng = seed;
    tk_vcall B;
    vcall_build(c, &B);
    const int T = c->bs * c->q_len;
    double *ref_o = malloc(sizeof(double) * T * c->heads * DV);
    double *ref_lse = malloc(sizeof(double) * T * c->heads);
    reference(&B, B.vis, ref_o, ref_lse);
    tk_vcall_poison(&B);
    int rc = vattn_verify(&B.a, B.ws, B.ws_bytes, NULL);
    char name[96];
    snprintf(name, sizeof name, "%s[bs%d q%d H%d %s %s %s]", c->name, c->bs, c->q_len, c->heads,
             tk_vis_label(c->vis), c->idx64 ? "i64" : "i32", c->fp16 ? "fp16" : "bf16");
    vattn_meanres M;
    int ok = 1;
    if (!call_ok("vattn_verify", name, rc, &B, ref_o, ref_lse)) {
        ok = 0;
    } else if (c->special == TK_SP_ZERO_Q &&
               !vattn_check_mean(&B.a, B.indptr, B.indices, B.a.visibility, B.kv, B.o, B.a.lse, &M)) {
        printf("FAIL %s: Q = 0 mean check: %s\n", name, M.why);
        ok = 0;
    } else {
        if (c->special == TK_SP_ZERO_Q)
            printf("PASS %s: Q = 0: o = mean of the visible V rows, worst %.2e (%.2f of its tolerance) at (req %d, "
                   "tok %d, head %d, ch %d), lse err %.1e\n",
                   name, M.worst, M.worst_ratio, M.wb, M.wt, M.wh, M.wc, M.lse_err);
        /* determinism: a second run must be bitwise identical */
        uint16_t *o1 = malloc(B.o_elems * 2);
        memcpy(o1, B.o, B.o_elems * 2);
        tk_vcall_poison(&B);
        vattn_verify(&B.a, B.ws, B.ws_bytes, NULL);
        if (memcmp(o1, B.o, B.o_elems * 2) != 0) {
            printf("FAIL %s: second run not bitwise identical\n", name);
            ok = 0;
        }
        free(o1);
    }
    tk_count(ok);
    free(ref_o);
    free(ref_lse);
    tk_vcall_free(&B);
}

#include "vattn_cpu_checks.h"
#include "vattn_cpu_extend.h"

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        run_case(&cases[k], CPU_SEED_CASES ^ (k * CPU_SEED_STEP + 1));
    run_validation(0);
    run_validation(1);
    run_extend_all();
    run_misc();
    run_perturbed();
    return tk_summary("test_verify_cpu");
}
