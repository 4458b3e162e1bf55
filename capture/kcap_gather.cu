/*
 * kcap_gather.cu — device kernels of libkcap.so, compiled to PTX by nvcc at build time and
 * embedded in the library (kcap_ptx.S), loaded with cuModuleLoadData: libkcap links no CUDA
 * library, and PTX JIT-compiles for whatever GPU the host runs on.
 *
 * kcap_gather_rows  (synchronous path): out[i] = pool row idx[i]; so only the KV rows a call
 *                   references cross PCIe, never the whole pool.
 * kcap_stage_gate + kcap_stage (zero-stall path): copy a call's tensors (inputs in phase 0,
 *                   outputs in phase 1) into a region of the device staging ring, entirely on
 *                   the device, so they run on the service stream and inside CUDA graphs. The
 *                   one-thread gate decides (capture wanted? the counts of the layout, e.g.
 *                   nnz = kv_indptr[bs], read here, never by the host; kcap_stage_layout.h;
 *                   a region of exactly the snapshot's size placed by
 *                   kcap_ring_place under the ring's lock); the copy kernel's blocks read that
 *                   decision and leave at once when the call is not captured. The last block
 *                   of phase 1 publishes the region through a doorbell in mapped pinned host
 *                   memory, read by the host's drainer thread.
 * kcap_ring_ctl     the host's changes to the ring (its memory, the graph budget), made under
 *                   the same lock, so no gate ever sees half of a change.
 * kcap_shadow_cmp   shadow mode (kcap_shadow_cmp.cuh): production outputs against the
 *                   candidate's, on the call's stream, with replay's rules; the result goes
 *                   to mapped host memory and the gate runs (only divergent calls are
 *                   staged) in its one block, or, for a multi-block compare, in the
 *                   kcap_stage_both launch after it (kcap_cmp_join), which stages both
 *                   phases in one launch; kcap_shadow_poison fills the candidate's outputs
 *                   before it runs.
 */
#include <cuda_fp16.h>
#include <stdint.h>

#include "kcap_shadow_cmp.h"
#include "kcap_ring.h"
#include "kcap_stage_dev.h"

extern "C" __global__ void kcap_gather_rows(const char *pool, long long stride_bytes,
                                            long long row_bytes, const long long *idx,
                                            long long n, char *out)
{
    for (long long r = blockIdx.x; r < n; r += gridDim.x) {
        const char *src = pool + idx[r] * stride_bytes;
        char *dst = out + r * row_bytes;
        if (((uintptr_t)src | (uintptr_t)dst | (uintptr_t)row_bytes) % 16 == 0) {
            const uint4 *s = (const uint4 *)src;
            uint4 *d = (uint4 *)dst;
            for (long long i = threadIdx.x; i < row_bytes / 16; i += blockDim.x)
                d[i] = s[i];
        } else {
            for (long long i = threadIdx.x; i < row_bytes; i += blockDim.x)
                dst[i] = src[i];
        }
    }
}

__device__ static void kcap_lock(unsigned int *l)
{
    while (atomicCAS(l, 0u, 1u) != 0u)
        ;
    __threadfence();
}

__device__ static void kcap_unlock(unsigned int *l)
{
    __threadfence();
    atomicExch(l, 0u);
}

#define VOL(T, x) (*(volatile T *)&(x))

/* One thread: does this launch capture, and where? Disarmed (graph budget spent, not an
 * eager call) it reads two words and leaves without taking the lock. `wanted` 0: the call is
 * not staged (shadow mode: the compare found no divergence); a wanted call the ring or the
 * graph budget turns away is counted in a.lost when set (shadow mode's graph sites). Writes
 * the site (read by the staging kernel, which runs after this launch's end) and returns
 * whether the call is staged; the eager outcome is the caller's (kcap_gate_outcome). */
