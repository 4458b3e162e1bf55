/*
 * kcap_stage_layout.c — the staging layout of a call from its description (see the header):
 * every tensor argument becomes a segment; the scalars alone decide the static ones, and a
 * first dimension that is an element of another input tensor (directly, "mask_indptr[bs]",
 * or through a derived symbol, "nnz" = "kv_indptr[bs]") becomes a count the device reads.
 * It runs on the host's calling thread: its buffers stay small and the one error record
 * lives on the heap (capture uses at most 4 KiB of the caller's stack).
 */
#include "kcap_stage_layout.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define R16(x) (((x) + 15) & ~15ll)

long long kcap_seg_rows(const kseg *g, const long long *counts)
{
    return g->counter == KCAP_SEG_STATIC ? g->nrows : counts[g->counter];
}

long long kcap_seg_offset(const kcap_layout *l, int k, const long long *counts)
{
    if (l->seg_in[k].counter == KCAP_SEG_STATIC)
        return l->seg_in[k].dst_off;
    long long off = l->fixed_bytes;
    for (int i = 0; i < k; i++)
        if (l->seg_in[i].counter != KCAP_SEG_STATIC)
            off += R16(counts[l->seg_in[i].counter] * l->seg_in[i].row_bytes);
    return off;
}

unsigned long long kcap_layout_bytes(const kcap_layout *l, const long long *counts)
{
    return (unsigned long long)kcap_seg_offset(l, l->nin, counts);
}

/* The expression of a derived symbol, or the text itself. */
static const char *expand(const kcap_call_desc *d, const char *e, char *buf, size_t n)
{
    size_t len = strlen(e);
    for (int i = 0; i < d->nderived; i++)
        if (!strncmp(d->derived[i], e, len) && d->derived[i][len] == '=') {
            snprintf(buf, n, "%s", d->derived[i] + len + 1);
            return buf;
        }
    return e;
}

/* Index of an earlier input segment by tensor name, or -1. */
static int seg_of(const kcap_layout *l, const char *const *names, const char *name)
{
    for (int k = 0; k < l->nin; k++)
        if (!strcmp(names[k], name))
            return k;
    return -1;
}

/* A first dimension the scalars cannot give: "T[e]" with T an earlier static dense int
 * input, e over scalars: a device count. Its index in l->count_src, or -1. */
static int counted_dim(const kcap_call_desc *d, const kcap_snapshot *s, kcap_layout *l,
                       const char *const *names, const char *expr, kcap_error *err)
{
    char buf[128], name[KCAP_NAME_MAX];
    const char *e = expand(d, expr, buf, sizeof buf);
    const char *br = strchr(e, '[');
    size_t len = br ? (size_t)(br - e) : 0;
    if (!br || !len || len >= sizeof name || e[strlen(e) - 1] != ']')
        return -1;
    memcpy(name, e, len);
    name[len] = '\0';
    char inner[128];
    snprintf(inner, sizeof inner, "%.*s", (int)(strlen(br + 1) - 1), br + 1);
    int k = seg_of(l, names, name);
    int64_t at;
    if (k < 0 || kcap_expr_eval(d, s, inner, &at, err))
        return -1;
    const kseg *g = &l->seg_in[k];
    int es = (int)g->row_bytes; /* a 1-D dense int tensor: one element per row */
    if (g->counter != KCAP_SEG_STATIC || g->n1 != 1 || g->s0 != g->row_bytes ||
        (es != 4 && es != 8) || at < 0 || at >= g->nrows)
        return -1;
    unsigned long long src = g->src + (unsigned long long)at * (unsigned long long)es;
    for (int c = 0; c < l->ncounts; c++)
        if (l->count_src[c] == src)
            return c;
    if (l->ncounts == KCAP_NCOUNTS)
        return -1;
    l->count_src[l->ncounts] = src;
    l->count_size[l->ncounts] = es;
    l->count_arg[l->ncounts] = l->seg_in_arg[k];
    l->count_off[l->ncounts] = (long long)at * es;
    return l->ncounts++;
}

