/*
 * kcap_read.c — the validating reader behind kcap_snapshot_read / _read_header / _check.
 * Order of trust: the seal (kcap_seal.c) is verified before libhdf5 sees the file; then
 * structure, version and attribute types are checked with every size bounded before any
 * allocation; then chunk data is read raw (H5Dread_chunk, calling thread, HDF5 lock) and
 * decompressed + unshuffled by a worker pool straight into the tensor; then per-tensor
 * XXH64 and the call description (shapes, dtypes, presence, duplicate rows) are checked.
 * Every error names the file, the dataset and the problem.
 */
#include "kcap_calls.h"
#include "kcap_h5util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

enum { MODE_FULL, MODE_HEADER, MODE_CHECK };
#define MAX_LINKS 256

uint64_t kcap_read_limit_bytes(void)
{
    const char *e = getenv("KCAP_READ_MAX_BYTES");
    if (e && *e) {
        char *end;
        unsigned long long v = strtoull(e, &end, 10);
        if (!*end && v)
            return v;
    }
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    if (pages > 0 && psz > 0)
        return (uint64_t)pages * (uint64_t)psz;
    return (uint64_t)16 << 30;
}

/* ---- chunk decoding in the pool ---- */
typedef struct rslot {
    struct rctx *r;
    uint8_t *in;
    size_t incap, inlen;
    uint8_t *dst;
    size_t valid, chunk, es;
    int err; /* 0 ok, 1 nomem, 2 bad frame, 3 size mismatch */
    volatile int64_t finished;
    int64_t submitted;
} rslot;

typedef struct rctx {
    const char *path;
    kcap_error *err;
    kcap_pool *pool;
    int nworkers, nslots;
    ZSTD_DCtx **dctx;
    uint8_t **scratch, **pad;
    size_t scratch_cap;
    rslot *slots;
    uint64_t budget; /* raw bytes still allowed */
    int want_pool;   /* big file: decode and hash with worker threads, else inline */
} rctx;

static void rctx_free(rctx *r)
{
    for (int i = 0; i < r->nworkers; i++) {
        if (r->dctx)
            ZSTD_freeDCtx(r->dctx[i]);
        if (r->scratch)
            free(r->scratch[i]);
        if (r->pad)
            free(r->pad[i]);
    }
    for (int i = 0; r->slots && i < r->nslots; i++)
        free(r->slots[i].in);
    free(r->dctx);
    free(r->scratch);
    free(r->pad);
    free(r->slots);
    kcap_pool_free(r->pool);
}

/* Lazily sized decode state for chunks of up to `chunk` raw bytes. */
static int rctx_prepare(rctx *r, size_t chunk)
{
    if (!r->pool && r->want_pool) {
        int n = kcap_online_cpus();
        r->pool = kcap_pool_create(n > 16 ? 16 : n); /* NULL: jobs run inline */
    }
    if (!r->dctx) {
        r->nworkers = kcap_pool_threads(r->pool) + 1;
        r->nslots = 2 * r->nworkers + 2;
        r->dctx = calloc((size_t)r->nworkers, sizeof *r->dctx);
        r->scratch = calloc((size_t)r->nworkers, sizeof *r->scratch);
        r->pad = calloc((size_t)r->nworkers, sizeof *r->pad);
        r->slots = calloc((size_t)r->nslots, sizeof *r->slots);
        if (!r->dctx || !r->scratch || !r->pad || !r->slots)
            return -1;
        for (int i = 0; i < r->nworkers; i++)
            if (!(r->dctx[i] = ZSTD_createDCtx()))
                return -1;
        for (int i = 0; i < r->nslots; i++)
            r->slots[i].r = r;
    }
    if (chunk > r->scratch_cap) {
        for (int i = 0; i < r->nworkers; i++) {
            free(r->scratch[i]);
            free(r->pad[i]);
            r->pad[i] = NULL;
            if (!(r->scratch[i] = malloc(chunk)))
                return -1;
        }
        size_t incap = ZSTD_compressBound(chunk) + 64;
        for (int i = 0; i < r->nslots; i++) {
            free(r->slots[i].in);
            if (!(r->slots[i].in = malloc(incap)))
                return -1;
            r->slots[i].incap = incap;
        }
        r->scratch_cap = chunk;
    }
    return 0;
}

