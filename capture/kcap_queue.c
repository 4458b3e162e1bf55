/*
 * kcap_queue.c — the bounded hand-off between the host's calling threads and the writer.
 *
 * Calling threads only copy tensors into host memory and push the snapshot here; the one
 * writer thread does the slow part (shuffle + zstd + HDF5 + fsync, kcap_snapshot_write, which
 * parallelises compression internally). The queue is capped in bytes: a snapshot that does
 * not fit is refused (the caller drops and counts it), so a slow disk can never make the
 * host's memory grow or its calls wait. Repeated write failures (disk full, permission
 * denied) stop capture instead of burning CPU on snapshots that cannot be written.
 *
 * Fork: prepare takes the write lock (bounded wait) and the queue lock, so the child never
 * inherits libhdf5 in the middle of a write or a half-updated queue; the child drops the
 * parent's pending snapshots and starts its own writer when it first needs one.
 */
#include "kcap_cap.h"

#include <errno.h>
#include <hdf5.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
static pthread_mutex_t w_lock = PTHREAD_MUTEX_INITIALIZER; /* held around each file write */
static kcap_qnode *q_head, *q_tail;
static size_t q_bytes;
static uint64_t q_count;
static int q_busy;          /* the writer holds a popped snapshot */
static int w_running;       /* writer thread started */
static int w_stop;          /* writer asked to exit */
static int w_consec_fail;
static int fork_w_locked;   /* prepare got w_lock */
static int child_no_hdf5;   /* fork happened mid-write: the child must not touch libhdf5 */
static kcap_writer *g_writer;
static atomic_int g_log_write, g_log_writer;

void kcap_capture_registered_atexit(void);

static void kcap_node_free(kcap_qnode *n)
{
    if (n) {
        kcap_snapshot_free(n->snap);
        free(n);
    }
}

static void kcap_write_one(kcap_qnode *n)
{
    const kcap_config *c = kcap_cfg();
    char path[PATH_MAX + 160];
    /* rank only when known: TP ranks sharing a directory differ by rank and pid */
    char rank[24] = "";
    if (n->rank >= 0)
        snprintf(rank, sizeof rank, "-r%d", n->rank);
    /* Graph replays are numbered by their own device-side ticket, eager calls by the host
     * call counter: "-g" vs "-s" keeps the two sequences from overwriting each other. */
    snprintf(path, sizeof path, "%s/%s%s-p%ld-%s%06llu.h5", c->dir, n->snap->meta.call, rank,
             (long)n->snap->meta.pid, n->snap->meta.in_stream_capture ? "g" : "s",
             (unsigned long long)n->seq);
    kcap_error e = {0};
    int rc = g_writer ? kcap_snapshot_write(g_writer, n->snap, path, &e) : KCAP_ERR_NOMEM;
    if (rc) {
        atomic_fetch_add(&kcap_g_stats.failed_write, 1);
        kcap_log_once(&g_log_write, KCAP_LOG_WARN, "writing %s failed: %s", path,
                      e.msg[0] ? e.msg : kcap_err_string(rc));
        if (++w_consec_fail >= 3) {
            char why[256];
            snprintf(why, sizeof why, "3 snapshot writes in a row failed (%s)",
                     kcap_err_string(rc));
            kcap_capture_stop(why);
        }
    } else {
        w_consec_fail = 0;
        atomic_fetch_add(&kcap_g_stats.written, 1);
        atomic_fetch_add(&kcap_g_stats.bytes_written_dense, n->bytes);
        kcap_log(KCAP_LOG_INFO, "wrote %s", path);
    }
}

static void *kcap_writer_main(void *arg)
{
    (void)arg;
    const kcap_config *c = kcap_cfg();
    kcap_writer_opts o = {0};
    o.threads = c->threads;
    o.level = c->level;
    kcap_error e = {0};
    /* Keep libhdf5 from registering its own atexit teardown when we are the first to use
       it: our exit flush must find the library alive, and a teardown that walks objects a
       failed write left open (disk full) has been seen to crash the host at exit. No-op
       when the host initialised HDF5 itself. */
    pthread_mutex_lock(&w_lock); /* HDF5 is in use: a fork now would catch it half-way */
    H5dont_atexit();
    g_writer = kcap_writer_create(&o, &e);
    if (!g_writer)
        kcap_log_once(&g_log_writer, KCAP_LOG_WARN, "cannot start the snapshot writer: %s",
                      e.msg[0] ? e.msg : kcap_err_string(e.code));
    kcap_h5zstd_register();
    pthread_mutex_unlock(&w_lock);
    /* libhdf5 is initialised now: an atexit registered after it runs before its teardown */
    kcap_capture_registered_atexit();
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

        pthread_mutex_lock(&w_lock);
        kcap_write_one(n);
        pthread_mutex_unlock(&w_lock);

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

/* Called with q_lock held. */
static int kcap_writer_ensure(void)
{
    if (w_running)
        return 0;
    if (child_no_hdf5)
        return KCAP_ERR_UNSUPPORTED;
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
    w_running = 1;
    w_stop = 0;
    return 0;
}

int kcap_queue_would_fit(size_t bytes)
{
    const kcap_config *c = kcap_cfg();
    pthread_mutex_lock(&q_lock);
    int ok = q_bytes + bytes <= c->queue_bytes && q_bytes < c->queue_bytes;
    pthread_mutex_unlock(&q_lock);
    return ok;
}

int kcap_queue_push(kcap_snapshot *s, uint64_t seq, int rank)
{
    const kcap_config *c = kcap_cfg();
    size_t bytes = kcap_snapshot_bytes(s);
    kcap_qnode *n = calloc(1, sizeof *n);
    if (!n)
        return KCAP_ERR_NOMEM;
    n->snap = s;
    n->bytes = bytes;
    n->seq = seq;
    n->rank = rank;
    pthread_mutex_lock(&q_lock);
    if (q_bytes + bytes > c->queue_bytes || kcap_writer_ensure()) {
        pthread_mutex_unlock(&q_lock);
        free(n);
        return KCAP_ERR_FULL;
    }
    if (q_tail)
        q_tail->next = n;
    else
        q_head = n;
    q_tail = n;
    q_bytes += bytes;
    q_count++;
    pthread_cond_signal(&q_cond);
    pthread_mutex_unlock(&q_lock);
    return 0;
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
    /* Wait (bounded) for a write in progress to finish so the child never inherits libhdf5
       half-way through an operation. */
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 2;
    fork_w_locked = pthread_mutex_timedlock(&w_lock, &dl) == 0;
    pthread_mutex_lock(&q_lock);
}

void kcap_queue_atfork_parent(void)
{
    pthread_mutex_unlock(&q_lock);
    if (fork_w_locked)
        pthread_mutex_unlock(&w_lock);
}

void kcap_queue_atfork_child(void)
{
    pthread_mutex_init(&q_lock, NULL);
    pthread_mutex_init(&w_lock, NULL);
    pthread_cond_init(&q_cond, NULL);
    pthread_cond_init(&q_drain, NULL);
    kcap_qnode *n = q_head;
    while (n) { /* the parent writes these; the child's copies are just freed */
        kcap_qnode *next = n->next;
        kcap_node_free(n);
        n = next;
    }
    q_head = q_tail = NULL;
    q_bytes = 0;
    q_count = 0;
    q_busy = 0;
    w_running = 0;
    w_stop = 0;
    w_consec_fail = 0;
    /* the parent's writer object belongs to threads that do not exist here */
    g_writer = NULL;
    if (!fork_w_locked)
        child_no_hdf5 = 1;
    fork_w_locked = 0;
}
