/*
 * test_kcap_compare.c — table-driven unit test of replay/kcap_compare.c, the metrics every
 * replay verdict and kcap diff line rests on.
 *
 * Each row builds a "want" vector of random non-zero values, derives "got" by one planted
 * change (nothing, an in-band nudge, an out-of-band error, a NaN, an infinity, ...) and
 * states what the comparison must say: pass/bitwise, the counts, and the exact worst index.
 * Metric values are checked against closed forms computed here in double.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kcap_compare.h"
#include "../testkit.h"

/* want's values: random, non-zero (so every relative error is defined), seeded */
#define CMP_SEED 0x9e3779b97f4a7c15ull
#define CMP_MIN_ABS 1e-3
static tk_rng g_rng = CMP_SEED;
static double rnd(void) { return tk_nonzero(&g_rng, CMP_MIN_ABS); }

enum plant { P_NONE, P_SMALL, P_BIG, P_NAN, P_NAN_AND_BIG, P_NEG_INF_BOTH, P_INF_SIGN, P_SCALE,
             P_NAN_PAYLOAD };

typedef struct row {
    const char *what;
    kcap_dtype dt;
    enum plant plant;
    size_t at;        /* planted index */
    size_t at2;       /* second planted index (P_NAN_AND_BIG) */
    int pass, bitwise;
    size_t beyond, nf_mismatch, nf_matched;
    int64_t worst;    /* -1 none */
    kcap_cmp_worst_kind kind;
} row;

static const row rows[] = {
    {.what = "identical bf16", .dt = KCAP_DT_BF16, .plant = P_NONE,
      .pass = 1, .bitwise = 1, .worst = -1, .kind = KCAP_WORST_NONE},
    {.what = "identical f32", .dt = KCAP_DT_F32, .plant = P_NONE,
      .pass = 1, .bitwise = 1, .worst = -1, .kind = KCAP_WORST_NONE},
    {.what = "in-band nudge bf16", .dt = KCAP_DT_BF16, .plant = P_SMALL, .at = 17,
      .pass = 1, .bitwise = 0, .worst = 17, .kind = KCAP_WORST_VALUE},
    {.what = "out-of-band bf16", .dt = KCAP_DT_BF16, .plant = P_BIG, .at = 401,
      .pass = 0, .bitwise = 0, .beyond = 1, .worst = 401, .kind = KCAP_WORST_VALUE},
    {.what = "out-of-band f32", .dt = KCAP_DT_F32, .plant = P_BIG, .at = 3,
      .pass = 0, .bitwise = 0, .beyond = 1, .worst = 3, .kind = KCAP_WORST_VALUE},
    {.what = "NaN where finite", .dt = KCAP_DT_BF16, .plant = P_NAN, .at = 999,
      .pass = 0, .bitwise = 0, .nf_mismatch = 1, .worst = 999, .kind = KCAP_WORST_NONFINITE},
    {.what = "NaN outranks a bigger value error", .dt = KCAP_DT_F32, .plant = P_NAN_AND_BIG, .at = 500, .at2 = 20,
      .pass = 0, .bitwise = 0, .beyond = 1, .nf_mismatch = 1, .worst = 500, .kind = KCAP_WORST_NONFINITE},
    {.what = "-inf on both sides (empty lse)", .dt = KCAP_DT_F32, .plant = P_NEG_INF_BOTH, .at = 7,
      .pass = 1, .bitwise = 1, .nf_matched = 1, .worst = -1, .kind = KCAP_WORST_NONE},
    {.what = "+inf vs -inf", .dt = KCAP_DT_F32, .plant = P_INF_SIGN, .at = 8,
      .pass = 0, .bitwise = 0, .nf_mismatch = 1, .worst = 8, .kind = KCAP_WORST_NONFINITE},
    {.what = "uniform 1e-4 scale f32", .dt = KCAP_DT_F32, .plant = P_SCALE,
      .pass = 1, .bitwise = 0, .worst = -2, .kind = KCAP_WORST_VALUE},
    {.what = "NaN payloads differ", .dt = KCAP_DT_BF16, .plant = P_NAN_PAYLOAD, .at = 12,
      .pass = 1, .bitwise = 0, .nf_matched = 1, .worst = -1, .kind = KCAP_WORST_NONE},
};

#define N 1024

static void put(kcap_dtype dt, void *buf, size_t i, double v)
{
    if (dt == KCAP_DT_BF16)
        ((uint16_t *)buf)[i] = tk_bf16((float)v);
    else
        ((float *)buf)[i] = (float)v;
}