static void decode_job(void *arg, int worker)
{
    rslot *s = arg;
    rctx *r = s->r;
    unsigned long long n = ZSTD_getFrameContentSize(s->in, s->inlen);
    s->err = 0;
    if (n == ZSTD_CONTENTSIZE_ERROR || n == ZSTD_CONTENTSIZE_UNKNOWN ||
        ZSTD_findFrameCompressedSize(s->in, s->inlen) != s->inlen) {
        s->err = 2;
        goto done;
    }
    if (n != s->chunk) {
        s->err = 3;
        goto done;
    }
    uint8_t *raw = s->es == 1 && s->valid == s->chunk ? s->dst : r->scratch[worker];
    size_t got = ZSTD_decompressDCtx(r->dctx[worker], raw, s->chunk, s->in, s->inlen);
    if (ZSTD_isError(got) || got != s->chunk) {
        s->err = 2;
        goto done;
    }
    if (s->es == 1) {
        if (raw != s->dst)
            memcpy(s->dst, raw, s->valid);
    } else if (s->valid == s->chunk) {
        kcap_unshuffle(s->dst, raw, s->chunk / s->es, s->es);
    } else {
        if (!r->pad[worker] && !(r->pad[worker] = malloc(r->scratch_cap))) {
            s->err = 1;
            goto done;
        }
        kcap_unshuffle(r->pad[worker], raw, s->chunk / s->es, s->es);
        memcpy(s->dst, r->pad[worker], s->valid);
    }
done:
    kcap_pool_done(r->pool, &s->finished);
}

static int h5err(rctx *r, int code, const char *obj, const char *what)
{
    char buf[400];
    kcap_h5_errtext(buf, sizeof buf);
    return kcap_error_set(r->err, code, "%s: %s: %s: %s", r->path, obj, what, buf);
}

/* Reads a chunked (shuffle, zstd) dataset whose chunks are contiguous ranges. Returns
 * 1 when the layout is not that (caller falls back to H5Dread). Caller holds the lock. */
