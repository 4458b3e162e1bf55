/*
 * vattn_check.c — argument validation and the status-message table shared by the CPU and
 * CUDA verify-attention libraries.
 *
 * Both libraries compile this file in, so a call is rejected by both with the same status
 * code (the CUDA library additionally asks for 16-byte alignment). The checks run in a fixed
 * order and the first failure is returned; the order is part of the contract the tests pin:
 *   args NULL, struct_size / reserved0, NULL tensor pointers, dtype, index_type, bs, q_len,
 *   num_heads, num_slots / max_kv_len, strides (incl. overflow of the addressed range),
 *   sm_scale, alignment, workspace (size, then its 16-byte alignment).
 * vattn_extend's checks follow the same order (its extra tensors where their kind is checked).
 * The workspace size is the caller's input, not a call of vattn_workspace_size: the kernel
 * libraries pass their own, libkcap.so (which compiles this file in to reject exactly what
 * the library would) passes the loaded library's answer.
 * Nothing here dereferences a tensor pointer except the *_host_data checks (host memory only).
 */
#include "vattn_check.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>

static const char *const vattn_status_table[VATTN_STATUS_COUNT] = {
    [VATTN_OK] = "success",
    [VATTN_ERR_NULL_ARGS] = "the vattn_args pointer is NULL",
    [VATTN_ERR_STRUCT_SIZE] = "vattn_args.struct_size is smaller than ABI version 1's struct, or "
                              "reserved0 is not zero",
    [VATTN_ERR_NULL_POINTER] = "a required pointer (q, kv_cache, kv_indptr, kv_indices, o; "
                               "vattn_extend also k_extend, qo_indptr, and mask_indptr with "
                               "custom_mask) is NULL",
    [VATTN_ERR_DTYPE] = "dtype is not VATTN_DTYPE_BF16 or VATTN_DTYPE_FP16",
    [VATTN_ERR_INDEX_TYPE] = "index_type is not VATTN_INDEX_INT32 or VATTN_INDEX_INT64",
    [VATTN_ERR_BATCH] = "bs must be >= 1",
    [VATTN_ERR_Q_LEN] = "q_len must be in 1..64",
    [VATTN_ERR_HEADS] = "num_heads must be in 1..128",
    [VATTN_ERR_NUM_SLOTS] = "num_slots must be >= 1 (and max_kv_len >= 0)",
    [VATTN_ERR_STRIDE] = "a stride is negative, too small (rows would overlap) or addresses "
                         "beyond 2^62 elements",
    [VATTN_ERR_SCALE] = "sm_scale must be finite and > 0",
    [VATTN_ERR_WORKSPACE] = "workspace is NULL or smaller than vattn_workspace_size()",
    [VATTN_ERR_INDPTR] = "kv_indptr does not start at 0, decreases, or gives a request fewer "
                         "keys than q_len (vattn_extend: or qo_indptr[b] is not b * q_len, or "
                         "mask_indptr leaves a request fewer than q_len * kv_len mask entries)",
    [VATTN_ERR_INDEX_RANGE] = "a kv_indices entry is outside [0, num_slots)",
    [VATTN_ERR_ALIGNMENT] = "a pointer or stride is misaligned (every pointer to its element "
                            "size, the workspace to 16 bytes; on the CUDA path q, kv_cache, o "
                            "and their strides to 16 bytes)",
    [VATTN_ERR_CUDA] = "a CUDA call or kernel launch failed (see vattn_last_cuda_error())",
    [VATTN_ERR_NO_DEVICE] = "no usable CUDA device",
};

_Static_assert(sizeof(vattn_status_table) / sizeof(vattn_status_table[0]) == VATTN_STATUS_COUNT,
               "every vattn_status needs a message");

const char *vattn_status_message(int status)
{
    if (status < 0 || status >= VATTN_STATUS_COUNT || !vattn_status_table[status])
        return "unknown vattn status code";
    return vattn_status_table[status];
}

