/*
 * kcap_graphexec.c — the clean twin of every executable CUDA graph that carries libkcap's
 * staging nodes, so that a service replaying CUDA graphs pays nothing for kcap while it is not
 * armed.
 *
 * A hooked call captured into a graph leaves three kernel nodes there (a gate and two staging
 * kernels, kcap_gpu.c); disarmed they exit at once, but every replay still launches them: a
 * few µs per hooked call. So when the host instantiates a graph holding such nodes
 * (kcap_interpose_graph.c sees cudaGraphInstantiate*), we clone the graph, take each kcap
 * node out of the clone (its dependencies joined to its dependents), instantiate the clone
 * with the host's flags in the host's current context, and keep exec -> twin in a fixed table.
 * cudaGraphLaunch launches the twin while the policy's predicate says the nodes are not
 * needed, and the host's exec as given once they are, so arming still reaches graphs captured
 * earlier. The twin runs only where the host cannot tell: not while a graph capture is open
 * (a launch into a capture must stay the host's exec), and not for an exec launched on more
 * than one stream (CUDA orders the launches of one exec; those of two execs it would not).
 * Destroying or changing an exec drops its twin first; any failure — a node type a clone may
 * not reproduce, the driver refusing, the table full — leaves no twin, which is what happened
 * before this file existed.
 */
#include "kcap_graphexec.h"
#include "kcap_gpu.h"
#include "kcap_log.h"
#include "kcap_state.h"

#include "kcap_cu.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* exec -> twin: open addressing with linear probing, deletion by backward shift, at most 3/4
 * full so every probe ends. One mutex, held for a probe only: no driver call, no allocation. */
#define KGX_BITS 12
#define KGX_SLOTS (1u << KGX_BITS)
#define KGX_MASK (KGX_SLOTS - 1)
#define KGX_MAX KCAP_GRAPHEXEC_MAX
_Static_assert(KGX_MAX <= KGX_SLOTS / 4 * 3, "the table stays 3/4 full at most");
#define KGX_LIST0 16 /* first guess of a node list's length (doubled until it fits) */

typedef struct {
    void *exec, *twin;
    uintptr_t stream; /* the stream its launches came on (0: none yet) */
    int multi;        /* launched on a second stream: the twin is not used any more */
} kgx_ent;

static kgx_ent g_tab[KGX_SLOTS];
static int g_n;
static atomic_int g_live;     /* g_n, read without the lock by every launch */
static atomic_int g_nodes;    /* kcap_gpu has put staging nodes into some graph */
static int (*g_armed)(void);  /* the policy's predicate (__atomic access) */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int g_log_twin, g_log_none, g_log_full, g_log_drop, g_log_multi;
static _Thread_local char t_stream_token; /* stands for this thread's per-thread stream */

void kcap_graphexec_set_armed(int (*armed)(void)) { __atomic_store_n(&g_armed, armed, __ATOMIC_RELEASE); }
void kcap_graphexec_nodes_added(void) { atomic_store_explicit(&g_nodes, 1, memory_order_relaxed); }

/* ------------------------------------------------------------------------------------ */
/* the table (caller holds g_lock)                                                       */

static size_t kgx_home(const void *exec)
{
    uint64_t x = (uint64_t)(uintptr_t)exec;
    x ^= x >> 29;
    x *= 0x9e3779b97f4a7c15ull;
    return (size_t)(x >> (64 - KGX_BITS));
}

/* exec's slot, or the empty slot that ends its probe */
static size_t kgx_find(const void *exec)
{
    size_t i = kgx_home(exec);
    while (g_tab[i].exec && g_tab[i].exec != exec)
        i = (i + 1) & KGX_MASK;
    return i;
}

/* Remove exec; its twin, or NULL. The entries after it move back into the gap unless that
 * would put one before its home slot. */
static void *kgx_take(const void *exec)
{
    size_t i = kgx_find(exec);
    void *twin = g_tab[i].twin;
    if (!exec || !g_tab[i].exec)
        return NULL;
    memset(&g_tab[i], 0, sizeof g_tab[i]);
    for (size_t j = (i + 1) & KGX_MASK; g_tab[j].exec; j = (j + 1) & KGX_MASK) {
        size_t h = kgx_home(g_tab[j].exec);
        if (((j - h) & KGX_MASK) >= ((j - i) & KGX_MASK)) {
            g_tab[i] = g_tab[j];
            memset(&g_tab[j], 0, sizeof g_tab[j]);
            i = j;
        }
    }
    atomic_store_explicit(&g_live, --g_n, memory_order_relaxed);
    return twin;
}

