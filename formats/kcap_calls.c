/*
 * kcap_calls.c — the table of hooked calls, as data. Each entry says, field by field, how
 * a call's args struct becomes a snapshot (see kcap_calls.h). Supporting another kernel
 * entry point means adding one description here. Order matters within a description:
 * a tensor may only use, in its shape, tensors listed (recorded) before it.
 */
#include "kcap_calls.h"

#include <pthread.h>
#include <stddef.h>
#include <string.h>

#include "verify_attn.h" /* kernels/ */

#define SC(f, ft, d) {.name = #f, .kind = KCAP_ARG_SCALAR, .field = ft, \
                      .offset = offsetof(vattn_args, f), .doc = d}

static const kcap_arg_desc vattn_args_desc[] = {
    {.name = "struct_size", .kind = KCAP_ARG_IGNORED, .field = KCAP_F_U32,
     .offset = offsetof(vattn_args, struct_size), .fill = "args_size",
     .doc = "sizeof(vattn_args) of the caller; rebuild sets this kcap's size"},
    SC(dtype, KCAP_F_I32, "vattn_dtype: 0 bfloat16, 1 float16 (q, kv_cache, o)"),
    SC(index_type, KCAP_F_I32, "vattn_index_type of kv_indices: 0 int32, 1 int64"),
    SC(bs, KCAP_F_I32, "requests in the batch"),
    SC(q_len, KCAP_F_I32, "draft tokens per request"),
    SC(num_heads, KCAP_F_I32, "attention heads H"),
    SC(num_slots, KCAP_F_I64, "rows of the server's KV pool (rewritten when rebuild remaps)"),
    SC(max_kv_len, KCAP_F_I64, "upper bound of any request's kv_len, 0 = unknown"),
    SC(sm_scale, KCAP_F_F32, "softmax scale (float32, stored exactly)"),
    {.name = "reserved0", .kind = KCAP_ARG_IGNORED, .field = KCAP_F_U32,
     .offset = offsetof(vattn_args, reserved0), .doc = "zero"},
    SC(q_stride_t, KCAP_F_I64, "elements between q tokens"),
    SC(q_stride_h, KCAP_F_I64, "elements between q heads"),
    SC(kv_stride, KCAP_F_I64, "elements between KV pool rows"),
    SC(o_stride_t, KCAP_F_I64, "elements between o tokens"),
    SC(o_stride_h, KCAP_F_I64, "elements between o heads"),
    {.name = "kv_indptr", .kind = KCAP_ARG_IN, .field = KCAP_F_PTR,
     .offset = offsetof(vattn_args, kv_indptr), .dtype = "int32", .ndim = 1,
     .shape = {"bs+1"}, .gather = KCAP_GATHER_DENSE,
     .doc = "request b owns kv_indices[kv_indptr[b] .. kv_indptr[b+1])"},
    {.name = "kv_indices", .kind = KCAP_ARG_IN, .field = KCAP_F_PTR,
     .offset = offsetof(vattn_args, kv_indices), .dtype = "@index_type:int32,int64",
     .ndim = 1, .shape = {"nnz"}, .gather = KCAP_GATHER_DENSE,
     .doc = "KV pool slot of each key, requests concatenated"},
    {.name = "q", .kind = KCAP_ARG_IN, .field = KCAP_F_PTR, .offset = offsetof(vattn_args, q),
     .dtype = "@dtype:bfloat16,float16", .ndim = 3, .shape = {"T", "num_heads", "576"},
     .gather = KCAP_GATHER_STRIDED, .strides = {"q_stride_t", "q_stride_h", "1"},
     .doc = "queries, token-major (token t = request t/q_len, draft t%q_len)"},
    {.name = "kv_cache", .kind = KCAP_ARG_IN, .field = KCAP_F_PTR,
     .offset = offsetof(vattn_args, kv_cache), .dtype = "@dtype:bfloat16,float16", .ndim = 2,
     .shape = {"nnz", "576"}, .gather = KCAP_GATHER_ROWS, .index_arg = "kv_indices",
     .row_stride = "kv_stride", .pool_rows = "num_slots",
     .doc = "the pool rows referenced by kv_indices, in index order (row i = slot "
            "kv_indices[i]; 512 latent + 64 rope)"},
    {.name = "visibility", .kind = KCAP_ARG_IN, .field = KCAP_F_PTR,
     .offset = offsetof(vattn_args, visibility), .dtype = "uint8", .ndim = 3,
     .shape = {"bs", "q_len", "q_len"}, .gather = KCAP_GATHER_DENSE, .optional = 1,
     .doc = "draft key j visible to draft query i; absent = causal"},
    {.name = "o", .kind = KCAP_ARG_OUT, .field = KCAP_F_PTR, .offset = offsetof(vattn_args, o),
     .dtype = "@dtype:bfloat16,float16", .ndim = 3, .shape = {"T", "num_heads", "512"},
     .gather = KCAP_GATHER_STRIDED, .strides = {"o_stride_t", "o_stride_h", "1"},
     .doc = "attention output"},
    {.name = "lse", .kind = KCAP_ARG_OUT, .field = KCAP_F_PTR,
     .offset = offsetof(vattn_args, lse), .dtype = "float32", .ndim = 2,
     .shape = {"T", "num_heads"}, .gather = KCAP_GATHER_DENSE, .optional = 1,
     .doc = "natural-log sum of exp of the scaled scores; absent when not requested"},
};

static const char *const vattn_derived[] = {"T=bs*q_len", "nnz=kv_indptr[bs]"};

#define NARGS (int)(sizeof vattn_args_desc / sizeof vattn_args_desc[0])

static const kcap_call_desc calls[] = {
    {"vattn_verify", VATTN_ABI_VERSION, sizeof(vattn_args), NARGS, vattn_args_desc, 2,
     vattn_derived},
    {"vattn_verify_reference", VATTN_ABI_VERSION, sizeof(vattn_args), NARGS, vattn_args_desc, 2,
     vattn_derived},
};

#define NBUILTIN (int)(sizeof calls / sizeof calls[0])
#define MAX_EXTRA 16
static const kcap_call_desc *extra[MAX_EXTRA];
static int nextra;
static pthread_mutex_t extra_mu = PTHREAD_MUTEX_INITIALIZER;

int kcap_call_count(void)
{
    pthread_mutex_lock(&extra_mu);
    int n = NBUILTIN + nextra;
    pthread_mutex_unlock(&extra_mu);
    return n;
}

const kcap_call_desc *kcap_call_at(int i)
{
    if (i >= 0 && i < NBUILTIN)
        return &calls[i];
    pthread_mutex_lock(&extra_mu);
    const kcap_call_desc *d = i >= NBUILTIN && i < NBUILTIN + nextra ? extra[i - NBUILTIN] : NULL;
    pthread_mutex_unlock(&extra_mu);
    return d;
}

const kcap_call_desc *kcap_call_find(const char *name)
{
    for (int i = 0; name && i < kcap_call_count(); i++) {
        const kcap_call_desc *d = kcap_call_at(i);
        if (d && !strcmp(d->name, name))
            return d;
    }
    return NULL;
}

int kcap_call_register(const kcap_call_desc *d)
{
    if (!d || !d->name || kcap_call_find(d->name))
        return KCAP_ERR_ARG;
    pthread_mutex_lock(&extra_mu);
    int rc = nextra < MAX_EXTRA ? (extra[nextra++] = d, KCAP_OK) : KCAP_ERR_FULL;
    pthread_mutex_unlock(&extra_mu);
    return rc;
}
