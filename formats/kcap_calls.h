/*
 * kcap_calls.h — the one description of each hooked call, shared by capture and replay.
 *
 * apitrace-style: a call is described once, as data (kcap_calls.c): the C symbol, the args
 * struct it takes, and for each field its name, whether it is a scalar, an input tensor,
 * an output tensor or ignored (workspace, stream), its dtype, its shape as expressions over
 * other fields (e.g. "bs*q_len", "num_heads", "576", "kv_indptr[bs]"), and how its bytes are
 * gathered (dense, a strided view, or rows of a pool selected by an index tensor).
 *
 * Capture turns (description, args struct, memory ops) into a kcap_snapshot with
 * kcap_call_record(); replay turns (description, snapshot, memory ops) back into an args
 * struct pointing at freshly allocated memory with kcap_call_rebuild(); the reader checks
 * every file's tensors against the description with kcap_call_validate(). Supporting another
 * kernel entry point means adding one description to the table, nothing else.
 */
#ifndef KCAP_CALLS_H
#define KCAP_CALLS_H

#include <stddef.h>
#include <stdint.h>

#include "kcap_error.h" /* common/ */
#include "kcap_snapshot.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kcap_field_type {
    KCAP_F_I32 = 1,
    KCAP_F_U32,
    KCAP_F_I64,
    KCAP_F_F32,
    KCAP_F_PTR
} kcap_field_type;

typedef enum kcap_arg_kind {
    KCAP_ARG_SCALAR = 1, /* stored under /scalars */
    KCAP_ARG_IN,         /* tensor read before the call, stored under /inputs */
    KCAP_ARG_OUT,        /* tensor read after the call, stored under /outputs */
    KCAP_ARG_IGNORED     /* present in the struct, never stored (struct_size, reserved) */
} kcap_arg_kind;

typedef enum kcap_gather {
    KCAP_GATHER_DENSE = 1, /* prod(shape) contiguous elements at the pointer */
    KCAP_GATHER_STRIDED,   /* a view: element strides given by `strides` expressions */
    KCAP_GATHER_ROWS       /* rows of a pool: row i of the stored tensor is
                              ptr + index_arg[i] * row_stride; the stored shape is
                              [len(index_arg), shape[1..]]; the pool's row count is `pool_rows` */
} kcap_gather;

typedef struct kcap_arg_desc {
    const char *name;
    kcap_arg_kind kind;
    kcap_field_type field;   /* type of the struct field */
    size_t offset;           /* offsetof() in the args struct */
    /* tensors only: */
    const char *dtype;       /* a dtype name ("int32", "float32", "uint8") or "@field:map"
                                selecting by an enum field, e.g. "@dtype:bfloat16,float16"
                                or "@index_type:int32,int64" */
    int ndim;
    const char *shape[KCAP_MAX_DIMS];   /* expressions (see kcap_expr_eval) */
    kcap_gather gather;
    const char *strides[KCAP_MAX_DIMS]; /* STRIDED: element stride expressions */
    const char *index_arg;   /* ROWS: the input tensor whose values select rows */
    const char *row_stride;  /* ROWS: elements between consecutive pool rows */
    const char *pool_rows;   /* ROWS: rows in the pool (for range checks and rebuild) */
    int optional;            /* a NULL pointer is allowed: tensor then absent from the file */
    int token_major;         /* dims are (token, head, channel...): element indices are
                                reported as (request, token, head, channel), see
                                kcap_call_desc.tokens_per_request */
    const char *doc;         /* one line for FORMAT.md / kcap info */
    /* IGNORED fields only: the value rebuild puts in the field, an expression that may use
     * `args_size` (sizeof the args struct); NULL = 0. E.g. struct_size = "args_size". */
    const char *fill;
} kcap_arg_desc;

/* What replay, diff, info and the roofline know of one call's shape, from its snapshot
 * (kcap_call_desc.summarise): -1 / "?" where a value cannot be known. */
typedef struct kcap_call_summary {
    int64_t bs, q_len, num_heads, num_slots;
    int64_t kv_total, kv_max;  /* keys over all requests, and of the longest request */
    int tree;                  /* 1: a non-causal mask among the draft tokens */
    char dtype[8], index_type[8];
    double flops;              /* floating-point work of the call (the roofline's numerator) */
} kcap_call_summary;

/* The argument checker of a call: 0 when the library accepts these host-visible arguments.
 * `ws_need` is the library's own workspace size for them ((size_t)-1: it rejects them). */
typedef int (*kcap_check_fn)(const void *args, const void *ws, size_t ws_bytes, size_t ws_need);
typedef void (*kcap_summarise_fn)(const kcap_snapshot *s, kcap_call_summary *out);

