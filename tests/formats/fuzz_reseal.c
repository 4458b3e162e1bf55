/*
 * fuzz_reseal.c — the resealing fuzzer. The seal is an unkeyed checksum, so a hostile file
 * passes it: this mutates the HDF5 body of valid snapshots (bit flips, interesting values,
 * copied runs, truncation/extension), recomputes the seal (kcap_seal_write, the writer's
 * own code), and runs every reader path on the result: kcap_snapshot_read (replay, diff),
 * _read_header (info, ls), _check (check), and for files that read, the replay loader's
 * rebuild (kcap_call_rebuild on host memory). Any crash, hang or sanitizer report fails it;
 * the input is saved first (signal handler) to CRASH_DIR for the corpus.
 *
 *   fuzz_reseal [-t SECONDS] [-n EXECS] [-s SEED] [-o CRASH_DIR] SEED.h5...
 *   fuzz_reseal -e DIR COUNT [-s SEED] SEED.h5...   write COUNT mutated, resealed files
 *
 * Prints executions, rate and how the files were refused (by error code; how many
 * messages say "unknown HDF5 error"). tests/formats/test_reseal_fuzz.sh runs it bounded in
 * `make test`; `make fuzz-long` runs it for KCAP_FUZZ_LONG_SECONDS.
 */
#include "kcap_calls.h"
#include "kcap_fmt_internal.h"
#include "../testkit.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct seedf {
    uint8_t *b;
    size_t n;
    kcap_extent ext[KCAP_SEAL_MAX_EXTENTS];
    int next;
} seedf;

/* the mutation stream: tk_next_xs, so a seed (-s) still replays the mutations it always made */
static tk_rng rng = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) { return tk_next_xs(&rng); }

/* the input being run, for the crash handler */
static char tmp_name[1024];
static uint8_t *cur;
static size_t cur_n;
static char crash_path[1024];

static pid_t main_pid;

