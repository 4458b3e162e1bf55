/*
 * kcap_read_data.c — the data half of the validating reader: a dataset's bytes, in order.
 * kcap's own layout (chunks that are contiguous ranges, shuffle + zstd) is fetched raw with
 * H5Dread_chunk on the calling thread (HDF5 lock) and decoded by a worker pool; anything
 * else goes through H5Dread in dim-0 slabs of at most KCAP_SLAB_BYTES. Either way the bytes
 * reach a sink in order (tensor XXH64, per-row hashes), so `kcap check` verifies a file
 * whose declared size is far beyond memory with a bounded buffer (KCAP_STREAM_BYTES), and
 * the sandboxed probe makes exactly the libhdf5 calls the other modes make, minus decoding.
 * Storage that points outside the file (external raw files, virtual datasets) is refused,
 * and so is a chunk of another layout that was never written or was stored without its
 * filters (libhdf5 would copy a whole chunk out of however few bytes it holds).
 */
#include "kcap_read_internal.h"

#include <stdlib.h>
#include <string.h>

struct kcap_rslot {
    kcap_rctx *r;
    uint8_t *in, *raw, *out;
    size_t incap, cap, inlen;
    uint8_t *dst;          /* FULL: the valid bytes' place in the tensor; NULL: streaming */
    const uint8_t *result; /* where the decoded valid bytes are */
    size_t valid, chunk, es;
    int err;               /* 0 ok, 1 nomem, 2 bad frame, 3 size mismatch */
    volatile int64_t finished;
    int64_t submitted;
};

static void sink_feed(kcap_rsink *k, const uint8_t *p, size_t n)
{
    kcap_xxh64_update(&k->h, p, n);
    while (k->row_bytes && k->row_hash && n) {
        uint64_t take = k->row_bytes - k->row_fill;
        if (take > n)
            take = n;
        kcap_xxh64_update(&k->rh, p, (size_t)take);
        k->row_fill += take;
        p += take;
        n -= (size_t)take;
        if (k->row_fill == k->row_bytes) {
            k->row_hash[k->row_i++] = kcap_xxh64_digest(&k->rh);
            kcap_xxh64_reset(&k->rh, 0);
            k->row_fill = 0;
        }
    }
}

void kcap_rctx_free(kcap_rctx *r)
{
    for (int i = 0; r->dctx && i < r->nworkers; i++)
        ZSTD_freeDCtx(r->dctx[i]);
    for (int i = 0; r->slots && i < r->nslots; i++) {
        free(r->slots[i].in);
        free(r->slots[i].raw);
        free(r->slots[i].out);
    }
    free(r->dctx);
    free(r->slots);
    free(r->slab);
    kcap_pool_free(r->pool);
    r->dctx = NULL;
    r->slots = NULL;
    r->slab = NULL;
    r->slab_cap = 0;
    r->pool = NULL;
}

int kcap_read_h5err(kcap_rctx *r, int code, const char *obj, const char *what)
{
    char buf[400];
    kcap_h5_errtext(buf, sizeof buf);
    return kcap_error_set(r->err, code, "%s: %s: %s: %s", r->path, obj, what, buf);
}

/* Decode state for chunks of up to `chunk` raw bytes; *use = slots that may be in flight
 * (about 3 chunk-sized buffers each, bounded by KCAP_STREAM_BYTES, at least 2). */