/* 1 stored (*old: a twin it replaced, to destroy), 0 the table is full */
static int kgx_put(void *exec, void *twin, void **old)
{
    size_t i = kgx_find(exec);
    *old = g_tab[i].exec ? g_tab[i].twin : NULL;
    if (!g_tab[i].exec) {
        if (g_n >= (int)KGX_MAX)
            return 0;
        atomic_store_explicit(&g_live, ++g_n, memory_order_relaxed);
    }
    g_tab[i] = (kgx_ent){exec, twin, 0, 0};
    return 1;
}

/* ------------------------------------------------------------------------------------ */
/* the clean twin                                                                        */

static CUstreamCaptureMode kgx_mode(const kcap_cu *cu, CUstreamCaptureMode m)
{
    cu->cuThreadExchangeStreamCaptureMode(&m); /* our calls never disturb a host's capture */
    return m;
}

static int kgx_driver_ok(const kcap_cu *cu)
{
    return cu->cuGraphGetNodes && cu->cuGraphNodeGetType && cu->cuGraphAddEmptyNode &&
           (cu->cuGraphKernelNodeGetParams_v2 || cu->cuGraphKernelNodeGetParams_v1) &&
           (cu->cuGraphNodeGetDependencies_v2 || cu->cuGraphNodeGetDependencies_v1) &&
           (cu->cuGraphNodeGetDependentNodes_v2 || cu->cuGraphNodeGetDependentNodes_v1) &&
           (cu->cuGraphAddDependencies_v2 || cu->cuGraphAddDependencies_v1) &&
           cu->cuGraphDestroyNode && cu->cuGraphClone && cu->cuGraphDestroy &&
           cu->cuGraphInstantiateWithFlags && cu->cuGraphExecDestroy;
}

/* One query of a node list: the graph's nodes (node NULL), a node's dependencies (dir 0) or
 * dependents (dir 1). The _v2 calls get room for the edge data, which they require when an
 * edge is not a plain one (programmatic launch). */
static CUresult kgx_query(const kcap_cu *cu, CUgraph g, CUgraphNode node, int dir, CUgraphNode *v,
                          uint64_t *edges, size_t *n)
{
    if (!node)
        return cu->cuGraphGetNodes(g, v, n);
    if (dir == 0)
        return cu->cuGraphNodeGetDependencies_v2 ? cu->cuGraphNodeGetDependencies_v2(node, v, edges, n)
                                                 : cu->cuGraphNodeGetDependencies_v1(node, v, n);
    return cu->cuGraphNodeGetDependentNodes_v2 ? cu->cuGraphNodeGetDependentNodes_v2(node, v, edges, n)
                                               : cu->cuGraphNodeGetDependentNodes_v1(node, v, n);
}

/* A node list in a malloc'ed array (*out, *n entries; NULL when empty): asked with room for
 * KGX_LIST0, doubled while the list fills the room. 0, or -1 on a driver error. */
static int kgx_list(const kcap_cu *cu, CUgraph g, CUgraphNode node, int dir, CUgraphNode **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    for (size_t cap = KGX_LIST0; cap && cap < ((size_t)1 << 40); cap *= 2) {
        CUgraphNode *v = calloc(cap, sizeof *v);
        uint64_t *edges = calloc(cap, sizeof *edges); /* CUgraphEdgeData: 8 bytes an edge */
        size_t got = cap;
        CUresult e = v && edges ? kgx_query(cu, g, node, dir, v, edges, &got) : CUDA_ERROR_OUT_OF_MEMORY;
        free(edges);
        if (e != CUDA_SUCCESS || got > cap) {
            free(v);
            return -1;
        }
        if (got < cap) {
            if (got)
                *out = v;
            else
                free(v);
            *n = got;
            return 0;
        }
        free(v);
    }
    return -1;
}

/* What a kernel node is to libkcap (kcap_gpu_own_kind: 0 not ours, 1 ours, 2 shadow poison,
 * 3 shadow compare). Every version of the node parameters starts with the CUfunction. */
static int kgx_kind(const kcap_cu *cu, CUgraphNode node)
{
    union {
        CUfunction func;
        unsigned long long raw[32];
    } p;
    memset(&p, 0, sizeof p);
    CUresult e = cu->cuGraphKernelNodeGetParams_v2 ? cu->cuGraphKernelNodeGetParams_v2(node, &p)
                                                   : cu->cuGraphKernelNodeGetParams_v1(node, &p);
    return e == CUDA_SUCCESS ? kcap_gpu_own_kind((const void *)p.func) : 0;
}

