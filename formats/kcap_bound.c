/*
 * kcap_bound.c — the byte bound of recording one call (kcap_call_bound, kcap_calls.h), from
 * the call description alone: the same expressions kcap_call_record() evaluates. A probe
 * snapshot receives the scalars and the few index tensors whose VALUES appear in shapes
 * (`kv_indptr[bs]`), read through the caller's fault-safe memory ops; every tensor's shape is
 * then evaluated against it. Where a dtype depends on a field ("@index_type:int32,int64") the
 * largest candidate is used; a strided view counts its whole span as record's temporary. Here
 * beside record because it must follow record's rules exactly (capture reserves this many
 * bytes before copying anything).
 */
#include "kcap_calls_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KCAP_PROBE_MAX (1u << 20)        /* an index tensor read for its values, at most */
#define KCAP_SPAN_SLACK ((int64_t)64 << 20) /* record's rule for a span copy (kcap_record.c) */

/* Element size of a tensor: its dtype, or the largest of an "@field:a,b" list. */
static size_t elem_size(const kcap_arg_desc *a)
{
    const char *s = a->dtype;
    if (!s)
        return 0;
    if (s[0] != '@')
        return kcap_dtype_size(kcap_dtype_from_name(s));
    const char *p = strchr(s, ':');
    size_t best = 0;
    while (p && *p) {
        p++;
        const char *c = strchr(p, ',');
        char name[32];
        size_t len = c ? (size_t)(c - p) : strlen(p);
        if (len >= sizeof name)
            return 0;
        memcpy(name, p, len);
        name[len] = '\0';
        size_t es = kcap_dtype_size(kcap_dtype_from_name(name));
        if (es > best)
            best = es;
        p = c;
    }
    return best;
}

/* 1 if some expression of the description indexes tensor `name` ("name["). */
static int values_needed(const kcap_call_desc *d, const char *name)
{
    char key[72];
    snprintf(key, sizeof key, "%s[", name);
    for (int i = 0; i < d->nderived; i++)
        if (strstr(d->derived[i], key))
            return 1;
    for (int i = 0; i < d->nargs; i++)
        for (int k = 0; k < d->args[i].ndim; k++)
            if ((d->args[i].shape[k] && strstr(d->args[i].shape[k], key)) ||
                (d->args[i].strides[k] && strstr(d->args[i].strides[k], key)))
                return 1;
    return 0;
}

/* a * b, saturating at SIZE_MAX. */
static size_t mul_sat(size_t a, size_t b)
{
    size_t r;
    return __builtin_mul_overflow(a, b, &r) ? SIZE_MAX : r;
}
static size_t add_sat(size_t a, size_t b) { return a + b < a ? SIZE_MAX : a + b; }

int kcap_call_bound(const kcap_call_desc *d, const void *args, const kcap_mem_ops *mem,
                    size_t gather_scratch, size_t *bytes, kcap_error *err)
{
    kcap_snapshot *s = kcap_snapshot_create();
    if (!s)
        return kcap_error_set(err, KCAP_ERR_NOMEM, "out of memory");
    int rc = KCAP_OK;
    for (int i = 0; i < d->nargs && !rc; i++) {
        const kcap_arg_desc *a = &d->args[i];
        if (a->kind != KCAP_ARG_SCALAR)
            continue;
        rc = a->field == KCAP_F_F32 ? kcap_snapshot_add_float(s, a->name, kcap_field_get_float(args, a))
                                    : kcap_snapshot_add_int(s, a->name, kcap_field_get_int(args, a));
    }
    size_t total = 4096, temp = 0;
    for (int i = 0; i < d->nargs && !rc; i++) {
        const kcap_arg_desc *a = &d->args[i];
        if (a->kind != KCAP_ARG_IN && a->kind != KCAP_ARG_OUT)
            continue;
        const void *ptr = kcap_field_get_ptr(args, a);
        if (!ptr)
            continue; /* absent (optional) or refused by record */
        int64_t shape[KCAP_MAX_DIMS], strides[KCAP_MAX_DIMS];
        size_t es = elem_size(a);
        if (!es) {
            rc = kcap_error_set(err, KCAP_ERR_SHAPE, "%s: unknown dtype", a->name);
            break;
        }
        if ((rc = kcap_arg_dims(d, a, s, a->shape, "dimension", shape, err)))
            break;
        size_t n = es;
        for (int k = 0; k < a->ndim; k++)
            n = mul_sat(n, (size_t)shape[k]);
        total = add_sat(total, add_sat(n, 512));
        size_t t = 0;
        if (a->gather == KCAP_GATHER_STRIDED) {
            if ((rc = kcap_arg_dims(d, a, s, a->strides, "stride", strides, err)))
                break;
            int64_t el = kcap_span_elems(a->ndim, shape, strides);
            size_t span = el < 0 ? SIZE_MAX : mul_sat((size_t)el, es);
            if (span <= add_sat(mul_sat(4, n), (size_t)KCAP_SPAN_SLACK))
                t = span;
        } else if (a->gather == KCAP_GATHER_ROWS) {
            t = add_sat(mul_sat((size_t)shape[0], sizeof(int64_t)), gather_scratch);
        }
        if (t > temp)
            temp = t;
        if (a->kind == KCAP_ARG_IN && a->gather == KCAP_GATHER_DENSE && values_needed(d, a->name)) {
            /* shapes read this tensor's values: copy it into the probe (small by nature) */
            if (n > KCAP_PROBE_MAX) {
                rc = kcap_error_set(err, KCAP_ERR_SHAPE, "%s: %zu bytes, too large to size", a->name, n);
                break;
            }
            void *dst = NULL;
            rc = kcap_snapshot_add_tensor(s, a->name, KCAP_DIR_IN, kcap_dtype_from_name(a->dtype),
                                          a->ndim, shape, NULL, NULL, &dst);
            if (!rc && mem->copy_to_host(mem->ctx, dst, ptr, n))
                rc = kcap_error_set(err, KCAP_ERR_ARG, "%s: unreadable (%zu bytes at %p)",
                                    a->name, n, ptr);
        }
    }
    kcap_snapshot_free(s);
    if (rc)
        return rc;
    *bytes = add_sat(total, temp);
    return KCAP_OK;
}