__device__ static int kcap_gate_decide(const struct kcap_stage_args &a, int wanted)
{
    struct kcap_ring_dev *ring = (struct kcap_ring_dev *)a.ring;
    struct kcap_site_dev *site = (struct kcap_site_dev *)a.site;
    int valid = 0;
    uint64_t start = 0, end = 0, ticket = 0;
    long long cnt[KCAP_NCOUNTS] = {0, 0};
    if (wanted &&
        (a.force || VOL(unsigned long long, ring->graph_taken) < VOL(unsigned long long, ring->graph_limit))) {
        kcap_lock(&ring->lock);
        unsigned long long base = VOL(unsigned long long, ring->base);
        if (!a.force && ring->graph_taken >= VOL(unsigned long long, ring->graph_limit)) {
            /* the budget went to another replay meanwhile */
        } else if (!base) {
            ring->drops_nomem++;
        } else {
            int bad = 0;
            for (int c = 0; c < a.ncounts; c++) {
                cnt[c] = a.count_size[c] == 8 ? *(const long long *)a.count_src[c]
                                              : (long long)*(const int *)a.count_src[c];
                bad |= cnt[c] < 0 || cnt[c] > (1ll << 40);
            }
            unsigned long long need = (unsigned long long)a.fixed_bytes + 16;
            for (int k = 0; k < a.nsegs && !bad; k++)
                if (a.seg[k].counter >= 0)
                    need += ((unsigned long long)cnt[a.seg[k].counter] *
                                 (unsigned long long)a.seg[k].row_bytes + 15) & ~15ull;
            uint64_t t = ring->tickets + 1, nh = 0;
            int r = bad ? KCAP_PLACE_BIG
                            : kcap_ring_place(ring->head, VOL(unsigned long long, ring->tail), ring->cap,
                                              need, t, VOL(unsigned long long, ring->tail_ticket),
                                              &start, &nh);
            if (r == KCAP_PLACE_BIG) {
                ring->drops_big++;
                if (need > ring->big_need)
                    ring->big_need = need;
            } else if (r == KCAP_PLACE_FULL) {
                ring->drops_full++;
            } else {
                ring->head = nh;
                ring->tickets = t;
                if (!a.force)
                    ring->graph_taken++;
                valid = 1;
                ticket = t;
                end = nh;
            }
        }
        kcap_unlock(&ring->lock);
    }
    if (wanted && !valid && a.lost) { /* a divergence the ring or budget turned away */
        VOL(unsigned long long, *(unsigned long long *)a.lost) += 1;
        __threadfence_system();
    }
    site->start = start;
    site->end = end;
    for (int c = 0; c < KCAP_NCOUNTS; c++)
        site->count[c] = cnt[c];
    site->ticket = ticket;
    site->done = 0;
    site->status = 0;
    site->gen = a.gen;
    site->valid = valid;
    return valid;
}

/* An eager call's outcome for the drainer (mapped host memory): its gen and whether it is
 * staged, one 8-byte store. The standalone gate fences it; the compare does not (the drainer
 * then waits for the compare's verdict too: kcap_eager_outcome). */
__device__ static void kcap_gate_outcome(const struct kcap_stage_args &a, int valid)
{
    if (a.outcome)
        VOL(unsigned long long, *(unsigned long long *)a.outcome) =
            ((unsigned long long)a.gen << 1) | (unsigned long long)valid;
}

extern "C" __global__ void kcap_stage_gate(struct kcap_stage_args a)
{
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        int valid = kcap_gate_decide(a, 1);
        if (a.outcome) {
            kcap_gate_outcome(a, valid);
            __threadfence_system();
        }
    }
}

/* Copy `total` 16-byte words of rows laid out back to back in dst; word i is word i % per of
 * row i / per, whose source is src_of(row). Four words in flight per thread. */
template <class Src>
__device__ static void kcap_copy_words(uint4 *dst, long long total, long long per, Src src_of)
{
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i0 = (long long)blockIdx.x * blockDim.x + threadIdx.x; i0 < total; i0 += 4 * stride) {
        uint4 v[4];
#pragma unroll
        for (int u = 0; u < 4; u++) {
            long long i = i0 + u * stride;
            if (i < total) {
                long long row = i / per;
                v[u] = ((const uint4 *)src_of(row))[i - row * per];
            }
        }
#pragma unroll
        for (int u = 0; u < 4; u++) {
            long long i = i0 + u * stride;
            if (i < total)
                dst[i] = v[u];
        }
    }
}

