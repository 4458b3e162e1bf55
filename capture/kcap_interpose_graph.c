/*
 * kcap_interpose_graph.c — the CUDA runtime's graph entry points libkcap interposes (top
 * layer, beside kcap_interpose.c): stream capture, so that a dormant process still puts its
 * staging nodes into the graphs it captures, and the executable-graph calls, so that a replay
 * while capture is not armed launches the clean twin without those nodes (kcap_graphexec.c).
 *
 * torch and SGLang reach all of them through libcudart's dynamic symbols: torch's CUDAGraph
 * (aten/src/ATen/cuda/CUDAGraph.cpp) calls cudaStreamBeginCapture / EndCapture, then
 * cudaGraphInstantiateWithFlags(AutoFreeOnLaunch | UseNodePriority), cudaGraphDestroy of the
 * graph, cudaGraphLaunch at each replay() and cudaGraphExecDestroy in reset(). Every wrapper
 * forwards the caller's arguments to the next definition once and returns its status
 * unchanged; handles are opaque pointers (libkcap links no CUDA library) in the runtime's ABI.
 * Not seen: a host launching graphs through the driver API (cuGraphLaunch) or a static
 * cudart — its replays keep running the disarmed staging nodes.
 */
#include "kcap_interpose.h"
#include "kcap_graphexec.h"
#include "kcap_state.h"

#include <dlfcn.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>

#define KCAP_RT_NONE 1 /* cudaErrorInvalidValue: no runtime loaded (cannot happen in practice) */
#define KCAP_EXPORT __attribute__((visibility("default")))

/* The runtime behind us: RTLD_NEXT when the host's libcudart is in the global scope (cached);
 * otherwise (a library that links libcudart was dlopen'ed RTLD_LOCAL, so its calls bind to our
 * global definition but RTLD_NEXT cannot see its runtime) the first loaded object whose own
 * scope defines the symbol. Without `pin` that one is looked up per call, never cached (it
 * may be unloaded; graph captures are rare); with `pin` (the executable-graph calls, one per
 * replay) its handle is kept open, so it stays loaded under the cached pointer. NULL when no
 * runtime is loaded at all. */
typedef struct kcap_objnames {
    char **v;
    int n, cap;
} kcap_objnames;

static int kcap_collect_obj(struct dl_phdr_info *info, size_t size, void *ud)
{
    (void)size;
    kcap_objnames *o = ud;
    if (!info->dlpi_name || !info->dlpi_name[0] || o->n >= o->cap)
        return 0;
    char *d = strdup(info->dlpi_name);
    if (d)
        o->v[o->n++] = d;
    return 0;
}

static void *kcap_cuda_next(const char *name, void **cache, void *self, int pin)
{
    void *f = __atomic_load_n(cache, __ATOMIC_ACQUIRE);
    if (f)
        return f;
    kcap_dlsym_fn real = (kcap_dlsym_fn)kcap_dlsym_init();
    if (!real)
        return NULL;
    f = real(RTLD_NEXT, name);
    if (f) {
        __atomic_store_n(cache, f, __ATOMIC_RELEASE);
        return f;
    }
    /* dlopen only after dl_iterate_phdr has returned (it holds the loader's list lock) */
    kcap_objnames o = {calloc(1024, sizeof(char *)), 0, 1024};
    if (!o.v)
        return NULL;
    dl_iterate_phdr(kcap_collect_obj, &o);
    for (int i = 0; i < o.n && !f; i++) {
        void *h = dlopen(o.v[i], RTLD_NOLOAD | RTLD_LAZY);
        if (!h)
            continue;
        void *p = real(h, name);
        if (p && p != self)
            f = p;
        if (f && pin)
            __atomic_store_n(cache, f, __ATOMIC_RELEASE); /* h stays open for good */
        else
            dlclose(h);
    }
    for (int i = 0; i < o.n; i++)
        free(o.v[i]);
    free(o.v);
    return f;
}

/* The next definition of sym, cached in g_next_<sym> (declared with the wrapper). */
#define KCAP_NEXT(sym, pin) kcap_cuda_next(#sym, &g_next_##sym, (void *)sym, pin)

/* ------------------------------------------------------------------------------------ */
/* stream capture                                                                        */
/*
 * A dormant process pays nothing per call, so it cannot notice that a call is being
 * recorded into a CUDA graph — and a graph captured while dormant must still carry our
 * staging nodes, or a later `kcap arm` could never capture its replays. So we interpose
 * the runtime's cudaStreamBeginCapture / cudaStreamEndCapture and take the slow path only
 * while a capture is open.
 */
static void *g_next_cudaStreamBeginCapture, *g_next_cudaStreamEndCapture;

KCAP_EXPORT int cudaStreamBeginCapture(void *stream, int mode)
{
    int (*f)(void *, int) = (int (*)(void *, int))KCAP_NEXT(cudaStreamBeginCapture, 0);
    if (!f)
        return KCAP_RT_NONE;
    int rc = f(stream, mode);
    if (rc == 0)
        kcap_graph_capture_begin();
    return rc;
}

