/*
 * kcap_read.c — the validating reader behind kcap_snapshot_read / _read_header / _check.
 * Order of trust: the file must be a regular file (a FIFO or device would block open/read);
 * the seal (kcap_seal.c) is verified before libhdf5 sees the file; then a sandboxed child
 * runs every libhdf5 call of the read on it (kcap_sandbox.c: libhdf5 1.10's parser crashes
 * or loops on some files that carry a valid, recomputed seal); only then does this process
 * parse it: structure, version and attribute types with every size bounded before any
 * allocation, hard links only, data through kcap_read_data.c (in order, bounded buffers for
 * `kcap check`), per-tensor XXH64 and the call description (shapes, dtypes, presence,
 * duplicate rows). Every error names the file, the dataset and the problem.
 */
#include "kcap_read_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_LINKS 256
/* Argument names of a call description: anything else in a file is refused, so names
 * quoted in later messages are plain text. */
#define NAME_CHARS "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-"
/* Declared raw bytes a reader accepts by default (FORMAT.md "Reader limits"). */
#define DEFAULT_DECLARED_MAX ((uint64_t)64 << 30)

uint64_t kcap_read_limit_bytes(void)
{
    const char *e = getenv("KCAP_READ_MAX_BYTES");
    if (e && *e) {
        char *end;
        unsigned long long v = strtoull(e, &end, 10);
        if (!*end && v)
            return v;
    }
    /* a quarter of physical memory: reading a file and rebuilding it for replay (about twice
       its declared bytes) must leave the machine its memory — a crafted 250 KiB file that
       declared all of it once had the OOM killer end the reader */
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    uint64_t phys = pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : (uint64_t)16 << 30;
    return phys / 4 < DEFAULT_DECLARED_MAX ? phys / 4 : DEFAULT_DECLARED_MAX;
}

/* Row hashes of streamed ROWS tensors (CHECK mode), checked after the call description. */
typedef struct rowh {
    int n;
    struct {
        kcap_dir dir;
        char name[KCAP_NAME_MAX];
        uint64_t *h;
    } v[2 * MAX_LINKS];
} rowh;

/* ---- structure ---- */
typedef struct link_list {
    int n;
    char names[MAX_LINKS][KCAP_NAME_MAX];
} link_list;

/* Soft and external links could point anywhere (another file, another object): a snapshot
 * only ever holds hard links. */
static int check_hard_link(kcap_rctx *r, hid_t g, const char *name, const char *full)
{
    H5L_info_t li;
    if (H5Lget_info(g, name, &li, H5P_DEFAULT) < 0)
        return kcap_read_h5err(r, KCAP_ERR_CORRUPT, full, "reading the link");
    if (li.type != H5L_TYPE_HARD)
        return kcap_error_set(r->err, KCAP_ERR_CORRUPT, "%s: %s: %s link; a snapshot holds "
                              "only its own objects (refused)", r->path, full,
                              li.type == H5L_TYPE_SOFT ? "a soft" : li.type == H5L_TYPE_EXTERNAL
                                                                      ? "an external"
                                                                      : "a user-defined");
    return KCAP_OK;
}

static int list_links(kcap_rctx *r, hid_t g, const char *gname, link_list *ll)
{
    H5G_info_t gi;
    if (H5Gget_info(g, &gi) < 0)
        return kcap_read_h5err(r, KCAP_ERR_CORRUPT, gname, "reading the group");
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
            return kcap_read_h5err(r, KCAP_ERR_CORRUPT, gname, "listing");
        if (ll->names[i][strspn(ll->names[i], NAME_CHARS)]) {
            char shown[4 * KCAP_NAME_MAX];
            return kcap_error_set(r->err, KCAP_ERR_CORRUPT, "%s: %s: entry %d has a name with "
                                  "characters outside [A-Za-z0-9_.-]: %s", r->path, gname, i,
                                  kcap_printable(shown, sizeof shown, ll->names[i]));
        }
        char full[96];
        snprintf(full, sizeof full, "%s/%s", gname, ll->names[i]);
        int rc = check_hard_link(r, g, ll->names[i], full);
        if (rc)
            return rc;
    }
    return KCAP_OK;
}

