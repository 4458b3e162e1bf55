/*
 * test_capture_graphexec.c — the clean graph twins (capture/kcap_graphexec.c) on a fake CUDA
 * driver (fake_cugraph.h), no GPU. Checks that nothing is walked before kcap put nodes into a
 * graph; that a twin is made only for a graph with kcap nodes and only of node types a copy
 * reproduces; that it holds every host node with exactly the orderings the original gave them
 * (chains, joins, existing edges, edge data, random DAGs); that a launch picks it only while
 * disarmed, outside a capture and on one stream; that destroy, change and fork forget it; that
 * every failure leaves no twin and no leaked graph or exec; that the table stays right through
 * thousands of inserts and removals and under threads; and that no driver call runs outside
 * the relaxed capture mode.
 */
#include "kcap_graphexec.h"
#include "kcap_log.h"
#include "kcap_state.h"

#include "fake_cugraph.h"
#include "testkit.h"

/* ---- building graphs ----------------------------------------------------------------------- */
static CUfunction KF(int i) { return (CUfunction)&own_fns[i % 5]; }  /* a kcap kernel (3: shadow poison, 4: compare) */
static CUfunction HF(int i) { return (CUfunction)&host_fns[i % 8]; } /* a host kernel */

static int mk(int g, CUgraphNodeType t, CUfunction f, int label, const int *deps, int nd)
{
    int n = node_new(g, t, f, label);
    for (int i = 0; i < nd; i++)
        edge_new(deps[i], n, 0);
    return n;
}
static CUgraph GH(int g) { return (CUgraph)&G[g]; }
static void *host_exec(int g, unsigned long long flags) { return &X[exec_new(g, flags)]; }

/* instantiate g as the host would, then let kcap make the twin; the picked exec when disarmed */
static int g_armed_now;
static int fake_armed(void) { return g_armed_now; }
static void *twin_of(void *exec) { return kcap_graphexec_pick(exec, (void *)0x77, 0); }

/* the twin of g matches it: no kcap node, the same labels, the same orderings between them */
static int twin_ok(int g)
{
    snap o;
    snap_graph(g, &o);
    return g_snap.kcap == 0 && g_snap.labels == o.labels && !memcmp(g_snap.has, o.has, sizeof o.has) &&
           !memcmp(g_snap.reach, o.reach, sizeof o.reach);
}

/* one hooked call between two host kernels: h1 -> gate -> stage -> h2 -> stage -> h3 */
static int chain_graph(void)
{
    int g = graph_new(-1);
    int h1 = mk(g, CU_GRAPH_NODE_TYPE_KERNEL, HF(1), 1, NULL, 0);
    int k1 = mk(g, CU_GRAPH_NODE_TYPE_KERNEL, KF(0), 0, &h1, 1);
    int k2 = mk(g, CU_GRAPH_NODE_TYPE_KERNEL, KF(1), 0, &k1, 1);
    int h2 = mk(g, CU_GRAPH_NODE_TYPE_KERNEL, HF(2), 2, &k2, 1);
    int k3 = mk(g, CU_GRAPH_NODE_TYPE_KERNEL, KF(1), 0, &h2, 1);
    mk(g, CU_GRAPH_NODE_TYPE_MEMCPY, NULL, 3, &k3, 1);
    return g;
}

/* shadow mode's nodes of two hooked calls between host kernels (kcap_gpu_shadow_graph.c):
 * h1 -> poison -> c -> c' -> compare -> gate -> stage -> stage -> h2 -> poison -> c -> compare
 * -> gate -> stage -> stage -> h3, the c nodes being the candidate's kernels (not kcap's
 * functions, no label: they must go too). `open`: the second poison's path ends in a host node
 * without a compare. */
