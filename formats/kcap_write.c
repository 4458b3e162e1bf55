/*
 * kcap_write.c — the snapshot writer: a kcap_writer owns a worker pool, one zstd context
 * and shuffle buffer per worker and a ring of in-flight chunk slots. For each big tensor
 * the workers shuffle + compress chunks (one zstd frame each, content size and checksum
 * on) while the calling thread alone stores finished chunks in order with H5Dwrite_chunk
 * under the global HDF5 lock; the declared pipeline (shuffle, zstd 32015) lets any HDF5
 * reader decode them. The file is created under a temp name, sealed (kcap_seal.c),
 * fsync'd and renamed (kcap_fsutil.c).
 */
#include "kcap_calls.h"
#include "kcap_fsutil.h"
#include "kcap_h5util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <zstd.h>

#ifdef KCAP_TRACE /* phase timings for development builds only: libraries never print */
#include <time.h>
#define TRACE_T(v)                                                                          \
    struct timespec v##_ts;                                                                 \
    clock_gettime(CLOCK_MONOTONIC, &v##_ts);                                                \
    double v = (double)v##_ts.tv_sec + (double)v##_ts.tv_nsec * 1e-9
#define TRACE_PRINT(...) fprintf(stderr, __VA_ARGS__)
#else
#define TRACE_T(v)
#define TRACE_PRINT(...)
#endif

#define DEFAULT_CHUNK (4u << 20)
#define DEFAULT_MIN_COMPRESS (64u << 10)

typedef struct slot {
    struct kcap_writer *w;
    const uint8_t *src;
    size_t valid, chunk, es;
    uint8_t *out;
    size_t outcap, outlen;
    int err;
    hsize_t coord[KCAP_MAX_DIMS];
    volatile int64_t finished;
    int64_t submitted;
} slot;

struct kcap_writer {
    kcap_writer_opts o;
    kcap_pool *pool;
    int nworkers; /* pool threads + 1 (the caller, when a job runs inline) */
    ZSTD_CCtx **cctx;
    uint8_t **shuf, **pad;
    int nslots;
    slot *slots;
};

void kcap_writer_free(kcap_writer *w)
{
    if (!w)
        return;
    kcap_pool_free(w->pool);
    for (int i = 0; i < w->nworkers; i++) {
        if (w->cctx)
            ZSTD_freeCCtx(w->cctx[i]);
        if (w->shuf)
            free(w->shuf[i]);
        if (w->pad)
            free(w->pad[i]);
    }
    for (int i = 0; w->slots && i < w->nslots; i++)
        free(w->slots[i].out);
    free(w->cctx);
    free(w->shuf);
    free(w->pad);
    free(w->slots);
    free(w);
}

kcap_writer *kcap_writer_create(const kcap_writer_opts *opts, kcap_error *err)
{
    kcap_writer *w = calloc(1, sizeof *w);
    if (!w) {
        kcap_error_set(err, KCAP_ERR_NOMEM, "kcap_writer_create: out of memory");
        return NULL;
    }
    if (opts)
        w->o = *opts;
    if (w->o.threads <= 0)
        w->o.threads = kcap_online_cpus();
    if (w->o.threads > 256)
        w->o.threads = 256;
    if (w->o.level == 0)
        w->o.level = 1;
    if (w->o.level < 1 || w->o.level > ZSTD_maxCLevel()) {
        kcap_error_set(err, KCAP_ERR_ARG, "kcap_writer_create: zstd level %d outside 1..%d",
                       w->o.level, ZSTD_maxCLevel());
        free(w);
        return NULL;
    }
    if (!w->o.chunk_bytes)
        w->o.chunk_bytes = DEFAULT_CHUNK;
    if (w->o.chunk_bytes < 4096 || w->o.chunk_bytes > KCAP_MAX_CHUNK_BYTES) {
        kcap_error_set(err, KCAP_ERR_ARG,
                       "kcap_writer_create: chunk_bytes %zu outside 4 KiB..%u MiB",
                       w->o.chunk_bytes, KCAP_MAX_CHUNK_BYTES >> 20);
        free(w);
        return NULL;
    }
    if (!w->o.min_compress_bytes)
        w->o.min_compress_bytes = DEFAULT_MIN_COMPRESS;
    w->pool = kcap_pool_create(w->o.threads);
    w->nworkers = kcap_pool_threads(w->pool) + 1;
    w->nslots = 2 * w->nworkers + 2;
    w->cctx = calloc((size_t)w->nworkers, sizeof *w->cctx);
    w->shuf = calloc((size_t)w->nworkers, sizeof *w->shuf);
    w->pad = calloc((size_t)w->nworkers, sizeof *w->pad);
    w->slots = calloc((size_t)w->nslots, sizeof *w->slots);
    int ok = w->pool && w->cctx && w->shuf && w->pad && w->slots;
    for (int i = 0; ok && i < w->nworkers; i++) {
        w->cctx[i] = ZSTD_createCCtx();
        w->shuf[i] = malloc(w->o.chunk_bytes);
        ok = w->cctx[i] && w->shuf[i];
        if (ok) {
            ZSTD_CCtx_setParameter(w->cctx[i], ZSTD_c_compressionLevel, w->o.level);
            ZSTD_CCtx_setParameter(w->cctx[i], ZSTD_c_checksumFlag, 1);
            ZSTD_CCtx_setParameter(w->cctx[i], ZSTD_c_contentSizeFlag, 1);
        }
    }
    for (int i = 0; ok && i < w->nslots; i++) {
        w->slots[i].w = w;
        w->slots[i].outcap = ZSTD_compressBound(w->o.chunk_bytes);
        w->slots[i].out = malloc(w->slots[i].outcap);
        ok = w->slots[i].out != NULL;
    }
    if (!ok) {
        kcap_error_set(err, KCAP_ERR_NOMEM, "kcap_writer_create: out of memory (%d threads)",
                       w->o.threads);
        kcap_writer_free(w);
        return NULL;
    }
    return w;
}

static void compress_job(void *arg, int worker)
{
    slot *s = arg;
    kcap_writer *w = s->w;
    const uint8_t *src = s->src;
    if (s->valid < s->chunk) { /* edge chunk: HDF5 stores it padded to the full size */
        if (!w->pad[worker])
            w->pad[worker] = malloc(w->o.chunk_bytes);
        if (!w->pad[worker]) {
            s->err = 1;
            goto done;
        }
        memcpy(w->pad[worker], src, s->valid);
        memset(w->pad[worker] + s->valid, 0, s->chunk - s->valid);
        src = w->pad[worker];
    }
    if (s->es > 1) {
        kcap_shuffle(w->shuf[worker], src, s->chunk / s->es, s->es);
        src = w->shuf[worker];
    }
    size_t r = ZSTD_compress2(w->cctx[worker], s->out, s->outcap, src, s->chunk);
    s->err = ZSTD_isError(r) ? 2 : 0;
    s->outlen = ZSTD_isError(r) ? 0 : r;
done:
    kcap_pool_done(w->pool, &s->finished);
}

typedef struct {
    const void *data;
    size_t n;
    uint64_t h;
    volatile int64_t done;
    kcap_pool *pool;
} hash_job;

static void hash_job_fn(void *arg, int worker)
{
    hash_job *j = arg;
    (void)worker;
    j->h = kcap_xxh64(j->data, j->n, 0);
    kcap_pool_done(j->pool, &j->done);
}

typedef struct wctx {
    kcap_writer *w;
    const char *path;
    kcap_error *err;
    kcap_extent ext[KCAP_SEAL_MAX_EXTENTS];
    int next;
} wctx;

static int h5fail(wctx *c, const char *what, const char *obj)
{
    char buf[512];
    kcap_h5_errtext(buf, sizeof buf);
    return kcap_error_set(c->err, KCAP_ERR_HDF5, "%s: %s%s%s: %s", c->path, obj ? obj : "",
                          obj ? ": " : "", what, buf);
}

static void note_extent(wctx *c, hid_t d, const char *full, int chunked)
{
    if (c->next >= KCAP_SEAL_MAX_EXTENTS)
        return;
    uint64_t lo = UINT64_MAX, hi = 0;
    if (!chunked) {
        haddr_t a = H5Dget_offset(d);
        hsize_t n = H5Dget_storage_size(d);
        if (a != HADDR_UNDEF && n) { /* H5Dget_offset is an absolute file offset */
            lo = a;
            hi = a + n;
        }
    } else {
        hsize_t nch = 0;
        hid_t sp = H5Dget_space(d);
        if (sp >= 0 && H5Dget_num_chunks(d, sp, &nch) >= 0)
            for (hsize_t i = 0; i < nch; i++) {
                haddr_t a;
                hsize_t sz;
                if (H5Dget_chunk_info(d, sp, i, NULL, NULL, &a, &sz) < 0)
                    break;
                a += KCAP_UB_SIZE; /* chunk addresses are relative to the user block's end */
                if (a < lo)
                    lo = a;
                if (a + sz > hi)
                    hi = a + sz;
            }
        if (sp >= 0)
            H5Sclose(sp);
    }
    H5Eclear2(H5E_DEFAULT);
    if (lo >= hi)
        return;
    kcap_extent *e = &c->ext[c->next++];
    e->begin = lo;
    e->end = hi;
    snprintf(e->name, sizeof e->name, "%.63s", full);
}

static int write_chunks(wctx *c, hid_t d, const kcap_tensor *t, const uint64_t *chunk,
                        const char *full)
{
    kcap_writer *w = c->w;
    size_t es = kcap_dtype_size(t->dtype);
    int split = 0;
    for (int i = 0; i < t->ndim; i++)
        if (chunk[i] != (uint64_t)t->shape[i])
            split = i;
    uint64_t inner = 1, outer = 1, k = chunk[split];
    for (int i = split + 1; i < t->ndim; i++)
        inner *= (uint64_t)t->shape[i];
    for (int i = 0; i < split; i++)
        outer *= (uint64_t)t->shape[i];
    uint64_t nk = ((uint64_t)t->shape[split] + k - 1) / k, nchunks = outer * nk;
    size_t chunk_bytes = (size_t)(k * inner * es);
    uint64_t next_sub = 0, next_wr = 0;
    int rc = KCAP_OK;
    while (next_wr < nchunks) {
        while (rc == KCAP_OK && next_sub < nchunks && next_sub - next_wr < (uint64_t)w->nslots) {
            slot *s = &w->slots[next_sub % (uint64_t)w->nslots];
            uint64_t o = next_sub / nk, j = next_sub % nk, row0 = j * k;
            uint64_t rows = (uint64_t)t->shape[split] - row0;
            if (rows > k)
                rows = k;
            s->src = (const uint8_t *)t->data + (o * (uint64_t)t->shape[split] + row0) * inner * es;
            s->valid = (size_t)(rows * inner * es);
            s->chunk = chunk_bytes;
            s->es = es;
            s->err = 0;
            memset(s->coord, 0, sizeof s->coord);
            uint64_t rem = o;
            for (int i = split - 1; i >= 0; i--) {
                s->coord[i] = rem % (uint64_t)t->shape[i];
                rem /= (uint64_t)t->shape[i];
            }
            s->coord[split] = row0;
            s->submitted++;
            kcap_pool_submit(w->pool, compress_job, s);
            next_sub++;
        }
        slot *s = &w->slots[next_wr % (uint64_t)w->nslots];
        kcap_pool_wait(w->pool, &s->finished, s->submitted);
        next_wr++;
        if (rc != KCAP_OK)
            continue; /* drain what is in flight */
        if (s->err) {
            rc = kcap_error_set(c->err, s->err == 1 ? KCAP_ERR_NOMEM : KCAP_ERR_ZSTD,
                                "%s: %s: compressing a chunk failed", c->path, full);
            continue;
        }
        kcap_h5_lock();
        if (H5Dwrite_chunk(d, H5P_DEFAULT, 0, s->coord, s->outlen, s->out) < 0)
            rc = h5fail(c, "H5Dwrite_chunk", full);
        kcap_h5_unlock();
    }
    return rc;
}

static int write_tensor(wctx *c, hid_t g, const kcap_tensor *t, const char *gname)
{
    kcap_writer *w = c->w;
    char full[96];
    snprintf(full, sizeof full, "/%s/%s", gname, t->name);
    if (!kcap_dtype_size(t->dtype) || t->ndim < 0 || t->ndim > KCAP_MAX_DIMS)
        return kcap_error_set(c->err, KCAP_ERR_ARG, "%s: %s: invalid dtype or rank", c->path,
                              full);
    uint64_t nelem = 1;
    hsize_t dims[KCAP_MAX_DIMS];
    for (int i = 0; i < t->ndim; i++) {
        if (t->shape[i] < 0)
            return kcap_error_set(c->err, KCAP_ERR_ARG, "%s: %s: negative dimension", c->path,
                                  full);
        dims[i] = (hsize_t)t->shape[i];
        nelem *= (uint64_t)t->shape[i];
    }
    if (nelem * kcap_dtype_size(t->dtype) != t->nbytes || (t->nbytes && !t->data))
        return kcap_error_set(c->err, KCAP_ERR_ARG,
                              "%s: %s: nbytes %zu disagrees with its shape, or no data", c->path,
                              full, t->nbytes);
    hash_job hj = {t->data, t->nbytes, 0, 0, w->pool};
    int big = t->ndim > 0 && nelem > 0 && t->nbytes >= w->o.min_compress_bytes;
    if (big)
        kcap_pool_submit(w->pool, hash_job_fn, &hj); /* runs beside the chunk jobs */
    else
        hj.h = kcap_xxh64(t->data, t->nbytes, 0);

    int rc = KCAP_OK;
    uint64_t chunk[KCAP_MAX_DIMS];
    kcap_h5_lock();
    hid_t ftype = kcap_h5_file_type(t->dtype);
    hid_t space = t->ndim ? H5Screate_simple(t->ndim, dims, NULL) : H5Screate(H5S_SCALAR);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE), d = -1;
    if (big) {
        kcap_chunk_dims(t, w->o.chunk_bytes, chunk);
        hsize_t cd[KCAP_MAX_DIMS];
        for (int i = 0; i < t->ndim; i++)
            cd[i] = chunk[i];
        unsigned level = (unsigned)w->o.level;
        if (H5Pset_chunk(dcpl, t->ndim, cd) < 0 || H5Pset_shuffle(dcpl) < 0 ||
            H5Pset_filter(dcpl, KCAP_H5Z_ZSTD, H5Z_FLAG_MANDATORY, 1, &level) < 0 ||
            H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER) < 0)
            rc = h5fail(c, "setting up the chunked layout", full);
    }
    if (rc == KCAP_OK) {
        d = H5Dcreate2(g, t->name, ftype, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
        if (d < 0)
            rc = h5fail(c, "creating the dataset", full);
    }
    if (rc == KCAP_OK && !big && t->nbytes &&
        H5Dwrite(d, ftype, H5S_ALL, H5S_ALL, H5P_DEFAULT, t->data) < 0)
        rc = h5fail(c, "writing", full);
    kcap_h5_unlock();
    if (rc == KCAP_OK && big)
        rc = write_chunks(c, d, t, chunk, full);
    if (big)
        kcap_pool_wait(w->pool, &hj.done, 1);
    kcap_h5_lock();
    if (rc == KCAP_OK &&
        (kcap_h5_attr_put_str(d, "dtype", kcap_dtype_name(t->dtype)) < 0 ||
         kcap_h5_attr_put_u64(d, "xxh64", hj.h) < 0 ||
         (t->has_strides && kcap_h5_attr_put_i64v(d, "strides", t->strides, t->ndim) < 0)))
        rc = h5fail(c, "writing attributes", full);
    if (rc == KCAP_OK)
        note_extent(c, d, full, big);
    if (d >= 0)
        H5Dclose(d);
    H5Pclose(dcpl);
    H5Sclose(space);
    kcap_h5_unlock();
    return rc;
}

