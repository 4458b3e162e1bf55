/*
 * test_units.c — unit tables of the formats pieces: XXH64 (known vectors, and against the
 * checksum zstd itself puts in a frame), streaming = one-shot, byte shuffle vs HDF5's layout,
 * chunk layout, dtype names, the expression evaluator (values and errors), and record /
 * validate refusing bad calls with messages that name the argument, libhdf5 messages kept
 * across cleanup calls, escaping of strings printed from files.
 */
#include "fmt_testutil.h"
#include "kcap_fmt_internal.h"

#include <hdf5.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

static void test_xxh64(void)
{
    TK_CHECK(kcap_xxh64("", 0, 0) == 0xEF46DB3751D8E999ULL, "XXH64 of empty");
    TK_CHECK(kcap_xxh64("a", 1, 0) == 0xD24EC4F1A98C6E5BULL, "XXH64('a')");
    TK_CHECK(kcap_xxh64("abc", 3, 0) == 0x44BC2CF5AD770999ULL, "XXH64('abc')");
    /* zstd's frame checksum is the low 32 bits of XXH64(content, 0) */
    size_t sizes[] = {1, 3, 4, 7, 8, 31, 32, 33, 63, 64, 100, 1000, 65537, 1 << 20};
    uint8_t *buf = malloc(1 << 20), *z = malloc(ZSTD_compressBound(1 << 20));
    tu_fill(buf, 1 << 20, 5);
    ZSTD_CCtx *cc = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(cc, ZSTD_c_checksumFlag, 1);
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i], zn = ZSTD_compress2(cc, z, ZSTD_compressBound(n), buf, n);
        uint32_t want;
        memcpy(&want, z + zn - 4, 4);
        uint64_t h = kcap_xxh64(buf, n, 0);
        TK_CHECK((uint32_t)h == want, "XXH64 of %zu bytes vs zstd's frame checksum", n);
        /* streaming in odd pieces gives the same */
        kcap_xxh64_state st;
        kcap_xxh64_reset(&st, 0);
        for (size_t off = 0; off < n;) {
            size_t k = (off * 7 + 3) % 45 + 1;
            if (k > n - off)
                k = n - off;
            kcap_xxh64_update(&st, buf + off, k);
            off += k;
        }
        TK_CHECK(kcap_xxh64_digest(&st) == h, "streaming XXH64 of %zu bytes", n);
    }
    TK_CHECK(kcap_xxh64(buf, 100, 1) != kcap_xxh64(buf, 100, 0), "seed matters");
    ZSTD_freeCCtx(cc);
    free(buf);
    free(z);
}

static void test_shuffle(void)
{
    size_t es_list[] = {1, 2, 4, 8, 3};
    for (size_t k = 0; k < 5; k++)
        for (size_t n = 0; n < 70; n += 13) {
            size_t es = es_list[k];
            uint8_t src[70 * 8], sh[70 * 8], back[70 * 8];
            tu_fill(src, n * es, n + es);
            kcap_shuffle(sh, src, n, es);
            int bad = 0;
            for (size_t i = 0; i < n; i++)
                for (size_t j = 0; j < es; j++)
                    bad += sh[j * n + i] != src[i * es + j];
            kcap_unshuffle(back, sh, n, es);
            TK_CHECK(!bad && !memcmp(back, src, n * es), "shuffle es=%zu n=%zu", es, n);
        }
}

static void test_chunks(void)
{
    struct {
        int nd;
        int64_t shape[4];
        size_t target;
        uint64_t want[4];
    } t[] = {
        {2, {1000, 576}, 4 << 20, {1000, 576}},
        {2, {100000, 576}, 4 << 20, {3640, 576}},
        {3, {64, 128, 512}, 4 << 20, {32, 128, 512}},
        {3, {4, 3, 1 << 22}, 4 << 20, {1, 1, 1 << 21}},
        {1, {10}, 4096, {10}},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        kcap_tensor x = {.dtype = KCAP_DT_BF16, .ndim = t[i].nd};
        memcpy(x.shape, t[i].shape, sizeof x.shape);
        uint64_t c[4];
        size_t b = kcap_chunk_dims(&x, t[i].target, c);
        int ok = b <= t[i].target || b == 2;
        for (int d = 0; d < t[i].nd; d++)
            ok &= c[d] == t[i].want[d];
        TK_CHECK(ok, "chunk dims case %zu: got %llu,%llu,%llu", i, (unsigned long long)c[0],
                 (unsigned long long)c[1], (unsigned long long)c[2]);
    }
}

