/*
 * kcap_gpu_shadow_async.c — shadow mode's eager calls with the candidate launched by a thread
 * of kcap's, not the service's (KCAP_SHADOW_THREAD=1, off by default: on the H200 it took 38 µs
 * a call off the service's thread and added stream time while the worker woke; docs/PERF.md). The calling thread queues the production call, one event and a wait on its
 * stream (cuStreamWaitValue32 on this site's word) and hands the site to the worker; the
 * worker queues the rest (kcap_shadow_eager_chain: poison, the candidate's own host code and
 * launches, the compare with its gate, staging) on a side stream of that service stream,
 * behind the event, then a write of the call's number into the word, which ends the wait. So
 * the service stream waits for the same work as in the in-stream path, nothing the service
 * queues after the call can change the inputs before the candidate and the staging have read
 * them, and the service's thread pays two driver calls instead of the candidate's call and
 * kcap's launches. The wait is a stream memory operation, not a kernel: it holds no SM, so a
 * candidate whose grid fills every SM (one block per SM) still runs in one wave.
 *
 * The hazard is a wait on the GPU for a host thread: whatever makes the worker's launches wait
 * for the service's stream deadlocks. Lazy module loading (CUDA's default since 12.2) is one:
 * a kernel's first launch may need a context synchronisation, which waits for the service's
 * stream, which waits for the worker (found on the H200: the first shadowed call hung). So
 * this path is used only under eager loading (CUDA_MODULE_LOADING=EAGER; otherwise the calling
 * thread launches candidates, one info line), and only after a call of the same candidate ran
 * in stream for that entry point (its module loaded by the calling thread). And it is
 * bounded: a call whose chain the worker has not finished queueing within KCAP_SHADOW_HOLD_MS
 * (a worker starved of CPU, stuck in a candidate's host code or in such a wait), or whose
 * word the GPU has not written within 10 times that (a wait the scheduler ordered before its
 * write: the driver documents that stream memory operations can deadlock so), is let go by
 * the watchdog thread, which writes the word itself; that call is reported unjudged, and this
 * path is off for the process from then on (the in-stream path takes over; one log line).
 * kcap's threads run with every signal blocked and the normal scheduling policy, whatever
 * the host's thread had. Not covered: a SCHED_FIFO host thread spinning on its stream on the
 * same CPUs with real-time throttling off starves them both (use KCAP_SHADOW_THREAD=0 there).
 * The per-thread default stream (CU_STREAM_PER_THREAD, one handle for many streams) stays in
 * stream. The 10-hold bound of a queued chain counts from when the side stream reached it
 * (a second word, `reached`), not from the call: a service stream running far behind its host
 * is not let go for its own backlog. Each service stream gets its own side stream
 * (up to KCAP_SHADOW_SIDES, then in stream): with one side stream for two service streams,
 * one's wait could be queued behind work that waits for the other. After a job the worker
 * polls for the next for KCAP_SHADOW_SPIN_NS before it sleeps, so a busy service's calls wake
 * nobody (no futex call on the service's thread).
 */
#include "kcap_gpu_int.h"

#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#define KCAP_SHADOW_SIDES 8
#define KCAP_SHADOW_SPIN_NS 100000ull

/* A call's job, one word per site: gen << 8 | state, so a transition names its call. Queued
 * by the calling thread (SUBMITTED), taken by the worker (TAKEN), its chain on the side
 * stream (QUEUED) until the watchdog sees the word written (IDLE); let go by the watchdog
 * (ABANDONED) while submitted or taken past the hold, or queued past 10 holds. */
enum { JOB_IDLE, JOB_SUBMITTED, JOB_TAKEN, JOB_QUEUED, JOB_ABANDONED };
#define JOB(gen, st) ((unsigned long long)(gen) << 8 | (st))
#define KCAP_SHADOW_WARM_CALLS 16 /* entry points whose warm-up is kept (more: in stream) */

