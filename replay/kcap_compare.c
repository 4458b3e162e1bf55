/*
 * kcap_compare.c — the comparison metrics of kcap_compare.h.
 *
 * One pass over the elements, everything widened to double so the metrics themselves add no
 * error at bf16/fp32 resolution. Non-finite values are classified first (NaN, +Inf, -Inf):
 * a kernel that leaves a poisoned (NaN) output element unwritten, or produces -inf where the
 * captured lse had a finite value, must fail even if every finite element agrees.
 */
#include "kcap_compare.h"

#include <math.h>
#include <string.h>

#include "kcap_error.h"

static double bf16_to_double(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static double f16_to_double(uint16_t h)
{
    int sign = h >> 15, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    double v;
    if (exp == 0)
        v = ldexp((double)man, -24);
    else if (exp == 31)
        v = man ? NAN : INFINITY;
    else
        v = ldexp((double)(man | 0x400), exp - 25);
    return sign ? -v : v;
}

double kcap_cmp_value(kcap_dtype dt, const void *data, size_t i)
{
    switch (dt) {
    case KCAP_DT_BF16: return bf16_to_double(((const uint16_t *)data)[i]);
    case KCAP_DT_F16: return f16_to_double(((const uint16_t *)data)[i]);
    case KCAP_DT_F32: return ((const float *)data)[i];
    case KCAP_DT_F64: return ((const double *)data)[i];
    case KCAP_DT_I32: return ((const int32_t *)data)[i];
    case KCAP_DT_I64: return (double)((const int64_t *)data)[i];
    case KCAP_DT_U8: return ((const uint8_t *)data)[i];
    default: return NAN;
    }
}

kcap_cmp_tol kcap_cmp_default_tol(kcap_dtype dt)
{
    kcap_cmp_tol t = {0, 0};
    if (dt == KCAP_DT_BF16 || dt == KCAP_DT_F16) {
        t.atol = KCAP_CMP_ATOL_BF16;
        t.rtol = KCAP_CMP_RTOL_BF16;
    } else if (dt == KCAP_DT_F32 || dt == KCAP_DT_F64) {
        t.atol = KCAP_CMP_ATOL_F32;
        t.rtol = KCAP_CMP_RTOL_F32;
    }
    return t;
}

/* 0 finite, 1 NaN, 2 +Inf, 3 -Inf */
static int nf_class(double v)
{
    if (isnan(v))
        return 1;
    if (isinf(v))
        return v > 0 ? 2 : 3;
    return 0;
}

int kcap_compare(kcap_dtype dt, const void *got, const void *want, size_t n,
                 const kcap_cmp_tol *tol, kcap_cmp_result *r)
{
    if (!r)
        return KCAP_ERR_ARG;
    memset(r, 0, sizeof *r);
    r->worst = -1;
    size_t es = kcap_dtype_size(dt);
    if (!es || (n && (!got || !want)))
        return KCAP_ERR_ARG;
    int is_int = dt == KCAP_DT_I32 || dt == KCAP_DT_I64 || dt == KCAP_DT_U8;
    double atol = (tol && !is_int) ? tol->atol : 0, rtol = (tol && !is_int) ? tol->rtol : 0;

    r->n = n;
    r->bitwise = n == 0 || memcmp(got, want, n * es) == 0;
    double sdd = 0, sbb = 0, saa = 0, sab = 0, worst_ratio = -1;
    for (size_t i = 0; i < n; i++) {
        double a = kcap_cmp_value(dt, got, i), b = kcap_cmp_value(dt, want, i);
        int ca = nf_class(a), cb = nf_class(b);
        if (ca || cb) {
            if (ca == cb) {
                r->nonfinite_matched++;
            } else {
                if (!r->nonfinite_mismatch) {
                    r->worst_kind = KCAP_WORST_NONFINITE;
                    r->worst = (int64_t)i;
                    r->worst_got = a;
                    r->worst_want = b;
                }
                r->nonfinite_mismatch++;
            }
            continue;
        }
        double d = fabs(a - b), ab = fabs(b);
        if (d > r->max_abs)
            r->max_abs = d;
        if (ab > 0 && d / ab > r->max_rel)
            r->max_rel = d / ab;
        sdd += d * d;
        sbb += b * b;
        saa += a * a;
        sab += a * b;
        double bound = atol + rtol * ab;
        /* integers exactly: int64 values beyond 2^53 can differ yet widen to one double */
        int beyond = is_int ? memcmp((const char *)got + i * es, (const char *)want + i * es,
                                     es) != 0
                            : d > bound;
        if (beyond)
            r->n_beyond++;
        /* The worst element is the one furthest outside its own tolerance band, so that one
         * large relative miss on a small value is not hidden behind in-band noise on large
         * values; non-finite mismatches outrank every value difference. */
        if ((d > 0 || beyond) && r->worst_kind != KCAP_WORST_NONFINITE) {
            double ratio = bound > 0 ? d / bound : d;
            if (ratio > worst_ratio) {
                worst_ratio = ratio;
                r->worst_kind = KCAP_WORST_VALUE;
                r->worst = (int64_t)i;
                r->worst_got = a;
                r->worst_want = b;
            }
        }
    }
    if (sbb > 0)
        r->rel_l2 = sqrt(sdd) / sqrt(sbb);
    else
        r->rel_l2 = sdd > 0 ? INFINITY : 0;
    if (saa > 0 && sbb > 0)
        r->cosine = sab / (sqrt(saa) * sqrt(sbb));
    else
        r->cosine = (saa == 0 && sbb == 0) ? 1.0 : 0.0;
    if (r->bitwise) { /* e.g. NaN payload differences make memcmp the only exact test */
        r->worst_kind = KCAP_WORST_NONE;
        r->worst = -1;
    }
    r->pass = r->bitwise || (r->nonfinite_mismatch == 0 && r->n_beyond == 0);
    return KCAP_OK;
}

void kcap_cmp_unravel(int64_t flat, int ndim, const int64_t *shape, int64_t *idx)
{
    for (int d = ndim - 1; d >= 0; d--) {
        int64_t s = shape[d] > 0 ? shape[d] : 1;
        idx[d] = flat % s;
        flat /= s;
    }
}

int kcap_cmp_locate(int64_t flat, int ndim, const int64_t *shape, int64_t q_len,
                    int64_t loc[4])
{
    if (ndim < 1 || ndim > KCAP_MAX_DIMS || q_len < 1 || flat < 0 || shape[0] % q_len)
        return -1;
    int64_t idx[KCAP_MAX_DIMS] = {0};
    kcap_cmp_unravel(flat, ndim, shape, idx);
    loc[0] = idx[0] / q_len;
    loc[1] = idx[0] % q_len;
    loc[2] = ndim > 1 ? idx[1] : -1;
    loc[3] = ndim > 2 ? idx[2] : -1;
    return 0;
}

const char *kcap_cmp_verdict(const kcap_cmp_result *r)
{
    if (r->bitwise)
        return "bitwise";
    return r->pass ? "pass" : "FAIL";
}