static int shadow_graph(int open)
{
    int g = graph_new(-1), prev = mk(g, CU_GRAPH_NODE_TYPE_KERNEL, HF(1), 1, NULL, 0);
    for (int site = 0; site < 2; site++) {
        int p = mk(g, CU_GRAPH_NODE_TYPE_KERNEL, KF(3), 0, &prev, 1);
        int c = mk(g, CU_GRAPH_NODE_TYPE_KERNEL, HF(5), 0, &p, 1);
        if (site == 0)
            c = mk(g, CU_GRAPH_NODE_TYPE_MEMSET, NULL, 0, &c, 1);
        if (open && site == 1) {
            prev = mk(g, CU_GRAPH_NODE_TYPE_KERNEL, HF(3), 3, &c, 1);
            return g;
        }
        int q = mk(g, CU_GRAPH_NODE_TYPE_KERNEL, KF(4), 0, &c, 1);
        int k = mk(g, CU_GRAPH_NODE_TYPE_KERNEL, KF(0), 0, &q, 1);
        k = mk(g, CU_GRAPH_NODE_TYPE_KERNEL, KF(1), 0, &k, 1);
        k = mk(g, CU_GRAPH_NODE_TYPE_KERNEL, KF(1), 0, &k, 1);
        prev = mk(g, CU_GRAPH_NODE_TYPE_KERNEL, HF(2 + site), 2 + site, &k, 1);
    }
    return g;
}

/* a failure somewhere: no twin, nothing leaked, the host's exec launched */
static void expect_no_twin(int g, unsigned long long flags, const char *what)
{
    int ga = graphs_alive(), xa = execs_alive(), inst = n_inst;
    void *x = host_exec(g, flags);
    kcap_graphexec_instantiated(x, GH(g), 1, flags);
    TK_CHECK(twin_of(x) == x && graphs_alive() == ga && execs_alive() == xa + 1,
             "%s: no twin, no graph or exec left behind (graphs %d -> %d, execs %d -> %d, inst %d -> %d)",
             what, ga, graphs_alive(), xa + 1, execs_alive(), inst, n_inst);
}

static void test_shadow_twin(void)
{
    int g = shadow_graph(0);
    void *x = host_exec(g, 0);
    kcap_graphexec_instantiated(x, GH(g), 1, 0);
    TK_CHECK(twin_of(x) != x && twin_ok(g) && g_snap.stray == 0 && g_snap.labels == 3,
             "shadow nodes: the twin keeps h1 < h2 < h3 and none of kcap's or the candidate's nodes "
             "(stray %d)", g_snap.stray);
    expect_no_twin(shadow_graph(1), 0, "a poison node whose path ends without a compare");

    /* a candidate that forks and joins: h1 -> poison -> (c1, c2) -> compare -> gate -> h2 */
    int d = graph_new(-1);
    int h1 = mk(d, CU_GRAPH_NODE_TYPE_KERNEL, HF(1), 1, NULL, 0);
    int p = mk(d, CU_GRAPH_NODE_TYPE_KERNEL, KF(3), 0, &h1, 1);
    int c[2] = {mk(d, CU_GRAPH_NODE_TYPE_KERNEL, HF(5), 0, &p, 1), mk(d, CU_GRAPH_NODE_TYPE_KERNEL, HF(6), 0, &p, 1)};
    int q = mk(d, CU_GRAPH_NODE_TYPE_KERNEL, KF(4), 0, c, 2);
    int k = mk(d, CU_GRAPH_NODE_TYPE_KERNEL, KF(0), 0, &q, 1);
    mk(d, CU_GRAPH_NODE_TYPE_KERNEL, HF(2), 2, &k, 1);
    void *xd = host_exec(d, 0);
    kcap_graphexec_instantiated(xd, GH(d), 1, 0);
    TK_CHECK(twin_of(xd) != xd && twin_ok(d) && g_snap.stray == 0 && g_snap.labels == 2,
             "a candidate that forks and joins: all its nodes out, h1 < h2 kept (stray %d)", g_snap.stray);

    /* the first site's poison without its own compare: its walk reaches host node h2, then a
       node of the second site's candidate — in either walk order, no twin (h2 must never go) */
    int e = graph_new(-1);
    int pb = mk(e, CU_GRAPH_NODE_TYPE_KERNEL, KF(3), 0, NULL, 0);
    int cb = mk(e, CU_GRAPH_NODE_TYPE_KERNEL, HF(5), 0, &pb, 1);
    int qb = mk(e, CU_GRAPH_NODE_TYPE_KERNEL, KF(4), 0, &cb, 1);
    mk(e, CU_GRAPH_NODE_TYPE_KERNEL, HF(3), 3, &qb, 1);
    int e1 = mk(e, CU_GRAPH_NODE_TYPE_KERNEL, HF(1), 1, NULL, 0);
    int pa = mk(e, CU_GRAPH_NODE_TYPE_KERNEL, KF(3), 0, &e1, 1);
    int ca = mk(e, CU_GRAPH_NODE_TYPE_KERNEL, HF(5), 0, &pa, 1);
    int e2 = mk(e, CU_GRAPH_NODE_TYPE_KERNEL, HF(2), 2, &ca, 1);
    edge_new(e2, cb, 0);
    expect_no_twin(e, 0, "a poison's walk reaching a host node and another site's candidate");
}