static int read_fast(rctx *r, hid_t d, hid_t dcpl, const kcap_tensor *t, const char *full)
{
    int nf = H5Pget_nfilters(dcpl);
    if (nf != 2)
        return 1;
    unsigned flags, cdv[8];
    size_t ncd = 8;
    char fname[64];
    if (H5Pget_filter2(dcpl, 0, &flags, &ncd, cdv, sizeof fname, fname, NULL) !=
        H5Z_FILTER_SHUFFLE)
        return 1;
    ncd = 8;
    if (H5Pget_filter2(dcpl, 1, &flags, &ncd, cdv, sizeof fname, fname, NULL) != KCAP_H5Z_ZSTD)
        return 1;
    hsize_t cd[KCAP_MAX_DIMS];
    if (t->ndim < 1 || H5Pget_chunk(dcpl, t->ndim, cd) != t->ndim)
        return 1;
    uint64_t chunk[KCAP_MAX_DIMS];
    int split = 0;
    for (int i = 0; i < t->ndim; i++) {
        chunk[i] = cd[i];
        if (!cd[i])
            return 1;
        if (cd[i] != (hsize_t)t->shape[i])
            split = i;
    }
    for (int i = 0; i < split; i++)
        if (chunk[i] != 1)
            return 1; /* not a layout kcap writes: let libhdf5 decode it */
    size_t es = kcap_dtype_size(t->dtype);
    uint64_t inner = 1, outer = 1, k = chunk[split];
    for (int i = split + 1; i < t->ndim; i++)
        inner *= (uint64_t)t->shape[i];
    for (int i = 0; i < split; i++)
        outer *= (uint64_t)t->shape[i];
    if (k > (uint64_t)t->shape[split] || k * inner * es > KCAP_MAX_CHUNK_BYTES)
        return kcap_error_set(r->err, KCAP_ERR_CORRUPT, "%s: %s: chunk of %llu bytes is "
                              "larger than its tensor or the %u MiB limit", r->path, full,
                              (unsigned long long)(k * inner * es), KCAP_MAX_CHUNK_BYTES >> 20);
    size_t chunk_bytes = (size_t)(k * inner * es);
    uint64_t nk = ((uint64_t)t->shape[split] + k - 1) / k, nchunks = outer * nk;
    if (rctx_prepare(r, chunk_bytes))
        return kcap_error_set(r->err, KCAP_ERR_NOMEM, "%s: %s: out of memory", r->path, full);
    uint64_t next_sub = 0, next_done = 0;
    int rc = KCAP_OK;
    while (next_done < nchunks) {
        while (rc == KCAP_OK && next_sub < nchunks &&
               next_sub - next_done < (uint64_t)r->nslots) {
            rslot *s = &r->slots[next_sub % (uint64_t)r->nslots];
            uint64_t o = next_sub / nk, j = next_sub % nk, row0 = j * k;
            uint64_t rows = (uint64_t)t->shape[split] - row0;
            if (rows > k)
                rows = k;
            hsize_t coord[KCAP_MAX_DIMS] = {0};
            uint64_t rem = o;
            for (int i = split - 1; i >= 0; i--) {
                coord[i] = rem % (uint64_t)t->shape[i];
                rem /= (uint64_t)t->shape[i];
            }
            coord[split] = row0;
            hsize_t sz = 0;
            uint32_t mask = 0;
            if (H5Dget_chunk_storage_size(d, coord, &sz) < 0 || sz == 0) {
                rc = h5err(r, KCAP_ERR_CORRUPT, full, "chunk missing");
                break;
            }
            if (sz > s->incap) {
                rc = kcap_error_set(r->err, KCAP_ERR_CORRUPT, "%s: %s: chunk %llu stores %llu "
                                    "bytes, more than zstd could need for %zu", r->path, full,
                                    (unsigned long long)next_sub, (unsigned long long)sz,
                                    chunk_bytes);
                break;
            }
            if (H5Dread_chunk(d, H5P_DEFAULT, coord, &mask, s->in) < 0) {
                rc = h5err(r, KCAP_ERR_HDF5, full, "reading a chunk");
                break;
            }
            if (mask) {
                rc = kcap_error_set(r->err, KCAP_ERR_CORRUPT, "%s: %s: chunk %llu was stored "
                                    "without its filters", r->path, full,
                                    (unsigned long long)next_sub);
                break;
            }
            s->inlen = (size_t)sz;
            s->dst = (uint8_t *)t->data + (o * (uint64_t)t->shape[split] + row0) * inner * es;
            s->valid = (size_t)(rows * inner * es);
            s->chunk = chunk_bytes;
            s->es = es;
            s->submitted++;
            kcap_h5_unlock(); /* let other threads use libhdf5 while we decode */
            kcap_pool_submit(r->pool, decode_job, s);
            kcap_h5_lock();
            next_sub++;
        }
        if (next_done >= next_sub)
            break; /* error before anything was submitted */
        rslot *s = &r->slots[next_done % (uint64_t)r->nslots];
        kcap_h5_unlock();
        kcap_pool_wait(r->pool, &s->finished, s->submitted);
        kcap_h5_lock();
        if (s->err && rc == KCAP_OK)
            rc = kcap_error_set(r->err, s->err == 1 ? KCAP_ERR_NOMEM : KCAP_ERR_CORRUPT,
                                "%s: %s: chunk %llu: %s", r->path, full,
                                (unsigned long long)next_done,
                                s->err == 1   ? "out of memory"
                                : s->err == 3 ? "decompressed size differs from the chunk size"
                                              : "not a valid zstd frame");
        next_done++;
    }
    /* drain anything still in flight after an error */
    for (uint64_t i = next_done; i < next_sub; i++) {
        rslot *s = &r->slots[i % (uint64_t)r->nslots];
        kcap_h5_unlock();
        kcap_pool_wait(r->pool, &s->finished, s->submitted);
        kcap_h5_lock();
    }
    return rc;
}

