/*
 * capture_client.c — a host program for capture tests, linked directly against
 * libverify_attn_cpu.so (so the call binds through the dynamic linker, the path a C server
 * uses). It makes random verify calls — bf16 non-zero data, ragged prefixes, a random slot
 * permutation of a pool larger than needed, int64 (or int32) indices, strided q and o,
 * random visibility or causal — and dumps every call's inputs and what it received back
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
 *                  vattn_extend_reference with --reference) on the same data: the draft rows
 *                  move from the pool into k_extend, kv_indices keep the prefixes only, and the
 *                  visibility becomes SGLang's mask rows with random bytes in the prefix
 *                  columns (which must not matter). Dumps add .kext (k_extend, dense) and .mask.
 * Dump files: DIR/<tag>.{meta,q,pool,indptr,indices,vis,o,lse}; tag = p<pid>-t<thread>-c<i>.
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
#include "../testkit.h"

static int g_calls = 4, g_threads = 1, g_fork = 0, g_int32 = 0, g_ref = 0, g_quiet = 0;
static uint64_t g_seed = 1;
static const char *g_dump, *g_until;
static int g_hash;
static int g_errno_check, g_fork_during;
static int g_invalid; /* every other call has num_heads = 0: the library rejects it */ /* print a hash of what each call returned (no files: disk-full tests) */
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

/* the client's stream: tk_next_xs, whose draws shell tests pin (test_capture_select.sh's
 * seed-21 run must need more than 2 MiB), so it cannot move to tk_next */
static uint64_t rnd(tk_rng *s) { return tk_next_xs(s); }

/* a random non-zero bf16 in about [-2, 2] */
static uint16_t rbf16(uint64_t *s)
{
    float f;
    do
        f = (float)((double)(rnd(s) % 2000001) / 500000.0 - 2.0);
    while (f == 0.0f);
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16) ? (uint16_t)(u >> 16) : 0x3f80;
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

/* The same call in the extend convention (vattn_extend_args): request b's last q_len keys
 * become k_extend rows b*q_len.. (a dense copy of their pool rows, stride kv_stride), its
 * prefix keeps its slots, and the visibility becomes SGLang's flattened mask rows (q_len x
 * (prefix + q_len) per request) with random bytes in the prefix columns. */
typedef struct {
    vattn_extend_args a;
    uint16_t *kext;
    size_t kext_bytes;
    int32_t *qo, *kvp;
    void *idx;
    uint8_t *mask;
    size_t mask_bytes;
    int64_t *mask_ptr;
    void *ws;
    size_t wsb;
} extend_call;

static void extend_free(extend_call *x)
{
    free(x->kext);
    free(x->qo);
    free(x->kvp);
    free(x->idx);
    free(x->mask);
    free(x->mask_ptr);
    free(x->ws);
}

static int to_extend(const vattn_args *v, extend_call *x, uint64_t *s)
{
    int bs = v->bs, q = v->q_len, T = bs * q;
    size_t isz = v->index_type == VATTN_INDEX_INT64 ? 8 : 4;
    const int32_t *ip = v->kv_indptr;
    x->kext_bytes = 2 * (size_t)T * (size_t)v->kv_stride;
    x->kext = malloc(x->kext_bytes);
    x->qo = malloc(sizeof(int32_t) * (size_t)(bs + 1));
    x->kvp = malloc(sizeof(int32_t) * (size_t)(bs + 1));
    x->idx = malloc(isz * (size_t)ip[bs] + 8);
    x->mask_ptr = malloc(sizeof(int64_t) * (size_t)(bs + 1));
    if (!x->kext || !x->qo || !x->kvp || !x->idx || !x->mask_ptr)
        return -1;
    memset(x->kext, 0, x->kext_bytes);
    x->qo[0] = x->kvp[0] = 0;
    x->mask_ptr[0] = 0;
    for (int b = 0; b < bs; b++) {
        int P = ip[b + 1] - ip[b] - q;
        x->qo[b + 1] = (b + 1) * q;
        x->kvp[b + 1] = x->kvp[b] + P;
        memcpy((char *)x->idx + isz * (size_t)x->kvp[b], (const char *)v->kv_indices + isz * (size_t)ip[b],
               isz * (size_t)P);
        for (int j = 0; j < q; j++) {
            const char *ix = (const char *)v->kv_indices + isz * (size_t)(ip[b] + P + j);
            int64_t slot = isz == 8 ? *(const int64_t *)ix : *(const int32_t *)ix;
            memcpy(x->kext + (size_t)(b * q + j) * (size_t)v->kv_stride,
                   (const uint16_t *)v->kv_cache + slot * v->kv_stride, 2 * 576);
        }
        x->mask_ptr[b + 1] = x->mask_ptr[b] + (int64_t)q * (P + q);
    }
    if (v->visibility) {
        x->mask_bytes = (size_t)x->mask_ptr[bs];
        x->mask = malloc(x->mask_bytes ? x->mask_bytes : 1);
        if (!x->mask)
            return -1;
        for (int b = 0; b < bs; b++) {
            int P = x->kvp[b + 1] - x->kvp[b];
            for (int i = 0; i < q; i++) {
                uint8_t *row = x->mask + x->mask_ptr[b] + (int64_t)i * (P + q);
                for (int c = 0; c < P; c++)
                    row[c] = (uint8_t)(rnd(s) % 3); /* ignored: the prefix is always visible */
                for (int j = 0; j < q; j++)
                    row[P + j] = v->visibility[((size_t)b * q + i) * q + j];
            }
        }
    }
    vattn_extend_args *a = &x->a;
    a->struct_size = sizeof *a;
    a->dtype = v->dtype;
    a->index_type = v->index_type;
    a->bs = bs;
    a->q_len = q;
    a->num_heads = v->num_heads;
    a->num_slots = v->num_slots;
    a->sm_scale = v->sm_scale;
    a->q = v->q;
    a->q_stride_t = v->q_stride_t;
    a->q_stride_h = v->q_stride_h;
    a->k_extend = x->kext;
    a->k_extend_stride = v->kv_stride;
    a->kv_cache = v->kv_cache;
    a->kv_stride = v->kv_stride;
    a->qo_indptr = x->qo;
    a->kv_indptr = x->kvp;
    a->kv_indices = x->idx;
    a->custom_mask = x->mask;
    a->mask_indptr = x->mask ? x->mask_ptr : NULL;
    a->o = v->o;
    a->o_stride_t = v->o_stride_t;
    a->o_stride_h = v->o_stride_h;
    a->lse = v->lse;
    x->wsb = vattn_extend_workspace_size(a);
    if (x->wsb == (size_t)-1) /* an --invalid call (num_heads = 0): the library says so */
        x->wsb = 0;
    x->ws = x->wsb ? aligned_alloc(64, (x->wsb + 63) / 64 * 64) : NULL;
    return x->wsb && !x->ws ? -1 : 0;
}