KCAP_EXPORT int cudaStreamEndCapture(void *stream, void **graph)
{
    int (*f)(void *, void **) = (int (*)(void *, void **))KCAP_NEXT(cudaStreamEndCapture, 0);
    if (!f)
        return KCAP_RT_NONE;
    int rc = f(stream, graph);
    kcap_graph_capture_end();
    return rc;
}

/* ------------------------------------------------------------------------------------ */
/* executable graphs                                                                     */

/* Inside one of the instantiate wrappers: a runtime whose instantiate calls another through
 * its dynamic symbol makes one twin, not two. */
static _Thread_local int t_instantiating;

static void *g_next_cudaGraphInstantiate, *g_next_cudaGraphInstantiateWithFlags,
    *g_next_cudaGraphInstantiateWithParams;

/* cudaGraphInstantiate is (exec, graph, flags) since CUDA 12 and (exec, graph, errNode, log,
 * logSize) before: all five arguments are forwarded (a 12 runtime ignores the last two), and
 * kcap_graphexec asks the new exec for its flags. */
KCAP_EXPORT int cudaGraphInstantiate(void **exec, void *graph, void *a3, void *a4, size_t a5)
{
    int (*f)(void **, void *, void *, void *, size_t) =
        (int (*)(void **, void *, void *, void *, size_t))KCAP_NEXT(cudaGraphInstantiate, 1);
    if (!f)
        return KCAP_RT_NONE;
    t_instantiating++;
    int rc = f(exec, graph, a3, a4, a5);
    if (--t_instantiating == 0 && rc == 0 && exec)
        kcap_graphexec_instantiated(*exec, graph, 0, 0);
    return rc;
}

KCAP_EXPORT int cudaGraphInstantiateWithFlags(void **exec, void *graph, unsigned long long flags)
{
    int (*f)(void **, void *, unsigned long long) =
        (int (*)(void **, void *, unsigned long long))KCAP_NEXT(cudaGraphInstantiateWithFlags, 1);
    if (!f)
        return KCAP_RT_NONE;
    t_instantiating++;
    int rc = f(exec, graph, flags);
    if (--t_instantiating == 0 && rc == 0 && exec)
        kcap_graphexec_instantiated(*exec, graph, 1, flags);
    return rc;
}

/* params: cudaGraphInstantiateParams, whose first member is the flags (CUDA 12.0+) */
KCAP_EXPORT int cudaGraphInstantiateWithParams(void **exec, void *graph, void *params)
{
    int (*f)(void **, void *, void *) = (int (*)(void **, void *, void *))KCAP_NEXT(cudaGraphInstantiateWithParams, 1);
    if (!f)
        return KCAP_RT_NONE;
    t_instantiating++;
    int rc = f(exec, graph, params);
    if (--t_instantiating == 0 && rc == 0 && exec)
        kcap_graphexec_instantiated(*exec, graph, params != NULL,
                                    params ? *(const unsigned long long *)params : 0);
    return rc;
}

/* A replay: the clean twin while capture is not armed (kcap_graphexec_pick), else exec. The
 * _ptsz form is what code built for the per-thread default stream calls. */
static void *g_next_cudaGraphLaunch, *g_next_cudaGraphLaunch_ptsz;

KCAP_EXPORT int cudaGraphLaunch(void *exec, void *stream)
{
    int (*f)(void *, void *) = (int (*)(void *, void *))KCAP_NEXT(cudaGraphLaunch, 1);
    if (!f)
        return KCAP_RT_NONE;
    return f(kcap_graphexec_pick(exec, stream, 0), stream);
}

KCAP_EXPORT int cudaGraphLaunch_ptsz(void *exec, void *stream)
{
    int (*f)(void *, void *) = (int (*)(void *, void *))KCAP_NEXT(cudaGraphLaunch_ptsz, 1);
    if (!f)
        return KCAP_RT_NONE;
    return f(kcap_graphexec_pick(exec, stream, 1), stream);
}

/* Calls that destroy or change an exec: its twin goes first (what: the call; NULL for the
 * destroy), then the call is forwarded. A changed exec keeps running its staging nodes. */
#define KCAP_EXEC_CALL(sym, what, params, args)                                             \
    static void *g_next_##sym;                                                              \
    KCAP_EXPORT int sym params;                                                             \
    int sym params                                                                          \
    {                                                                                       \
        int (*f) params = (int (*) params)KCAP_NEXT(sym, 1);                                \
        if (!f)                                                                             \
            return KCAP_RT_NONE;                                                            \
        kcap_graphexec_forget(exec, what);                                                  \
        return f args;                                                                      \
    }
#define KCAP_EXEC_SET(sym, p3) KCAP_EXEC_CALL(sym, #sym, (void *exec, void *node, p3), (exec, node, x))