typedef struct kcap_call_desc {
    const char *name;        /* the C symbol, e.g. "vattn_verify" */
    int abi_version;
    size_t args_size;        /* sizeof the args struct */
    int nargs;
    const kcap_arg_desc *args;
    /* derived symbols usable in expressions, "name=expr" each, e.g. "T=bs*q_len" */
    int nderived;
    const char *const *derived;
    /* what capture and replay need beyond the tensors (all optional; NULL = none): */
    const char *reference;      /* the library's plain reference with this call's contract
                                   (replay --ref gpu), e.g. "vattn_verify_reference" */
    const char *workspace_fn;   /* size_t fn(const args *): the library's workspace bytes */
    kcap_check_fn check;        /* rejects what the library rejects (capture keeps nothing of it) */
    const char *probe;          /* the tensor whose pointer tells host from device memory */
    const char *tokens_per_request; /* expression: token t of a token_major tensor belongs to
                                       request t / value, draft token t % value */
    kcap_summarise_fn summarise;/* shape summary and FLOPs for reports and the roofline */
    int no_library_status;      /* what a hooked call returns when no real library is behind
                                   libkcap's definition of the symbol */
} kcap_call_desc;

/* The built-in descriptions, defined next to the kernel ABI they describe
 * (kernels/vattn_desc.c): one per line of kernels/vattn_hooks.def, in that order. */
extern const kcap_call_desc kcap_builtin_calls[];
extern const int kcap_builtin_count;

/* All known calls, and lookup by name (NULL if unknown). */
int kcap_call_count(void);
const kcap_call_desc *kcap_call_at(int i);
const kcap_call_desc *kcap_call_find(const char *name);
/* Register one more description at run time (tests, experiments); the pointer must
 * stay valid. KCAP_ERR_ARG if the name exists, KCAP_ERR_FULL past 16 extra calls. */
int kcap_call_register(const kcap_call_desc *d);

/*
 * Memory access used by record/rebuild: host memory (memcpy) or device memory (CUDA).
 * Every op returns 0 on success, non-zero on failure (then the whole operation fails
 * cleanly). `gather_rows` is optional (NULL = row-by-row copy_to_host); a device
 * implementation gathers on the device first.
 */
typedef struct kcap_mem_ops {
    void *ctx;
    int (*copy_to_host)(void *ctx, void *dst, const void *src, size_t n);
    int (*copy_from_host)(void *ctx, void *dst, const void *src, size_t n);
    void *(*alloc)(void *ctx, size_t n);                  /* rebuild only */
    void (*release)(void *ctx, void *p);                  /* rebuild only; accepts NULL */
    int (*fill)(void *ctx, void *dst, int byte, size_t n);/* rebuild: poison outputs */
    int (*gather_rows)(void *ctx, void *dst_host, const void *pool, size_t row_bytes,
                       size_t pool_stride_bytes, const int64_t *rows, size_t nrows);
} kcap_mem_ops;

/* Host-memory ops (memcpy/malloc/free/memset). */
const kcap_mem_ops *kcap_host_mem_ops(void);

/*
 * Capture one phase of a call into `snap`: KCAP_ARG_IN records every scalar and input
 * tensor (also fills snap->meta.call / abi_version), KCAP_ARG_OUT records the outputs.
 * Strided views are stored dense with their original strides as attributes; ROWS tensors
 * are stored in index order (duplicates kept), so row i belongs to slot index_arg[i].
 */
int kcap_call_record(const kcap_call_desc *d, const void *args, int phase,
                     const kcap_mem_ops *mem, kcap_snapshot *snap, kcap_error *err);

/* Upper bound of the bytes kcap_call_record() allocates for both phases of call `d` with
 * args `args` (kcap_bound.c): every tensor's dense copy, plus the largest temporary of one
 * tensor (a strided span, a row list and the gather_scratch bytes `mem` allocates per ROWS
 * copy), plus bookkeeping. Index tensors that shapes depend on (kv_indptr) are read through
 * `mem` (fault-safe). 0, or a kcap_err with err set. */
int kcap_call_bound(const kcap_call_desc *d, const void *args, const kcap_mem_ops *mem,
                    size_t gather_scratch, size_t *bytes, kcap_error *err);

/* How rebuild places a ROWS pool. */
typedef enum kcap_pool_mode {
    KCAP_POOL_AUTO = 0,   /* original slot ids if pool_rows * row bytes <= max_pool_bytes,
                             else remap */
    KCAP_POOL_ORIGINAL,   /* allocate the full original pool, rows at their captured slots */
    KCAP_POOL_REMAP       /* a compact pool: distinct slots keep their relative order and
                             scatter (gaps between them shrunk), indices rewritten */
} kcap_pool_mode;

