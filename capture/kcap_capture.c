/*
 * kcap_capture.c — the slow path of libkcap.so: configuration and the capture directory,
 * modes (off / dormant / active) and arming, selection and the snapshot budget, stats, and
 * the process-lifecycle hooks (exit flush, fork). Recording one call is kcap_callrec.c.
 *
 * The invariant everything here serves: the host sees exactly what it would see without
 * us. The real function is always called exactly once with the caller's arguments and its
 * status returned unchanged; every capture problem is counted, logged once and swallowed.
 * Initialisation runs once, on a thread of ours (small host stacks): it resolves KCAP_DIR to
 * an absolute path (relative to the working directory at load time), refuses a directory
 * other users can write, and removes temp files that dead processes left there.
 */
#include "kcap_cap.h"
#include "kcap_budget.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kcap_callrec.h"
#include "kcap_names.h"

enum { KCAP_M_OFF = 0, KCAP_M_DORMANT = 1, KCAP_M_ACTIVE = 2 };

kcap_stats kcap_g_stats;

static kcap_config g_cfg;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static atomic_int g_mode;
static atomic_ullong g_seq;       /* calls seen while active */
static kcap_budget g_budget;      /* KCAP_MAX and the current arming's count (kcap_budget.h) */
static atomic_int g_stopped;      /* capture stopped for good */
static atomic_int g_child_restart; /* a forked child must restart its arming watcher */
static _Thread_local int t_busy;  /* recursion guard: a capture in progress on this thread */
/* errno as the host must see it: its value before the call until the real function has run,
 * then what the real function left (our own syscalls around it must not show through) */
static _Thread_local int t_errno;
static pthread_mutex_t g_arm_lock = PTHREAD_MUTEX_INITIALIZER;

static atomic_int g_log_max;

const kcap_config *kcap_cfg(void) { return &g_cfg; }

uint64_t kcap_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

extern atomic_int kcap_g_graph_open;

static void kcap_set_mode(int m)
{
    atomic_store(&g_mode, m);
    atomic_store(&kcap_g_slow, m == KCAP_M_ACTIVE || atomic_load(&kcap_g_graph_open) > 0);
}

static const char *kcap_env(const char *name, void *ud)
{
    (void)ud;
    return getenv(name);
}

/* ------------------------------------------------------------------------------------ */
/* exit and fork                                                                         */

static atomic_int g_exit_done;

unsigned long long kcap_stats_ring_drops(void)
{
    kcap_stats *s = &kcap_g_stats;
    return (unsigned long long)s->dropped_ring_full + s->dropped_ring_big + s->dropped_ring_nomem +
           s->dropped_sites;
}

int kcap_stats_format(char *buf, size_t n)
{
    kcap_stats *s = &kcap_g_stats;
#define U(x) ((unsigned long long)atomic_load(&s->x))
    return snprintf(buf, n,
                    "calls=%llu captured=%llu written=%llu dropped(queue=%llu cap=%llu ring=%llu "
                    "ring_full=%llu too_big=%llu no_device_memory=%llu sites=%llu backoff=%llu) "
                    "skipped(graph=%llu invalid=%llu) failures(record=%llu write=%llu) "
                    "bytes=%llu written_bytes=%llu graph_captured=%llu",
                    U(calls), U(captured), U(written), U(dropped_queue), U(dropped_cap),
                    kcap_stats_ring_drops(), U(dropped_ring_full), U(dropped_ring_big),
                    U(dropped_ring_nomem), U(dropped_sites), U(dropped_backoff), U(skipped_graph), U(skipped_invalid),
                    U(failed_record), U(failed_write), U(bytes_accepted), U(bytes_written_dense),
                    U(graph_captured));
#undef U
}

void kcap_stats_line(const char *when)
{
    kcap_stats *s = &kcap_g_stats;
    if (!atomic_load(&s->calls) && !atomic_load(&s->skipped_graph) && !atomic_load(&s->graph_captured) &&
        !kcap_stats_ring_drops())
        return; /* a process that never made a captured call stays silent */
    char line[768];
    kcap_stats_format(line, sizeof line);
    kcap_log(KCAP_LOG_WARN, "%s: %s", when, line);
}

