/*
 * vattn_desc.c — the call descriptions of the verify-attention ABI (kernels/verify_attn.h),
 * the data that drives capture, replay, check, info and diff (formats/kcap_calls.h says what
 * each field means). One description per args struct: vattn_args (vattn_verify and its
 * reference) and vattn_extend_args (vattn_extend, SGLang's convention, and its reference).
 * Beside the tensors, each carries the library's symbols (reference, workspace size), the
 * argument checker the libraries themselves use (kernels/vattn_check.c), the tensor that
 * tells host from device memory, and a summary of the shape with its FLOPs for the roofline.
 * Order matters within a table: a tensor's shape may only use tensors listed before it.
 * Linked into libkcapfmt (so into libkcap.so and the kcap CLI), not into the kernel libraries.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "kcap_calls.h" /* formats/ */
#include "vattn_check.h"
#include "verify_attn.h"

#define SC(T, f, ft, d) {.name = #f, .kind = KCAP_ARG_SCALAR, .field = ft, \
                         .offset = offsetof(T, f), .doc = d}
#define IGN(T, f, fl, d) {.name = #f, .kind = KCAP_ARG_IGNORED, .field = KCAP_F_U32, \
                          .offset = offsetof(T, f), .fill = fl, .doc = d}
#define PTR(T, f) .name = #f, .field = KCAP_F_PTR, .offset = offsetof(T, f)
#define VDT "@dtype:bfloat16,float16"

/* The tensors both conventions share, field for field (the struct differs, the meaning not). */
#define Q_ARG(T)                                                                           \
    {PTR(T, q), .kind = KCAP_ARG_IN, .dtype = VDT, .ndim = 3, .shape = {"T", "num_heads", "576"}, \
     .gather = KCAP_GATHER_STRIDED, .strides = {"q_stride_t", "q_stride_h", "1"}, .token_major = 1, \
     .doc = "queries, token-major (token t = request t/q_len, draft t%q_len)"}
#define KV_INDICES_ARG(T, what)                                                            \
    {PTR(T, kv_indices), .kind = KCAP_ARG_IN, .dtype = "@index_type:int32,int64", .ndim = 1,  \
     .shape = {"nnz"}, .gather = KCAP_GATHER_DENSE,                                        \
     .doc = "KV pool slot of each " what ", requests concatenated"}
#define KV_ROWS_ARG(T)                                                                     \
    {PTR(T, kv_cache), .kind = KCAP_ARG_IN, .dtype = VDT, .ndim = 2, .shape = {"nnz", "576"}, \
     .gather = KCAP_GATHER_ROWS, .index_arg = "kv_indices", .row_stride = "kv_stride",      \
     .pool_rows = "num_slots",                                                             \
     .doc = "the pool rows referenced by kv_indices, in index order (row i = slot "          \
            "kv_indices[i]; 512 latent + 64 rope)"}
#define O_ARG(T)                                                                           \
    {PTR(T, o), .kind = KCAP_ARG_OUT, .dtype = VDT, .ndim = 3, .shape = {"T", "num_heads", "512"}, \
     .gather = KCAP_GATHER_STRIDED, .strides = {"o_stride_t", "o_stride_h", "1"}, .token_major = 1, \
     .doc = "attention output"}
#define LSE_ARG(T)                                                                         \
    {PTR(T, lse), .kind = KCAP_ARG_OUT, .dtype = "float32", .ndim = 2,                     \
     .shape = {"T", "num_heads"}, .gather = KCAP_GATHER_DENSE, .optional = 1, .token_major = 1, \
     .doc = "natural-log sum of exp of the scaled scores; absent when not requested"}