static void test_twins(void)
{
    int g = chain_graph();
    /* dormant process that never put nodes into a graph: the driver is not even loaded */
    void *x0 = host_exec(g, 0);
    kcap_graphexec_instantiated(x0, GH(g), 1, 0);
    TK_CHECK(n_loads == 0 && n_clone == 0 && twin_of(x0) == x0, "no kcap nodes yet: nothing walked");
    kcap_graphexec_nodes_added();

    /* no predicate registered (KCAP_GRAPH_TWINS=0): no twin, nothing walked */
    void *x1 = host_exec(g, 0);
    kcap_graphexec_instantiated(x1, GH(g), 1, 0);
    TK_CHECK(n_loads == 0 && n_clone == 0 && twin_of(x1) == x1, "no armed predicate: no twin");
    kcap_graphexec_set_armed(fake_armed);

    /* flags from the call (no cuGraphExecGetFlags): the upload flag is dropped for the twin */
    g_cu.cuGraphExecGetFlags = NULL;
    int ga = graphs_alive();
    void *x = host_exec(g, 0);
    kcap_graphexec_instantiated(x, GH(g), 1, 1 | 2 | 8);
    TK_CHECK(n_clone == 1 && n_inst == 1 && twin_ok(g) && graphs_alive() == ga,
             "chain: twin without the 3 kcap nodes, h1 < h2 < h3 kept, the copy destroyed");
    void *tw = twin_of(x);
    TK_CHECK(tw != x && xi(tw) >= 0 && X[xi(tw)].flags == (1 | 8) && X[xi(tw)].origin == g,
             "disarmed: the twin, instantiated with the host's flags less upload");
    unsigned long long cl = atomic_load(&kcap_g_stats.graph_clean_launches);
    g_armed_now = 1;
    TK_CHECK(twin_of(x) == x, "armed: the instrumented exec");
    g_armed_now = 0;
    kcap_graph_capture_begin();
    TK_CHECK(twin_of(x) == x, "a graph capture open: the host's exec");
    kcap_graph_capture_end();
    TK_CHECK(twin_of(x) == tw && atomic_load(&kcap_g_stats.graph_clean_launches) == cl + 1 &&
             atomic_load(&kcap_g_stats.graph_twins) == 1, "stats: 1 twin, clean launches counted");
    TK_CHECK(n_unrelaxed == 0 && t_mode == 0, "driver calls in relaxed mode only, the host's mode restored");

    /* a change drops the twin first, exactly once */
    int xd = n_xdestroy;
    kcap_graphexec_forget(x, "cudaGraphExecKernelNodeSetParams");
    kcap_graphexec_forget(x, NULL);
    TK_CHECK(n_xdestroy == xd + 1 && !X[xi(tw)].alive && twin_of(x) == x && !n_bad,
             "changed exec: twin destroyed once, the instrumented exec launched");

    /* flags asked of the exec; an exec handle seen again replaces its old twin */
    g_cu.cuGraphExecGetFlags = f_xflags;
    void *y = host_exec(g, 1);
    kcap_graphexec_instantiated(y, GH(g), 0, 0);
    void *ty = twin_of(y);
    TK_CHECK(ty != y && X[xi(ty)].flags == 1, "flags from cuGraphExecGetFlags");
    kcap_graphexec_instantiated(y, GH(g), 0, 0);
    TK_CHECK(!X[xi(ty)].alive && twin_of(y) != y && twin_of(y) != ty, "a reused exec handle: old twin gone, new one");

    /* streams: the legacy stream under both names is one; a second stream ends the twin */
    void *s = host_exec(g, 0);
    kcap_graphexec_instantiated(s, GH(g), 0, 0);
    void *ts = kcap_graphexec_pick(s, NULL, 0);
    TK_CHECK(ts != s && kcap_graphexec_pick(s, (void *)CU_STREAM_LEGACY, 0) == ts,
             "stream 0 and CU_STREAM_LEGACY: one stream, the twin");
    TK_CHECK(kcap_graphexec_pick(s, (void *)0x1234, 0) == s && kcap_graphexec_pick(s, NULL, 0) == s,
             "a second stream: the host's exec from then on");
}

