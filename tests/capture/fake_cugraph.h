/*
 * fake_cugraph.h — a fake of the CUDA driver's graph calls for test_capture_graphexec.c (its
 * only includer): a graph is an in-memory DAG in fixed pools, an exec a record of what was
 * instantiated (g_snap: what the last one held). The calls fail the way the driver's do
 * (duplicate edges, a plain query of an edge with data), each can be made to fail on demand,
 * and every call made outside the relaxed capture mode is counted. It stands in for
 * kcap_cu_load and kcap_gpu_own_function (own_fns are "kcap's" kernels).
 */
#ifndef KCAP_FAKE_CUGRAPH_H
#define KCAP_FAKE_CUGRAPH_H

#include "kcap_cu.h"
#include "kcap_gpu.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FN_MAX (1 << 16)
#define FE_MAX (1 << 17)
#define FG_MAX (1 << 15)
#define FX_MAX (1 << 15)
#define NLAB 64 /* host node labels 1..63 */
#define BAD ((CUresult)CUDA_ERROR_INVALID_VALUE)

typedef struct { int alive, graph, label; CUgraphNodeType type; CUfunction func; } fnode;
typedef struct { int alive; int from, to; uint64_t data; } fedge;
typedef struct { int alive, origin; } fgraph;
typedef struct { int alive, origin; unsigned long long flags; } fexec;
typedef struct { int kcap, labels, empty, stray; unsigned char has[NLAB], reach[NLAB][NLAB]; } snap;

static fnode N[FN_MAX];
static fedge E[FE_MAX];
static fgraph G[FG_MAX];
static fexec X[FX_MAX];
static int n_hw, e_hw, g_hw, x_hw, n_free[FN_MAX], n_nfree, e_free[FE_MAX], e_nfree;
static pthread_mutex_t fk = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static _Thread_local CUstreamCaptureMode t_mode; /* 0: global, a host thread's default */
static int n_clone, n_inst, n_xdestroy, n_unrelaxed, n_bad, n_loads;
static int fail_clone, fail_inst, fail_destroy_node, fail_add_deps, fail_list_after = -1;
static snap g_snap; /* what the last twin instantiation held */
static CUcontext g_ctx = (CUcontext)0x1000;
static kcap_cu g_cu;
static int g_cu_on = 1;
static char own_fns[5], host_fns[8]; /* own_fns[3]: shadow poison, [4]: shadow compare */

static void fk_enter(void)
{
    pthread_mutex_lock(&fk);
    if (t_mode != CU_STREAM_CAPTURE_MODE_RELAXED)
        n_unrelaxed++;
}
#define FK_RET(x) do { CUresult r_ = (x); pthread_mutex_unlock(&fk); return r_; } while (0)

static int ni(CUgraphNode h) { long i = (fnode *)h - N; return h && i >= 0 && i < n_hw && N[i].alive ? (int)i : -1; }
static int gi(CUgraph h) { long i = (fgraph *)h - G; return h && i >= 0 && i < g_hw && G[i].alive ? (int)i : -1; }
static int xi(CUgraphExec h)
{
    long i = (fexec *)h - X; /* x_hw is read by the picker threads too */
    return h && i >= 0 && i < __atomic_load_n(&x_hw, __ATOMIC_ACQUIRE) ? (int)i : -1;
}

/* a pool out of room ends the test (never a write past it) */
static int fk_slot(int *nfree, int *freel, int *hw, int max)
{
    if (!*nfree && *hw >= max) {
        printf("FAIL test_capture_graphexec: a fake driver pool (%d) is full\n", max);
        exit(1);
    }
    return *nfree ? freel[--*nfree] : (*hw)++;
}