/* The scalars both share, in struct order up to reserved0. */
#define HEAD_SCALARS(T, kv_what)                                                           \
    SC(T, index_type, KCAP_F_I32, "vattn_index_type of kv_indices: 0 int32, 1 int64"),     \
    SC(T, bs, KCAP_F_I32, "requests in the batch"),                                        \
    SC(T, q_len, KCAP_F_I32, "draft tokens per request"),                                  \
    SC(T, num_heads, KCAP_F_I32, "attention heads H"),                                     \
    SC(T, num_slots, KCAP_F_I64, "rows of the server's KV pool (rewritten when rebuild remaps)"), \
    SC(T, max_kv_len, KCAP_F_I64, "upper bound of any request's " kv_what ", 0 = unknown"),  \
    SC(T, sm_scale, KCAP_F_F32, "softmax scale (float32, stored exactly)"),                 \
    IGN(T, reserved0, NULL, "zero")

/* ---- vattn_args ---- */
#define VA vattn_args
static const kcap_arg_desc verify_args[] = {
    IGN(VA, struct_size, "args_size", "sizeof(vattn_args) of the caller; rebuild sets this kcap's size"),
    SC(VA, dtype, KCAP_F_I32, "vattn_dtype: 0 bfloat16, 1 float16 (q, kv_cache, o)"),
    HEAD_SCALARS(VA, "kv_len"),
    SC(VA, q_stride_t, KCAP_F_I64, "elements between q tokens"),
    SC(VA, q_stride_h, KCAP_F_I64, "elements between q heads"),
    SC(VA, kv_stride, KCAP_F_I64, "elements between KV pool rows"),
    SC(VA, o_stride_t, KCAP_F_I64, "elements between o tokens"),
    SC(VA, o_stride_h, KCAP_F_I64, "elements between o heads"),
    {PTR(VA, kv_indptr), .kind = KCAP_ARG_IN, .dtype = "int32", .ndim = 1, .shape = {"bs+1"},
     .gather = KCAP_GATHER_DENSE, .doc = "request b owns kv_indices[kv_indptr[b] .. kv_indptr[b+1])"},
    KV_INDICES_ARG(VA, "key"),
    Q_ARG(VA),
    KV_ROWS_ARG(VA),
    {PTR(VA, visibility), .kind = KCAP_ARG_IN, .dtype = "uint8", .ndim = 3,
     .shape = {"bs", "q_len", "q_len"}, .gather = KCAP_GATHER_DENSE, .optional = 1,
     .doc = "draft key j visible to draft query i; absent = causal"},
    O_ARG(VA),
    LSE_ARG(VA),
};
#undef VA
static const char *const verify_derived[] = {"T=bs*q_len", "nnz=kv_indptr[bs]"};

/* ---- vattn_extend_args ---- */
#define XA vattn_extend_args
static const kcap_arg_desc extend_args[] = {
    IGN(XA, struct_size, "args_size", "sizeof(vattn_extend_args) of the caller; rebuild sets this kcap's size"),
    SC(XA, dtype, KCAP_F_I32, "vattn_dtype: 0 bfloat16, 1 float16 (q, k_extend, kv_cache, o)"),
    HEAD_SCALARS(XA, "prefix_len + q_len"),
    SC(XA, q_stride_t, KCAP_F_I64, "elements between q tokens"),
    SC(XA, q_stride_h, KCAP_F_I64, "elements between q heads"),
    SC(XA, k_extend_stride, KCAP_F_I64, "elements between k_extend rows"),
    SC(XA, kv_stride, KCAP_F_I64, "elements between KV pool rows"),
    SC(XA, o_stride_t, KCAP_F_I64, "elements between o tokens"),
    SC(XA, o_stride_h, KCAP_F_I64, "elements between o heads"),
    {PTR(XA, qo_indptr), .kind = KCAP_ARG_IN, .dtype = "int32", .ndim = 1, .shape = {"bs+1"},
     .gather = KCAP_GATHER_DENSE,
     .doc = "request b's queries are tokens qo_indptr[b] .. qo_indptr[b+1] (b*q_len)"},
    {PTR(XA, kv_indptr), .kind = KCAP_ARG_IN, .dtype = "int32", .ndim = 1, .shape = {"bs+1"},
     .gather = KCAP_GATHER_DENSE,
     .doc = "request b's PREFIX is kv_indices[kv_indptr[b] .. kv_indptr[b+1])"},
    {PTR(XA, mask_indptr), .kind = KCAP_ARG_IN, .dtype = "int64", .ndim = 1, .shape = {"bs+1"},
     .gather = KCAP_GATHER_DENSE, .optional = 1,
     .doc = "start of request b's rows in custom_mask; absent without a mask"},
    KV_INDICES_ARG(XA, "prefix key"),
    Q_ARG(XA),
    {PTR(XA, k_extend), .kind = KCAP_ARG_IN, .dtype = VDT, .ndim = 2, .shape = {"T", "576"},
     .gather = KCAP_GATHER_STRIDED, .strides = {"k_extend_stride", "1"}, .token_major = 1,
     .doc = "the draft tokens' own cache rows (K; V = the first 512 channels)"},
    KV_ROWS_ARG(XA),
    {PTR(XA, custom_mask), .kind = KCAP_ARG_IN, .dtype = "uint8", .ndim = 1,
     .shape = {"mask_indptr[bs]"}, .gather = KCAP_GATHER_DENSE, .optional = 1,
     .doc = "SGLang's flattened mask rows (q_len x (prefix_len + q_len) per request; only the "
            "draft columns are read); absent = causal"},
    O_ARG(XA),
    LSE_ARG(XA),
};
#undef XA
static const char *const extend_derived[] = {"T=bs*q_len", "nnz=kv_indptr[bs]"};