struct kcap_view_src {
    const char *src;
    long long n1, s0, s1;
    __device__ const char *operator()(long long r) const { return src + (r / n1) * s0 + (r % n1) * s1; }
};

/* KV rows by index; an index out of the pool reads row 0 of a zero page instead (flagged). */
struct kcap_idx_src {
    const char *src;
    const void *idx;
    int idx_size;
    long long s0, pool_rows;
    const char *zero;
    int *status;
    __device__ const char *operator()(long long r) const
    {
        long long ix = idx_size == 8 ? ((const long long *)idx)[r] : (long long)((const int *)idx)[r];
        if (ix < 0 || ix >= pool_rows) {
            *status = 1;
            return zero;
        }
        return src + ix * s0;
    }
};

__device__ static const uint4 kcap_zero_row[80] = {}; /* KCAP_ZERO_ROW_BYTES: ≥ any staged pool row */

/* The copy of a phase: every block reads the gate's decision and leaves at once when the
 * launch does not capture (returns 0); otherwise all threads stride over the words of every
 * segment, and with `tail` the last block to finish resets the phase's count and, in phase 1,
 * publishes the region (a phase run without its tail is followed by one with it). */
__device__ static int kcap_stage_run(const struct kcap_stage_args &a, int tail)
{
    struct kcap_ring_dev *ring = (struct kcap_ring_dev *)a.ring;
    struct kcap_site_dev *site = (struct kcap_site_dev *)a.site;
    __shared__ int s_valid;
    __shared__ long long s_cnt[KCAP_NCOUNTS];
    __shared__ unsigned long long s_start;
    if (threadIdx.x == 0) {
        s_valid = VOL(int, site->valid);
        for (int c = 0; c < KCAP_NCOUNTS; c++)
            s_cnt[c] = VOL(long long, site->count[c]);
        s_start = VOL(unsigned long long, site->start);
    }
    __syncthreads();
    if (!s_valid)
        return 0;
    char *base = (char *)(VOL(unsigned long long, ring->base) + s_start % VOL(unsigned long long, ring->cap));
    long long counted_off = a.fixed_bytes; /* the counted segments follow, in order */
    for (int k = 0; k < a.nsegs; k++) {
        const struct kcap_seg *g = &a.seg[k];
        long long rows = g->counter < 0 ? g->nrows : s_cnt[g->counter];
        long long off = g->dst_off;
        if (g->counter >= 0) {
            off = counted_off;
            counted_off += (rows * g->row_bytes + 15) & ~15ll;
        }
        if (rows <= 0)
            continue;
        char *dst = base + off;
        if (!g->idx && g->n1 <= 1 && g->s0 == g->row_bytes &&
            ((g->src | (unsigned long long)off | (unsigned long long)(rows * g->row_bytes)) % 4) == 0 &&
            g->row_bytes % 16) {
            /* a contiguous tensor of small rows (indices, masks): 4-byte words */
            long long n = rows * g->row_bytes / 4;
            const unsigned int *s = (const unsigned int *)g->src;
            unsigned int *d = (unsigned int *)dst;
            for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
                 i += (long long)gridDim.x * blockDim.x)
                d[i] = s[i];
            continue;
        }
        long long n1 = g->n1 > 0 ? g->n1 : 1;
        int aligned = ((g->src | (unsigned long long)g->row_bytes | (unsigned long long)g->s0 |
                        (unsigned long long)(g->idx ? 0 : g->s1) | (unsigned long long)off) % 16) == 0;
        if (aligned && g->idx) {
            kcap_idx_src f = {(const char *)g->src, (const void *)g->idx, g->idx_size, g->s0,
                              g->pool_rows, (const char *)kcap_zero_row, &site->status};
            kcap_copy_words((uint4 *)dst, rows * (g->row_bytes / 16), g->row_bytes / 16, f);
        } else if (aligned) {
            kcap_view_src f = {(const char *)g->src, n1, g->s0, g->s1};
            kcap_copy_words((uint4 *)dst, rows * (g->row_bytes / 16), g->row_bytes / 16, f);
        } else { /* odd sizes or strides (small tensors): bytes, spread over every thread */
            long long total = rows * g->row_bytes;
            for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;
                 i += (long long)gridDim.x * blockDim.x) {
                long long r = i / g->row_bytes, c = i - r * g->row_bytes;
                const char *src;
                if (g->idx) {
                    long long ix = g->idx_size == 8 ? ((const long long *)g->idx)[r]
                                                    : (long long)((const int *)g->idx)[r];
                    if (ix < 0 || ix >= g->pool_rows) {
                        dst[i] = 0;
                        site->status = 1;
                        continue;
                    }
                    src = (const char *)g->src + ix * g->s0;
                } else {
                    src = (const char *)g->src + (r / n1) * g->s0 + (r % n1) * g->s1;
                }
                dst[i] = src[c];
            }
        }
    }
    __syncthreads();
    if (tail && threadIdx.x == 0) {
        __threadfence();
        unsigned int d = atomicAdd(&site->done, 1u);
        if (d == gridDim.x - 1) {
            site->done = 0; /* for the next phase */
            if (a.phase == 1) {
                __threadfence();
                unsigned long long t = VOL(unsigned long long, site->ticket);
                struct kcap_bell *b = (struct kcap_bell *)a.bell + t % KCAP_RING_NREC;
                b->start = VOL(unsigned long long, site->start);
                b->end = VOL(unsigned long long, site->end);
                for (int c = 0; c < KCAP_NCOUNTS; c++)
                    b->count[c] = VOL(long long, site->count[c]);
                b->site_id = a.site_id;
                b->gen = a.gen;
                b->status = VOL(int, site->status);
                __threadfence_system();
                VOL(unsigned long long, b->ticket) = t;
                __threadfence_system();
                site->valid = 0;
            }
            __threadfence();
        }
    }
    return 1;
}