static void *pt_pick(void *arg) { return kcap_graphexec_pick(arg, (void *)CU_STREAM_PER_THREAD, 0); }

static void test_per_thread(void)
{
    int g = chain_graph();
    void *p = host_exec(g, 0);
    kcap_graphexec_instantiated(p, GH(g), 0, 0);
    void *tp = kcap_graphexec_pick(p, (void *)CU_STREAM_PER_THREAD, 0);
    TK_CHECK(tp != p && kcap_graphexec_pick(p, NULL, 1) == tp,
             "per-thread stream, by handle and as 0 of a _ptsz call: one stream of this thread");
    pthread_t t;
    void *r = NULL;
    pthread_create(&t, NULL, pt_pick, p);
    pthread_join(t, &r);
    TK_CHECK(r == p && kcap_graphexec_pick(p, NULL, 1) == p, "another thread's per-thread stream is another stream");
}

static void test_shapes(void)
{
    /* many to many through an empty node; one to many with an edge that exists already */
    int g = graph_new(-1);
    int a = mk(g, CU_GRAPH_NODE_TYPE_KERNEL, HF(0), 1, NULL, 0);
    int b = mk(g, CU_GRAPH_NODE_TYPE_HOST, NULL, 2, NULL, 0);
    int ab[2] = {a, b};
    int k = mk(g, CU_GRAPH_NODE_TYPE_KERNEL, KF(2), 0, ab, 2);
    int c = mk(g, CU_GRAPH_NODE_TYPE_KERNEL, HF(3), 3, &k, 1);
    int d = mk(g, CU_GRAPH_NODE_TYPE_EVENT_RECORD, NULL, 4, &k, 1);
    int k2 = mk(g, CU_GRAPH_NODE_TYPE_KERNEL, KF(0), 0, &c, 1);
    int cd[2] = {k2, c};
    int e = mk(g, CU_GRAPH_NODE_TYPE_KERNEL, HF(4), 5, cd, 2); /* c -> e exists beside c -> k2 -> e */
    int k3 = mk(g, CU_GRAPH_NODE_TYPE_KERNEL, KF(1), 0, &d, 1); /* a leaf */
    mk(g, CU_GRAPH_NODE_TYPE_KERNEL, KF(0), 0, NULL, 0);          /* a root with no edges */
    (void)e, (void)k3;
    void *x = host_exec(g, 0);
    int inst = n_inst;
    kcap_graphexec_instantiated(x, GH(g), 0, 0);
    TK_CHECK(n_inst == inst + 1 && twin_of(x) != x && twin_ok(g) && g_snap.empty == 1,
             "join (2 x 2: one empty node), an edge already there, a leaf, a lone root: orderings kept exactly");

    /* edge data (programmatic launch) next to a kcap node: read with the _v2 calls; a driver
       with only the plain ones refuses the query, and there is no twin */
    int h = graph_new(-1);
    int p = mk(h, CU_GRAPH_NODE_TYPE_KERNEL, HF(0), 1, NULL, 0);
    int kk = mk(h, CU_GRAPH_NODE_TYPE_KERNEL, KF(0), 0, &p, 1);
    int q = mk(h, CU_GRAPH_NODE_TYPE_KERNEL, HF(1), 2, &kk, 1);
    E[edge_find(kk, q)].data = 0x010001;
    void *y = host_exec(h, 0);
    kcap_graphexec_instantiated(y, GH(h), 0, 0);
    TK_CHECK(twin_of(y) != y && twin_ok(h), "edge data: the _v2 queries, a plain edge in its place");
    g_cu.cuGraphNodeGetDependencies_v2 = NULL;
    g_cu.cuGraphNodeGetDependentNodes_v2 = NULL;
    g_cu.cuGraphAddDependencies_v2 = NULL;
    expect_no_twin(h, 0, "edge data, plain-only driver");
    int gc = chain_graph();
    void *z = host_exec(gc, 0);
    kcap_graphexec_instantiated(z, GH(gc), 0, 0);
    TK_CHECK(twin_of(z) != z && twin_ok(gc), "plain-only driver, plain edges: a twin");
    fake_full();
}

