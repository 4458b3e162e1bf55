/*
 * test_capture_shadow_worker.c — shadow mode's eager calls with the candidate launched by
 * kcap's worker thread (capture/kcap_gpu_shadow_async.c, KCAP_SHADOW_THREAD=1), on the fake
 * driver of shadow_fakedrv.h: under lazy module loading every call stays in stream; under
 * eager loading a candidate's first call runs in stream and the next ones leave the calling
 * thread only a wait on its stream, while the worker queues event wait, poison, candidate,
 * compare, staging and the word's write on a side stream per service stream; a failing
 * candidate reaches the policy's callback and gives its site and unit back; a worker stuck in
 * a candidate is bounded by the watchdog (the stuck call and the next are let go, reported
 * unjudged, the calling thread takes over), and so is a word the GPU never writes (run in a
 * process of its own, `--never-written`: the path is off in a process once a call was let
 * go). The GPU run is test_capture_gpu_shadow.sh (section 1).
 */
#include "shadow_fakedrv.h"

/* A queued chain the side stream has not reached (the service's own backlog) is not bounded;
 * once reached, one whose write never comes (the GPU ordered the service's wait before it)
 * is let go after 10 holds from then, the word written by the watchdog, the call marked. */
static int never_written(kcap_slot *sl, vattn_args *a, CUstream st)
{
    ksite *es = &g_sites[0];
    int status, failed;
    kcap_cfg_mut()->shadow_hold_ms = 20;
    kcap_gpu_shadow(sl, a, NULL, 0, st, 1, cand, 4096, 5, &status, &failed); /* warm-up, in stream */
    write_never = 2;
    atomic_store(&es->pending, 0);
    nl = 0;
    int h = kcap_gpu_shadow(sl, a, NULL, 0, st, 2, cand, 4096, 5, &status, &failed);
    unsigned int gen = es->gen;
    for (int w = 0; w < 5000 && !atomic_load(&es->launched); w++)
        usleep(1000);
    unsigned int *word = NULL, *reached = NULL;
    pthread_mutex_lock(&g_fake_lock);
    for (int i = 0; i < nl; i++) {
        word = L[i].f == (CUfunction)&fn_wait ? (unsigned int *)(uintptr_t)L[i].h[0] : word;
        if (!reached && L[i].f == (CUfunction)&fn_write)
            reached = (unsigned int *)(uintptr_t)L[i].h[0];
    }
    pthread_mutex_unlock(&g_fake_lock);
    usleep(400000); /* twice the 10-hold bound */
    TK_CHECK(h == 0 && word && reached && *word != gen && !kcap_shadow_async_let_go(0, gen),
             "queued, the side stream not there yet (the service's backlog): not let go after 400 ms");
    write_never = 1;
    *(volatile unsigned int *)reached = gen; /* the side stream reaches the chain */
    for (int w = 0; w < 3000 && !(word && *(volatile unsigned int *)word == gen); w++)
        usleep(1000);
    TK_CHECK(word && *word == gen && kcap_shadow_async_let_go(0, gen),
             "after 10 x KCAP_SHADOW_HOLD_MS the watchdog wrote the word itself and marked the call let go");
    return tk_summary("test_capture_shadow_worker --never-written");
}

