/*
 * test_verify_cpu.c — libverify_attn_cpu.so against an independent float64 computation.
 *
 * Each case of the table builds a random verify call (ragged prefixes including 0, causal /
 * tree / random visibility, both index widths, bf16 and fp16, strided views with gaps, a
 * random slot permutation through a pool larger than needed), poisons the outputs with NaN
 * bit patterns, runs the library and compares with a naive per-query softmax in double over
 * the explicit list of visible keys. Input gaps and unused pool rows hold NaN, so a read of
 * anything the call does not own poisons the result; output gaps must stay poisoned, and the
 * guard regions around o and lse untouched. Data random values miss (tcase.special): Q = 0
 * (each output row the float64 mean of its visible V rows, vattn_check_mean), a draft key
 * hidden from every query whose cache row is NaN/Inf (outputs finite, equal to the reference).
 * Then the argument-validation table, misc ABI checks and the perturbed test build
 * (vattn_cpu_checks.h), and vattn_extend (vattn_cpu_extend.h): every case again in SGLang's
 * extend convention, bitwise equal to vattn_verify and vs float64, and its argument and
 * device-data tables. One line per case; exit 1 on any failure.
 */
#include "verify_attn.h"
#include "vattn_test_util.h"

#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int g_fail;

/* ---- deterministic random numbers (rnd, rnd_int, dec: vattn_test_util.h) ---- */
static double rnd_unit(void) { return (double)(rnd() >> 11) * 0x1p-53; } /* [0,1) */

/* Encodings of random values: truncation is fine here (inputs only need to be exact values
 * of the dtype, which they are by construction). */
static uint16_t enc(double v, int fp16)
{
    if (!fp16) {
        float f = (float)v;
        uint32_t x;
        memcpy(&x, &f, 4);
        return (uint16_t)(x >> 16);
    }
    /* |v| < 2 here: build a normal half from sign, exponent and a truncated 10-bit mantissa */
    int s = v < 0;
    double a = fabs(v);
    if (a < 0x1p-14)
        return (uint16_t)(s << 15);
    int e;
    double fr = frexp(a, &e); /* a = fr * 2^e, fr in [0.5,1) */
    int m = (int)((fr * 2.0 - 1.0) * 1024.0);
    return (uint16_t)((s << 15) | ((e - 1 + 15) << 10) | m);
}

/* ---- one case ---- */
enum { VIS_CAUSAL_NULL, VIS_CAUSAL_EXPLICIT, VIS_TREE, VIS_RANDOM, VIS_FULL };
static const char *vis_name[] = {"causal(NULL)", "causal", "tree", "random", "full"};

typedef struct tcase {
    const char *name;
    int bs, q_len, H;
    int max_prefix; /* prefixes drawn in [0, max_prefix] */
    int zero_first; /* request 0 gets prefix 0 */
    int vis, idx64, fp16;
    int q_gap_h, q_gap_t; /* extra elements between heads / after the last head */
    int kv_stride;
    int o_gap_h, o_gap_t;
    int no_lse;
    float sm_scale;
    int special; /* SP_* */
} tcase;

/* SP_ZERO_Q: Q = 0 and the rope columns of K = 0 (V is K's first 512 columns: K itself cannot
 * be 0). SP_MASKED_NANV: per request one draft key with its visibility column cleared and its
 * whole cache row NaN / +Inf / -Inf. */
enum { SP_NONE, SP_ZERO_Q, SP_MASKED_NANV };

#define GUARD_BYTES 256
#define GUARD_BYTE 0xA5