/* Version 1's structs end with `lse`; callers built against a later header pass more. */
#define VATTN_ARGS_V1_SIZE (offsetof(vattn_args, lse) + sizeof(float *))
#define VATTN_EXTEND_ARGS_V1_SIZE (offsetof(vattn_extend_args, lse) + sizeof(float *))

/* Tensor offsets are computed in int64 elements and then in bytes; capping every addressed
 * range at 2^62 elements keeps all of that arithmetic free of overflow. */
#define VATTN_MAX_EXTENT ((int64_t)1 << 62)

/* Highest element offset touched by a [n0, n1, width] view with strides s0, s1, or -1 when
 * it does not fit under VATTN_MAX_EXTENT. n0, n1 >= 1 and strides >= 0 here. */
static int64_t vattn_extent(int64_t n0, int64_t s0, int64_t n1, int64_t s1, int64_t width)
{
    int64_t a, b, e;
    if (__builtin_mul_overflow(n0 - 1, s0, &a) || __builtin_mul_overflow(n1 - 1, s1, &b) ||
        __builtin_add_overflow(a, b, &e) || __builtin_add_overflow(e, width, &e) ||
        e > VATTN_MAX_EXTENT)
        return -1;
    return e;
}

/* Row layout rule of the header: heads of one token must not overlap (stride_h >= width),
 * and tokens must not overlap (stride_t >= (H-1)*stride_h + width). */
static int vattn_check_view(int64_t T, int64_t H, int64_t stride_t, int64_t stride_h,
                            int64_t width)
{
    if (stride_t < 0 || stride_h < 0)
        return VATTN_ERR_STRIDE;
    if (stride_h < width)
        return VATTN_ERR_STRIDE;
    int64_t head_span = vattn_extent(1, 0, H, stride_h, width);
    if (head_span < 0 || stride_t < head_span)
        return VATTN_ERR_STRIDE;
    if (vattn_extent(T, stride_t, H, stride_h, width) < 0)
        return VATTN_ERR_STRIDE;
    return VATTN_OK;
}

/* The views both conventions share: q and o rows, and the pool's rows. */
static int vattn_check_views(int64_t T, int64_t H, int64_t q_st, int64_t q_sh, int64_t o_st,
                             int64_t o_sh, int64_t num_slots, int64_t kv_stride)
{
    int rc = vattn_check_view(T, H, q_st, q_sh, VATTN_HEAD_DIM_QK);
    if (!rc)
        rc = vattn_check_view(T, H, o_st, o_sh, VATTN_HEAD_DIM_V);
    if (!rc && (kv_stride < VATTN_HEAD_DIM_QK ||
                vattn_extent(num_slots, kv_stride, 1, 0, VATTN_HEAD_DIM_QK) < 0))
        rc = VATTN_ERR_STRIDE;
    return rc;
}

static int vattn_misaligned(const void *p, uintptr_t align)
{
    return ((uintptr_t)p & (align - 1)) != 0;
}

/* The workspace rule, given the library's answer for these sizes ((size_t)-1 = the library
 * rejects them: unreachable after the other checks, kept as a guard). */
static int vattn_check_workspace(const void *workspace, size_t workspace_bytes, size_t need)
{
    if (need == (size_t)-1)
        return VATTN_ERR_WORKSPACE;
    if (need > 0 && (!workspace || workspace_bytes < need))
        return VATTN_ERR_WORKSPACE;
    if (need > 0 && vattn_misaligned(workspace, 16)) /* fp32 / fp64 partials live there */
        return VATTN_ERR_ALIGNMENT;
    return VATTN_OK;
}

/* The checks both conventions share, in the contract's order from dtype to sm_scale. */
static int vattn_check_common(int32_t dtype, int32_t index_type, int32_t bs, int32_t q_len,
                              int32_t heads, int64_t num_slots, int64_t max_kv_len)
{
    if (dtype != VATTN_DTYPE_BF16 && dtype != VATTN_DTYPE_FP16)
        return VATTN_ERR_DTYPE;
    if (index_type != VATTN_INDEX_INT32 && index_type != VATTN_INDEX_INT64)
        return VATTN_ERR_INDEX_TYPE;
    if (bs < 1)
        return VATTN_ERR_BATCH;
    if (q_len < 1 || q_len > VATTN_MAX_Q_LEN)
        return VATTN_ERR_Q_LEN;
    if (heads < 1 || heads > VATTN_MAX_HEADS)
        return VATTN_ERR_HEADS;
    if (num_slots < 1 || max_kv_len < 0)
        return VATTN_ERR_NUM_SLOTS;
    return VATTN_OK;
}