/* ---- checkers: the libraries' own rules, host-visible fields only ---- */
static int verify_check(const void *a, const void *ws, size_t wsb, size_t need)
{
    return vattn_check_args_ws((const vattn_args *)a, ws, wsb, 0, need);
}

static int extend_check(const void *a, const void *ws, size_t wsb, size_t need)
{
    return vattn_check_extend_args_ws((const vattn_extend_args *)a, ws, wsb, 0, need);
}

/* ---- summaries ---- */
static int64_t scalar_or(const kcap_snapshot *s, const char *name, int64_t dflt)
{
    const kcap_scalar *sc = kcap_snapshot_scalar(s, name);
    return sc ? (sc->type == KCAP_SC_INT ? sc->i : (int64_t)sc->f) : dflt;
}

static const int32_t *indptr_of(const kcap_snapshot *s, const char *name, int64_t bs)
{
    const kcap_tensor *t = kcap_snapshot_tensor(s, name, KCAP_DIR_IN);
    return t && t->data && t->dtype == KCAP_DT_I32 && t->ndim == 1 && bs >= 0 &&
                   t->shape[0] == bs + 1
               ? t->data
               : NULL;
}

/* The scalars and the key counts (each request's keys = its range of `indptr` + `extra`). */
static void summarise_common(const kcap_snapshot *s, kcap_call_summary *o, int64_t extra)
{
    o->bs = scalar_or(s, "bs", -1);
    o->q_len = scalar_or(s, "q_len", -1);
    o->num_heads = scalar_or(s, "num_heads", -1);
    o->num_slots = scalar_or(s, "num_slots", -1);
    int64_t dt = scalar_or(s, "dtype", -1), it = scalar_or(s, "index_type", -1);
    snprintf(o->dtype, sizeof o->dtype, "%s", dt == 0 ? "bf16" : dt == 1 ? "fp16" : "?");
    snprintf(o->index_type, sizeof o->index_type, "%s", it == 0 ? "i32" : it == 1 ? "i64" : "?");
    o->tree = 0;
    o->kv_total = o->kv_max = -1;
    o->flops = 0;
    const int32_t *p = indptr_of(s, "kv_indptr", o->bs);
    if (!p)
        return;
    o->kv_total = o->kv_max = 0;
    for (int64_t b = 0; b < o->bs; b++) {
        int64_t n = (int64_t)p[b + 1] - p[b] + extra;
        o->kv_total += n;
        if (n > o->kv_max)
            o->kv_max = n;
        /* every (query, key) pair of the request, masked or not: QK^T over 576 channels and
           PV over 512, a multiply and an add each */
        if (o->q_len > 0 && o->num_heads > 0)
            o->flops += 2.0 * (double)o->q_len * (double)o->num_heads * (double)n * (576.0 + 512.0);
    }
}