static int rctx_prepare(kcap_rctx *r, size_t chunk, int *use)
{
    if (!r->pool && r->want_pool && r->mode != KCAP_RMODE_PROBE) {
        int n = kcap_online_cpus();
        r->pool = kcap_pool_create(n > 16 ? 16 : n); /* NULL: jobs run inline */
    }
    if (!r->dctx) {
        r->nworkers = kcap_pool_threads(r->pool) + 1;
        r->nslots = 2 * r->nworkers + 2;
        r->dctx = calloc((size_t)r->nworkers, sizeof *r->dctx);
        r->slots = calloc((size_t)r->nslots, sizeof *r->slots);
        if (!r->dctx || !r->slots)
            return -1;
        for (int i = 0; i < r->nworkers; i++)
            if (!(r->dctx[i] = ZSTD_createDCtx()))
                return -1;
        for (int i = 0; i < r->nslots; i++)
            r->slots[i].r = r;
    }
    size_t incap = ZSTD_compressBound(chunk) + 64, per = incap + 2 * chunk;
    int u = r->nslots;
    if ((size_t)u * per > KCAP_STREAM_BYTES)
        u = KCAP_STREAM_BYTES / per < 2 ? 2 : (int)(KCAP_STREAM_BYTES / per);
    *use = u < r->nslots ? u : r->nslots;
    for (int i = 0; i < *use; i++) {
        kcap_rslot *s = &r->slots[i];
        if (s->incap < incap) {
            free(s->in);
            s->incap = 0;
            if (!(s->in = malloc(incap)))
                return -1;
            s->incap = incap;
        }
        if (s->cap < chunk && r->mode != KCAP_RMODE_PROBE) {
            free(s->raw);
            free(s->out);
            s->cap = 0;
            s->raw = malloc(chunk);
            s->out = malloc(chunk);
            if (!s->raw || !s->out)
                return -1;
            s->cap = chunk;
        }
    }
    return 0;
}

static void decode_job(void *arg, int worker)
{
    kcap_rslot *s = arg;
    kcap_rctx *r = s->r;
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
    /* a whole byte-sized chunk can land in the tensor directly */
    uint8_t *raw = s->dst && s->es == 1 && s->valid == s->chunk ? s->dst : s->raw;
    size_t got = ZSTD_decompressDCtx(r->dctx[worker], raw, s->chunk, s->in, s->inlen);
    if (ZSTD_isError(got) || got != s->chunk) {
        s->err = 2;
        goto done;
    }
    uint8_t *res = raw;
    if (s->es > 1) {
        res = s->dst && s->valid == s->chunk ? s->dst : s->out;
        kcap_unshuffle(res, raw, s->chunk / s->es, s->es);
    }
    if (s->dst && res != s->dst)
        memcpy(s->dst, res, s->valid);
    s->result = s->dst ? s->dst : res;
done:
    kcap_pool_done(r->pool, &s->finished);
}

/* Reads a chunked (shuffle, zstd) dataset whose chunks are contiguous ranges. Returns 1
 * when the layout is not that (caller takes the generic path). Caller holds the lock. */
static int read_fast(kcap_rctx *r, hid_t d, hid_t dcpl, const kcap_tensor *t, const char *full,
                     kcap_rsink *sink)
{
    if (H5Pget_nfilters(dcpl) != 2)
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
    int split = 0;
    for (int i = 0; i < t->ndim; i++) {
        if (!cd[i])
            return 1;
        if (cd[i] != (hsize_t)t->shape[i])
            split = i;
    }
    for (int i = 0; i < split; i++)
        if (cd[i] != 1)
            return 1; /* not a layout kcap writes: the generic path decodes it */
    size_t es = kcap_dtype_size(t->dtype);
    uint64_t inner = 1, outer = 1, k = cd[split];
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
    int use = 0;
    if (rctx_prepare(r, chunk_bytes, &use))
        return kcap_error_set(r->err, KCAP_ERR_NOMEM, "%s: %s: out of memory", r->path, full);
    int probe = r->mode == KCAP_RMODE_PROBE;
    uint64_t next_sub = 0, next_done = 0;
    int rc = KCAP_OK;
    while (next_done < nchunks) {
        while (rc == KCAP_OK && next_sub < nchunks && next_sub - next_done < (uint64_t)use) {
            kcap_rslot *s = &r->slots[next_sub % (uint64_t)use];
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
            if (H5Dget_chunk_storage_size(d, coord, &sz) < 0) {
                rc = kcap_read_h5err(r, KCAP_ERR_CORRUPT, full, "looking up a chunk");
                break;
            }
            if (sz == 0) { /* not an HDF5 error: nothing on its stack to quote */
                rc = kcap_error_set(r->err, KCAP_ERR_CORRUPT, "%s: %s: chunk %llu missing (no "
                                    "storage allocated)", r->path, full,
                                    (unsigned long long)next_sub);
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
                rc = kcap_read_h5err(r, KCAP_ERR_CORRUPT, full, "reading a chunk");
                break;
            }
            if (mask) {
                rc = kcap_error_set(r->err, KCAP_ERR_CORRUPT, "%s: %s: chunk %llu was stored "
                                    "without its filters", r->path, full,
                                    (unsigned long long)next_sub);
                break;
            }
            uint64_t at = (o * (uint64_t)t->shape[split] + row0) * inner * es;
            s->inlen = (size_t)sz;
            s->dst = t->data ? (uint8_t *)t->data + at : NULL;
            s->valid = (size_t)(rows * inner * es);
            s->chunk = chunk_bytes;
            s->es = es;
            s->submitted++;
            if (probe) {
                s->finished = s->submitted;
                s->err = 0;
            } else {
                kcap_h5_unlock(); /* let other threads use libhdf5 while we decode */
                kcap_pool_submit(r->pool, decode_job, s);
                kcap_h5_lock();
            }
            next_sub++;
        }
        if (next_done >= next_sub)
            break; /* error before anything was submitted */
        kcap_rslot *s = &r->slots[next_done % (uint64_t)use];
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
        if (rc == KCAP_OK && !probe && sink)
            sink_feed(sink, s->result, s->valid);
        next_done++;
    }
    for (uint64_t i = next_done; i < next_sub; i++) { /* drain what is in flight after an error */
        kcap_rslot *s = &r->slots[i % (uint64_t)use];
        kcap_h5_unlock();
        kcap_pool_wait(r->pool, &s->finished, s->submitted);
        kcap_h5_lock();
    }
    return rc;
}

