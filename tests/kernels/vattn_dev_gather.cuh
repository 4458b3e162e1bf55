/*
 * vattn_dev_gather.cuh — `vattn_dev --gather`: what a page_size = 1 KV gather (rows of 576
 * bf16 = 1152 B through int64 kv_indices) can reach on this GPU, with no attention around it.
 * The roofline floor of the bench divides bytes by a contiguous copy's bandwidth; this says
 * how much of that a gather reaches at full occupancy (many warps, plain loads), and how much
 * the fast kernels' loader shape reaches: one 256-thread block per SM, S smem stages of R
 * rows filled by cp.async, the rows of tile j + D started into L2 (prefetch.global.L2) at tile
 * j, and a fixed spin per tile standing in for the tile's arithmetic. A dev measurement (issue
 * 16: is the memory-bound loop short of bytes in flight?); included by vattn_dev.cu.
 */
#ifndef VATTN_DEV_GATHER_CUH
#define VATTN_DEV_GATHER_CUH

constexpr int G_CHUNKS = 72; /* 16-byte chunks per 1152-byte cache row */

__device__ __forceinline__ uint32_t g_smem_u32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

__device__ __forceinline__ uint4 g_ldnc(const uint4 *p)
{
    uint4 v;
    asm volatile("ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}

/* Full occupancy: each warp gathers UNR rows at a time (lane: chunks lane, +32, +64). */
template <int UNR>
__global__ void gather_ld_kernel(const uint4 *pool, const int64_t *idx, int64_t nrows, unsigned *out)
{
    const int lane = threadIdx.x & 31;
    const int64_t w0 = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int64_t nw = ((int64_t)gridDim.x * blockDim.x) >> 5;
    unsigned acc = 0;
    for (int64_t r = w0 * UNR; r < nrows; r += nw * UNR) {
        uint4 v[UNR][3];
#pragma unroll
        for (int u = 0; u < UNR; u++) {
            const uint4 z = make_uint4(0, 0, 0, 0);
            v[u][0] = v[u][1] = v[u][2] = z;
            if (r + u < nrows) {
                const uint4 *row = pool + idx[r + u] * G_CHUNKS;
                v[u][0] = g_ldnc(row + lane);
                v[u][1] = g_ldnc(row + 32 + lane);
                if (lane < 8)
                    v[u][2] = g_ldnc(row + 64 + lane);
            }
        }
#pragma unroll
        for (int u = 0; u < UNR; u++)
#pragma unroll
            for (int k = 0; k < 3; k++)
                acc ^= v[u][k].x ^ v[u][k].y ^ v[u][k].z ^ v[u][k].w;
    }
    if (acc == 0x9e3779b9u) /* practically never: keeps the loads */
        out[0] = acc;
}

template <int N> __device__ __forceinline__ void g_wait_group() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

/* The fast kernels' loader shape: block = a contiguous range of rows_per_block keys (its
 * indices copied to smem first, as the slot ring has them tiles ahead), STAGES stages of ROWS
 * rows; at tile j: wait for tile j, barrier, issue tile j + STAGES - 1, prefetch tile j + pf
 * into L2 (pf = 0: none), read the stage lightly, spin `spin` clocks. */
template <int STAGES, int ROWS>
__global__ void __launch_bounds__(256, 1)
    gather_cp_kernel(const uint4 *pool, const int64_t *idx, int rows_per_block, int pf, int spin, unsigned *out)
{
    extern __shared__ __align__(16) unsigned char g_smem[];
    uint4 *stage_base = reinterpret_cast<uint4 *>(g_smem);
    int64_t *sidx = reinterpret_cast<int64_t *>(g_smem + (size_t)STAGES * ROWS * G_CHUNKS * 16);
    const int tid = threadIdx.x;
    const int64_t r0 = (int64_t)blockIdx.x * rows_per_block;
    for (int i = tid; i < rows_per_block; i += blockDim.x)
        sidx[i] = idx[r0 + i];
    __syncthreads();
    const int ntiles = rows_per_block / ROWS;
    auto issue = [&](int tile) {
        if (tile < ntiles) {
            const uint32_t dst = g_smem_u32(stage_base + (tile % STAGES) * ROWS * G_CHUNKS);
            for (int c = tid; c < ROWS * G_CHUNKS; c += 256) {
                const int row = c / G_CHUNKS, ch = c % G_CHUNKS;
                const uint4 *src = pool + sidx[tile * ROWS + row] * G_CHUNKS + ch;
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst + c * 16), "l"(src));
            }
        }
        asm volatile("cp.async.commit_group;\n");
    };
    auto prefetch = [&](int tile) {
        if (tile < ntiles && tid < ROWS) {
            const char *row = reinterpret_cast<const char *>(pool + sidx[tile * ROWS + tid] * G_CHUNKS);
#pragma unroll
            for (int ln = 0; ln < 9; ln++)
                asm volatile("prefetch.global.L2 [%0];\n" ::"l"(row + ln * 128));
        }
    };
    for (int s = 0; s < STAGES - 1; s++)
        issue(s);
    for (int t = STAGES - 1; pf && t < pf; t++)
        prefetch(t);
    unsigned acc = 0;
    for (int j = 0; j < ntiles; j++) {
        g_wait_group<STAGES - 2>();
        __syncthreads();
        issue(j + STAGES - 1);
        if (pf)
            prefetch(j + pf);
        const uint4 *st = stage_base + (j % STAGES) * ROWS * G_CHUNKS;
        for (int c = tid; c < ROWS * G_CHUNKS; c += 1024)
            acc ^= st[c].x;
        if (spin) {
            const long long t0 = clock64();
            while (clock64() - t0 < spin) {
            }
        }
    }
    if (acc == 0x9e3779b9u)
        out[0] = acc;
}