static void kcap_atexit(void)
{
    if (atomic_exchange(&g_exit_done, 1))
        return;
    /* no new captures from other threads still running while we exit */
    kcap_set_mode(KCAP_M_OFF);
    /* one deadline for both stages: the GPU drain gets at most half, the writer the rest */
    uint64_t t0 = kcap_now_ns();
    kcap_gpu_shutdown(g_cfg.flush_ms / 2);
    int spent = (int)((kcap_now_ns() - t0) / 1000000ull);
    int left = kcap_queue_flush(g_cfg.flush_ms > spent ? g_cfg.flush_ms - spent : 0);
    if (left > 0)
        kcap_log(KCAP_LOG_WARN, "exit: %d snapshots still pending after %d ms were abandoned",
                 left, g_cfg.flush_ms);
    kcap_stats_line("stats");
}

static void kcap_register_atexit(void)
{
    /* registered after libhdf5 was initialised by the writer (kcap_queue.c calls this),
       so our flush runs before HDF5's own atexit tears the library down */
    atexit(kcap_atexit);
}

static void kcap_fork_prepare(void)
{
    pthread_mutex_lock(&g_arm_lock);
    kcap_queue_atfork_prepare();
}

static void kcap_fork_parent(void)
{
    kcap_queue_atfork_parent();
    pthread_mutex_unlock(&g_arm_lock);
}

static void kcap_fork_child(void)
{
    /* The child owns none of the parent's threads: reset every lock and counter, drop the
       inherited queue, and start over as its own process (its own pid in file names). */
    pthread_mutex_init(&g_arm_lock, NULL);
    /* held by another thread at fork (hashing a library file, handing out a wrapper slot,
       writing a log line): never released in the child; the state they guard is re-checked
       or atomic */
    kcap_meta_atfork_child();
    kcap_log_atfork_child();
    kcap_interpose_atfork_child();
    kcap_names_init(); /* its own start time (arm requests) and run id */
    kcap_set_run_id(g_cfg.run_id);
    kcap_queue_atfork_child();
    kcap_arm_atfork_child();
    kcap_gpu_atfork_child();
    memset(&kcap_g_stats, 0, sizeof kcap_g_stats);
    atomic_store(&g_seq, 0);
    const int counting = atomic_load(&g_budget.arm_counting);
    kcap_budget_reset(&g_budget); /* the parent's snapshots in flight are not the child's */
    g_budget.max = g_cfg.max;
    atomic_store(&g_budget.arm_counting, counting);
    atomic_store(&g_exit_done, 0);
    int m = atomic_load(&g_mode);
    if (m == KCAP_M_OFF)
        return;
    if (g_cfg.dormant || !g_cfg.fork_follow) {
        kcap_budget_arm(&g_budget, 0);
        atomic_store(&g_budget.arm_counting, 1);
        kcap_set_mode(KCAP_M_DORMANT);
        /* the watcher is restarted lazily by the child's first verify call */
        atomic_store(&g_child_restart, 1);
        atomic_store(&kcap_g_slow, 1);
    } else {
        kcap_set_mode(KCAP_M_ACTIVE);
    }
}

/* ------------------------------------------------------------------------------------ */
/* initialisation                                                                        */

/* KCAP_DIR as given, made absolute against the working directory the process had when
 * libkcap was loaded: a host that chdir()s before its first call must not move it. */
static char g_dir_at_load[PATH_MAX];

__attribute__((constructor(103))) static void kcap_capture_ctor(void)
{
    const char *d = getenv("KCAP_DIR");
    char cwd[PATH_MAX];
    if (d && *d && d[0] != '/' && getcwd(cwd, sizeof cwd)) {
        size_t a = strlen(cwd), b = strlen(d);
        if (a + b + 2 < sizeof g_dir_at_load) {
            memcpy(g_dir_at_load, cwd, a);
            g_dir_at_load[a] = '/';
            memcpy(g_dir_at_load + a + 1, d, b + 1);
        }
    }
}

/* Why capture is off (for `kcap arm`'s reply); "" while it is not. */
static char g_off_why[320];

static void kcap_off(const char *why)
{
    snprintf(g_off_why, sizeof g_off_why, "%.300s", why);
    kcap_set_mode(KCAP_M_OFF);
}

/* A directory that another user can write is a place where anyone could plant files for
 * us to read (arm requests) or to be overwritten: refused. */
static int kcap_dir_private(const char *dir, char *why, size_t n)
{
    struct stat st;
    if (stat(dir, &st))
        return snprintf(why, n, "KCAP_DIR=%.300s: %s", dir, strerror(errno)), -1;
    if (st.st_uid != geteuid() && st.st_uid != 0)
        return snprintf(why, n, "KCAP_DIR=%.300s belongs to uid %ld, not to this process's uid %ld",
                        dir, (long)st.st_uid, (long)geteuid()), -1;
    if (st.st_mode & (S_IWGRP | S_IWOTH))
        return snprintf(why, n, "KCAP_DIR=%.300s is writable by other users (mode %04o); use a "
                        "private directory", dir, (unsigned)(st.st_mode & 07777)), -1;
    return 0;
}

