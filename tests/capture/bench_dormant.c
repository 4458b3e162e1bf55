/*
 * bench_dormant.c — per-call cost of the verify entry point, through both bindings: the
 * dynamic linker (linked against libvattn_null.so) and dlopen + dlsym (the ctypes path).
 * bench_dormant.sh runs it without libkcap.so and with a dormant libkcap.so; the difference
 * is the dormant overhead (target <= 20 ns/call). Best of 7 runs of N calls each.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "verify_attn.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef int (*fn_t)(const vattn_args *, void *, size_t, void *);

static double bench(fn_t f, long n, const vattn_args *a)
{
    double best = 1e30;
    for (int r = 0; r < 7; r++) {
        volatile int sink = 0;
        double t0 = now();
        for (long i = 0; i < n; i++)
            sink += f(a, NULL, 0, NULL);
        double dt = (now() - t0) / (double)n * 1e9;
        if (dt < best)
            best = dt;
    }
    return best;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 20000000;
    const char *lib = argc > 2 ? argv[2] : NULL;
    vattn_args a;
    memset(&a, 0, sizeof a);
    double direct = bench(vattn_verify, n, &a);
    double viadl = -1;
    if (lib) {
        void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
        fn_t f = h ? (fn_t)dlsym(h, "vattn_verify") : NULL;
        if (!f) {
            fprintf(stderr, "bench_dormant: cannot load %s\n", lib);
            return 1;
        }
        viadl = bench(f, n, &a);
    }
    printf("calls %ld direct_ns %.2f dlsym_ns %.2f\n", n, direct, viadl);
    return 0;
}
