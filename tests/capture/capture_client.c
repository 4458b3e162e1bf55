/*
 * capture_client.c — a host program for capture tests, linked directly against
 * libverify_attn_cpu.so (so the call binds through the dynamic linker, the path a C server
 * uses). It makes the test kit's random verify calls (tests/testkit_vattn.h: bf16 data never
 * 0, ragged prefixes, a random slot permutation of a pool larger than needed with NaN in the
 * rows no key uses, int64 (or int32) indices, strided q and o, a visibility matrix of random
 * bytes or a tree, or causal) and dumps every call's inputs and what it received back
 * (status, o, lse) to files, so the tests can (1) compare runs with and without libkcap.so
 * byte for byte and (2) compare each snapshot with what the client really passed and got.
 *
 * usage: capture_client [--calls N] [--seed S] [--dump DIR] [--threads T] [--fork]
 *                       [--until FILE] [--int32] [--reference] [--quiet] [--hash]
 *                       [--errno] [--fork-during]
 *   --until FILE  keep calling (no dumps after the first N) until FILE exists; used by the
 *                 arming test, which needs a process that is alive and calling.
 *   --errno        errno is set before each call and must come back unchanged (the CPU library
 *                  never touches it, so neither may libkcap.so).
 *   --fork-during  one call runs on a thread while the main thread forks 200 ms in; the child
 *                  makes one call of its own under a 10 s alarm (a lock inherited held = hang).
 *   --stack KB     the calls run on a thread with a KB KiB stack (ours, painted before each
 *                  call): prints "stack_used=N", the most bytes any call used below its caller.
 *   --big N        each thread's first call is one request of N keys (60000: a ~70 MB snapshot);
 *                  with several threads, all hold their buffers across that call together
 *                  (barriers), so the peak memory of a run does not depend on timing.
 *   --fork-latency N  after the calls, fork N times while libkcap's writer is busy; prints
 *                  "fork_max_us=N"; the last child makes one call and exits normally.
 *   --reopen-stderr FILE  close fd 2 and open FILE in its place before calling.
 *   --chdir DIR    chdir to DIR before the first call.
 *   --maxrss       print "maxrss_kb=N" (getrusage) at the end.
 *   --extend       make each call in the extend convention (vattn_extend, or
 *                  vattn_extend_reference with --reference) on the same data, converted by the
 *                  kit (tk_vext_build): the draft rows move from the pool into k_extend (the
 *                  pool's copies NaN), kv_indices keep the prefixes only, and the visibility
 *                  becomes SGLang's mask rows with garbage in the prefix columns and between
 *                  requests (which must not matter). Dumps add .kext (k_extend, rows of
 *                  kv_stride) and .mask (the mask_indptr[bs] bytes a snapshot records); .pool
 *                  is the pool the call got.
 * Dump files: DIR/<tag>.{meta,q,pool,indptr,indices,vis,o,ofull,lse} (+ kext, mask);
 * tag = s<seed>-t<thread>-c<i>.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "verify_attn.h"
#include "../testkit_vattn.h"

static int g_calls = 4, g_threads = 1, g_fork = 0, g_int32 = 0, g_ref = 0, g_quiet = 0;
static uint64_t g_seed = 1;
static const char *g_dump, *g_until;
static int g_hash; /* print a hash of what each call returned (no files: disk-full tests) */
static int g_errno_check, g_fork_during;
static int g_invalid; /* every other call has num_heads = 0: the library rejects it */
static pthread_mutex_t g_out_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_stack_kb, g_big, g_fork_lat, g_maxrss, g_extend;
static int g_big_sync;                /* --big with several threads: barriers around the call */
static pthread_barrier_t g_big_bar;
static const char *g_reopen, *g_chdir;
static unsigned char *g_stack_lo;     /* lowest byte of the --stack thread's stack */
static size_t g_stack_used;           /* max bytes used below the call site */

