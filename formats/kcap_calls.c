/*
 * kcap_calls.c — the registry of call descriptions and the few accessors capture needs
 * without the rest of the engine. The descriptions themselves live next to the ABI they
 * describe (kernels/vattn_desc.c, one per line of kernels/vattn_hooks.def); tests and
 * experiments may register more at run time.
 */
#include "kcap_calls_internal.h"

#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define calls kcap_builtin_calls
#define NBUILTIN kcap_builtin_count
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

const kcap_arg_desc *kcap_call_arg(const kcap_call_desc *d, const char *name)
{
    for (int i = 0; d && name && i < d->nargs; i++)
        if (!strcmp(d->args[i].name, name))
            return &d->args[i];
    return NULL;
}

const void *kcap_call_tensor_ptr(const kcap_call_desc *d, const void *args, const char *name)
{
    const kcap_arg_desc *a = kcap_call_arg(d, name);
    return a && a->field == KCAP_F_PTR ? kcap_field_get_ptr(args, a) : NULL;
}

int kcap_call_record_scalars(const kcap_call_desc *d, const void *args, kcap_snapshot *snap,
                             kcap_error *err)
{
    for (int i = 0; i < d->nargs; i++) {
        const kcap_arg_desc *a = &d->args[i];
        if (a->kind != KCAP_ARG_SCALAR)
            continue;
        int rc = a->field == KCAP_F_F32
                     ? kcap_snapshot_add_float(snap, a->name, kcap_field_get_float(args, a))
                     : kcap_snapshot_add_int(snap, a->name, kcap_field_get_int(args, a));
        if (rc)
            return kcap_error_set(err, rc, "%s: cannot record the scalar (already recorded?)",
                                  a->name);
    }
    return KCAP_OK;
}

int kcap_call_elem_size(const kcap_call_desc *d, const kcap_arg_desc *a, const kcap_snapshot *s,
                        size_t *out, kcap_error *err)
{
    kcap_dtype dt;
    int rc = kcap_arg_dtype(d, a, s, &dt, err);
    if (rc)
        return rc;
    *out = kcap_dtype_size(dt);
    return KCAP_OK;
}

int64_t kcap_call_pool_rows(const kcap_call_desc *d, const void *args, kcap_error *err)
{
    for (int i = 0; d && args && i < d->nargs; i++) {
        const kcap_arg_desc *a = &d->args[i];
        if (a->gather != KCAP_GATHER_ROWS || !a->pool_rows)
            continue;
        kcap_snapshot *s = kcap_snapshot_create();
        int64_t v = 0;
        if (!s || kcap_call_record_scalars(d, args, s, err) ||
            kcap_expr_eval(d, s, a->pool_rows, &v, err) || v < 0)
            v = 0;
        kcap_snapshot_free(s);
        return v;
    }
    return 0;
}

int kcap_call_tokens_per_request(const kcap_call_desc *d, const kcap_snapshot *s,
                                 const char *tensor, int64_t *out)
{
    const kcap_arg_desc *a = kcap_call_arg(d, tensor);
    kcap_error err = {0};
    int64_t n;
    if (!a || !a->token_major || !d->tokens_per_request ||
        kcap_expr_eval(d, s, d->tokens_per_request, &n, &err) || n < 1)
        return 0;
    *out = n;
    return 1;
}
