/*
 * kcap_rebuild.c — turn a snapshot back into a callable args struct (kcap_call_rebuild):
 * every input in fresh memory from the mem ops, laid out with its original strides and
 * the gaps poisoned (0xFF), every output poisoned, and a ROWS pool either at its original
 * slot ids or remapped to a compact pool (distinct slots keep their relative order;
 * indices and the pool-size scalar rewritten). Also fetches outputs back to dense host
 * buffers (kcap_call_fetch_output).
 */
#include "kcap_calls_internal.h"
#include "kcap_fmt_internal.h" /* kcap_read_limit_bytes */

#include <stdlib.h>
#include <string.h>

#define POISON 0xFF
#define RUN_MAX_BYTES ((size_t)64 << 20)

typedef struct pool_plan {
    const kcap_arg_desc *a;    /* the ROWS argument */
    int64_t *rows;             /* captured slot of stored row i */
    size_t nrows;
    int64_t pool_rows, row_stride;
    int64_t *distinct;         /* sorted distinct slots */
    size_t *first;             /* stored row holding each distinct slot */
    size_t ndistinct;
    int remap;
} pool_plan;

static void plan_free(pool_plan *p)
{
    free(p->rows);
    free(p->distinct);
    free(p->first);
}

static int track(kcap_rebuilt *r, void *p, const kcap_mem_ops *m, kcap_error *err)
{
    if (r->nbufs >= (int)(sizeof r->bufs / sizeof r->bufs[0])) {
        m->release(m->ctx, p);
        return kcap_error_set(err, KCAP_ERR_UNSUPPORTED, "rebuild: more than %d buffers",
                              (int)(sizeof r->bufs / sizeof r->bufs[0]));
    }
    r->bufs[r->nbufs++] = p;
    return KCAP_OK;
}

static void *alloc(kcap_rebuilt *r, const kcap_mem_ops *m, size_t n, const char *name,
                   kcap_error *err)
{
    void *p = m->alloc(m->ctx, n ? n : 1);
    if (!p) {
        kcap_error_set(err, KCAP_ERR_NOMEM, "%s: allocating %zu bytes failed", name, n);
        return NULL;
    }
    return track(r, p, m, err) ? NULL : p;
}

typedef struct {
    int64_t slot;
    size_t i;
} slot_row;

static int cmp_slot_row(const void *x, const void *y)
{
    const slot_row *a = x, *b = y;
    if (a->slot != b->slot)
        return a->slot < b->slot ? -1 : 1;
    return a->i < b->i ? -1 : a->i > b->i;
}

static int plan_pool(const kcap_call_desc *d, const kcap_arg_desc *a, const kcap_snapshot *s,
                     pool_plan *p, kcap_error *err)
{
    memset(p, 0, sizeof *p);
    p->a = a;
    int rc = kcap_rows_of(d, a, s, &p->rows, &p->nrows, &p->pool_rows, &p->row_stride, err);
    if (rc)
        return rc;
    slot_row *sr = malloc((p->nrows ? p->nrows : 1) * sizeof *sr);
    p->distinct = malloc((p->nrows ? p->nrows : 1) * sizeof *p->distinct);
    p->first = malloc((p->nrows ? p->nrows : 1) * sizeof *p->first);
    if (!sr || !p->distinct || !p->first) {
        free(sr);
        return kcap_error_set(err, KCAP_ERR_NOMEM, "%s: out of memory", a->name);
    }
    for (size_t i = 0; i < p->nrows; i++) {
        /* a resealed file can name any slot: rows are written at slot * row_stride into a
           pool of pool_rows rows, so every slot must be inside it */
        if (p->rows[i] < 0 || p->rows[i] >= p->pool_rows) {
            free(sr);
            return kcap_error_set(err, KCAP_ERR_CORRUPT, "%s: row %zu names slot %lld, outside "
                                  "the pool of %lld rows", a->name, i, (long long)p->rows[i],
                                  (long long)p->pool_rows);
        }
        sr[i] = (slot_row){p->rows[i], i};
    }
    qsort(sr, p->nrows, sizeof *sr, cmp_slot_row);
    for (size_t i = 0; i < p->nrows; i++)
        if (!i || sr[i].slot != sr[i - 1].slot) {
            p->distinct[p->ndistinct] = sr[i].slot;
            p->first[p->ndistinct++] = sr[i].i;
        }
    free(sr);
    return KCAP_OK;
}

