/*
 * kcap_bench.c — the --bench timer and traffic model (see kcap_bench.h).
 *
 * Median and min are both reported: the median is what a kernel change moves, the min shows
 * how much of the spread is the machine. A kernel status other than 0 during timing stops
 * the benchmark: a library that fails on its second call is a bug worth a clear error.
 */
#include "kcap_bench.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Distinct values of an int32/int64 index tensor; -1 when it cannot be read. */
static int64_t distinct_count(const kcap_tensor *t)
{
    if (!t || !t->data)
        return -1;
    size_t es = kcap_dtype_size(t->dtype);
    if (!es || (t->dtype != KCAP_DT_I32 && t->dtype != KCAP_DT_I64))
        return -1;
    size_t n = t->nbytes / es;
    if (!n)
        return 0;
    int64_t *v = malloc(n * sizeof *v);
    if (!v)
        return -1;
    for (size_t i = 0; i < n; i++)
        v[i] = t->dtype == KCAP_DT_I32 ? ((const int32_t *)t->data)[i]
                                       : ((const int64_t *)t->data)[i];
    qsort(v, n, sizeof *v, cmp_i64);
    int64_t k = 1;
    for (size_t i = 1; i < n; i++)
        k += v[i] != v[i - 1];
    free(v);
    return k;
}

void kcap_bench_traffic(const kcap_call_desc *d, const kcap_snapshot *s, double *bytes,
                        double *flops)
{
    double b = 0;
    for (int i = 0; i < s->ntensors; i++) {
        const kcap_tensor *t = &s->tensors[i];
        double tb = (double)t->nbytes;
        for (int a = 0; a < d->nargs; a++) {
            const kcap_arg_desc *ad = &d->args[a];
            if (ad->gather != KCAP_GATHER_ROWS || strcmp(ad->name, t->name) ||
                t->dir != KCAP_DIR_IN || t->ndim < 1 || t->shape[0] <= 0)
                continue;
            int64_t uniq = distinct_count(kcap_snapshot_tensor(s, ad->index_arg, KCAP_DIR_IN));
            if (uniq >= 0)
                tb = tb / (double)t->shape[0] * (double)uniq;
        }
        b += tb;
    }
    *bytes = b;

    /* the description knows the call's arithmetic */
    kcap_call_summary sum;
    memset(&sum, 0, sizeof sum);
    if (d->summarise)
        d->summarise(s, &sum);
    *flops = sum.flops;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void summarise(double *ms, int n, kcap_bench_result *res)
{
    qsort(ms, (size_t)n, sizeof *ms, cmp_double);
    res->iters = n;
    res->min_ms = ms[0];
    res->median_ms = n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]);
    res->ran = 1;
}

static int bench_host(kcap_kern_fn fn, const void *args, void *ws, size_t wsb, int warmup,
                      int iters, kcap_bench_result *res, kcap_error *err)
{
    double *ms = calloc((size_t)iters, sizeof *ms);
    if (!ms)
        return kcap_error_set(err, KCAP_ERR_NOMEM, "out of memory");
    for (int i = 0; i < warmup + iters; i++) {
        double t0 = now_ms();
        int st = fn(args, ws, wsb, NULL);
        double t1 = now_ms();
        if (st) {
            free(ms);
            return kcap_error_set(err, KCAP_ERR_KERNEL, "benchmark run %d returned status %d",
                                  i, st);
        }
        if (i >= warmup)
            ms[i - warmup] = t1 - t0;
    }
    res->cuda = 0;
    summarise(ms, iters, res);
    free(ms);
    return KCAP_OK;
}

static int bench_cuda(kcap_dev *dev, kcap_kern_fn fn, const void *args, void *ws, size_t wsb,
                      int warmup, int iters, kcap_bench_result *res, kcap_error *err)
{
    const kcap_cu *cu = kcap_dev_cu(dev);
    CUstream st = kcap_dev_stream(dev);
    size_t l2 = kcap_dev_get_info(dev)->l2_bytes;
    size_t flush_bytes = 2 * (l2 ? l2 : (64u << 20)); /* >= 2x L2 evicts every line */
    CUdeviceptr flush = 0;
    CUevent e0 = NULL, e1 = NULL;
    double *ms = calloc((size_t)iters, sizeof *ms);
    int rc = KCAP_OK;
    CUresult r;
    if (!ms)
        return kcap_error_set(err, KCAP_ERR_NOMEM, "out of memory");
    if ((r = cu->cuMemAlloc(&flush, flush_bytes)) != CUDA_SUCCESS ||
        (r = cu->cuEventCreate(&e0, CU_EVENT_DEFAULT)) != CUDA_SUCCESS ||
        (r = cu->cuEventCreate(&e1, CU_EVENT_DEFAULT)) != CUDA_SUCCESS) {
        rc = kcap_dev_error(dev, r, err, "benchmark setup");
        goto out;
    }
    for (int i = 0; i < warmup + iters; i++) {
        if ((r = cu->cuMemsetD8Async(flush, (unsigned char)i, flush_bytes, st)) != CUDA_SUCCESS ||
            (r = cu->cuEventRecord(e0, st)) != CUDA_SUCCESS) {
            rc = kcap_dev_error(dev, r, err, "benchmark L2 flush");
            goto out;
        }
        int s = fn(args, ws, wsb, (void *)st);
        if (s) {
            rc = kcap_error_set(err, KCAP_ERR_KERNEL, "benchmark run %d returned status %d", i,
                                s);
            goto out;
        }
        float t = 0;
        if ((r = cu->cuEventRecord(e1, st)) != CUDA_SUCCESS ||
            (r = cu->cuEventSynchronize(e1)) != CUDA_SUCCESS ||
            (r = cu->cuEventElapsedTime(&t, e0, e1)) != CUDA_SUCCESS) {
            rc = kcap_dev_error(dev, r, err, "benchmark timing");
            goto out;
        }
        if (i >= warmup)
            ms[i - warmup] = t;
    }
    res->cuda = 1;
    summarise(ms, iters, res);
out:
    if (e0)
        cu->cuEventDestroy(e0);
    if (e1)
        cu->cuEventDestroy(e1);
    if (flush)
        cu->cuMemFree(flush);
    free(ms);
    return rc;
}

int kcap_bench_run(kcap_dev *dev, kcap_kern_fn fn, const void *args, void *ws, size_t wsb,
                   int warmup, int iters, kcap_bench_result *res, kcap_error *err)
{
    if (iters < 1)
        iters = 1;
    if (warmup < 0)
        warmup = 0;
    return dev ? bench_cuda(dev, fn, args, ws, wsb, warmup, iters, res, err)
               : bench_host(fn, args, ws, wsb, warmup, iters, res, err);
}
