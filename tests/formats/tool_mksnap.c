/*
 * tool_mksnap.c — test helper (not a test): writes small snapshots for the shell tests and
 * the fuzz seed corpus.
 *   tool_mksnap snap FILE DUMPDIR [SEQ TIME]  a vattn snapshot, plus DUMPDIR/<group>_<name>.bin
 *                                   with each tensor's dense bytes (what h5py must read back;
 *                                   DUMPDIR "-" = none); SEQ/TIME override the metadata
 *   tool_mksnap corpus DIR          the seed corpus: ok-* (valid) and bad-* (must be refused)
 *   tool_mksnap zeros FILE MIB [random]  a valid snapshot whose kv_cache is MIB MiB of zeros
 *                                   (a tiny file declaring a huge tensor: kcap check must stay
 *                                   bounded), or of one random row repeated (a big file)
 */
#include "fmt_testutil.h"
#include "kcap_fmt_internal.h"

#include <fcntl.h>
#include <hdf5.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

static int write_file(const char *path, const void *buf, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(buf, 1, n, f) != n) {
        if (f)
            fclose(f);
        return -1;
    }
    return fclose(f);
}

/* The calls of the snapshots (bf16): `snap`'s, and the corpus' two valid ones. o of
 * ok-small-strided must have at least 2 tokens and 2 heads (tamper kind 5 rechunks it). */
static const tk_vcase snap_call = {.bs = 3, .q_len = 4, .heads = 8, .num_slots = 200, .idx64 = 1,
                                   .vis = TK_VIS_RANDOM, TU_VCASE, TU_VCASE_PADDED};
static const tk_vcase tiny_call = {.bs = 1, .q_len = 2, .heads = 1, .num_slots = 8, .no_lse = 1, TU_VCASE};
static const tk_vcase strided_call = {.bs = 1, .q_len = 2, .heads = 2, .num_slots = 16, .idx64 = 1,
                                      .vis = TK_VIS_RANDOM, TU_VCASE, TU_VCASE_PADDED};

static kcap_snapshot *make(const tk_vcase *c, uint64_t seed, tk_vcall *v)
{
    kcap_error err = {0};
    tu_vcall(c, seed, v);
    kcap_snapshot *s = tu_vattn_snapshot(v, &err);
    if (!s)
        fprintf(stderr, "record: %s\n", err.msg);
    return s;
}

static int do_snap(const char *file, const char *dump, int argc, char **argv)
{
    tk_vcall v;
    kcap_snapshot *s = make(&snap_call, 11, &v);
    if (s && argc >= 6) { /* seq and time given */
        s->meta.seq = strtoull(argv[4], NULL, 10);
        snprintf(s->meta.time_utc, sizeof s->meta.time_utc, "%s", argv[5]);
    }
    kcap_error err = {0};
    kcap_writer_opts o = {.threads = 2, .chunk_bytes = 32 << 10, .min_compress_bytes = 1024};
    kcap_writer *w = kcap_writer_create(&o, &err);
    if (!s || !w || kcap_snapshot_write(w, s, file, &err)) {
        fprintf(stderr, "write: %s\n", err.msg);
        return 1;
    }
    for (int i = 0; !strcmp(dump, "-") ? 0 : i < s->ntensors; i++) {
        char p[1024];
        snprintf(p, sizeof p, "%s/%s_%s.bin", dump, s->tensors[i].dir == KCAP_DIR_IN ? "inputs" : "outputs",
                 s->tensors[i].name);
        if (write_file(p, s->tensors[i].data, s->tensors[i].nbytes))
            return 1;
    }
    kcap_writer_free(w);
    kcap_snapshot_free(s);
    tk_vcall_free(&v);
    return 0;
}

/* The dtype and xxh64 attributes every tensor carries. */
static void tensor_attrs(hid_t d, const char *dtype, uint64_t h)
{
    hid_t s = H5Screate(H5S_SCALAR), t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, strlen(dtype));
    hid_t a = H5Acreate2(d, "dtype", t, s, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, t, dtype);
    H5Aclose(a);
    a = H5Acreate2(d, "xxh64", H5T_STD_U64LE, s, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, H5T_NATIVE_UINT64, &h);
    H5Aclose(a);
    H5Tclose(t);
    H5Sclose(s);
}