static int read_data(rctx *r, hid_t d, const kcap_tensor *t, const char *full)
{
    hid_t dcpl = H5Dget_create_plist(d);
    if (dcpl < 0)
        return h5err(r, KCAP_ERR_CORRUPT, full, "reading the dataset layout");
    H5D_layout_t lay = H5Pget_layout(dcpl);
    int rc = 1;
    if (lay == H5D_CHUNKED)
        rc = read_fast(r, d, dcpl, t, full);
    H5Pclose(dcpl);
    if (rc != 1)
        return rc;
    if (!t->nbytes)
        return KCAP_OK;
    if (lay != H5D_CHUNKED && H5Dget_storage_size(d) != t->nbytes)
        return kcap_error_set(r->err, KCAP_ERR_CORRUPT, "%s: %s: %llu bytes stored, %zu "
                              "expected", r->path, full,
                              (unsigned long long)H5Dget_storage_size(d), t->nbytes);
    if (H5Dread(d, kcap_h5_file_type(t->dtype), H5S_ALL, H5S_ALL, H5P_DEFAULT, t->data) < 0)
        return h5err(r, KCAP_ERR_CORRUPT, full, "reading the data");
    return KCAP_OK;
}

/* ---- structure ---- */
typedef struct link_list {
    int n;
    char names[MAX_LINKS][KCAP_NAME_MAX];
} link_list;

static int list_links(rctx *r, hid_t g, const char *gname, link_list *ll)
{
    H5G_info_t gi;
    if (H5Gget_info(g, &gi) < 0)
        return h5err(r, KCAP_ERR_CORRUPT, gname, "reading the group");
    if (gi.nlinks > MAX_LINKS)
        return kcap_error_set(r->err, KCAP_ERR_CORRUPT, "%s: %s: %llu entries (at most %d)",
                              r->path, gname, (unsigned long long)gi.nlinks, MAX_LINKS);
    ll->n = (int)gi.nlinks;
    H5_index_t idx = H5_INDEX_CRT_ORDER;
    for (int i = 0; i < ll->n; i++) {
        ssize_t len = H5Lget_name_by_idx(g, ".", idx, H5_ITER_INC, (hsize_t)i, NULL, 0,
                                         H5P_DEFAULT);
        if (len < 0 && idx == H5_INDEX_CRT_ORDER && i == 0) { /* no creation order kept */
            H5Eclear2(H5E_DEFAULT);
            idx = H5_INDEX_NAME;
            i--;
            continue;
        }
        if (len <= 0 || len >= KCAP_NAME_MAX)
            return kcap_error_set(r->err, KCAP_ERR_CORRUPT, "%s: %s: entry %d has a bad or "
                                  "too long name", r->path, gname, i);
        if (H5Lget_name_by_idx(g, ".", idx, H5_ITER_INC, (hsize_t)i, ll->names[i],
                               KCAP_NAME_MAX, H5P_DEFAULT) < 0)
            return h5err(r, KCAP_ERR_CORRUPT, gname, "listing");
    }
    return KCAP_OK;
}

