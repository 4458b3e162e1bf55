/*
 * kcap_validate.c — checks a snapshot against its call description: every scalar present
 * with the right kind, every tensor present (unless optional) with the dtype and shape the
 * expressions give, recorded strides equal to the stride scalars, nothing unexpected, and
 * (with data) ROWS indices inside the pool and rows of one slot identical.
 */
#include "kcap_calls_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const kcap_arg_desc *find_arg(const kcap_call_desc *d, const char *name, int tensor,
                                     kcap_dir dir)
{
    for (int i = 0; i < d->nargs; i++) {
        const kcap_arg_desc *a = &d->args[i];
        if (strcmp(a->name, name))
            continue;
        if (!tensor && a->kind == KCAP_ARG_SCALAR)
            return a;
        if (tensor && ((dir == KCAP_DIR_IN && a->kind == KCAP_ARG_IN) ||
                       (dir == KCAP_DIR_OUT && a->kind == KCAP_ARG_OUT)))
            return a;
    }
    return NULL;
}

static void fmt_shape(char *b, size_t n, int nd, const int64_t *s)
{
    size_t u = (size_t)snprintf(b, n, "[");
    for (int i = 0; i < nd && u < n; i++)
        u += (size_t)snprintf(b + u, n - u, "%s%lld", i ? "," : "", (long long)s[i]);
    if (u < n)
        snprintf(b + u, n - u, "]");
}

typedef struct {
    int64_t slot;
    size_t i;
} sr;

static int cmp_sr(const void *x, const void *y)
{
    const sr *a = x, *b = y;
    if (a->slot != b->slot)
        return a->slot < b->slot ? -1 : 1;
    return a->i < b->i ? -1 : a->i > b->i;
}

/* Rows of one slot must be identical: compared byte for byte, or (`row_hash`, from a
 * streaming check that did not keep the data) by their XXH64. */
static int check_rows(const kcap_call_desc *d, const kcap_arg_desc *a, const kcap_tensor *t,
                      const kcap_snapshot *s, const char *full, const uint64_t *row_hash,
                      kcap_error *err)
{
    int64_t *rows, pool_rows, row_stride;
    size_t nrows;
    int rc = kcap_rows_of(d, a, s, &rows, &nrows, &pool_rows, &row_stride, err);
    if (rc)
        return rc;
    if (nrows != (size_t)t->shape[0]) {
        free(rows);
        return kcap_error_set(err, KCAP_ERR_SHAPE, "%s: %lld rows but %s selects %zu", full,
                              (long long)t->shape[0], a->index_arg, nrows);
    }
    sr *v = malloc((nrows ? nrows : 1) * sizeof *v);
    if (!v) {
        free(rows);
        return kcap_error_set(err, KCAP_ERR_NOMEM, "%s: out of memory", full);
    }
    for (size_t i = 0; i < nrows; i++)
        v[i] = (sr){rows[i], i};
    qsort(v, nrows, sizeof *v, cmp_sr);
    size_t rb = nrows ? t->nbytes / nrows : 0;
    for (size_t i = 1; i < nrows && !rc; i++)
        if (v[i].slot == v[i - 1].slot &&
            (row_hash ? row_hash[v[i].i] != row_hash[v[i - 1].i]
                      : memcmp((const uint8_t *)t->data + v[i].i * rb,
                               (const uint8_t *)t->data + v[i - 1].i * rb, rb) != 0))
            rc = kcap_error_set(err, KCAP_ERR_CORRUPT, "%s: rows %zu and %zu both hold slot "
                                "%lld but differ", full, v[i - 1].i, v[i].i,
                                (long long)v[i].slot);
    free(v);
    free(rows);
    return rc;
}

