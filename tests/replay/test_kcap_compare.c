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

static int g_fail;

#define CHECK(cond, ...)                                                                     \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                      \
            printf(__VA_ARGS__);                                                             \
            printf("\n");                                                                    \
            g_fail++;                                                                        \
        }                                                                                    \
    } while (0)

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static double rnd(void) /* uniform in [-1, 1), never 0 */
{
    for (;;) {
        g_rng ^= g_rng << 13;
        g_rng ^= g_rng >> 7;
        g_rng ^= g_rng << 17;
        double v = (double)(g_rng >> 11) / 9007199254740992.0 * 2.0 - 1.0;
        if (fabs(v) > 1e-3)
            return v;
    }
}

static uint16_t to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

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
    {"identical bf16", KCAP_DT_BF16, P_NONE, 0, 0, 1, 1, 0, 0, 0, -1, KCAP_WORST_NONE},
    {"identical f32", KCAP_DT_F32, P_NONE, 0, 0, 1, 1, 0, 0, 0, -1, KCAP_WORST_NONE},
    {"in-band nudge bf16", KCAP_DT_BF16, P_SMALL, 17, 0, 1, 0, 0, 0, 0, 17, KCAP_WORST_VALUE},
    {"out-of-band bf16", KCAP_DT_BF16, P_BIG, 401, 0, 0, 0, 1, 0, 0, 401, KCAP_WORST_VALUE},
    {"out-of-band f32", KCAP_DT_F32, P_BIG, 3, 0, 0, 0, 1, 0, 0, 3, KCAP_WORST_VALUE},
    {"NaN where finite", KCAP_DT_BF16, P_NAN, 999, 0, 0, 0, 0, 1, 0, 999, KCAP_WORST_NONFINITE},
    {"NaN outranks a bigger value error", KCAP_DT_F32, P_NAN_AND_BIG, 500, 20, 0, 0, 1, 1, 0, 500,
     KCAP_WORST_NONFINITE},
    {"-inf on both sides (empty lse)", KCAP_DT_F32, P_NEG_INF_BOTH, 7, 0, 1, 1, 0, 0, 1, -1,
     KCAP_WORST_NONE},
    {"+inf vs -inf", KCAP_DT_F32, P_INF_SIGN, 8, 0, 0, 0, 0, 1, 0, 8, KCAP_WORST_NONFINITE},
    {"uniform 1e-4 scale f32", KCAP_DT_F32, P_SCALE, 0, 0, 1, 0, 0, 0, 0, -2, KCAP_WORST_VALUE},
    {"NaN payloads differ", KCAP_DT_BF16, P_NAN_PAYLOAD, 12, 0, 1, 0, 0, 0, 1, -1,
     KCAP_WORST_NONE},
};

#define N 1024