static int write_scalar(wctx *c, hid_t g, const kcap_scalar *sc)
{
    hid_t space = H5Screate(H5S_SCALAR);
    int isf = sc->type == KCAP_SC_FLOAT;
    hid_t d = H5Dcreate2(g, sc->name, isf ? H5T_IEEE_F64LE : H5T_STD_I64LE, space, H5P_DEFAULT,
                         H5P_DEFAULT, H5P_DEFAULT);
    int rc = KCAP_OK;
    if (d < 0 || H5Dwrite(d, isf ? H5T_NATIVE_DOUBLE : H5T_NATIVE_INT64, H5S_ALL, H5S_ALL,
                          H5P_DEFAULT, isf ? (const void *)&sc->f : (const void *)&sc->i) < 0) {
        char full[96];
        snprintf(full, sizeof full, "/scalars/%s", sc->name);
        rc = h5fail(c, "writing the scalar", full);
    }
    if (d >= 0)
        H5Dclose(d);
    H5Sclose(space);
    return rc;
}

static int write_meta(wctx *c, hid_t f, const kcap_meta *m)
{
    const kcap_call_desc *cd = kcap_call_find(m->call);
    char *desc = cd ? kcap_call_describe(cd) : NULL;
    int bad = kcap_h5_attr_put_i64(f, "kcap_format_major", KCAP_FORMAT_MAJOR) < 0 ||
              kcap_h5_attr_put_i64(f, "kcap_format_minor", KCAP_FORMAT_MINOR) < 0 ||
              kcap_h5_attr_put_str(f, "call", m->call) < 0 ||
              kcap_h5_attr_put_i64(f, "abi_version", m->abi_version) < 0 ||
              kcap_h5_attr_put_str(f, "time_utc", m->time_utc) < 0 ||
              kcap_h5_attr_put_str(f, "host", m->host) < 0 ||
              kcap_h5_attr_put_i64(f, "pid", m->pid) < 0 ||
              kcap_h5_attr_put_i64(f, "rank", m->rank) < 0 ||
              kcap_h5_attr_put_str(f, "device_name", m->device_name) < 0 ||
              kcap_h5_attr_put_i64v(f, "compute_capability",
                                    (const int64_t[]){m->cc_major, m->cc_minor}, 2) < 0 ||
              kcap_h5_attr_put_i64(f, "cuda_driver_version", m->driver_version) < 0 ||
              kcap_h5_attr_put_i64(f, "cuda_runtime_version", m->runtime_version) < 0 ||
              kcap_h5_attr_put_str(f, "lib_path", m->lib_path) < 0 ||
              kcap_h5_attr_put_str(f, "lib_hash", m->lib_hash) < 0 ||
              kcap_h5_attr_put_u64(f, "seq", m->seq) < 0 ||
              kcap_h5_attr_put_i64(f, "in_stream_capture", m->in_stream_capture) < 0 ||
              kcap_h5_attr_put_i64(f, "call_status", m->call_status) < 0 ||
              kcap_h5_attr_put_str(f, "kcap_version", m->kcap_version) < 0 ||
              (m->tags[0] && kcap_h5_attr_put_str(f, "tags", m->tags) < 0) ||
              (desc && kcap_h5_attr_put_str(f, "call_description", desc) < 0);
    free(desc);
    return bad ? h5fail(c, "writing root metadata attributes", "/") : KCAP_OK;
}