/* The whole initialisation, on a thread of ours (kcap_run_on_own_stack): mkdir, realpath
 * and the directory scan need more stack than a host thread may have. */
static void kcap_do_init_job(void *arg)
{
    (void)arg;
    char why[512];
    kcap_names_init();
    kcap_rank_init();
    int rc = kcap_config_parse(&g_cfg, kcap_env, NULL, why, sizeof why);
    kcap_log_level = g_cfg.log;
    if (rc) {
        /* even KCAP_LOG=quiet does not hide a configuration the user got wrong, except
           an unset KCAP_DIR under quiet */
        if (getenv("KCAP_DIR") || g_cfg.log > KCAP_LOG_QUIET) {
            int save = kcap_log_level;
            kcap_log_level = KCAP_LOG_WARN;
            kcap_log(KCAP_LOG_WARN, "%s; capture is off", why);
            kcap_log_level = save;
        }
        kcap_off(why);
        /* still answer `kcap arm` (with the reason) when the directory itself is usable */
        const char *dm = getenv("KCAP_DORMANT");
        int dormant = 0;
        kcap_error me = {0};
        if (dm && !kcap_parse_bool(dm, &dormant) && dormant && g_cfg.dir[0] == '/' && !kcap_mkdir_private(g_cfg.dir, &me) &&
            !kcap_dir_private(g_cfg.dir, why, sizeof why))
            kcap_arm_start(g_cfg.dir);
        return;
    }
    kcap_set_run_id(g_cfg.run_id);
    if (g_dir_at_load[0] && g_cfg.dir[0] != '/')
        snprintf(g_cfg.dir, sizeof g_cfg.dir, "%s", g_dir_at_load);
    kcap_error e = {0};
    if (kcap_mkdir_private(g_cfg.dir, &e)) {
        kcap_log(KCAP_LOG_WARN, "cannot create KCAP_DIR: %s; capture is off", e.msg);
        kcap_off(e.msg);
        return;
    }
    char abs[PATH_MAX];
    if (realpath(g_cfg.dir, abs))
        snprintf(g_cfg.dir, sizeof g_cfg.dir, "%s", abs);
    if (kcap_dir_private(g_cfg.dir, why, sizeof why)) {
        kcap_log(KCAP_LOG_WARN, "%s; capture is off", why);
        kcap_off(why);
        return;
    }
    int cleaned = kcap_clean_stale(g_cfg.dir, KCAP_STALE_AGE_S);
    if (cleaned)
        kcap_log(KCAP_LOG_INFO, "removed %d temp files of dead processes from %s", cleaned,
                 g_cfg.dir);
    pthread_atfork(kcap_fork_prepare, kcap_fork_parent, kcap_fork_child);
    kcap_register_atexit();
    g_budget.max = g_cfg.max;
    if (g_cfg.dormant) {
        atomic_store(&g_budget.arm_counting, 1);
        kcap_set_mode(KCAP_M_DORMANT);
        kcap_arm_start(g_cfg.dir);
        kcap_log(KCAP_LOG_INFO, "dormant; arm with: kcap arm %ld", (long)getpid());
    } else {
        kcap_set_mode(KCAP_M_ACTIVE);
        kcap_log(KCAP_LOG_INFO, "capturing into %s", g_cfg.dir);
    }
}

static void kcap_do_init(void)
{
    if (kcap_run_on_own_stack(kcap_do_init_job, NULL))
        kcap_off("no thread could be started for the initialisation");
}

void kcap_init_once(void)
{
    pthread_once(&g_once, kcap_do_init);
    /* a dormant child after fork takes one slow call to restart its arming watcher */
    if (atomic_load(&g_child_restart) && atomic_exchange(&g_child_restart, 0)) {
        kcap_arm_start(g_cfg.dir);
        pthread_mutex_lock(&g_arm_lock);
        if (atomic_load(&g_mode) == KCAP_M_DORMANT)
            atomic_store(&kcap_g_slow, 0);
        pthread_mutex_unlock(&g_arm_lock);
    }
}