/* One tensor argument as a segment of its phase. */
static int add_seg(const kcap_call_desc *d, const kcap_arg_desc *a, const void *args,
                   const kcap_snapshot *s, kcap_layout *l, const char **names_in,
                   kcap_error *err)
{
    const void *ptr = kcap_call_tensor_ptr(d, args, a->name);
    if (!ptr)
        return a->optional ? 0 : -1;
    int in = a->kind == KCAP_ARG_IN;
    if ((in ? l->nin : l->nout) == KCAP_MAX_SEGS || a->ndim < 1 || a->ndim > 3)
        return -1;
    kcap_dtype dt = KCAP_DT_INVALID;
    if (kcap_arg_dtype(d, a, s, &dt, err))
        return -1;
    const size_t es = kcap_dtype_size(dt);
    if (!es)
        return -1;
    kseg g;
    memset(&g, 0, sizeof g);
    g.src = (uintptr_t)ptr;
    int idx_arg = -1;
    g.counter = KCAP_SEG_STATIC;
    int64_t dims[KCAP_MAX_DIMS], st[KCAP_MAX_DIMS];
    for (int k = 0; k < a->ndim; k++) {
        if (!kcap_expr_eval(d, s, a->shape[k], &dims[k], err) && dims[k] >= 0)
            continue;
        if (k || !in || a->gather == KCAP_GATHER_STRIDED ||
            (g.counter = counted_dim(d, s, l, names_in, a->shape[k], err)) < 0)
            return -1;
        dims[k] = 0;
    }
    long long inner = (long long)es;
    for (int k = 1; k < a->ndim; k++)
        inner *= dims[k];
    g.nrows = dims[0];
    g.row_bytes = inner;
    g.n1 = 1;
    g.s0 = inner;
    if (a->gather == KCAP_GATHER_STRIDED) {
        for (int k = 0; k < a->ndim; k++)
            if (!a->strides[k] || kcap_expr_eval(d, s, a->strides[k], &st[k], err) || st[k] < 0)
                return -1;
        if (st[a->ndim - 1] != 1 && a->ndim > 1)
            return -1;
        g.row_bytes = (long long)es * (a->ndim > 1 ? dims[a->ndim - 1] : 1);
        g.s0 = st[0] * (long long)es;
        if (a->ndim == 3) {
            g.nrows = dims[0] * dims[1];
            g.n1 = dims[1] > 0 ? dims[1] : 1;
            g.s1 = st[1] * (long long)es;
        }
    } else if (a->gather == KCAP_GATHER_ROWS) {
        int k = a->index_arg ? seg_of(l, names_in, a->index_arg) : -1;
        int64_t rs, pool;
        if (k < 0 || !a->row_stride || !a->pool_rows ||
            kcap_expr_eval(d, s, a->row_stride, &rs, err) ||
            kcap_expr_eval(d, s, a->pool_rows, &pool, err))
            return -1;
        const kseg *ix = &l->seg_in[k];
        if (g.row_bytes > KCAP_ZERO_ROW_BYTES) /* an index out of the pool reads the zero row */
            return -1;
        idx_arg = l->seg_in_arg[k];
        g.idx = ix->src;
        g.idx_size = (int)ix->row_bytes;
        g.counter = ix->counter;
        g.nrows = ix->nrows;
        g.s0 = rs * (long long)es;
        g.pool_rows = pool;
    }
    if (g.counter == KCAP_SEG_STATIC) {
        g.dst_off = l->fixed_bytes;
        l->fixed_bytes += R16(g.nrows * g.row_bytes);
    }
    int ai = (int)(a - d->args);
    if (in) {
        names_in[l->nin] = a->name;
        l->seg_in_arg[l->nin] = ai;
        l->seg_idx_arg[l->nin] = idx_arg;
        l->seg_in[l->nin++] = g;
    } else {
        l->seg_out_dtype[l->nout] = (int)dt;
        l->seg_out_arg[l->nout] = ai;
        l->seg_out[l->nout++] = g;
    }
    return 0;
}

static int layout_compute(const kcap_call_desc *d, const void *args, kcap_layout *out)
{
    memset(out, 0, sizeof *out);
    kcap_snapshot *s = kcap_snapshot_create();
    /* the evaluator's messages go to the heap: this runs on the host's (maybe 16 KiB) stack */
    kcap_error *err = calloc(1, sizeof *err);
    int rc = s && err && !kcap_call_record_scalars(d, args, s, err) ? 0 : -1;
    const char *names_in[KCAP_MAX_SEGS];
    /* inputs first: the counted parts follow the fixed part, which holds the outputs too */
    for (int phase = KCAP_ARG_IN; phase <= KCAP_ARG_OUT && !rc; phase++)
        for (int i = 0; i < d->nargs && !rc; i++)
            if ((int)d->args[i].kind == phase)
                rc = add_seg(d, &d->args[i], args, s, out, names_in, err);
    kcap_snapshot_free(s);
    free(err);
    return rc;
}