static const tcase cases[] = {
    {"tiny", 1, 1, 1, 0, 1, VIS_CAUSAL_NULL, 0, 0, 0, 0, 576, 0, 0, 0, 0.0625f, SP_NONE},
    {"ragged-causal", 3, 4, 8, 37, 1, VIS_CAUSAL_NULL, 1, 0, 0, 0, 576, 0, 0, 0, 0.0625f, SP_NONE},
    {"tree-q16", 2, 16, 16, 100, 0, VIS_TREE, 0, 0, 0, 0, 576, 0, 0, 0, 0.1f, SP_NONE},
    {"random-vis-empty-rows", 4, 7, 32, 20, 1, VIS_RANDOM, 1, 0, 0, 0, 576, 0, 0, 0, 0.0625f, SP_NONE},
    {"h128-strided", 2, 16, 128, 40, 0, VIS_CAUSAL_EXPLICIT, 0, 0, 8, 24, 656, 16, 40, 0, 0.0625f, SP_NONE},
    {"fp16-tree-strided", 5, 2, 3, 30, 1, VIS_TREE, 0, 1, 64, 8, 1152, 8, 0, 0, 0.2f, SP_NONE},
    {"fp16-q16-h64-nolse", 1, 16, 64, 300, 0, VIS_CAUSAL_NULL, 1, 1, 0, 0, 576, 0, 0, 1, 0.0625f, SP_NONE},
    {"bs8-q1-ragged", 8, 1, 16, 200, 1, VIS_CAUSAL_NULL, 1, 0, 0, 0, 584, 0, 0, 0, 0.0625f, SP_NONE},
    {"prefix0-empty-rows-fp16", 2, 3, 128, 0, 1, VIS_RANDOM, 0, 1, 0, 0, 576, 0, 8, 0, 0.0625f, SP_NONE},
    {"full-vis", 3, 8, 5, 17, 0, VIS_FULL, 1, 0, 0, 16, 576, 0, 0, 0, 0.0625f, SP_NONE},
    {"q64-max", 1, 64, 2, 10, 0, VIS_TREE, 1, 0, 0, 0, 576, 0, 0, 0, 0.0625f, SP_NONE},
    {"peaked-scale", 2, 4, 16, 64, 0, VIS_CAUSAL_NULL, 0, 0, 0, 0, 576, 0, 0, 0, 0.8f, SP_NONE},
    {"peaked-fp16", 2, 4, 16, 64, 1, VIS_TREE, 1, 1, 0, 0, 576, 0, 0, 0, 0.8f, SP_NONE},
    {"h1-q16-long", 1, 16, 1, 700, 0, VIS_RANDOM, 0, 0, 0, 0, 576, 0, 0, 0, 0.0625f, SP_NONE},
    {"zeroq-tree", 3, 4, 8, 300, 1, VIS_TREE, 1, 0, 0, 0, 576, 0, 0, 0, 0.0625f, SP_ZERO_Q},
    {"zeroq-causal-fp16", 2, 2, 16, 500, 0, VIS_CAUSAL_NULL, 0, 1, 0, 0, 576, 0, 8, 0, 0.0625f, SP_ZERO_Q},
    {"nanv-tree", 3, 4, 8, 100, 1, VIS_TREE, 1, 0, 0, 0, 576, 0, 0, 0, 0.0625f, SP_MASKED_NANV},
    {"nanv-random-fp16", 2, 8, 4, 60, 0, VIS_RANDOM, 0, 1, 0, 0, 584, 0, 0, 0, 0.0625f, SP_MASKED_NANV},
    {"nanv-q1", 3, 1, 16, 40, 1, VIS_CAUSAL_EXPLICIT, 0, 0, 0, 0, 576, 0, 0, 0, 0.0625f, SP_MASKED_NANV},
    {"prefix0-h16-q8", 3, 8, 16, 0, 1, VIS_TREE, 0, 0, 0, 0, 576, 0, 0, 0, 0.0625f, SP_NONE},
    {"onekey-h16-q1", 4, 1, 16, 0, 1, VIS_CAUSAL_NULL, 1, 0, 0, 0, 576, 0, 0, 0, 0.0625f, SP_NONE},
};

typedef struct built {
    vattn_args a;
    uint16_t *q, *kv, *o;
    unsigned char *o_alloc, *lse_alloc; /* o / lse with GUARD_BYTES of GUARD_BYTE each side */
    int32_t *indptr;
    void *indices;
    uint8_t *vis;
    float *lse;
    size_t q_elems, kv_elems, o_elems, lse_elems;
    void *ws;
    size_t ws_bytes;
} built;