#define PAINT 0x5A
/* Paint the unused part of our own stack below the current stack pointer; returns it. */
static uintptr_t paint_below_sp(void)
{
    uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
#if defined(__x86_64__)
    __asm__ volatile("mov %%rsp, %0" : "=r"(sp));
#endif
    for (volatile unsigned char *p = g_stack_lo + 4096; p < (unsigned char *)sp - 256; p++)
        *p = PAINT;
    return sp;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ ((const unsigned char *)p)[i]) * 0x100000001b3ull;
    return h;
}

static int dump(const char *tag, const char *ext, const void *p, size_t n)
{
    if (!g_dump)
        return 0;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.%s", g_dump, tag, ext);
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(p, 1, n, f) != n)) {
        fprintf(stderr, "capture_client: cannot write %s: %s\n", path, strerror(errno));
        if (f)
            fclose(f);
        return -1;
    }
    return fclose(f);
}

/* The shape of one random call, drawn from s (the call itself is the kit's, tk_vcall_build):
 * 1..3 requests of 1..6 drafts, 1..8 heads, prefixes of 0..CC_MAX_PREFIX keys (or one request of
 * --big keys), pool rows and q / o views padded by multiples of 8 elements (16-byte rows), and a
 * visibility matrix of random bytes or a tree, or causal with visibility NULL. Data never 0. */
#define CC_MAX_PREFIX 149
static tk_vcase draw_case(tk_rng *s, int big, const int64_t *big_prefix)
{
    static const int vis_modes[] = {TK_VIS_CAUSAL_NULL, TK_VIS_TREE, TK_VIS_RANDOM};
    tk_vcase c = {.name = "capture_client", .idx64 = !g_int32, .max_prefix = CC_MAX_PREFIX,
                  .val = tk_vattn_nonzero_val};
    /* draws in statements: the order of evaluation inside an initializer is unspecified */
    c.bs = (int)tk_range(s, 1, 3);
    c.q_len = (int)tk_range(s, 1, 6);
    c.heads = (int)tk_range(s, 1, 8);
    c.kv_stride = QK + 8 * tk_int(s, 3);
    c.q_gap_h = 8 * tk_int(s, 2);
    c.q_gap_t = 8 * tk_int(s, 3);
    c.o_gap_h = 8 * tk_int(s, 2);
    c.o_gap_t = 8 * tk_int(s, 2);
    c.vis = vis_modes[tk_int(s, 3)];
    if (big) {
        c.bs = 1;
        c.prefixes = big_prefix;
    }
    return c;
}

/* One random call; returns 0 when it ran (whatever the library's status), -1 on a client
 * problem. With --extend the same call goes in the extend convention (tk_vext_build): the draft
 * rows move into k_extend (rows of kv_stride, so the dumps read like the pool), kv_indices keep
 * the prefixes, the visibility becomes SGLang's mask rows with garbage in the prefix columns. */