int main(int argc, char **argv)
{
    kcap_slot sl;
    fake_install(&sl);
    TK_CHECK(sl.desc != NULL, "the vattn_verify description");
    kcap_config *cfg = kcap_cfg_mut();
    cfg->gpu_async = 1, cfg->shadow_graphs = 1;
    capture_active = 0;
    atomic_store(&g_r.base, 0x4000); /* the ring's memory, as the drainer allocates it */
    g_sites[0].done = (CUevent)0xd0; /* made with the ring in kcap_gpu.c */
    ksite *es = &g_sites[0];
    vattn_args a = call_args(2, 16);
    CUstream st = (CUstream)0x51;
    int status = -1, failed = -1, h;
    g_cu.cuStreamWaitValue32 = f_waitv, g_cu.cuStreamWriteValue32 = f_writev;
    cfg->shadow_thread = 1, cfg->shadow_hold_ms = 100; /* KCAP_SHADOW_THREAD=1, the default hold */
    if (argc == 2 && !strcmp(argv[1], "--never-written"))
        return never_written(&sl, &a, st);
    /* that case in a process of its own */
    fflush(stdout);
    pid_t nw = fork();
    if (nw == 0) {
        execl("/proc/self/exe", "test_capture_shadow_worker", "--never-written", (char *)NULL);
        _exit(127);
    }
    int nws = -1;
    waitpid(nw, &nws, 0);
    TK_CHECK(WIFEXITED(nws) && WEXITSTATUS(nws) == 0, "--never-written: exit status %d", nws);
    /* 10. the worker-thread path (KCAP_SHADOW_THREAD=1, where the driver has stream memory
       operations and modules load eagerly): the calling thread queues production, the ready event and
       a wait for the site's word on its stream and returns; kcap's worker queues, on a side
       stream of that stream, a wait for the event, poison, the candidate, the compare, the
       staging, then the write of this call's number into the word and the done event */
    g_cu.cuStreamWaitValue32 = f_waitv, g_cu.cuStreamWriteValue32 = f_writev;
    cfg->shadow_thread = 1, cfg->shadow_hold_ms = 100; /* KCAP_SHADOW_THREAD=1, the default hold */
    atomic_store(&es->pending, 0);
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) { /* lazy module loading (CUDA's default): never the worker */
        loading = CU_MODULE_LAZY_LOADING;
        int bad = 0;
        for (int k = 0; k < 3; k++) {
            nl = 0;
            bad |= kcap_gpu_shadow(&sl, &a, NULL, 0, st, 20 + k, cand, 4096, 77, &status, &failed) != 0 || nl != 3 ||
                   L[0].f != (CUfunction)&fn_poison || L[0].by_worker || cand_stream != (void *)st;
            atomic_store(&es->pending, 0);
        }
        _exit(bad);
    }
    int cst_w = -1;
    waitpid(child, &cst_w, 0);
    TK_CHECK(WIFEXITED(cst_w) && WEXITSTATUS(cst_w) == 0,
             "lazy module loading: every call's chain in stream by the calling thread (child status %d)", cst_w);
    /* eager loading: the candidate's first call runs in stream (its module loaded by the
       calling thread), the next ones through the worker */
    nl = 0;
    h = kcap_gpu_shadow(&sl, &a, NULL, 0, st, 10, cand, 4096, 5, &status, &failed);
    TK_CHECK(h == 0 && nl == 3 && !L[0].by_worker && L[0].f == (CUfunction)&fn_poison && cand_stream == (void *)st,
             "eager loading, the candidate's first call: in stream (%d launches)", nl);
    atomic_store(&es->pending, 0);
    nl = 0, nrec = 0, nrec_main = 0;
    int nc10 = n_cand;
    h = kcap_gpu_shadow(&sl, &a, NULL, 0, st, 11, cand, 4096, 5, &status, &failed);
    for (int w = 0; w < 5000 && !atomic_load(&es->launched); w++)
        usleep(1000);
    pthread_mutex_lock(&g_fake_lock);
    int wait_at = -1, by_main = 0;
    for (int i = 0; i < nl; i++) {
        by_main += !L[i].by_worker;
        wait_at = L[i].f == (CUfunction)&fn_wait ? i : wait_at;
    }
    int side_ok = nl == 6 && wait_at >= 0;
    CUstream side = NULL;
    CUfunction want[5] = {(CUfunction)&fn_write, (CUfunction)&fn_poison, (CUfunction)&fn_cmp,
                          (CUfunction)&fn_stage_both, (CUfunction)&fn_write};
    for (int i = 0, k = 0; side_ok && i < nl; i++) {
        if (i == wait_at)
            continue;
        side = side ? side : L[i].st;
        side_ok &= L[i].by_worker && L[i].f == want[k++] && L[i].st == side && side != st;
    }
    TK_CHECK(h == 0 && status == 0 && atomic_load(&es->launched) && by_main == 1 && wait_at >= 0 &&
                 L[wait_at].st == st && !L[wait_at].by_worker && L[wait_at].h[2] == CU_STREAM_WAIT_VALUE_GEQ,
             "worker path: the calling thread queues no kernel of kcap's, only a (cyclic >=) wait on the "
             "service's stream (%d operations, %d by it)", nl, by_main);
    TK_CHECK(side_ok && n_cand == nc10 + 1 && cand_by_worker && cand_stream == (void *)side &&
                 waited_st == side && waited_ev == es->ready && es->ready,
             "worker path: the worker waits for production's event, then writes that the chain was "
             "reached, poison, the candidate (on its thread), compare, staging and the word's write, "
             "all on one side stream");
    TK_CHECK(nrec_main == 1 && nrec == 2 && recorded[0] == es->ready && recorded_on[0] == st &&
                 recorded[1] == es->done && recorded_on[1] == side,
             "worker path (untimed call): one event record by the calling thread (ready, on its stream); "
             "done on the side stream after the write (%d records, %d by the caller)", nrec, nrec_main);
    int wr = nl - 1;
    unsigned int *word = (unsigned int *)(uintptr_t)L[wait_at].h[0];
    int reached_at = wait_at == 0 ? 1 : 0;
    TK_CHECK(side_ok && L[reached_at].h[0] != L[wait_at].h[0] && L[reached_at].h[1] == es->gen,
             "the reached word is another word, written with this call's number");
    TK_CHECK(side_ok && L[wr].h[0] == L[wait_at].h[0] && L[wr].h[1] == L[wait_at].h[1] &&
                 L[wait_at].h[1] == es->gen && *word == es->gen && atomic_load(&es->pending),
             "the side stream writes the word the service's stream waits for, with this call's number; "
             "the site waits for the drainer");
    unsigned int gen10 = es->gen;
    pthread_mutex_unlock(&g_fake_lock);
    TK_CHECK(!kcap_shadow_async_let_go(0, gen10), "its chain ran before the service's stream went on: not let go");

    /* a second stream gets its own side stream */
    atomic_store(&es->pending, 0);
    nl = 0;
    h = kcap_gpu_shadow(&sl, &a, NULL, 0, (CUstream)0x53, 12, cand, 4096, 5, &status, &failed);
    for (int w = 0; w < 5000 && !atomic_load(&es->launched); w++)
        usleep(1000);
    TK_CHECK(h == 0 && cand_stream != (void *)side && cand_stream != (void *)0x53 && cand_stream,
             "another service stream: another side stream");

    /* a candidate failing on the worker: the policy's callback, the wait still ended, the
       site given back with its unit */
    atomic_store(&es->pending, 0);
    cand_status = 6;
    nl = 0;
    kcap_budget_set_max(1); /* one unit, reserved as the interposer reserves it for the call */
    TK_CHECK(kcap_reserve() && !kcap_reserve(), "one unit, taken");
    h = kcap_gpu_shadow(&sl, &a, NULL, 0, st, 13, cand, 4096, 5, &status, &failed);
    for (int w = 0; w < 5000 && !(n_failed_cb && atomic_load(&es->launched)); w++)
        usleep(1000);
    pthread_mutex_lock(&g_fake_lock);
    int written = 0, cmps = 0;
    for (int i = 0; i < nl; i++)
        written += L[i].f == (CUfunction)&fn_write && L[i].h[0] == last_wait_addr && (unsigned int)L[i].h[1] == es->gen,
            cmps += L[i].f == (CUfunction)&fn_cmp;
    pthread_mutex_unlock(&g_fake_lock);
    TK_CHECK(h == 0 && failed == 0 && status == 0 && n_failed_cb == 1 && failed_cb_status == 6 && written == 1 &&
                 cmps == 0 && !atomic_load(&es->pending) && kcap_reserve(),
             "worker path, failing candidate: reported to the policy (status %d), no compare, the wait "
             "ended, the site and its unit given back", failed_cb_status);
    kcap_unreserve();
    kcap_budget_set_max(0);
    cand_status = 0;

    /* a worker stuck in a candidate's host code (here 400 ms, KCAP_SHADOW_HOLD_MS=100; on a
       GPU, in a launch that waits for the service's stream): the watchdog gives up the stuck
       call and the next one, not taken, writing their words (the service's stream goes on);
       neither is judged, and candidates are then launched by the calling thread */
    atomic_store(&es->pending, 0);
    cand_sleep_ms = 400;
    h = kcap_gpu_shadow(&sl, &a, NULL, 0, st, 14, cand, 4096, 5, &status, &failed);
    while (!atomic_load(&cand_entered))
        usleep(100);
    cand_sleep_ms = 0;
    unsigned int gen14 = es->gen;
    ksite *es2 = &g_sites[1];
    es2->done = (CUevent)0xd1;
    g_take_site = 1; /* the first site is the stuck call's */
    int unjudged_before = n_unjudged;
    nl = 0;
    h = kcap_gpu_shadow(&sl, &a, NULL, 0, st, 15, cand, 4096, 5, &status, &failed);
    unsigned int gen15 = es2->gen;
    unsigned int *word2 = NULL;
    pthread_mutex_lock(&g_fake_lock);
    for (int i = 0; i < nl; i++)
        word2 = L[i].f == (CUfunction)&fn_wait ? (unsigned int *)(uintptr_t)L[i].h[0] : word2;
    pthread_mutex_unlock(&g_fake_lock);
    for (int w = 0; w < 2000 && !(word2 && *(volatile unsigned int *)word2 == gen15); w++)
        usleep(1000);
    TK_CHECK(h == 0 && word2 && *word2 == gen15 && kcap_shadow_async_let_go(1, gen15),
             "the call the stuck worker did not take: its word written by the watchdog, marked let go");
    TK_CHECK(kcap_shadow_async_let_go(0, gen14) && *word == gen14,
             "the stuck call itself: its word written too (the service's stream went on), marked let go");
    for (int w = 0; w < 5000 && !(atomic_load(&es->launched) && atomic_load(&es2->launched)); w++)
        usleep(1000);
    TK_CHECK(n_unjudged == unjudged_before + 1 && !atomic_load(&es2->pending) && atomic_load(&es2->launched),
             "then the worker drops it (reported unjudged once, not as a divergence; the site given back) "
             "(%d unjudged)", n_unjudged - unjudged_before);
    g_take_site = 0;
    atomic_store(&es->pending, 0);
    nl = 0;
    h = kcap_gpu_shadow(&sl, &a, NULL, 0, st, 16, cand, 4096, 5, &status, &failed);
    TK_CHECK(h == 0 && nl == 3 && !L[0].by_worker && L[0].f == (CUfunction)&fn_poison && cand_stream == (void *)st,
             "after a call was given up: the chain in stream, by the calling thread (%d launches)", nl);
    return tk_summary("test_capture_shadow_worker");
}