static void run_row(const row *r)
{
    size_t es = kcap_dtype_size(r->dt);
    unsigned char *want = malloc(N * es), *got = malloc(N * es);
    for (size_t i = 0; i < N; i++)
        put(r->dt, want, i, rnd());
    memcpy(got, want, N * es);
    double w = kcap_cmp_value(r->dt, want, r->at);
    switch (r->plant) {
    case P_NONE: break;
    case P_SMALL: put(r->dt, got, r->at, w + (w > 0 ? 0.008 : -0.008)); break;
    case P_BIG: put(r->dt, got, r->at, w + 0.5); break;
    case P_NAN: put(r->dt, got, r->at, NAN); break;
    case P_NAN_AND_BIG:
        put(r->dt, got, r->at2, w + 5.0);
        put(r->dt, got, r->at, NAN);
        break;
    case P_NEG_INF_BOTH:
        put(r->dt, got, r->at, -INFINITY);
        put(r->dt, want, r->at, -INFINITY);
        break;
    case P_INF_SIGN:
        put(r->dt, got, r->at, INFINITY);
        put(r->dt, want, r->at, -INFINITY);
        break;
    case P_SCALE:
        for (size_t i = 0; i < N; i++)
            put(r->dt, got, i, kcap_cmp_value(r->dt, want, i) * (1 + 1e-4));
        break;
    case P_NAN_PAYLOAD:
        ((uint16_t *)want)[r->at] = 0x7fc0;
        ((uint16_t *)got)[r->at] = 0xffff; /* the poison pattern */
        break;
    }
    kcap_cmp_tol tol = kcap_cmp_default_tol(r->dt);
    kcap_cmp_result c;
    TK_CHECK(kcap_compare(r->dt, got, want, N, &tol, &c) == 0, "%s: compare failed", r->what);
    TK_CHECK(c.n == N, "%s: n %zu", r->what, c.n);
    TK_CHECK(c.pass == r->pass, "%s: pass %d want %d", r->what, c.pass, r->pass);
    TK_CHECK(c.bitwise == r->bitwise, "%s: bitwise %d want %d", r->what, c.bitwise, r->bitwise);
    TK_CHECK(c.n_beyond == r->beyond, "%s: beyond %zu want %zu", r->what, c.n_beyond, r->beyond);
    TK_CHECK(c.nonfinite_mismatch == r->nf_mismatch, "%s: nf mismatch %zu want %zu", r->what,
             c.nonfinite_mismatch, r->nf_mismatch);
    TK_CHECK(c.nonfinite_matched == r->nf_matched, "%s: nf matched %zu want %zu", r->what,
             c.nonfinite_matched, r->nf_matched);
    if (r->worst != -2) {
        TK_CHECK(c.worst == r->worst, "%s: worst %lld want %lld", r->what, (long long)c.worst,
                 (long long)r->worst);
        TK_CHECK(c.worst_kind == r->kind, "%s: worst kind %d want %d", r->what, c.worst_kind,
                 r->kind);
    }
    if (r->plant == P_BIG && r->dt == KCAP_DT_F32) {
        double diff = fabs(kcap_cmp_value(r->dt, got, r->at) - w);
        TK_CHECK(fabs(c.max_abs - diff) < 1e-12, "%s: max_abs %g want %g", r->what, c.max_abs, diff);
        TK_CHECK(fabs(c.max_rel - diff / fabs(w)) < 1e-9, "%s: max_rel %g", r->what, c.max_rel);
    }
    if (r->plant == P_SCALE) {
        /* got = want * (1 + e): rel_l2 = e, cosine = 1 (to float rounding) */
        TK_CHECK(fabs(c.rel_l2 - 1e-4) < 2e-6, "%s: rel_l2 %g", r->what, c.rel_l2);
        TK_CHECK(fabs(c.cosine - 1.0) < 1e-9, "%s: cosine %.12f", r->what, c.cosine);
        TK_CHECK(c.max_rel > 0.9e-4 && c.max_rel < 1.2e-4, "%s: max_rel %g", r->what, c.max_rel);
    }
    if (r->plant == P_NONE)
        TK_CHECK(c.max_abs == 0 && c.rel_l2 == 0 && fabs(c.cosine - 1) < 1e-12,
                 "%s: metrics of identical data", r->what);
    free(want);
    free(got);
}

