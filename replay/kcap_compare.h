/*
 * kcap_compare.h — element-wise comparison of two tensors: the metrics behind every replay
 * verdict and every `kcap diff` line.
 *
 * Kept apart from replay so that diff, the tests and any future tool judge results with the
 * same rules: NaN/Inf positions (and the sign of an infinity) must match first and are then
 * left out of the numeric metrics; then max abs, max rel, ||a-b||/||b||, cosine similarity
 * and the count of elements beyond atol + rtol*|want|, all accumulated in double. "want" is
 * always the trusted side (captured output or reference). Pure host code, no allocation.
 */
#ifndef KCAP_COMPARE_H
#define KCAP_COMPARE_H

#include <stddef.h>
#include <stdint.h>

#include "kcap_snapshot.h" /* kcap_dtype */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kcap_cmp_tol {
    double atol;
    double rtol;
} kcap_cmp_tol;

/* Defaults: bf16/f16 tensors are judged at bf16 resolution (8 mantissa bits: one ulp at 1.0
 * is 2^-7 ~ 7.8e-3, so a 2e-2 relative band allows ~2 ulps of re-association noise); fp32
 * tensors (lse) keep fp32 accumulation, so a much tighter band; integers must be exact. */
#define KCAP_CMP_ATOL_BF16 1e-2
#define KCAP_CMP_RTOL_BF16 2e-2
#define KCAP_CMP_ATOL_F32 1e-3
#define KCAP_CMP_RTOL_F32 1e-3

typedef enum kcap_cmp_worst_kind {
    KCAP_WORST_NONE = 0,      /* no element differs */
    KCAP_WORST_NONFINITE = 1, /* first position whose NaN/+Inf/-Inf class differs */
    KCAP_WORST_VALUE = 2      /* finite element with the largest |a-b| / (atol + rtol|b|) */
} kcap_cmp_worst_kind;

typedef struct kcap_cmp_result {
    size_t n;                  /* elements compared */
    int bitwise;               /* every byte identical */
    size_t nonfinite_mismatch; /* positions whose NaN/Inf class differs */
    size_t nonfinite_matched;  /* positions non-finite on both sides in the same way */
    double max_abs;            /* over positions finite on both sides */
    double max_rel;            /* |a-b|/|b| over positions with b != 0 */
    double rel_l2;             /* ||a-b|| / ||b||  (0 when both are 0, inf when only b is) */
    double cosine;             /* a.b / (||a|| ||b||)  (1 when both are all zero) */
    size_t n_beyond;           /* finite positions with |a-b| > atol + rtol*|b| */
    kcap_cmp_worst_kind worst_kind;
    int64_t worst;             /* flat element index, -1 if none */
    double worst_got, worst_want;
    int pass;                  /* no non-finite mismatch and n_beyond == 0 */
} kcap_cmp_result;

/* Compare n elements of dtype dt ("got" against "want"). Integer dtypes are compared exactly
 * whatever tol says. Returns 0, or KCAP_ERR_ARG for an unsupported dtype / NULL buffer. */
int kcap_compare(kcap_dtype dt, const void *got, const void *want, size_t n,
                 const kcap_cmp_tol *tol, kcap_cmp_result *r);

/* Default tolerance of a dtype (see above). */
kcap_cmp_tol kcap_cmp_default_tol(kcap_dtype dt);

/* One element as a double (bf16/f16 widened exactly). */
double kcap_cmp_value(kcap_dtype dt, const void *data, size_t i);

/* Row-major flat index -> per-dimension index. */
void kcap_cmp_unravel(int64_t flat, int ndim, const int64_t *shape, int64_t *idx);

/*
 * A verify-attention output element as (request, token, head, channel): tensors whose first
 * dimension is T = bs*q_len tokens, token-major. channel is -1 for 2-D tensors (lse). Returns
 * 0, or -1 when the shape does not start with a token dimension divisible by q_len.
 */
int kcap_cmp_locate(int64_t flat, int ndim, const int64_t *shape, int64_t q_len,
                    int64_t loc[4]);

/* "bitwise", "pass" or "FAIL" — the verdict word of a result. */
const char *kcap_cmp_verdict(const kcap_cmp_result *r);

#ifdef __cplusplus
}
#endif

#endif