static int node_new(int g, CUgraphNodeType t, CUfunction f, int label)
{
    int i = fk_slot(&n_nfree, n_free, &n_hw, FN_MAX);
    N[i] = (fnode){1, g, label, t, f};
    return i;
}
static int edge_find(int a, int b)
{
    for (int i = 0; i < e_hw; i++)
        if (E[i].alive && E[i].from == a && E[i].to == b)
            return i;
    return -1;
}
static void edge_new(int a, int b, uint64_t data)
{
    int i = fk_slot(&e_nfree, e_free, &e_hw, FE_MAX);
    E[i] = (fedge){1, a, b, data};
}
static void node_kill(int n)
{
    for (int i = 0; i < e_hw; i++)
        if (E[i].alive && (E[i].from == n || E[i].to == n))
            E[i].alive = 0, e_free[e_nfree++] = i;
    N[n].alive = 0;
    n_free[n_nfree++] = n;
}
static int graph_new(int origin)
{
    int none = 0, i = fk_slot(&none, NULL, &g_hw, FG_MAX);
    G[i] = (fgraph){1, origin < 0 ? i : origin};
    return i;
}
static void graph_kill(int g)
{
    for (int i = 0; i < n_hw; i++)
        if (N[i].alive && N[i].graph == g)
            node_kill(i);
    G[g].alive = 0;
}
static int graphs_alive(void)
{
    int c = 0;
    for (int i = 0; i < g_hw; i++)
        c += G[i].alive;
    return c;
}
static int execs_alive(void)
{
    int c = 0;
    for (int i = 0; i < x_hw; i++)
        c += X[i].alive;
    return c;
}

/* what graph g orders: labels present, kcap kernels, label -> label reachability */
static void snap_graph(int g, snap *s)
{
    memset(s, 0, sizeof *s);
    static int stack[FN_MAX], first[FN_MAX], next[FE_MAX];
    static unsigned char seen[FN_MAX];
    for (int i = 0; i < n_hw; i++)
        first[i] = -1;
    for (int e = 0; e < e_hw; e++) /* g's edges, by source */
        if (E[e].alive && N[E[e].from].graph == g) {
            next[e] = first[E[e].from];
            first[E[e].from] = e;
        }
    for (int i = 0; i < n_hw; i++) {
        if (!N[i].alive || N[i].graph != g)
            continue;
        s->kcap += N[i].type == CU_GRAPH_NODE_TYPE_KERNEL && kcap_gpu_own_function(N[i].func);
        s->empty += N[i].type == CU_GRAPH_NODE_TYPE_EMPTY && !N[i].label;
        s->stray += N[i].type != CU_GRAPH_NODE_TYPE_EMPTY && !N[i].label; /* kcap's or a candidate's */
        if (!N[i].label)
            continue;
        s->has[N[i].label] = 1;
        s->labels++;
        memset(seen, 0, (size_t)n_hw);
        int sp = 0;
        stack[sp++] = i;
        while (sp) {
            int a = stack[--sp];
            for (int e = first[a]; e >= 0; e = next[e])
                if (!seen[E[e].to]) {
                    seen[E[e].to] = 1;
                    stack[sp++] = E[e].to;
                    if (N[E[e].to].label)
                        s->reach[N[i].label][N[E[e].to].label] = 1;
                }
        }
    }
}

static CUresult CUDAAPI f_nodes(CUgraph g, CUgraphNode *v, size_t *n)
{
    fk_enter();
    int k = gi(g);
    if (k < 0 || !fail_list_after--)
        FK_RET(BAD);
    size_t c = 0, cap = *n;
    for (int i = 0; i < n_hw; i++)
        if (N[i].alive && N[i].graph == k) {
            if (v && c < cap)
                v[c] = (CUgraphNode)&N[i];
            c++;
        }
    if (v)
        for (size_t j = c; j < cap; j++)
            v[j] = NULL;
    *n = v && c > cap ? cap : c;
    FK_RET(CUDA_SUCCESS);
}
static CUresult CUDAAPI f_type(CUgraphNode h, CUgraphNodeType *t)
{
    fk_enter();
    int i = ni(h);
    if (i < 0)
        FK_RET(BAD);
    *t = N[i].type;
    FK_RET(CUDA_SUCCESS);
}
static CUresult CUDAAPI f_kparams(CUgraphNode h, void *p)
{
    fk_enter();
    int i = ni(h);
    if (i < 0 || N[i].type != CU_GRAPH_NODE_TYPE_KERNEL)
        FK_RET(BAD);
    memcpy(p, &N[i].func, sizeof N[i].func);
    FK_RET(CUDA_SUCCESS);
}
/* dir 0: dependencies, 1: dependents; a plain (v1) query or one without room for edge data
 * fails where an edge carries data, as the driver's does */