/* One random call; returns 0 when it ran (whatever the library's status), -1 on a client
 * problem. */
static int one_call(uint64_t *s, const char *tag)
{
    int bs = 1 + (int)(rnd(s) % 3), q_len = 1 + (int)(rnd(s) % 6), H = 1 + (int)(rnd(s) % 8);
    int big = g_big && tag && strstr(tag, "-c0");
    if (big)
        bs = 1;
    int T = bs * q_len;
    int32_t *indptr = malloc(sizeof(int32_t) * (size_t)(bs + 1));
    indptr[0] = 0;
    for (int b = 0; b < bs; b++)
        indptr[b + 1] = indptr[b] + q_len + (big ? g_big : (int)(rnd(s) % 150)); /* ragged prefixes */
    int64_t nnz = indptr[bs];
    if (nnz <= 0 || nnz > (1 << 20)) { /* cannot happen (bs <= 3 requests of < 160 keys, --big) */
        free(indptr);
        return -1;
    }
    int64_t num_slots = nnz + 64 + (int64_t)(rnd(s) % 256);
    int64_t kv_stride = 576 + 8 * (int64_t)(rnd(s) % 3);
    /* a random permutation of the pool's slots; each key takes a distinct slot */
    int64_t *perm = malloc(sizeof(int64_t) * (size_t)num_slots);
    for (int64_t i = 0; i < num_slots; i++)
        perm[i] = i;
    for (int64_t i = num_slots - 1; i > 0; i--) {
        int64_t j = (int64_t)(rnd(s) % (uint64_t)(i + 1)), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    size_t isz = g_int32 ? 4 : 8;
    void *indices = malloc(isz * (size_t)nnz);
    for (int64_t i = 0; i < nnz; i++) {
        if (g_int32)
            ((int32_t *)indices)[i] = (int32_t)perm[i];
        else
            ((int64_t *)indices)[i] = perm[i];
    }
    uint16_t *pool = malloc(2 * (size_t)(num_slots * kv_stride));
    for (int64_t i = 0; i < num_slots * kv_stride; i++)
        pool[i] = rbf16(s);
    int64_t qsh = 576 + 8 * (int64_t)(rnd(s) % 2), qst = H * qsh + 8 * (int64_t)(rnd(s) % 2);
    int64_t osh = 512 + 8 * (int64_t)(rnd(s) % 2), ost = H * osh;
    uint16_t *q = malloc(2 * (size_t)(T * qst));
    for (int64_t i = 0; i < T * qst; i++)
        q[i] = rbf16(s);
    uint8_t *vis = NULL;
    if (rnd(s) % 2) {
        vis = malloc((size_t)(bs * q_len * q_len));
        for (int i = 0; i < bs * q_len * q_len; i++)
            vis[i] = (uint8_t)(rnd(s) % 2);
    }
    uint16_t *o = malloc(2 * (size_t)(T * ost));
    memset(o, 0xA5, 2 * (size_t)(T * ost)); /* poisoned: gaps must stay poisoned */
    float *lse = malloc(sizeof(float) * (size_t)(T * H));
    memset(lse, 0xA5, sizeof(float) * (size_t)(T * H));

    vattn_args a;
    memset(&a, 0, sizeof a);
    a.struct_size = sizeof a;
    a.dtype = VATTN_DTYPE_BF16;
    a.index_type = g_int32 ? VATTN_INDEX_INT32 : VATTN_INDEX_INT64;
    a.bs = bs;
    a.q_len = q_len;
    a.num_heads = H;
    a.num_slots = num_slots;
    a.max_kv_len = 0;
    a.sm_scale = 0.0625f;
    a.q = q;
    a.q_stride_t = qst;
    a.q_stride_h = qsh;
    a.kv_cache = pool;
    a.kv_stride = kv_stride;
    a.kv_indptr = indptr;
    a.kv_indices = indices;
    a.visibility = vis;
    a.o = o;
    a.o_stride_t = ost;
    a.o_stride_h = osh;
    a.lse = lse;
    size_t wsb = vattn_workspace_size(&a);
    void *ws = wsb ? aligned_alloc(64, (wsb + 63) / 64 * 64) : NULL;
    static int flip;
    if (g_invalid && (flip++ & 1))
        a.num_heads = 0;
    if (big && g_big_sync)
        pthread_barrier_wait(&g_big_bar); /* every thread's buffers are allocated */
    uintptr_t sp = g_stack_lo ? paint_below_sp() : 0;
    extend_call x;
    memset(&x, 0, sizeof x);
    if (g_extend && to_extend(&a, &x, s)) {
        free(ws);
        return -1;
    }
    errno = 4242; /* not a real errno value: only the caller can have put it there */
    int st = g_extend ? (g_ref ? vattn_extend_reference(&x.a, x.ws, x.wsb, NULL)
                               : vattn_extend(&x.a, x.ws, x.wsb, NULL))
             : g_ref ? vattn_verify_reference(&a, ws, wsb, NULL) : vattn_verify(&a, ws, wsb, NULL);
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
        h = fnv(h, o, 2 * (size_t)(T * ost));
        h = fnv(h, lse, sizeof(float) * (size_t)(T * H));
        pthread_mutex_lock(&g_out_lock);
        printf("%s %016llx\n", tag, (unsigned long long)h);
        fflush(stdout);
        pthread_mutex_unlock(&g_out_lock);
    }
    if (tag && g_dump) {
        /* the q and o views, densified */
        uint16_t *qd = malloc(2 * (size_t)T * H * 576), *od = malloc(2 * (size_t)T * H * 512);
        for (int t = 0; t < T; t++)
            for (int h = 0; h < H; h++) {
                memcpy(qd + ((size_t)t * H + h) * 576, q + t * qst + h * qsh, 2 * 576);
                memcpy(od + ((size_t)t * H + h) * 512, o + t * ost + h * osh, 2 * 512);
            }
        char meta[512];
        int n = snprintf(meta, sizeof meta,
                         "status %d\nbs %d\nq_len %d\nheads %d\nnum_slots %lld\nkv_stride %lld\n"
                         "index_size %zu\nvis %d\nnnz %lld\n",
                         st, bs, q_len, H, (long long)num_slots, (long long)kv_stride, isz,
                         vis != NULL, (long long)nnz);
        rc |= dump(tag, "meta", meta, (size_t)n);
        rc |= dump(tag, "q", qd, 2 * (size_t)T * H * 576);
        rc |= dump(tag, "pool", pool, 2 * (size_t)(num_slots * kv_stride));
        rc |= dump(tag, "indptr", indptr, sizeof(int32_t) * (size_t)(bs + 1));
        rc |= dump(tag, "indices", indices, isz * (size_t)nnz);
        if (vis)
            rc |= dump(tag, "vis", vis, (size_t)(bs * q_len * q_len));
        if (g_extend) {
            rc |= dump(tag, "kext", x.kext, x.kext_bytes);
            if (x.mask)
                rc |= dump(tag, "mask", x.mask, x.mask_bytes);
        }
        rc |= dump(tag, "o", od, 2 * (size_t)T * H * 512);
        rc |= dump(tag, "ofull", o, 2 * (size_t)(T * ost)); /* gaps included */
        rc |= dump(tag, "lse", lse, sizeof(float) * (size_t)(T * H));
        free(qd);
        free(od);
    }
    if (st != VATTN_OK && !g_quiet)
        fprintf(stderr, "capture_client: %s returned %d\n", g_extend ? "vattn_extend" : "vattn_verify", st);
    extend_free(&x);
    free(ws);
    free(indptr);
    free(perm);
    free(indices);
    free(pool);
    free(q);
    free(vis);
    free(o);
    free(lse);
    return rc ? -1 : (st == VATTN_OK ? 0 : 1);
}

typedef struct {
    int id;
    int rc;
} thr;

static void *run_thread(void *p)
{
    thr *t = p;
    uint64_t s = g_seed * 0x9E3779B97F4A7C15ull + (uint64_t)t->id * 7919 + 1;
    for (int c = 0; c < 3; c++)
        rnd(&s);
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
            uint64_t s1 = g_seed + 999;
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
            uint64_t s1 = g_seed + 777;
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
    uint64_t s0 = g_seed + 1000;
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