static int read_scalars(rctx *r, hid_t f, kcap_snapshot *s)
{
    hid_t g = H5Gopen2(f, "scalars", H5P_DEFAULT);
    if (g < 0)
        return kcap_error_set(r->err, KCAP_ERR_CORRUPT, "%s: /scalars: group missing", r->path);
    link_list *ll = malloc(sizeof *ll);
    int rc = ll ? list_links(r, g, "/scalars", ll) : KCAP_ERR_NOMEM;
    for (int i = 0; rc == KCAP_OK && i < ll->n; i++) {
        char full[96];
        snprintf(full, sizeof full, "/scalars/%s", ll->names[i]);
        hid_t d = H5Dopen2(g, ll->names[i], H5P_DEFAULT);
        if (d < 0) {
            rc = h5err(r, KCAP_ERR_CORRUPT, full, "not a dataset");
            break;
        }
        hid_t t = H5Dget_type(d), sp = H5Dget_space(d);
        H5T_class_t c = t >= 0 ? H5Tget_class(t) : H5T_NO_CLASS;
        if (sp < 0 || H5Sget_simple_extent_type(sp) != H5S_SCALAR ||
            (c != H5T_INTEGER && c != H5T_FLOAT) || H5Tget_size(t) > 8) {
            rc = kcap_error_set(r->err, KCAP_ERR_CORRUPT, "%s: %s: not a scalar number",
                                r->path, full);
        } else if (c == H5T_INTEGER) {
            int64_t v;
            if (H5Dread(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, &v) < 0)
                rc = h5err(r, KCAP_ERR_CORRUPT, full, "reading");
            else
                rc = kcap_snapshot_add_int(s, ll->names[i], v);
        } else {
            double v;
            if (H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, &v) < 0)
                rc = h5err(r, KCAP_ERR_CORRUPT, full, "reading");
            else
                rc = kcap_snapshot_add_float(s, ll->names[i], v);
        }
        if (rc != KCAP_OK && !r->err->msg[0])
            kcap_error_set(r->err, rc, "%s: %s: duplicate or bad scalar", r->path, full);
        if (t >= 0)
            H5Tclose(t);
        if (sp >= 0)
            H5Sclose(sp);
        H5Dclose(d);
    }
    free(ll);
    H5Gclose(g);
    return rc;
}

