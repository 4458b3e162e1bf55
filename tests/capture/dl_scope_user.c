/*
 * dl_scope_user.c — test library (test_capture_host.sh), linked against libdl_scope_dep.so
 * and dlopen'ed RTLD_LOCAL by dl_scope_main: what a Python extension that links a runtime
 * does. Its dlsym(RTLD_DEFAULT) must still see its own dependency, and its graph calls must
 * still reach its runtime, with libkcap.so preloaded: capture, and every executable-graph call
 * libkcap interposes with exactly the caller's arguments and the runtime's status (twice:
 * the second time through libkcap's cached definitions).
 */
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

int cudaStreamBeginCapture(void *s, int mode);
int cudaStreamEndCapture(void *s, void **graph);
int cudaGraphInstantiate(void **x, void *g, unsigned long long flags);
int cudaGraphInstantiateWithFlags(void **x, void *g, unsigned long long flags);
int cudaGraphInstantiateWithParams(void **x, void *g, void *params);
int cudaGraphLaunch(void *x, void *s);
int cudaGraphLaunch_ptsz(void *x, void *s);
int cudaGraphExecDestroy(void *x);
int cudaGraphExecUpdate(void *x, void *g, void *info);
int cudaGraphExecKernelNodeSetParams(void *x, void *n, const void *p);
int cudaGraphExecNodeSetParams(void *x, void *n, void *p);
int cudaGraphNodeSetEnabled(void *x, void *n, unsigned int on);
int cudaGraphExecMemcpyNodeSetParams(void *x, void *n, const void *p);
int cudaGraphExecMemsetNodeSetParams(void *x, void *n, const void *p);
int cudaGraphExecHostNodeSetParams(void *x, void *n, const void *p);
int cudaGraphExecChildGraphNodeSetParams(void *x, void *n, void *g);
int cudaGraphExecEventRecordNodeSetEvent(void *x, void *n, void *e);
int cudaGraphExecEventWaitNodeSetEvent(void *x, void *n, void *e);
int cudaGraphExecExternalSemaphoresSignalNodeSetParams(void *x, void *n, const void *p);
int cudaGraphExecExternalSemaphoresWaitNodeSetParams(void *x, void *n, const void *p);
int cudaGraphExecMemcpyNodeSetParams1D(void *x, void *n, void *dst, const void *src, size_t c, int kind);
int cudaGraphExecMemcpyNodeSetParamsToSymbol(void *x, void *n, const void *sym, const void *src, size_t c,
                                             size_t off, int kind);
int cudaGraphExecMemcpyNodeSetParamsFromSymbol(void *x, void *n, void *dst, const void *sym, size_t c,
                                               size_t off, int kind);
int cuGraphExecDestroy(void *x);
int cuGraphExecUpdate(void *x, void *g, void *e, void *r);
int cuGraphExecUpdate_v2(void *x, void *g, void *info);
int cuGraphExecKernelNodeSetParams(void *x, void *n, const void *p);
int cuGraphExecKernelNodeSetParams_v2(void *x, void *n, const void *p);
int cuGraphExecNodeSetParams(void *x, void *n, void *p);
int cuGraphNodeSetEnabled(void *x, void *n, unsigned int p);
int cuGraphExecHostNodeSetParams(void *x, void *n, const void *p);
int cuGraphExecChildGraphNodeSetParams(void *x, void *n, void *g);
int cuGraphExecEventRecordNodeSetEvent(void *x, void *n, void *e);
int cuGraphExecEventWaitNodeSetEvent(void *x, void *n, void *e);
int cuGraphExecExternalSemaphoresSignalNodeSetParams(void *x, void *n, const void *p);
int cuGraphExecExternalSemaphoresWaitNodeSetParams(void *x, void *n, const void *p);
int cuGraphExecBatchMemOpNodeSetParams(void *x, void *n, const void *p);
int cuGraphExecMemcpyNodeSetParams(void *x, void *n, const void *p, void *ctx);
int cuGraphExecMemsetNodeSetParams(void *x, void *n, const void *p, void *ctx);
extern const char *kt_rt_last;
extern uintptr_t kt_rt_arg[7];
extern int kt_rt_calls;

int kt_lookup(void) { return dlsym(RTLD_DEFAULT, "kt_dep_sym") != 0; }
int kt_graph(void)
{
    void *g = 0;
    int a = cudaStreamBeginCapture(0, 0);
    int b = cudaStreamEndCapture(0, &g);
    return a * 10 + b;
}