static int one_call(tk_rng *s, const char *tag)
{
    const int big = g_big && tag && strstr(tag, "-c0");
    const int64_t big_prefix = g_big;
    const tk_vcase c = draw_case(s, big, &big_prefix);
    const int T = c.bs * c.q_len, H = c.heads;
    tk_vcall B;
    tk_vcall_build(&c, s, &B);
    vattn_args *a = &B.a;
    const int64_t nnz = B.indptr[c.bs];
    const size_t isz = c.idx64 ? 8 : 4;
    B.ws_bytes = vattn_workspace_size(a);
    B.ws = B.ws_bytes ? aligned_alloc(64, (B.ws_bytes + 63) / 64 * 64) : NULL;
    static int flip;
    if (g_invalid && (flip++ & 1))
        a->num_heads = 0;
    tk_vext X;
    void *xws = NULL;
    size_t xwsb = 0;
    memset(&X, 0, sizeof X);
    if (g_extend) {
        tk_vext_build(s, a, B.indptr, B.indices, B.vis, B.kv, B.kv_elems, (int)(c.kv_stride - QK), &X);
        xwsb = vattn_extend_workspace_size(&X.e);
        if (xwsb == (size_t)-1) /* an --invalid call (num_heads = 0): the library says so */
            xwsb = 0;
        xws = xwsb ? aligned_alloc(64, (xwsb + 63) / 64 * 64) : NULL;
    }
    if ((B.ws_bytes && !B.ws) || (xwsb && !xws)) {
        tk_vext_free(&X);
        free(xws);
        tk_vcall_free(&B);
        return -1;
    }
    if (big && g_big_sync)
        pthread_barrier_wait(&g_big_bar); /* every thread's buffers are allocated */
    uintptr_t sp = g_stack_lo ? paint_below_sp() : 0;
    errno = 4242; /* not a real errno value: only the caller can have put it there */
    int st = g_extend ? (g_ref ? vattn_extend_reference(&X.e, xws, xwsb, NULL) : vattn_extend(&X.e, xws, xwsb, NULL))
             : g_ref  ? vattn_verify_reference(a, B.ws, B.ws_bytes, NULL)
                      : vattn_verify(a, B.ws, B.ws_bytes, NULL);
    int errno_after = errno;
    if (big && g_big_sync)
        pthread_barrier_wait(&g_big_bar); /* ... and held until every big call returned */
    if (sp) {
        unsigned char *p = g_stack_lo + 4096;
        while (p < (unsigned char *)sp && *p == PAINT)
            p++;
        if (sp - (uintptr_t)p > g_stack_used)
            g_stack_used = sp - (uintptr_t)p;
    }

    int rc = 0;
    if (g_errno_check && errno_after != 4242) {
        fprintf(stderr, "capture_client: errno was 4242 before the call, %d after\n", errno_after);
        rc = -1;
    }
    if (tag && g_hash) {
        uint64_t h = fnv(0xcbf29ce484222325ull, &st, sizeof st);
        h = fnv(h, B.o, B.o_elems * 2);
        h = fnv(h, B.lse, B.lse_elems * 4);
        pthread_mutex_lock(&g_out_lock);
        printf("%s %016llx\n", tag, (unsigned long long)h);
        fflush(stdout);
        pthread_mutex_unlock(&g_out_lock);
    }
    if (tag && g_dump) {
        /* the q and o views, densified */
        uint16_t *qd = malloc(2 * (size_t)T * H * QK), *od = malloc(2 * (size_t)T * H * DV);
        for (int t = 0; t < T; t++)
            for (int h = 0; h < H; h++) {
                memcpy(qd + ((size_t)t * H + h) * QK, B.q + t * a->q_stride_t + h * a->q_stride_h, 2 * QK);
                memcpy(od + ((size_t)t * H + h) * DV, B.o + t * a->o_stride_t + h * a->o_stride_h, 2 * DV);
            }
        char meta[512];
        int n = snprintf(meta, sizeof meta,
                         "status %d\nbs %d\nq_len %d\nheads %d\nnum_slots %lld\nkv_stride %lld\n"
                         "index_size %zu\nvis %d\nnnz %lld\n",
                         st, c.bs, c.q_len, H, (long long)a->num_slots, (long long)a->kv_stride, isz,
                         a->visibility != NULL, (long long)nnz);
        rc |= dump(tag, "meta", meta, (size_t)n);
        rc |= dump(tag, "q", qd, 2 * (size_t)T * H * QK);
        rc |= dump(tag, "pool", g_extend ? X.kv : B.kv, B.kv_elems * 2); /* the pool the call got */
        rc |= dump(tag, "indptr", B.indptr, sizeof(int32_t) * (size_t)(c.bs + 1));
        rc |= dump(tag, "indices", B.indices, isz * (size_t)nnz);
        if (a->visibility)
            rc |= dump(tag, "vis", B.vis, (size_t)c.bs * c.q_len * c.q_len);
        if (g_extend) {
            rc |= dump(tag, "kext", X.kext, X.kext_elems * 2);
            if (X.mask) /* the bytes the call may read: what a snapshot records */
                rc |= dump(tag, "mask", X.mask, (size_t)X.mask_indptr[c.bs]);
        }
        rc |= dump(tag, "o", od, 2 * (size_t)T * H * DV);
        rc |= dump(tag, "ofull", B.o, B.o_elems * 2); /* gaps included */
        rc |= dump(tag, "lse", B.lse, B.lse_elems * 4);
        free(qd);
        free(od);
    }
    if (st != VATTN_OK && !g_quiet)
        fprintf(stderr, "capture_client: %s returned %d\n", g_extend ? "vattn_extend" : "vattn_verify", st);
    tk_vext_free(&X);
    free(xws);
    tk_vcall_free(&B); /* and B.ws */
    return rc ? -1 : (st == VATTN_OK ? 0 : 1);
}

