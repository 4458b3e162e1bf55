/*
 * vattn_dev_mma.cuh — `vattn_dev --mma-rate`: how many warps of a scheduler, and how many
 * independent accumulator chains per warp, mma.sync m16n8k16 bf16 needs to reach this GPU's
 * tensor peak. The fast kernels run 2 warps per scheduler (256 threads x 255 registers fill the
 * register file), so a kernel design has to know what one warp, or two, can get out of the
 * tensor pipe (measured for v7's ping-pong and S-chain experiments: docs/PERF.md, issue 16,
 * twenty-second session; on the H100 one warp with 4 chains reaches 83 % of the best cell, two
 * warps 94 %). One block per SM (its dynamic shared memory leaves no room for a second), 128 x W
 * threads = W warps per scheduler, C chains per warp; per cell: TFLOP/s over the whole GPU and
 * the median over warps of clock64 cycles per MMA issued by one warp (mma_rate_kernel in
 * vattn_dev.cu, whose CH = 8 instance also measures the bench's ceiling). A dev measurement;
 * included by vattn_dev.cu.
 */
#ifndef VATTN_DEV_MMA_CUH
#define VATTN_DEV_MMA_CUH

template <int CH> static void mma_rate_cell(int sms, int wps, double *tflops, double *cyc)
{
    const int iters = 2048, threads = 128 * wps, smem = 160 * 1024; /* > half an SM: one block per SM */
    CK(cudaFuncSetAttribute(mma_rate_kernel<CH>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    float *out;
    long long *cycles;
    const int nwarps = sms * threads / 32;
    CK(cudaMalloc(&out, 4096 * sizeof(float)));
    CK(cudaMalloc(&cycles, nwarps * sizeof(long long)));
    const double ms = time_median([&] { mma_rate_kernel<CH><<<sms, threads, smem>>>(out, cycles, iters, 2654435761u); }, 7);
    CK(cudaGetLastError());
    std::vector<long long> c(nwarps);
    CK(cudaMemcpy(c.data(), cycles, nwarps * sizeof(long long), cudaMemcpyDeviceToHost));
    std::sort(c.begin(), c.end());
    *tflops = (double)nwarps * iters * CH * (2.0 * 16 * 8 * 16) / (ms * 1e-3) * 1e-12;
    *cyc = (double)c[nwarps / 2] / ((double)iters * CH);
    cudaFree(out);
    cudaFree(cycles);
}

static int mma_rate_mode(void)
{
    int sms;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("mma.sync m16n8k16 bf16 rate on %s (%d SMs): one block per SM of 128 x W threads (W warps per "
           "scheduler), C independent accumulator chains per warp\n",
           prop.name, sms);
    printf("| W warps per scheduler | C chains | TFLOP/s | cycles per MMA per warp | cycles per MMA per scheduler |\n");
    printf("|---|---|---|---|---|\n");
    const int ws[] = {1, 2, 4, 8};
    for (int w : ws) {
        double t[4], cy[4];
        mma_rate_cell<1>(sms, w, &t[0], &cy[0]);
        mma_rate_cell<2>(sms, w, &t[1], &cy[1]);
        mma_rate_cell<4>(sms, w, &t[2], &cy[2]);
        mma_rate_cell<8>(sms, w, &t[3], &cy[3]);
        for (int k = 0; k < 4; k++)
            printf("| %d | %d | %.1f | %.1f | %.2f |\n", w, 1 << k, t[k], cy[k], cy[k] / w);
    }
    return 0;
}

#endif /* VATTN_DEV_MMA_CUH */
