/*
 * kcap_queue.c — the bounded hand-off between the host's calling threads and the writer.
 *
 * Calling threads only copy tensors into host memory and push the snapshot here; the one
 * writer thread does the slow part (shuffle + zstd + HDF5 + fsync, kcap_snapshot_write, which
 * parallelises compression internally). One cap, KCAP_QUEUE_BYTES, bounds every host byte
 * kcap allocates: the writer's own buffers are charged once when it starts, a
 * calling thread reserves its snapshot's bound (kcap_size.c) BEFORE copying anything, and
 * the reservation becomes the queued snapshot's size until it is written. What does not fit
 * is refused before it is copied (the caller drops and counts it), so a slow disk can never
 * make the host's memory grow or its calls wait.
 *
 * Write failures (disk full, EROFS...) do not end capture: after 3 in a row capture backs
 * off (1 s, doubling to 60 s; calls meanwhile are dropped before copying and counted as
 * `backoff`), then tries again, and resumes when a write succeeds; each change is logged once.
 * File names carry a run id (kcap_names.c) and an existing name is never replaced: the
 * writer moves to the next suffix.
 *
 * Fork never waits for a write (it once waited up to 2 s for a whole snapshot, then
 * dropped the child's). It waits only for the libhdf5 call in progress, if any: formats
 * wraps every libhdf5 call of kcap in kcap_h5_lock/unlock, and libkcap is linked with
 * --wrap for those two, so each such section also holds our gate below, a lock we can reset
 * in the child (formats' own recursive lock, held across fork, could never be released
 * there: its owner is a thread id the child does not have). The child thus inherits libhdf5
 * between two calls, drops the parent's pending snapshots, and starts its own writer. The
 * wait is bounded (2 ms; chunks of at most 1 MiB keep each libhdf5 call shorter than that on
 * a page cache): past it the fork goes ahead, and that child, whose libhdf5 may be mid-call,
 * never touches libhdf5 — its snapshots are dropped and counted, never written with a
 * broken library.
 */
#include "kcap_queue.h"
#include "kcap_log.h"
#include "kcap_state.h"
#include "kcap_names.h"
#include "kcap_size.h"

#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct kcap_qnode {
    struct kcap_qnode *next;
    kcap_snapshot *snap;
    size_t bytes;
    uint64_t seq;
    int rank;
} kcap_qnode;

static pthread_mutex_t q_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t q_cond = PTHREAD_COND_INITIALIZER;  /* work for the writer */
static pthread_cond_t q_drain = PTHREAD_COND_INITIALIZER; /* the writer finished one */
/* held inside every kcap_h5_lock section (recursive, like the lock it wraps) */
static pthread_mutex_t g_h5_gate = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static kcap_qnode *q_head, *q_tail;
static size_t q_bytes;      /* queued snapshots + the one being written */
static size_t q_reserved;   /* reservations of calls being recorded */
static size_t q_fixed;      /* the writer's buffers */
static uint64_t q_count;
static int q_busy;          /* the writer holds a popped snapshot */
static int w_running;       /* writer thread started */
static int w_stop;          /* writer asked to exit */
static int w_consec_fail;
static int w_backoff_s;     /* current back-off step, 0 = none */
static atomic_ullong g_backoff_until_ns;
static kcap_writer *g_writer;
static int fork_gate_locked; /* prepare holds g_h5_gate */
static int child_no_hdf5;    /* forked during a libhdf5 call: never touch libhdf5 here */
static atomic_int g_log_write, g_log_writer, g_log_nohdf5;

/* The --wrap'ed formats lock (capture/module.mk). */
void __real_kcap_h5_lock(void);
void __real_kcap_h5_unlock(void);
void __wrap_kcap_h5_lock(void);
void __wrap_kcap_h5_unlock(void);
void __wrap_kcap_h5_lock(void)
{
    pthread_mutex_lock(&g_h5_gate);
    __real_kcap_h5_lock();
}
void __wrap_kcap_h5_unlock(void)
{
    __real_kcap_h5_unlock();
    pthread_mutex_unlock(&g_h5_gate);
}

static void (*q_on_ready)(void); /* kcap_queue_on_writer_ready */

void kcap_queue_on_writer_ready(void (*fn)(void)) { q_on_ready = fn; }

static void kcap_node_free(kcap_qnode *n)
{
    if (n) {
        kcap_snapshot_free(n->snap);
        free(n);
    }
}

/* The writer's options: threads = KCAP_THREADS or min(4, CPUs); chunks sized so that the
 * writer's buffers take at most a quarter of the cap (down to 64 KiB chunks, 1 thread). */