int kcap_arm_request(uint64_t count, int off, int status_only, char *reply, size_t n)
{
    pthread_mutex_lock(&g_arm_lock);
    int m = atomic_load(&g_mode), rc = 0;
    char stats[640];
    kcap_stats_format(stats, sizeof stats);
    if (status_only) {
        snprintf(reply, n, "ok %s\n%s\n", m == KCAP_M_ACTIVE ? "armed" : m == KCAP_M_DORMANT
                 ? "dormant" : "off", stats);
    } else if (m == KCAP_M_OFF || atomic_load(&g_stopped)) {
        snprintf(reply, n, "error capture is off in this process: %s\n%s\n",
                 g_off_why[0] ? g_off_why : "stopped", stats);
        rc = -1;
    } else if (off) {
        kcap_budget_arm(&g_budget, 0);
        kcap_set_mode(KCAP_M_DORMANT);
        kcap_log(KCAP_LOG_INFO, "disarmed");
        snprintf(reply, n, "ok disarmed\n%s\n", stats);
    } else {
        kcap_budget_arm(&g_budget, count ? count : 1);
        kcap_set_mode(KCAP_M_ACTIVE);
        kcap_log(KCAP_LOG_INFO, "armed for %llu snapshots", (unsigned long long)(count ? count : 1));
        snprintf(reply, n, "ok armed for %llu snapshots\n%s\n",
                 (unsigned long long)(count ? count : 1), stats);
    }
    pthread_mutex_unlock(&g_arm_lock);
    return rc;
}

void kcap_capture_stop(const char *why)
{
    if (atomic_exchange(&g_stopped, 1))
        return;
    kcap_off(why);
    kcap_log(KCAP_LOG_WARN, "capture stopped: %s", why);
}

/* A verdict of the budget that changes the mode: KCAP_MAX committed (capture off for good),
 * or the arming used up with nothing in flight (back to dormant, unless re-armed meanwhile). */
static void kcap_budget_apply(int verdict)
{
    if (verdict == KCAP_BUDGET_MAX_DONE) {
        kcap_log_once(&g_log_max, KCAP_LOG_INFO, "KCAP_MAX=%llu snapshots reached; capture off",
                      (unsigned long long)g_cfg.max);
        kcap_set_mode(KCAP_M_OFF);
    } else if (verdict == KCAP_BUDGET_ARM_DONE) {
        pthread_mutex_lock(&g_arm_lock);
        if (!atomic_load(&g_budget.arm_left) && atomic_load(&g_mode) == KCAP_M_ACTIVE)
            kcap_set_mode(KCAP_M_DORMANT);
        pthread_mutex_unlock(&g_arm_lock);
    }
}

/* 1 while capture is active: the drainer grants graph-replay units to the device only then,
 * and takes the unused ones back when it is not. */
int kcap_gpu_armed(void) { return atomic_load(&g_mode) == KCAP_M_ACTIVE; }

/* Graph captures open in this process (cudaStreamBeginCapture/EndCapture interposed): while
 * any is open, calls take the slow path even when dormant, to install their graph nodes. */
atomic_int kcap_g_graph_open;

void kcap_graph_capture_begin(void)
{
    atomic_fetch_add(&kcap_g_graph_open, 1);
    atomic_store(&kcap_g_slow, 1);
}

void kcap_graph_capture_end(void)
{
    if (atomic_fetch_sub(&kcap_g_graph_open, 1) <= 1) {
        atomic_store(&kcap_g_graph_open, 0);
        atomic_store(&kcap_g_slow, atomic_load(&g_mode) == KCAP_M_ACTIVE);
    }
}

/* The one real call of a captured call: errno as the host left it going in, and what the
 * real function leaves is what the host will see coming out (kcap_slow_call restores it). */
int kcap_real(kcap_call_fn real, const void *a, void *ws, size_t wsb, void *stream)
{
    errno = t_errno;
    int st = real(a, ws, wsb, stream);
    t_errno = errno;
    return st;
}

/* A call made while a graph capture is open in a dormant process: install the staging nodes
 * (the device decides at each replay whether to capture). */
static int kcap_graph_only(kcap_slot *sl, kcap_call_fn real, const void *a, void *ws,
                           size_t wsb, void *stream)
{
    kcap_devctx dc = {0};
    dc.stream = stream;
    if (!kcap_call_accepted(sl, real, a, ws, wsb) ||
        !kcap_mem_classify(kcap_call_tensor_ptr(sl->desc, a, sl->desc->probe), &dc.cu, &dc.ctx))
        return kcap_real(real, a, ws, wsb, stream);
    void *saved = NULL;
    if (kcap_dev_push(&dc, &saved))
        return kcap_real(real, a, ws, wsb, stream);
    int status = 0, h = 1;
    if (kcap_dev_stream_capturing(&dc))
        h = kcap_gpu_capture(sl, a, ws, wsb, stream, 0, 1, &status);
    kcap_dev_pop(&dc, saved);
    return h == 1 ? kcap_real(real, a, ws, wsb, stream) : status;
}