static struct {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int q[KCAP_EAGER_SITES]; /* site ids in call order; a site is in it at most once */
    int head, n;
    int sleeping;            /* the worker waits on `wake` (under lock) */
    atomic_ulong pushed;     /* jobs ever queued: what the polling worker watches */
    int started;             /* 1 running, -1 could not be set up (this path stays off) */
    CUstream svc[KCAP_SHADOW_SIDES], side[KCAP_SHADOW_SIDES];
    int nside;
    /* per eager site, mapped host memory: the last released call's number (the service's
       stream waits for it), and gen << 1 | 1 of a call released before its chain ran */
    volatile unsigned int *words;
    volatile unsigned int *reached;     /* mapped: the call whose chain the side stream reached */
    _Atomic uint64_t reached_ns[KCAP_EAGER_SITES]; /* when the watchdog first saw it (0: not yet) */
    volatile unsigned long long *lost;
    atomic_ullong job[KCAP_EAGER_SITES];
    unsigned int gen[KCAP_EAGER_SITES];
    _Atomic uint64_t submit_ns[KCAP_EAGER_SITES];
    atomic_int off, stopping, watchdog_done;
    atomic_ullong warm[KCAP_SHADOW_WARM_CALLS]; /* per entry point: candidate number + 1 run in stream */
} g_as = {.lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};

static _Atomic(kcap_gpu_shadow_fail_fn) g_fail;
static atomic_int g_log_launch, g_log_off, g_log_lazy;

void kcap_gpu_set_shadow_fail(kcap_gpu_shadow_fail_fn f) { atomic_store(&g_fail, f); }

void kcap_shadow_async_atfork_child(void)
{
    atomic_store(&g_as.off, 1); /* no worker in the child (and no CUDA after fork either) */
}

/* At exit: no new job, and the watchdog stopped before the driver frees the pinned words it
 * reads (bounded: it sleeps at most 10 ms at a time). */
void kcap_shadow_async_stop(void)
{
    atomic_store(&g_as.off, 1);
    if (g_as.started <= 0 || atomic_exchange(&g_as.stopping, 1))
        return;
    for (int i = 0; i < 200 && !atomic_load(&g_as.watchdog_done); i++)
        usleep(100);
}

void kcap_shadow_async_warm(int call, unsigned long long cand_gen)
{
    if (call >= 0 && call < KCAP_SHADOW_WARM_CALLS)
        atomic_store(&g_as.warm[call], cand_gen + 1);
}

/* The service's stream goes on without this call's chain having run (the host writes the
 * word): the call is not judged, and the calling thread launches candidates from now on. */
static void give_up(int sid, unsigned int gen, const char *why)
{
    int was_off = atomic_exchange(&g_as.off, 1);
    __atomic_store_n(&g_as.lost[sid], (unsigned long long)gen << 1 | 1, __ATOMIC_RELEASE);
    /* raised to gen, never lowered (a newer call of the site may have had its write) */
    unsigned int cur = __atomic_load_n(&g_as.words[sid], __ATOMIC_ACQUIRE);
    while ((int)(gen - cur) > 0 &&
           !__atomic_compare_exchange_n(&g_as.words[sid], &cur, gen, 0, __ATOMIC_SEQ_CST, __ATOMIC_ACQUIRE))
        ;
    if (!was_off)
        kcap_log_once(&g_log_off, KCAP_LOG_WARN, "shadow mode: %s; it went on, that call is not judged "
                      "(counted not_judged), and candidates are launched by the calling thread from now on", why);
}

/* A site let go before the worker took it: nothing of it runs, it is unjudged. */
static void drop_job(kring *r, ksite *s)
{
    r->cu->cuEventRecord(s->done, s->side); /* the site's last call: nothing more queued */
    s->timed = 0; /* its candidate's timing events were not recorded */
    atomic_fetch_add(&kcap_g_stats.shadow_not_kept, 1); /* selected, not judged: not kept */
    kcap_gpu_shadow_report(r, s, KCAP_SHADOW_UNJUDGED, NULL, NULL);
    if (atomic_exchange(&s->pending, 0))
        kcap_gpu_unit_settled(0);
    atomic_store(&s->launched, 1);
}

/* The worker's part of site sid's call. Whatever fails, the wait is ended and the site
 * given back only once what was queued has run (its done event). */