static int read_tensors(rctx *r, hid_t f, kcap_snapshot *s, kcap_dir dir, int mode,
                        size_t **stored, int *nstored)
{
    const char *gname = dir == KCAP_DIR_IN ? "inputs" : "outputs";
    char gfull[16];
    snprintf(gfull, sizeof gfull, "/%s", gname);
    hid_t g = H5Gopen2(f, gname, H5P_DEFAULT);
    if (g < 0)
        return kcap_error_set(r->err, KCAP_ERR_CORRUPT, "%s: %s: group missing", r->path, gfull);
    link_list *ll = malloc(sizeof *ll);
    int rc = ll ? list_links(r, g, gfull, ll) : KCAP_ERR_NOMEM;
    for (int i = 0; rc == KCAP_OK && i < ll->n; i++) {
        const char *name = ll->names[i];
        char full[96];
        snprintf(full, sizeof full, "%s/%s", gfull, name);
        hid_t d = H5Dopen2(g, name, H5P_DEFAULT);
        if (d < 0) {
            rc = h5err(r, KCAP_ERR_CORRUPT, full, "not a dataset");
            break;
        }
        hid_t ty = H5Dget_type(d), sp = H5Dget_space(d);
        char dtn[32];
        int nd = sp >= 0 ? H5Sget_simple_extent_ndims(sp) : -1;
        hsize_t dims[KCAP_MAX_DIMS];
        kcap_dtype dt = KCAP_DT_INVALID;
        int64_t shape[KCAP_MAX_DIMS], strides[KCAP_MAX_DIMS];
        int nstr = 0, hs = 0;
        uint64_t want_hash = 0;
        if (ty < 0 || nd < 0 || nd > KCAP_MAX_DIMS) {
            rc = kcap_error_set(r->err, KCAP_ERR_CORRUPT, "%s: %s: bad dataspace (rank %d, at "
                                "most %d)", r->path, full, nd, KCAP_MAX_DIMS);
            goto next;
        }
        H5Sget_simple_extent_dims(sp, dims, NULL);
        int a = kcap_h5_attr_get_str(d, "dtype", dtn, sizeof dtn);
        if (a || (dt = kcap_dtype_from_name(dtn)) == KCAP_DT_INVALID) {
            rc = kcap_error_set(r->err, KCAP_ERR_CORRUPT, "%s: %s: %s dtype attribute", r->path,
                                full, a == 1 ? "missing" : a ? "malformed" : "unknown");
            goto next;
        }
        if (!kcap_h5_type_matches(ty, dt)) {
            rc = kcap_error_set(r->err, KCAP_ERR_CORRUPT, "%s: %s: stored HDF5 type does not "
                                "hold dtype %s", r->path, full, dtn);
            goto next;
        }
        if (kcap_h5_attr_get_u64(d, "xxh64", &want_hash)) {
            rc = kcap_error_set(r->err, KCAP_ERR_CORRUPT, "%s: %s: missing or malformed xxh64 "
                                "attribute", r->path, full);
            goto next;
        }
        a = kcap_h5_attr_get_i64v(d, "strides", strides, KCAP_MAX_DIMS, &nstr);
        if (a < 0 || (a == 0 && nstr != nd)) {
            rc = kcap_error_set(r->err, KCAP_ERR_CORRUPT, "%s: %s: malformed strides attribute",
                                r->path, full);
            goto next;
        }
        hs = a == 0;
        /* bound the size before anything is allocated */
        uint64_t bytes = kcap_dtype_size(dt);
        for (int k = 0; k < nd; k++) {
            shape[k] = (int64_t)dims[k];
            if (dims[k] > (uint64_t)INT64_MAX || (dims[k] && bytes > r->budget / dims[k])) {
                rc = kcap_error_set(r->err, KCAP_ERR_NOMEM, "%s: %s: shape claims more than the "
                                    "%llu bytes this reader may allocate (KCAP_READ_MAX_BYTES)",
                                    r->path, full, (unsigned long long)r->budget);
                goto next;
            }
            bytes *= dims[k];
        }
        r->budget -= bytes;
        void *data = NULL;
        static char dummy;
        rc = kcap_snapshot_add_tensor(s, name, dir, dt, nd, shape, hs ? strides : NULL,
                                      mode == MODE_HEADER ? &dummy : NULL, &data);
        if (rc) {
            kcap_error_set(r->err, rc, "%s: %s: %s", r->path, full,
                           rc == KCAP_ERR_NOMEM ? "out of memory" : "duplicate or bad tensor");
            goto next;
        }
        kcap_tensor *t = &s->tensors[s->ntensors - 1];
        if (stored) {
            size_t *ns = realloc(*stored, (size_t)(*nstored + 1) * sizeof *ns);
            if (!ns) {
                rc = kcap_error_set(r->err, KCAP_ERR_NOMEM, "%s: out of memory", r->path);
                goto next;
            }
            *stored = ns;
            ns[(*nstored)++] = (size_t)H5Dget_storage_size(d);
        }
        if (mode == MODE_HEADER) {
            t->data = NULL;
            goto next;
        }
        rc = read_data(r, d, t, full);
        if (rc == KCAP_OK) {
            kcap_h5_unlock();
            uint64_t h = kcap_xxh64(t->data, t->nbytes, 0);
            kcap_h5_lock();
            if (h != want_hash)
                rc = kcap_error_set(r->err, KCAP_ERR_CHECKSUM, "%s: %s: checksum mismatch "
                                    "(xxh64 %016llx stored, %016llx computed)", r->path, full,
                                    (unsigned long long)want_hash, (unsigned long long)h);
        }
    next:
        if (ty >= 0)
            H5Tclose(ty);
        if (sp >= 0)
            H5Sclose(sp);
        H5Dclose(d);
    }
    free(ll);
    H5Gclose(g);
    return rc;
}