static void build(const tcase *c, built *B)
{
    memset(B, 0, sizeof *B);
    const int fp16 = c->fp16, T = c->bs * c->q_len, H = c->H;
    vattn_args *a = &B->a;
    a->struct_size = sizeof(vattn_args);
    a->dtype = fp16 ? VATTN_DTYPE_FP16 : VATTN_DTYPE_BF16;
    a->index_type = c->idx64 ? VATTN_INDEX_INT64 : VATTN_INDEX_INT32;
    a->bs = c->bs;
    a->q_len = c->q_len;
    a->num_heads = H;
    a->sm_scale = c->sm_scale;
    a->q_stride_h = QK + c->q_gap_h;
    a->q_stride_t = (int64_t)(H - 1) * a->q_stride_h + QK + c->q_gap_t;
    a->o_stride_h = DV + c->o_gap_h;
    a->o_stride_t = (int64_t)(H - 1) * a->o_stride_h + DV + c->o_gap_t;
    a->kv_stride = c->kv_stride;

    B->indptr = malloc(sizeof(int32_t) * (c->bs + 1));
    B->indptr[0] = 0;
    for (int b = 0; b < c->bs; b++) {
        int prefix = (b == 0 && c->zero_first) ? 0 : rnd_int(c->max_prefix + 1);
        B->indptr[b + 1] = B->indptr[b] + prefix + c->q_len;
    }
    const int total = B->indptr[c->bs];
    /* pool: 1.5x the keys used, random permutation, the unused rows hold NaN */
    const int64_t num_slots = total + total / 2 + 3;
    a->num_slots = num_slots;
    a->max_kv_len = 0;
    int64_t *perm = malloc(sizeof(int64_t) * num_slots);
    for (int64_t i = 0; i < num_slots; i++)
        perm[i] = i;
    for (int64_t i = num_slots - 1; i > 0; i--) {
        int64_t j = (int64_t)(rnd() % (uint64_t)(i + 1)), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    B->indices = malloc((size_t)total * (c->idx64 ? 8 : 4));
    for (int i = 0; i < total; i++) {
        if (c->idx64)
            ((int64_t *)B->indices)[i] = perm[i];
        else
            ((int32_t *)B->indices)[i] = (int32_t)perm[i];
    }
    const uint16_t nan_in = fp16 ? POISON_F16 : POISON_BF16;
    B->kv_elems = (size_t)num_slots * a->kv_stride;
    B->kv = malloc(B->kv_elems * 2);
    for (size_t i = 0; i < B->kv_elems; i++)
        B->kv[i] = nan_in;
    for (int i = 0; i < total; i++)
        for (int ch = 0; ch < QK; ch++)
            B->kv[perm[i] * a->kv_stride + ch] = enc(rnd_unit() * 2.0 - 1.0, fp16);
    free(perm);

    B->q_elems = (size_t)T * a->q_stride_t;
    B->q = malloc(B->q_elems * 2);
    for (size_t i = 0; i < B->q_elems; i++)
        B->q[i] = nan_in;
    for (int t = 0; t < T; t++)
        for (int h = 0; h < H; h++)
            for (int ch = 0; ch < QK; ch++)
                B->q[t * a->q_stride_t + h * a->q_stride_h + ch] =
                    enc(rnd_unit() * 2.0 - 1.0, fp16);

    /* visibility: explicit matrix for every mode (the test's reference always reads it) */
    const int ql = c->q_len;
    B->vis = malloc((size_t)c->bs * ql * ql);
    for (int b = 0; b < c->bs; b++) {
        uint8_t *m = B->vis + (size_t)b * ql * ql;
        int parent[VATTN_MAX_Q_LEN];
        for (int i = 0; i < ql; i++) {
            parent[i] = i == 0 ? -1 : rnd_int(i);
            for (int j = 0; j < ql; j++) {
                uint8_t v = 0;
                switch (c->vis) {
                case VIS_CAUSAL_NULL:
                case VIS_CAUSAL_EXPLICIT: v = j <= i; break;
                case VIS_RANDOM: v = rnd_int(3) == 0 ? (uint8_t)(1 + rnd_int(255)) : 0; break;
                case VIS_FULL: v = 1; break;
                default: break;
                }
                m[i * ql + j] = v;
            }
            if (c->vis == VIS_TREE) /* ancestors and self */
                for (int k = i; k >= 0; k = parent[k])
                    m[i * ql + k] = 1;
        }
        if (c->vis == VIS_RANDOM && ql > 1)
            for (int j = 0; j < ql; j++)
                m[(ql - 1) * ql + j] = 0; /* guarantee one empty row per request */
    }
    a->visibility = c->vis == VIS_CAUSAL_NULL ? NULL : B->vis;
    /* the reference below reads B->vis: a hidden key is cleared there too */
    vattn_special_data(a, B->indptr, B->indices, B->vis, B->q, B->kv, c->special == SP_ZERO_Q,
                       c->special == SP_MASKED_NANV);

    B->o_elems = (size_t)T * a->o_stride_t;
    B->lse_elems = (size_t)T * H;
    B->o_alloc = malloc(B->o_elems * 2 + 2 * GUARD_BYTES);
    B->lse_alloc = malloc(B->lse_elems * 4 + 2 * GUARD_BYTES);
    memset(B->o_alloc, GUARD_BYTE, B->o_elems * 2 + 2 * GUARD_BYTES);
    memset(B->lse_alloc, GUARD_BYTE, B->lse_elems * 4 + 2 * GUARD_BYTES);
    B->o = (uint16_t *)(B->o_alloc + GUARD_BYTES);
    B->lse = (float *)(B->lse_alloc + GUARD_BYTES);
    a->q = B->q;
    a->kv_cache = B->kv;
    a->kv_indptr = B->indptr;
    a->kv_indices = B->indices;
    a->o = B->o;
    a->lse = c->no_lse ? NULL : B->lse;
    B->ws_bytes = vattn_workspace_size(a);
    B->ws = aligned_alloc(64, B->ws_bytes ? (B->ws_bytes + 63) / 64 * 64 : 64);
}

static void unbuild(built *B)
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

/* 1 when the four guard regions around o and lse still hold GUARD_BYTE */
static int guards_ok(const built *B)
{
    const unsigned char *g[4] = {B->o_alloc, B->o_alloc + GUARD_BYTES + B->o_elems * 2, B->lse_alloc,
                                 B->lse_alloc + GUARD_BYTES + B->lse_elems * 4};
    for (int k = 0; k < 4; k++)
        for (int i = 0; i < GUARD_BYTES; i++)
            if (g[k][i] != GUARD_BYTE)
                return 0;
    return 1;
}

static void poison(built *B)
{
    const uint16_t p = B->a.dtype == VATTN_DTYPE_FP16 ? POISON_F16 : POISON_BF16;
    for (size_t i = 0; i < B->o_elems; i++)
        B->o[i] = p;
    uint32_t nanbits = 0x7fc00123u;
    for (size_t i = 0; i < B->lse_elems; i++)
        memcpy(&B->lse[i], &nanbits, 4);
}

/* float64 reference: for each query, list its visible keys, softmax, weighted sum.
 * Rows are decoded to double once (the naive loops below then stay cheap enough for CI). */
static void reference(const built *B, const uint8_t *vis, double *ref_o, double *ref_lse)
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
                kd[j * QK + c] = dec(B->kv[slot * a->kv_stride + c], fp16);
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
                    qd[c] = dec(B->q[t * a->q_stride_t + h * a->q_stride_h + c], fp16);
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

/* Compares B's outputs with the reference; prints one line; returns 1 on pass. */
static int compare(const char *name, const built *B, const double *ref_o, const double *ref_lse)
{
    const vattn_args *a = &B->a;
    const int fp16 = a->dtype == VATTN_DTYPE_FP16, ql = a->q_len, H = a->num_heads;
    const int64_t T = (int64_t)a->bs * ql;
    const uint16_t p = fp16 ? POISON_F16 : POISON_BF16;
    char why[256] = "";
    double num = 0, den = 0, worst = -1;
    int64_t wt = 0;
    int wh = 0, wc = 0;
    /* 1: NaN/Inf positions (the reference has none in o) and untouched gaps */
    for (int64_t t = 0; t < T && !why[0]; t++)
        for (int h = 0; h < H && !why[0]; h++)
            for (int c = 0; c < DV; c++) {
                double v = dec(B->o[t * a->o_stride_t + h * a->o_stride_h + c], fp16);
                if (!isfinite(v)) {
                    snprintf(why, sizeof why, "non-finite o at (req %lld, tok %lld, head %d, ch %d)",
                             (long long)(t / ql), (long long)(t % ql), h, c);
                    break;
                }
            }
    for (size_t i = 0; i < B->o_elems && !why[0]; i++) {
        int64_t t = (int64_t)(i / a->o_stride_t), r = (int64_t)(i % a->o_stride_t);
        int h = (int)(r / a->o_stride_h), c = (int)(r % a->o_stride_h);
        int owned = h < H && c < DV;
        if (!owned && B->o[i] != p)
            snprintf(why, sizeof why, "output gap element %zu (token %lld) was written", i,
                     (long long)t);
    }
    /* 2: rel L2 over o, worst element */
    for (int64_t t = 0; t < T && !why[0]; t++)
        for (int h = 0; h < H; h++)
            for (int c = 0; c < DV; c++) {
                double v = dec(B->o[t * a->o_stride_t + h * a->o_stride_h + c], fp16);
                double r = ref_o[(t * H + h) * DV + c], d = fabs(v - r);
                num += d * d;
                den += r * r;
                if (d > worst) {
                    worst = d;
                    wt = t;
                    wh = h;
                    wc = c;
                }
            }
    double rel = den > 0 ? sqrt(num / den) : sqrt(num);
    if (!why[0] && !(rel <= 1e-2))
        snprintf(why, sizeof why, "rel L2 %.3e > 1e-2", rel);
    /* One wrong element barely moves a norm over a big output, so every element must also be
     * within 1e-2 of (|ref| + rms(ref)): bf16 output rounding alone is <= 2^-9 |ref|. */
    const double rms = sqrt(den / ((double)T * H * DV));
    for (int64_t t = 0; t < T && !why[0]; t++)
        for (int h = 0; h < H && !why[0]; h++)
            for (int c = 0; c < DV; c++) {
                double v = dec(B->o[t * a->o_stride_t + h * a->o_stride_h + c], fp16);
                double r = ref_o[(t * H + h) * DV + c];
                if (fabs(v - r) > 1e-2 * (fabs(r) + rms)) {
                    snprintf(why, sizeof why,
                             "element (req %lld, tok %lld, head %d, ch %d) = %g, ref %g: beyond "
                             "1e-2*(|ref|+rms %.3g)",
                             (long long)(t / ql), (long long)(t % ql), h, c, v, r, rms);
                    break;
                }
            }
    /* 3: lse: -inf exactly where the reference has it, else within fp32 accumulation error */
    double lse_worst = 0;
    if (a->lse)
        for (int64_t i = 0; i < T * H && !why[0]; i++) {
            double r = ref_lse[i], v = a->lse[i];
            if (isinf(r) || !isfinite(v)) {
                if (!(isinf(r) && v == r))
                    snprintf(why, sizeof why, "lse (req %lld, tok %lld, head %lld) = %g, ref %g",
                             (long long)(i / H / ql), (long long)(i / H % ql),
                             (long long)(i % H), v, r);
                continue;
            }
            double d = fabs(v - r) / (1.0 + fabs(r));
            if (d > lse_worst)
                lse_worst = d;
            if (d > 1e-4)
                snprintf(why, sizeof why, "lse error %.3e at (req %lld, tok %lld, head %lld)", d,
                         (long long)(i / H / ql), (long long)(i / H % ql), (long long)(i % H));
        }
    else
        for (size_t i = 0; i < B->lse_elems && !why[0]; i++)
            if (!isnan(B->lse[i]))
                snprintf(why, sizeof why, "lse written although lse == NULL");
    printf("%s %-28s rel_l2=%.2e worst=%.2e at (req %lld, tok %lld, head %d, ch %d) lse_err=%.1e%s%s\n",
           why[0] ? "FAIL" : "PASS", name, rel, worst, (long long)(wt / ql), (long long)(wt % ql),
           wh, wc, lse_worst, why[0] ? " : " : "", why);
    return !why[0];
}

/* The library call `what` of case `name` returned rc: OK, its outputs match the float64
 * reference (compare) and the guards around o and lse are intact. Prints the failure. */
static int call_ok(const char *what, const char *name, int rc, const built *B, const double *ref_o,
                   const double *ref_lse)
{
    if (rc != VATTN_OK) {
        printf("FAIL %s: %s returned %d (%s)\n", name, what, rc, vattn_status_string(rc));
        return 0;
    }
    if (!compare(name, B, ref_o, ref_lse))
        return 0;
    if (!guards_ok(B)) {
        printf("FAIL %s: a guard region around o or lse was written\n", name);
        return 0;
    }
    return 1;
}

static void run_case(const tcase *c, uint64_t seed)
{
    g_rng = seed;
    built B;
    build(c, &B);
    const int T = c->bs * c->q_len;
    double *ref_o = malloc(sizeof(double) * T * c->H * DV);
    double *ref_lse = malloc(sizeof(double) * T * c->H);
    reference(&B, B.vis, ref_o, ref_lse);
    poison(&B);
    int rc = vattn_verify(&B.a, B.ws, B.ws_bytes, NULL);
    char name[96];
    snprintf(name, sizeof name, "%s[bs%d q%d H%d %s %s %s]", c->name, c->bs, c->q_len, c->H,
             vis_name[c->vis], c->idx64 ? "i64" : "i32", c->fp16 ? "fp16" : "bf16");
    vattn_meanres M;
    if (!call_ok("vattn_verify", name, rc, &B, ref_o, ref_lse)) {
        g_fail++;
    } else if (c->special == SP_ZERO_Q &&
               !vattn_check_mean(&B.a, B.indptr, B.indices, B.a.visibility, B.kv, B.o, B.a.lse, &M)) {
        printf("FAIL %s: Q = 0 mean check: %s\n", name, M.why);
        g_fail++;
    } else {
        if (c->special == SP_ZERO_Q)
            printf("PASS %s: Q = 0: o = mean of the visible V rows, worst %.2e (%.2f of its tolerance) at (req %d, "
                   "tok %d, head %d, ch %d), lse err %.1e\n",
                   name, M.worst, M.worst_ratio, M.wb, M.wt, M.wh, M.wc, M.lse_err);
        /* determinism: a second run must be bitwise identical */
        uint16_t *o1 = malloc(B.o_elems * 2);
        memcpy(o1, B.o, B.o_elems * 2);
        poison(&B);
        vattn_verify(&B.a, B.ws, B.ws_bytes, NULL);
        if (memcmp(o1, B.o, B.o_elems * 2) != 0) {
            printf("FAIL %s: second run not bitwise identical\n", name);
            g_fail++;
        }
        free(o1);
    }
    free(ref_o);
    free(ref_lse);
    unbuild(&B);
}

#include "vattn_cpu_checks.h"
#include "vattn_cpu_extend.h"

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        run_case(&cases[k], 0x9E3779B97F4A7C15ull ^ (k * 0x100000001B3ull + 1));
    run_validation(0);
    run_validation(1);
    run_extend_all();
    run_misc();
    run_perturbed();
    printf("%s: %d failure(s)\n", g_fail ? "FAILED" : "OK", g_fail);
    return g_fail ? 1 : 0;
}