static void kcap_writer_plan(kcap_writer_opts *o, size_t *fixed)
{
    const kcap_config *c = kcap_cfg();
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int threads = c->threads > 0 ? c->threads : (int)(ncpu < 1 ? 1 : ncpu > 4 ? 4 : ncpu);
    size_t chunk = 1u << 20; /* one libhdf5 chunk store stays short (fork waits for it) */
    while (kcap_writer_bytes(threads, chunk, c->level) > c->queue_bytes / 4) {
        if (chunk > (64u << 10))
            chunk /= 2;
        else if (threads > 1)
            threads--;
        else
            break;
    }
    memset(o, 0, sizeof *o);
    o->threads = threads;
    o->level = c->level;
    o->chunk_bytes = chunk;
    *fixed = kcap_writer_bytes(threads, chunk, c->level);
}

static void kcap_write_failed(const char *path, int rc, const kcap_error *e)
{
    atomic_fetch_add(&kcap_g_stats.failed_write, 1);
    kcap_log_once(&g_log_write, KCAP_LOG_WARN, "writing %s failed: %s", path,
                  e->msg[0] ? e->msg : kcap_err_string(rc));
    if (++w_consec_fail < 3)
        return;
    w_backoff_s = w_backoff_s ? (w_backoff_s * 2 > 60 ? 60 : w_backoff_s * 2) : 1;
    atomic_store(&g_backoff_until_ns, kcap_now_ns() + (uint64_t)w_backoff_s * 1000000000ull);
    if (w_consec_fail == 3)
        kcap_log(KCAP_LOG_WARN, "capture paused: 3 snapshot writes in a row failed (%s); "
                 "retrying after 1 s, then up to every 60 s", kcap_err_string(rc));
}

static void kcap_write_one(kcap_qnode *n)
{
    const kcap_config *c = kcap_cfg();
    char path[PATH_MAX + 160];
    kcap_error e = {0};
    int rc = KCAP_ERR_NOMEM;
    /* Graph replays are numbered by their own device-side ticket, eager calls by the host
     * call counter ("-g" / "-s"); an existing file (another run, same pid) is never replaced:
     * the next suffix is taken, however many runs with this pid and run id came before (a
     * crash-looping container with a fixed KCAP_RUN_ID): a taken name is not a write failure
     * and never pauses capture. */
    int taken = 0;
    for (int attempt = 0; g_writer && attempt < 100000; attempt++) {
        if (kcap_snapshot_name(path, sizeof path, c->dir, n->snap->meta.call, n->rank,
                               (long)n->snap->meta.pid, n->snap->meta.in_stream_capture,
                               (unsigned long long)n->seq, attempt)) {
            rc = kcap_error_set(&e, KCAP_ERR_ARG, "%s: file name too long", c->dir);
            break;
        }
        struct stat st;
        taken = 0;
        if (!lstat(path, &st)) {
            rc = kcap_error_set(&e, KCAP_ERR_EXISTS, "%s exists", path);
            taken = 1;
            continue;
        }
        memset(&e, 0, sizeof e);
        rc = kcap_snapshot_write(g_writer, n->snap, path, &e);
        taken = rc && !lstat(path, &st); /* the name appeared during the write (no-replace) */
        if (!taken)
            break; /* written, or failed for another reason than the name being taken */
    }
    if (rc && taken) { /* 100,000 names taken: counted, but the disk is fine */
        atomic_fetch_add(&kcap_g_stats.failed_write, 1);
        kcap_log_once(&g_log_write, KCAP_LOG_WARN, "writing %s failed: every name is taken", path);
        return;
    }
    if (rc) {
        kcap_write_failed(path, rc, &e);
        return;
    }
    if (w_consec_fail >= 3)
        kcap_log(KCAP_LOG_WARN, "capture resumed: %s written", path);
    w_consec_fail = 0;
    w_backoff_s = 0;
    atomic_store(&g_backoff_until_ns, 0);
    atomic_fetch_add(&kcap_g_stats.written, 1);
    atomic_fetch_add(&kcap_g_stats.bytes_written_dense, n->bytes);
    kcap_log(KCAP_LOG_INFO, "wrote %s", path);
}

int kcap_queue_backoff(void)
{
    uint64_t until = atomic_load_explicit(&g_backoff_until_ns, memory_order_relaxed);
    return until && kcap_now_ns() < until;
}