template <int STAGES, int ROWS>
static double gather_cp_ms(const uint4 *pool, const int64_t *idx, int64_t nrows, int blocks, int pf, int spin,
                           unsigned *out)
{
    const int per = (int)(nrows / blocks) / ROWS * ROWS;
    const size_t smem = (size_t)STAGES * ROWS * G_CHUNKS * 16 + (size_t)per * 8;
    CK(cudaFuncSetAttribute(gather_cp_kernel<STAGES, ROWS>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            (int)smem));
    const double ms = time_median(
        [&] { gather_cp_kernel<STAGES, ROWS><<<blocks, 256, smem>>>(pool, idx, per, pf, spin, out); }, 10);
    CK(cudaGetLastError());
    return ms * ((double)nrows / ((double)per * blocks)); /* scaled to all nrows rows */
}

static int gather_mode(void)
{
    int sms;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    int clk_khz;
    CK(cudaDeviceGetAttribute(&clk_khz, cudaDevAttrClockRate, 0));
    const double bw = measure_copy_bw();
    printf("ceiling: D2D copy %.0f GB/s (read+write); SM clock %.0f MHz\n", bw * 1e-9, clk_khz * 1e-3);
    const int64_t sizes[] = {65536, 131072}; /* rows: (8,8,4,8192)'s 8 x 8192, and twice that */
    const double cpu = clk_khz / 1000.0;     /* clocks per us */
    unsigned *out;
    CK(cudaMalloc(&out, 64));
    for (int64_t nrows : sizes) {
        uint4 *pool;
        int64_t *idx;
        CK(cudaMalloc(&pool, (size_t)nrows * G_CHUNKS * 16));
        CK(cudaMalloc(&idx, (size_t)nrows * 8));
        fill_bf16<<<1024, 256>>>((uint16_t *)pool, (size_t)nrows * G_CHUNKS * 8, 5);
        std::vector<int64_t> perm(nrows);
        for (int64_t i = 0; i < nrows; i++)
            perm[i] = i;
        srand(7);
        for (int64_t i = nrows - 1; i > 0; i--)
            std::swap(perm[i], perm[(int64_t)(((uint64_t)rand() << 31 | rand()) % (i + 1))]);
        CK(cudaMemcpy(idx, perm.data(), (size_t)nrows * 8, cudaMemcpyHostToDevice));
        const double mb = nrows * 1152.0 * 1e-6;
        for (int fr = 0; fr < 2; fr++) {
            g_flush_read = fr;
            const char *fname = fr ? "read-flush" : "write-flush";
            auto rep = [&](const char *what, double ms) {
                printf("gather %7lld rows (%.1f MB) random, %-11s %-50s %8.2f us %7.0f GB/s  %.2fx copy time\n",
                       (long long)nrows, mb, fname, what, ms * 1e3, nrows * 1152.0 / (ms * 1e-3) * 1e-9,
                       ms * 1e-3 / (nrows * 1152.0 / bw));
            };
            char name[96];
            for (int blk : {sms * 4, sms * 8}) {
                snprintf(name, sizeof name, "ld, %d blocks x 256, 2 rows/warp", blk);
                rep(name, time_median([&] { gather_ld_kernel<2><<<blk, 256>>>(pool, idx, nrows, out); }, 10));
            }
            for (int spin : {0, clk_khz / 2000, clk_khz / 1000, clk_khz / 1000 * 3 / 2}) {
                for (int pf : {0, 2}) {
                    snprintf(name, sizeof name, "cp 128 blk, 2 st x 32 rows, L2 pf +%d, spin %.2f us", pf, spin / cpu);
                    rep(name, gather_cp_ms<2, 32>(pool, idx, nrows, 128, pf, spin, out));
                }
                snprintf(name, sizeof name, "cp 128 blk, 4 st x 16 rows, spin %.2f us per 32", spin / cpu);
                rep(name, gather_cp_ms<4, 16>(pool, idx, nrows, 128, 0, spin / 2, out));
                snprintf(name, sizeof name, "cp 128 blk, 3 st x 32 rows (108 KB), spin %.2f us", spin / cpu);
                rep(name, gather_cp_ms<3, 32>(pool, idx, nrows, 128, 0, spin, out));
            }
        }
        g_flush_read = 0;
        cudaFree(pool);
        cudaFree(idx);
    }
    cudaFree(out);
    return 0;
}

#endif /* VATTN_DEV_GATHER_CUH */