static hid_t make_group(hid_t f, const char *name)
{
    hid_t gcpl = H5Pcreate(H5P_GROUP_CREATE);
    H5Pset_link_creation_order(gcpl, H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED);
    hid_t g = H5Gcreate2(f, name, H5P_DEFAULT, gcpl, H5P_DEFAULT);
    if (g < 0)
        kcap_h5_errsave();
    H5Pclose(gcpl);
    return g;
}

static int write_hdf5(wctx *c, const kcap_snapshot *s, const char *h5name)
{
    int rc = KCAP_OK;
    kcap_h5_lock();
    hid_t fcpl = H5Pcreate(H5P_FILE_CREATE), fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_userblock(fcpl, KCAP_UB_SIZE);
    H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG);
#if H5_VERSION_GE(1, 10, 7)
    H5Pset_file_locking(fapl, 0, 1); /* a private temp file: nobody else opens it */
#endif
    hid_t f = H5Fcreate(h5name, H5F_ACC_TRUNC, fcpl, fapl);
    if (f < 0)
        kcap_h5_errsave(); /* H5Pclose clears the error stack */
    H5Pclose(fcpl);
    H5Pclose(fapl);
    hid_t g[4] = {-1, -1, -1, -1};
    if (f < 0) {
        rc = h5fail(c, "creating the HDF5 file", NULL);
        kcap_h5_unlock();
        return rc;
    }
    rc = write_meta(c, f, &s->meta);
    const char *gn[4] = {"scalars", "inputs", "outputs", "candidate"};
    int ngroups = 3; /* /candidate only in shadow-mode snapshots */
    for (int i = 0; i < s->ntensors; i++)
        if (s->tensors[i].dir == KCAP_DIR_CAND)
            ngroups = 4;
    for (int i = 0; i < ngroups && rc == KCAP_OK; i++)
        if ((g[i] = make_group(f, gn[i])) < 0)
            rc = h5fail(c, "creating the group", gn[i]);
    for (int i = 0; i < s->nscalars && rc == KCAP_OK; i++)
        rc = write_scalar(c, g[0], &s->scalars[i]);
    kcap_h5_unlock();
    for (int i = 0; i < s->ntensors && rc == KCAP_OK; i++) {
        const kcap_tensor *t = &s->tensors[i];
        int gi = t->dir == KCAP_DIR_CAND ? 3 : t->dir == KCAP_DIR_OUT ? 2 : 1;
        rc = write_tensor(c, g[gi], t, gn[gi]);
    }
    kcap_h5_lock();
    for (int i = 0; i < 4; i++)
        if (g[i] >= 0)
            H5Gclose(g[i]);
    if (H5Fclose(f) < 0 && rc == KCAP_OK)
        rc = h5fail(c, "closing the HDF5 file", NULL);
    kcap_h5_unlock();
    return rc;
}