static int read_meta(rctx *r, hid_t f, kcap_meta *m)
{
    int64_t v = 0;
    int a = kcap_h5_attr_get_i64(f, "kcap_format_major", &v);
    if (a)
        return kcap_error_set(r->err, KCAP_ERR_NOT_SNAPSHOT, "%s: /: %s kcap_format_major "
                              "attribute: not a kcap snapshot", r->path,
                              a == 1 ? "no" : "malformed");
    if (v != KCAP_FORMAT_MAJOR)
        return kcap_error_set(r->err, KCAP_ERR_VERSION, "%s: snapshot format major version "
                              "%lld is not supported (this kcap reads %d.x)", r->path,
                              (long long)v, KCAP_FORMAT_MAJOR);
    m->format_major = (int)v;
    kcap_h5_attr_get_i64(f, "kcap_format_minor", &v);
    m->format_minor = (int)v;
#define REQ(call, what)                                                                     \
    if (call)                                                                               \
        return kcap_error_set(r->err, KCAP_ERR_CORRUPT, "%s: /: missing or malformed %s "   \
                              "attribute", r->path, what);
#define OPT(call, what)                                                                     \
    if ((call) < 0)                                                                         \
        return kcap_error_set(r->err, KCAP_ERR_CORRUPT, "%s: /: malformed %s attribute",    \
                              r->path, what);
    REQ(kcap_h5_attr_get_str(f, "call", m->call, sizeof m->call), "call");
    REQ(kcap_h5_attr_get_i64(f, "abi_version", &v), "abi_version");
    m->abi_version = (int)v;
    REQ(kcap_h5_attr_get_u64(f, "seq", &m->seq), "seq");
    REQ(kcap_h5_attr_get_str(f, "time_utc", m->time_utc, sizeof m->time_utc), "time_utc");
    OPT(kcap_h5_attr_get_str(f, "host", m->host, sizeof m->host), "host");
    OPT(kcap_h5_attr_get_i64(f, "pid", &m->pid), "pid");
    v = -1;
    OPT(kcap_h5_attr_get_i64(f, "rank", &v), "rank");
    m->rank = (int)v;
    OPT(kcap_h5_attr_get_str(f, "device_name", m->device_name, sizeof m->device_name),
        "device_name");
    int64_t cc[2] = {0, 0};
    int ncc = 0;
    OPT(kcap_h5_attr_get_i64v(f, "compute_capability", cc, 2, &ncc), "compute_capability");
    m->cc_major = (int)cc[0];
    m->cc_minor = (int)cc[1];
    v = 0;
    OPT(kcap_h5_attr_get_i64(f, "cuda_driver_version", &v), "cuda_driver_version");
    m->driver_version = (int)v;
    v = 0;
    OPT(kcap_h5_attr_get_i64(f, "cuda_runtime_version", &v), "cuda_runtime_version");
    m->runtime_version = (int)v;
    OPT(kcap_h5_attr_get_str(f, "lib_path", m->lib_path, sizeof m->lib_path), "lib_path");
    OPT(kcap_h5_attr_get_str(f, "lib_hash", m->lib_hash, sizeof m->lib_hash), "lib_hash");
    v = 0;
    OPT(kcap_h5_attr_get_i64(f, "in_stream_capture", &v), "in_stream_capture");
    m->in_stream_capture = (int)v;
    v = 0;
    OPT(kcap_h5_attr_get_i64(f, "call_status", &v), "call_status");
    m->call_status = (int)v;
    OPT(kcap_h5_attr_get_str(f, "kcap_version", m->kcap_version, sizeof m->kcap_version),
        "kcap_version");
#undef REQ
#undef OPT
    return KCAP_OK;
}