/* Node types whose clone is the same operation on the same objects. Not: memory allocation
 * and free nodes (a second instantiation of them is a second allocation), conditional nodes
 * (their handles belong to the graph), child graphs (they may hold either), unknown types. */
static int kgx_clonable(CUgraphNodeType t)
{
    switch (t) {
    case CU_GRAPH_NODE_TYPE_KERNEL: case CU_GRAPH_NODE_TYPE_MEMCPY: case CU_GRAPH_NODE_TYPE_MEMSET:
    case CU_GRAPH_NODE_TYPE_HOST: case CU_GRAPH_NODE_TYPE_EMPTY: case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD: case CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL:
    case CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT: case CU_GRAPH_NODE_TYPE_BATCH_MEM_OP:
        return 1;
    default:
        return 0;
    }
}

static int kgx_has(const CUgraphNode *v, size_t n, CUgraphNode x)
{
    for (size_t i = 0; i < n; i++)
        if (v[i] == x)
            return 1;
    return 0;
}

/* Take node k out of graph g, keeping every ordering it gave: each dependency before each
 * dependent, by direct edges (less those already there) when one side has one node, through
 * an empty node when both have several (nin + nout edges, not nin x nout). Plain edges stand
 * in for the ones that touched k: never less ordering than before. 0, or -1 (g is then
 * thrown away). */
static int kgx_cut(const kcap_cu *cu, CUgraph g, CUgraphNode k)
{
    CUgraphNode *in = NULL, *out = NULL, *near = NULL, *from = NULL, *to = NULL, join = NULL;
    size_t nin = 0, nout = 0, nnear = 0, m = 0;
    int rc = -1;
    if (kgx_list(cu, NULL, k, 0, &in, &nin) || kgx_list(cu, NULL, k, 1, &out, &nout))
        goto done;
    if (nin > 1 && nout > 1 && cu->cuGraphAddEmptyNode(&join, g, in, nin) != CUDA_SUCCESS)
        goto done;
    /* the edges of the side with one node: dependents of the one dependency, or
       dependencies of the one dependent */
    if (!join && nin && nout && kgx_list(cu, NULL, nin == 1 ? in[0] : out[0], nin == 1, &near, &nnear))
        goto done;
    size_t srcs = join ? 1 : nin;
    from = calloc(srcs * nout + 1, sizeof *from);
    to = calloc(srcs * nout + 1, sizeof *to);
    if (!from || !to)
        goto done;
    for (size_t i = 0; i < srcs; i++)
        for (size_t j = 0; j < nout; j++)
            if (join || !kgx_has(near, nnear, nin == 1 ? out[j] : in[i])) {
                from[m] = join ? join : in[i];
                to[m++] = out[j];
            }
    if (m && (cu->cuGraphAddDependencies_v2 ? cu->cuGraphAddDependencies_v2(g, from, to, NULL, m)
                                            : cu->cuGraphAddDependencies_v1(g, from, to, m)) != CUDA_SUCCESS)
        goto done;
    rc = cu->cuGraphDestroyNode(k) == CUDA_SUCCESS ? 0 : -1;
done:
    free(in);
    free(out);
    free(near);
    free(from);
    free(to);
    return rc;
}

static int kgx_node_kind(const kcap_cu *cu, CUgraphNode x)
{
    CUgraphNodeType t;
    if (cu->cuGraphNodeGetType(x, &t) != CUDA_SUCCESS || !kgx_clonable(t))
        return -1;
    return t == CU_GRAPH_NODE_TYPE_KERNEL ? kgx_kind(cu, x) : 0;
}

/* Add to mine[*m] the nodes after shadow poison node p up to (not including) its compare:
 * the candidate's (kcap_gpu_shadow_graph.c). -1 when a path from p ends, meets another kcap
 * node or a node another poison's walk took, before a compare: not the shape shadow mode
 * leaves (a host node could be among them), so no twin. */
