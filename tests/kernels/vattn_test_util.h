/*
 * vattn_test_util.h — small helpers shared by the kernel tests (test_verify_cpu.c and, through
 * vattn_gpu_common.h, the GPU test): the element widths, the NaN poison patterns, one
 * deterministic xorshift64* generator and an exact bf16/fp16 decoder written independently of
 * the libraries. Header-only, static; a test seeds g_rng before it draws.
 */
#ifndef VATTN_TEST_UTIL_H
#define VATTN_TEST_UTIL_H

#include "verify_attn.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#define QK VATTN_HEAD_DIM_QK
#define DV VATTN_HEAD_DIM_V
#define POISON_BF16 0x7fc1u
#define POISON_F16 0x7e01u

static uint64_t g_rng = 88172645463325252ull;
static inline uint64_t rnd(void)
{
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return g_rng * 0x2545F4914F6CDD1Dull;
}
static inline int rnd_int(int n) { return (int)(rnd() % (uint64_t)n); }

/* bf16 / IEEE half bits -> double, exact (NaN, Inf and subnormals included) */
static inline double dec(uint16_t h, int fp16)
{
    if (!fp16) {
        uint32_t x = (uint32_t)h << 16;
        float f;
        memcpy(&f, &x, 4);
        return f;
    }
    int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v = e == 31 ? (m ? NAN : INFINITY) : e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
    return s ? -v : v;
}

#endif