static void test_cosine_and_zero(void)
{
    float a[4] = {1, 0, 0, 0}, b[4] = {0, 1, 0, 0}, z[4] = {0, 0, 0, 0};
    kcap_cmp_tol tol = {0, 0};
    kcap_cmp_result c;
    kcap_compare(KCAP_DT_F32, a, b, 4, &tol, &c);
    TK_CHECK(fabs(c.cosine) < 1e-12, "orthogonal cosine %g", c.cosine);
    TK_CHECK(fabs(c.rel_l2 - sqrt(2.0)) < 1e-12, "orthogonal rel_l2 %g", c.rel_l2);
    kcap_compare(KCAP_DT_F32, z, z, 4, &tol, &c);
    TK_CHECK(c.bitwise && c.cosine == 1.0 && c.rel_l2 == 0, "zero vs zero");
    kcap_compare(KCAP_DT_F32, a, z, 4, &tol, &c);
    TK_CHECK(!c.pass && isinf(c.rel_l2) && c.worst == 0, "nonzero vs zero");
}

static void test_integers_exact(void)
{
    int32_t a[3] = {5, 6, 7}, b[3] = {5, 6, 8};
    kcap_cmp_tol loose = {100, 100};
    kcap_cmp_result c;
    kcap_compare(KCAP_DT_I32, a, b, 3, &loose, &c);
    TK_CHECK(!c.pass && c.n_beyond == 1 && c.worst == 2, "int32 must match exactly");
    int64_t x[2] = {1ll << 40, 3}, y[2] = {1ll << 40, 3};
    kcap_compare(KCAP_DT_I64, x, y, 2, &loose, &c);
    TK_CHECK(c.pass && c.bitwise, "int64 equal");
    /* beyond 2^53 neighbouring int64 values are the same double: still a mismatch */
    int64_t big[3], big2[3];
    for (int i = 0; i < 3; i++)
        big[i] = big2[i] = (int64_t)(((uint64_t)1 << 60) + (uint64_t)(rnd() * 1e6 + 2e6) * 2);
    big2[1] += 1;
    kcap_compare(KCAP_DT_I64, big2, big, 3, &loose, &c);
    TK_CHECK(!c.pass && !c.bitwise && c.n_beyond == 1 && c.worst == 1 &&
              c.worst_kind == KCAP_WORST_VALUE,
             "int64 off by one above 2^53: pass %d beyond %zu worst %lld", c.pass, c.n_beyond,
             (long long)c.worst);
}

static void test_f16(void)
{
    uint16_t h[5] = {0x3c00, 0xc000, 0x0001, 0x7c00, 0x7e00}; /* 1, -2, 2^-24, inf, nan */
    TK_CHECK(kcap_cmp_value(KCAP_DT_F16, h, 0) == 1.0, "f16 1.0");
    TK_CHECK(kcap_cmp_value(KCAP_DT_F16, h, 1) == -2.0, "f16 -2.0");
    TK_CHECK(kcap_cmp_value(KCAP_DT_F16, h, 2) == ldexp(1.0, -24), "f16 subnormal");
    TK_CHECK(isinf(kcap_cmp_value(KCAP_DT_F16, h, 3)), "f16 inf");
    TK_CHECK(isnan(kcap_cmp_value(KCAP_DT_F16, h, 4)), "f16 nan");
}

static void test_locate(void)
{
    /* o-like [T = bs*q_len = 2*3, H = 2, C = 4] */
    int64_t shape[3] = {6, 2, 4}, loc[4];
    /* token 4 = request 1, draft 1; head 1; channel 3 */
    int64_t flat = (4 * 2 + 1) * 4 + 3;
    TK_CHECK(kcap_cmp_locate(flat, 3, shape, 3, loc) == 0, "locate ok");
    TK_CHECK(loc[0] == 1 && loc[1] == 1 && loc[2] == 1 && loc[3] == 3, "locate (%lld,%lld,%lld,%lld)",
             (long long)loc[0], (long long)loc[1], (long long)loc[2], (long long)loc[3]);
    int64_t lse_shape[2] = {6, 2};
    TK_CHECK(kcap_cmp_locate(5 * 2 + 0, 2, lse_shape, 3, loc) == 0 && loc[0] == 1 && loc[1] == 2 &&
              loc[2] == 0 && loc[3] == -1,
             "locate lse");
    TK_CHECK(kcap_cmp_locate(0, 3, shape, 4, loc) == -1, "T not divisible by q_len");
    TK_CHECK(kcap_compare(KCAP_DT_INVALID, shape, shape, 1, NULL, &(kcap_cmp_result){0}) ==
              KCAP_ERR_ARG,
             "invalid dtype rejected");
}

int main(void)
{
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        run_row(&rows[i]);
    test_cosine_and_zero();
    test_integers_exact();
    test_f16();
    test_locate();
    return tk_summary("test_kcap_compare");
}
