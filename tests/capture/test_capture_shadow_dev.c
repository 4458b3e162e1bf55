/*
 * test_capture_shadow_dev.c — shadow mode on the device (capture/kcap_gpu_shadow.c, _graph.c)
 * on a fake driver, no GPU: what a call captured into a graph puts on the stream (production,
 * poison over exactly the candidate's outputs, the candidate on a copy of the args whose
 * outputs are kcap's buffer, the compare reading production and candidate views, the gated
 * stage launches), that the sites of one capture share one buffer and a larger call gets a
 * new one, that a failing candidate or a rejected call leaves no gate and is never counted,
 * that the service's memory reserve is kept, that a candidate whose trial capture breaks (it
 * syncs its stream) never reaches the host's graph, and that the drainer's reading of the running
 * totals reports each replay once (agreed and lost), never a divergent one as agreed. Also
 * the dispatch (kcap_gpu_shadow): calls it will not judge (sync mode, graphs while
 * KCAP_SHADOW_GRAPHS=0) leave before any ring is made, and the eager path's stream order, with
 * a failing candidate recording the site's done event before the site is given back.
 * `test_capture_shadow_dev --bench N` instead times N eager shadowed calls on the fake driver,
 * whose calls cost nothing: kcap's own host work per call on the calling thread, without the
 * driver's, with the candidate in stream and launched by the worker thread
 * (bench_shadow_host.sh, docs/PERF.md). The fake driver is shadow_fakedrv.h; the worker-thread
 * path's tests are test_capture_shadow_worker.c.
 * The GPU run of the same path is tests/capture/test_capture_gpu_shadow.sh (section 5).
 */
#include "shadow_fakedrv.h"

static unsigned long long g_gen = 5;
static int shadow_call(kcap_slot *sl, vattn_args *a, CUstream st, int *status, int *failed)
{
    nl = 0;
    return kcap_gpu_shadow_graph(&g_r, sl, a, NULL, 0, st, 1, cand, 4096, g_gen, status, failed);
}

#include <time.h>
static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

/* kcap's host work per eager shadowed call on the calling thread, the driver's calls costing
 * nothing: production and candidate are empty functions, the site is settled at once as the
 * drainer would. `worker` 0: the chain in stream (KCAP_SHADOW_THREAD=0); 1: kcap's worker
 * thread queues it (each call's worker part is waited for outside the timed call). */
static int bench(kcap_slot *sl, long n, int worker)
{
    kcap_config *cfg = kcap_cfg_mut();
    cfg->gpu_async = 1;
    cfg->shadow_thread = worker, cfg->shadow_hold_ms = 100;
    g_cu.cuStreamWaitValue32 = worker ? f_waitv : NULL, g_cu.cuStreamWriteValue32 = worker ? f_writev : NULL;
    g_cu.cuModuleGetLoadingMode = f_loadmode; /* eager: the worker's condition */
    capture_active = 0;
    atomic_store(&g_r.base, 0x4000);
    g_sites[0].done = (CUevent)0xd0;
    vattn_args a = call_args(8, 16);
    int status, failed;
    double best = 1e30;
    long records = 0, launches = 0; /* by the calling thread, over the last repetition */
    for (int rep = 0; rep < 5; rep++) {
        double spent = 0;
        records = 0, launches = 0;
        for (long i = 0; i < n; i++) {
            nl = 0, nrec = 0, nrec_main = 0;
            double t0 = now_ns();
            int h = kcap_gpu_shadow(sl, &a, NULL, 0, (CUstream)0x51, (uint64_t)i, cand, 4096, 5, &status, &failed);
            spent += now_ns() - t0;
            if (h)
                return 1;
            while (worker && !atomic_load(&g_sites[0].launched))
                ;
            pthread_mutex_lock(&g_fake_lock);
            records += nrec_main;
            for (int k = 0; k < nl; k++)
                launches += !L[k].by_worker && L[k].f != (CUfunction)&fn_wait;
            pthread_mutex_unlock(&g_fake_lock);
            atomic_store(&g_sites[0].pending, 0);
        }
        double per = spent / (double)n;
        best = per < best ? per : best;
    }
    printf("eager shadowed call, %s, kcap's own work on the calling thread (fake driver, no-op calls): "
           "%.0f ns/call (best of 5 x %ld); per call the calling thread makes %.2f kernel launches of kcap's, "
           "%.2f event records (on average: timing on 1 call in 8) and %d stream wait, %s\n",
           worker ? "candidate launched by kcap's worker thread (KCAP_SHADOW_THREAD=1)"
                  : "candidate in stream (KCAP_SHADOW_THREAD=0)",
           best, n, (double)launches / (double)n, (double)records / (double)n, worker,
           worker ? "besides the production call" : "besides the production and candidate calls");
    return 0;
}