/* ------------------------------------------------------------------------------------ */
/* one call                                                                              */

/* Give back a KCAP_MAX / arming reservation that did not turn into a snapshot. */
void kcap_unreserve(void) { kcap_budget_release(&g_budget); }

/* Take a reservation; 0 when this call must not be captured (a limit is reached, or its last
 * units are still in flight). */
static atomic_ullong g_turned_away; /* calls refused a unit only because all were in use */

static int kcap_reserve_unit(void)
{
    int v = kcap_budget_reserve(&g_budget);
    if (v == KCAP_BUDGET_TAKEN)
        return 1;
    kcap_budget_apply(v);
    return 0;
}

static int kcap_reserve(void)
{
    int v = kcap_budget_reserve(&g_budget);
    if (v == KCAP_BUDGET_TAKEN)
        return 1;
    if (v == KCAP_BUDGET_WAIT)
        atomic_fetch_add(&g_turned_away, 1);
    kcap_budget_apply(v);
    return 0;
}

/* The reservation became a snapshot (queued for writing, or staged on the device). */
void kcap_commit(void) { kcap_budget_apply(kcap_budget_commit(&g_budget)); }

/* A unit reserved for the GPU path — an eager call staged on the device, or one the drainer
 * granted the device for graph replays — has been settled: it became a snapshot (commit) or
 * the device, the read-back or a revocation dropped it (give it back, so that a later call
 * makes up for it and `kcap arm --count N` still yields N). Every GPU snapshot holds a unit
 * reserved on the host before the device could use it, so eager and graph captures share
 * one exact budget. */
void kcap_gpu_unit_settled(int captured)
{
    if (captured)
        kcap_commit();
    else
        kcap_unreserve();
}

/* How many selected calls were turned away because every unit was reserved (by calls in
 * flight, or granted to the device): the drainer takes granted units the device leaves
 * idle back when this grows. */
unsigned long long kcap_gpu_turned_away(void) { return atomic_load(&g_turned_away); }

/* 1 when no limit applies (no KCAP_MAX, no arming count): granting units starves nobody. */
int kcap_gpu_unlimited(void) { return kcap_budget_left(&g_budget) >= (1ull << 30); }

/* The drainer reserves one unit to grant the device for graph replays; 0 when none is left
 * (not counted as a call turned away). */
int kcap_gpu_unit_take(void) { return atomic_load(&g_mode) == KCAP_M_ACTIVE && kcap_reserve_unit(); }

int kcap_slow_call(kcap_slot *sl, const void *a, void *ws, size_t wsb, void *stream)
{
    kcap_call_fn real = atomic_load_explicit(&sl->real, memory_order_acquire);
    int save_errno = errno;
    kcap_init_once();
    int mode = atomic_load_explicit(&g_mode, memory_order_relaxed);
    if (!t_busy && mode == KCAP_M_DORMANT && atomic_load(&kcap_g_graph_open)) {
        t_busy = 1;
        t_errno = save_errno;
        int st = kcap_graph_only(sl, real, a, ws, wsb, stream);
        t_busy = 0;
        errno = t_errno;
        return st;
    }
    if (t_busy || mode != KCAP_M_ACTIVE) {
        errno = save_errno;
        return real(a, ws, wsb, stream);
    }
    t_busy = 1;
    t_errno = save_errno;
    uint64_t seq = atomic_fetch_add(&g_seq, 1);
    atomic_fetch_add(&kcap_g_stats.calls, 1);
    int status;
    if (!kcap_config_selects(&g_cfg, seq) || !kcap_reserve()) {
        errno = save_errno;
        status = real(a, ws, wsb, stream);
    } else {
        atomic_fetch_add(&kcap_g_stats.selected, 1);
        status = kcap_capture_one(sl, real, a, ws, wsb, stream, seq);
        errno = t_errno;
    }
    t_busy = 0;
    return status;
}

/* Exposed for kcap_queue.c. */
void kcap_capture_registered_atexit(void) __attribute__((visibility("hidden")));
void kcap_capture_registered_atexit(void) { kcap_register_atexit(); }
