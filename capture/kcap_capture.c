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
#include "kcap_capture.h"

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

#include "kcap_arm.h"
#include "kcap_callrec.h"
#include "kcap_gpu.h"
#include "kcap_graphexec.h"
#include "kcap_log.h"
#include "kcap_mem.h"
#include "kcap_meta.h"
#include "kcap_names.h"
#include "kcap_queue.h"
#include "kcap_shadow.h"
#include "kcap_state.h"
#include "kcap_tags.h"

#define g_cfg (*kcap_cfg_mut()) /* filled here, at initialisation; read-only afterwards */

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static atomic_ullong g_seq;       /* calls seen while active */
static atomic_int g_stopped;      /* capture stopped for good */
static atomic_int g_child_restart; /* a forked child must restart its arming watcher */
static _Thread_local int t_busy;  /* recursion guard: a capture in progress on this thread */



/* KCAP_SHADOW made absolute when libkcap was loaded (kcap_capture_ctor), like KCAP_DIR. */
static char g_shadow_at_load[PATH_MAX];

/* A relative KCAP_DIR / KCAP_SHADOW that could not be made absolute at load (the working
 * directory unreadable, or the path too long): never resolved later against wherever the
 * host has chdir()ed by its first call. Capture (KCAP_DIR) or shadow mode (KCAP_SHADOW) is
 * then off, with a warning naming the variable (the review of libkcap's environment found
 * both taken against the later directory, a candidate loaded from there). */
static int g_dir_unresolved, g_shadow_unresolved;

static const char *kcap_env(const char *name, void *ud)
{
    (void)ud;
    if (!strcmp(name, "KCAP_SHADOW")) {
        if (g_shadow_unresolved)
            return NULL;
        if (g_shadow_at_load[0])
            return g_shadow_at_load;
    }
    return getenv(name);
}

/* ------------------------------------------------------------------------------------ */
/* exit and fork                                                                         */

static atomic_int g_exit_done;

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
    kcap_shadow_summary(g_cfg.dir);
}

static void kcap_register_atexit(void)
{
    /* registered after libhdf5 was initialised by the writer (kcap_queue.c calls this),
       so our flush runs before HDF5's own atexit tears the library down */
    atexit(kcap_atexit);
}

static void kcap_fork_prepare(void)
{
    kcap_state_lock();
    kcap_queue_atfork_prepare();
}

static void kcap_fork_parent(void)
{
    kcap_queue_atfork_parent();
    kcap_state_unlock();
}