static int kt_bad;
/* the last call was `name`, returned rc and received a[0..n) */
static void kt_expect(const char *name, int rc, int n, const uintptr_t *a)
{
    int bad = rc != 600 + kt_rt_calls || !kt_rt_last || strcmp(kt_rt_last, name);
    for (int i = 0; i < n; i++)
        bad |= kt_rt_arg[i] != a[i];
    if (bad) {
        fprintf(stderr, "dl_scope_user: %s did not reach the runtime as called (status %d)\n", name, rc);
        kt_bad++;
    }
}
#define P(v) ((void *)(uintptr_t)(v))
#define EXPECT(sym, rc, ...)                                                               \
    do {                                                                                   \
        const uintptr_t a_[] = {__VA_ARGS__};                                              \
        kt_expect(#sym, rc, (int)(sizeof a_ / sizeof a_[0]), a_);                          \
    } while (0)
#define KT_SET(sym, T) EXPECT(sym, sym(P(0x31), P(0x32), (T)0x33), 0x31, 0x32, 0x33)

/* the number of executable-graph calls that did not reach the runtime exactly */
int kt_graph_exec(void)
{
    for (int round = 0; round < 2; round++) {
        void *x = NULL;
        EXPECT(cudaGraphInstantiate, cudaGraphInstantiate(&x, P(0x11), 0x12), (uintptr_t)&x, 0x11, 0x12);
        kt_bad += x != P(0xe1);
        EXPECT(cudaGraphInstantiateWithFlags, cudaGraphInstantiateWithFlags(&x, P(0x13), 9), (uintptr_t)&x, 0x13, 9);
        kt_bad += x != P(0xe2);
        unsigned long long params[4] = {1, 0, 0, 0};
        EXPECT(cudaGraphInstantiateWithParams, cudaGraphInstantiateWithParams(&x, P(0x14), params),
               (uintptr_t)&x, 0x14, (uintptr_t)params);
        kt_bad += x != P(0xe3);
        EXPECT(cudaGraphLaunch, cudaGraphLaunch(P(0x21), P(0x22)), 0x21, 0x22);
        EXPECT(cudaGraphLaunch_ptsz, cudaGraphLaunch_ptsz(P(0x23), P(0)), 0x23, 0);
        EXPECT(cudaGraphExecUpdate, cudaGraphExecUpdate(P(0x24), P(0x25), P(0x26)), 0x24, 0x25, 0x26);
        KT_SET(cudaGraphExecKernelNodeSetParams, const void *);
        KT_SET(cudaGraphExecNodeSetParams, void *);
        KT_SET(cudaGraphNodeSetEnabled, unsigned int);
        KT_SET(cudaGraphExecMemcpyNodeSetParams, const void *);
        KT_SET(cudaGraphExecMemsetNodeSetParams, const void *);
        KT_SET(cudaGraphExecHostNodeSetParams, const void *);
        KT_SET(cudaGraphExecChildGraphNodeSetParams, void *);
        KT_SET(cudaGraphExecEventRecordNodeSetEvent, void *);
        KT_SET(cudaGraphExecEventWaitNodeSetEvent, void *);
        KT_SET(cudaGraphExecExternalSemaphoresSignalNodeSetParams, const void *);
        KT_SET(cudaGraphExecExternalSemaphoresWaitNodeSetParams, const void *);
        EXPECT(cudaGraphExecMemcpyNodeSetParams1D,
               cudaGraphExecMemcpyNodeSetParams1D(P(0x41), P(0x42), P(0x43), P(0x44), 0x45, 3),
               0x41, 0x42, 0x43, 0x44, 0x45, 3);
        EXPECT(cudaGraphExecMemcpyNodeSetParamsToSymbol,
               cudaGraphExecMemcpyNodeSetParamsToSymbol(P(0x51), P(0x52), P(0x53), P(0x54), 0x55, 0x56, 1),
               0x51, 0x52, 0x53, 0x54, 0x55, 0x56, 1);
        EXPECT(cudaGraphExecMemcpyNodeSetParamsFromSymbol,
               cudaGraphExecMemcpyNodeSetParamsFromSymbol(P(0x61), P(0x62), P(0x63), P(0x64), 0x65, 0x66, 2),
               0x61, 0x62, 0x63, 0x64, 0x65, 0x66, 2);
        EXPECT(cuGraphExecUpdate, cuGraphExecUpdate(P(0x71), P(0x72), P(0x73), P(0x74)), 0x71, 0x72, 0x73, 0x74);
        EXPECT(cuGraphExecUpdate_v2, cuGraphExecUpdate_v2(P(0x75), P(0x76), P(0x77)), 0x75, 0x76, 0x77);
        KT_SET(cuGraphExecKernelNodeSetParams, const void *);
        KT_SET(cuGraphExecKernelNodeSetParams_v2, const void *);
        KT_SET(cuGraphExecNodeSetParams, void *);
        KT_SET(cuGraphNodeSetEnabled, unsigned int);
        KT_SET(cuGraphExecHostNodeSetParams, const void *);
        KT_SET(cuGraphExecChildGraphNodeSetParams, void *);
        KT_SET(cuGraphExecEventRecordNodeSetEvent, void *);
        KT_SET(cuGraphExecEventWaitNodeSetEvent, void *);
        KT_SET(cuGraphExecExternalSemaphoresSignalNodeSetParams, const void *);
        KT_SET(cuGraphExecExternalSemaphoresWaitNodeSetParams, const void *);
        KT_SET(cuGraphExecBatchMemOpNodeSetParams, const void *);
        EXPECT(cuGraphExecMemcpyNodeSetParams, cuGraphExecMemcpyNodeSetParams(P(0x81), P(0x82), P(0x83), P(0x84)),
               0x81, 0x82, 0x83, 0x84);
        EXPECT(cuGraphExecMemsetNodeSetParams, cuGraphExecMemsetNodeSetParams(P(0x85), P(0x86), P(0x87), P(0x88)),
               0x85, 0x86, 0x87, 0x88);
        EXPECT(cuGraphExecDestroy, cuGraphExecDestroy(P(0x89)), 0x89);
        EXPECT(cudaGraphExecDestroy, cudaGraphExecDestroy(P(0x27)), 0x27);
    }
    return kt_bad;
}