static int read_file(const char *path, kcap_snapshot **out, size_t **stored, int mode,
                     kcap_error *err)
{
    kcap_error local;
    if (!err)
        err = &local;
    err->code = 0;
    err->msg[0] = '\0';
    if (out)
        *out = NULL;
    if (stored)
        *stored = NULL;
    if (!path)
        return kcap_error_set(err, KCAP_ERR_ARG, "kcap_snapshot_read: NULL path");
    if (kcap_h5zstd_register())
        return kcap_error_set(err, KCAP_ERR_HDF5, "%s: cannot register the zstd filter", path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return kcap_error_set(err, errno == ENOENT ? KCAP_ERR_IO : KCAP_ERR_IO, "%s: %s", path,
                              strerror(errno));
    rctx r = {.path = path, .err = err, .budget = kcap_read_limit_bytes()};
    struct stat fst;
    /* threads only pay off on big files (and small ones are what ls/check/fuzz see most) */
    r.want_pool = !fstat(fd, &fst) && fst.st_size >= (off_t)(8 << 20);
    if (r.want_pool) {
        int n = kcap_online_cpus();
        r.pool = kcap_pool_create(n > 16 ? 16 : n);
    }
    int rc = kcap_seal_verify(fd, path, r.pool, 1, err);
    kcap_snapshot *s = NULL;
    size_t *st = NULL;
    int nst = 0;
    if (rc) {
        rctx_free(&r);
        close(fd);
        return rc;
    }
    s = kcap_snapshot_create();
    if (!s) {
        rctx_free(&r);
        close(fd);
        return kcap_error_set(err, KCAP_ERR_NOMEM, "%s: out of memory", path);
    }
    char h5name[64];
    snprintf(h5name, sizeof h5name, "/proc/self/fd/%d", fd);
    kcap_h5_lock();
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG);
#if H5_VERSION_GE(1, 10, 7)
    H5Pset_file_locking(fapl, 0, 1); /* sealed files are immutable */
#endif
    hid_t f = H5Fopen(access(h5name, F_OK) ? path : h5name, H5F_ACC_RDONLY, fapl);
    H5Pclose(fapl);
    if (f < 0) {
        char buf[400];
        rc = kcap_error_set(err, KCAP_ERR_NOT_SNAPSHOT, "%s: HDF5 cannot open it: %s", path,
                            kcap_h5_errtext(buf, sizeof buf));
    }
    if (rc == KCAP_OK)
        rc = read_meta(&r, f, &s->meta);
    if (rc == KCAP_OK)
        rc = read_scalars(&r, f, s);
    if (rc == KCAP_OK)
        rc = read_tensors(&r, f, s, KCAP_DIR_IN, mode, stored ? &st : NULL, &nst);
    if (rc == KCAP_OK)
        rc = read_tensors(&r, f, s, KCAP_DIR_OUT, mode, stored ? &st : NULL, &nst);
    if (f >= 0)
        H5Fclose(f);
    H5Eclear2(H5E_DEFAULT);
    kcap_h5_unlock();
    rctx_free(&r);
    close(fd);
    if (rc == KCAP_OK) {
        const kcap_call_desc *d = kcap_call_find(s->meta.call);
        if (!d)
            rc = kcap_error_set(err, KCAP_ERR_UNKNOWN_CALL, "%s: call '%s' has no description "
                                "in this kcap", path, s->meta.call);
        else if (d->abi_version != s->meta.abi_version)
            rc = kcap_error_set(err, KCAP_ERR_VERSION, "%s: call %s ABI version %d, this kcap "
                                "describes version %d", path, d->name, s->meta.abi_version,
                                d->abi_version);
        else if ((rc = kcap_call_validate_ex(d, s, mode == MODE_HEADER, err)) != KCAP_OK)
            kcap_error_prefix(err, "%s", path);
    }
    if (rc != KCAP_OK || !out) {
        kcap_snapshot_free(s);
        free(st);
        return rc;
    }
    *out = s;
    if (stored)
        *stored = st;
    return KCAP_OK;
}

int kcap_snapshot_read(const char *path, kcap_snapshot **out, kcap_error *err)
{
    if (!out)
        return kcap_error_set(err, KCAP_ERR_ARG, "kcap_snapshot_read: NULL out");
    return read_file(path, out, NULL, MODE_FULL, err);
}

int kcap_snapshot_read_header(const char *path, kcap_snapshot **out, size_t **stored_bytes,
                              kcap_error *err)
{
    if (!out)
        return kcap_error_set(err, KCAP_ERR_ARG, "kcap_snapshot_read_header: NULL out");
    return read_file(path, out, stored_bytes, MODE_HEADER, err);
}

int kcap_snapshot_check(const char *path, kcap_error *err)
{
    return read_file(path, NULL, NULL, MODE_CHECK, err);
}