static int64_t new_slot(const pool_plan *p, int64_t slot)
{
    size_t lo = 0, hi = p->ndistinct;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (p->distinct[mid] < slot)
            lo = mid + 1;
        else
            hi = mid;
    }
    return (int64_t)lo;
}

/* Writes the distinct rows into the pool at `base`, coalescing runs of consecutive slots
 * into one host image each (gaps between rows poisoned). */
static int fill_pool(const pool_plan *p, const kcap_tensor *t, const kcap_mem_ops *m,
                     uint8_t *base, kcap_error *err)
{
    size_t es = kcap_dtype_size(t->dtype);
    size_t row_bytes = p->nrows ? t->nbytes / p->nrows : 0;
    size_t pstride = (size_t)p->row_stride * es;
    size_t max_run = pstride ? RUN_MAX_BYTES / pstride : 1;
    if (max_run < 1)
        max_run = 1;
    uint8_t *img = malloc(max_run * pstride + row_bytes);
    if (!img)
        return kcap_error_set(err, KCAP_ERR_NOMEM, "%s: out of memory", t->name);
    int rc = KCAP_OK;
    for (size_t i = 0; i < p->ndistinct && !rc;) {
        size_t n = 1;
        int64_t s0 = p->remap ? (int64_t)i : p->distinct[i];
        while (i + n < p->ndistinct && n < max_run &&
               (p->remap || p->distinct[i + n] == s0 + (int64_t)n))
            n++;
        size_t bytes = (n - 1) * pstride + row_bytes;
        memset(img, POISON, bytes);
        for (size_t k = 0; k < n; k++)
            memcpy(img + k * pstride, (const uint8_t *)t->data + p->first[i + k] * row_bytes,
                   row_bytes);
        if (m->copy_from_host(m->ctx, base + (size_t)s0 * pstride, img, bytes))
            rc = kcap_error_set(err, KCAP_ERR_CUDA, "%s: copying rows to the pool failed",
                                t->name);
        i += n;
    }
    free(img);
    return rc;
}

static int build_pool(const pool_plan *p, const kcap_tensor *t, const kcap_mem_ops *m,
                      kcap_rebuilt *r, void **out, kcap_error *err)
{
    size_t es = kcap_dtype_size(t->dtype);
    size_t row_bytes = p->nrows ? t->nbytes / p->nrows : (size_t)p->row_stride * es;
    int64_t rows = p->remap ? (int64_t)p->ndistinct : p->pool_rows;
    size_t bytes = 0, span;
    if (rows < 0 || p->row_stride < 0 ||
        (rows && (__builtin_mul_overflow((size_t)(rows - 1), (size_t)p->row_stride * es, &span) ||
                  __builtin_add_overflow(span, row_bytes, &bytes))))
        return kcap_error_set(err, KCAP_ERR_CORRUPT, "%s: a pool of %lld rows %lld elements "
                              "apart does not fit in memory", t->name, (long long)rows,
                              (long long)p->row_stride);
    /* the pool is poisoned whole, so every byte of it gets touched: no larger than what a
       reader accepts (a declared num_slots alone must not exhaust the machine) */
    if (bytes > kcap_read_limit_bytes())
        return kcap_error_set(err, KCAP_ERR_NOMEM, "%s: a pool of %lld rows (%zu bytes) is more "
                              "than the %llu bytes a reader accepts (KCAP_READ_MAX_BYTES; "
                              "--pool remap needs only the referenced rows)", t->name,
                              (long long)rows, bytes, (unsigned long long)kcap_read_limit_bytes());
    uint8_t *base = alloc(r, m, bytes, t->name, err);
    if (!base)
        return err ? err->code : KCAP_ERR_NOMEM;
    if (bytes && m->fill(m->ctx, base, POISON, bytes))
        return kcap_error_set(err, KCAP_ERR_CUDA, "%s: poisoning the pool failed", t->name);
    r->pool_bytes += bytes;
    r->pool_remapped |= p->remap;
    *out = base;
    return fill_pool(p, t, m, base, err);
}

