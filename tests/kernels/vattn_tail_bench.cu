/*
 * vattn_tail_bench.cu — the split combine's two mechanisms, measured alone on the device:
 *   launch: production's (the fast kernel writes its partials and ends; vattn_combine_kernel
 *           is a second launch, with programmatic dependent launch, that merges them),
 *   coop:   a cooperative tail (the blocks that wrote the partials meet at a grid barrier and
 *           merge them themselves: one launch per call, no combine kernel),
 *   none:   the partials written and nothing merged (what both are measured against).
 * Issue 16 names "one launch per call" as a latency step, and the seventeenth session named the
 * cooperative tail as the next one (docs/PERF.md). The fast kernels hold one block per SM and a
 * one-wave plan's grid is co-resident, so a grid barrier is legal there; whether it is cheaper
 * than the kernel boundary is the question, asked here before the fast kernels change. Each
 * row is a serving shape's own plan (kernels/vattn_plan.h: grid, splits, rows per block, the
 * workspace layout of vattn_common.cuh's epilogue), the blocks made one per SM by their shared
 * memory as the fast kernels are by their registers; the merge is the production combine's
 * own (vattn_combine_row<0, 1>, two rows at a time per block), so the two outputs must be
 * bitwise equal, which the run checks. No KV tiles: times are the write + merge tail alone.
 *
 *   vattn_tail_bench     one table; µs per call inside a CUDA graph of 64 back-to-back calls
 *                        (L2 warm), median of 15 replays; exit 1 if the two merges differ.
 *                        `make` builds it; run by hand on the device (~10 s; docs/PERF.md,
 *                        issue 16 eighteenth session, says how and what it predicts).
 */
#include <cooperative_groups.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vattn_combine.cuh"
#include "vattn_plan.h"

namespace cg = cooperative_groups;