typedef struct kcap_rebuilt {
    void *args;                    /* malloc'd args struct (args_size bytes) */
    int nbufs;
    void *bufs[16];                /* every allocation made (released by kcap_rebuilt_free) */
    int pool_remapped;             /* 1 if a ROWS pool was remapped */
    size_t pool_bytes;             /* bytes of the rebuilt pool */
} kcap_rebuilt;

/*
 * Rebuild a call from a snapshot: allocate memory through `mem` for every input (with its
 * original strides where the file records them, gaps poisoned) and every output (poisoned
 * with 0xFF bytes = NaN for bf16/f16/f32), copy inputs in, and fill an args struct.
 */
int kcap_call_rebuild(const kcap_call_desc *d, const kcap_snapshot *snap,
                      const kcap_mem_ops *mem, kcap_pool_mode pool_mode, size_t max_pool_bytes,
                      kcap_rebuilt *out, kcap_error *err);
void kcap_rebuilt_free(kcap_rebuilt *r, const kcap_mem_ops *mem); /* accepts NULL */

/* Copy output tensor `name` of a rebuilt call back into a dense host buffer shaped as in
 * the snapshot (handles strided outputs). */
int kcap_call_fetch_output(const kcap_call_desc *d, const kcap_rebuilt *r,
                           const kcap_snapshot *snap, const char *name,
                           const kcap_mem_ops *mem, void *dst_host, kcap_error *err);

/* Check a snapshot's tensors (presence, dtype, shape) against the description; with data
 * loaded also index ranges of ROWS tensors and that rows of one slot are identical. */
int kcap_call_validate(const kcap_call_desc *d, const kcap_snapshot *snap, kcap_error *err);
/* Same; headers_only = 1 skips every check that needs tensor data (shapes that
 * depend on an index tensor's values, index ranges, duplicate rows): for read_header. */
int kcap_call_validate_ex(const kcap_call_desc *d, const kcap_snapshot *snap, int headers_only,
                          kcap_error *err);

/* The description as a Markdown table (malloc'd text, caller frees; NULL on
 * allocation failure): stored in every file as the root attribute call_description and
 * printed by `kcap info --desc`. */
char *kcap_call_describe(const kcap_call_desc *d);

/* The pointer field `name` of an args struct (NULL when the description has no such
 * tensor), and the scalar fields alone recorded into `snap` (what the host may read of a
 * call without touching its tensors: enough to evaluate every shape that depends on scalars
 * only). */
const void *kcap_call_tensor_ptr(const kcap_call_desc *d, const void *args, const char *name);
int kcap_call_record_scalars(const kcap_call_desc *d, const void *args, kcap_snapshot *snap,
                             kcap_error *err);
/* Rows of the pool a ROWS tensor gathers from, from the scalars of an args struct (0 when
 * the call has no pool or the expression cannot be evaluated, the reason in err): capture's
 * range check. `err` is the caller's (capture keeps it off a small host stack). */
int64_t kcap_call_pool_rows(const kcap_call_desc *d, const void *args, kcap_error *err);
/* 1 and *out = tokens per request when tensor `name` is token-major in the description (its
 * element indices map to (request, token, head, channel)), else 0. */
int kcap_call_tokens_per_request(const kcap_call_desc *d, const kcap_snapshot *s,
                                 const char *tensor, int64_t *out);
/* The description of tensor `name` (NULL when none). */
const kcap_arg_desc *kcap_call_arg(const kcap_call_desc *d, const char *name);
/* The dtype of a tensor argument ("int32" or "@field:a,b" selected by a scalar in s). */
int kcap_arg_dtype(const kcap_call_desc *d, const kcap_arg_desc *a, const kcap_snapshot *s,
                   kcap_dtype *out, kcap_error *err);
/* Element size of a tensor argument, resolving "@field:a,b" against the scalars in snap. */
int kcap_call_elem_size(const kcap_call_desc *d, const kcap_arg_desc *a, const kcap_snapshot *s,
                        size_t *out, kcap_error *err);

/*
 * Evaluate a shape/stride expression: integer literals, identifiers (scalar names and
 * derived symbols), name[expr] (element of an already-recorded int tensor), + - * / and
 * parentheses. `snap` supplies the values. Returns 0 and sets *out, or an error.
 */
int kcap_expr_eval(const kcap_call_desc *d, const kcap_snapshot *snap, const char *expr,
                   int64_t *out, kcap_error *err);

#ifdef __cplusplus
}
#endif

#endif