/* A strided view's strides and the bytes its span covers, checked: the view is poisoned
 * whole, so every byte of the span is touched. */
static int strided_span(const kcap_call_desc *d, const kcap_arg_desc *a, const kcap_tensor *t,
                        const kcap_snapshot *s, int64_t *strides, size_t *bytes, kcap_error *err)
{
    size_t es = kcap_dtype_size(t->dtype);
    int rc = kcap_arg_dims(d, a, s, a->strides, "stride", strides, err);
    if (rc)
        return rc;
    int64_t span = kcap_span_elems(t->ndim, t->shape, strides);
    if (span < 0 || (uint64_t)span > SIZE_MAX / es / 2 || (uint64_t)span * es > kcap_read_limit_bytes())
        return kcap_error_set(err, KCAP_ERR_SHAPE, "%s: bad strides (a view spanning %lld elements)", a->name,
                              (long long)span);
    *bytes = (size_t)span * es;
    return KCAP_OK;
}

static int build_input(const kcap_call_desc *d, const kcap_arg_desc *a, const kcap_tensor *t,
                       const kcap_snapshot *s, const kcap_mem_ops *m, const pool_plan *plans,
                       int nplans, kcap_rebuilt *r, void **out, kcap_error *err)
{
    size_t es = kcap_dtype_size(t->dtype);
    const pool_plan *remap_of = NULL;
    for (int i = 0; i < nplans; i++)
        if (plans[i].remap && plans[i].a->index_arg && !strcmp(plans[i].a->index_arg, a->name))
            remap_of = &plans[i];
    if (a->gather == KCAP_GATHER_STRIDED) {
        int64_t strides[KCAP_MAX_DIMS];
        size_t bytes;
        int rc = strided_span(d, a, t, s, strides, &bytes, err);
        if (rc)
            return rc;
        uint8_t *img = malloc(bytes ? bytes : 1);
        if (!img)
            return kcap_error_set(err, KCAP_ERR_NOMEM, "%s: out of memory", a->name);
        memset(img, POISON, bytes);
        if (bytes)
            kcap_strided_copy(t->data, img, t->ndim, t->shape, strides, es, 0);
        void *p = alloc(r, m, bytes, a->name, err);
        if (p && bytes && m->copy_from_host(m->ctx, p, img, bytes))
            rc = kcap_error_set(err, KCAP_ERR_CUDA, "%s: copying in failed", a->name);
        free(img);
        *out = p;
        return p ? rc : (err ? err->code : KCAP_ERR_NOMEM);
    }
    void *p = alloc(r, m, t->nbytes, a->name, err);
    if (!p)
        return err ? err->code : KCAP_ERR_NOMEM;
    *out = p;
    const void *src = t->data;
    void *tmp = NULL;
    if (remap_of) { /* rewrite slot ids into the compact pool, same dtype */
        tmp = malloc(t->nbytes ? t->nbytes : 1);
        if (!tmp)
            return kcap_error_set(err, KCAP_ERR_NOMEM, "%s: out of memory", a->name);
        for (size_t i = 0; i < remap_of->nrows; i++) {
            int64_t v = new_slot(remap_of, remap_of->rows[i]);
            if (t->dtype == KCAP_DT_I32)
                ((int32_t *)tmp)[i] = (int32_t)v;
            else
                ((int64_t *)tmp)[i] = v;
        }
        src = tmp;
    }
    int rc = KCAP_OK;
    if (t->nbytes && m->copy_from_host(m->ctx, p, src, t->nbytes))
        rc = kcap_error_set(err, KCAP_ERR_CUDA, "%s: copying in failed", a->name);
    free(tmp);
    return rc;
}