int vattn_check_args_ws(const vattn_args *a, const void *workspace, size_t workspace_bytes,
                        int need_align16, size_t need)
{
    if (!a)
        return VATTN_ERR_NULL_ARGS;
    if (a->struct_size < VATTN_ARGS_V1_SIZE || a->reserved0 != 0)
        return VATTN_ERR_STRUCT_SIZE;
    if (!a->q || !a->kv_cache || !a->kv_indptr || !a->kv_indices || !a->o)
        return VATTN_ERR_NULL_POINTER;
    int rc = vattn_check_common(a->dtype, a->index_type, a->bs, a->q_len, a->num_heads,
                                a->num_slots, a->max_kv_len);
    if (rc)
        return rc;

    int64_t T = (int64_t)a->bs * a->q_len;
    rc = vattn_check_views(T, a->num_heads, a->q_stride_t, a->q_stride_h, a->o_stride_t,
                           a->o_stride_h, a->num_slots, a->kv_stride);
    if (rc)
        return rc;

    if (!isfinite(a->sm_scale) || !(a->sm_scale > 0.0f))
        return VATTN_ERR_SCALE;

    /* Natural alignment everywhere (C and the GPU both need it); 16 bytes for the
     * vectorised q / kv / o accesses of the CUDA kernels (8 elements of 2 bytes). */
    size_t isz = a->index_type == VATTN_INDEX_INT64 ? 8 : 4;
    if (vattn_misaligned(a->q, 2) || vattn_misaligned(a->kv_cache, 2) ||
        vattn_misaligned(a->o, 2) || vattn_misaligned(a->kv_indptr, 4) ||
        vattn_misaligned(a->kv_indices, isz) || (a->lse && vattn_misaligned(a->lse, 4)))
        return VATTN_ERR_ALIGNMENT;
    if (need_align16 &&
        (vattn_misaligned(a->q, 16) || vattn_misaligned(a->kv_cache, 16) ||
         vattn_misaligned(a->o, 16) || (a->q_stride_t & 7) || (a->q_stride_h & 7) ||
         (a->kv_stride & 7) || (a->o_stride_t & 7) || (a->o_stride_h & 7)))
        return VATTN_ERR_ALIGNMENT;

    return vattn_check_workspace(workspace, workspace_bytes, need);
}

static int vattn_check_indices(const void *indices, int index_type, int64_t n, int64_t num_slots);

int vattn_check_host_data(const vattn_args *a)
{
    const int32_t *ip = a->kv_indptr;
    if (ip[0] != 0)
        return VATTN_ERR_INDPTR;
    for (int b = 0; b < a->bs; b++) {
        /* int64 difference: a decreasing pair must not wrap into a huge length */
        int64_t len = (int64_t)ip[b + 1] - ip[b];
        if (len < a->q_len)
            return VATTN_ERR_INDPTR;
    }
    return vattn_check_indices(a->kv_indices, a->index_type, ip[a->bs], a->num_slots);
}

