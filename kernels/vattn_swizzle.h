/*
 * vattn_swizzle.h — where the fast kernels (v3, v7, v8) put a KV row's bytes in a shared-memory
 * stage, as plain integer arithmetic that compiles as host C and as CUDA device code. The
 * kernels address their stages only through these functions, and
 * tests/kernels/test_vattn_swizzle.c checks them on the CPU (`make test`).
 *
 * The layout: rows of 1152 bytes (576 bf16 / fp16 values, no padding), 16-byte chunk c of row r
 * stored at chunk c ^ (r & 7). Rows stay 128-byte aligned, so the cp.async copies of a row fill
 * whole 128-byte lines. (A padded 1168-byte pitch cost 1.8x the ideal shared-memory wavefronts:
 * v7 step 2, and v3 until the twentieth session, docs/PERF.md.) The 8 rows of every ldmatrix
 * 8x8 matrix still land on 8 distinct bank groups. XOR with r & 7 < 8 keeps a chunk inside its
 * aligned group of 8 (one 128-byte line). So a sweep whose chunk advances by a multiple of 8
 * needs one base address per lane plus immediate offsets, and a sweep that advances by 2 needs
 * 4 bases (VATTN_SWEEP_CHUNK).
 */
#ifndef VATTN_SWIZZLE_H
#define VATTN_SWIZZLE_H

#include <stdint.h>

#ifdef __CUDACC__
#define VATTN_SWZ_FN static __host__ __device__ __forceinline__
#else
#define VATTN_SWZ_FN static inline
#endif

enum {
    VATTN_SWZ_ROW_BYTES = 1152, /* one KV row: 576 values of 2 bytes */
    VATTN_SWZ_CHUNKS = 72       /* 16-byte chunks per row */
};

/* The stored position of 16-byte chunk `chunk` of row `row`. */
VATTN_SWZ_FN int vattn_swz_chunk(int row, int chunk)
{
    return chunk ^ (row & 7);
}

/* Byte offset of 16-byte chunk `chunk` of row `row` in a stage. */
VATTN_SWZ_FN uint32_t vattn_swz(int row, int chunk)
{
    return (uint32_t)(row * VATTN_SWZ_ROW_BYTES + (vattn_swz_chunk(row, chunk) << 4));
}

/* A sweep over chunks c0 + 2 s (s = 0, 1, ...) of rows with r & 7 = r7, where c0 = 8 a + b
 * (b = 0 or 1): with q = s & 3, the stored chunk is (c0 + 2 s) ^ r7 = 8 (a + (s >> 2)) +
 * (b ^ (r7 & 1)) + 2 (q ^ (r7 >> 1)). So step s reads the chunk returned here for q = s & 3,
 * plus 8 (s >> 2): four bases per lane (vattn_sweep_bases), then immediate offsets. A macro, not
 * a function: inlined as a function it changed nvcc's PTX of v7 for sm_90 (the same arithmetic,
 * other instruction order), and the kernels' machine code is kept as measured. */
#define VATTN_SWEEP_CHUNK(a, b, r7, q) (8 * (a) + ((b) ^ ((r7) & 1)) + 2 * ((q) ^ ((r7) >> 1)))

/* v3's S product: k-quarter kq takes the k16 steps kq + 4 ks (ks = 0..8). The lane's half h of a
 * step (chunk 2 (kq + 4 ks) + h) is stored at the chunk returned here plus 8 ks, because
 * 2 kq + h < 8. A contiguous quarter (steps 9 kq + ks) starts at chunk 18 kq + h, where the XOR
 * has no fixed stride; hence the interleaving. */
VATTN_SWZ_FN int vattn_v3_kchunk(int kq, int h, int r7)
{
    return (2 * kq + h) ^ r7;
}

#endif /* VATTN_SWIZZLE_H */
