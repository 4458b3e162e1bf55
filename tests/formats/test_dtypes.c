/*
 * test_dtypes.c — round trip of every dtype (bfloat16, float16, float32, float64, int32,
 * int64, uint8) through write/read, compressed (chunked, edge chunks) and uncompressed, a
 * zero-element tensor, an absent optional tensor, float scalars stored exactly, and the
 * HDF5 type each dtype is stored as (read back through the standard pipeline by H5Dread).
 */
#include "fmt_testutil.h"
#include "kcap_fmt_internal.h"

#include <hdf5.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int64_t n, m;
    float f;
    void *p[8];
} dt_args;

#define T(nm, dt, i, sh0, opt)                                                                    \
    {.name = nm, .kind = KCAP_ARG_IN, .field = KCAP_F_PTR,                                       \
     .offset = offsetof(dt_args, p) + (i) * sizeof(void *), .dtype = dt, .ndim = 2,             \
     .shape = {sh0, "m"}, .gather = KCAP_GATHER_DENSE, .optional = opt}

static const kcap_arg_desc dt_desc[] = {
    {.name = "n", .kind = KCAP_ARG_SCALAR, .field = KCAP_F_I64, .offset = offsetof(dt_args, n)},
    {.name = "m", .kind = KCAP_ARG_SCALAR, .field = KCAP_F_I64, .offset = offsetof(dt_args, m)},
    {.name = "f", .kind = KCAP_ARG_SCALAR, .field = KCAP_F_F32, .offset = offsetof(dt_args, f)},
    T("bf16", "bfloat16", 0, "n", 0), T("f16", "float16", 1, "n", 0), T("f32", "float32", 2, "n", 0),
    T("f64", "float64", 3, "n", 0),   T("i32", "int32", 4, "n", 0),   T("i64", "int64", 5, "n", 0),
    T("u8", "uint8", 6, "n", 0),      T("empty", "float32", 7, "0", 1),
};
static const kcap_call_desc dt_call = {.name = "kcap_test_dtypes", .abi_version = 1,
                                       .args_size = sizeof(dt_args),
                                       .nargs = (int)(sizeof dt_desc / sizeof dt_desc[0]),
                                       .args = dt_desc};

int main(void)
{
    TK_CHECK(kcap_call_register(&dt_call) == 0, "register");
    TK_CHECK(kcap_call_register(&dt_call) == KCAP_ERR_ARG, "register twice refused");
    const int64_t ns[] = {1, 7, 1000, 2500};
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++)
        for (int empty = 0; empty < 2; empty++) {
            dt_args a = {.n = ns[k], .m = 33, .f = 0.1f};
            size_t es[7] = {2, 2, 4, 8, 4, 8, 1};
            for (int i = 0; i < 7; i++) {
                a.p[i] = malloc((size_t)(a.n * a.m) * es[i]);
                tu_fill(a.p[i], (size_t)(a.n * a.m) * es[i], k * 10 + (size_t)i);
            }
            float dummy;
            a.p[7] = empty ? &dummy : NULL; /* zero-element tensor, or absent */
            kcap_snapshot *s = kcap_snapshot_create();
            kcap_error err = {0};
            const kcap_mem_ops *m = kcap_host_mem_ops();
            TK_CHECK_OK(kcap_call_record(&dt_call, &a, KCAP_ARG_IN, m, s, &err), err);
            TK_CHECK_OK(kcap_call_record(&dt_call, &a, KCAP_ARG_OUT, m, s, &err), err);
            snprintf(s->meta.time_utc, sizeof s->meta.time_utc, "t");
            kcap_writer_opts o = {.threads = 2, .chunk_bytes = 8192, .min_compress_bytes = 1000};
            kcap_writer *w = kcap_writer_create(&o, &err);
            char name[64];
            snprintf(name, sizeof name, "dt_%zu_%d.h5", k, empty);
            TK_CHECK_OK(kcap_snapshot_write(w, s, tu_path(name), &err), err);
            kcap_snapshot *b = NULL;
            TK_CHECK_OK(kcap_snapshot_read(tu_path(name), &b, &err), err);
            if (b) {
                const kcap_scalar *f = kcap_snapshot_scalar(b, "f");
                TK_CHECK(f && f->type == KCAP_SC_FLOAT && f->f == (double)0.1f, "float scalar exact");
                for (int i = 0; i < 7; i++) {
                    const kcap_tensor *t = kcap_snapshot_tensor(b, dt_desc[3 + i].name, KCAP_DIR_IN);
                    TK_CHECK(t && t->nbytes == (size_t)(a.n * a.m) * es[i] && !memcmp(t->data, a.p[i], t->nbytes),
                             "%s n=%lld round trip", dt_desc[3 + i].name, (long long)a.n);
                }
                const kcap_tensor *e = kcap_snapshot_tensor(b, "empty", KCAP_DIR_IN);
                TK_CHECK(empty ? e && e->nbytes == 0 && e->shape[0] == 0 : !e, "empty/absent tensor");
            }
            /* the stored HDF5 types, read through the standard filter pipeline */
            if (k == 2 && !empty) {
                kcap_h5_lock();
                hid_t f = H5Fopen(tu_path(name), H5F_ACC_RDONLY, H5P_DEFAULT);
                hid_t want[7] = {H5T_STD_U16LE, H5T_STD_U16LE, H5T_IEEE_F32LE, H5T_IEEE_F64LE,
                                 H5T_STD_I32LE, H5T_STD_I64LE, H5T_STD_U8LE};
                for (int i = 0; i < 7; i++) {
                    char p[64];
                    snprintf(p, sizeof p, "/inputs/%s", dt_desc[3 + i].name);
                    hid_t d = H5Dopen2(f, p, H5P_DEFAULT), t = H5Dget_type(d);
                    TK_CHECK(H5Tequal(t, want[i]) > 0, "%s stored type", p);
                    void *buf = malloc((size_t)(a.n * a.m) * es[i]);
                    TK_CHECK(H5Dread(d, want[i], H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0 &&
                              !memcmp(buf, a.p[i], (size_t)(a.n * a.m) * es[i]),
                             "%s via the HDF5 filter pipeline", p);
                    free(buf);
                    H5Tclose(t);
                    H5Dclose(d);
                }
                H5Fclose(f);
                kcap_h5_unlock();
            }
            kcap_snapshot_free(b);
            kcap_snapshot_free(s);
            kcap_writer_free(w);
            for (int i = 0; i < 7; i++)
                free(a.p[i]);
        }
    return tk_summary("test_dtypes");
}