/*
 * Refuse, before libhdf5 writes anything, a snapshot that cannot fit: libhdf5 1.10 leaves a
 * stale file id behind when a close fails on a full disk or at the file-size limit, and its
 * next walk over open files (the next write, its atexit teardown, h5py in a host) then reads
 * freed memory. So the worst case (every chunk at zstd's bound, plus the user block and a
 * generous metadata margin) is checked against this process's RLIMIT_FSIZE — which also
 * spares the host the SIGXFSZ an oversize write raises — and against the free space of the
 * target file system. A disk filled by someone else between this check and the write, or an
 * I/O error, can still fail inside libhdf5: that residual risk is documented in FORMAT.md.
 */
static int kcap_check_room(const kcap_snapshot *s, int fd, const char *path, kcap_error *err)
{
    unsigned long long need = KCAP_UB_SIZE + (1ull << 20);
    for (int i = 0; i < s->ntensors; i++)
        need += ZSTD_compressBound(s->tensors[i].nbytes) + 64 * 1024;
    struct rlimit rl;
    if (getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        need > (unsigned long long)rl.rlim_cur)
        return kcap_error_set(err, KCAP_ERR_IO,
                              "%s: not written: it may need up to %llu bytes, over this "
                              "process's file-size limit (%llu bytes)",
                              path, need, (unsigned long long)rl.rlim_cur);
    struct statvfs sv;
    if (fstatvfs(fd, &sv) == 0) {
        unsigned long long avail = (unsigned long long)sv.f_bavail * sv.f_frsize;
        if (avail < need)
            return kcap_error_set(err, KCAP_ERR_IO,
                                  "%s: not written: %llu bytes free on its file system, it "
                                  "may need up to %llu",
                                  path, avail, need);
    }
    return KCAP_OK;
}