static void put(kcap_dtype dt, void *buf, size_t i, double v)
{
    if (dt == KCAP_DT_BF16)
        ((uint16_t *)buf)[i] = to_bf16((float)v);
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
    CHECK(kcap_compare(r->dt, got, want, N, &tol, &c) == 0, "%s: compare failed", r->what);
    CHECK(c.n == N, "%s: n %zu", r->what, c.n);
    CHECK(c.pass == r->pass, "%s: pass %d want %d", r->what, c.pass, r->pass);
    CHECK(c.bitwise == r->bitwise, "%s: bitwise %d want %d", r->what, c.bitwise, r->bitwise);
    CHECK(c.n_beyond == r->beyond, "%s: beyond %zu want %zu", r->what, c.n_beyond, r->beyond);
    CHECK(c.nonfinite_mismatch == r->nf_mismatch, "%s: nf mismatch %zu want %zu", r->what,
          c.nonfinite_mismatch, r->nf_mismatch);
    CHECK(c.nonfinite_matched == r->nf_matched, "%s: nf matched %zu want %zu", r->what,
          c.nonfinite_matched, r->nf_matched);
    if (r->worst != -2) {
        CHECK(c.worst == r->worst, "%s: worst %lld want %lld", r->what, (long long)c.worst,
              (long long)r->worst);
        CHECK(c.worst_kind == r->kind, "%s: worst kind %d want %d", r->what, c.worst_kind,
              r->kind);
    }
    if (r->plant == P_BIG && r->dt == KCAP_DT_F32) {
        double diff = fabs(kcap_cmp_value(r->dt, got, r->at) - w);
        CHECK(fabs(c.max_abs - diff) < 1e-12, "%s: max_abs %g want %g", r->what, c.max_abs, diff);
        CHECK(fabs(c.max_rel - diff / fabs(w)) < 1e-9, "%s: max_rel %g", r->what, c.max_rel);
    }
    if (r->plant == P_SCALE) {
        /* got = want * (1 + e): rel_l2 = e, cosine = 1 (to float rounding) */
        CHECK(fabs(c.rel_l2 - 1e-4) < 2e-6, "%s: rel_l2 %g", r->what, c.rel_l2);
        CHECK(fabs(c.cosine - 1.0) < 1e-9, "%s: cosine %.12f", r->what, c.cosine);
        CHECK(c.max_rel > 0.9e-4 && c.max_rel < 1.2e-4, "%s: max_rel %g", r->what, c.max_rel);
    }
    if (r->plant == P_NONE)
        CHECK(c.max_abs == 0 && c.rel_l2 == 0 && fabs(c.cosine - 1) < 1e-12,
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
    CHECK(fabs(c.cosine) < 1e-12, "orthogonal cosine %g", c.cosine);
    CHECK(fabs(c.rel_l2 - sqrt(2.0)) < 1e-12, "orthogonal rel_l2 %g", c.rel_l2);
    kcap_compare(KCAP_DT_F32, z, z, 4, &tol, &c);
    CHECK(c.bitwise && c.cosine == 1.0 && c.rel_l2 == 0, "zero vs zero");
    kcap_compare(KCAP_DT_F32, a, z, 4, &tol, &c);
    CHECK(!c.pass && isinf(c.rel_l2) && c.worst == 0, "nonzero vs zero");
}

static void test_integers_exact(void)
{
    int32_t a[3] = {5, 6, 7}, b[3] = {5, 6, 8};
    kcap_cmp_tol loose = {100, 100};
    kcap_cmp_result c;
    kcap_compare(KCAP_DT_I32, a, b, 3, &loose, &c);
    CHECK(!c.pass && c.n_beyond == 1 && c.worst == 2, "int32 must match exactly");
    int64_t x[2] = {1ll << 40, 3}, y[2] = {1ll << 40, 3};
    kcap_compare(KCAP_DT_I64, x, y, 2, &loose, &c);
    CHECK(c.pass && c.bitwise, "int64 equal");
    /* beyond 2^53 neighbouring int64 values are the same double: still a mismatch */
    int64_t big[3], big2[3];
    for (int i = 0; i < 3; i++)
        big[i] = big2[i] = (int64_t)(((uint64_t)1 << 60) + (uint64_t)(rnd() * 1e6 + 2e6) * 2);
    big2[1] += 1;
    kcap_compare(KCAP_DT_I64, big2, big, 3, &loose, &c);
    CHECK(!c.pass && !c.bitwise && c.n_beyond == 1 && c.worst == 1 &&
              c.worst_kind == KCAP_WORST_VALUE,
          "int64 off by one above 2^53: pass %d beyond %zu worst %lld", c.pass, c.n_beyond,
          (long long)c.worst);
}

static void test_f16(void)
{
    uint16_t h[5] = {0x3c00, 0xc000, 0x0001, 0x7c00, 0x7e00}; /* 1, -2, 2^-24, inf, nan */
    CHECK(kcap_cmp_value(KCAP_DT_F16, h, 0) == 1.0, "f16 1.0");
    CHECK(kcap_cmp_value(KCAP_DT_F16, h, 1) == -2.0, "f16 -2.0");
    CHECK(kcap_cmp_value(KCAP_DT_F16, h, 2) == ldexp(1.0, -24), "f16 subnormal");
    CHECK(isinf(kcap_cmp_value(KCAP_DT_F16, h, 3)), "f16 inf");
    CHECK(isnan(kcap_cmp_value(KCAP_DT_F16, h, 4)), "f16 nan");
}

static void test_locate(void)
{
    /* o-like [T = bs*q_len = 2*3, H = 2, C = 4] */
    int64_t shape[3] = {6, 2, 4}, loc[4];
    /* token 4 = request 1, draft 1; head 1; channel 3 */
    int64_t flat = (4 * 2 + 1) * 4 + 3;
    CHECK(kcap_cmp_locate(flat, 3, shape, 3, loc) == 0, "locate ok");
    CHECK(loc[0] == 1 && loc[1] == 1 && loc[2] == 1 && loc[3] == 3, "locate (%lld,%lld,%lld,%lld)",
          (long long)loc[0], (long long)loc[1], (long long)loc[2], (long long)loc[3]);
    int64_t lse_shape[2] = {6, 2};
    CHECK(kcap_cmp_locate(5 * 2 + 0, 2, lse_shape, 3, loc) == 0 && loc[0] == 1 && loc[1] == 2 &&
              loc[2] == 0 && loc[3] == -1,
          "locate lse");
    CHECK(kcap_cmp_locate(0, 3, shape, 4, loc) == -1, "T not divisible by q_len");
    CHECK(kcap_compare(KCAP_DT_INVALID, shape, shape, 1, NULL, &(kcap_cmp_result){0}) ==
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
    if (g_fail) {
        printf("%d check(s) failed\n", g_fail);
        return 1;
    }
    printf("test_kcap_compare: %zu table rows + 4 groups passed\n", sizeof rows / sizeof rows[0]);
    return 0;
}
