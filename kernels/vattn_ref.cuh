/*
 * vattn_ref.cuh — vattn_ref_kernel, the CUDA library's reference (vattn_verify_reference,
 * replay's `--ref gpu`): one block per (token, head), fp32 everywhere, keys walked in order
 * in chunks of 256 (one key per thread), fixed-order block reductions. Written to be easy to
 * trust, not fast: it checks the fast kernels on the device. Like the CPU library it skips
 * every key a query does not see (never reads its V), and like the fast kernels it
 * range-checks every slot of the request, visible or not (a bad one makes the request NaN).
 * Both conventions (vattn_verify_reference, vattn_extend_reference): keys and mask come from
 * the key / mask sources of vattn_common.cuh.
 */
#ifndef VATTN_REF_CUH
#define VATTN_REF_CUH

#include "vattn_common.cuh"

namespace {

constexpr int REF_THREADS = 256;

template <int FP16> __global__ void __launch_bounds__(REF_THREADS) vattn_ref_kernel(VattnParams p)
{
    __shared__ float qs[QK];
    __shared__ float ps[REF_THREADS];
    __shared__ const uint16_t *rows[REF_THREADS]; /* cache row of each key of the chunk, NULL = skipped */
    __shared__ float red[REF_THREADS];
    __shared__ int bad;
    const int h = blockIdx.x, t = blockIdx.y, tid = threadIdx.x;
    const int b = t / p.q_len, i = t % p.q_len;
    int64_t start, kv_len, prefix;
    const bool ok = vattn_request_range(p, b, &start, &kv_len, &prefix);
    const VattnMask mask = ok ? vattn_mask(p, b, prefix) : VattnMask{nullptr, 0};
    uint16_t *o = p.o + t * p.o_st + h * p.o_sh;
    if (tid == 0)
        bad = !ok;
    for (int c = tid; c < QK; c += REF_THREADS)
        qs[c] = vattn_ld<FP16>(p.q[t * p.q_st + h * p.q_sh + c]);
    __syncthreads();
    float m = -INFINITY, l = 0.0f, acc0 = 0.0f, acc1 = 0.0f;
    for (int64_t base = 0; ok && base < kv_len; base += REF_THREADS) {
        const int64_t j = base + tid;
        float s = -INFINITY;
        const uint16_t *k = nullptr;
        if (j < kv_len) {
            /* every slot of the request is range-checked, visible or not, as the fast kernel
             * loads them all; a draft key of vattn_extend has none (its row is in kext) */
            const bool draft = j >= prefix, ext_draft = p.ext && draft;
            const int64_t slot = ext_draft ? 0 : vattn_slot(p, start + j);
            if (!ext_draft && (slot < 0 || slot >= p.num_slots))
                bad = 1;
            else if (!draft || vattn_visible(mask.rows, mask.stride, i, j - prefix))
                k = ext_draft ? vattn_draft_row(p, b, j - prefix) : p.kv + slot * p.kv_stride;
            if (k) {
                float d = 0.0f;
                for (int c = 0; c < QK; c++)
                    d += qs[c] * vattn_ld<FP16>(k[c]);
                s = p.sm_scale * d;
            }
        }
        /* block max, fixed tree order */
        red[tid] = s;
        __syncthreads();
        for (int w = REF_THREADS / 2; w > 0; w >>= 1) {
            if (tid < w)
                red[tid] = fmaxf(red[tid], red[tid + w]);
            __syncthreads();
        }
        const float m_new = fmaxf(m, red[0]);
        const float m_use = m_new == -INFINITY ? 0.0f : m_new;
        __syncthreads();
        const float pj = k ? expf(s - m_use) : 0.0f;
        ps[tid] = pj;
        rows[tid] = k;
        red[tid] = pj;
        __syncthreads();
        for (int w = REF_THREADS / 2; w > 0; w >>= 1) {
            if (tid < w)
                red[tid] += red[tid + w];
            __syncthreads();
        }
        const float alpha = expf(m - m_use);
        l = l * alpha + red[0];
        acc0 *= alpha;
        acc1 *= alpha;
        m = m_new;
        const int n = kv_len - base < REF_THREADS ? (int)(kv_len - base) : REF_THREADS;
        for (int jj = 0; jj < n; jj++) {
            const uint16_t *v = rows[jj];
            if (!v)
                continue;
            acc0 += ps[jj] * vattn_ld<FP16>(v[tid]);
            acc1 += ps[jj] * vattn_ld<FP16>(v[tid + REF_THREADS]);
        }
        __syncthreads();
    }
    __syncthreads();
    const bool nan_out = bad != 0;
    const bool empty = l == 0.0f;
    const float inv = empty ? 0.0f : 1.0f / l;
    o[tid] = vattn_st<FP16>(nan_out ? NAN : acc0 * inv);
    o[tid + REF_THREADS] = vattn_st<FP16>(nan_out ? NAN : acc1 * inv);
    if (p.lse && tid == 0)
        p.lse[(int64_t)t * p.H + h] = nan_out ? NAN : empty ? -INFINITY : m + logf(l);
}

} /* namespace */

#endif /* VATTN_REF_CUH */
