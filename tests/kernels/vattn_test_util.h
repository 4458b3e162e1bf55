/*
 * vattn_test_util.h — small helpers shared by the kernel tests (test_verify_cpu.c and, through
 * vattn_gpu_common.h, the GPU test), over the test kit (../testkit_vattn.h: checks,
 * generator, codecs, the random call): the kernel tests' one stream g_rng, the output ulp and
 * the Q = 0 check (every output row = the float64 mean of its visible V rows). Header-only,
 * static; a test seeds g_rng before it draws.
 */
#ifndef VATTN_TEST_UTIL_H
#define VATTN_TEST_UTIL_H

#include "verify_attn.h"
#include "../testkit_vattn.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the kernel tests' one stream (a test seeds it before it draws) */
static tk_rng g_rng = TK_RNG_DEFAULT_SEED;

/* One output ulp of x (bf16: 8 significant bits, fp16: 11, its subnormals 2^-24). */
static inline double out_ulp(double x, int fp16)
{
    if (x == 0.0)
        return 0.0;
    const double u = ldexp(1.0, ilogb(x) - (fp16 ? 10 : 7));
    return fp16 && u < 0x1p-24 ? 0x1p-24 : u;
}

typedef struct vattn_meanres {
    double worst, worst_ratio, lse_err; /* worst |o - mean|, worst error / tolerance, lse error */
    int wb, wt, wh, wc;                 /* where the worst |o - mean| is */
    char why[200];                      /* "" = pass */
} vattn_meanres;

/* With Q = 0 every score is 0, so o[t][h] must be the float64 mean of the visible V rows of
 * token t (all heads alike) and lse = ln(visible count) (o = 0, lse = -inf without any).
 * a: sizes and strides (its pointers are not used); indptr, indices, vis (NULL = causal), kv:
 * host copies; o with a's strides; lse [T*H] or NULL to skip. Tolerance: one output ulp (the
 * exact mean may round either way once the fp32 sum is rounded) plus 2^-20 of the mean |V|
 * (fp32 summation). NaN/Inf first; the worst element by index. Returns 1 on pass. */
static int vattn_check_mean(const vattn_args *a, const int32_t *indptr, const void *indices, const uint8_t *vis,
                            const uint16_t *kv, const uint16_t *o, const float *lse, vattn_meanres *R)
{
    const int fp16 = a->dtype == VATTN_DTYPE_FP16, ql = a->q_len, H = a->num_heads;
    double *mean = malloc(sizeof(double) * DV), *mabs = malloc(sizeof(double) * DV);
    memset(R, 0, sizeof *R);
    R->worst = -1;
    for (int b = 0; b < a->bs && !R->why[0]; b++) {
        const int64_t st = indptr[b], len = indptr[b + 1] - st, prefix = len - ql;
        for (int i = 0; i < ql && !R->why[0]; i++) {
            int64_t nvis = 0;
            for (int c = 0; c < DV; c++)
                mean[c] = mabs[c] = 0.0;
            for (int64_t j = 0; j < len; j++) {
                const int64_t d = j - prefix;
                if (d >= 0 && !(vis ? vis[((size_t)b * ql + i) * ql + d] != 0 : d <= i))
                    continue;
                const int64_t slot = a->index_type == VATTN_INDEX_INT64 ? ((const int64_t *)indices)[st + j]
                                                                        : ((const int32_t *)indices)[st + j];
                for (int c = 0; c < DV; c++) {
                    const double v = tk_dec(kv[slot * a->kv_stride + c], fp16);
                    mean[c] += v;
                    mabs[c] += fabs(v);
                }
                nvis++;
            }
            for (int c = 0; c < DV && nvis; c++) {
                mean[c] /= (double)nvis;
                mabs[c] /= (double)nvis;
            }
            const int64_t t = (int64_t)b * ql + i;
            for (int h = 0; h < H && !R->why[0]; h++) {
                for (int c = 0; c < DV; c++) {
                    const double v = tk_dec(o[t * a->o_stride_t + h * a->o_stride_h + c], fp16);
                    const double d = fabs(v - mean[c]), tol = out_ulp(mean[c], fp16) + 0x1p-20 * mabs[c];
                    if (!isfinite(v)) {
                        snprintf(R->why, sizeof R->why, "non-finite o at (req %d, tok %d, head %d, ch %d): %g", b, i,
                                 h, c, v);
                        break;
                    }
                    if (d > R->worst) {
                        R->worst = d;
                        R->wb = b, R->wt = i, R->wh = h, R->wc = c;
                    }
                    if (tol > 0 && d / tol > R->worst_ratio)
                        R->worst_ratio = d / tol;
                    if (d > tol) {
                        snprintf(R->why, sizeof R->why,
                                 "o (req %d, tok %d, head %d, ch %d) = %.9g, mean of %lld visible V rows %.9g", b, i,
                                 h, c, v, (long long)nvis, mean[c]);
                        break;
                    }
                }
                if (lse && !R->why[0]) {
                    const double r = nvis ? log((double)nvis) : -INFINITY, v = lse[t * H + h];
                    const double e = nvis ? fabs(v - r) / (1.0 + fabs(r)) : (v == r ? 0.0 : INFINITY);
                    if (e > R->lse_err)
                        R->lse_err = e;
                    if (!(e <= 1e-5))
                        snprintf(R->why, sizeof R->why, "lse (req %d, tok %d, head %d) = %g, ln(%lld) = %g", b, i, h,
                                 v, (long long)nvis, r);
                }
            }
        }
    }
    free(mean);
    free(mabs);
    return !R->why[0];
}

#endif