extern "C" __global__ void kcap_stage(struct kcap_stage_args a) { kcap_stage_run(a, 1); }

/* The host's changes to the ring, under its lock. op 0: graph_limit = v0. op 1: memory
 * base = v0, cap = v1 (the ring is empty: head = tail). op 2: take the memory away if no
 * region is in flight; out[0] = 1 when done. op 3: revoke the graph budget (graph_limit =
 * graph_taken: no replay takes another unit). out[1..2] = tickets, graph_taken afterwards. */
extern "C" __global__ void kcap_ring_ctl(unsigned long long ringp, int op, unsigned long long v0,
                                         unsigned long long v1, unsigned long long outp)
{
    struct kcap_ring_dev *ring = (struct kcap_ring_dev *)ringp;
    unsigned long long *out = (unsigned long long *)outp;
    if (threadIdx.x != 0 || blockIdx.x != 0)
        return;
    kcap_lock(&ring->lock);
    unsigned long long ok = 1;
    if (op == 0) {
        ring->graph_limit = v0;
    } else if (op == 1) {
        ring->cap = v1;
        ring->head = VOL(unsigned long long, ring->tail);
        ring->base = v0;
    } else if (op == 3) {
        ring->graph_limit = ring->graph_taken;
    } else if (op == 2) {
        ok = ring->tickets == VOL(unsigned long long, ring->tail_ticket);
        if (ok) {
            ring->base = 0;
            ring->cap = 0;
        }
    }
    out[0] = ok;
    out[1] = ring->tickets;
    out[2] = ring->graph_taken;
    kcap_unlock(&ring->lock);
}

/* ---- shadow mode: the compare kernel (its layouts and launch plan: kcap_shadow_cmp.h) ---- */
#include "kcap_shadow_cmp.cuh"