static void test_failures(void)
{
    int g = chain_graph();
    int clones = n_clone;
    int m = graph_new(-1);
    int a = mk(m, CU_GRAPH_NODE_TYPE_KERNEL, HF(0), 1, NULL, 0);
    int k = mk(m, CU_GRAPH_NODE_TYPE_KERNEL, KF(0), 0, &a, 1);
    mk(m, CU_GRAPH_NODE_TYPE_MEM_ALLOC, NULL, 2, &k, 1);
    expect_no_twin(m, 0, "memory allocation node");
    TK_CHECK(n_clone == clones, "a graph refused by its node types is not even cloned");
    int plain = graph_new(-1);
    mk(plain, CU_GRAPH_NODE_TYPE_KERNEL, HF(0), 1, NULL, 0);
    expect_no_twin(plain, 0, "no kcap node");
    TK_CHECK(n_clone == clones, "a graph without kcap nodes is not cloned");
    expect_no_twin(g, 4, "device launch");
    g_cu.cuGraphExecGetFlags = NULL;
    void *x = host_exec(g, 0);
    kcap_graphexec_instantiated(x, GH(g), 0, 0);
    TK_CHECK(twin_of(x) == x, "flags unknown (plain cudaGraphInstantiate, old driver): no twin");
    fake_full();
    int *fail[] = {&fail_clone, &fail_inst, &fail_destroy_node, &fail_add_deps};
    const char *what[] = {"clone fails", "instantiating the copy fails", "destroying a node fails",
                          "adding edges fails"};
    for (int f = 0; f < 4; f++) {
        *fail[f] = 1;
        expect_no_twin(g, 0, what[f]);
        *fail[f] = 0;
    }
    for (int after = 0; after < 3; after++) { /* the original, the copy, the copy checked */
        fail_list_after = after;
        expect_no_twin(g, 0, "listing nodes fails");
    }
    fail_list_after = -1;
    g_ctx = NULL;
    expect_no_twin(g, 0, "no current context");
    g_ctx = (CUcontext)0x1000;
    g_cu.cuGraphClone = NULL;
    expect_no_twin(g, 0, "driver without cuGraphClone");
    fake_full();
    g_cu_on = 0;
    expect_no_twin(g, 0, "no driver");
    g_cu_on = 1;
    TK_CHECK(n_unrelaxed == 0 && !n_bad, "failures: relaxed mode, no double destroy");
}

/* random DAGs, a third of their nodes kcap's: the twin keeps exactly the host orderings */
static void test_random(void)
{
    tk_rng r = 12345;
    int bad = 0, made = 0;
    for (int it = 0; it < 300; it++) {
        int g = graph_new(-1), nodes[80], n = 0, label = 1;
        int len = 2 + tk_int(&r, 60);
        for (int i = 0; i < len && label < NLAB; i++) {
            int deps[4], nd = 0, want = n ? tk_int(&r, 4) : 0;
            for (int j = 0; j < want; j++) {
                int d = nodes[tk_int(&r, n)], dup = 0;
                for (int q = 0; q < nd; q++)
                    dup |= deps[q] == d;
                if (!dup)
                    deps[nd++] = d;
            }
            int ours = tk_int(&r, 3) == 0;
            nodes[n++] = mk(g, CU_GRAPH_NODE_TYPE_KERNEL, ours ? KF(i % 3) : HF(i), ours ? 0 : label++, deps, nd);
        }
        snap o;
        snap_graph(g, &o);
        void *x = host_exec(g, 0);
        int inst = n_inst;
        kcap_graphexec_instantiated(x, GH(g), 0, 0);
        if (o.kcap) {
            made++;
            bad += n_inst != inst + 1 || twin_of(x) == x || !twin_ok(g);
        } else {
            bad += n_inst != inst || twin_of(x) != x;
        }
        kcap_graphexec_forget(x, NULL);
        graph_kill(g);
    }
    TK_CHECK(!bad && made > 250, "300 random DAGs: %d twins, %d wrong", made, bad);
}