namespace {

constexpr int TAIL_SMEM = 120 * 1024; /* > half an SM's shared memory: one block per SM */
constexpr int NCALL = 64, NREP = 15;

__device__ __forceinline__ float tail_val(uint64_t i)
{
    i = (i ^ (i >> 31)) * 0x9E3779B97F4A7C15ull;
    i ^= i >> 29;
    return (float)(int32_t)(i >> 32) * (1.0f / 2147483648.0f); /* (-1, 1) */
}

/* The block's partial rows as vattn_common.cuh's epilogue lays them out: O [pbase + row][DV],
 * (m in log2 units, l) [pbase + row]. */
__device__ void tail_write_partials(const VattnParams &p, int bm)
{
    const int mc = blockIdx.x, sp = blockIdx.y, b = blockIdx.z;
    const int64_t pbase = ((int64_t)b * p.nsplit + sp) * p.mpad + (int64_t)mc * bm;
    for (int i = threadIdx.x; i < bm * DV / 4; i += blockDim.x) {
        const int64_t e = (pbase + i / (DV / 4)) * DV + (i % (DV / 4)) * 4;
        *reinterpret_cast<float4 *>(p.ws_o + e) =
            make_float4(tail_val(e), tail_val(e + 1), tail_val(e + 2), tail_val(e + 3));
    }
    for (int r = threadIdx.x; r < bm; r += blockDim.x)
        p.ws_ml[pbase + r] = make_float2(4.0f * tail_val(~(uint64_t)(pbase + r)),
                                         1.0f + 8.0f * fabsf(tail_val(pbase + r)));
}

/* COOP = 0: write the partials and end (the combine kernel follows, or nothing);
 * COOP = 1: write them, meet at the grid barrier, merge two rows at a time per block. */
template <int COOP> __global__ void __launch_bounds__(NTHREADS, 1) tail_kernel(VattnParams p, int bm)
{
    extern __shared__ float4 occupancy_only[]; /* one block per SM, as the fast kernels */
    vattn_pdl_wait();
    tail_write_partials(p, bm);
    if (!COOP) {
        vattn_pdl_trigger();
        return;
    }
    __shared__ float w[2][COMBINE_MAX_SPLITS], wl[2][COMBINE_MAX_SPLITS];
    __shared__ float red_m[2][4];
    __shared__ int red_bad[2][4];
    __threadfence();
    cg::this_grid().sync();
    vattn_pdl_trigger();
    const int64_t nb = (int64_t)gridDim.x * gridDim.y * gridDim.z;
    const int64_t lin = ((int64_t)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
    const int64_t rows = (int64_t)p.M * p.bs;
    /* each half of the block is a G = 1 combine block (the production merge, kernels/vattn_combine.cuh) */
    const int half = threadIdx.x >> 7;
    for (int64_t r0 = lin * 2; r0 < rows; r0 += nb * 2) {
        const int64_t rr = r0 + half;
        const bool on = rr < rows;
        vattn_combine_row<0, 1>(p, on ? (int)(rr % p.M) : 0, on ? (int)(rr / p.M) : 0, threadIdx.x & 127, on, w[half],
                                wl[half], red_m[half], red_bad[half], nullptr);
    }
}

#define CK(x)                                                                                        \
    do {                                                                                             \
        cudaError_t e_ = (x);                                                                        \
        if (e_ != cudaSuccess) {                                                                     \
            fprintf(stderr, "vattn_tail_bench: %s: %s (line %d)\n", #x, cudaGetErrorString(e_), __LINE__); \
            exit(1);                                                                                 \
        }                                                                                            \
    } while (0)

enum { MODE_NONE, MODE_LAUNCH, MODE_COOP };

/* One call of a mode on stream st; coop_pdl: the cooperative launch also asks for PDL. */
cudaError_t tail_call(int mode, const VattnParams &p, int bm, dim3 grid, cudaStream_t st, int coop_pdl)
{
    cudaLaunchAttribute at[2];
    int na = 0;
    cudaLaunchConfig_t c = {};
    c.gridDim = grid;
    c.blockDim = dim3(NTHREADS);
    c.dynamicSmemBytes = TAIL_SMEM;
    c.stream = st;
    c.attrs = at;
    if (mode != MODE_COOP || coop_pdl) {
        at[na].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        at[na++].val.programmaticStreamSerializationAllowed = 1;
    }
    if (mode == MODE_COOP) {
        at[na].id = cudaLaunchAttributeCooperative;
        at[na++].val.cooperative = 1;
    }
    c.numAttrs = na;
    cudaError_t e = mode == MODE_COOP ? cudaLaunchKernelEx(&c, tail_kernel<1>, p, bm) : cudaLaunchKernelEx(&c, tail_kernel<0>, p, bm);
    if (e != cudaSuccess || mode != MODE_LAUNCH)
        return e;
    c.gridDim = dim3(p.M, p.bs);
    const bool wide = p.nsplit >= COMBINE_WIDE_SPLITS;
    c.blockDim = dim3(wide ? 512 : 128);
    c.dynamicSmemBytes = 0;
    c.numAttrs = 1;
    return wide ? cudaLaunchKernelEx(&c, vattn_combine_kernel<0, 4>, p) : cudaLaunchKernelEx(&c, vattn_combine_kernel<0, 1>, p);
}

int cmp_float(const void *a, const void *b)
{
    const float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* Median µs per call of NCALL back-to-back calls captured in one graph; -1 if the mode's
 * launches cannot be captured. */
float tail_time(int mode, const VattnParams &p, int bm, dim3 grid, cudaStream_t st, int coop_pdl)
{
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    cudaError_t le = cudaSuccess;
    for (int i = 0; i < NCALL && le == cudaSuccess; i++)
        le = tail_call(mode, p, bm, grid, st, coop_pdl);
    const cudaError_t ce = cudaStreamEndCapture(st, &g);
    if (le != cudaSuccess || ce != cudaSuccess) {
        fprintf(stderr, "  mode %d (coop_pdl %d) not captured: %s / %s\n", mode, coop_pdl, cudaGetErrorString(le),
                cudaGetErrorString(ce));
        cudaGetLastError();
        if (ce == cudaSuccess)
            cudaGraphDestroy(g);
        return -1.0f;
    }
    if (cudaGraphInstantiate(&ge, g, 0) != cudaSuccess) {
        fprintf(stderr, "  mode %d (coop_pdl %d) not instantiated\n", mode, coop_pdl);
        cudaGetLastError();
        cudaGraphDestroy(g);
        return -1.0f;
    }
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    float t[NREP];
    for (int r = -3; r < NREP; r++) {
        CK(cudaEventRecord(e0, st));
        CK(cudaGraphLaunch(ge, st));
        CK(cudaEventRecord(e1, st));
        CK(cudaEventSynchronize(e1));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (r >= 0)
            t[r] = ms * 1000.0f / NCALL;
    }
    qsort(t, NREP, sizeof t[0], cmp_float);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaGraphExecDestroy(ge);
    cudaGraphDestroy(g);
    return t[NREP / 2];
}

} /* namespace */

int main(void)
{
    static const int shapes[][4] = {/* bs, H, q_len, prefix: issue 16's serving set and (4,16,2,1024) */
                                    {1, 8, 2, 512},   {1, 16, 4, 1024}, {2, 16, 4, 1000}, {1, 16, 16, 4096},
                                    {4, 16, 8, 2048}, {16, 16, 4, 1024}, {1, 128, 4, 4096}, {8, 8, 4, 8192},
                                    {1, 16, 16, 32768}, {4, 16, 2, 1024}};
    int dev = 0, sms = 0;
    cudaDeviceProp prop;
    CK(cudaGetDevice(&dev));
    CK(cudaGetDeviceProperties(&prop, dev));
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    int coop_ok = 0;
    CK(cudaDeviceGetAttribute(&coop_ok, cudaDevAttrCooperativeLaunch, dev));
    CK(cudaFuncSetAttribute(tail_kernel<0>, cudaFuncAttributeMaxDynamicSharedMemorySize, TAIL_SMEM));
    CK(cudaFuncSetAttribute(tail_kernel<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, TAIL_SMEM));
    int per_sm = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, tail_kernel<1>, NTHREADS, TAIL_SMEM));
    printf("device %s, %d SMs, cooperative launch %s, %d tail block(s) per SM\n", prop.name, sms,
           coop_ok ? "yes" : "no", per_sm);
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    printf("| bs,H,q,prefix | plan: v, grid, splits | none us | launch us | coop us | coop+pdl us | launch - none | coop - none | bitwise |\n");
    printf("|---|---|---|---|---|---|---|---|---|\n");
    int fails = 0;
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        const int bs = shapes[k][0], H = shapes[k][1], q_len = shapes[k][2], prefix = shapes[k][3];
        const vattn_sizes sz = {bs, q_len, H, (int64_t)bs * (prefix + q_len), prefix + q_len};
        const vattn_plan_force none = {0, 0, -1, -1};
        const vattn_fast_plan pl = vattn_plan_for(&sz, sms, &none);
        const int bm = pl.variant == 7 ? VATTN_PLAN_ROWS7 : VATTN_PLAN_ROWS3;
        const dim3 grid(pl.mchunks, pl.nsplit, bs);
        const int64_t blocks = (int64_t)pl.mchunks * pl.nsplit * bs;
        printf("| %d,%d,%d,%d | v%d %dx%dx%d, %d x %d tiles |", bs, H, q_len, prefix, pl.variant, pl.mchunks,
               pl.nsplit, bs, pl.nsplit, pl.tiles_per_split);
        if (pl.nsplit == 1) {
            printf(" one split: no combine | | | | | | |\n");
            continue;
        }
        VattnParams p = {};
        p.bs = bs;
        p.q_len = q_len;
        p.H = H;
        p.M = q_len * H;
        p.mchunks = pl.mchunks;
        p.nsplit = pl.nsplit;
        p.tiles_per_split = pl.tiles_per_split;
        p.mpad = pl.mpad;
        const size_t on = (size_t)bs * q_len * H * DV, ln = (size_t)bs * q_len * H;
        void *ws;
        CK(cudaMalloc(&ws, pl.ws_bytes));
        CK(cudaMalloc((void **)&p.o, on * 2));
        CK(cudaMalloc((void **)&p.lse, ln * 4));
        p.o_st = (int64_t)H * DV;
        p.o_sh = DV;
        p.ws_o = (float *)ws;
        p.ws_ml = (float2 *)((char *)ws + (size_t)bs * pl.nsplit * pl.mpad * DV * sizeof(float));
        const bool coop = coop_ok && blocks <= (int64_t)per_sm * sms;
        /* correctness first: the cooperative merge against the combine kernel, bitwise */
        char verdict[32] = "n/a";
        if (coop) {
            uint16_t *o1 = (uint16_t *)malloc(on * 2), *o2 = (uint16_t *)malloc(on * 2);
            float *l1 = (float *)malloc(ln * 4), *l2 = (float *)malloc(ln * 4);
            CK(cudaMemset(p.o, 0xff, on * 2));
            CK(tail_call(MODE_LAUNCH, p, bm, grid, st, 0));
            CK(cudaStreamSynchronize(st));
            CK(cudaMemcpy(o1, p.o, on * 2, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(l1, p.lse, ln * 4, cudaMemcpyDeviceToHost));
            CK(cudaMemset(p.o, 0xff, on * 2));
            CK(cudaMemset(p.lse, 0xff, ln * 4));
            CK(tail_call(MODE_COOP, p, bm, grid, st, 0));
            CK(cudaStreamSynchronize(st));
            CK(cudaMemcpy(o2, p.o, on * 2, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(l2, p.lse, ln * 4, cudaMemcpyDeviceToHost));
            const bool same = !memcmp(o1, o2, on * 2) && !memcmp(l1, l2, ln * 4);
            /* G = 4 (>= 64 splits) sums in another order: equal only within rounding */
            snprintf(verdict, sizeof verdict, "%s", same ? "yes" : pl.nsplit >= COMBINE_WIDE_SPLITS ? "no (G=4)" : "NO");
            fails += !same && pl.nsplit < COMBINE_WIDE_SPLITS;
            free(o1), free(o2), free(l1), free(l2);
        }
        const float t_none = tail_time(MODE_NONE, p, bm, grid, st, 0);
        const float t_launch = tail_time(MODE_LAUNCH, p, bm, grid, st, 0);
        const float t_coop = coop ? tail_time(MODE_COOP, p, bm, grid, st, 0) : -1.0f;
        const float t_coop_pdl = coop ? tail_time(MODE_COOP, p, bm, grid, st, 1) : -1.0f;
        printf(" %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %s |\n", t_none, t_launch, t_coop, t_coop_pdl,
               t_launch - t_none, t_coop >= 0 ? t_coop - t_none : -1.0f, verdict);
        fflush(stdout);
        cudaFree(ws);
        cudaFree(p.o);
        cudaFree(p.lse);
    }
    printf("%s\n", fails ? "FAIL: the cooperative merge differs from the combine kernel" : "merge outputs: bitwise equal where compared");
    return fails ? 1 : 0;
}