typedef struct {
    int id;
    int rc;
} thr;

static void *run_thread(void *p)
{
    thr *t = p;
    tk_rng s = tk_seed(g_seed) + (uint64_t)t->id * 7919; /* a stream per thread */
    for (int c = 0; c < 3; c++) /* states 7919 apart: a few steps decorrelate them */
        tk_next(&s);
    for (int i = 0; i < g_calls; i++) {
        char tag[64];
        snprintf(tag, sizeof tag, "s%llu-t%d-c%d", (unsigned long long)g_seed, t->id, i);
        if (one_call(&s, tag))
            t->rc = 1;
    }
    if (g_until) {
        while (access(g_until, F_OK)) {
            one_call(&s, NULL);
            struct timespec ts = {0, 2 * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
    return NULL;
}

static int run_all(void)
{
    thr ts[64];
    pthread_t th[64];
    int rc = 0;
    pthread_attr_t at;
    pthread_attr_init(&at);
    if (g_stack_kb) {
        /* our own mapping, so that we know where the stack ends (4 KiB guard at the bottom) */
        size_t sz = (size_t)g_stack_kb << 10;
        g_stack_lo = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (g_stack_lo == MAP_FAILED || mprotect(g_stack_lo, 4096, PROT_NONE) ||
            pthread_attr_setstack(&at, g_stack_lo, sz))
            return 1;
        g_threads = 1;
    }
    g_big_sync = g_big && g_threads > 1;
    if (g_big_sync)
        pthread_barrier_init(&g_big_bar, NULL, (unsigned)g_threads);
    for (int i = 0; i < g_threads; i++) {
        ts[i].id = i;
        ts[i].rc = 0;
        if (pthread_create(&th[i], &at, run_thread, &ts[i]))
            return 1;
    }
    for (int i = 0; i < g_threads; i++) {
        pthread_join(th[i], NULL);
        rc |= ts[i].rc;
    }
    if (g_stack_kb)
        printf("stack_used=%zu\n", g_stack_used);
    return rc;
}

/* fork while libkcap's writer is busy with what run_all queued; the child returns at once
 * except the last one, which makes a call of its own and exits normally (its snapshot must
 * be written) */
static int fork_latency(void)
{
    double worst = 0;
    for (int i = 0; i < g_fork_lat; i++) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        pid_t pid = fork();
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if (pid < 0)
            return 1;
        if (pid == 0) {
            if (i < g_fork_lat - 1)
                _exit(0);
            tk_rng s1 = tk_seed(g_seed + 999);
            exit(one_call(&s1, "forked") ? 1 : 0);
        }
        double us = (double)(t1.tv_sec - t0.tv_sec) * 1e6 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e3;
        if (us > worst)
            worst = us;
        int st = 0;
        if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
            return 1;
        struct timespec gap = {0, 20 * 1000000L};
        nanosleep(&gap, NULL);
    }
    printf("fork_max_us=%.0f\n", worst);
    return 0;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(a, "--calls"))
            g_calls = atoi(v), i++;
        else if (!strcmp(a, "--seed"))
            g_seed = strtoull(v, NULL, 10), i++;
        else if (!strcmp(a, "--dump"))
            g_dump = v, i++;
        else if (!strcmp(a, "--threads"))
            g_threads = atoi(v), i++;
        else if (!strcmp(a, "--until"))
            g_until = v, i++;
        else if (!strcmp(a, "--fork"))
            g_fork = 1;
        else if (!strcmp(a, "--int32"))
            g_int32 = 1;
        else if (!strcmp(a, "--reference"))
            g_ref = 1;
        else if (!strcmp(a, "--quiet"))
            g_quiet = 1;
        else if (!strcmp(a, "--invalid"))
            g_invalid = 1, g_quiet = 1;
        else if (!strcmp(a, "--hash"))
            g_hash = 1;
        else if (!strcmp(a, "--errno"))
            g_errno_check = 1;
        else if (!strcmp(a, "--fork-during"))
            g_fork_during = 1;
        else if (!strcmp(a, "--stack"))
            g_stack_kb = atoi(v), i++;
        else if (!strcmp(a, "--big"))
            g_big = atoi(v), i++;
        else if (!strcmp(a, "--fork-latency"))
            g_fork_lat = atoi(v), i++;
        else if (!strcmp(a, "--reopen-stderr"))
            g_reopen = v, i++;
        else if (!strcmp(a, "--chdir"))
            g_chdir = v, i++;
        else if (!strcmp(a, "--extend"))
            g_extend = 1;
        else if (!strcmp(a, "--maxrss"))
            g_maxrss = 1;
        else {
            fprintf(stderr, "capture_client: unknown argument %s\n", a);
            return 2;
        }
    }
    if (g_threads < 1 || g_threads > 64 || g_calls < 0) {
        fprintf(stderr, "capture_client: bad --threads/--calls\n");
        return 2;
    }
    if (g_reopen) { /* a host that reuses fd 2 for its own data */
        close(2);
        if (open(g_reopen, O_WRONLY | O_CREAT | O_TRUNC, 0600) != 2)
            return 1;
    }
    if (g_chdir && chdir(g_chdir))
        return 1;
    if (g_fork_lat || g_maxrss) {
        int rc = run_all();
        if (!rc && g_fork_lat)
            rc = fork_latency();
        if (g_maxrss) {
            struct rusage ru;
            getrusage(RUSAGE_SELF, &ru);
            printf("maxrss_kb=%ld\n", ru.ru_maxrss);
        }
        return rc;
    }
    if (g_fork_during) {
        thr t0 = {0, 0};
        pthread_t th;
        g_calls = 1;
        if (pthread_create(&th, NULL, run_thread, &t0))
            return 1;
        struct timespec ts = {0, 200 * 1000000L};
        nanosleep(&ts, NULL);
        pid_t pid = fork();
        if (pid < 0)
            return 1;
        if (pid == 0) {
            alarm(10);
            tk_rng s1 = tk_seed(g_seed + 777);
            exit(one_call(&s1, NULL) ? 1 : 0);
        }
        pthread_join(th, NULL);
        int st = 0;
        if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st)) {
            fprintf(stderr, "capture_client: forked child failed (status 0x%x)\n", st);
            return 1;
        }
        return t0.rc;
    }
    if (!g_fork)
        return run_all();
    /* fork after the library is bound and capture is running: parent and child both call */
    tk_rng s0 = tk_seed(g_seed + 1000);
    char tag[64];
    snprintf(tag, sizeof tag, "s%llu-prefork", (unsigned long long)g_seed);
    one_call(&s0, tag);
    pid_t pid = fork();
    if (pid < 0)
        return 1;
    if (pid == 0) {
        g_seed += 500; /* different data from the parent */
        exit(run_all() ? 1 : 0); /* exit, not _exit: the capture flush at exit must run */
    }
    int rc = run_all();
    int st = 0;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
        rc = 1;
    return rc;
}
