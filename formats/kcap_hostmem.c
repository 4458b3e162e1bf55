/*
 * kcap_hostmem.c — kcap_mem_ops over plain host memory (memcpy/malloc/free/memset): what
 * the CPU kernel library, replay on the CPU and the tests use. Capture supplies its own
 * device-memory ops.
 */
#include "kcap_calls.h"

#include <stdlib.h>
#include <string.h>

static int h_copy(void *ctx, void *dst, const void *src, size_t n)
{
    (void)ctx;
    memcpy(dst, src, n);
    return 0;
}

static void *h_alloc(void *ctx, size_t n)
{
    (void)ctx;
    /* 64-byte aligned: the kernels want 16-byte aligned rows */
    void *p = NULL;
    return posix_memalign(&p, 64, n ? n : 1) ? NULL : p;
}

static void h_release(void *ctx, void *p)
{
    (void)ctx;
    free(p);
}

static int h_fill(void *ctx, void *dst, int byte, size_t n)
{
    (void)ctx;
    memset(dst, byte, n);
    return 0;
}

static const kcap_mem_ops host_ops = {NULL, h_copy, h_copy, h_alloc, h_release, h_fill, NULL};

const kcap_mem_ops *kcap_host_mem_ops(void) { return &host_ops; }
