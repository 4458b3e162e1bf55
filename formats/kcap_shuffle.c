/*
 * kcap_shuffle.c — byte shuffle exactly as HDF5's filter 2 lays it out (byte j of element i
 * goes to j*nelem + i), done by kcap's own threads so the declared pipeline
 * (shuffle, then zstd 32015) lets any HDF5 reader undo it. Specialised for 2-byte
 * elements (bf16/f16, the bulk of every snapshot).
 */
#include "kcap_fmt_internal.h"

#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* 2-byte elements with SSE2 (baseline on x86-64): 16 elements per step. Returns how many
 * elements were done; the scalar loop finishes the rest. */
static size_t shuffle2_simd(uint8_t *restrict dst, const uint8_t *restrict src, size_t nelem)
{
    size_t i = 0;
#ifdef __SSE2__
    const __m128i m = _mm_set1_epi16(0x00FF);
    for (; i + 16 <= nelem; i += 16) {
        __m128i x0 = _mm_loadu_si128((const __m128i *)(src + 2 * i));
        __m128i x1 = _mm_loadu_si128((const __m128i *)(src + 2 * i + 16));
        __m128i lo = _mm_packus_epi16(_mm_and_si128(x0, m), _mm_and_si128(x1, m));
        __m128i hi = _mm_packus_epi16(_mm_srli_epi16(x0, 8), _mm_srli_epi16(x1, 8));
        _mm_storeu_si128((__m128i *)(dst + i), lo);
        _mm_storeu_si128((__m128i *)(dst + nelem + i), hi);
    }
#else
    (void)dst, (void)src, (void)nelem;
#endif
    return i;
}

static size_t unshuffle2_simd(uint8_t *restrict dst, const uint8_t *restrict src, size_t nelem)
{
    size_t i = 0;
#ifdef __SSE2__
    for (; i + 16 <= nelem; i += 16) {
        __m128i lo = _mm_loadu_si128((const __m128i *)(src + i));
        __m128i hi = _mm_loadu_si128((const __m128i *)(src + nelem + i));
        _mm_storeu_si128((__m128i *)(dst + 2 * i), _mm_unpacklo_epi8(lo, hi));
        _mm_storeu_si128((__m128i *)(dst + 2 * i + 16), _mm_unpackhi_epi8(lo, hi));
    }
#else
    (void)dst, (void)src, (void)nelem;
#endif
    return i;
}

void kcap_shuffle(uint8_t *restrict dst, const uint8_t *restrict src, size_t nelem, size_t es)
{
    if (es <= 1) {
        memcpy(dst, src, nelem);
        return;
    }
    if (es == 2) {
        uint8_t *restrict lo = dst, *restrict hi = dst + nelem;
        for (size_t i = shuffle2_simd(dst, src, nelem); i < nelem; i++) {
            lo[i] = src[2 * i];
            hi[i] = src[2 * i + 1];
        }
        return;
    }
    if (es == 4) {
        uint8_t *restrict d0 = dst, *restrict d1 = dst + nelem, *restrict d2 = d1 + nelem,
                          *restrict d3 = d2 + nelem;
        for (size_t i = 0; i < nelem; i++) {
            d0[i] = src[4 * i];
            d1[i] = src[4 * i + 1];
            d2[i] = src[4 * i + 2];
            d3[i] = src[4 * i + 3];
        }
        return;
    }
    for (size_t j = 0; j < es; j++)
        for (size_t i = 0; i < nelem; i++)
            dst[j * nelem + i] = src[i * es + j];
}

void kcap_unshuffle(uint8_t *restrict dst, const uint8_t *restrict src, size_t nelem, size_t es)
{
    if (es <= 1) {
        memcpy(dst, src, nelem);
        return;
    }
    if (es == 2) {
        const uint8_t *restrict lo = src, *restrict hi = src + nelem;
        for (size_t i = unshuffle2_simd(dst, src, nelem); i < nelem; i++) {
            dst[2 * i] = lo[i];
            dst[2 * i + 1] = hi[i];
        }
        return;
    }
    if (es == 4) {
        const uint8_t *restrict s0 = src, *restrict s1 = src + nelem, *restrict s2 = s1 + nelem,
                                *restrict s3 = s2 + nelem;
        for (size_t i = 0; i < nelem; i++) {
            dst[4 * i] = s0[i];
            dst[4 * i + 1] = s1[i];
            dst[4 * i + 2] = s2[i];
            dst[4 * i + 3] = s3[i];
        }
        return;
    }
    for (size_t j = 0; j < es; j++)
        for (size_t i = 0; i < nelem; i++)
            dst[i * es + j] = src[j * nelem + i];
}