static void test_dtypes(void)
{
    for (int d = 1; d < KCAP_DT_COUNT; d++)
        TK_CHECK((int)kcap_dtype_from_name(kcap_dtype_name((kcap_dtype)d)) == d && kcap_dtype_size((kcap_dtype)d),
                 "dtype %d name round trip", d);
    TK_CHECK(kcap_dtype_from_name("bf16") == KCAP_DT_INVALID && kcap_dtype_size(KCAP_DT_INVALID) == 0,
             "unknown dtype");
    TK_CHECK(!strcmp(kcap_dtype_name(KCAP_DT_BF16), "bfloat16"), "bf16 is named bfloat16");
}

static void test_expr(void)
{
    const kcap_call_desc *d = kcap_call_find("vattn_verify");
    TK_CHECK(d && kcap_call_find("vattn_verify_reference") && !kcap_call_find("nope"), "call table");
    kcap_snapshot *s = kcap_snapshot_create();
    kcap_snapshot_add_int(s, "bs", 3);
    kcap_snapshot_add_int(s, "q_len", 4);
    kcap_snapshot_add_float(s, "sm_scale", 0.5);
    int32_t *ip;
    int64_t sh = 4;
    kcap_snapshot_add_tensor(s, "kv_indptr", KCAP_DIR_IN, KCAP_DT_I32, 1, &sh, NULL, NULL, (void **)&ip);
    ip[0] = 0, ip[1] = 5, ip[2] = 9, ip[3] = 17;
    struct {
        const char *e;
        int rc;
        int64_t v;
    } t[] = {
        {"576", 0, 576},          {"bs+1", 0, 4},           {"T", 0, 12},
        {"bs*q_len - 2", 0, 10},  {"(bs+1)*(q_len-1)", 0, 12}, {"kv_indptr[bs]", 0, 17},
        {"nnz", 0, 17},           {"kv_indptr[bs-1]/2", 0, 4}, {"-3+bs", 0, 0},
        {"args_size", 0, (int64_t)sizeof(vattn_args)},
        {"kv_indptr[bs+1]", KCAP_ERR_SHAPE, 0}, {"nosuch", KCAP_ERR_SHAPE, 0},
        {"sm_scale", KCAP_ERR_SHAPE, 0},        {"bs/0", KCAP_ERR_SHAPE, 0},
        {"9223372036854775807*2", KCAP_ERR_SHAPE, 0}, {"99999999999999999999", KCAP_ERR_SHAPE, 0},
        {"(bs", KCAP_ERR_ARG, 0}, {"bs)", KCAP_ERR_ARG, 0}, {"", KCAP_ERR_ARG, 0},
        {"bs $ 2", KCAP_ERR_ARG, 0}, {"q_len[0]", KCAP_ERR_SHAPE, 0},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        kcap_error err = {0};
        int64_t v = -1;
        int rc = kcap_expr_eval(d, s, t[i].e, &v, &err);
        TK_CHECK(rc == t[i].rc && (rc || v == t[i].v), "'%s': rc %d (%s) v %lld, want rc %d v %lld",
                 t[i].e, rc, err.msg, (long long)v, t[i].rc, (long long)t[i].v);
        TK_CHECK(!rc || strstr(err.msg, t[i].e), "'%s': message names the expression: %s", t[i].e, err.msg);
    }
    kcap_snapshot_free(s);
}