int vattn_check_extend_args_ws(const vattn_extend_args *a, const void *workspace,
                               size_t workspace_bytes, int need_align16, size_t need)
{
    if (!a)
        return VATTN_ERR_NULL_ARGS;
    if (a->struct_size < VATTN_EXTEND_ARGS_V1_SIZE || a->reserved0 != 0)
        return VATTN_ERR_STRUCT_SIZE;
    if (!a->q || !a->k_extend || !a->kv_cache || !a->qo_indptr || !a->kv_indptr ||
        !a->kv_indices || !a->o || (a->custom_mask && !a->mask_indptr))
        return VATTN_ERR_NULL_POINTER;
    int rc = vattn_check_common(a->dtype, a->index_type, a->bs, a->q_len, a->num_heads,
                                a->num_slots, a->max_kv_len);
    if (rc)
        return rc;

    int64_t T = (int64_t)a->bs * a->q_len;
    rc = vattn_check_views(T, a->num_heads, a->q_stride_t, a->q_stride_h, a->o_stride_t,
                           a->o_stride_h, a->num_slots, a->kv_stride);
    if (rc)
        return rc;
    if (a->k_extend_stride < VATTN_HEAD_DIM_QK ||
        vattn_extent(T, a->k_extend_stride, 1, 0, VATTN_HEAD_DIM_QK) < 0)
        return VATTN_ERR_STRIDE;

    if (!isfinite(a->sm_scale) || !(a->sm_scale > 0.0f))
        return VATTN_ERR_SCALE;

    size_t isz = a->index_type == VATTN_INDEX_INT64 ? 8 : 4;
    if (vattn_misaligned(a->q, 2) || vattn_misaligned(a->k_extend, 2) ||
        vattn_misaligned(a->kv_cache, 2) || vattn_misaligned(a->o, 2) ||
        vattn_misaligned(a->qo_indptr, 4) || vattn_misaligned(a->kv_indptr, 4) ||
        vattn_misaligned(a->kv_indices, isz) ||
        (a->mask_indptr && vattn_misaligned(a->mask_indptr, 8)) ||
        (a->lse && vattn_misaligned(a->lse, 4)))
        return VATTN_ERR_ALIGNMENT;
    if (need_align16 &&
        (vattn_misaligned(a->q, 16) || vattn_misaligned(a->k_extend, 16) ||
         vattn_misaligned(a->kv_cache, 16) || vattn_misaligned(a->o, 16) ||
         (a->q_stride_t & 7) || (a->q_stride_h & 7) || (a->k_extend_stride & 7) ||
         (a->kv_stride & 7) || (a->o_stride_t & 7) || (a->o_stride_h & 7)))
        return VATTN_ERR_ALIGNMENT;

    return vattn_check_workspace(workspace, workspace_bytes, need);
}

/* Slot ids [0, n) of kv_indices inside [0, num_slots). */
static int vattn_check_indices(const void *indices, int index_type, int64_t n, int64_t num_slots)
{
    if (index_type == VATTN_INDEX_INT64) {
        const int64_t *ix = (const int64_t *)indices;
        for (int64_t i = 0; i < n; i++)
            if (ix[i] < 0 || ix[i] >= num_slots)
                return VATTN_ERR_INDEX_RANGE;
    } else {
        const int32_t *ix = (const int32_t *)indices;
        for (int64_t i = 0; i < n; i++)
            if (ix[i] < 0 || ix[i] >= num_slots)
                return VATTN_ERR_INDEX_RANGE;
    }
    return VATTN_OK;
}

int vattn_check_extend_host_data(const vattn_extend_args *a)
{
    const int32_t *qo = a->qo_indptr, *ip = a->kv_indptr;
    if (ip[0] != 0)
        return VATTN_ERR_INDPTR;
    for (int b = 0; b <= a->bs; b++)
        if ((int64_t)qo[b] != (int64_t)b * a->q_len)
            return VATTN_ERR_INDPTR;
    for (int b = 0; b < a->bs; b++)
        if ((int64_t)ip[b + 1] - ip[b] < 0)
            return VATTN_ERR_INDPTR;
    if (a->custom_mask) {
        const int64_t *mp = a->mask_indptr;
        if (mp[0] < 0)
            return VATTN_ERR_INDPTR;
        for (int b = 0; b < a->bs; b++) {
            int64_t kv_len = (int64_t)ip[b + 1] - ip[b] + a->q_len;
            if (mp[b + 1] < mp[b] || mp[b + 1] - mp[b] < (int64_t)a->q_len * kv_len)
                return VATTN_ERR_INDPTR;
        }
    }
    return vattn_check_indices(a->kv_indices, a->index_type, ip[a->bs], a->num_slots);
}