int kcap_snapshot_write(kcap_writer *w, const kcap_snapshot *s, const char *path,
                        kcap_error *err)
{
    if (!s || !path)
        return kcap_error_set(err, KCAP_ERR_ARG, "kcap_snapshot_write: NULL %s",
                              s ? "path" : "snapshot");
    kcap_writer *own = NULL;
    if (!w && !(w = own = kcap_writer_create(NULL, err)))
        return err ? err->code : KCAP_ERR_NOMEM;
    int rc = kcap_h5zstd_register();
    if (rc) {
        kcap_writer_free(own);
        return kcap_error_set(err, rc, "%s: cannot register the zstd HDF5 filter", path);
    }
    kcap_atomic a;
    rc = kcap_atomic_open(&a, path, err);
    if (rc) {
        kcap_writer_free(own);
        return rc;
    }
    rc = kcap_check_room(s, a.fd, path, err);
    if (rc) {
        kcap_atomic_abort(&a);
        kcap_writer_free(own);
        return rc;
    }
    wctx c = {.w = w, .path = path, .err = err};
    TRACE_T(t0);
    rc = write_hdf5(&c, s, a.h5name);
    TRACE_T(t1);
    if (rc == KCAP_OK)
        rc = kcap_seal_write(a.fd, path, w->pool, c.ext, c.next, err);
    TRACE_T(t2);
    if (rc == KCAP_OK)
        rc = kcap_atomic_commit(&a, err);
    else
        kcap_atomic_abort(&a);
    TRACE_T(t3);
    TRACE_PRINT("hdf5+compress %.3f seal %.3f commit %.3f\n", t1 - t0, t2 - t1, t3 - t2);
    kcap_writer_free(own);
    return rc;
}