/* Any other layout: H5Dread of dim-0 slabs, into the tensor or a bounded buffer. */
static int read_slabs(kcap_rctx *r, hid_t d, const kcap_tensor *t, const char *full,
                      kcap_rsink *sink)
{
    hid_t mt = kcap_h5_file_type(t->dtype);
    uint64_t rows = t->ndim ? (uint64_t)t->shape[0] : 1;
    uint64_t row = rows ? t->nbytes / rows : 0, per = row ? KCAP_SLAB_BYTES / row : 1;
    if (row > KCAP_MAX_CHUNK_BYTES)
        return kcap_error_set(r->err, KCAP_ERR_CORRUPT, "%s: %s: a row of %llu bytes in a "
                              "layout kcap does not write (at most %u MiB)", r->path, full,
                              (unsigned long long)row, KCAP_MAX_CHUNK_BYTES >> 20);
    if (per < 1)
        per = 1;
    size_t need = (size_t)(per * row > row ? per * row : row);
    if (!t->data && r->slab_cap < need) { /* sized by the largest slab so far */
        free(r->slab);
        r->slab_cap = 0;
        if (!(r->slab = malloc(need)))
            return kcap_error_set(r->err, KCAP_ERR_NOMEM, "%s: %s: out of memory", r->path, full);
        r->slab_cap = need;
    }
    hid_t fsp = H5Dget_space(d);
    if (fsp < 0)
        return kcap_read_h5err(r, KCAP_ERR_CORRUPT, full, "reading the dataspace");
    int rc = KCAP_OK;
    for (uint64_t r0 = 0; rc == KCAP_OK && r0 < rows; r0 += per) {
        hsize_t start[KCAP_MAX_DIMS] = {0}, count[KCAP_MAX_DIMS];
        uint64_t n = rows - r0 < per ? rows - r0 : per;
        uint8_t *dst = t->data ? (uint8_t *)t->data + r0 * row : r->slab;
        hid_t msp;
        if (t->ndim) {
            for (int i = 0; i < t->ndim; i++)
                count[i] = (hsize_t)t->shape[i];
            start[0] = r0;
            count[0] = n;
            msp = H5Screate_simple(t->ndim, count, NULL);
            if (msp < 0 || H5Sselect_hyperslab(fsp, H5S_SELECT_SET, start, NULL, count, NULL) < 0)
                rc = kcap_read_h5err(r, KCAP_ERR_CORRUPT, full, "selecting rows");
        } else {
            msp = H5Screate(H5S_SCALAR);
        }
        if (rc == KCAP_OK && H5Dread(d, mt, msp, fsp, H5P_DEFAULT, dst) < 0)
            rc = kcap_read_h5err(r, KCAP_ERR_CORRUPT, full, "reading the data");
        if (msp >= 0)
            H5Sclose(msp);
        if (rc == KCAP_OK && sink && r->mode != KCAP_RMODE_PROBE)
            sink_feed(sink, dst, (size_t)(n * row));
    }
    H5Sclose(fsp);
    return rc;
}

