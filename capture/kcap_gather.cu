/*
 * kcap_gather.cu — device kernels of libkcap.so, compiled to PTX by nvcc at build time and
 * embedded in the library (kcap_ptx.S), loaded with cuModuleLoadData: libkcap links no CUDA
 * library, and PTX JIT-compiles for whatever GPU the host runs on.
 *
 * kcap_gather_rows  (issue 4, synchronous path): out[i] = pool row idx[i]; so only the KV
 *                   rows a call references cross PCIe, never the whole pool.
 * kcap_stage_gate + kcap_stage (issue 8, zero-stall path): copy a call's tensors (inputs in
 *                   phase 0, outputs in phase 1) into a slot of a device staging ring, entirely
 *                   on the device, so they can run on the service stream and inside a CUDA
 *                   graph. The one-thread gate decides (armed? ring slot free? nnz =
 *                   kv_indptr[bs], read here, never by the host); the copy kernel's blocks read
 *                   that decision and leave at once when disarmed. The last block of phase 1
 *                   publishes the slot through a doorbell in mapped pinned host memory.
 */
#include <stdint.h>

#define KCAP_MAX_SEGS 10

struct kcap_seg {
    unsigned long long src; /* device address of the first row */
    long long dst_off;      /* byte offset of this segment in the slot */
    long long row_bytes;    /* bytes per row */
    long long nrows;        /* rows; -1: nnz rows (kv_indices / KV rows) */
    long long s0, s1, n1;   /* row r at src + (r / n1) * s0 + (r % n1) * s1 (bytes) */
    unsigned long long idx; /* non-zero: row r at src + idx[r] * s0 (KV rows) */
    int idx_size;           /* 4 or 8 */
    int pad;
    long long pool_rows;    /* range check of idx */
};

struct kcap_stage_args {
    unsigned long long ring;  /* struct kcap_ring_dev * */
    unsigned long long site;  /* struct kcap_site_dev * */
    unsigned long long unused0;
    unsigned long long bell;  /* mapped pinned host: unsigned long long[nslots] */
    unsigned long long indptr;/* int32 kv_indptr (device) */
    long long slot_bytes;
    long long fixed_bytes;    /* bytes that do not depend on nnz (header included) */
    long long per_nnz_bytes;  /* bytes per KV row + its index */
    int nslots;
    int bs;
    int phase;                /* 0 inputs (claims a slot), 1 outputs (publishes it) */
    int nsegs;
    int site_id;
    int force;                /* eager call the host already chose: ignore the armed budget */
    struct kcap_seg seg[KCAP_MAX_SEGS];
};

struct kcap_ring_dev {
    unsigned long long slots; /* slot storage, 0 until first armed (the host writes it) */
    unsigned int armed;   /* snapshots still wanted (the host writes it) */
    unsigned int head;    /* next slot to try */
    unsigned int drops_full, drops_big;
    unsigned long long tickets;
    unsigned int state[1]; /* [nslots]: 0 free, 1 owned by the device / host */
};

struct kcap_site_dev {
    unsigned int arrived, ready, done;
    int slot;
    long long nnz;
    unsigned long long ticket;
};

/* slot header, first 64 bytes of a slot */
struct kcap_slot_hdr {
    unsigned long long ticket;
    long long nnz;
    int site_id;
    int status; /* 1: an index was out of range (rows zero-filled) */
    long long pad[5];
};

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

__device__ static void kcap_copy_row(char *dst, const char *src, long long n)
{
    if (((uintptr_t)src | (uintptr_t)dst | (uintptr_t)n) % 16 == 0) {
        const uint4 *s = (const uint4 *)src;
        uint4 *d = (uint4 *)dst;
        for (long long i = threadIdx.x; i < n / 16; i += blockDim.x)
            d[i] = s[i];
    } else {
        for (long long i = threadIdx.x; i < n; i += blockDim.x)
            dst[i] = src[i];
    }
}

/* One thread: decide whether this launch captures (armed budget or the host's choice for an
 * eager call, a free ring slot, nnz = kv_indptr[bs] fits) and publish it in the site. Runs
 * before the phase-0 copy kernel; disarmed it costs one tiny kernel that reads two words. */