static int build_output(const kcap_call_desc *d, const kcap_arg_desc *a, const kcap_tensor *t,
                        const kcap_snapshot *s, const kcap_mem_ops *m, kcap_rebuilt *r,
                        void **out, kcap_error *err)
{
    size_t bytes = t->nbytes;
    if (a->gather == KCAP_GATHER_ROWS)
        return kcap_error_set(err, KCAP_ERR_UNSUPPORTED, "%s: ROWS outputs are not supported",
                              a->name);
    if (a->gather == KCAP_GATHER_STRIDED) {
        int64_t strides[KCAP_MAX_DIMS];
        int rc = strided_span(d, a, t, s, strides, &bytes, err);
        if (rc)
            return rc;
    }
    void *p = alloc(r, m, bytes, a->name, err);
    if (!p)
        return err ? err->code : KCAP_ERR_NOMEM;
    *out = p;
    if (bytes && m->fill(m->ctx, p, POISON, bytes))
        return kcap_error_set(err, KCAP_ERR_CUDA, "%s: poisoning failed", a->name);
    return KCAP_OK;
}

int kcap_call_rebuild(const kcap_call_desc *d, const kcap_snapshot *snap,
                      const kcap_mem_ops *mem, kcap_pool_mode pool_mode, size_t max_pool_bytes,
                      kcap_rebuilt *out, kcap_error *err)
{
    if (!d || !snap || !mem || !out || !mem->alloc || !mem->release || !mem->fill ||
        !mem->copy_from_host)
        return kcap_error_set(err, KCAP_ERR_ARG, "kcap_call_rebuild: bad argument");
    memset(out, 0, sizeof *out);
    int rc = kcap_call_validate(d, snap, err);
    if (rc)
        return rc;
    out->args = calloc(1, d->args_size);
    if (!out->args)
        return kcap_error_set(err, KCAP_ERR_NOMEM, "rebuild: out of memory");
    pool_plan plans[4];
    int nplans = 0;
    /* scalars and ignored fields */
    for (int i = 0; i < d->nargs && !rc; i++) {
        const kcap_arg_desc *a = &d->args[i];
        if (a->kind == KCAP_ARG_SCALAR) {
            const kcap_scalar *sc = kcap_snapshot_scalar(snap, a->name);
            if (sc->type == KCAP_SC_FLOAT)
                kcap_field_set_float(out->args, a, sc->f);
            else
                kcap_field_set_int(out->args, a, sc->i);
        } else if (a->kind == KCAP_ARG_IGNORED) {
            int64_t v = 0;
            if (a->fill && (rc = kcap_expr_eval(d, snap, a->fill, &v, err)))
                break;
            if (a->field != KCAP_F_PTR)
                kcap_field_set_int(out->args, a, v);
        } else if (a->gather == KCAP_GATHER_ROWS && kcap_snapshot_tensor(snap, a->name, KCAP_DIR_IN)) {
            if (nplans == 4) {
                rc = kcap_error_set(err, KCAP_ERR_UNSUPPORTED, "rebuild: more than 4 pools");
                break;
            }
            pool_plan *p = &plans[nplans];
            if ((rc = plan_pool(d, a, snap, p, err))) {
                plan_free(p);
                break;
            }
            nplans++;
            const kcap_tensor *t = kcap_snapshot_tensor(snap, a->name, KCAP_DIR_IN);
            size_t row_bytes = p->nrows ? t->nbytes / p->nrows : 0;
            uint64_t full = p->pool_rows ? (uint64_t)(p->pool_rows - 1) * (uint64_t)p->row_stride *
                                                   kcap_dtype_size(t->dtype) + row_bytes
                                         : 0;
            p->remap = pool_mode == KCAP_POOL_REMAP ||
                       (pool_mode == KCAP_POOL_AUTO && full > max_pool_bytes);
        }
    }
    /* tensors */
    for (int i = 0; i < d->nargs && !rc; i++) {
        const kcap_arg_desc *a = &d->args[i];
        if (a->kind != KCAP_ARG_IN && a->kind != KCAP_ARG_OUT)
            continue;
        const kcap_tensor *t = kcap_snapshot_tensor(
            snap, a->name, a->kind == KCAP_ARG_IN ? KCAP_DIR_IN : KCAP_DIR_OUT);
        void *p = NULL;
        if (t && a->kind == KCAP_ARG_OUT)
            rc = build_output(d, a, t, snap, mem, out, &p, err);
        else if (t && a->gather == KCAP_GATHER_ROWS) {
            for (int k = 0; k < nplans; k++)
                if (plans[k].a == a)
                    rc = build_pool(&plans[k], t, mem, out, &p, err);
        } else if (t)
            rc = build_input(d, a, t, snap, mem, plans, nplans, out, &p, err);
        kcap_field_set_ptr(out->args, a, p);
    }
    /* a remapped pool changes the pool-size scalar when it is a plain field name */
    for (int k = 0; k < nplans && !rc; k++) {
        if (!plans[k].remap)
            continue;
        for (int i = 0; i < d->nargs; i++)
            if (d->args[i].kind == KCAP_ARG_SCALAR && !strcmp(d->args[i].name, plans[k].a->pool_rows))
                kcap_field_set_int(out->args, &d->args[i], (int64_t)plans[k].ndistinct);
    }
    for (int k = 0; k < nplans; k++)
        plan_free(&plans[k]);
    if (rc) {
        kcap_error_prefix(err, "rebuild %s", d->name);
        kcap_rebuilt_free(out, mem);
    }
    return rc;
}