/* Every chunk of the grid is stored, through the whole pipeline. A chunk stored with filters
 * skipped (its filter mask) reaches libhdf5's copy as raw bytes of whatever size it has: 16
 * stored bytes copied out as a whole declared chunk (a heap over-read in the reading process,
 * found by a review of crafted files), and the zstd filter's frame-size check never runs. A
 * chunk never written reads as the fill value: data that is not in the file. */
static int generic_chunks_stored(kcap_rctx *r, hid_t d, const kcap_tensor *t, const hsize_t *cd,
                                 const char *full)
{
    uint64_t n = 1, grid[KCAP_MAX_DIMS];
    for (int i = 0; i < t->ndim; i++) {
        grid[i] = ((uint64_t)t->shape[i] + cd[i] - 1) / cd[i];
        if ((n *= grid[i]) > KCAP_MAX_GENERIC_CHUNKS)
            return kcap_error_set(r->err, KCAP_ERR_CORRUPT, "%s: %s: more than %u chunks in a "
                                  "layout kcap does not write", r->path, full,
                                  KCAP_MAX_GENERIC_CHUNKS);
    }
    for (uint64_t c = 0; c < n; c++) {
        hsize_t off[KCAP_MAX_DIMS];
        uint64_t rem = c;
        for (int i = t->ndim - 1; i >= 0; i--) {
            off[i] = (hsize_t)(rem % grid[i] * cd[i]);
            rem /= grid[i];
        }
        unsigned mask = 0;
        haddr_t addr = HADDR_UNDEF;
        hsize_t size = 0;
        if (H5Dget_chunk_info_by_coord(d, off, &mask, &addr, &size) < 0)
            return kcap_read_h5err(r, KCAP_ERR_CORRUPT, full, "looking up a chunk");
        if (addr == HADDR_UNDEF || size == 0)
            return kcap_error_set(r->err, KCAP_ERR_CORRUPT, "%s: %s: chunk %llu missing (no "
                                  "storage allocated)", r->path, full, (unsigned long long)c);
        if (mask)
            return kcap_error_set(r->err, KCAP_ERR_CORRUPT, "%s: %s: chunk %llu was stored "
                                  "without its filters", r->path, full, (unsigned long long)c);
    }
    return KCAP_OK;
}

/* A chunked dataset outside the fast path's layout, before libhdf5 decodes it: the filter
 * pipeline must be the writer's (shuffle, then zstd 32015; shuffle keeps the size, so the
 * frame decodes to exactly one chunk), each chunk no larger than its tensor or the chunk
 * limit, and every chunk stored through that pipeline (generic_chunks_stored). Sets
 * *chunk_bytes for the filter's check (kcap_h5zstd_expect_bytes). */