static int kgx_between(const kcap_cu *cu, CUgraphNode p, CUgraphNode *mine, size_t *m, size_t cap)
{
    const size_t m0 = *m; /* mine[m0..] are this walk's */
    CUgraphNode *stack = calloc(cap + 1, sizeof *stack);
    size_t top = 0;
    int rc = stack ? 0 : -1;
    if (stack)
        stack[top++] = p;
    while (!rc && top) {
        CUgraphNode x = stack[--top], *next = NULL;
        size_t nn = 0;
        if (kgx_list(cu, NULL, x, 1, &next, &nn) || !nn) {
            rc = -1; /* unreadable, or a sink before any compare */
            break;
        }
        for (size_t j = 0; j < nn && !rc; j++) {
            int k = kgx_node_kind(cu, next[j]);
            if (k == 3)
                continue; /* the compare closes the path */
            if (k != 0 || kgx_has(mine, m0, next[j]))
                rc = -1; /* another kcap node inside, or a node taken before this walk */
            else if (kgx_has(mine + m0, *m - m0, next[j]))
                continue; /* this walk's already: two paths of the candidate join */
            else if (*m >= cap || top >= cap)
                rc = -1; /* more nodes than the graph has */
            else
                mine[(*m)++] = stack[top++] = next[j];
        }
        free(next);
    }
    free(stack);
    return rc;
}

/* kcap's nodes in g — its kernels and, in shadow mode, the candidate's nodes between each
 * poison and compare pair — cut out of g when `cut`. Their number, or -1 when g holds a node
 * type kgx_clonable refuses, cannot be read, or has shadow nodes of an unexpected shape. */
static int kgx_count(const kcap_cu *cu, CUgraph g, int cut)
{
    CUgraphNode *v, *mine;
    size_t n, m = 0;
    if (kgx_list(cu, g, NULL, 0, &v, &n))
        return -1;
    int rc = (mine = calloc(n + 1, sizeof *mine)) ? 0 : -1;
    for (size_t i = 0; i < n && !rc; i++) {
        int k = kgx_node_kind(cu, v[i]);
        if (k < 0) {
            rc = -1;
        } else if (k > 0 && !kgx_has(mine, m, v[i])) {
            mine[m++] = v[i];
            if (k == 2)
                rc = kgx_between(cu, v[i], mine, &m, n);
        }
    }
    for (size_t i = 0; i < m && !rc && cut; i++)
        rc = kgx_cut(cu, g, mine[i]);
    free(v);
    free(mine);
    return rc ? -1 : (int)m;
}

/* The twin of graph: NULL with *why NULL when it holds no kcap node, NULL with a reason when
 * it cannot have one. *nk: the kcap nodes taken out. */
static CUgraphExec kgx_twin(const kcap_cu *cu, CUgraph graph, unsigned long long flags, int *nk,
                            const char **why)
{
    *nk = kgx_count(cu, graph, 0);
    *why = *nk < 0 ? "it holds a node a copy may not reproduce (memory allocation, conditional, "
                     "child graph), shadow nodes of an unexpected shape, or could not be read" : NULL;
    if (*nk <= 0)
        return NULL;
    CUgraph clone = NULL;
    CUgraphExec twin = NULL;
    *why = "cloning it failed";
    if (cu->cuGraphClone(&clone, graph) != CUDA_SUCCESS || !clone)
        return NULL;
    *why = "taking the kcap nodes out of the copy failed";
    if (kgx_count(cu, clone, 1) == *nk && kgx_count(cu, clone, 0) == 0) {
        *why = "instantiating the copy failed";
        if (cu->cuGraphInstantiateWithFlags(&twin, clone, flags) != CUDA_SUCCESS)
            twin = NULL;
    }
    cu->cuGraphDestroy(clone);
    return twin;
}

