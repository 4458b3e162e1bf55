/*
 * verify_attn.h — the C ABI of the paged MLA "verify attention" kernel library.
 *
 * One operation in two calling conventions (vattn_verify, vattn_extend): attention of a
 * speculative-decoding verify step in MLA absorbed form
 * (DeepSeek-V3 / GLM-5 geometry: 576-wide keys = 512 latent + 64 rope, values = the first
 * 512 channels of the same cache row) over a page_size = 1 KV pool addressed through
 * kv_indptr / kv_indices, with an arbitrary per-request visibility mask among draft tokens.
 *
 * Two libraries implement this header:
 *   libverify_attn.so      — CUDA; every pointer is device memory, work is enqueued on `stream`.
 *   libverify_attn_cpu.so  — host memory, fp32 accumulation, deterministic; the reference.
 *
 * The ABI is a plain C struct passed by pointer so Python ctypes can build it and the
 * interposer (libkcap.so) can describe it field by field. `struct_size` versions the struct:
 * fields are only ever appended. Nothing here allocates, synchronises the host or exits:
 * vattn_verify is legal inside CUDA graph capture.
 */
#ifndef VERIFY_ATTN_H
#define VERIFY_ATTN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define VATTN_ABI_VERSION 1

#define VATTN_HEAD_DIM_QK 576 /* key / query width: 512 latent + 64 rope */
#define VATTN_HEAD_DIM_V 512  /* value / output width: the first 512 channels of a KV row */
#define VATTN_MAX_Q_LEN 64
#define VATTN_MAX_HEADS 128

#if defined(_WIN32)
#define VATTN_API __declspec(dllexport)
#else
#define VATTN_API __attribute__((visibility("default")))
#endif

/* Status codes. 0 is success; vattn_status_string() maps every code to one message.
 * Checks run in the order of kernels/vattn_check.c and the first failure is returned. */
typedef enum vattn_status {
    VATTN_OK = 0,
    VATTN_ERR_NULL_ARGS,       /* the args pointer itself is NULL */
    VATTN_ERR_STRUCT_SIZE,     /* args->struct_size smaller than this ABI's first version */
    VATTN_ERR_NULL_POINTER,    /* a required tensor pointer is NULL */
    VATTN_ERR_DTYPE,           /* dtype flag not one of vattn_dtype */
    VATTN_ERR_INDEX_TYPE,      /* index_type flag not one of vattn_index_type */
    VATTN_ERR_BATCH,           /* bs < 1 */
    VATTN_ERR_Q_LEN,           /* q_len outside 1..VATTN_MAX_Q_LEN */
    VATTN_ERR_HEADS,           /* num_heads outside 1..VATTN_MAX_HEADS */
    VATTN_ERR_NUM_SLOTS,       /* num_slots < 1 */
    VATTN_ERR_STRIDE,          /* a stride is too small (rows would overlap) or negative */
    VATTN_ERR_SCALE,           /* sm_scale not finite or <= 0 */
    VATTN_ERR_WORKSPACE,       /* workspace NULL or smaller than vattn_workspace_size() */
    VATTN_ERR_INDPTR,          /* kv_indptr not starting at 0, decreasing, or kv_len < q_len (CPU lib) */
    VATTN_ERR_INDEX_RANGE,     /* a kv_indices entry outside [0, num_slots) (CPU lib) */
    VATTN_ERR_ALIGNMENT,       /* a pointer or stride breaks the 16-byte alignment the kernel needs */
    VATTN_ERR_CUDA,            /* a CUDA launch failed; see vattn_last_cuda_error() */
    VATTN_ERR_NO_DEVICE,       /* no usable CUDA device (CUDA library) */
    VATTN_STATUS_COUNT
} vattn_status;

typedef enum vattn_dtype {
    VATTN_DTYPE_BF16 = 0, /* q, kv_cache and o are bfloat16 */
    VATTN_DTYPE_FP16 = 1  /* q, kv_cache and o are IEEE half */
} vattn_dtype;

typedef enum vattn_index_type {
    VATTN_INDEX_INT32 = 0,
    VATTN_INDEX_INT64 = 1 /* what SGLang passes */
} vattn_index_type;