static void kcap_fork_child(void)
{
    /* The child owns none of the parent's threads: reset every lock and counter, drop the
       inherited queue, and start over as its own process (its own pid in file names). */
    kcap_state_atfork_child(); /* its lock, counters and budget (the arming count kept) */
    /* held by another thread at fork (hashing a library file, writing a log line): never
       released in the child; the state they guard is re-checked or atomic. The interposer
       re-initialises its own lock (its pthread_atfork handler). */
    kcap_meta_atfork_child();
    kcap_log_atfork_child();
    kcap_names_init(); /* its own start time (arm requests) and run id */
    kcap_set_run_id(g_cfg.run_id);
    kcap_queue_atfork_child();
    kcap_arm_atfork_child();
    kcap_gpu_atfork_child();
    kcap_graphexec_atfork_child();
    atomic_store(&g_seq, 0);
    atomic_store(&g_exit_done, 0);
    if (kcap_mode() == KCAP_M_OFF)
        return;
    if (g_cfg.shadow[0]) {
        /* its own summary from zero; its watcher (kcap shadow CHILD) and summary thread
           restarted by its first call */
        kcap_shadow_atfork_child();
        atomic_store(&g_child_restart, 1);
    }
    if (g_cfg.dormant || !g_cfg.fork_follow) {
        kcap_budget_set_arming(0);
        kcap_budget_count_arming(1);
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
 * libkcap was loaded: a host that chdir()s before its first call must not move it (nor its
 * KCAP_SHADOW candidate: g_shadow_at_load). */
static char g_dir_at_load[PATH_MAX];

/* dst = cwd "/" rel (PATH_MAX bytes); 0, or -1 (dst empty) without a cwd or when too long. */
static int join_at_load(char *dst, const char *cwd, const char *rel)
{
    size_t a = cwd ? strlen(cwd) : 0, b = strlen(rel);
    dst[0] = '\0';
    if (!cwd || a + b + 2 >= PATH_MAX)
        return -1;
    memcpy(dst, cwd, a);
    dst[a] = '/';
    memcpy(dst + a + 1, rel, b + 1);
    return 0;
}

__attribute__((constructor(103))) static void kcap_capture_ctor(void)
{
    const char *d = getenv("KCAP_DIR");
    char buf[PATH_MAX];
    const char *cwd = getcwd(buf, sizeof buf);
    if (d && *d && d[0] != '/' && join_at_load(g_dir_at_load, cwd, d))
        g_dir_unresolved = 1;
    const char *c = getenv("KCAP_SHADOW"); /* a candidate given relative to that directory too */
    /* not there (yet): it is still the load directory's path, or nothing */
    if (c && *c && c[0] != '/' && !realpath(c, g_shadow_at_load) &&
        join_at_load(g_shadow_at_load, cwd, c))
        g_shadow_unresolved = 1;
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

/* Graph replays need kcap's staging nodes (the instrumented exec, not its clean twin). */
static int kcap_graph_nodes_wanted(void) { return kcap_gpu_armed() || kcap_shadow_on(); }

/* The whole initialisation, on a thread of ours (kcap_run_on_own_stack): mkdir, realpath
 * and the directory scan need more stack than a host thread may have. */
static void kcap_do_init_job(void *arg)
{
    (void)arg;
    char why[512];
    kcap_names_init();
    int rc = kcap_config_parse(&g_cfg, kcap_env, NULL, why, sizeof why);
    kcap_log_level = g_cfg.log;
    kcap_rank_init(); /* after KCAP_LOG: its warning about a RANK that is not a number obeys quiet */
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
            kcap_arm_start(g_cfg.dir, kcap_arm_request);
        return;
    }
    kcap_set_run_id(g_cfg.run_id);
    if (g_cfg.graph_twins) /* no predicate: no twin is made */
        kcap_graphexec_set_armed(kcap_graph_nodes_wanted);
    if (g_shadow_unresolved)
        kcap_log(KCAP_LOG_WARN, "KCAP_SHADOW=%.300s is relative and the working directory at load "
                 "could not be read (or the path is too long); shadow mode is off",
                 getenv("KCAP_SHADOW"));
    if (g_dir_unresolved && g_cfg.dir[0] != '/') {
        snprintf(why, sizeof why, "KCAP_DIR=%.300s is relative and the working directory at load "
                 "could not be read (or the path is too long)", g_cfg.dir);
        kcap_log(KCAP_LOG_WARN, "%s; capture is off", why);
        kcap_off(why);
        return;
    }
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
    if (g_cfg.shadow[0]) /* the directory is final now: the summary goes there */
        kcap_shadow_init(g_cfg.shadow, g_cfg.dir);
    pthread_atfork(kcap_fork_prepare, kcap_fork_parent, kcap_fork_child);
    kcap_register_atexit();
    kcap_queue_on_writer_ready(kcap_register_atexit); /* again once libhdf5 is up: ours first */
    kcap_budget_set_max(g_cfg.max);
    if (g_cfg.shadow[0]) /* `kcap shadow PID` swaps or stops the candidate live */
        kcap_arm_set_shadow_handler(kcap_shadow_request);
    if (g_cfg.shadow[0] && !g_cfg.dormant)
        kcap_arm_start(g_cfg.dir, kcap_arm_request);
    if (g_cfg.dormant) {
        kcap_budget_count_arming(1);
        kcap_set_mode(KCAP_M_DORMANT);
        kcap_arm_start(g_cfg.dir, kcap_arm_request);
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
    /* a dormant or shadow-mode child after fork takes one slow call to restart its arming
       watcher (and its shadow summary thread) */
    if (atomic_load(&g_child_restart) && atomic_exchange(&g_child_restart, 0)) {
        kcap_arm_start(g_cfg.dir, kcap_arm_request);
        if (g_cfg.shadow[0])
            kcap_shadow_summary_start();
        kcap_state_lock();
        if (kcap_mode() == KCAP_M_DORMANT)
            atomic_store(&kcap_g_slow, 0);
        kcap_state_unlock();
    }
}

int kcap_arm_request(uint64_t count, int off, int status_only, char *reply, size_t n)
{
    kcap_state_lock();
    int m = kcap_mode(), rc = 0;
    char stats[768];
    kcap_stats_format(stats, sizeof stats);
    if (status_only) {
        snprintf(reply, n, "ok %s\n%s\n", m == KCAP_M_ACTIVE ? "armed" : m == KCAP_M_DORMANT
                 ? "dormant" : "off", stats);
    } else if (m == KCAP_M_OFF || atomic_load(&g_stopped)) {
        snprintf(reply, n, "error capture is off in this process: %s\n%s\n",
                 g_off_why[0] ? g_off_why : "stopped", stats);
        rc = -1;
    } else if (off) {
        kcap_budget_set_arming(0);
        kcap_set_mode(KCAP_M_DORMANT);
        kcap_log(KCAP_LOG_INFO, "disarmed");
        snprintf(reply, n, "ok disarmed\n%s\n", stats);
    } else {
        kcap_budget_set_arming(count ? count : 1);
        kcap_set_mode(KCAP_M_ACTIVE);
        kcap_log(KCAP_LOG_INFO, "armed for %llu snapshots", (unsigned long long)(count ? count : 1));
        snprintf(reply, n, "ok armed for %llu snapshots\n%s\n",
                 (unsigned long long)(count ? count : 1), stats);
    }
    kcap_state_unlock();
    return rc;
}

void kcap_capture_stop(const char *why)
{
    if (atomic_exchange(&g_stopped, 1))
        return;
    kcap_off(why);
    kcap_log(KCAP_LOG_WARN, "capture stopped: %s", why);
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

int kcap_slow_call(kcap_slot *sl, const void *a, void *ws, size_t wsb, void *stream)
{
    kcap_call_fn real = atomic_load_explicit(&sl->real, memory_order_acquire);
    int save_errno = errno;
    kcap_init_once();
    int mode = kcap_mode();
    if (!t_busy && mode == KCAP_M_DORMANT && kcap_graph_capture_open()) {
        t_busy = 1;
        kcap_t_errno = save_errno;
        int st = kcap_graph_only(sl, real, a, ws, wsb, stream);
        t_busy = 0;
        errno = kcap_t_errno;
        return st;
    }
    if (t_busy || mode != KCAP_M_ACTIVE) {
        errno = save_errno;
        return real(a, ws, wsb, stream);
    }
    t_busy = 1;
    kcap_t_errno = save_errno;
    uint64_t seq = atomic_fetch_add(&g_seq, 1);
    atomic_fetch_add(&kcap_g_stats.calls, 1);
    int status;
    if (!kcap_config_selects(&g_cfg, seq) || !kcap_tags_select(&g_cfg) || !kcap_reserve()) {
        errno = save_errno;
        status = real(a, ws, wsb, stream);
    } else {
        atomic_fetch_add(&kcap_g_stats.selected, 1);
        status = kcap_capture_one(sl, real, a, ws, wsb, stream, seq);
        errno = kcap_t_errno;
    }
    t_busy = 0;
    return status;
}