void kcap_graphexec_instantiated(void *exec, void *graph, int have_flags, unsigned long long flags)
{
    kcap_graphexec_forget(exec, NULL); /* a handle value reused after a destroy we did not see */
    if (!exec || !graph || !atomic_load_explicit(&g_nodes, memory_order_relaxed) ||
        !__atomic_load_n(&g_armed, __ATOMIC_ACQUIRE)) /* KCAP_GRAPH_TWINS=0: none registered */
        return;
    const kcap_cu *cu = kcap_cu_load(NULL);
    CUcontext ctx = NULL;
    if (!cu || !kgx_driver_ok(cu) || cu->cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || !ctx) {
        kcap_log_once(&g_log_none, KCAP_LOG_INFO, "no clean twin for CUDA graphs (%s): their "
                      "replays run kcap's disarmed staging nodes", !cu ? "no CUDA driver" :
                      !kgx_driver_ok(cu) ? "the driver lacks graph calls" : "no current context");
        return;
    }
    CUstreamCaptureMode m = kgx_mode(cu, CU_STREAM_CAPTURE_MODE_RELAXED);
    cuuint64_t f = 0;
    if (cu->cuGraphExecGetFlags && cu->cuGraphExecGetFlags((CUgraphExec)exec, &f) == CUDA_SUCCESS) {
        flags = f;
        have_flags = 1;
    }
    const char *why = "its instantiation flags are unknown";
    int nk = 0;
    CUgraphExec twin = NULL;
    void *old = NULL;
    if (have_flags && (flags & CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH))
        why = "it is instantiated for device launch";
    else if (have_flags) /* uploading at instantiation is for cudaGraphInstantiateWithParams */
        twin = kgx_twin(cu, (CUgraph)graph, flags & ~(unsigned long long)CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD,
                        &nk, &why);
    if (twin) {
        pthread_mutex_lock(&g_lock);
        int stored = kgx_put(exec, twin, &old);
        pthread_mutex_unlock(&g_lock);
        if (!stored) {
            kcap_log_once(&g_log_full, KCAP_LOG_INFO, "more than %d executable graphs with kcap "
                          "nodes: further ones get no clean twin", KGX_MAX);
            old = twin;
            twin = NULL;
            why = NULL;
        }
        if (old)
            cu->cuGraphExecDestroy((CUgraphExec)old);
    }
    kgx_mode(cu, m);
    if (twin) {
        atomic_fetch_add(&kcap_g_stats.graph_twins, 1);
        kcap_log_once(&g_log_twin, KCAP_LOG_INFO, "a CUDA graph with %d kcap nodes was instantiated: "
                      "a clean twin without them runs its replays while capture is not armed", nk);
    } else if (why) {
        kcap_log_once(&g_log_none, KCAP_LOG_INFO, "no clean twin for a CUDA graph with kcap nodes "
                      "(%s): its replays run the disarmed staging nodes", why);
    }
}

/* ------------------------------------------------------------------------------------ */
/* launch, change, destroy                                                               */

/* Which stream a launch goes to: 0 is the legacy stream; the per-thread default stream is
 * one stream per thread under one handle value. */
static uintptr_t kgx_stream_key(void *stream, int per_thread)
{
    uintptr_t s = (uintptr_t)stream;
    if (s == (uintptr_t)CU_STREAM_PER_THREAD || (!s && per_thread))
        return (uintptr_t)&t_stream_token;
    return s ? s : (uintptr_t)CU_STREAM_LEGACY;
}

void *kcap_graphexec_pick(void *exec, void *stream, int per_thread)
{
    if (__builtin_expect(!atomic_load_explicit(&g_live, memory_order_relaxed), 1))
        return exec;
    int (*armed)(void) = __atomic_load_n(&g_armed, __ATOMIC_ACQUIRE);
    int clean = armed && !armed() && !kcap_graph_capture_open();
    uintptr_t key = kgx_stream_key(stream, per_thread);
    void *twin = NULL;
    int second = 0;
    pthread_mutex_lock(&g_lock);
    kgx_ent *e = &g_tab[kgx_find(exec)];
    if (e->exec) {
        if (!e->stream)
            e->stream = key;
        else if (e->stream != key && !e->multi)
            e->multi = second = 1;
        twin = clean && !e->multi ? e->twin : NULL;
    }
    pthread_mutex_unlock(&g_lock);
    if (second)
        kcap_log_once(&g_log_multi, KCAP_LOG_INFO, "an executable CUDA graph was launched on a "
                      "second stream: its clean twin is no longer used (CUDA orders the launches "
                      "of one exec, not those of two)");
    if (!twin)
        return exec;
    atomic_fetch_add_explicit(&kcap_g_stats.graph_clean_launches, 1, memory_order_relaxed);
    return twin;
}

void kcap_graphexec_forget(void *exec, const char *what)
{
    if (!exec || !atomic_load_explicit(&g_live, memory_order_relaxed))
        return;
    pthread_mutex_lock(&g_lock);
    void *twin = kgx_take(exec);
    pthread_mutex_unlock(&g_lock);
    if (!twin)
        return;
    const kcap_cu *cu = kcap_cu_load(NULL); /* loaded: it made the twin */
    if (cu) {
        CUstreamCaptureMode m = kgx_mode(cu, CU_STREAM_CAPTURE_MODE_RELAXED);
        cu->cuGraphExecDestroy((CUgraphExec)twin); /* a launch in flight completes first */
        kgx_mode(cu, m);
    }
    if (what)
        kcap_log_once(&g_log_drop, KCAP_LOG_INFO, "%s changed an executable CUDA graph with a "
                      "clean twin: the twin is dropped, its replays run the staging nodes", what);
}

void kcap_graphexec_atfork_child(void)
{
    /* CUDA does not survive fork: the parent's twins are not the child's to destroy */
    memset(g_tab, 0, sizeof g_tab);
    g_n = 0;
    atomic_store(&g_live, 0);
    pthread_mutex_init(&g_lock, NULL);
}