/* "causal" when the mask is absent or exactly lower-triangular among the draft tokens. */
static void verify_summarise(const kcap_snapshot *s, kcap_call_summary *o)
{
    summarise_common(s, o, 0);
    const kcap_tensor *vis = kcap_snapshot_tensor(s, "visibility", KCAP_DIR_IN);
    if (vis && vis->data && vis->dtype == KCAP_DT_U8 && o->q_len > 0) {
        const uint8_t *v = vis->data;
        const int64_t q = o->q_len, n = (int64_t)vis->nbytes;
        for (int64_t k = 0; k < n && !o->tree; k++) {
            const int64_t i = (k / q) % q, j = k % q;
            o->tree = (v[k] != 0) != (j <= i);
        }
    } else if (vis) {
        o->tree = 1;
    }
}

static void extend_summarise(const kcap_snapshot *s, kcap_call_summary *o)
{
    int64_t q = scalar_or(s, "q_len", -1);
    summarise_common(s, o, q > 0 ? q : 0);
    const kcap_tensor *m = kcap_snapshot_tensor(s, "custom_mask", KCAP_DIR_IN);
    const kcap_tensor *mi = kcap_snapshot_tensor(s, "mask_indptr", KCAP_DIR_IN);
    const int32_t *p = indptr_of(s, "kv_indptr", o->bs);
    if (!m)
        return;
    if (!m->data || !mi || !mi->data || mi->dtype != KCAP_DT_I64 || !p || q < 1) {
        o->tree = 1;
        return;
    }
    const uint8_t *v = m->data;
    const int64_t *mp = mi->data;
    /* mask_indptr and q_len come from the file and only mask_indptr[bs] is tied to the mask's
     * size: a position that overflows int64 is out of the mask (a hostile file gave
     * mask_indptr[0] = 2^63 - 5, signed overflow here before the kernel's own check) */
    for (int64_t b = 0; b < o->bs && !o->tree; b++) {
        int64_t P = (int64_t)p[b + 1] - p[b], row;
        o->tree = __builtin_add_overflow(P, q, &row);
        for (int64_t i = 0; i < q && !o->tree; i++)
            for (int64_t j = 0; j < q && !o->tree; j++) {
                int64_t k;
                o->tree = __builtin_mul_overflow(i, row, &k) || __builtin_add_overflow(k, mp[b], &k) ||
                          __builtin_add_overflow(k, P, &k) || __builtin_add_overflow(k, j, &k) || k < 0 ||
                          k >= (int64_t)m->nbytes || (v[k] != 0) != (j <= i);
            }
    }
}

#define DESC_verify(sym)                                                                   \
    {sym, VATTN_ABI_VERSION, sizeof(vattn_args), (int)(sizeof verify_args / sizeof verify_args[0]), \
     verify_args, 2, verify_derived, "vattn_verify_reference", "vattn_workspace_size",       \
     verify_check, "q", "q_len", verify_summarise, VATTN_ERR_NO_DEVICE}
#define DESC_extend(sym)                                                                   \
    {sym, VATTN_ABI_VERSION, sizeof(vattn_extend_args),                                    \
     (int)(sizeof extend_args / sizeof extend_args[0]), extend_args, 2, extend_derived,      \
     "vattn_extend_reference", "vattn_extend_workspace_size", extend_check, "q", "q_len",    \
     extend_summarise, VATTN_ERR_NO_DEVICE}

const kcap_call_desc kcap_builtin_calls[] = {
#define KCAP_HOOK(sym, family) DESC_##family(#sym),
#include "vattn_hooks.def"
#undef KCAP_HOOK
};
const int kcap_builtin_count = (int)(sizeof kcap_builtin_calls / sizeof kcap_builtin_calls[0]);