static void *kcap_writer_main(void *arg)
{
    (void)arg;
    kcap_writer_opts o;
    size_t fixed;
    kcap_writer_plan(&o, &fixed);
    kcap_error e = {0};
    /* Keep libhdf5 from registering its own atexit teardown when we are the first to use
       it: our exit flush must find the library alive, and a teardown that walks objects a
       failed write left open (disk full) has been seen to crash the host at exit. No-op
       when the host initialised HDF5 itself. */
    pthread_mutex_lock(&g_h5_gate); /* HDF5 is in use: a fork now would catch it half-way */
    H5dont_atexit();
    g_writer = kcap_writer_create(&o, &e);
    if (!g_writer)
        kcap_log_once(&g_log_writer, KCAP_LOG_WARN, "cannot start the snapshot writer: %s",
                      e.msg[0] ? e.msg : kcap_err_string(e.code));
    kcap_h5zstd_register();
    pthread_mutex_unlock(&g_h5_gate);
    /* libhdf5 is initialised now: an atexit registered after it runs before its teardown */
    if (q_on_ready)
        q_on_ready();
    pthread_mutex_lock(&q_lock);
    for (;;) {
        while (!q_head && !w_stop)
            pthread_cond_wait(&q_cond, &q_lock);
        if (!q_head)
            break;
        kcap_qnode *n = q_head;
        q_head = n->next;
        if (!q_head)
            q_tail = NULL;
        q_busy = 1;
        pthread_mutex_unlock(&q_lock);

        kcap_write_one(n);

        pthread_mutex_lock(&q_lock);
        q_bytes -= n->bytes;
        q_count--;
        q_busy = 0;
        pthread_cond_broadcast(&q_drain);
        pthread_mutex_unlock(&q_lock);
        kcap_node_free(n);
        pthread_mutex_lock(&q_lock);
    }
    w_running = 0;
    pthread_cond_broadcast(&q_drain);
    pthread_mutex_unlock(&q_lock);
    return NULL;
}

/* Called with q_lock held: start the writer, charging its buffers to the cap. */
static int kcap_writer_ensure(void)
{
    if (w_running)
        return 0;
    if (child_no_hdf5) {
        kcap_log_once(&g_log_nohdf5, KCAP_LOG_WARN, "this process was forked during a libhdf5 "
                      "call of its parent's snapshot writer: its snapshots cannot be written "
                      "and are dropped and counted");
        return KCAP_ERR_UNSUPPORTED;
    }
    kcap_writer_opts o;
    size_t fixed;
    kcap_writer_plan(&o, &fixed);
    if (fixed > kcap_cfg()->queue_bytes) {
        kcap_log_once(&g_log_writer, KCAP_LOG_WARN, "KCAP_QUEUE_BYTES=%llu is smaller than the "
                      "snapshot writer's own buffers (%zu bytes): nothing can be captured",
                      (unsigned long long)kcap_cfg()->queue_bytes, fixed);
        return KCAP_ERR_FULL;
    }
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    /* the writer must not take the host's signals (e.g. SIGINT handlers in Python) */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t t;
    int rc = pthread_create(&t, &at, kcap_writer_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&at);
    if (rc)
        return KCAP_ERR_NOMEM;
    q_fixed = fixed;
    w_running = 1;
    w_stop = 0;
    return 0;
}

/* Called with q_lock held. */
static int kcap_fits(size_t bytes)
{
    size_t cap = kcap_cfg()->queue_bytes, used = q_bytes + q_reserved + q_fixed;
    return used < cap && bytes <= cap - used;
}

size_t kcap_queue_room(void)
{
    kcap_writer_opts o;
    size_t fixed;
    kcap_writer_plan(&o, &fixed);
    size_t cap = kcap_cfg()->queue_bytes;
    return fixed < cap ? cap - fixed : 0;
}

int kcap_queue_would_fit(size_t bytes)
{
    pthread_mutex_lock(&q_lock);
    int ok = kcap_fits(bytes);
    pthread_mutex_unlock(&q_lock);
    return ok;
}

int kcap_queue_reserve(size_t bytes)
{
    pthread_mutex_lock(&q_lock);
    /* the writer's buffers come first: a cap they do not fit in can hold no snapshot */
    int rc = kcap_writer_ensure();
    if (!rc && !kcap_fits(bytes))
        rc = KCAP_ERR_FULL;
    if (!rc)
        q_reserved += bytes;
    pthread_mutex_unlock(&q_lock);
    return rc;
}

void kcap_queue_unreserve(size_t bytes)
{
    if (!bytes)
        return;
    pthread_mutex_lock(&q_lock);
    q_reserved -= bytes < q_reserved ? bytes : q_reserved;
    pthread_mutex_unlock(&q_lock);
}

