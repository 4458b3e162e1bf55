/*
 * kcap_snapshot.c — the in-memory snapshot: creation, scalars, tensors (owned or
 * borrowed dense buffers), lookups and the dtype table. No I/O here (see kcap_write.c,
 * kcap_read.c).
 */
#include "kcap_snapshot.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Big tensors: 2 MiB aligned and marked for transparent huge pages, so filling a 1 GB
 * tensor costs hundreds of page faults instead of 250 000 (they dominated reads). Still
 * released with free(). */
static void *tensor_alloc(size_t n)
{
    if (n < ((size_t)8 << 20))
        return malloc(n ? n : 1);
    void *p = NULL;
    if (posix_memalign(&p, (size_t)2 << 20, n))
        return NULL;
#ifdef MADV_HUGEPAGE
    madvise(p, n & ~(((size_t)2 << 20) - 1), MADV_HUGEPAGE);
#endif
    return p;
}

static const struct {
    const char *name;
    size_t size;
} dtypes[KCAP_DT_COUNT] = {
    [KCAP_DT_BF16] = {"bfloat16", 2}, [KCAP_DT_F16] = {"float16", 2},
    [KCAP_DT_F32] = {"float32", 4},   [KCAP_DT_F64] = {"float64", 8},
    [KCAP_DT_I32] = {"int32", 4},     [KCAP_DT_I64] = {"int64", 8},
    [KCAP_DT_U8] = {"uint8", 1},
};

size_t kcap_dtype_size(kcap_dtype dt)
{
    return dt > KCAP_DT_INVALID && dt < KCAP_DT_COUNT ? dtypes[dt].size : 0;
}

const char *kcap_dtype_name(kcap_dtype dt)
{
    return dt > KCAP_DT_INVALID && dt < KCAP_DT_COUNT ? dtypes[dt].name : "invalid";
}

kcap_dtype kcap_dtype_from_name(const char *s)
{
    if (!s)
        return KCAP_DT_INVALID;
    for (int i = 1; i < KCAP_DT_COUNT; i++)
        if (!strcmp(s, dtypes[i].name))
            return (kcap_dtype)i;
    return KCAP_DT_INVALID;
}

kcap_snapshot *kcap_snapshot_create(void)
{
    kcap_snapshot *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->meta.format_major = KCAP_FORMAT_MAJOR;
    s->meta.format_minor = KCAP_FORMAT_MINOR;
    s->meta.rank = -1;
    return s;
}

void kcap_snapshot_free(kcap_snapshot *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->ntensors; i++)
        if (s->tensors[i].owned)
            free(s->tensors[i].data);
    free(s->tensors);
    free(s->scalars);
    free(s);
}

static int name_ok(const char *name)
{
    return name && name[0] && strlen(name) < KCAP_NAME_MAX && !strchr(name, '/');
}

static int add_scalar(kcap_snapshot *s, const char *name, kcap_scalar_type t, int64_t i, double f)
{
    if (!s || !name_ok(name) || kcap_snapshot_scalar(s, name))
        return KCAP_ERR_ARG;
    kcap_scalar *n = realloc(s->scalars, (size_t)(s->nscalars + 1) * sizeof *n);
    if (!n)
        return KCAP_ERR_NOMEM;
    s->scalars = n;
    kcap_scalar *sc = &n[s->nscalars++];
    memset(sc, 0, sizeof *sc);
    strcpy(sc->name, name);
    sc->type = t;
    sc->i = i;
    sc->f = f;
    return KCAP_OK;
}

int kcap_snapshot_add_int(kcap_snapshot *s, const char *name, int64_t v)
{
    return add_scalar(s, name, KCAP_SC_INT, v, 0);
}

int kcap_snapshot_add_float(kcap_snapshot *s, const char *name, double v)
{
    return add_scalar(s, name, KCAP_SC_FLOAT, 0, v);
}