/*
 * One verify call. Strides are in ELEMENTS (not bytes); the innermost stride of q, kv_cache
 * and o is 1. T = bs * q_len query tokens, token-major: token t belongs to request t / q_len
 * and is its draft token t % q_len.
 *
 * Request b owns slots kv_indices[kv_indptr[b] .. kv_indptr[b+1]); its kv_len_b = the range
 * length, of which the LAST q_len slots are its draft tokens (already written to the cache)
 * and the first prefix_len_b = kv_len_b - q_len are its prefix. Every prefix key is visible
 * to every query of the request; draft key j is visible to draft query i iff
 * visibility[b][i][j] != 0 (NULL visibility means causal: j <= i).
 *
 * o[t][h][:] = softmax_j(sm_scale * q[t][h] . k_j) @ v_j over the visible keys j;
 * lse[t][h] = natural log of sum_j exp(sm_scale * q . k_j). A query that sees no key gets
 * o = 0 and lse = -inf.
 *
 * Data that lives on the device cannot be checked by the CUDA library without a host sync:
 * there a request whose kv_len < q_len, or whose slot index is outside [0, num_slots), gets
 * NaN in all its outputs (never an out-of-bounds read). The CPU library checks the data and
 * returns VATTN_ERR_INDPTR / VATTN_ERR_INDEX_RANGE instead, writing nothing.
 */
typedef struct vattn_args {
    uint32_t struct_size; /* sizeof(vattn_args) of the caller's header */
    int32_t dtype;        /* vattn_dtype */
    int32_t index_type;   /* vattn_index_type of kv_indices */
    int32_t bs;           /* requests (CUDA library: at most 65535, a grid dimension;
                             more -> VATTN_ERR_CUDA with the launch error) */
    int32_t q_len;        /* draft tokens per request, 1..64, uniform across the batch */
    int32_t num_heads;    /* 1..128 */
    int64_t num_slots;    /* rows in the kv_cache pool: valid slots are 0..num_slots-1 */
    int64_t max_kv_len;   /* hint: upper bound of any kv_len_b, sizes the split-K grid and
                             workspace; 0 = unknown (the grid is sized for the GPU alone,
                             never from num_slots). Correctness never depends on it, only
                             speed. Negative -> VATTN_ERR_NUM_SLOTS. */
    float sm_scale;       /* softmax scale, e.g. 0.0625 for GLM-5; not derived from 576 */
    uint32_t reserved0;   /* must be zero (non-zero -> VATTN_ERR_STRUCT_SIZE: a field this
                             version does not know how to honour) */

    const void *q;        /* [T, H, 576] dtype */
    int64_t q_stride_t;   /* elements between tokens  (>= (H-1)*q_stride_h + 576) */
    int64_t q_stride_h;   /* elements between heads   (>= 576) */

    const void *kv_cache; /* [num_slots, 576] dtype, a view of the server's pool */
    int64_t kv_stride;    /* elements between slots (>= 576) */

    const int32_t *kv_indptr; /* [bs + 1], kv_indptr[0] == 0, non-decreasing */
    const void *kv_indices;   /* [kv_indptr[bs]] int32 or int64 slot ids */
    const uint8_t *visibility;/* [bs, q_len, q_len] uint8, or NULL for causal */

    void *o;              /* [T, H, 512] dtype, output */
    int64_t o_stride_t;   /* elements between tokens (>= (H-1)*o_stride_h + 512) */
    int64_t o_stride_h;   /* elements between heads  (>= 512) */
    float *lse;           /* [T, H] fp32 contiguous output, or NULL to skip */
} vattn_args;

/*
 * One extend-convention call: the same attention as vattn_verify, in SGLang's native
 * target-verify calling convention (extend_attention_fwd), so a Triton backend can swap its
 * call one for one. The draft tokens' keys are NOT in the pool: they are the rows of
 * k_extend (V = their first 512 channels), and kv_indptr / kv_indices cover the PREFIX only.
 *
 * Token t (T = bs * q_len, token-major) is draft token t % q_len of request t / q_len; q_len
 * is uniform, and qo_indptr[b] must equal b * q_len (qo_indptr[bs] = T). Request b sees the
 * prefix slots kv_indices[kv_indptr[b] .. kv_indptr[b+1]) (prefix_len_b = that length, 0
 * allowed), all visible to each of its queries, then its q_len draft keys k_extend rows
 * b*q_len .. b*q_len+q_len-1. Draft key j is visible to draft query i iff
 *   custom_mask[mask_indptr[b] + i * (prefix_len_b + q_len) + prefix_len_b + j] != 0
 * (SGLang's flattened per-request mask rows; only the draft columns are read, as SGLang's
 * skip_prefix_custom_mask=True does), or j <= i when custom_mask is NULL (causal).
 *
 * Numerics, determinism and invalid-data behaviour are vattn_verify's: the same keys in the
 * same order give bitwise the same o and lse. The CUDA library turns a request with a bad
 * kv_indptr / qo_indptr / slot index into NaN outputs; the CPU library returns
 * VATTN_ERR_INDPTR / VATTN_ERR_INDEX_RANGE and writes nothing.
 */