static void run_chain(kring *r, int sid)
{
    const kcap_cu *cu = r->cu;
    ksite *s = kcap_site(r, sid);
    unsigned int gen = g_as.gen[sid];
    unsigned long long j = JOB(gen, JOB_SUBMITTED);
    if (!atomic_compare_exchange_strong(&g_as.job[sid], &j, JOB(gen, JOB_TAKEN))) {
        drop_job(r, s); /* the watchdog let it go */
        return;
    }
    int cst = KCAP_CALL_OK;
    atomic_store(&g_as.reached_ns[sid], 0);
    CUresult e = cu->cuStreamWaitEvent(s->side, s->ready, 0);
    if (e == CUDA_SUCCESS) /* the side stream reached this chain (production has run) */
        e = cu->cuStreamWriteValue32(s->side, (CUdeviceptr)(uintptr_t)&g_as.reached[sid], gen, 0);
    if (e == CUDA_SUCCESS)
        e = kcap_shadow_eager_chain(r, s, sid, s->side, &cst);
    CUresult er = cu->cuStreamWriteValue32(s->side, (CUdeviceptr)(uintptr_t)&g_as.words[sid], gen, 0);
    if (er != CUDA_SUCCESS) /* the service's stream must not wait for a write that is not coming */
        give_up(sid, gen, "kcap's worker thread could not queue the end of a service stream's wait");
    CUresult ed = cu->cuEventRecord(s->done, s->side);
    /* from here the watchdog waits for the word; let go meanwhile (it wrote the word and
       marked the call lost), what was queued still runs, its result is not counted */
    j = JOB(gen, JOB_TAKEN);
    atomic_compare_exchange_strong(&g_as.job[sid], &j, JOB(gen, er == CUDA_SUCCESS ? JOB_QUEUED : JOB_IDLE));
    if (e == CUDA_SUCCESS && cst != KCAP_CALL_OK) {
        kcap_gpu_shadow_fail_fn f = atomic_load(&g_fail);
        if (f) /* it wrote nothing of the service's: switched off */
            f(s->sl->desc, cst, s->seq, s->cand_gen);
    } else if (e != CUDA_SUCCESS || ed != CUDA_SUCCESS) {
        atomic_fetch_add(&kcap_g_stats.failed_record, 1);
        kcap_log_once(&g_log_launch, KCAP_LOG_WARN, "shadow mode: the worker thread's launch of "
                      "a candidate's part failed: %s", kcap_cu_errstr(cu, e ? e : ed));
    } else {
        atomic_fetch_add(&kcap_g_stats.shadow_by_worker, 1);
        atomic_store(&s->launched, 1); /* the drainer settles it */
        return;
    }
    if (atomic_exchange(&s->pending, 0))
        kcap_gpu_unit_settled(0); /* nobody else will settle it */
    atomic_store(&s->launched, 1);
}

static void *worker_main(void *arg)
{
    kring *r = arg;
    r->cu->cuCtxSetCurrent(r->ctx);
    pthread_mutex_lock(&g_as.lock);
    for (;;) {
        if (!g_as.n) { /* poll a while (no lock held), then sleep until a call wakes us */
            unsigned long seen = atomic_load(&g_as.pushed);
            pthread_mutex_unlock(&g_as.lock);
            for (uint64_t t0 = kcap_now_ns(); atomic_load(&g_as.pushed) == seen && kcap_now_ns() - t0 < KCAP_SHADOW_SPIN_NS;)
                sched_yield();
            pthread_mutex_lock(&g_as.lock);
            while (!g_as.n) {
                g_as.sleeping = 1;
                pthread_cond_wait(&g_as.wake, &g_as.lock);
                g_as.sleeping = 0;
            }
        }
        int sid = g_as.q[g_as.head];
        g_as.head = (g_as.head + 1) % KCAP_EAGER_SITES;
        g_as.n--;
        pthread_mutex_unlock(&g_as.lock);
        run_chain(r, sid);
        pthread_mutex_lock(&g_as.lock);
    }
    return NULL;
}

/* Calls whose chain the worker has not finished queueing within KCAP_SHADOW_HOLD_MS, or whose
 * word the GPU has not written within 10 times that, are let go (the service's stream goes
 * on). A thread of its own: the worker may be what is stuck, and the drainer may wait for the
 * writer's queue. */