const char *kcap_dir_group(kcap_dir dir)
{
    return dir == KCAP_DIR_IN ? "inputs" : dir == KCAP_DIR_OUT ? "outputs" : "candidate";
}

int kcap_snapshot_add_tensor(kcap_snapshot *s, const char *name, kcap_dir dir, kcap_dtype dt,
                             int ndim, const int64_t *shape, const int64_t *strides_or_null,
                             void *borrow, void **data)
{
    if (!s || !name_ok(name) || (dir != KCAP_DIR_IN && dir != KCAP_DIR_OUT && dir != KCAP_DIR_CAND) ||
        !kcap_dtype_size(dt) || ndim < 0 || ndim > KCAP_MAX_DIMS || (ndim && !shape) ||
        kcap_snapshot_tensor(s, name, dir))
        return KCAP_ERR_ARG;
    size_t n = kcap_dtype_size(dt);
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0 || (shape[d] && n > SIZE_MAX / 2 / (size_t)shape[d]))
            return KCAP_ERR_ARG;
        n *= (size_t)shape[d];
    }
    void *buf = borrow;
    if (!buf) {
        buf = tensor_alloc(n);
        if (!buf)
            return KCAP_ERR_NOMEM;
    }
    kcap_tensor *nt = realloc(s->tensors, (size_t)(s->ntensors + 1) * sizeof *nt);
    if (!nt) {
        if (!borrow)
            free(buf);
        return KCAP_ERR_NOMEM;
    }
    s->tensors = nt;
    kcap_tensor *t = &nt[s->ntensors++];
    memset(t, 0, sizeof *t);
    strcpy(t->name, name);
    t->dir = dir;
    t->dtype = dt;
    t->ndim = ndim;
    for (int d = 0; d < ndim; d++) {
        t->shape[d] = shape[d];
        if (strides_or_null)
            t->strides[d] = strides_or_null[d];
    }
    t->has_strides = strides_or_null != NULL;
    t->data = buf;
    t->nbytes = n;
    t->owned = borrow == NULL;
    if (data)
        *data = buf;
    return KCAP_OK;
}

const kcap_tensor *kcap_snapshot_tensor(const kcap_snapshot *s, const char *name, kcap_dir dir)
{
    if (!s || !name)
        return NULL;
    for (int i = 0; i < s->ntensors; i++)
        if (s->tensors[i].dir == dir && !strcmp(s->tensors[i].name, name))
            return &s->tensors[i];
    return NULL;
}

const kcap_scalar *kcap_snapshot_scalar(const kcap_snapshot *s, const char *name)
{
    if (!s || !name)
        return NULL;
    for (int i = 0; i < s->nscalars; i++)
        if (!strcmp(s->scalars[i].name, name))
            return &s->scalars[i];
    return NULL;
}

size_t kcap_snapshot_bytes(const kcap_snapshot *s)
{
    size_t n = 0;
    for (int i = 0; s && i < s->ntensors; i++)
        n += s->tensors[i].nbytes;
    return n;
}

const char *kcap_printable(char *dst, size_t n, const char *src)
{
    static const char hex[] = "0123456789abcdef";
    size_t u = 0;
    if (!n)
        return dst;
    for (const unsigned char *c = (const unsigned char *)(src ? src : ""); *c; c++) {
        int plain = *c >= 0x20 && *c < 0x7f && *c != '\\';
        if (u + (plain ? 1 : 4) >= n)
            break;
        if (plain) {
            dst[u++] = (char)*c;
        } else {
            dst[u++] = '\\';
            dst[u++] = 'x';
            dst[u++] = hex[*c >> 4];
            dst[u++] = hex[*c & 15];
        }
    }
    dst[u] = '\0';
    return dst;
}

const char *kcap_shown(const char *src)
{
    static char buf[8][4 * 4096 + 16]; /* not per thread: a static TLS block this size in
                                        * libkcap.so would take the host's surplus */
    static int k;
    k = (k + 1) % 8;
    return kcap_printable(buf[k], sizeof buf[k], src);
}
