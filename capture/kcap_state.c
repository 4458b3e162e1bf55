/*
 * kcap_state.c — the process-wide state of libkcap (kcap_state.h): configuration, mode and
 * the fast-path flag, open graph captures, counters, the snapshot budget and the host's
 * errno around the real call. Every change of mode happens here, under one lock, so the
 * layers above only ask for one (arming, KCAP_MAX reached, disarm, fork).
 */
#include "kcap_state.h"
#include "kcap_budget.h"
#include "kcap_log.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

kcap_stats kcap_g_stats;
atomic_int kcap_g_slow = 1; /* 1 until the first call has initialised the configuration */
_Thread_local int kcap_t_errno;

static kcap_config g_cfg;
static atomic_int g_mode;
static kcap_budget g_budget; /* KCAP_MAX and the current arming's count (kcap_budget.h) */
static pthread_mutex_t g_arm_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int g_log_max;
/* Graph captures open in this process (cudaStreamBeginCapture/EndCapture interposed): while
 * any is open, calls take the slow path even when dormant, to install their graph nodes. */
static atomic_int g_graph_open;

const kcap_config *kcap_cfg(void) { return &g_cfg; }
kcap_config *kcap_cfg_mut(void) { return &g_cfg; }

uint64_t kcap_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int kcap_mode(void) { return atomic_load(&g_mode); }

void kcap_set_mode(int m)
{
    atomic_store(&g_mode, m);
    atomic_store(&kcap_g_slow, m == KCAP_M_ACTIVE || atomic_load(&g_graph_open) > 0);
}

void kcap_state_lock(void) { pthread_mutex_lock(&g_arm_lock); }
void kcap_state_unlock(void) { pthread_mutex_unlock(&g_arm_lock); }

void kcap_graph_capture_begin(void)
{
    atomic_fetch_add(&g_graph_open, 1);
    atomic_store(&kcap_g_slow, 1);
}

void kcap_graph_capture_end(void)
{
    if (atomic_fetch_sub(&g_graph_open, 1) <= 1) {
        atomic_store(&g_graph_open, 0);
        atomic_store(&kcap_g_slow, atomic_load(&g_mode) == KCAP_M_ACTIVE);
    }
}

int kcap_graph_capture_open(void) { return atomic_load(&g_graph_open) > 0; }

/* ------------------------------------------------------------------------------------ */
/* counters                                                                              */

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
                    "bytes=%llu written_bytes=%llu graph_captured=%llu shadow_not_kept=%llu "
                    "graph_twins=%llu graph_clean_launches=%llu shadow_by_worker=%llu",
                    U(calls), U(captured), U(written), U(dropped_queue), U(dropped_cap),
                    kcap_stats_ring_drops(), U(dropped_ring_full), U(dropped_ring_big),
                    U(dropped_ring_nomem), U(dropped_sites), U(dropped_backoff), U(skipped_graph), U(skipped_invalid),
                    U(failed_record), U(failed_write), U(bytes_accepted), U(bytes_written_dense),
                    U(graph_captured), U(shadow_not_kept), U(graph_twins), U(graph_clean_launches),
                    U(shadow_by_worker));
#undef U
}

void kcap_stats_line(const char *when)
{
    kcap_stats *s = &kcap_g_stats;
    if (!atomic_load(&s->calls) && !atomic_load(&s->skipped_graph) && !atomic_load(&s->graph_captured) &&
        !kcap_stats_ring_drops() && !atomic_load(&s->graph_twins))
        return; /* a process that never made a captured call (nor a graph twin) stays silent */
    char line[896];
    kcap_stats_format(line, sizeof line);
    kcap_log(KCAP_LOG_WARN, "%s: %s", when, line);
}

/* ------------------------------------------------------------------------------------ */
/* budget                                                                                */

void kcap_budget_set_max(unsigned long long max) { g_budget.max = max; }
void kcap_budget_set_arming(unsigned long long count) { kcap_budget_arm(&g_budget, count); }
void kcap_budget_count_arming(int on) { atomic_store(&g_budget.arm_counting, on); }
int kcap_budget_counting_arming(void) { return atomic_load(&g_budget.arm_counting); }

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

int kcap_reserve(void)
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

/* 1 while capture is active: the drainer grants graph-replay units to the device only then,
 * and takes the unused ones back when it is not. */
int kcap_gpu_armed(void) { return atomic_load(&g_mode) == KCAP_M_ACTIVE; }

/* Would this snapshot break KCAP_MAX_BYTES? Reserves the bytes when it fits. */
int kcap_bytes_fit(size_t n)
{
    if (!g_cfg.max_bytes) {
        atomic_fetch_add(&kcap_g_stats.bytes_accepted, n);
        return 1;
    }
    unsigned long long cur = atomic_load(&kcap_g_stats.bytes_accepted);
    do {
        if (cur + n > g_cfg.max_bytes)
            return 0;
    } while (!atomic_compare_exchange_weak(&kcap_g_stats.bytes_accepted, &cur, cur + n));
    return 1;
}

/* ------------------------------------------------------------------------------------ */
/* the real call                                                                         */

/* The one real call of a captured call: errno as the host left it going in, and what the
 * real function leaves is what the host will see coming out (kcap_slow_call restores it). */
int kcap_real(kcap_call_fn real, const void *a, void *ws, size_t wsb, void *stream)
{
    errno = kcap_t_errno;
    int st = real(a, ws, wsb, stream);
    kcap_t_errno = errno;
    return st;
}

void kcap_state_atfork_child(void)
{
    pthread_mutex_init(&g_arm_lock, NULL);
    memset(&kcap_g_stats, 0, sizeof kcap_g_stats);
    const int counting = atomic_load(&g_budget.arm_counting);
    kcap_budget_reset(&g_budget); /* the parent's snapshots in flight are not the child's */
    g_budget.max = g_cfg.max;
    atomic_store(&g_budget.arm_counting, counting);
}