static void *watchdog_main(void *arg)
{
    (void)arg;
    const uint64_t hold = (uint64_t)kcap_cfg()->shadow_hold_ms * 1000000ull;
    const useconds_t period = (useconds_t)(hold / 4000 < 1000 ? 1000 : hold / 4000 > 10000 ? 10000 : hold / 4000);
    while (!atomic_load(&g_as.stopping)) {
        usleep(period);
        uint64_t now = kcap_now_ns();
        for (int sid = 0; sid < KCAP_EAGER_SITES; sid++) {
            unsigned long long j = atomic_load(&g_as.job[sid]);
            unsigned int gen = (unsigned int)(j >> 8), st = (unsigned int)(j & 0xff);
            if (st == JOB_QUEUED && (int)(__atomic_load_n(&g_as.words[sid], __ATOMIC_ACQUIRE) - gen) >= 0) {
                atomic_compare_exchange_strong(&g_as.job[sid], &j, JOB(gen, JOB_IDLE)); /* ran */
                continue;
            }
            uint64_t since = atomic_load(&g_as.submit_ns[sid]), limit = hold;
            if (st == JOB_QUEUED) { /* timed from when the side stream reached the chain */
                if ((int)(__atomic_load_n(&g_as.reached[sid], __ATOMIC_ACQUIRE) - gen) < 0)
                    continue; /* the service's own backlog: not ours to bound */
                uint64_t zero = 0;
                atomic_compare_exchange_strong(&g_as.reached_ns[sid], &zero, now);
                since = atomic_load(&g_as.reached_ns[sid]), limit = 10 * hold;
            }
            if ((st != JOB_SUBMITTED && st != JOB_TAKEN && st != JOB_QUEUED) || now - since <= limit ||
                !atomic_compare_exchange_strong(&g_as.job[sid], &j, JOB(gen, JOB_ABANDONED)))
                continue; /* (a new call of the site changed its word: not this one) */
            char why[240];
            snprintf(why, sizeof why, "a service stream waited over %s%d ms for a candidate of kcap's worker "
                     "thread (%s)", st == JOB_QUEUED ? "10 x " : "", kcap_cfg()->shadow_hold_ms,
                     st == JOB_SUBMITTED ? "the worker had not taken the call"
                     : st == JOB_TAKEN ? "the worker was stuck queueing it"
                                       : "the GPU had not run its chain: a wait ordered before its write?");
            give_up(sid, gen, why);
        }
    }
    atomic_store(&g_as.watchdog_done, 1);
    return NULL;
}

/* A detached thread with every signal blocked (the host's handlers never run on it) and the
 * normal scheduling policy (a real-time host thread must not keep it from running). */
static int start_thread(void *(*fn)(void *), void *arg)
{
    pthread_t th;
    pthread_attr_t at;
    if (pthread_attr_init(&at))
        return -1;
    struct sched_param sp = {0};
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_attr_setinheritsched(&at, PTHREAD_EXPLICIT_SCHED);
    pthread_attr_setschedpolicy(&at, SCHED_OTHER);
    pthread_attr_setschedparam(&at, &sp);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&th, &at, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&at);
    return rc ? -1 : 0;
}

/* The words and threads, once (caller holds g_as.lock). 0 ready. */
static int setup(kring *r)
{
    if (g_as.started)
        return g_as.started > 0 ? 0 : -1;
    g_as.started = -1;
    const kcap_cu *cu = r->cu;
    CUmoduleLoadingMode lm = CU_MODULE_LAZY_LOADING;
    int memops = cu->cuStreamWaitValue32 && cu->cuStreamWriteValue32;
    int eager = cu->cuModuleGetLoadingMode && cu->cuModuleGetLoadingMode(&lm) == CUDA_SUCCESS &&
                lm == CU_MODULE_EAGER_LOADING;
    if (!memops || !eager) {
        kcap_log_once(&g_log_lazy, KCAP_LOG_INFO, "shadow mode: candidates are launched by the "
                      "calling thread (%s)", memops ? "lazy module loading: with "
                      "CUDA_MODULE_LOADING=EAGER, kcap's worker thread launches them"
                      : "the driver lacks stream memory operations");
        return -1;
    }
    void *w = NULL, *l = NULL;
    CUstreamCaptureMode m = kcap_relax(cu);
    CUresult e = cu->cuMemHostAlloc(&w, 2 * sizeof(unsigned int) * KCAP_EAGER_SITES,
                                    CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE);
    if (e == CUDA_SUCCESS)
        e = cu->cuMemHostAlloc(&l, sizeof(unsigned long long) * KCAP_EAGER_SITES, CU_MEMHOSTALLOC_PORTABLE);
    kcap_unrelax(cu, m);
    if (e != CUDA_SUCCESS)
        return -1; /* what was allocated stays: a few hundred bytes, once */
    memset(w, 0, 2 * sizeof(unsigned int) * KCAP_EAGER_SITES);
    memset(l, 0, sizeof(unsigned long long) * KCAP_EAGER_SITES);
    g_as.words = w; /* unified addressing: the device sees it at the same address */
    g_as.reached = (unsigned int *)w + KCAP_EAGER_SITES;
    g_as.lost = l;
    if (start_thread(worker_main, r) || start_thread(watchdog_main, NULL))
        return -1; /* a worker without its watchdog is never handed a call */
    g_as.started = 1;
    return 0;
}