/* Recomputes the seal of a file libhdf5 has just written (HDF5 closed). */
static int reseal_file(const char *path)
{
    int fd = open(path, O_RDWR);
    kcap_error err = {0};
    int rc = fd < 0 ? 1 : kcap_seal_write(fd, path, NULL, NULL, 0, &err);
    if (fd >= 0)
        close(fd);
    return rc;
}

/* A sealed file whose HDF5 body says what we want (forgeries that pass the seal). */
static int forge(const char *path, int kind)
{
    unlink(path);
    hid_t fcpl = H5Pcreate(H5P_FILE_CREATE);
    H5Pset_userblock(fcpl, KCAP_UB_SIZE);
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, fcpl, H5P_DEFAULT);
    H5Pclose(fcpl);
    if (f < 0)
        return 1;
    hid_t s = H5Screate(H5S_SCALAR);
    int64_t major = kind == 1 ? 2 : 1;
    hid_t a = H5Acreate2(f, "kcap_format_major", H5T_STD_I64LE, s, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, H5T_NATIVE_INT64, &major);
    H5Aclose(a);
    if (kind == 2) { /* a dataset claiming 1e18 elements */
        hid_t t = H5Tcopy(H5T_C_S1);
        H5Tset_size(t, 12);
        a = H5Acreate2(f, "call", t, s, H5P_DEFAULT, H5P_DEFAULT);
        H5Awrite(a, t, "vattn_verify");
        H5Aclose(a);
        H5Tclose(t);
        const char *ints[] = {"abi_version", "seq"};
        for (int i = 0; i < 2; i++) {
            int64_t one = 1;
            a = H5Acreate2(f, ints[i], H5T_STD_I64LE, s, H5P_DEFAULT, H5P_DEFAULT);
            H5Awrite(a, H5T_NATIVE_INT64, &one);
            H5Aclose(a);
        }
        t = H5Tcopy(H5T_C_S1);
        H5Tset_size(t, 4);
        a = H5Acreate2(f, "time_utc", t, s, H5P_DEFAULT, H5P_DEFAULT);
        H5Awrite(a, t, "now!");
        H5Aclose(a);
        H5Tclose(t);
        H5Gclose(H5Gcreate2(f, "scalars", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
        H5Gclose(H5Gcreate2(f, "outputs", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
        hid_t g = H5Gcreate2(f, "inputs", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        hsize_t dims[2] = {1000000000ULL, 1000000000ULL}, ch[2] = {1, 1024};
        hid_t sp = H5Screate_simple(2, dims, NULL), dc = H5Pcreate(H5P_DATASET_CREATE);
        H5Pset_chunk(dc, 2, ch);
        hid_t d = H5Dcreate2(g, "kv_cache", H5T_STD_U16LE, sp, H5P_DEFAULT, dc, H5P_DEFAULT);
        tensor_attrs(d, "bfloat16", 0);
        H5Dclose(d);
        H5Pclose(dc);
        H5Sclose(sp);
        H5Gclose(g);
    }
    H5Sclose(s);
    H5Fclose(f);
    return reseal_file(path);
}


/* A copy of a valid snapshot with one HDF5 object swapped for what a hostile file could
 * declare, resealed so only the reader's own checks stand in the way. kind: 1 a soft link,
 * 2 an external link (in /inputs), 3 kv_indptr with external raw storage (/etc/passwd),
 * 4 kv_indptr as a virtual dataset. */
static int tamper(const char *src, const char *dst, int kind)
{
    size_t n = 0;
    uint8_t *b = tk_slurp(src, &n);
    if (!b || write_file(dst, b, n))
        return 1;
    free(b);
    hid_t f = H5Fopen(dst, H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t g = f < 0 ? -1 : H5Gopen2(f, "inputs", H5P_DEFAULT);
    if (g < 0)
        return 1;
    if (kind == 5) { /* /outputs/o in chunks the fast path does not take, frames half a chunk */
        H5Gclose(g);
        g = H5Gopen2(f, "outputs", H5P_DEFAULT);
        hid_t d = g < 0 ? -1 : H5Dopen2(g, "o", H5P_DEFAULT);
        hid_t sp = d < 0 ? -1 : H5Dget_space(d);
        hsize_t dims[3], cd[3];
        if (sp < 0 || H5Sget_simple_extent_ndims(sp) != 3 || H5Sget_simple_extent_dims(sp, dims, NULL) != 3 ||
            dims[0] < 2 || dims[1] < 2)
            return 1;
        H5Dclose(d);
        H5Ldelete(g, "o", H5P_DEFAULT);
        cd[0] = dims[0], cd[1] = 1, cd[2] = dims[2]; /* ones only after the first: not kcap's */
        hid_t dc = H5Pcreate(H5P_DATASET_CREATE);
        unsigned level = 1;
        H5Pset_chunk(dc, 3, cd);
        H5Pset_shuffle(dc);
        H5Pset_filter(dc, KCAP_H5Z_ZSTD, H5Z_FLAG_MANDATORY, 1, &level);
        kcap_h5zstd_register();
        d = H5Dcreate2(g, "o", H5T_STD_U16LE, sp, H5P_DEFAULT, dc, H5P_DEFAULT);
        size_t half = (size_t)(cd[0] * cd[2]); /* bytes: half of the chunk's 2 x that */
        uint8_t *raw = calloc(half, 1), *frame = malloc(ZSTD_compressBound(half));
        size_t fn = ZSTD_compress(frame, ZSTD_compressBound(half), raw, half, 1);
        for (hsize_t j = 0; d >= 0 && j < dims[1]; j++) {
            hsize_t off[3] = {0, j, 0};
            H5Dwrite_chunk(d, H5P_DEFAULT, 0, off, fn, frame);
        }
        tensor_attrs(d, "bfloat16", 0);
        free(raw);
        free(frame);
        H5Dclose(d);
        H5Pclose(dc);
        H5Sclose(sp);
    } else if (kind == 1)
        H5Lcreate_soft("/inputs/q", g, "zz_alias", H5P_DEFAULT, H5P_DEFAULT);
    else if (kind == 2)
        H5Lcreate_external("/etc/passwd", "/", g, "zz_elsewhere", H5P_DEFAULT, H5P_DEFAULT);
    else {
        int32_t ip[2];
        FILE *pf = fopen("/etc/passwd", "rb");
        if (!pf || fread(ip, 1, sizeof ip, pf) != sizeof ip)
            memset(ip, 0, sizeof ip);
        if (pf)
            fclose(pf);
        H5Ldelete(g, "kv_indptr", H5P_DEFAULT);
        hsize_t dims[1] = {2};
        hid_t sp = H5Screate_simple(1, dims, NULL), dc = H5Pcreate(H5P_DATASET_CREATE);
        if (kind == 3) {
            H5Pset_external(dc, "/etc/passwd", 0, sizeof ip);
        } else {
            hid_t ssp = H5Screate_simple(1, dims, NULL);
            H5Pset_virtual(dc, sp, "/tmp/kcap-vds-source.h5", "/data", ssp);
            H5Sclose(ssp);
        }
        hid_t d = H5Dcreate2(g, "kv_indptr", H5T_STD_I32LE, sp, H5P_DEFAULT, dc, H5P_DEFAULT);
        tensor_attrs(d, "int32", kcap_xxh64(ip, sizeof ip, 0)); /* what an old reader pulls in */
        H5Dclose(d);
        H5Pclose(dc);
        H5Sclose(sp);
    }
    H5Gclose(g);
    H5Fclose(f);
    return reseal_file(dst);
}

/* kv_cache of `mib` MiB of zeros (read-only zero pages of an anonymous mapping: no RSS),
 * every key in slot 0 of a one-slot pool: valid, compresses to almost nothing. */
static int do_zeros(const char *file, long mib, int random)
{
    const int64_t row = 576, nnz = (int64_t)mib * (1 << 20) / (row * 2);
    if (nnz < 1 || nnz > INT32_MAX) /* kv_indptr is int32; checked first, so no size wraps */
        return 1;
    size_t kvb = (size_t)(nnz * row * 2);
    void *kv = mmap(NULL, kvb, random ? PROT_READ | PROT_WRITE : PROT_READ,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (random && kv != MAP_FAILED) /* distinct rows, each in its own slot */
        for (int64_t r = 0; r < nnz; r++)
            tu_fill_bf16((uint16_t *)kv + r * row, (size_t)row, (uint64_t)r + 5);
    int64_t *idx = calloc((size_t)nnz, 8);
    for (int64_t i = 0; random && idx && i < nnz; i++)
        idx[i] = i;
    int32_t indptr[2] = {0, (int32_t)nnz};
    static uint16_t q[576], o[512];
    kcap_snapshot *s = kcap_snapshot_create();
    if (kv == MAP_FAILED || !idx || !s)
        return 1;
    snprintf(s->meta.call, sizeof s->meta.call, "vattn_verify");
    s->meta.abi_version = VATTN_ABI_VERSION;
    snprintf(s->meta.time_utc, sizeof s->meta.time_utc, "2026-12-01T00:00:00.000Z");
    s->meta.rank = -1;
    static const struct { const char *n; int64_t v; } sc[] = {
        {"dtype", 0}, {"index_type", 1}, {"bs", 1}, {"q_len", 1}, {"num_heads", 1},
        {"max_kv_len", 0}, {"q_stride_t", 576}, {"q_stride_h", 576},
        {"kv_stride", 576}, {"o_stride_t", 512}, {"o_stride_h", 512}};
    for (size_t i = 0; i < sizeof sc / sizeof sc[0]; i++)
        kcap_snapshot_add_int(s, sc[i].n, sc[i].v);
    kcap_snapshot_add_int(s, "num_slots", random ? nnz : 1);
    kcap_snapshot_add_float(s, "sm_scale", 0.0625);
    int64_t d1[1] = {2}, d2[1] = {nnz}, dq[3] = {1, 1, 576}, dk[2] = {nnz, 576}, dout[3] = {1, 1, 512};
    void *p;
    kcap_snapshot_add_tensor(s, "kv_indptr", KCAP_DIR_IN, KCAP_DT_I32, 1, d1, NULL, indptr, &p);
    kcap_snapshot_add_tensor(s, "kv_indices", KCAP_DIR_IN, KCAP_DT_I64, 1, d2, NULL, idx, &p);
    kcap_snapshot_add_tensor(s, "q", KCAP_DIR_IN, KCAP_DT_BF16, 3, dq, NULL, q, &p);
    kcap_snapshot_add_tensor(s, "kv_cache", KCAP_DIR_IN, KCAP_DT_BF16, 2, dk, NULL, kv, &p);
    kcap_snapshot_add_tensor(s, "o", KCAP_DIR_OUT, KCAP_DT_BF16, 3, dout, NULL, o, &p);
    kcap_error err = {0};
    kcap_writer *w = kcap_writer_create(&(kcap_writer_opts){.threads = 2}, &err);
    int rc = w ? kcap_snapshot_write(w, s, file, &err) : 1;
    if (rc)
        fprintf(stderr, "write: %s\n", err.msg);
    kcap_writer_free(w);
    kcap_snapshot_free(s);
    free(idx);
    munmap(kv, kvb);
    return rc != 0;
}

static int do_corpus(const char *dir)
{
    char p[1024], q[1024];
    tk_vcall v;
    kcap_error err = {0};
    kcap_writer_opts o = {.threads = 1, .chunk_bytes = 4096, .min_compress_bytes = 1024};
    kcap_writer *w = kcap_writer_create(&o, &err);
    kcap_snapshot *s = make(&tiny_call, 1, &v);
    snprintf(p, sizeof p, "%s/ok-tiny-causal.h5", dir);
    if (!s || kcap_snapshot_write(w, s, p, &err))
        return fprintf(stderr, "%s\n", err.msg), 1;
    kcap_snapshot_free(s);
    tk_vcall_free(&v);
    s = make(&strided_call, 2, &v);
    snprintf(q, sizeof q, "%s/ok-small-strided.h5", dir);
    if (!s || kcap_snapshot_write(w, s, q, &err))
        return fprintf(stderr, "%s\n", err.msg), 1;
    /* a snapshot that disagrees with the call description (kv_indptr one element short) */
    for (int i = 0; i < s->ntensors; i++)
        if (!strcmp(s->tensors[i].name, "kv_indptr")) {
            s->tensors[i].shape[0]--;
            s->tensors[i].nbytes -= 4;
        }
    snprintf(p, sizeof p, "%s/bad-shape.h5", dir);
    if (kcap_snapshot_write(w, s, p, &err))
        return fprintf(stderr, "%s\n", err.msg), 1;
    kcap_snapshot_free(s);
    tk_vcall_free(&v);
    kcap_writer_free(w);

    size_t n = 0;
    uint8_t *b = tk_slurp(q, &n);
    if (!b)
        return 1;
    snprintf(p, sizeof p, "%s/bad-truncated.h5", dir);
    write_file(p, b, n * 2 / 3);
    snprintf(p, sizeof p, "%s/bad-truncated-header.h5", dir);
    write_file(p, b, 3000);
    b[n - 2000] ^= 0x10;
    snprintf(p, sizeof p, "%s/bad-bitflip-body.h5", dir);
    write_file(p, b, n);
    b[n - 2000] ^= 0x10;
    b[100] ^= 0x01;
    snprintf(p, sizeof p, "%s/bad-bitflip-header.h5", dir);
    write_file(p, b, n);
    b[100] ^= 0x01;
    /* wrong version: major 2 in a header that is otherwise intact (hash recomputed) */
    b[8] = 2;
    memset(b + 40, 0, 8);
    uint64_t h = kcap_xxh64(b, KCAP_UB_SIZE, 0);
    memcpy(b + 40, &h, 8);
    snprintf(p, sizeof p, "%s/bad-version.h5", dir);
    write_file(p, b, n);
    /* damage in the seal's magic or version field (hash not recomputed): corrupt, not
     * "not a snapshot" / "unsupported version" */
    b[8] = 1;
    memset(b + 40, 0, 8);
    h = kcap_xxh64(b, KCAP_UB_SIZE, 0);
    memcpy(b + 40, &h, 8);
    b[2] ^= 0x04;
    snprintf(p, sizeof p, "%s/bad-flip-magic.h5", dir);
    write_file(p, b, n);
    b[2] ^= 0x04;
    b[8] ^= 0x02;
    snprintf(p, sizeof p, "%s/bad-flip-major.h5", dir);
    write_file(p, b, n);
    b[8] ^= 0x02;
    static const char *const tampered[] = {"bad-softlink.h5", "bad-extlink.h5",
                                           "bad-external-storage.h5", "bad-virtual.h5",
                                           "bad-short-frames.h5"};
    for (int k = 0; k < 5; k++) {
        snprintf(p, sizeof p, "%s/%s", dir, tampered[k]);
        if (tamper(q, p, k + 1))
            return fprintf(stderr, "%s: tampering failed\n", p), 1;
    }
    b[8] = 2; /* as it was */
    memset(b + 40, 0, 8);
    h = kcap_xxh64(b, KCAP_UB_SIZE, 0);
    memcpy(b + 40, &h, 8);
    /* the HDF5 body without the seal: a foreign HDF5 file */
    snprintf(p, sizeof p, "%s/bad-foreign-hdf5.h5", dir);
    write_file(p, b + KCAP_UB_SIZE, n - KCAP_UB_SIZE);
    free(b);
    snprintf(p, sizeof p, "%s/bad-empty.h5", dir);
    write_file(p, "", 0);
    snprintf(p, sizeof p, "%s/bad-text.h5", dir);
    write_file(p, "hello, this is not a snapshot\n", 30);
    snprintf(p, sizeof p, "%s/bad-sealed-version2.h5", dir);
    if (forge(p, 1))
        return 1;
    snprintf(p, sizeof p, "%s/bad-huge-shape.h5", dir);
    if (forge(p, 2))
        return 1;
    return 0;
}

int main(int argc, char **argv)
{
    if ((argc == 4 || argc == 6) && !strcmp(argv[1], "snap"))
        return do_snap(argv[2], argv[3], argc, argv);
    if (argc == 3 && !strcmp(argv[1], "corpus"))
        return do_corpus(argv[2]);
    if ((argc == 4 || argc == 5) && !strcmp(argv[1], "zeros"))
        return do_zeros(argv[2], atol(argv[3]), argc == 5 && !strcmp(argv[4], "random"));
    fprintf(stderr, "usage: tool_mksnap snap FILE DUMPDIR|- [SEQ TIME] | corpus DIR | zeros FILE MIB [random]\n");
    return 2;
}
