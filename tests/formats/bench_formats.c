/*
 * bench_formats.c — `make bench`: snapshot writer and reader throughput and compression
 * ratio on a >= 1 GiB bf16 KV-like tensor, against `zstd -1 -T<cores>` on the same raw
 * bytes in the same run. KCAP_BENCH_BYTES overrides the size; TMPDIR picks the disk.
 * Figures go to docs/PERF.md (Formats section, with the method).
 */
#include "fmt_testutil.h"
#include "kcap_fmt_internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static uint64_t fsize(const char *p)
{
    struct stat st;
    return stat(p, &st) ? 0 : (uint64_t)st.st_size;
}

typedef struct {
    void *kv;
} bench_args;

static const kcap_arg_desc bench_arg_desc[] = {
    {.name = "rows", .kind = KCAP_ARG_SCALAR, .field = KCAP_F_I64, .offset = 0},
    {.name = "kv_cache", .kind = KCAP_ARG_IN, .field = KCAP_F_PTR, .offset = 8,
     .dtype = "bfloat16", .ndim = 2, .shape = {"rows", "576"}, .gather = KCAP_GATHER_DENSE},
};
static const kcap_call_desc bench_call = {.name = "kcap_bench_kv", .abi_version = 1,
                                          .args_size = 16, .nargs = 2, .args = bench_arg_desc};

int main(void)
{
    const char *e = getenv("KCAP_BENCH_BYTES");
    uint64_t want = e && *e ? strtoull(e, NULL, 10) : (uint64_t)1 << 30;
    int64_t rows = (int64_t)(want / 1152);
    size_t nbytes = (size_t)rows * 1152;
    int cores = kcap_online_cpus();
    kcap_call_register(&bench_call);
    printf("bench_formats: %lld rows x 576 bf16 = %.3f GB raw, %d cores, tmp %s\n",
           (long long)rows, nbytes / 1e9, cores, tu_tmpdir());

    kcap_snapshot *s = kcap_snapshot_create();
    void *data;
    int64_t shape[2] = {rows, 576};
    kcap_snapshot_add_int(s, "rows", rows);
    if (kcap_snapshot_add_tensor(s, "kv_cache", KCAP_DIR_IN, KCAP_DT_BF16, 2, shape, NULL, NULL,
                                 &data)) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    tu_fill_bf16(data, nbytes / 2, 1234);
    snprintf(s->meta.call, sizeof s->meta.call, "kcap_bench_kv");
    s->meta.abi_version = 1;
    snprintf(s->meta.time_utc, sizeof s->meta.time_utc, "2026-01-01T00:00:00.000Z");

    /* zstd CLI on the same bytes */
    char *raw = tu_path("raw.bin"), *zst = tu_path("raw.bin.zst"), cmd[4096];
    FILE *f = fopen(raw, "wb");
    if (!f || fwrite(data, 1, nbytes, f) != nbytes || fclose(f)) {
        fprintf(stderr, "cannot write %s\n", raw);
        return 1;
    }
    snprintf(cmd, sizeof cmd, "cat '%s' > /dev/null", raw); /* warm the page cache */
    tu_run(cmd, NULL, 0);
    /* Interleaved rounds, best of each: the machine may be shared, so noise hits both. */
    kcap_error err = {0};
    kcap_writer *w = kcap_writer_create(NULL, &err);
    char *snap = tu_path("bench.kcap.h5");
    double t_zstd = 1e30, t_zsync = 0, t_w = 1e30, t0;
    uint64_t zbytes = 0;
    int rounds = getenv("KCAP_BENCH_ROUNDS") ? atoi(getenv("KCAP_BENCH_ROUNDS")) : 3;
    for (int r = 0; r < rounds; r++) {
        /* start each timed step with no dirty pages left by the previous one */
        tu_run("sync", NULL, 0);
        snprintf(cmd, sizeof cmd, "zstd -1 -T%d -q -f '%s' -o '%s'", cores, raw, zst);
        t0 = now();
        int rc = tu_run(cmd, NULL, 0);
        double t = now() - t0, tz = t;
        if (rc) {
            fprintf(stderr, "zstd CLI failed (%d)\n", rc);
            return 1;
        }
        snprintf(cmd, sizeof cmd, "sync '%s'", zst);
        double t1 = now();
        tu_run(cmd, NULL, 0);
        if (t < t_zstd) {
            t_zstd = t;
            t_zsync = now() - t1;
        }
        zbytes = fsize(zst);
        unlink(snap); /* the writer never replaces a file */
        tu_run("sync", NULL, 0);
        t0 = now();
        if (kcap_snapshot_write(w, s, snap, &err)) {
            fprintf(stderr, "write: %s\n", err.msg);
            return 1;
        }
        t = now() - t0;
        if (t < t_w)
            t_w = t;
        printf("  round %d: zstd CLI %.2f s, kcap writer %.2f s\n", r, tz, t);
    }
    snprintf(cmd, sizeof cmd, "zstd -d -q -f '%s' -o /dev/null", zst);
    t0 = now();
    tu_run(cmd, NULL, 0);
    double t_zd = now() - t0;
    unlink(zst);
    unlink(raw);

    uint64_t kbytes = fsize(snap);
    kcap_snapshot *back = NULL;
    double t_r = 1e30;
    tu_run("sync", NULL, 0);
    for (int i = 0; i < 2; i++) {
        kcap_snapshot_free(back);
        back = NULL;
        t0 = now();
        if (kcap_snapshot_read(snap, &back, &err)) {
            fprintf(stderr, "read: %s\n", err.msg);
            return 1;
        }
        double t = now() - t0;
        if (t < t_r)
            t_r = t;
    }
    int same = !memcmp(back->tensors[0].data, data, nbytes);
    printf("  %-34s %8.0f MB/s  ratio %.4f  (%.2f s)\n", "zstd -1 -T CLI (no fsync)",
           nbytes / t_zstd / 1e6, (double)nbytes / (double)zbytes, t_zstd);
    printf("  %-34s %8.0f MB/s  (%.2f s, fsync of its output %.2f s)\n", "zstd -1 -T CLI + fsync",
           nbytes / (t_zstd + t_zsync) / 1e6, t_zstd + t_zsync, t_zsync);
    printf("  %-34s %8.0f MB/s  ratio %.4f  (%.2f s, atomic: fsync+rename)\n",
           "kcap writer (shuffle+zstd-1)", nbytes / t_w / 1e6, (double)nbytes / (double)kbytes, t_w);
    printf("  %-34s %8.0f MB/s  (%.2f s)\n", "zstd -d CLI", nbytes / t_zd / 1e6, t_zd);
    printf("  %-34s %8.0f MB/s  (%.2f s, seal + checksums verified)\n", "kcap reader", nbytes / t_r / 1e6, t_r);
    printf("  writer vs zstd CLI: %.0f%% of its throughput (%.0f%% vs zstd+fsync), ratio %.4f vs %.4f; read back %s\n",
           100.0 * t_zstd / t_w, 100.0 * (t_zstd + t_zsync) / t_w, (double)nbytes / (double)kbytes,
           (double)nbytes / (double)zbytes, same ? "bit-identical" : "DIFFERENT");
    kcap_snapshot_free(back);
    kcap_snapshot_free(s);
    kcap_writer_free(w);
    unlink(snap);
    return same ? 0 : 1;
}