KCAP_EXEC_CALL(cudaGraphExecDestroy, NULL, (void *exec), (exec))
/* (exec, graph, resultInfo) since CUDA 12, (exec, graph, errNode, result) before */
KCAP_EXEC_CALL(cudaGraphExecUpdate, "cudaGraphExecUpdate", (void *exec, void *graph, void *a3, void *a4),
               (exec, graph, a3, a4))
KCAP_EXEC_SET(cudaGraphExecKernelNodeSetParams, const void *x)
KCAP_EXEC_SET(cudaGraphExecNodeSetParams, void *x)
KCAP_EXEC_SET(cudaGraphNodeSetEnabled, unsigned int x)
KCAP_EXEC_SET(cudaGraphExecMemcpyNodeSetParams, const void *x)
KCAP_EXEC_SET(cudaGraphExecMemsetNodeSetParams, const void *x)
KCAP_EXEC_SET(cudaGraphExecHostNodeSetParams, const void *x)
KCAP_EXEC_SET(cudaGraphExecChildGraphNodeSetParams, void *x)
KCAP_EXEC_SET(cudaGraphExecEventRecordNodeSetEvent, void *x)
KCAP_EXEC_SET(cudaGraphExecEventWaitNodeSetEvent, void *x)
KCAP_EXEC_SET(cudaGraphExecExternalSemaphoresSignalNodeSetParams, const void *x)
KCAP_EXEC_SET(cudaGraphExecExternalSemaphoresWaitNodeSetParams, const void *x)
KCAP_EXEC_CALL(cudaGraphExecMemcpyNodeSetParams1D, "cudaGraphExecMemcpyNodeSetParams1D",
               (void *exec, void *node, void *dst, const void *src, size_t n, int kind),
               (exec, node, dst, src, n, kind))
KCAP_EXEC_CALL(cudaGraphExecMemcpyNodeSetParamsToSymbol, "cudaGraphExecMemcpyNodeSetParamsToSymbol",
               (void *exec, void *node, const void *symbol, const void *src, size_t n, size_t off, int kind),
               (exec, node, symbol, src, n, off, kind))
KCAP_EXEC_CALL(cudaGraphExecMemcpyNodeSetParamsFromSymbol, "cudaGraphExecMemcpyNodeSetParamsFromSymbol",
               (void *exec, void *node, void *dst, const void *symbol, size_t n, size_t off, int kind),
               (exec, node, dst, symbol, n, off, kind))

/* The same calls through the driver API, for a host that links libcuda or looks its symbols
 * up by name (the runtime itself reaches the driver through cuGetProcAddress, so these see
 * only such hosts, and the runtime's own calls are seen above). The _v2 symbols are what the
 * CUDA 12+ headers name cuGraphExecUpdate and cuGraphExecKernelNodeSetParams; the old ones
 * keep their old arguments, forwarded as they came. Not seen: a host that gets these entry
 * points from cuGetProcAddress / cudaGetDriverEntryPoint and changes an exec with them
 * (capture/README.md says to run such a host with KCAP_GRAPH_TWINS=0). */
KCAP_EXEC_CALL(cuGraphExecDestroy, NULL, (void *exec), (exec))
KCAP_EXEC_CALL(cuGraphExecUpdate, "cuGraphExecUpdate", (void *exec, void *graph, void *a3, void *a4),
               (exec, graph, a3, a4))
KCAP_EXEC_CALL(cuGraphExecUpdate_v2, "cuGraphExecUpdate_v2", (void *exec, void *graph, void *a3),
               (exec, graph, a3))
KCAP_EXEC_SET(cuGraphExecKernelNodeSetParams, const void *x)
KCAP_EXEC_SET(cuGraphExecKernelNodeSetParams_v2, const void *x)
KCAP_EXEC_SET(cuGraphExecNodeSetParams, void *x)
KCAP_EXEC_SET(cuGraphNodeSetEnabled, unsigned int x)
KCAP_EXEC_SET(cuGraphExecHostNodeSetParams, const void *x)
KCAP_EXEC_SET(cuGraphExecChildGraphNodeSetParams, void *x)
KCAP_EXEC_SET(cuGraphExecEventRecordNodeSetEvent, void *x)
KCAP_EXEC_SET(cuGraphExecEventWaitNodeSetEvent, void *x)
KCAP_EXEC_SET(cuGraphExecExternalSemaphoresSignalNodeSetParams, const void *x)
KCAP_EXEC_SET(cuGraphExecExternalSemaphoresWaitNodeSetParams, const void *x)
KCAP_EXEC_SET(cuGraphExecBatchMemOpNodeSetParams, const void *x)
KCAP_EXEC_CALL(cuGraphExecMemcpyNodeSetParams, "cuGraphExecMemcpyNodeSetParams",
               (void *exec, void *node, const void *x, void *ctx), (exec, node, x, ctx))
KCAP_EXEC_CALL(cuGraphExecMemsetNodeSetParams, "cuGraphExecMemsetNodeSetParams",
               (void *exec, void *node, const void *x, void *ctx), (exec, node, x, ctx))
