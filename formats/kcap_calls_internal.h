/*
 * kcap_calls_internal.h — helpers shared by the call-description engine (formats/ only):
 * evaluating an argument's dtype, shape and strides against a snapshot, struct field
 * access, and strided <-> dense copies.
 */
#ifndef KCAP_CALLS_INTERNAL_H
#define KCAP_CALLS_INTERNAL_H

#include "kcap_calls.h"

int kcap_eval_full(const kcap_call_desc *d, const kcap_snapshot *snap, const char *expr,
                   int64_t *out, kcap_error *err, int depth);

/* Evaluates a->ndim expressions of `exprs` (shape or strides) into out (>= 0 each). */
int kcap_arg_dims(const kcap_call_desc *d, const kcap_arg_desc *a, const kcap_snapshot *s,
                  const char *const *exprs, const char *what, int64_t *out, kcap_error *err);

/* The row ids (as int64), pool size and row stride of a ROWS argument, range-checked. */
int kcap_rows_of(const kcap_call_desc *d, const kcap_arg_desc *a, const kcap_snapshot *s,
                 int64_t **rows, size_t *nrows, int64_t *pool_rows, int64_t *row_stride,
                 kcap_error *err);

/* The duplicate-slot check of ROWS tensor `name` from one XXH64 per row (kcap check
 * streams big tensors instead of keeping them). */
int kcap_call_check_row_hashes(const kcap_call_desc *d, const kcap_snapshot *s,
                               const char *name, kcap_dir dir, const uint64_t *row_hash,
                               kcap_error *err);

/* Struct fields. */
int64_t kcap_field_get_int(const void *args, const kcap_arg_desc *a);
double kcap_field_get_float(const void *args, const kcap_arg_desc *a);
void *kcap_field_get_ptr(const void *args, const kcap_arg_desc *a);
void kcap_field_set_int(void *args, const kcap_arg_desc *a, int64_t v);
void kcap_field_set_float(void *args, const kcap_arg_desc *a, double v);
void kcap_field_set_ptr(void *args, const kcap_arg_desc *a, void *p);

/* Elements spanned by a strided view (0 if empty); -1 on negative strides/overflow. */
int64_t kcap_span_elems(int ndim, const int64_t *shape, const int64_t *strides);
/* dense <-> span copy of a strided view (to_dense = 1: span -> dense). */
void kcap_strided_copy(uint8_t *dense, uint8_t *span, int ndim, const int64_t *shape,
                       const int64_t *strides, size_t es, int to_dense);

#endif