static void on_crash(int sig)
{
    if (getpid() != main_pid) { /* the reader's sandboxed child: its crash is an answer */
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    unlink(tmp_name);
    int fd = crash_path[0] ? open(crash_path, O_WRONLY | O_CREAT | O_TRUNC, 0644) : -1;
    if (fd >= 0) {
        size_t off = 0;
        while (off < cur_n) {
            ssize_t w = write(fd, cur + off, cur_n - off);
            if (w <= 0)
                break;
            off += (size_t)w;
        }
        close(fd);
    }
    static const char m[] = "fuzz_reseal: CRASH; input saved\n";
    if (write(2, m, sizeof m - 1) < 0) {
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

static int load(const char *path, seedf *s)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    s->b = malloc((size_t)len + 65536);
    s->n = s->b ? fread(s->b, 1, (size_t)len, f) : 0;
    fclose(f);
    if (s->n < KCAP_UB_SIZE + 512)
        return -1;
    uint32_t next;
    memcpy(&next, s->b + 36, 4);
    s->next = next > KCAP_SEAL_MAX_EXTENTS ? 0 : (int)next;
    for (int i = 0; i < s->next; i++) {
        const uint8_t *r = s->b + KCAP_SEAL_EXT_OFF + (size_t)i * 80;
        memcpy(&s->ext[i].begin, r, 8);
        memcpy(&s->ext[i].end, r + 8, 8);
        memcpy(s->ext[i].name, r + 16, 63);
        s->ext[i].name[63] = '\0';
    }
    return 0;
}

/* A few mutations of the HDF5 body (never the seal: it is recomputed anyway). */
static size_t mutate(uint8_t *b, size_t n, size_t cap)
{
    static const uint64_t vals[] = {0, 1, 2, 3, 4, 7, 8, 16, 63, 64, 255, 256, 4096, 16384,
                                    0x7f, 0x80, 0x7fff, 0x8000, 0xffff, 0x7fffffff,
                                    0x80000000u, 0xffffffffu, 0x7fffffffffffffffull,
                                    0xffffffffffffffffull};
    size_t body = n - KCAP_UB_SIZE;
    int k = 1 + (int)(rnd() % 4);
    for (int m = 0; m < k; m++) {
        size_t at = KCAP_UB_SIZE + (size_t)(rnd() % body);
        switch (rnd() % 10) {
        case 0: case 1: case 2: case 3:
            b[at] ^= (uint8_t)(1u << (rnd() % 8));
            break;
        case 4:
            b[at] = (uint8_t)rnd();
            break;
        case 5: case 6: {
            int w = 1 << (rnd() % 4);
            uint64_t v = vals[rnd() % (sizeof vals / sizeof vals[0])];
            if (rnd() & 1)
                v = (uint64_t)-(int64_t)v;
            if (at + (size_t)w <= n)
                memcpy(b + at, &v, (size_t)w);
            break;
        }
        case 7: {
            size_t len = 1 + rnd() % 64, from = KCAP_UB_SIZE + (size_t)(rnd() % body);
            if (at + len <= n && from + len <= n)
                memmove(b + at, b + from, len);
            break;
        }
        case 8:
            if (rnd() % 8 == 0) { /* truncate or extend a little */
                size_t d = 1 + rnd() % 512;
                if (rnd() & 1 && n - d > KCAP_UB_SIZE + 64)
                    n -= d;
                else if (n + d <= cap) {
                    memset(b + n, (int)(rnd() & 0xff), d);
                    n += d;
                }
                body = n - KCAP_UB_SIZE;
            }
            break;
        default: /* an aligned 8-byte field: HDF5 addresses and lengths */
            at &= ~(size_t)7;
            if (at >= KCAP_UB_SIZE && at + 8 <= n) {
                uint64_t v;
                memcpy(&v, b + at, 8);
                v += (uint64_t)(int64_t)((int)(rnd() % 33) - 16) * ((rnd() & 1) ? 8 : 1);
                memcpy(b + at, &v, 8);
            }
        }
    }
    return n;
}

/* Writes b into fd (truncated) and reseals it: the file now passes the seal. */
static int reseal(int fd, const uint8_t *b, size_t n, const seedf *s)
{
    if (ftruncate(fd, 0) || pwrite(fd, b, n, 0) != (ssize_t)n)
        return -1;
    kcap_error err = {0};
    kcap_extent ext[KCAP_SEAL_MAX_EXTENTS];
    memcpy(ext, s->ext, sizeof ext);
    if (s->next && rnd() % 16 == 0) /* hostile dataset names in the seal's extent table */
        for (int i = 0; i < 63; i++)
            ext[rnd() % (uint64_t)s->next].name[i] = (char)(1 + rnd() % 255);
    return kcap_seal_write(fd, "fuzz", NULL, ext, s->next, &err);
}

typedef struct stats {
    long execs, read_ok, by_code[KCAP_ERR_COUNT + 1], unknown_h5, rebuild_ok, sandboxed;
} stats;

/* Every refusal is one printable sentence: no byte of a hostile file reaches a terminal
 * through a message (seal extent names, HDF5 texts, entry names). */
static void check_msg(int rc, const kcap_error *e)
{
    for (const unsigned char *c = (const unsigned char *)e->msg; rc && *c; c++)
        if (*c < 0x20 || *c >= 0x7f) {
            fprintf(stderr, "fuzz_reseal: unescaped byte 0x%02x in: %s\n", *c, e->msg);
            abort();
        }
}

static void run_one(const char *path, stats *st)
{
    kcap_error err = {0};
    kcap_snapshot *s = NULL;
    int rc = kcap_snapshot_read(path, &s, &err);
    check_msg(rc, &err);
    st->by_code[rc >= 0 && rc < KCAP_ERR_COUNT ? rc : KCAP_ERR_COUNT]++;
    st->unknown_h5 += rc && (strstr(err.msg, "unknown HDF5 error") ||
                             strstr(err.msg, "no detail on libhdf5's error stack"));
    st->sandboxed += rc && strstr(err.msg, ": refused: ") != NULL; /* libhdf5 died in the child */
    if (getenv("FUZZ_VERBOSE"))
        fprintf(stderr, "%d %s\n", rc, err.msg);
    if (rc == 0) {
        st->read_ok++;
        const kcap_call_desc *d = kcap_call_find(s->meta.call);
        kcap_rebuilt rb;
        memset(&rb, 0, sizeof rb);
        if (d && !kcap_call_rebuild(d, s, kcap_host_mem_ops(), KCAP_POOL_AUTO, (size_t)1 << 28,
                                    &rb, &err))
            st->rebuild_ok++;
        kcap_rebuilt_free(&rb, kcap_host_mem_ops());
    }
    kcap_snapshot_free(s);
    s = NULL;
    size_t *stored = NULL;
    rc = kcap_snapshot_read_header(path, &s, &stored, &err);
    check_msg(rc, &err);
    if (rc == 0 && (!s || !stored))
        abort(); /* success must hand back a snapshot */
    free(stored);
    kcap_snapshot_free(s);
    check_msg(kcap_snapshot_check(path, &err), &err);
}

static void drop_tmp(void) { unlink(tmp_name); }

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    double secs = 0;
    long max_execs = 0, emit_n = 0;
    const char *crash_dir = NULL, *emit_dir = NULL;
    int opt;
    while ((opt = getopt(argc, argv, "t:n:s:o:e:")) != -1) {
        switch (opt) {
        case 't': secs = atof(optarg); break;
        case 'n': max_execs = atol(optarg); break;
        case 's': rng = strtoull(optarg, NULL, 0) * 0x9e3779b97f4a7c15ull + 1; break;
        case 'o': crash_dir = optarg; break;
        case 'e': emit_dir = optarg; break;
        default: goto usage;
        }
    }
    if (emit_dir && optind < argc)
        emit_n = atol(argv[optind++]);
    int nseeds = argc - optind;
    if (nseeds < 1 || (!emit_dir && !secs && !max_execs) || (emit_dir && emit_n < 1))
        goto usage;
    seedf *seeds = calloc((size_t)nseeds, sizeof *seeds);
    for (int i = 0; i < nseeds; i++)
        if (load(argv[optind + i], &seeds[i])) {
            fprintf(stderr, "fuzz_reseal: %s: not a usable seed snapshot\n", argv[optind + i]);
            return 2;
        }
    size_t cap = 0;
    for (int i = 0; i < nseeds; i++)
        cap = seeds[i].n + 65536 > cap ? seeds[i].n + 65536 : cap;
    cur = malloc(cap);
    if (emit_dir) {
        for (long i = 0; i < emit_n; i++) {
            const seedf *s = &seeds[rnd() % (uint64_t)nseeds];
            memcpy(cur, s->b, s->n);
            size_t n = mutate(cur, s->n, cap);
            char p[1024];
            snprintf(p, sizeof p, "%s/m%05ld.h5", emit_dir, i);
            int fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0644);
            if (fd < 0 || reseal(fd, cur, n, s)) {
                fprintf(stderr, "fuzz_reseal: cannot write %s\n", p);
                return 1;
            }
            close(fd);
        }
        return 0;
    }
    if (crash_dir)
        snprintf(crash_path, sizeof crash_path, "%s/crash-%d.h5", crash_dir, (int)getpid());
    main_pid = getpid();
    signal(SIGSEGV, on_crash);
    signal(SIGABRT, on_crash);
    signal(SIGBUS, on_crash);
    signal(SIGFPE, on_crash);
    signal(SIGILL, on_crash);
    /* a named file: libhdf5 resolves the real path of what it opens (a memfd has none) */
    char path[1024];
    const char *td = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/kcap-reseal-XXXXXX", td && *td ? td : "/tmp");
    int fd = mkstemp(path);
    if (fd < 0) {
        perror(path);
        return 1;
    }
    snprintf(tmp_name, sizeof tmp_name, "%s", path); /* the reader opens it by name */
    atexit(drop_tmp);
    stats st;
    memset(&st, 0, sizeof st);
    double t0 = now(), last = t0;
    while ((!max_execs || st.execs < max_execs) && (!secs || now() - t0 < secs)) {
        const seedf *s = &seeds[rnd() % (uint64_t)nseeds];
        memcpy(cur, s->b, s->n);
        cur_n = mutate(cur, s->n, cap);
        if (reseal(fd, cur, cur_n, s)) {
            fprintf(stderr, "fuzz_reseal: resealing failed\n");
            return 1;
        }
        pread(fd, cur, KCAP_UB_SIZE, 0) == KCAP_UB_SIZE ? (void)0 : abort(); /* saved sealed */
        run_one(path, &st);
        st.execs++;
        if (now() - last > 10) {
            last = now();
            fprintf(stderr, "fuzz_reseal: %ld execs, %.0f/s\n", st.execs,
                    (double)st.execs / (last - t0));
        }
    }
    double dt = now() - t0;
    printf("fuzz_reseal: %ld executions in %.1f s (%.0f/s), each = read + read_header + check"
           " (+ rebuild when it reads)\n", st.execs, dt, (double)st.execs / (dt > 0 ? dt : 1));
    printf("  read ok %ld (rebuilt %ld); refused:", st.read_ok, st.rebuild_ok);
    for (int c = 1; c <= KCAP_ERR_COUNT; c++)
        if (st.by_code[c])
            printf(" %s %ld;", c < KCAP_ERR_COUNT ? kcap_err_string(c) : "other", st.by_code[c]);
    printf("\n  refused because libhdf5 crashed or hung in the sandbox: %ld; messages saying "
           "\"unknown HDF5 error\" (or no libhdf5 detail): %ld\n", st.sandboxed, st.unknown_h5);
    return 0;
usage:
    fprintf(stderr, "usage: fuzz_reseal [-t SECONDS] [-n EXECS] [-s SEED] [-o CRASH_DIR] "
                    "SEED.h5...\n       fuzz_reseal -e DIR COUNT [-s SEED] SEED.h5...\n");
    return 2;
}