extern "C" __global__ void kcap_stage_gate(struct kcap_stage_args a)
{
    struct kcap_ring_dev *ring = (struct kcap_ring_dev *)a.ring;
    struct kcap_site_dev *site = (struct kcap_site_dev *)a.site;
    if (threadIdx.x != 0 || blockIdx.x != 0)
        return;
    int slot = -1;
    long long nnz = 0;
    unsigned long long slots = *(volatile unsigned long long *)&ring->slots;
    if (slots && (a.force || *(volatile unsigned int *)&ring->armed)) {
        nnz = ((const int *)a.indptr)[a.bs];
        long long need = a.fixed_bytes + nnz * a.per_nnz_bytes + 16;
        if (nnz < 0 || need > a.slot_bytes) {
            atomicAdd(&ring->drops_big, 1u);
        } else {
            unsigned int h = atomicAdd(&ring->head, 1u) % (unsigned)a.nslots;
            if (atomicCAS(&ring->state[h], 0u, 1u) != 0u) {
                atomicAdd(&ring->drops_full, 1u);
            } else {
                /* take one from the armed budget; lost the race: give the slot back */
                unsigned int left = a.force ? 1u : *(volatile unsigned int *)&ring->armed;
                while (left && !a.force) {
                    unsigned int prev = atomicCAS(&ring->armed, left, left - 1);
                    if (prev == left)
                        break;
                    left = prev;
                }
                if (!left) {
                    atomicExch(&ring->state[h], 0u);
                } else {
                    slot = (int)h;
                    site->ticket = atomicAdd(&ring->tickets, 1ull) + 1;
                    struct kcap_slot_hdr *hd =
                        (struct kcap_slot_hdr *)(slots + (unsigned long long)h * a.slot_bytes);
                    hd->ticket = site->ticket;
                    hd->nnz = nnz;
                    hd->site_id = a.site_id;
                    hd->status = 0;
                }
            }
        }
    }
    site->nnz = nnz;
    site->done = 0;
    site->slot = slot;
    __threadfence();
}

/* Copy kernel of a phase: every block reads the gate's decision and leaves at once when the
 * launch does not capture; otherwise blocks stride over the rows of every segment. */
extern "C" __global__ void kcap_stage(struct kcap_stage_args a)
{
    struct kcap_ring_dev *ring = (struct kcap_ring_dev *)a.ring;
    struct kcap_site_dev *site = (struct kcap_site_dev *)a.site;
    __shared__ int s_slot;
    __shared__ long long s_nnz;
    if (threadIdx.x == 0) {
        s_slot = *(volatile int *)&site->slot;
        s_nnz = *(volatile long long *)&site->nnz;
    }
    __syncthreads();
    int slot = s_slot;
    long long nnz = s_nnz;
    if (slot < 0)
        return;
    char *base = (char *)(*(volatile unsigned long long *)&ring->slots +
                          (unsigned long long)slot * a.slot_bytes);
    struct kcap_slot_hdr *hd = (struct kcap_slot_hdr *)base;
    for (int k = 0; k < a.nsegs; k++) {
        const struct kcap_seg *g = &a.seg[k];
        long long rows = g->nrows < 0 ? nnz : g->nrows;
        long long off = g->dst_off;
        if (g->nrows < 0 && !g->idx) { /* kv_indices: flat, after the fixed part */
            long long n = nnz * g->idx_size / 4; /* int32 words (idx_size is 4 or 8) */
            const unsigned int *s = (const unsigned int *)g->src;
            unsigned int *d = (unsigned int *)(base + a.fixed_bytes);
            for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
                 i += (long long)gridDim.x * blockDim.x)
                d[i] = s[i];
            continue;
        }
        if (g->nrows < 0) /* KV rows: after kv_indices, 16-byte aligned */
            off = a.fixed_bytes + ((nnz * g->idx_size + 15) & ~15ll);
        for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
            const char *src;
            if (g->idx) {
                long long ix = g->idx_size == 8 ? ((const long long *)g->idx)[r]
                                                : (long long)((const int *)g->idx)[r];
                if (ix < 0 || ix >= g->pool_rows) {
                    for (long long i = threadIdx.x; i < g->row_bytes; i += blockDim.x)
                        base[off + r * g->row_bytes + i] = 0;
                    if (threadIdx.x == 0)
                        hd->status = 1;
                    continue;
                }
                src = (const char *)g->src + ix * g->s0;
            } else {
                long long n1 = g->n1 > 0 ? g->n1 : 1;
                src = (const char *)g->src + (r / n1) * g->s0 + (r % n1) * g->s1;
            }
            kcap_copy_row(base + off + r * g->row_bytes, src, g->row_bytes);
        }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        unsigned int d = atomicAdd(&site->done, 1u);
        if (d == gridDim.x - 1) {
            site->done = 0; /* for the next phase */
            if (a.phase == 1) {
                __threadfence_system();
                ((volatile unsigned long long *)a.bell)[slot] = site->ticket;
                __threadfence_system();
                site->slot = -1;
            }
            __threadfence();
        }
    }
}