static void test_bad_calls(void)
{
    const kcap_call_desc *d = kcap_call_find("vattn_verify");
    kcap_error err = {0};
    static const tk_vcase c = {.bs = 2, .q_len = 2, .heads = 2, .num_slots = 10, .no_lse = 1, TU_VCASE};
    tk_vcall v;
    tu_vcall(&c, 3, &v);
    const int32_t slot1 = ((int32_t *)v.indices)[1];
    ((int32_t *)v.indices)[1] = 10; /* out of the pool */
    kcap_snapshot *s = kcap_snapshot_create();
    int rc = kcap_call_record(d, &v.a, KCAP_ARG_IN, kcap_host_mem_ops(), s, &err);
    TK_CHECK(rc == KCAP_ERR_SHAPE && strstr(err.msg, "kv_indices[1] = 10"), "index out of range: %s", err.msg);
    kcap_snapshot_free(s);
    ((int32_t *)v.indices)[1] = slot1;
    v.a.q = NULL;
    s = kcap_snapshot_create();
    rc = kcap_call_record(d, &v.a, KCAP_ARG_IN, kcap_host_mem_ops(), s, &err);
    TK_CHECK(rc == KCAP_ERR_ARG && strstr(err.msg, "q: NULL"), "NULL q: %s", err.msg);
    kcap_snapshot_free(s);
    v.a.q = v.q;
    v.a.dtype = 7;
    s = kcap_snapshot_create();
    rc = kcap_call_record(d, &v.a, KCAP_ARG_IN, kcap_host_mem_ops(), s, &err);
    TK_CHECK(rc == KCAP_ERR_SHAPE && strstr(err.msg, "dtype = 7"), "bad dtype enum: %s", err.msg);
    kcap_snapshot_free(s);
    v.a.dtype = 0;
    /* validate: a tampered shape and an extra tensor are refused, naming the dataset */
    s = tu_vattn_snapshot(&v, &err);
    TK_CHECK(s && kcap_call_validate(d, s, &err) == 0, "valid: %s", err.msg);
    for (int i = 0; s && i < s->ntensors; i++)
        if (!strcmp(s->tensors[i].name, "o"))
            s->tensors[i].shape[2] = 511;
    rc = kcap_call_validate(d, s, &err);
    TK_CHECK(rc == KCAP_ERR_SHAPE && strstr(err.msg, "/outputs/o"), "bad o shape: %s", err.msg);
    kcap_snapshot_free(s);
    s = tu_vattn_snapshot(&v, &err);
    int64_t one = 1;
    kcap_snapshot_add_tensor(s, "extra", KCAP_DIR_IN, KCAP_DT_U8, 1, &one, NULL, NULL, NULL);
    rc = kcap_call_validate(d, s, &err);
    TK_CHECK(rc == KCAP_ERR_CORRUPT && strstr(err.msg, "/inputs/extra"), "extra tensor: %s", err.msg);
    kcap_snapshot_free(s);
    /* duplicate slots must hold identical rows */
    s = tu_vattn_snapshot(&v, &err);
    kcap_tensor *kv = NULL, *ix = NULL;
    for (int i = 0; i < s->ntensors; i++) {
        if (!strcmp(s->tensors[i].name, "kv_cache"))
            kv = &s->tensors[i];
        if (!strcmp(s->tensors[i].name, "kv_indices"))
            ix = &s->tensors[i];
    }
    ((int32_t *)ix->data)[0] = ((int32_t *)ix->data)[1];
    ((uint16_t *)kv->data)[3] ^= 1;
    rc = kcap_call_validate(d, s, &err);
    TK_CHECK(rc == KCAP_ERR_CORRUPT && strstr(err.msg, "differ"), "duplicate rows differ: %s", err.msg);
    kcap_snapshot_free(s);
    tk_vcall_free(&v);
}

/* libhdf5's reason survives the cleanup calls that clear its error stack, and a system
 * call's failure in a file driver comes out as its errno text (not "unknown HDF5 error" /
 * "input/output error"); strings printed from files are escaped. */
static void test_messages(void)
{
    static const struct {
        const char *path, *want;
    } cases[] = {
        {"/nonexistent-kcap-dir/x.h5", "No such file or directory"},
        {"/proc/version/x.h5", "Not a directory"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[400];
        kcap_h5_lock();
        hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
        hid_t f = H5Fcreate(cases[i].path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
        kcap_h5_errsave();
        H5Pclose(fapl); /* clears the stack */
        kcap_h5_errtext(buf, sizeof buf);
        kcap_h5_unlock();
        TK_CHECK(f < 0 && strstr(buf, cases[i].want), "%s: '%s' should say '%s'", cases[i].path,
                 buf, cases[i].want);
    }
    static const struct {
        const char *in, *out;
        size_t n;
    } esc[] = {
        {"plain-name_1.h5", "plain-name_1.h5", 64},
        {"a\033[2Jb", "a\\x1b[2Jb", 64},
        {"back\\slash\x07", "back\\x5cslash\\x07", 64},
        {"\xc3\xa9t\xe9", "\\xc3\\xa9t\\xe9", 64},
        {"ab\033", "ab", 6}, /* an escape never cut in half */
    };
    for (size_t i = 0; i < sizeof esc / sizeof esc[0]; i++) {
        char buf[64];
        kcap_printable(buf, esc[i].n, esc[i].in);
        TK_CHECK(!strcmp(buf, esc[i].out), "kcap_printable case %zu: '%s', want '%s'", i, buf,
                 esc[i].out);
    }
}

int main(void)
{
    test_xxh64();
    test_shuffle();
    test_chunks();
    test_dtypes();
    test_expr();
    test_bad_calls();
    test_messages();
    char *txt = kcap_call_describe(kcap_call_find("vattn_verify"));
    TK_CHECK(txt && strstr(txt, "| kv_cache | input |") && strstr(txt, "kv_indices"), "describe");
    free(txt);
    return tk_summary("test_units");
}
