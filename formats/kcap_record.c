/*
 * kcap_record.c — capture one phase of a described call into a snapshot (kcap_call_record):
 * scalars and inputs before the call, outputs after it. Reads memory only through
 * kcap_mem_ops so the same code serves host and device pointers: dense tensors in one copy,
 * strided views as one span copy compacted on the host (or row by row when the span is
 * much larger than the view), ROWS tensors through gather_rows when the ops provide it.
 */
#include "kcap_calls_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SPAN_SLACK ((int64_t)64 << 20)

static int copy_in(const kcap_mem_ops *m, void *dst, const void *src, size_t n, const char *name,
                   kcap_error *err)
{
    if (!n)
        return KCAP_OK;
    if (m->copy_to_host(m->ctx, dst, src, n))
        return kcap_error_set(err, KCAP_ERR_CUDA, "%s: copying %zu bytes to the host failed",
                              name, n);
    return KCAP_OK;
}

static int index_values(const kcap_tensor *ix, int64_t **out, size_t *n, kcap_error *err,
                        const char *name)
{
    size_t es = kcap_dtype_size(ix->dtype);
    *n = es ? ix->nbytes / es : 0;
    if (ix->dtype != KCAP_DT_I32 && ix->dtype != KCAP_DT_I64)
        return kcap_error_set(err, KCAP_ERR_SHAPE, "%s: index tensor %s is %s, not int32/int64",
                              name, ix->name, kcap_dtype_name(ix->dtype));
    *out = malloc(*n ? *n * sizeof **out : 1);
    if (!*out)
        return kcap_error_set(err, KCAP_ERR_NOMEM, "%s: out of memory", name);
    for (size_t i = 0; i < *n; i++)
        (*out)[i] = ix->dtype == KCAP_DT_I32 ? ((const int32_t *)ix->data)[i]
                                             : ((const int64_t *)ix->data)[i];
    return KCAP_OK;
}

int kcap_rows_of(const kcap_call_desc *d, const kcap_arg_desc *a, const kcap_snapshot *s,
                 int64_t **rows, size_t *nrows, int64_t *pool_rows, int64_t *row_stride,
                 kcap_error *err)
{
    *rows = NULL;
    const kcap_tensor *ix = kcap_snapshot_tensor(s, a->index_arg, KCAP_DIR_IN);
    if (!ix || !ix->data)
        return kcap_error_set(err, KCAP_ERR_SHAPE, "%s: index tensor %s not recorded", a->name,
                              a->index_arg ? a->index_arg : "(none)");
    int rc = kcap_eval_full(d, s, a->pool_rows, pool_rows, err, 0);
    if (!rc)
        rc = kcap_eval_full(d, s, a->row_stride, row_stride, err, 0);
    if (rc) {
        kcap_error_prefix(err, "%s", a->name);
        return rc;
    }
    if (*row_stride < 0 || *pool_rows < 0)
        return kcap_error_set(err, KCAP_ERR_SHAPE, "%s: negative row stride or pool size",
                              a->name);
    if ((rc = index_values(ix, rows, nrows, err, a->name)))
        return rc;
    for (size_t i = 0; i < *nrows; i++)
        if ((*rows)[i] < 0 || (*rows)[i] >= *pool_rows) {
            rc = kcap_error_set(err, KCAP_ERR_SHAPE, "%s: %s[%zu] = %lld is outside the pool "
                                "[0, %s = %lld)", a->name, a->index_arg, i,
                                (long long)(*rows)[i], a->pool_rows, (long long)*pool_rows);
            free(*rows);
            *rows = NULL;
            return rc;
        }
    return KCAP_OK;
}