static hid_t open_group(kcap_rctx *r, hid_t f, const char *name, int *rc)
{
    char full[16];
    snprintf(full, sizeof full, "/%s", name);
    htri_t ex = H5Lexists(f, name, H5P_DEFAULT);
    if (ex <= 0) {
        *rc = kcap_error_set(r->err, KCAP_ERR_CORRUPT, "%s: %s: group missing", r->path, full);
        return -1;
    }
    if ((*rc = check_hard_link(r, f, name, full)))
        return -1;
    hid_t g = H5Gopen2(f, name, H5P_DEFAULT);
    if (g < 0)
        *rc = kcap_read_h5err(r, KCAP_ERR_CORRUPT, full, "not a group");
    return g;
}

static int read_scalars(kcap_rctx *r, hid_t f, kcap_snapshot *s)
{
    int rc = KCAP_OK;
    hid_t g = open_group(r, f, "scalars", &rc);
    if (g < 0)
        return rc;
    link_list *ll = malloc(sizeof *ll);
    rc = ll ? list_links(r, g, "/scalars", ll) : KCAP_ERR_NOMEM;
    for (int i = 0; rc == KCAP_OK && i < ll->n; i++) {
        char full[96];
        snprintf(full, sizeof full, "/scalars/%s", ll->names[i]);
        hid_t d = H5Dopen2(g, ll->names[i], H5P_DEFAULT);
        if (d < 0) {
            rc = kcap_read_h5err(r, KCAP_ERR_CORRUPT, full, "not a dataset");
            break;
        }
        hid_t t = H5Dget_type(d), sp = H5Dget_space(d);
        H5T_class_t c = t >= 0 ? H5Tget_class(t) : H5T_NO_CLASS;
        /* a scalar's value read from another file (external raw storage, a virtual dataset)
         * would change the call's meaning without touching the seal: refused as for tensors */
        if ((rc = kcap_read_storage_ok(r, d, full)) != KCAP_OK) {
            /* message set */
        } else if (sp < 0 || H5Sget_simple_extent_type(sp) != H5S_SCALAR ||
            (c != H5T_INTEGER && c != H5T_FLOAT) || H5Tget_size(t) > 8) {
            rc = kcap_error_set(r->err, KCAP_ERR_CORRUPT, "%s: %s: not a scalar number",
                                r->path, full);
        } else if (c == H5T_INTEGER) {
            int64_t v;
            if (H5Dread(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, &v) < 0)
                rc = kcap_read_h5err(r, KCAP_ERR_CORRUPT, full, "reading");
            else
                rc = kcap_snapshot_add_int(s, ll->names[i], v);
        } else {
            double v;
            if (H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, &v) < 0)
                rc = kcap_read_h5err(r, KCAP_ERR_CORRUPT, full, "reading");
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

static const kcap_arg_desc *tensor_arg(const kcap_call_desc *d, const char *name, kcap_dir dir)
{
    for (int i = 0; d && i < d->nargs; i++)
        if (!strcmp(d->args[i].name, name) &&
            d->args[i].kind == (dir == KCAP_DIR_IN ? KCAP_ARG_IN : KCAP_ARG_OUT))
            return &d->args[i];
    return NULL;
}

/* One tensor: header, bounded size, then (by mode) its data kept, streamed or walked. */
static int read_tensor(kcap_rctx *r, hid_t d, kcap_snapshot *s, kcap_dir dir, const char *name,
                       const char *full, size_t **stored, int *nstored, rowh *rh)
{
    hid_t ty = H5Dget_type(d), sp = H5Dget_space(d);
    char dtn[32];
    int nd = sp >= 0 ? H5Sget_simple_extent_ndims(sp) : -1, rc = KCAP_OK;
    hsize_t dims[KCAP_MAX_DIMS];
    kcap_dtype dt = KCAP_DT_INVALID;
    int64_t shape[KCAP_MAX_DIMS], strides[KCAP_MAX_DIMS];
    int nstr = 0;
    uint64_t want_hash = 0;
    kcap_rsink sink = {0};
    if (ty < 0 || nd < 0 || nd > KCAP_MAX_DIMS) {
        rc = kcap_error_set(r->err, KCAP_ERR_CORRUPT, "%s: %s: bad dataspace (rank %d, at most "
                            "%d)", r->path, full, nd, KCAP_MAX_DIMS);
        goto out;
    }
    H5Sget_simple_extent_dims(sp, dims, NULL);
    int a = kcap_h5_attr_get_str(d, "dtype", dtn, sizeof dtn);
    if (a || (dt = kcap_dtype_from_name(dtn)) == KCAP_DT_INVALID) {
        rc = kcap_error_set(r->err, KCAP_ERR_CORRUPT, "%s: %s: %s dtype attribute", r->path,
                            full, a == 1 ? "missing" : a ? "malformed" : "unknown");
        goto out;
    }
    if (!kcap_h5_type_matches(ty, dt)) {
        rc = kcap_error_set(r->err, KCAP_ERR_CORRUPT, "%s: %s: stored HDF5 type does not hold "
                            "dtype %s", r->path, full, dtn);
        goto out;
    }
    if (kcap_h5_attr_get_u64(d, "xxh64", &want_hash)) {
        rc = kcap_error_set(r->err, KCAP_ERR_CORRUPT, "%s: %s: missing or malformed xxh64 "
                            "attribute", r->path, full);
        goto out;
    }
    a = kcap_h5_attr_get_i64v(d, "strides", strides, KCAP_MAX_DIMS, &nstr);
    if (a < 0 || (a == 0 && nstr != nd)) {
        rc = kcap_error_set(r->err, KCAP_ERR_CORRUPT, "%s: %s: malformed strides attribute",
                            r->path, full);
        goto out;
    }
    /* bound the size before anything is allocated */
    uint64_t bytes = kcap_dtype_size(dt);
    for (int k = 0; k < nd; k++) {
        shape[k] = (int64_t)dims[k];
        if (dims[k] > (uint64_t)INT64_MAX || (dims[k] && bytes > r->budget / dims[k])) {
            rc = kcap_error_set(r->err, KCAP_ERR_NOMEM, "%s: %s: shape claims more than the "
                                "%llu bytes this reader accepts (KCAP_READ_MAX_BYTES)",
                                r->path, full, (unsigned long long)r->budget);
            goto out;
        }
        bytes *= dims[k];
    }
    r->budget -= bytes;
    /* CHECK keeps what shapes and row ids are computed from (integer tensors), streams the
     * rest; ROWS tensors streamed keep one hash per row for the duplicate-slot check. */
    int keep = r->mode == KCAP_RMODE_FULL ||
               (r->mode == KCAP_RMODE_CHECK && (dt == KCAP_DT_I32 || dt == KCAP_DT_I64) &&
                bytes <= KCAP_CHECK_KEEP_BYTES);
    static char dummy;
    void *data = NULL;
    rc = kcap_snapshot_add_tensor(s, name, dir, dt, nd, shape, a == 0 ? strides : NULL,
                                  keep ? NULL : &dummy, &data);
    if (rc) {
        kcap_error_set(r->err, rc, "%s: %s: %s", r->path, full,
                       rc == KCAP_ERR_NOMEM ? "out of memory" : "duplicate or bad tensor");
        goto out;
    }
    kcap_tensor *t = &s->tensors[s->ntensors - 1];
    if (!keep)
        t->data = NULL;
    hsize_t stsize = H5Dget_storage_size(d); /* every mode makes the same libhdf5 calls */
    if (stored) {
        size_t *ns = realloc(*stored, (size_t)(*nstored + 1) * sizeof *ns);
        if (!ns) {
            rc = kcap_error_set(r->err, KCAP_ERR_NOMEM, "%s: out of memory", r->path);
            goto out;
        }
        *stored = ns;
        ns[(*nstored)++] = (size_t)stsize;
    }
    if ((rc = kcap_read_storage_ok(r, d, full)) || r->mode == KCAP_RMODE_HEADER)
        goto out;
    kcap_xxh64_reset(&sink.h, 0);
    kcap_xxh64_reset(&sink.rh, 0);
    const kcap_arg_desc *ad = tensor_arg(kcap_call_find(s->meta.call), name, dir);
    if (r->mode == KCAP_RMODE_CHECK && !keep && ad && ad->gather == KCAP_GATHER_ROWS && nd >= 1 &&
        shape[0] > 0 && bytes / (uint64_t)shape[0] >= 64 && rh->n < 2 * MAX_LINKS) {
        sink.row_bytes = bytes / (uint64_t)shape[0];
        if (!(sink.row_hash = calloc((size_t)shape[0], 8))) {
            rc = kcap_error_set(r->err, KCAP_ERR_NOMEM, "%s: %s: out of memory", r->path, full);
            goto out;
        }
        rh->v[rh->n].dir = dir;
        snprintf(rh->v[rh->n].name, KCAP_NAME_MAX, "%s", name);
        rh->v[rh->n++].h = sink.row_hash; /* freed with rh */
    }
    rc = kcap_read_data(r, d, t, full, &sink);
    if (rc == KCAP_OK && r->mode != KCAP_RMODE_PROBE) {
        uint64_t h = kcap_xxh64_digest(&sink.h);
        if (h != want_hash)
            rc = kcap_error_set(r->err, KCAP_ERR_CHECKSUM, "%s: %s: checksum mismatch (xxh64 "
                                "%016llx stored, %016llx computed)", r->path, full,
                                (unsigned long long)want_hash, (unsigned long long)h);
    }
out:
    if (ty >= 0)
        H5Tclose(ty);
    if (sp >= 0)
        H5Sclose(sp);
    return rc;
}

static int read_tensors(kcap_rctx *r, hid_t f, kcap_snapshot *s, kcap_dir dir, size_t **stored,
                        int *nstored, rowh *rh)
{
    const char *gname = kcap_dir_group(dir);
    char gfull[16];
    snprintf(gfull, sizeof gfull, "/%s", gname);
    int rc = KCAP_OK;
    hid_t g = open_group(r, f, gname, &rc);
    if (g < 0)
        return rc;
    link_list *ll = malloc(sizeof *ll);
    rc = ll ? list_links(r, g, gfull, ll) : KCAP_ERR_NOMEM;
    for (int i = 0; rc == KCAP_OK && i < ll->n; i++) {
        char full[96];
        snprintf(full, sizeof full, "%s/%s", gfull, ll->names[i]);
        hid_t d = H5Dopen2(g, ll->names[i], H5P_DEFAULT);
        if (d < 0) {
            rc = kcap_read_h5err(r, KCAP_ERR_CORRUPT, full, "not a dataset");
            break;
        }
        rc = read_tensor(r, d, s, dir, ll->names[i], full, stored, nstored, rh);
        H5Dclose(d);
    }
    free(ll);
    H5Gclose(g);
    return rc;
}

/* An int64 attribute into an int field: a value outside int's range is refused (narrowed, an
 * abi_version of 2^32 + 1 read as 1 and a call_status of 2^32 as success). */
static int meta_int(kcap_rctx *r, int64_t v, const char *what, int *dst)
{
    if (v < INT_MIN || v > INT_MAX)
        return kcap_error_set(r->err, KCAP_ERR_CORRUPT, "%s: /: %s attribute %lld is out of "
                              "range (a 32-bit integer)", r->path, what, (long long)v);
    *dst = (int)v;
    return KCAP_OK;
}

static int read_meta(kcap_rctx *r, hid_t f, kcap_meta *m)
{
    int64_t v = 0;
    int a = kcap_h5_attr_get_i64(f, "kcap_format_major", &v);
    if (a)
        return kcap_error_set(r->err, KCAP_ERR_NOT_SNAPSHOT, "%s: /: %s kcap_format_major "
                              "attribute: not a kcap snapshot", r->path,
                              a == 1 ? "no" : "malformed");
    if (v != KCAP_FORMAT_MAJOR) /* the seal, checked first, said KCAP_FORMAT_MAJOR */
        return kcap_error_set(r->err, KCAP_ERR_CORRUPT, "%s: /: corrupt: kcap_format_major "
                              "attribute is %lld but the seal says %d (damaged or forged)",
                              r->path, (long long)v, KCAP_FORMAT_MAJOR);
    m->format_major = (int)v;
#define INT(v, what, dst)                                                                   \
    if (meta_int(r, v, what, dst))                                                          \
        return r->err->code;
    kcap_h5_attr_get_i64(f, "kcap_format_minor", &v);
    INT(v, "kcap_format_minor", &m->format_minor);
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
    INT(v, "abi_version", &m->abi_version);
    REQ(kcap_h5_attr_get_u64(f, "seq", &m->seq), "seq");
    REQ(kcap_h5_attr_get_str(f, "time_utc", m->time_utc, sizeof m->time_utc), "time_utc");
    OPT(kcap_h5_attr_get_str(f, "host", m->host, sizeof m->host), "host");
    OPT(kcap_h5_attr_get_i64(f, "pid", &m->pid), "pid");
    v = -1;
    OPT(kcap_h5_attr_get_i64(f, "rank", &v), "rank");
    INT(v, "rank", &m->rank);
    OPT(kcap_h5_attr_get_str(f, "device_name", m->device_name, sizeof m->device_name),
        "device_name");
    int64_t cc[2] = {0, 0};
    int ncc = 0;
    OPT(kcap_h5_attr_get_i64v(f, "compute_capability", cc, 2, &ncc), "compute_capability");
    INT(cc[0], "compute_capability", &m->cc_major);
    INT(cc[1], "compute_capability", &m->cc_minor);
    v = 0;
    OPT(kcap_h5_attr_get_i64(f, "cuda_driver_version", &v), "cuda_driver_version");
    INT(v, "cuda_driver_version", &m->driver_version);
    v = 0;
    OPT(kcap_h5_attr_get_i64(f, "cuda_runtime_version", &v), "cuda_runtime_version");
    INT(v, "cuda_runtime_version", &m->runtime_version);
    OPT(kcap_h5_attr_get_str(f, "lib_path", m->lib_path, sizeof m->lib_path), "lib_path");
    OPT(kcap_h5_attr_get_str(f, "lib_hash", m->lib_hash, sizeof m->lib_hash), "lib_hash");
    v = 0;
    OPT(kcap_h5_attr_get_i64(f, "in_stream_capture", &v), "in_stream_capture");
    INT(v, "in_stream_capture", &m->in_stream_capture);
    v = 0;
    OPT(kcap_h5_attr_get_i64(f, "call_status", &v), "call_status");
    INT(v, "call_status", &m->call_status);
    OPT(kcap_h5_attr_get_str(f, "kcap_version", m->kcap_version, sizeof m->kcap_version),
        "kcap_version");
    OPT(kcap_h5_attr_get_str(f, "tags", m->tags, sizeof m->tags), "tags");
#undef REQ
#undef OPT
#undef INT
    return KCAP_OK;
}

/* The call description, then (CHECK) the per-row hashes of streamed ROWS tensors. */
static int validate(const char *path, kcap_snapshot *s, int mode, const rowh *rh,
                    kcap_error *err)
{
    const kcap_call_desc *d = kcap_call_find(s->meta.call);
    int rc;
    char shown[4 * KCAP_NAME_MAX];
    if (!d)
        return kcap_error_set(err, KCAP_ERR_UNKNOWN_CALL, "%s: call '%s' has no description in "
                              "this kcap", path, kcap_printable(shown, sizeof shown, s->meta.call));
    if (d->abi_version != s->meta.abi_version)
        return kcap_error_set(err, KCAP_ERR_VERSION, "%s: call %s ABI version %d, this kcap "
                              "describes version %d", path, d->name, s->meta.abi_version,
                              d->abi_version);
    if ((rc = kcap_call_validate_ex(d, s, mode == KCAP_RMODE_HEADER, err)) != KCAP_OK) {
        kcap_error_prefix(err, "%s", path);
        return rc;
    }
    for (int i = 0; rh && i < rh->n; i++)
        if ((rc = kcap_call_check_row_hashes(d, s, rh->v[i].name, rh->v[i].dir, rh->v[i].h,
                                             err))) {
            kcap_error_prefix(err, "%s", path);
            return rc;
        }
    return KCAP_OK;
}

int kcap_read_fd(int fd, const char *path, int mode, kcap_snapshot **out, size_t **stored,
                 kcap_error *err)
{
    kcap_rctx r = {.path = path, .err = err, .mode = mode, .budget = kcap_read_limit_bytes()};
    struct stat fst;
    /* threads only pay off on big files (and small ones are what ls/check/fuzz see most) */
    r.want_pool = mode != KCAP_RMODE_PROBE && !fstat(fd, &fst) && fst.st_size >= (off_t)(8 << 20);
    kcap_snapshot *s = kcap_snapshot_create();
    rowh *rh = mode == KCAP_RMODE_CHECK ? calloc(1, sizeof *rh) : NULL;
    size_t *st = NULL;
    int nst = 0, rc = KCAP_OK;
    if (!s || (mode == KCAP_RMODE_CHECK && !rh)) {
        kcap_snapshot_free(s);
        free(rh);
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
    if (f < 0) { /* before H5Pclose: every libhdf5 API call clears the error stack */
        char buf[400];
        rc = kcap_error_set(err, KCAP_ERR_CORRUPT, "%s: HDF5 cannot open it: %s", path,
                            kcap_h5_errtext(buf, sizeof buf));
    }
    H5Pclose(fapl);
    if (rc == KCAP_OK)
        rc = read_meta(&r, f, &s->meta);
    if (rc == KCAP_OK)
        rc = read_scalars(&r, f, s);
    if (rc == KCAP_OK)
        rc = read_tensors(&r, f, s, KCAP_DIR_IN, stored ? &st : NULL, &nst, rh);
    if (rc == KCAP_OK)
        rc = read_tensors(&r, f, s, KCAP_DIR_OUT, stored ? &st : NULL, &nst, rh);
    /* shadow-mode snapshots (format 1.2) add the candidate kernel's outputs */
    if (rc == KCAP_OK && H5Lexists(f, "candidate", H5P_DEFAULT) > 0)
        rc = read_tensors(&r, f, s, KCAP_DIR_CAND, stored ? &st : NULL, &nst, rh);
    if (f >= 0)
        H5Fclose(f);
    H5Eclear2(H5E_DEFAULT);
    kcap_h5_unlock();
    kcap_rctx_free(&r);
    if (rc == KCAP_OK && mode != KCAP_RMODE_PROBE)
        rc = validate(path, s, mode, rh, err);
    for (int i = 0; rh && i < rh->n; i++)
        free(rh->v[i].h);
    free(rh);
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
    /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return kcap_error_set(err, KCAP_ERR_IO, "%s: %s", path, strerror(errno));
    struct stat fst;
    if (fstat(fd, &fst)) {
        int e = errno;
        close(fd);
        return kcap_error_set(err, KCAP_ERR_IO, "%s: %s", path, strerror(e));
    }
    if (!S_ISREG(fst.st_mode)) {
        close(fd);
        return kcap_error_set(err, KCAP_ERR_NOT_SNAPSHOT, "%s: not a regular file (%s); "
                              "refusing to read it", path, kcap_file_kind(fst.st_mode));
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    kcap_pool *pool = NULL;
    if (fst.st_size >= (off_t)(8 << 20)) {
        int n = kcap_online_cpus();
        pool = kcap_pool_create(n > 16 ? 16 : n);
    }
    int rc = kcap_seal_verify(fd, path, pool, 1, err);
    kcap_pool_free(pool);
    if (rc == KCAP_OK && kcap_sandbox_enabled())
        rc = kcap_sandbox_probe(fd, path, err);
    if (rc == KCAP_OK)
        rc = kcap_read_fd(fd, path, mode, out, stored, err);
    close(fd);
    return rc;
}

int kcap_snapshot_read(const char *path, kcap_snapshot **out, kcap_error *err)
{
    if (!out)
        return kcap_error_set(err, KCAP_ERR_ARG, "kcap_snapshot_read: NULL out");
    return read_file(path, out, NULL, KCAP_RMODE_FULL, err);
}

int kcap_snapshot_read_header(const char *path, kcap_snapshot **out, size_t **stored_bytes,
                              kcap_error *err)
{
    if (!out)
        return kcap_error_set(err, KCAP_ERR_ARG, "kcap_snapshot_read_header: NULL out");
    return read_file(path, out, stored_bytes, KCAP_RMODE_HEADER, err);
}

int kcap_snapshot_check(const char *path, kcap_error *err)
{
    return read_file(path, NULL, NULL, KCAP_RMODE_CHECK, err);
}