static CUresult edges_of(CUgraphNode h, CUgraphNode *v, void *ed, size_t *n, int dir, int v2)
{
    fk_enter();
    int k = ni(h);
    if (k < 0)
        FK_RET(BAD);
    size_t c = 0, cap = *n;
    int lossy = 0;
    for (int i = 0; i < e_hw; i++)
        if (E[i].alive && (dir ? E[i].from : E[i].to) == k) {
            lossy |= E[i].data && !(v2 && ed);
            if (v && c < cap) {
                v[c] = (CUgraphNode)&N[dir ? E[i].to : E[i].from];
                if (ed)
                    ((uint64_t *)ed)[c] = E[i].data;
            }
            c++;
        }
    if (lossy)
        FK_RET(BAD);
    if (v)
        for (size_t j = c; j < cap; j++)
            v[j] = NULL;
    *n = v && c > cap ? cap : c;
    FK_RET(CUDA_SUCCESS);
}
static CUresult CUDAAPI f_deps2(CUgraphNode h, CUgraphNode *v, void *ed, size_t *n) { return edges_of(h, v, ed, n, 0, 1); }
static CUresult CUDAAPI f_deps1(CUgraphNode h, CUgraphNode *v, size_t *n) { return edges_of(h, v, NULL, n, 0, 0); }
static CUresult CUDAAPI f_outs2(CUgraphNode h, CUgraphNode *v, void *ed, size_t *n) { return edges_of(h, v, ed, n, 1, 1); }
static CUresult CUDAAPI f_outs1(CUgraphNode h, CUgraphNode *v, size_t *n) { return edges_of(h, v, NULL, n, 1, 0); }
static CUresult add_deps(CUgraph g, const CUgraphNode *from, const CUgraphNode *to, const void *ed, size_t n)
{
    fk_enter();
    int k = gi(g);
    if (k < 0 || fail_add_deps || ed)
        FK_RET(BAD);
    for (size_t i = 0; i < n; i++) {
        int a = ni(from[i]), b = ni(to[i]);
        if (a < 0 || b < 0 || a == b || N[a].graph != k || N[b].graph != k || edge_find(a, b) >= 0)
            FK_RET(BAD); /* a duplicate edge is an error, as in the driver */
        for (size_t j = 0; j < i; j++)
            if (from[j] == from[i] && to[j] == to[i])
                FK_RET(BAD);
    }
    for (size_t i = 0; i < n; i++)
        edge_new(ni(from[i]), ni(to[i]), 0);
    FK_RET(CUDA_SUCCESS);
}
static CUresult CUDAAPI f_add2(CUgraph g, const CUgraphNode *f, const CUgraphNode *t, const void *ed, size_t n) { return add_deps(g, f, t, ed, n); }
static CUresult CUDAAPI f_add1(CUgraph g, const CUgraphNode *f, const CUgraphNode *t, size_t n) { return add_deps(g, f, t, NULL, n); }
static CUresult CUDAAPI f_empty(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t n)
{
    fk_enter();
    int k = gi(g);
    if (k < 0)
        FK_RET(BAD);
    for (size_t i = 0; i < n; i++)
        if (ni(deps[i]) < 0 || N[ni(deps[i])].graph != k)
            FK_RET(BAD);
    int e = node_new(k, CU_GRAPH_NODE_TYPE_EMPTY, NULL, 0);
    for (size_t i = 0; i < n; i++)
        edge_new(ni(deps[i]), e, 0);
    *out = (CUgraphNode)&N[e];
    FK_RET(CUDA_SUCCESS);
}
static CUresult CUDAAPI f_destroy_node(CUgraphNode h)
{
    fk_enter();
    int i = ni(h);
    if (i < 0 || fail_destroy_node)
        FK_RET(BAD);
    node_kill(i);
    FK_RET(CUDA_SUCCESS);
}
static CUresult CUDAAPI f_clone(CUgraph *out, CUgraph g)
{
    fk_enter();
    int k = gi(g);
    if (k < 0 || fail_clone)
        FK_RET(BAD);
    n_clone++;
    int c = graph_new(G[k].origin);
    static int map[FN_MAX];
    int hw = n_hw;
    for (int i = 0; i < hw; i++)
        if (N[i].alive && N[i].graph == k)
            map[i] = node_new(c, N[i].type, N[i].func, N[i].label);
    int ehw = e_hw;
    for (int i = 0; i < ehw; i++)
        if (E[i].alive && N[E[i].from].graph == k)
            edge_new(map[E[i].from], map[E[i].to], E[i].data);
    *out = (CUgraph)&G[c];
    FK_RET(CUDA_SUCCESS);
}
static CUresult CUDAAPI f_destroy(CUgraph g)
{
    fk_enter();
    int k = gi(g);
    if (k < 0)
        FK_RET(BAD);
    graph_kill(k);
    FK_RET(CUDA_SUCCESS);
}
static int exec_new(int g, unsigned long long flags)
{
    int none = 0, hw = x_hw, i = fk_slot(&none, NULL, &hw, FX_MAX);
    X[i] = (fexec){1, G[g].origin, flags};
    __atomic_store_n(&x_hw, hw, __ATOMIC_RELEASE); /* published once X[i] is written */
    return i;
}
static CUresult CUDAAPI f_inst(CUgraphExec *out, CUgraph g, unsigned long long flags)
{
    fk_enter();
    int k = gi(g);
    if (k < 0 || fail_inst)
        FK_RET(BAD);
    n_inst++;
    snap_graph(k, &g_snap);
    *out = (CUgraphExec)&X[exec_new(k, flags)];
    FK_RET(CUDA_SUCCESS);
}
static CUresult CUDAAPI f_xflags(CUgraphExec x, cuuint64_t *f)
{
    fk_enter();
    int i = xi(x);
    if (i < 0 || !X[i].alive)
        FK_RET(BAD);
    *f = X[i].flags;
    FK_RET(CUDA_SUCCESS);
}
static CUresult CUDAAPI f_xdestroy(CUgraphExec x)
{
    fk_enter();
    int i = xi(x);
    if (i < 0 || !X[i].alive) {
        n_bad++; /* a double destroy */
        FK_RET(BAD);
    }
    X[i].alive = 0;
    n_xdestroy++;
    FK_RET(CUDA_SUCCESS);
}
static CUresult CUDAAPI f_ctx(CUcontext *c)
{
    *c = g_ctx;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_mode(CUstreamCaptureMode *m)
{
    CUstreamCaptureMode o = t_mode;
    t_mode = *m;
    *m = o;
    return CUDA_SUCCESS;
}

static void fake_full(void)
{
    memset(&g_cu, 0, sizeof g_cu);
    g_cu.cuCtxGetCurrent = f_ctx;
    g_cu.cuThreadExchangeStreamCaptureMode = f_mode;
    g_cu.cuGraphGetNodes = f_nodes;
    g_cu.cuGraphNodeGetType = f_type;
    g_cu.cuGraphKernelNodeGetParams_v2 = f_kparams;
    g_cu.cuGraphKernelNodeGetParams_v1 = f_kparams;
    g_cu.cuGraphNodeGetDependencies_v2 = f_deps2;
    g_cu.cuGraphNodeGetDependencies_v1 = f_deps1;
    g_cu.cuGraphNodeGetDependentNodes_v2 = f_outs2;
    g_cu.cuGraphNodeGetDependentNodes_v1 = f_outs1;
    g_cu.cuGraphAddDependencies_v2 = f_add2;
    g_cu.cuGraphAddDependencies_v1 = f_add1;
    g_cu.cuGraphAddEmptyNode = f_empty;
    g_cu.cuGraphDestroyNode = f_destroy_node;
    g_cu.cuGraphClone = f_clone;
    g_cu.cuGraphDestroy = f_destroy;
    g_cu.cuGraphInstantiateWithFlags = f_inst;
    g_cu.cuGraphExecGetFlags = f_xflags;
    g_cu.cuGraphExecDestroy = f_xdestroy;
}

/* what libkcap links instead: the fake table, and which functions are "ours" */
const kcap_cu *kcap_cu_load(const char **why)
{
    (void)why;
    __atomic_add_fetch(&n_loads, 1, __ATOMIC_RELAXED);
    return g_cu_on ? &g_cu : NULL;
}
int kcap_gpu_own_function(const void *f)
{
    return f && (const char *)f >= own_fns && (const char *)f < own_fns + sizeof own_fns;
}
int kcap_gpu_own_kind(const void *f)
{
    return f == (const void *)(own_fns + 3) ? 2 : f == (const void *)(own_fns + 4) ? 3 : kcap_gpu_own_function(f);
}

#endif