static int generic_chunks_ok(kcap_rctx *r, hid_t d, const kcap_tensor *t, const char *full,
                             size_t *chunk_bytes)
{
    hid_t dcpl = H5Dget_create_plist(d);
    if (dcpl < 0)
        return kcap_read_h5err(r, KCAP_ERR_CORRUPT, full, "reading the dataset layout");
    hsize_t cd[KCAP_MAX_DIMS];
    unsigned flags, cdv[8];
    size_t ncd = 8;
    char fname[64];
    int nf = H5Pget_nfilters(dcpl), rc = KCAP_OK;
    int pipeline_ok = nf == 2 &&
        H5Pget_filter2(dcpl, 0, &flags, &ncd, cdv, sizeof fname, fname, NULL) == H5Z_FILTER_SHUFFLE;
    ncd = 8;
    pipeline_ok = pipeline_ok &&
        H5Pget_filter2(dcpl, 1, &flags, &ncd, cdv, sizeof fname, fname, NULL) == KCAP_H5Z_ZSTD;
    uint64_t bytes = kcap_dtype_size(t->dtype);
    if (!pipeline_ok)
        rc = kcap_error_set(r->err, KCAP_ERR_CORRUPT, "%s: %s: filter pipeline of %d filter%s is "
                            "not the one kcap writes (shuffle, then zstd 32015); refused",
                            r->path, full, nf, nf == 1 ? "" : "s");
    else if (t->ndim < 1 || H5Pget_chunk(dcpl, t->ndim, cd) != t->ndim)
        rc = kcap_error_set(r->err, KCAP_ERR_CORRUPT, "%s: %s: chunk rank differs from the "
                            "tensor's %d dimensions", r->path, full, t->ndim);
    for (int i = 0; rc == KCAP_OK && i < t->ndim; i++) {
        uint64_t extent = t->shape[i] ? (uint64_t)t->shape[i] : 1;
        if (!cd[i] || cd[i] > extent)
            rc = kcap_error_set(r->err, KCAP_ERR_CORRUPT, "%s: %s: chunk dimension %d (%llu) is "
                                "%s the tensor's %llu", r->path, full, i,
                                (unsigned long long)cd[i], cd[i] ? "beyond" : "zero; extent of",
                                (unsigned long long)extent);
        else if ((bytes *= cd[i]) > KCAP_MAX_CHUNK_BYTES)
            rc = kcap_error_set(r->err, KCAP_ERR_CORRUPT, "%s: %s: a chunk over the %u MiB "
                                "limit", r->path, full, KCAP_MAX_CHUNK_BYTES >> 20);
    }
    if (rc == KCAP_OK)
        rc = generic_chunks_stored(r, d, t, cd, full);
    H5Pclose(dcpl);
    *chunk_bytes = rc == KCAP_OK ? (size_t)bytes : 0;
    return rc;
}

int kcap_read_storage_ok(kcap_rctx *r, hid_t d, const char *full)
{
    hid_t dcpl = H5Dget_create_plist(d);
    if (dcpl < 0)
        return kcap_read_h5err(r, KCAP_ERR_CORRUPT, full, "reading the dataset layout");
    H5D_layout_t lay = H5Pget_layout(dcpl);
    int next = H5Pget_external_count(dcpl), rc = KCAP_OK;
    /* raw data in another file (e.g. /etc/passwd) or mapped from other datasets: never */
    if (next != 0)
        rc = kcap_error_set(r->err, KCAP_ERR_CORRUPT, "%s: %s: declares external raw storage "
                            "(%d file%s outside the snapshot); refused", r->path, full,
                            next, next == 1 ? "" : "s");
    else if (lay == H5D_VIRTUAL)
        rc = kcap_error_set(r->err, KCAP_ERR_CORRUPT, "%s: %s: a virtual dataset (data mapped "
                            "from other datasets or files); refused", r->path, full);
    else if (lay < 0)
        rc = kcap_read_h5err(r, KCAP_ERR_CORRUPT, full, "reading the dataset layout");
    H5Pclose(dcpl);
    return rc;
}

int kcap_read_data(kcap_rctx *r, hid_t d, kcap_tensor *t, const char *full, kcap_rsink *sink)
{
    int rc = kcap_read_storage_ok(r, d, full);
    if (rc)
        return rc;
    hid_t dcpl = H5Dget_create_plist(d);
    if (dcpl < 0)
        return kcap_read_h5err(r, KCAP_ERR_CORRUPT, full, "reading the dataset layout");
    H5D_layout_t lay = H5Pget_layout(dcpl);
    rc = lay == H5D_CHUNKED ? read_fast(r, d, dcpl, t, full, sink) : 1;
    H5Pclose(dcpl);
    if (rc != 1)
        return rc;
    if (!t->nbytes)
        return KCAP_OK;
    if (lay != H5D_CHUNKED && H5Dget_storage_size(d) != t->nbytes)
        return kcap_error_set(r->err, KCAP_ERR_CORRUPT, "%s: %s: %llu bytes stored, %zu "
                              "expected", r->path, full,
                              (unsigned long long)H5Dget_storage_size(d), t->nbytes);
    size_t expect = 0;
    if (lay == H5D_CHUNKED && (rc = generic_chunks_ok(r, d, t, full, &expect)))
        return rc;
    kcap_h5zstd_expect_bytes = expect; /* every frame must decode to one whole chunk */
    rc = read_slabs(r, d, t, full, sink);
    kcap_h5zstd_expect_bytes = 0;
    return rc;
}