static int record_tensor(const kcap_call_desc *d, const kcap_arg_desc *a, const void *args,
                         const kcap_mem_ops *m, kcap_snapshot *s, kcap_error *err)
{
    const void *ptr = kcap_field_get_ptr(args, a);
    if (!ptr) {
        if (a->optional)
            return KCAP_OK;
        return kcap_error_set(err, KCAP_ERR_ARG, "%s: NULL pointer for a required tensor",
                              a->name);
    }
    kcap_dtype dt;
    int64_t shape[KCAP_MAX_DIMS], strides[KCAP_MAX_DIMS];
    int rc = kcap_arg_dtype(d, a, s, &dt, err);
    if (!rc)
        rc = kcap_arg_dims(d, a, s, a->shape, "dimension", shape, err);
    if (!rc && a->gather == KCAP_GATHER_STRIDED)
        rc = kcap_arg_dims(d, a, s, a->strides, "stride", strides, err);
    if (rc)
        return rc;
    size_t es = kcap_dtype_size(dt);
    int64_t *rows = NULL, pool_rows = 0, row_stride = 0;
    size_t nrows = 0;
    if (a->gather == KCAP_GATHER_ROWS) {
        if ((rc = kcap_rows_of(d, a, s, &rows, &nrows, &pool_rows, &row_stride, err)))
            return rc;
        if ((size_t)shape[0] != nrows) {
            free(rows);
            return kcap_error_set(err, KCAP_ERR_SHAPE, "%s: %zu rows selected by %s but the "
                                  "shape says %lld", a->name, nrows, a->index_arg,
                                  (long long)shape[0]);
        }
        strides[a->ndim - 1] = 1;
        for (int i = a->ndim - 2; i >= 1; i--)
            strides[i] = strides[i + 1] * shape[i + 1];
        strides[0] = row_stride;
    }
    void *dst;
    rc = kcap_snapshot_add_tensor(s, a->name, a->kind == KCAP_ARG_OUT ? KCAP_DIR_OUT : KCAP_DIR_IN,
                                  dt, a->ndim, shape,
                                  a->gather == KCAP_GATHER_DENSE ? NULL : strides, NULL, &dst);
    if (rc) {
        free(rows);
        return kcap_error_set(err, rc, "%s: cannot add the tensor (%s)", a->name,
                              kcap_err_string(rc));
    }
    size_t nbytes = s->tensors[s->ntensors - 1].nbytes;
    if (a->gather == KCAP_GATHER_DENSE) {
        rc = copy_in(m, dst, ptr, nbytes, a->name, err);
    } else if (a->gather == KCAP_GATHER_STRIDED) {
        int64_t span = kcap_span_elems(a->ndim, shape, strides);
        if (span < 0 || (uint64_t)span > SIZE_MAX / es)
            rc = kcap_error_set(err, KCAP_ERR_SHAPE, "%s: negative or overflowing strides",
                                a->name);
        else if (span && (int64_t)(span * es) <= 4 * (int64_t)nbytes + SPAN_SLACK) {
            uint8_t *tmp = malloc((size_t)span * es);
            if (!tmp)
                rc = kcap_error_set(err, KCAP_ERR_NOMEM, "%s: out of memory", a->name);
            else if (!(rc = copy_in(m, tmp, ptr, (size_t)span * es, a->name, err)))
                kcap_strided_copy(dst, tmp, a->ndim, shape, strides, es, 1);
            free(tmp);
        } else if (span) { /* sparse view: one copy per innermost run */
            int64_t nrun = 1, inner = shape[a->ndim - 1], idx[KCAP_MAX_DIMS] = {0};
            for (int i = 0; i < a->ndim - 1; i++)
                nrun *= shape[i];
            int contiguous = strides[a->ndim - 1] == 1;
            for (int64_t r = 0; !rc && r < nrun; r++) {
                int64_t off = 0;
                for (int i = 0; i < a->ndim - 1; i++)
                    off += idx[i] * strides[i];
                for (int64_t j = 0; !rc && j < (contiguous ? 1 : inner); j++)
                    rc = copy_in(m, (uint8_t *)dst + (size_t)(r * inner + j) * es,
                                 (const uint8_t *)ptr + (size_t)(off + j * strides[a->ndim - 1]) * es,
                                 contiguous ? (size_t)inner * es : es, a->name, err);
                for (int i = a->ndim - 2; i >= 0; i--) {
                    if (++idx[i] < shape[i])
                        break;
                    idx[i] = 0;
                }
            }
        }
    } else {
        size_t row_bytes = nrows ? nbytes / nrows : 0;
        size_t pstride = (size_t)row_stride * es;
        if (nrows && m->gather_rows) {
            if (m->gather_rows(m->ctx, dst, ptr, row_bytes, pstride, rows, nrows))
                rc = kcap_error_set(err, KCAP_ERR_CUDA, "%s: gathering %zu rows failed",
                                    a->name, nrows);
        } else {
            for (size_t i = 0; !rc && i < nrows; i++)
                rc = copy_in(m, (uint8_t *)dst + i * row_bytes,
                             (const uint8_t *)ptr + (size_t)rows[i] * pstride, row_bytes, a->name,
                             err);
        }
    }
    free(rows);
    return rc;
}

int kcap_call_record(const kcap_call_desc *d, const void *args, int phase,
                     const kcap_mem_ops *mem, kcap_snapshot *snap, kcap_error *err)
{
    if (!d || !args || !mem || !snap || !mem->copy_to_host ||
        (phase != KCAP_ARG_IN && phase != KCAP_ARG_OUT))
        return kcap_error_set(err, KCAP_ERR_ARG, "kcap_call_record: bad argument");
    int rc = KCAP_OK;
    if (phase == KCAP_ARG_IN) {
        snprintf(snap->meta.call, sizeof snap->meta.call, "%s", d->name);
        snap->meta.abi_version = d->abi_version;
        rc = kcap_call_record_scalars(d, args, snap, err);
    }
    for (int i = 0; i < d->nargs && !rc; i++)
        if ((int)d->args[i].kind == phase)
            rc = record_tensor(d, &d->args[i], args, mem, snap, err);
    if (rc)
        kcap_error_prefix(err, "%s", d->name);
    return rc;
}
