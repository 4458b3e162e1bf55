/*
 * kcap_calls_util.c — small helpers of the call-description engine: dtype selection,
 * evaluating shape/stride expression lists, typed struct field access and the strided
 * view <-> dense copy used by record, rebuild and fetch.
 */
#include "kcap_calls_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int kcap_arg_dtype(const kcap_call_desc *d, const kcap_arg_desc *a, const kcap_snapshot *s,
                   kcap_dtype *out, kcap_error *err)
{
    const char *spec = a->dtype;
    if (!spec)
        return kcap_error_set(err, KCAP_ERR_ARG, "%s: no dtype in the description", a->name);
    if (spec[0] != '@') {
        *out = kcap_dtype_from_name(spec);
        return *out ? KCAP_OK : kcap_error_set(err, KCAP_ERR_ARG, "%s: unknown dtype %s",
                                               a->name, spec);
    }
    const char *colon = strchr(spec, ':');
    char field[KCAP_NAME_MAX];
    if (!colon || (size_t)(colon - spec - 1) >= sizeof field)
        return kcap_error_set(err, KCAP_ERR_ARG, "%s: bad dtype spec %s", a->name, spec);
    snprintf(field, sizeof field, "%.*s", (int)(colon - spec - 1), spec + 1);
    int64_t sel;
    int rc = kcap_eval_full(d, s, field, &sel, err, 0);
    if (rc)
        return rc;
    const char *p = colon + 1;
    for (int64_t i = 0; *p; i++) {
        const char *c = strchr(p, ',');
        size_t len = c ? (size_t)(c - p) : strlen(p);
        if (i == sel) {
            char name[32];
            snprintf(name, sizeof name, "%.*s", (int)len, p);
            *out = kcap_dtype_from_name(name);
            return *out ? KCAP_OK
                        : kcap_error_set(err, KCAP_ERR_ARG, "%s: unknown dtype %s", a->name, name);
        }
        if (!c)
            break;
        p = c + 1;
    }
    return kcap_error_set(err, KCAP_ERR_SHAPE, "%s: %s = %lld selects no dtype of '%s'",
                          a->name, field, (long long)sel, colon + 1);
}

int kcap_arg_dims(const kcap_call_desc *d, const kcap_arg_desc *a, const kcap_snapshot *s,
                  const char *const *exprs, const char *what, int64_t *out, kcap_error *err)
{
    for (int i = 0; i < a->ndim; i++) {
        if (!exprs[i])
            return kcap_error_set(err, KCAP_ERR_ARG, "%s: %s %d missing in the description",
                                  a->name, what, i);
        int rc = kcap_eval_full(d, s, exprs[i], &out[i], err, 0);
        if (rc) {
            kcap_error_prefix(err, "%s: %s %d", a->name, what, i);
            return rc;
        }
        if (out[i] < 0)
            return kcap_error_set(err, KCAP_ERR_SHAPE, "%s: %s %d = %s = %lld is negative",
                                  a->name, what, i, exprs[i], (long long)out[i]);
    }
    return KCAP_OK;
}

int64_t kcap_field_get_int(const void *args, const kcap_arg_desc *a)
{
    const char *p = (const char *)args + a->offset;
    switch (a->field) {
    case KCAP_F_I32: { int32_t v; memcpy(&v, p, 4); return v; }
    case KCAP_F_U32: { uint32_t v; memcpy(&v, p, 4); return v; }
    case KCAP_F_I64: { int64_t v; memcpy(&v, p, 8); return v; }
    default: return 0;
    }
}

double kcap_field_get_float(const void *args, const kcap_arg_desc *a)
{
    float v;
    memcpy(&v, (const char *)args + a->offset, 4);
    return v;
}

void *kcap_field_get_ptr(const void *args, const kcap_arg_desc *a)
{
    void *v;
    memcpy(&v, (const char *)args + a->offset, sizeof v);
    return v;
}

void kcap_field_set_int(void *args, const kcap_arg_desc *a, int64_t v)
{
    char *p = (char *)args + a->offset;
    switch (a->field) {
    case KCAP_F_I32: { int32_t x = (int32_t)v; memcpy(p, &x, 4); break; }
    case KCAP_F_U32: { uint32_t x = (uint32_t)v; memcpy(p, &x, 4); break; }
    case KCAP_F_I64: memcpy(p, &v, 8); break;
    case KCAP_F_F32: { float x = (float)v; memcpy(p, &x, 4); break; }
    default: break;
    }
}

void kcap_field_set_float(void *args, const kcap_arg_desc *a, double v)
{
    float x = (float)v;
    memcpy((char *)args + a->offset, &x, 4);
}

void kcap_field_set_ptr(void *args, const kcap_arg_desc *a, void *p)
{
    memcpy((char *)args + a->offset, &p, sizeof p);
}

int64_t kcap_span_elems(int ndim, const int64_t *shape, const int64_t *strides)
{
    int64_t span = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] == 0)
            return 0;
        int64_t t;
        if (strides[i] < 0 || __builtin_mul_overflow(shape[i] - 1, strides[i], &t) ||
            __builtin_add_overflow(span, t, &span))
            return -1;
    }
    return span;
}

void kcap_strided_copy(uint8_t *dense, uint8_t *span, int ndim, const int64_t *shape,
                       const int64_t *strides, size_t es, int to_dense)
{
    if (ndim == 0) {
        if (to_dense)
            memcpy(dense, span, es);
        else
            memcpy(span, dense, es);
        return;
    }
    int64_t idx[KCAP_MAX_DIMS] = {0}, nrun = 1;
    for (int i = 0; i < ndim - 1; i++)
        nrun *= shape[i];
    int64_t inner = shape[ndim - 1], istr = strides[ndim - 1];
    if (inner == 0)
        return;
    for (int64_t r = 0; r < nrun; r++) {
        int64_t off = 0;
        for (int i = 0; i < ndim - 1; i++)
            off += idx[i] * strides[i];
        uint8_t *dp = dense + (size_t)(r * inner) * es, *sp = span + (size_t)off * es;
        if (istr == 1) {
            if (to_dense)
                memcpy(dp, sp, (size_t)inner * es);
            else
                memcpy(sp, dp, (size_t)inner * es);
        } else {
            for (int64_t j = 0; j < inner; j++) {
                if (to_dense)
                    memcpy(dp + (size_t)j * es, sp + (size_t)(j * istr) * es, es);
                else
                    memcpy(sp + (size_t)(j * istr) * es, dp + (size_t)j * es, es);
            }
        }
        for (int i = ndim - 2; i >= 0; i--) {
            if (++idx[i] < shape[i])
                break;
            idx[i] = 0;
        }
    }
}