static int kcap_push_locked(kcap_qnode *n, size_t reserved)
{
    q_reserved -= reserved < q_reserved ? reserved : q_reserved;
    if (kcap_writer_ensure() || !kcap_fits(n->bytes)) {
        q_reserved += reserved; /* the caller still holds (and releases) it */
        return KCAP_ERR_FULL;
    }
    if (q_tail)
        q_tail->next = n;
    else
        q_head = n;
    q_tail = n;
    q_bytes += n->bytes;
    q_count++;
    pthread_cond_signal(&q_cond);
    return 0;
}

int kcap_queue_push_reserved(kcap_snapshot *s, uint64_t seq, int rank, size_t reserved)
{
    kcap_qnode *n = calloc(1, sizeof *n);
    if (!n)
        return KCAP_ERR_NOMEM;
    n->snap = s;
    n->bytes = kcap_snapshot_bytes(s);
    n->seq = seq;
    n->rank = rank;
    pthread_mutex_lock(&q_lock);
    int rc = kcap_push_locked(n, reserved);
    pthread_mutex_unlock(&q_lock);
    if (rc)
        free(n);
    return rc;
}

int kcap_queue_push(kcap_snapshot *s, uint64_t seq, int rank)
{
    return kcap_queue_push_reserved(s, seq, rank, 0);
}

uint64_t kcap_queue_pending(void)
{
    pthread_mutex_lock(&q_lock);
    uint64_t n = q_count;
    pthread_mutex_unlock(&q_lock);
    return n;
}

void kcap_queue_drop_all(void)
{
    pthread_mutex_lock(&q_lock);
    kcap_qnode *n = q_head;
    q_head = q_tail = NULL;
    while (n) {
        kcap_qnode *next = n->next;
        q_bytes -= n->bytes;
        q_count--;
        atomic_fetch_add(&kcap_g_stats.dropped_queue, 1);
        kcap_node_free(n);
        n = next;
    }
    pthread_mutex_unlock(&q_lock);
}

int kcap_queue_flush(int timeout_ms)
{
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += timeout_ms / 1000;
    dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (dl.tv_nsec >= 1000000000L)
        dl.tv_sec++, dl.tv_nsec -= 1000000000L;
    pthread_mutex_lock(&q_lock);
    while ((q_head || q_busy) && w_running)
        if (pthread_cond_timedwait(&q_drain, &q_lock, &dl) == ETIMEDOUT)
            break;
    int left = (int)q_count;
    /* let an idle writer exit; a busy one is left to finish (the process is exiting) */
    w_stop = 1;
    pthread_cond_broadcast(&q_cond);
    pthread_mutex_unlock(&q_lock);
    return left;
}

void kcap_queue_atfork_prepare(void)
{
    /* waits for the libhdf5 call in progress (one chunk store), at most 2 ms, never for a
       whole write */
    uint64_t until = kcap_now_ns() + 2000000ull;
    while (!(fork_gate_locked = !pthread_mutex_trylock(&g_h5_gate)) && kcap_now_ns() < until) {
        struct timespec ts = {0, 50000};
        nanosleep(&ts, NULL);
    }
    pthread_mutex_lock(&q_lock);
}

void kcap_queue_atfork_parent(void)
{
    pthread_mutex_unlock(&q_lock);
    if (fork_gate_locked)
        pthread_mutex_unlock(&g_h5_gate);
}

void kcap_queue_atfork_child(void)
{
    pthread_mutexattr_t ra;
    pthread_mutexattr_init(&ra);
    pthread_mutexattr_settype(&ra, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&g_h5_gate, &ra);
    pthread_mutexattr_destroy(&ra);
    pthread_mutex_init(&q_lock, NULL);
    pthread_cond_init(&q_cond, NULL);
    pthread_cond_init(&q_drain, NULL);
    if (!fork_gate_locked)
        child_no_hdf5 = 1;
    fork_gate_locked = 0;
    kcap_qnode *n = q_head;
    while (n) { /* the parent writes these; the child's copies are just freed */
        kcap_qnode *next = n->next;
        kcap_node_free(n);
        n = next;
    }
    q_head = q_tail = NULL;
    q_bytes = 0;
    q_reserved = 0; /* reservations of the parent's other threads, which do not exist here */
    q_fixed = 0;
    q_count = 0;
    q_busy = 0;
    w_running = 0;
    w_stop = 0;
    w_consec_fail = 0;
    w_backoff_s = 0;
    atomic_store(&g_backoff_until_ns, 0);
    /* the parent's writer object belongs to threads that do not exist here */
    g_writer = NULL;
}