int kcap_call_validate_ex(const kcap_call_desc *d, const kcap_snapshot *s, int headers_only,
                          kcap_error *err)
{
    if (!d || !s)
        return kcap_error_set(err, KCAP_ERR_ARG, "kcap_call_validate: NULL argument");
    for (int i = 0; i < s->nscalars; i++)
        if (!find_arg(d, s->scalars[i].name, 0, 0))
            return kcap_error_set(err, KCAP_ERR_CORRUPT, "/scalars/%s: not an argument of %s",
                                  s->scalars[i].name, d->name);
    for (int i = 0; i < s->ntensors; i++) {
        const kcap_tensor *t = &s->tensors[i];
        if (t->dir == KCAP_DIR_CAND) {
            /* a candidate output mirrors the production output of the same name */
            const kcap_tensor *o = kcap_snapshot_tensor(s, t->name, KCAP_DIR_OUT);
            if (!o || o->dtype != t->dtype || o->ndim != t->ndim ||
                memcmp(o->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim))
                return kcap_error_set(err, KCAP_ERR_CORRUPT, "/candidate/%s: no output of the "
                                      "same name, dtype and shape", t->name);
            continue;
        }
        if (!find_arg(d, t->name, 1, t->dir))
            return kcap_error_set(err, KCAP_ERR_CORRUPT, "/%s/%s: not a%s tensor of %s",
                                  kcap_dir_group(t->dir), t->name,
                                  t->dir == KCAP_DIR_IN ? "n input" : "n output", d->name);
    }
    for (int i = 0; i < d->nargs; i++) {
        const kcap_arg_desc *a = &d->args[i];
        if (a->kind == KCAP_ARG_IGNORED)
            continue;
        if (a->kind == KCAP_ARG_SCALAR) {
            const kcap_scalar *sc = kcap_snapshot_scalar(s, a->name);
            if (!sc)
                return kcap_error_set(err, KCAP_ERR_SHAPE, "/scalars/%s: missing", a->name);
            int want_float = a->field == KCAP_F_F32;
            if ((sc->type == KCAP_SC_FLOAT) != want_float)
                return kcap_error_set(err, KCAP_ERR_SHAPE, "/scalars/%s: stored as %s, the call "
                                      "takes %s", a->name, want_float ? "an integer" : "a float",
                                      want_float ? "a float" : "an integer");
            if ((a->field == KCAP_F_I32 && (sc->i < INT32_MIN || sc->i > INT32_MAX)) ||
                (a->field == KCAP_F_U32 && (sc->i < 0 || sc->i > (int64_t)UINT32_MAX)))
                return kcap_error_set(err, KCAP_ERR_SHAPE, "/scalars/%s: %lld does not fit its "
                                      "32-bit field", a->name, (long long)sc->i);
            continue;
        }
        kcap_dir dir = a->kind == KCAP_ARG_IN ? KCAP_DIR_IN : KCAP_DIR_OUT;
        char full[96];
        snprintf(full, sizeof full, "/%s/%s", dir == KCAP_DIR_IN ? "inputs" : "outputs", a->name);
        const kcap_tensor *t = kcap_snapshot_tensor(s, a->name, dir);
        if (!t) {
            if (a->optional)
                continue;
            return kcap_error_set(err, KCAP_ERR_SHAPE, "%s: missing (required by %s)", full,
                                  d->name);
        }
        kcap_dtype dt;
        int rc = kcap_arg_dtype(d, a, s, &dt, err);
        if (rc) {
            kcap_error_prefix(err, "%s", full);
            return rc;
        }
        if (dt != t->dtype)
            return kcap_error_set(err, KCAP_ERR_SHAPE, "%s: dtype %s, the call description "
                                  "gives %s (%s)", full, kcap_dtype_name(t->dtype),
                                  kcap_dtype_name(dt), a->dtype);
        if (t->ndim != a->ndim)
            return kcap_error_set(err, KCAP_ERR_SHAPE, "%s: rank %d, the call description gives "
                                  "%d", full, t->ndim, a->ndim);
        for (int k = 0; k < a->ndim; k++) {
            int64_t v;
            rc = kcap_expr_eval(d, s, a->shape[k], &v, err);
            if (rc == KCAP_ERR_UNSUPPORTED && headers_only)
                continue;
            if (rc) {
                kcap_error_prefix(err, "%s: dimension %d", full, k);
                return rc;
            }
            if (v != t->shape[k]) {
                char got[80];
                fmt_shape(got, sizeof got, t->ndim, t->shape);
                return kcap_error_set(err, KCAP_ERR_SHAPE, "%s: shape %s, but dimension %d should "
                                      "be %s = %lld", full, got, k, a->shape[k], (long long)v);
            }
        }
        /* the stride scalars are checked with or without the recorded `strides` attribute
         * (without it, check said OK to a negative stride that replay then refused) */
        if (a->gather == KCAP_GATHER_STRIDED) {
            int64_t st[KCAP_MAX_DIMS];
            rc = kcap_arg_dims(d, a, s, a->strides, "stride", st, err);
            if (rc == KCAP_ERR_UNSUPPORTED && headers_only)
                continue;
            if (rc)
                return rc;
            for (int k = 0; t->has_strides && k < a->ndim; k++)
                if (st[k] != t->strides[k])
                    return kcap_error_set(err, KCAP_ERR_SHAPE, "%s: recorded stride %d is %lld "
                                          "but %s = %lld", full, k, (long long)t->strides[k],
                                          a->strides[k], (long long)st[k]);
            if (kcap_span_elems(t->ndim, t->shape, st) < 0)
                return kcap_error_set(err, KCAP_ERR_SHAPE, "%s: negative or overflowing "
                                      "strides", full);
        }
        if (a->gather == KCAP_GATHER_ROWS && !headers_only && t->data &&
            (rc = check_rows(d, a, t, s, full, NULL, err)))
            return rc;
    }
    return KCAP_OK;
}

int kcap_call_validate(const kcap_call_desc *d, const kcap_snapshot *snap, kcap_error *err)
{
    return kcap_call_validate_ex(d, snap, 0, err);
}

int kcap_call_check_row_hashes(const kcap_call_desc *d, const kcap_snapshot *s,
                               const char *name, kcap_dir dir, const uint64_t *row_hash,
                               kcap_error *err)
{
    const kcap_arg_desc *a = find_arg(d, name, 1, dir);
    const kcap_tensor *t = kcap_snapshot_tensor(s, name, dir);
    if (!a || !t || a->gather != KCAP_GATHER_ROWS || !row_hash)
        return KCAP_OK;
    char full[96];
    snprintf(full, sizeof full, "/%s/%s", dir == KCAP_DIR_IN ? "inputs" : "outputs", name);
    return check_rows(d, a, t, s, full, row_hash, err);
}