/* the table: full, removals in any order (backward shift), re-inserts */
static void test_table(void)
{
    int g = graph_new(-1);
    int a = mk(g, CU_GRAPH_NODE_TYPE_KERNEL, HF(0), 1, NULL, 0);
    mk(g, CU_GRAPH_NODE_TYPE_KERNEL, KF(0), 0, &a, 1);
    enum { M = KCAP_GRAPHEXEC_MAX };
    static void *ex[M + 1], *tw[M + 1];
    kcap_graphexec_atfork_child(); /* an empty table (what earlier tests left is dropped) */
    int twins0 = execs_alive();
    for (int i = 0; i <= M; i++) {
        ex[i] = host_exec(g, 0);
        kcap_graphexec_instantiated(ex[i], GH(g), 0, 0);
    }
    int bad = 0;
    for (int i = 0; i < M; i++) {
        tw[i] = twin_of(ex[i]);
        bad += tw[i] == ex[i] || !X[xi(tw[i])].alive;
    }
    TK_CHECK(!bad && twin_of(ex[M]) == ex[M] && execs_alive() == twins0 + 2 * M + 1,
             "%d twins, the next refused and its twin destroyed (%d wrong)", M, bad);
    tk_rng r = 99;
    static unsigned char gone[M];
    for (int k = 0; k < M * 2 / 3; k++) {
        int i = tk_int(&r, M);
        if (!gone[i]) {
            kcap_graphexec_forget(ex[i], NULL);
            gone[i] = 1;
        }
    }
    bad = 0;
    for (int i = 0; i < M; i++)
        bad += gone[i] ? twin_of(ex[i]) != ex[i] || X[xi(tw[i])].alive : twin_of(ex[i]) != tw[i];
    TK_CHECK(!bad, "after removals in random order every lookup is right (%d wrong)", bad);
    bad = 0;
    for (int i = 0; i < M; i++)
        if (gone[i]) {
            kcap_graphexec_instantiated(ex[i], GH(g), 0, 0);
            tw[i] = twin_of(ex[i]);
            bad += tw[i] == ex[i];
        }
    for (int i = 0; i < M; i++)
        bad += twin_of(ex[i]) != tw[i];
    TK_CHECK(!bad, "re-inserted: all %d found again (%d wrong)", M, bad);
    int xd = n_xdestroy;
    kcap_graphexec_atfork_child();
    TK_CHECK(twin_of(ex[0]) == ex[0] && n_xdestroy == xd, "fork child: empty table, the parent's twins not touched");
}

/* threads: launches racing with changes and new twins; a launch gets its exec or a twin of
 * the same graph, never another graph's */
enum { TN = 64 };
static void *t_ex[TN];
static int t_g[TN];
static atomic_int t_stop, t_wrong;

static void *t_picker(void *arg)
{
    (void)arg;
    while (!atomic_load(&t_stop))
        for (int i = 0; i < TN; i++) {
            void *p = twin_of(t_ex[i]);
            if (p != t_ex[i] && (xi(p) < 0 || X[xi(p)].origin != t_g[i]))
                atomic_fetch_add(&t_wrong, 1);
        }
    return NULL;
}

static void test_threads(void)
{
    for (int i = 0; i < TN; i++) {
        t_g[i] = chain_graph();
        t_ex[i] = host_exec(t_g[i], 0);
        kcap_graphexec_instantiated(t_ex[i], GH(t_g[i]), 0, 0);
    }
    pthread_t th[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&th[i], NULL, t_picker, NULL);
    tk_rng r = 7;
    for (int k = 0; k < 1500; k++) {
        int i = tk_int(&r, TN);
        kcap_graphexec_forget(t_ex[i], NULL);
        kcap_graphexec_instantiated(t_ex[i], GH(t_g[i]), 0, 0);
    }
    atomic_store(&t_stop, 1);
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    int bad = 0;
    for (int i = 0; i < TN; i++)
        bad += twin_of(t_ex[i]) == t_ex[i];
    TK_CHECK(!atomic_load(&t_wrong) && !bad && !n_bad && !n_unrelaxed,
             "threads: %d wrong picks, %d execs without twin, %d double destroys",
             atomic_load(&t_wrong), bad, n_bad);
}

int main(void)
{
    kcap_config_defaults(kcap_cfg_mut());
    kcap_log_level = KCAP_LOG_QUIET;
    fake_full();
    test_twins();
    test_shadow_twin();
    test_per_thread();
    test_shapes();
    test_failures();
    test_random();
    test_threads();
    test_table(); /* last: ends with the fork reset */
    return tk_summary("test_capture_graphexec");
}
