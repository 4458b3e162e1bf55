/*
 * dl_scope_dep.c — test library (test_capture_host.sh): stands for a runtime that is only a
 * dependency of a library loaded RTLD_LOCAL, so it is outside the global scope. It defines a
 * plain symbol and the CUDA runtime (and driver) graph entry points libkcap.so interposes: capture returns
 * success; every executable-graph call records its name and arguments (kt_rt_*) and returns
 * 600 + the number of such calls so far, so its caller can tell that exactly its arguments
 * arrived and exactly this status came back.
 */
#include <stddef.h>
#include <stdint.h>

int kt_dep_sym(void) { return 42; }
int cudaStreamBeginCapture(void *s, int mode)
{
    (void)s;
    (void)mode;
    return 0;
}
int cudaStreamEndCapture(void *s, void **graph)
{
    (void)s;
    *graph = (void *)0x1;
    return 0;
}

const char *kt_rt_last;
uintptr_t kt_rt_arg[7];
int kt_rt_calls;

static int kt_rec(const char *name, uintptr_t a, uintptr_t b, uintptr_t c, uintptr_t d, uintptr_t e,
                  uintptr_t f, uintptr_t g)
{
    const uintptr_t v[7] = {a, b, c, d, e, f, g};
    for (int i = 0; i < 7; i++)
        kt_rt_arg[i] = v[i];
    kt_rt_last = name;
    return 600 + ++kt_rt_calls;
}
#define U(x) ((uintptr_t)(x))

int cudaGraphInstantiate(void **x, void *g, unsigned long long flags)
{
    *x = (void *)0xe1;
    return kt_rec("cudaGraphInstantiate", U(x), U(g), U(flags), 0, 0, 0, 0);
}
int cudaGraphInstantiateWithFlags(void **x, void *g, unsigned long long flags)
{
    *x = (void *)0xe2;
    return kt_rec("cudaGraphInstantiateWithFlags", U(x), U(g), U(flags), 0, 0, 0, 0);
}
int cudaGraphInstantiateWithParams(void **x, void *g, void *params)
{
    *x = (void *)0xe3;
    return kt_rec("cudaGraphInstantiateWithParams", U(x), U(g), U(params), 0, 0, 0, 0);
}
int cudaGraphLaunch(void *x, void *s) { return kt_rec("cudaGraphLaunch", U(x), U(s), 0, 0, 0, 0, 0); }
int cudaGraphLaunch_ptsz(void *x, void *s) { return kt_rec("cudaGraphLaunch_ptsz", U(x), U(s), 0, 0, 0, 0, 0); }
int cudaGraphExecDestroy(void *x) { return kt_rec("cudaGraphExecDestroy", U(x), 0, 0, 0, 0, 0, 0); }
int cudaGraphExecUpdate(void *x, void *g, void *info) { return kt_rec("cudaGraphExecUpdate", U(x), U(g), U(info), 0, 0, 0, 0); }
#define KT_SET(sym, T)                                                                     \
    int sym(void *x, void *n, T p) { return kt_rec(#sym, U(x), U(n), U(p), 0, 0, 0, 0); }
KT_SET(cudaGraphExecKernelNodeSetParams, const void *)
KT_SET(cudaGraphExecNodeSetParams, void *)
KT_SET(cudaGraphNodeSetEnabled, unsigned int)
KT_SET(cudaGraphExecMemcpyNodeSetParams, const void *)
KT_SET(cudaGraphExecMemsetNodeSetParams, const void *)
KT_SET(cudaGraphExecHostNodeSetParams, const void *)
KT_SET(cudaGraphExecChildGraphNodeSetParams, void *)
KT_SET(cudaGraphExecEventRecordNodeSetEvent, void *)
KT_SET(cudaGraphExecEventWaitNodeSetEvent, void *)
KT_SET(cudaGraphExecExternalSemaphoresSignalNodeSetParams, const void *)
KT_SET(cudaGraphExecExternalSemaphoresWaitNodeSetParams, const void *)
int cudaGraphExecMemcpyNodeSetParams1D(void *x, void *n, void *dst, const void *src, size_t c, int kind)
{
    return kt_rec("cudaGraphExecMemcpyNodeSetParams1D", U(x), U(n), U(dst), U(src), c, U(kind), 0);
}
int cudaGraphExecMemcpyNodeSetParamsToSymbol(void *x, void *n, const void *sym, const void *src, size_t c,
                                             size_t off, int kind)
{
    return kt_rec("cudaGraphExecMemcpyNodeSetParamsToSymbol", U(x), U(n), U(sym), U(src), c, off, U(kind));
}
int cudaGraphExecMemcpyNodeSetParamsFromSymbol(void *x, void *n, void *dst, const void *sym, size_t c,
                                               size_t off, int kind)
{
    return kt_rec("cudaGraphExecMemcpyNodeSetParamsFromSymbol", U(x), U(n), U(dst), U(sym), c, off, U(kind));
}
/* the driver API's executable-graph calls (libkcap forwards these too) */
int cuGraphExecDestroy(void *x) { return kt_rec("cuGraphExecDestroy", U(x), 0, 0, 0, 0, 0, 0); }
int cuGraphExecUpdate(void *x, void *g, void *e, void *r) { return kt_rec("cuGraphExecUpdate", U(x), U(g), U(e), U(r), 0, 0, 0); }
int cuGraphExecUpdate_v2(void *x, void *g, void *info) { return kt_rec("cuGraphExecUpdate_v2", U(x), U(g), U(info), 0, 0, 0, 0); }
KT_SET(cuGraphExecKernelNodeSetParams, const void *)
KT_SET(cuGraphExecKernelNodeSetParams_v2, const void *)
KT_SET(cuGraphExecNodeSetParams, void *)
KT_SET(cuGraphNodeSetEnabled, unsigned int)
KT_SET(cuGraphExecHostNodeSetParams, const void *)
KT_SET(cuGraphExecChildGraphNodeSetParams, void *)
KT_SET(cuGraphExecEventRecordNodeSetEvent, void *)
KT_SET(cuGraphExecEventWaitNodeSetEvent, void *)
KT_SET(cuGraphExecExternalSemaphoresSignalNodeSetParams, const void *)
KT_SET(cuGraphExecExternalSemaphoresWaitNodeSetParams, const void *)
KT_SET(cuGraphExecBatchMemOpNodeSetParams, const void *)
int cuGraphExecMemcpyNodeSetParams(void *x, void *n, const void *p, void *ctx)
{
    return kt_rec("cuGraphExecMemcpyNodeSetParams", U(x), U(n), U(p), U(ctx), 0, 0, 0);
}
int cuGraphExecMemsetNodeSetParams(void *x, void *n, const void *p, void *ctx)
{
    return kt_rec("cuGraphExecMemsetNodeSetParams", U(x), U(n), U(p), U(ctx), 0, 0, 0);
}