typedef struct vattn_extend_args {
    uint32_t struct_size; /* sizeof(vattn_extend_args) of the caller's header */
    int32_t dtype;        /* vattn_dtype of q, k_extend, kv_cache and o */
    int32_t index_type;   /* vattn_index_type of kv_indices */
    int32_t bs;           /* requests */
    int32_t q_len;        /* draft tokens per request, 1..64, uniform */
    int32_t num_heads;    /* 1..128 */
    int64_t num_slots;    /* rows in the kv_cache pool */
    int64_t max_kv_len;   /* hint: upper bound of prefix_len_b + q_len; 0 = unknown */
    float sm_scale;       /* softmax scale */
    uint32_t reserved0;   /* must be zero */

    const void *q;        /* [T, H, 576] dtype */
    int64_t q_stride_t;   /* elements between tokens */
    int64_t q_stride_h;   /* elements between heads (>= 576) */

    const void *k_extend; /* [T, 576] dtype: the draft tokens' cache rows (K; V = first 512) */
    int64_t k_extend_stride; /* elements between k_extend rows (>= 576) */

    const void *kv_cache; /* [num_slots, 576] dtype: the pool, prefix rows only are read */
    int64_t kv_stride;    /* elements between slots (>= 576) */

    const int32_t *qo_indptr;   /* [bs + 1]: b * q_len */
    const int32_t *kv_indptr;   /* [bs + 1]: prefix ranges, kv_indptr[0] == 0, non-decreasing */
    const void *kv_indices;     /* [kv_indptr[bs]] int32 or int64 prefix slot ids */
    const uint8_t *custom_mask; /* flattened bool/uint8 mask rows, or NULL = causal */
    const int64_t *mask_indptr; /* [bs + 1] start of each request's mask rows (with custom_mask) */

    void *o;              /* [T, H, 512] dtype, output */
    int64_t o_stride_t;
    int64_t o_stride_h;
    float *lse;           /* [T, H] fp32 contiguous, or NULL */
} vattn_extend_args;

/* VATTN_ABI_VERSION of the library actually loaded. */
VATTN_API int vattn_abi_version(void);

/* "cuda" or "cpu": which memory the library's pointers live in. */
VATTN_API const char *vattn_backend(void);

/* A static message for a status code (never NULL; unknown codes get a generic message). */
VATTN_API const char *vattn_status_string(int status);

/*
 * Bytes of workspace vattn_verify needs for these sizes (reads bs, q_len, num_heads,
 * num_slots, max_kv_len only). 0 is a valid answer. Returns (size_t)-1 if those fields
 * are invalid. The CPU library needs one too (host memory: its fp32 accumulators, at most
 * ~36 MB for q_len 64 x 128 heads). A non-empty workspace must be 16-byte aligned
 * (VATTN_ERR_ALIGNMENT otherwise); malloc / cudaMalloc pointers are.
 */
VATTN_API size_t vattn_workspace_size(const vattn_args *args);

/*
 * Run the verify attention. `workspace` must hold vattn_workspace_size(args) bytes
 * (NULL allowed when that is 0), in the library's memory space. `stream` is a cudaStream_t
 * (NULL = legacy default stream) for the CUDA library and ignored by the CPU library.
 * Every argument is checked before any work is enqueued; on error nothing is written.
 */
VATTN_API int vattn_verify(const vattn_args *args, void *workspace, size_t workspace_bytes,
                           void *stream);

/*
 * The library's plain reference implementation, same contract as vattn_verify: in the CUDA
 * library a simple fp32 kernel (one thread block per (token, head), easy to trust), in the
 * CPU library the same function as vattn_verify. Replay's `--ref gpu` calls this.
 */
VATTN_API int vattn_verify_reference(const vattn_args *args, void *workspace,
                                     size_t workspace_bytes, void *stream);

/* The extend convention (vattn_extend_args above): workspace size ((size_t)-1 when the
 * sizes are invalid), the call, and the library's plain reference with the same contract. */
VATTN_API size_t vattn_extend_workspace_size(const vattn_extend_args *args);
VATTN_API int vattn_extend(const vattn_extend_args *args, void *workspace,
                           size_t workspace_bytes, void *stream);
VATTN_API int vattn_extend_reference(const vattn_extend_args *args, void *workspace,
                                     size_t workspace_bytes, void *stream);

/* CUDA library: message of the last CUDA error seen by this thread ("" if none). */
VATTN_API const char *vattn_last_cuda_error(void);

#ifdef __cplusplus
}
#endif

#endif /* VERIFY_ATTN_H */
