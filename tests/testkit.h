/*
 * testkit.h — the one kit of the C tests: a CHECK family (every check counted, a failure
 * printed with its file:line and condition), one seeded generator (xorshift64*) with the
 * draws the tests need (integers, units, non-zero values, a slot shuffle), and exact
 * bf16 / IEEE half encoders and decoders written independently of the code under test.
 *
 * Header-only on purpose: every test directory is built by its own module.mk, and a header
 * needs no link rule there. The two counters are weak definitions, so a test made of several
 * objects (the formats tests and fmt_testutil.c) shares one pair. The counters are updated
 * atomically: the capture tests check from worker threads.
 */
#ifndef KCAP_TESTKIT_H
#define KCAP_TESTKIT_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- checks ---- */
__attribute__((weak)) int tk_checks;   /* checks evaluated */
__attribute__((weak)) int tk_failures; /* checks that failed */

/* TK_CHECK(cond, fmt, ...): counts; on failure prints "FAIL file:line: cond: message". */
#define TK_CHECK(cond, ...)                                                                  \
    do {                                                                                     \
        if (!tk_count(!!(cond))) {                                                           \
            flockfile(stdout); /* one line per failure, also from worker threads */          \
            tk_fail_at(__FILE__, __LINE__, #cond);                                           \
            printf(__VA_ARGS__);                                                             \
            printf("\n");                                                                    \
            fflush(stdout);                                                                  \
            funlockfile(stdout);                                                             \
        }                                                                                    \
    } while (0)
/* A kcap call returned rc with its kcap_error err: 0 expected, the message printed if not. */
#define TK_CHECK_OK(rc, err) TK_CHECK((rc) == 0, "rc=%d %s", (int)(rc), (err).msg)

/* Counts one check and returns ok: for tests that print their own PASS / FAIL line per case
 * (the kernel tests), and the core of TK_CHECK. */
static inline int tk_count(int ok)
{
    __atomic_add_fetch(&tk_checks, 1, __ATOMIC_RELAXED);
    if (!ok)
        __atomic_add_fetch(&tk_failures, 1, __ATOMIC_RELAXED);
    return ok;
}

static inline void tk_fail_at(const char *file, int line, const char *cond)
{
    printf("FAIL %s:%d: %s: ", file, line, cond);
}

/* The closing line of a test ("OK name: N checks" / "FAIL name: F of N checks failed") and
 * its exit status. */
static inline int tk_summary(const char *name)
{
    if (tk_failures)
        printf("FAIL %s: %d of %d checks failed\n", name, tk_failures, tk_checks);
    else
        printf("OK %s: %d checks\n", name, tk_checks);
    return tk_failures ? 1 : 0;
}

/* ---- files ---- */
/* The whole of file `path` in malloc'd memory (NUL-terminated past its *n bytes), or NULL
 * when it cannot be opened or read whole. */
static inline void *tk_slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *b = NULL;
    long len = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (len >= 0 && fseek(f, 0, SEEK_SET) == 0 && (b = (char *)malloc((size_t)len + 1))) {
        *n = fread(b, 1, (size_t)len, f);
        b[*n] = 0;
        if (*n != (size_t)len) {
            free(b);
            b = NULL;
        }
    }
    fclose(f);
    return b;
}

/* ---- the generator: xorshift64* (Vigna), a seed is its state (never 0) ---- */
typedef uint64_t tk_rng;
#define TK_RNG_DEFAULT_SEED 88172645463325252ull /* Marsaglia's example state */
#define TK_RNG_MULT 0x2545F4914F6CDD1Dull

static inline uint64_t tk_next(tk_rng *s)
{
    if (!*s)
        *s = TK_RNG_DEFAULT_SEED; /* state 0 is a fixed point */
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * TK_RNG_MULT;
}
/* A state from a small seed (0, 1, 2, ...): neighbouring seeds start far apart (a Weyl step),
 * not at states that share most of their bits (the first draws would be alike). */
static inline tk_rng tk_seed(uint64_t seed) { return seed * 0x9E3779B97F4A7C15ull + 1; }
static inline int tk_int(tk_rng *s, int n) { return (int)(tk_next(s) % (uint64_t)n); } /* [0, n) */
static inline int64_t tk_range(tk_rng *s, int64_t lo, int64_t hi) /* [lo, hi] */
{
    return lo + (int64_t)(tk_next(s) % (uint64_t)(hi - lo + 1));
}
static inline double tk_unit(tk_rng *s) { return (double)(tk_next(s) >> 11) * 0x1p-53; } /* [0, 1) */
/* uniform in [-1, 1) with |v| >= min_abs (so a product of two is never 0) */
static inline double tk_nonzero(tk_rng *s, double min_abs)
{
    for (;;) {
        const double v = tk_unit(s) * 2.0 - 1.0;
        if (fabs(v) >= min_abs)
            return v;
    }
}
/* perm[0..n) = 0..n-1 in a random order (Fisher-Yates, from the top) */
static inline void tk_shuffle(tk_rng *s, int64_t *perm, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        perm[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        const int64_t j = (int64_t)(tk_next(s) % (uint64_t)(i + 1)), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}

/* The plain xorshift64 step (13, 7, 17): kept only for fuzz_reseal, whose seed (-s) must
 * replay the mutations it always made; every other stream is tk_next's. */
static inline uint64_t tk_next_xs(tk_rng *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* ---- 16-bit floats ---- */
#define TK_BF16_NAN 0x7fc1u /* quiet NaN poison patterns (payload 1: not what a kernel makes) */
#define TK_F16_NAN 0x7e01u
#define TK_BF16_INF 0x7f80u
#define TK_F16_INF 0x7c00u
#define TK_SIGN16 0x8000u

/* float -> bf16, round to nearest even (NaN stays NaN) */
static inline uint16_t tk_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}
/* float -> bf16 by truncation: exact for values already of bf16 precision */
static inline uint16_t tk_bf16_trunc(double v)
{
    const float f = (float)v;
    uint32_t x;
    memcpy(&x, &f, 4);
    return (uint16_t)(x >> 16);
}
/* |v| < 2 -> a normal IEEE half by truncating the mantissa (0 below the normal range): the
 * test inputs only need to be exact values of the dtype, which they are by construction */
static inline uint16_t tk_f16_trunc(double v)
{
    const int s = v < 0;
    const double a = fabs(v);
    if (a < 0x1p-14)
        return (uint16_t)(s << 15);
    int e;
    const double fr = frexp(a, &e); /* a = fr * 2^e, fr in [0.5, 1) */
    const int m = (int)((fr * 2.0 - 1.0) * 1024.0);
    return (uint16_t)((s << 15) | ((e - 1 + 15) << 10) | m);
}
static inline uint16_t tk_enc_trunc(double v, int fp16) { return fp16 ? tk_f16_trunc(v) : tk_bf16_trunc(v); }

/* bf16 / IEEE half bits -> double, exact (NaN, Inf and subnormals included) */
static inline double tk_dec(uint16_t h, int fp16)
{
    if (!fp16) {
        const uint32_t x = (uint32_t)h << 16;
        float f;
        memcpy(&f, &x, 4);
        return f;
    }
    const int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    const double v = e == 31 ? (m ? NAN : INFINITY) : e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
    return s ? -v : v;
}

#endif /* KCAP_TESTKIT_H */