/* The side stream of service stream st (caller holds g_as.lock); NULL: none to be had. */
static CUstream side_of(kring *r, CUstream st)
{
    for (int i = 0; i < g_as.nside; i++)
        if (g_as.svc[i] == st)
            return g_as.side[i];
    if (g_as.nside == KCAP_SHADOW_SIDES)
        return NULL;
    CUstream s = NULL;
    CUstreamCaptureMode m = kcap_relax(r->cu);
    CUresult e = r->cu->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
    kcap_unrelax(r->cu, m);
    if (e != CUDA_SUCCESS)
        return NULL;
    g_as.svc[g_as.nside] = st, g_as.side[g_as.nside] = s;
    g_as.nside++;
    return s;
}

int kcap_shadow_async_submit(kring *r, ksite *s, int sid, CUstream st)
{
    const kcap_cu *cu = r->cu;
    int call = s->sl->call;
    if (!kcap_cfg()->shadow_thread || atomic_load(&g_as.off) || sid < 0 || sid >= KCAP_EAGER_SITES ||
        st == CU_STREAM_PER_THREAD)
        return -1;
    /* an entry point's first call with a candidate runs in stream: its module is loaded by
       this thread (kcap_shadow_async_warm, once that call's chain is queued) */
    if (call < 0 || call >= KCAP_SHADOW_WARM_CALLS || atomic_load(&g_as.warm[call]) != s->cand_gen + 1)
        return -1;
    pthread_mutex_lock(&g_as.lock);
    CUstream side = setup(r) ? NULL : side_of(r, st);
    pthread_mutex_unlock(&g_as.lock);
    if (!side)
        return -1;
    if (!s->ready) {
        CUstreamCaptureMode m = kcap_relax(cu);
        CUresult e = cu->cuEventCreate(&s->ready, CU_EVENT_DISABLE_TIMING);
        kcap_unrelax(cu, m);
        if (e != CUDA_SUCCESS) {
            s->ready = NULL;
            return -1;
        }
    }
    if (cu->cuEventRecord(s->ready, st) != CUDA_SUCCESS)
        return -1;
    s->side = side;
    unsigned int gen = s->gen;
    g_as.gen[sid] = gen;
    atomic_store(&g_as.submit_ns[sid], kcap_now_ns());
    atomic_store(&g_as.job[sid], JOB(gen, JOB_SUBMITTED));
    /* cyclic >=: a later release of the site also ends this wait */
    if (cu->cuStreamWaitValue32(st, (CUdeviceptr)(uintptr_t)&g_as.words[sid], gen, CU_STREAM_WAIT_VALUE_GEQ) !=
        CUDA_SUCCESS) {
        unsigned long long j = JOB(gen, JOB_SUBMITTED); /* nothing waits: the chain runs in stream */
        atomic_compare_exchange_strong(&g_as.job[sid], &j, JOB(gen, JOB_IDLE));
        return -1;
    }
    pthread_mutex_lock(&g_as.lock);
    g_as.q[(g_as.head + g_as.n) % KCAP_EAGER_SITES] = sid;
    g_as.n++;
    atomic_fetch_add(&g_as.pushed, 1);
    if (g_as.sleeping)
        pthread_cond_signal(&g_as.wake);
    pthread_mutex_unlock(&g_as.lock);
    return 0;
}

int kcap_shadow_async_let_go(int sid, unsigned int gen)
{
    if (!g_as.lost || sid < 0 || sid >= KCAP_EAGER_SITES)
        return 0;
    unsigned long long f = __atomic_load_n(&g_as.lost[sid], __ATOMIC_ACQUIRE);
    return (f & 1) && (unsigned int)(f >> 1) == gen;
}