/* ---- the cache of recent layouts ---- */

#define KCAP_LAYOUT_CACHE 16
#define KCAP_LAYOUT_KEY 256

typedef struct {
    const kcap_call_desc *d;
    size_t keylen;
    unsigned char key[KCAP_LAYOUT_KEY];
    kcap_layout lay;
} kcap_layout_entry;

static kcap_layout_entry g_cache[KCAP_LAYOUT_CACHE];
static int g_cache_n, g_cache_next;
static pthread_mutex_t g_cache_lock = PTHREAD_MUTEX_INITIALIZER;

/* The pointer field at `offset` of an args struct, as a device address. */
static unsigned long long field_ptr(const void *args, size_t offset)
{
    const void *p;
    memcpy(&p, (const char *)args + offset, sizeof p);
    return (uintptr_t)p;
}

/* What a layout depends on: every scalar field's bytes, and which tensors are present. */
static size_t layout_key(const kcap_call_desc *d, const void *args, unsigned char *key)
{
    size_t n = 0;
    for (int i = 0; i < d->nargs; i++) {
        const kcap_arg_desc *a = &d->args[i];
        const unsigned char *f = (const unsigned char *)args + a->offset;
        size_t sz = a->kind == KCAP_ARG_SCALAR
                        ? (a->field == KCAP_F_I64 ? 8 : 4)
                        : a->kind == KCAP_ARG_IN || a->kind == KCAP_ARG_OUT ? 1 : 0;
        if (n + sz > KCAP_LAYOUT_KEY)
            return 0; /* too many fields to key: no caching */
        if (sz == 1)
            key[n] = field_ptr(args, a->offset) != 0;
        else
            memcpy(key + n, f, sz);
        n += sz;
    }
    return n;
}

/* A cached layout made this call's: its own tensor addresses in every segment and count
 * (read at the fields' offsets: this runs on every armed call). */
static void layout_rebase(const kcap_call_desc *d, const void *args, kcap_layout *l)
{
    for (int k = 0; k < l->nin; k++) {
        l->seg_in[k].src = field_ptr(args, d->args[l->seg_in_arg[k]].offset);
        if (l->seg_idx_arg[k] >= 0)
            l->seg_in[k].idx = field_ptr(args, d->args[l->seg_idx_arg[k]].offset);
    }
    for (int k = 0; k < l->nout; k++)
        l->seg_out[k].src = field_ptr(args, d->args[l->seg_out_arg[k]].offset);
    for (int c = 0; c < l->ncounts; c++)
        l->count_src[c] = field_ptr(args, d->args[l->count_arg[c]].offset) +
                          (unsigned long long)l->count_off[c];
}

int kcap_stage_layout(const kcap_call_desc *d, const void *args, kcap_layout *out)
{
    unsigned char key[KCAP_LAYOUT_KEY];
    size_t kl = layout_key(d, args, key);
    /* trylock: a caller never waits for another (it computes the layout itself instead) */
    if (kl && !pthread_mutex_trylock(&g_cache_lock)) {
        for (int i = 0; i < g_cache_n; i++) {
            kcap_layout_entry *e = &g_cache[i];
            if (e->d == d && e->keylen == kl && !memcmp(e->key, key, kl)) {
                *out = e->lay;
                pthread_mutex_unlock(&g_cache_lock);
                layout_rebase(d, args, out);
                return 0;
            }
        }
        pthread_mutex_unlock(&g_cache_lock);
    }
    int rc = layout_compute(d, args, out);
    if (!rc && kl && !pthread_mutex_trylock(&g_cache_lock)) {
        kcap_layout_entry *e = &g_cache[g_cache_next];
        g_cache_next = (g_cache_next + 1) % KCAP_LAYOUT_CACHE;
        if (g_cache_n < KCAP_LAYOUT_CACHE)
            g_cache_n++;
        e->d = d;
        e->keylen = kl;
        memcpy(e->key, key, kl);
        e->lay = *out;
        pthread_mutex_unlock(&g_cache_lock);
    }
    return rc;
}