void kcap_rebuilt_free(kcap_rebuilt *r, const kcap_mem_ops *mem)
{
    if (!r)
        return;
    for (int i = 0; i < r->nbufs; i++)
        if (mem && mem->release)
            mem->release(mem->ctx, r->bufs[i]);
    free(r->args);
    memset(r, 0, sizeof *r);
}

int kcap_call_fetch_output(const kcap_call_desc *d, const kcap_rebuilt *r,
                           const kcap_snapshot *snap, const char *name,
                           const kcap_mem_ops *mem, void *dst_host, kcap_error *err)
{
    if (!d || !r || !r->args || !snap || !name || !mem || !dst_host)
        return kcap_error_set(err, KCAP_ERR_ARG, "kcap_call_fetch_output: bad argument");
    const kcap_arg_desc *a = NULL;
    for (int i = 0; i < d->nargs; i++)
        if (d->args[i].kind == KCAP_ARG_OUT && !strcmp(d->args[i].name, name))
            a = &d->args[i];
    const kcap_tensor *t = kcap_snapshot_tensor(snap, name, KCAP_DIR_OUT);
    if (!a || !t)
        return kcap_error_set(err, KCAP_ERR_ARG, "%s: no output named %s", d->name, name);
    const void *p = kcap_field_get_ptr(r->args, a);
    if (!p)
        return kcap_error_set(err, KCAP_ERR_ARG, "%s: output %s was not rebuilt", d->name, name);
    size_t es = kcap_dtype_size(t->dtype);
    if (a->gather != KCAP_GATHER_STRIDED) {
        if (t->nbytes && mem->copy_to_host(mem->ctx, dst_host, p, t->nbytes))
            return kcap_error_set(err, KCAP_ERR_CUDA, "%s: copying out failed", name);
        return KCAP_OK;
    }
    int64_t strides[KCAP_MAX_DIMS];
    size_t bytes;
    int rc = strided_span(d, a, t, snap, strides, &bytes, err);
    if (rc || !bytes)
        return rc;
    uint8_t *tmp = malloc(bytes);
    if (!tmp)
        return kcap_error_set(err, KCAP_ERR_NOMEM, "%s: out of memory", name);
    if (mem->copy_to_host(mem->ctx, tmp, p, bytes))
        rc = kcap_error_set(err, KCAP_ERR_CUDA, "%s: copying out failed", name);
    else
        kcap_strided_copy(dst_host, tmp, t->ndim, t->shape, strides, es, 1);
    free(tmp);
    return rc;
}