int main(int argc, char **argv)
{
    kcap_slot sl;
    fake_install(&sl);
    TK_CHECK(sl.desc != NULL, "the vattn_verify description");
    if (argc == 3 && !strcmp(argv[1], "--bench")) {
        main_thread = pthread_self();
        return bench(&sl, atol(argv[2]), 0) || bench(&sl, atol(argv[2]), 1);
    }

    /* 1. one call in capture: the nodes, in stream order, and the site */
    vattn_args a = call_args(2, 16);
    int status = -1, failed = -1;
    CUstream st = (CUstream)0x51;
    int h = shadow_call(&sl, &a, st, &status, &failed);
    const size_t o_bytes = (size_t)2 * 4 * 16 * DV * 2, lse_bytes = (size_t)2 * 4 * 16 * 4;
    TK_CHECK(h == 2 && status == 0 && failed == 0 && n_prod == 1 && n_cand == 1 && n_trials == 1 && !trial_open,
             "graph nodes after one clean trial capture of the candidate (h %d)", h);
    TK_CHECK(nl == 3 && L[0].f == (CUfunction)&fn_poison && L[1].f == (CUfunction)&fn_cmp &&
                 L[2].f == (CUfunction)&fn_stage_both && L[2].in.phase == 0 && L[2].out.phase == 1 &&
                 !L[2].in.force && L[2].out.nsegs == 4,
             "poison, compare (its last block the gate), both staging phases in one launch (%d launches)", nl);
    unsigned long long buf = L[0].a0;
    TK_CHECK(L[0].a1 >= o_bytes + lse_bytes && L[0].a1 < o_bytes + lse_bytes + 2 * 256,
             "the poison covers the candidate's outputs only (%llu bytes)", L[0].a1);
    TK_CHECK((uintptr_t)cand_got.o >= buf && (uintptr_t)cand_got.lse >= buf + o_bytes &&
                 (uintptr_t)cand_got.lse < buf + L[0].a1 && cand_got.q == a.q && cand_got.kv_cache == a.kv_cache,
             "the candidate reads the service's inputs and writes kcap's buffer only");
    const kcmp_args *ca = &L[1].cmp;
    TK_CHECK(ca->nt == 2 && ca->t[0].prod == (uintptr_t)a.o && ca->t[0].cand == (uintptr_t)cand_got.o &&
                 ca->t[1].prod == (uintptr_t)a.lse && ca->t[1].cand == (uintptr_t)cand_got.lse &&
                 ca->t[0].dtype == 0 && ca->t[1].dtype == 2 && ca->t[0].rows == 2 * 4 * 16,
             "the compare views: production o / lse against the candidate's");
    TK_CHECK(ca->defer == 1 && ca->dev && L[2].in.cmp_dev == ca->dev && L[2].in.cmp_out == ca->out &&
                 L[2].in.cmp_nt == 2 && L[2].in.cmp_gen == ca->gen && !L[2].out.cmp_dev && L[0].a2 == ca->dev,
             "a multi-block compare (128 KB of o) is joined by the staging kernel, whose phase 0 gets its "
             "totals, and the poison before the candidate resets them");
    TK_CHECK(L[1].gate.ring && L[1].gate.phase == 0 && L[1].gate.site == L[2].in.site && !L[1].gate.force &&
                 L[1].gate.lost == (uintptr_t)&kcap_gslot_out(&g_r, 0)->lost,
             "the compare gates this site's phase 0 and counts divergences it cannot stage as lost");
    ksite *s = kcap_site(&g_r, KCAP_EAGER_SITES);
    TK_CHECK(s && s->graph && s->shadow && s->cand_gen == 5 && s->lay.nout == 4 && s->gslot == 0 &&
                 n_nodes_added == 1,
             "site: graph, shadowed, candidate 5, production and candidate outputs staged");

    /* 2. the same capture shares the buffer; a larger call gets a new one; another stream too */
    int allocs = n_alloc;
    h = shadow_call(&sl, &a, st, &status, &failed);
    TK_CHECK(h == 2 && L[0].a0 == buf && n_alloc == allocs && n_trials == 1,
             "second site of the capture: the same buffer, no second trial");
    vattn_args big = call_args(8, 16);
    h = shadow_call(&sl, &big, st, &status, &failed);
    TK_CHECK(h == 2 && L[0].a0 != buf && n_alloc == allocs + 1, "a larger call: a new buffer");
    h = shadow_call(&sl, &a, (CUstream)0x52, &status, &failed);
    TK_CHECK(h == 2 && L[0].a0 != buf, "another capture: its own buffer");
    vattn_args small = call_args(1, 2); /* 8 KB of o: one block */
    h = shadow_call(&sl, &small, st, &status, &failed);
    TK_CHECK(h == 2 && nl == 3 && !L[1].cmp.defer && !L[2].in.cmp_dev && L[0].a2 == L[1].cmp.dev,
             "a one-block compare publishes and gates itself: the staging kernel gets no totals");

    /* 3. a failing candidate: no gate, never counted; a rejected call: nothing of ours */
    cand_status = 3;
    h = shadow_call(&sl, &a, st, &status, &failed);
    ksite *fs = kcap_site(&g_r, g_r.nsites - 1);
    TK_CHECK(h == -1 && failed == 3 && status == 0 && nl == 2 && L[1].f == (CUfunction)&fn_cmp && !L[1].gate.ring &&
                 !L[1].cmp.defer && !fs->shadow,
             "failing candidate: poison and compare close its nodes, no gate, the site unjudged");
    cand_status = 0;
    prod_status = 7;
    int nc = n_cand;
    h = shadow_call(&sl, &a, st, &status, &failed);
    TK_CHECK(h == -1 && status == 7 && nl == 0 && n_cand == nc, "production rejects the call: no node of ours");
    prod_status = 0;

    /* 4. a candidate that breaks a capture (its trial): never in the host's graph, tried once */
    g_gen = 6;
    cand_syncs = 1;
    int np = n_prod;
    h = shadow_call(&sl, &a, st, &status, &failed);
    TK_CHECK(h == 1 && nl == 0 && n_prod == np && n_trials == 2 && !trial_open,
             "trial capture invalidated: not judged, nothing of ours on the host's stream, production left to the caller");
    h = shadow_call(&sl, &a, st, &status, &failed);
    TK_CHECK(h == 1 && nl == 0 && n_trials == 2, "the same candidate again: not tried again");
    cand_syncs = 0;
    g_gen = 7;
    h = shadow_call(&sl, &a, st, &status, &failed);
    TK_CHECK(h == 2 && n_trials == 3, "a new candidate: tried, then judged");
    g_gen = 5;

    /* 5. not in capture, or the service's memory reserve reached: not judged */
    capture_active = 0;
    TK_CHECK(shadow_call(&sl, &a, st, &status, &failed) == 1, "no capture active: not this path");
    capture_active = 1;
    free_bytes = 64ull << 20;
    vattn_args huge = call_args(16, 128);
    h = shadow_call(&sl, &huge, st, &status, &failed);
    TK_CHECK(h == 1 && nl == 0, "too little device memory for the service's reserve: not judged");
    free_bytes = 8ull << 30;

    /* 6. the drainer's reading: each replay reported once, by kind */
    volatile kcmp_out *o = kcap_gslot_out(&g_r, s->gslot);
    o->tally = KCAP_CMP_TALLY(5, 2), o->lost = 1;
    kcap_gpu_shadow_graph_settle(&g_r);
    TK_CHECK(n_agreed == 3 && n_lost == 1 && n_other == 0 && last_gen == 5,
             "5 replays, 2 divergent (1 staged, 1 lost): 3 agreed + 1 lost reported (%d, %d)", n_agreed, n_lost);
    kcap_gpu_shadow_graph_settle(&g_r);
    TK_CHECK(n_agreed == 3 && n_lost == 1, "read again: nothing twice");
    o->tally = KCAP_CMP_TALLY(6, 3); /* a divergent replay: no agreed one */
    kcap_gpu_shadow_graph_settle(&g_r);
    TK_CHECK(n_agreed == 3, "a divergent replay: no agreed reported for it");
    o->tally = KCAP_CMP_TALLY(7, 3);
    kcap_gpu_shadow_graph_settle(&g_r);
    TK_CHECK(n_agreed == 4 && n_lost == 1, "then an agreeing one: one more agreed (%d)", n_agreed);
    /* the counts are modulo 2^32: a long-running graph's tally wraps and is still read right */
    s->seen_agreed = 0xfffffffeull;
    o->tally = KCAP_CMP_TALLY(0x100000001ull, 3); /* 2^32 + 1 compared, 3 divergent: 2^32 - 2 agreed */
    kcap_gpu_shadow_graph_settle(&g_r);
    TK_CHECK(n_agreed == 4, "agreed count at 2^32 - 2 as seen: nothing new (%d)", n_agreed);
    o->tally = KCAP_CMP_TALLY(0x100000004ull, 3); /* compared wrapped: 3 more agreed */
    kcap_gpu_shadow_graph_settle(&g_r);
    TK_CHECK(n_agreed == 7 && s->seen_agreed == 0x100000001ull, "across the wrap: 3 more agreed (%d)", n_agreed);
    o->tally = KCAP_CMP_TALLY(0x100000003ull, 3); /* a tally that went back (two executables' replays) */
    kcap_gpu_shadow_graph_settle(&g_r);
    TK_CHECK(n_agreed == 7 && s->seen_agreed == 0x100000001ull, "a tally one behind: nothing reported (%d)", n_agreed);
    s->seen_agreed = 5; /* diverged's low half wrapped too: 2^32 + 10 compared, 2^32 + 5 divergent */
    o->tally = KCAP_CMP_TALLY(0x10000000aull, 0x100000005ull);
    kcap_gpu_shadow_graph_settle(&g_r);
    TK_CHECK(n_agreed == 7, "both halves wrapped, 5 agreed as seen: nothing new (%d)", n_agreed);
    o->tally = KCAP_CMP_TALLY(0x10000000dull, 0x100000005ull);
    kcap_gpu_shadow_graph_settle(&g_r);
    TK_CHECK(n_agreed == 10 && s->seen_agreed == 8, "then 3 agreeing replays: 3 reported (%d)", n_agreed);
    fs->gslot = s->gslot; /* an unjudged site (failed candidate) sharing nothing is skipped */
    int before = n_agreed;
    kcap_gpu_shadow_graph_settle(&g_r);
    TK_CHECK(n_agreed == before, "unjudged sites are never read");

    /* 7. the dispatch: what it will not judge leaves before any ring exists */
    kcap_config *cfg = kcap_cfg_mut();
    cfg->gpu_async = 0, cfg->shadow_graphs = 0;
    capture_active = 0;
    nl = 0;
    TK_CHECK(kcap_gpu_shadow(&sl, &a, NULL, 0, st, 1, cand, 4096, 5, &status, &failed) == 1 && n_ring_of == 0 &&
                 nl == 0, "sync mode, an eager call: not judged, no ring made");
    capture_active = 1;
    cfg->gpu_async = 1;
    TK_CHECK(kcap_gpu_shadow(&sl, &a, NULL, 0, st, 1, cand, 4096, 5, &status, &failed) == 1 && n_ring_of == 0,
             "a graph call while KCAP_SHADOW_GRAPHS=0: not judged, no ring made");
    cfg->shadow_graphs = 1;
    TK_CHECK(kcap_gpu_shadow(&sl, &a, NULL, 0, st, 1, cand, 4096, 5, &status, &failed) == 2 && n_ring_of == 1,
             "KCAP_SHADOW_GRAPHS=1: the graph path");

    /* 8. the eager path: production, poison, candidate, compare, gated staging, done event */
    capture_active = 0;
    atomic_store(&g_r.base, 0x4000); /* the ring's memory, as the drainer allocates it */
    g_sites[0].done = (CUevent)0xd0; /* made with the ring in kcap_gpu.c */
    g_r.cmp_dev = 0x7000000; /* the eager sites' compare totals (device memory, never read here) */
    nl = 0, nrec = 0;
    int np2 = n_prod;
    h = kcap_gpu_shadow(&sl, &a, NULL, 0, st, 9, cand, 4096, 5, &status, &failed);
    ksite *es = &g_sites[0];
    TK_CHECK(h == 0 && n_prod == np2 + 1 && nl == 3 && L[0].f == (CUfunction)&fn_poison && L[1].f == (CUfunction)&fn_cmp &&
                 L[1].gate.ring && L[1].gate.force && !L[1].gate.lost && L[2].f == (CUfunction)&fn_stage_both &&
                 L[2].in.force && L[2].out.phase == 1 && nrec == 5 && recorded[4] == es->done &&
                 es->shadow && es->cand_gen == 5 && atomic_load(&es->pending),
             "eager: poison, compare, gated staging, 4 timing events and the done event (%d launches, %d records)", nl, nrec);
    TK_CHECK((uintptr_t)cand_got.o == es->cand && L[0].a0 == es->cand, "eager: the candidate writes the site's buffer");
    TK_CHECK(L[1].cmp.defer == 1 && L[1].cmp.dev == g_r.cmp_dev && L[2].in.cmp_dev == L[1].cmp.dev &&
                 L[0].a2 == L[1].cmp.dev && L[2].in.cmp_out == L[1].cmp.out && L[2].in.cmp_gen == L[1].cmp.gen,
             "eager: the staging kernel joins the compare (its totals at the site's kcmp_dev)");
    atomic_store(&es->pending, 0); /* as the drainer would settle it */
    cand_status = 4;
    nl = 0, nrec = 0;
    h = kcap_gpu_shadow(&sl, &a, NULL, 0, st, 10, cand, 4096, 5, &status, &failed);
    TK_CHECK(h == -1 && failed == 4 && nl == 1 && nrec == 1 && recorded[0] == es->done && !es->timed &&
                 !atomic_load(&es->pending) && atomic_load(&es->launched),
             "eager, failing candidate (the second eager call: not timed, 1 call in 8 is): the done event "
             "recorded before the site is given back, no compare");
    cand_status = 0;
    fail_launch_of = (CUfunction)&fn_stage_both; /* the compare queued, its staging refused */
    nl = 0, nrec = 0;
    h = kcap_gpu_shadow(&sl, &a, NULL, 0, st, 11, cand, 4096, 5, &status, &failed);
    TK_CHECK(h == -1 && status == 0 && nl == 3 && L[1].f == (CUfunction)&fn_cmp && L[1].cmp.defer == 1 &&
                 nrec >= 1 && recorded[nrec - 1] == es->done && !atomic_load(&es->pending) &&
                 atomic_load(&es->launched),
             "eager, staging launch refused after a deferred compare: the done event still recorded "
             "(the site is not taken again before the compare has run), the call given back (h %d, %d "
             "launches, %d records)", h, nl, nrec);
    fail_launch_of = NULL;

    /* 9. the drainer's reading of an eager call's outcome and verdict: the compare writes them
       with no fence between, so an outcome seen before its verdict waits for it */
    const unsigned int g9 = 41;
    const unsigned long long out_kept = (unsigned long long)g9 << 1 | 1, out_not = (unsigned long long)g9 << 1;
    TK_CHECK(kcap_eager_outcome((unsigned long long)(g9 - 1) << 1, 1, KCAP_CMP_VERDICT(g9, 0), g9) ==
                 KCAP_EAGER_WAIT, "outcome of the site's previous call: wait");
    TK_CHECK(kcap_eager_outcome(out_kept, 1, 0, g9) == KCAP_EAGER_STAGED, "staged: its doorbell settles it");
    TK_CHECK(kcap_eager_outcome(out_not, 0, 0, g9) == KCAP_EAGER_DROPPED, "not staged, not judged: dropped");
    TK_CHECK(kcap_eager_outcome(out_not, 1, KCAP_CMP_VERDICT(g9 - 1, 0), g9) == KCAP_EAGER_WAIT,
             "not staged, its verdict not seen yet (the previous call's is): wait, not settled unjudged");
    TK_CHECK(kcap_eager_outcome(out_not, 1, KCAP_CMP_VERDICT(g9, 0), g9) == KCAP_EAGER_AGREED, "agreed");
    TK_CHECK(kcap_eager_outcome(out_not, 1, KCAP_CMP_VERDICT(g9, 1), g9) == KCAP_EAGER_LOST,
             "divergent but not staged: lost");

    return tk_summary("test_capture_shadow_dev");
}
