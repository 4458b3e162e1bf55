/*
 * kcap_state.h — kcap_state.c: the process-wide state of libkcap that every layer reads, and
 * the only code that changes it: the parsed configuration, the capture mode (off / dormant /
 * active) with the fast-path flag the wrappers test, open CUDA graph captures, the counters,
 * the snapshot budget (KCAP_MAX and the current arming, kcap_budget.h) and the host's errno
 * around the one real call. Bottom layer: it calls only config, log and budget.
 */
#ifndef KCAP_STATE_H
#define KCAP_STATE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "kcap_config.h"
#include "kcap_slot.h"

/* ---- configuration ---- */
const kcap_config *kcap_cfg(void);
kcap_config *kcap_cfg_mut(void); /* initialisation only (kcap_capture.c) */
uint64_t kcap_now_ns(void);

/* ---- mode ---- */
enum { KCAP_M_OFF = 0, KCAP_M_DORMANT = 1, KCAP_M_ACTIVE = 2 };
int kcap_mode(void);
/* Sets the mode and the fast-path flag (slow while active or while a graph capture is open). */
void kcap_set_mode(int m);
/* Set when a call must take the slow path (not initialised yet, capture active, a graph
 * capture open). The dormant fast path is one relaxed load of this flag. */
extern atomic_int kcap_g_slow;
/* CUDA graph captures open in this process (kcap_interpose.c sees Begin/EndCapture). */
void kcap_graph_capture_begin(void);
void kcap_graph_capture_end(void);
int kcap_graph_capture_open(void);
/* The lock that orders mode changes against arm requests and fork. */
void kcap_state_lock(void);
void kcap_state_unlock(void);
void kcap_state_atfork_child(void); /* the lock re-initialised, counters and budget reset */

/* ---- counters ---- */
/* Every call that was selected but not captured is counted under exactly one reason, so
 * `captured + sum(dropped_*) + failures` adds up to the selected calls (graph replays
 * included). The first drop of each reason is logged with what to do about it. */
typedef struct kcap_stats {
    atomic_ullong calls, selected, captured, written, dropped_queue, dropped_cap,
        dropped_ring_full,   /* device staging ring busy with earlier snapshots */
        dropped_ring_big,    /* one snapshot larger than the whole ring (KCAP_RING_BYTES) */
        dropped_ring_nomem,  /* no ring: the device lacked the free memory for it */
        dropped_sites,       /* no graph / eager site left (a site table limit) */
        dropped_backoff,     /* writes kept failing: capture waits before retrying (kcap_queue.c) */
        skipped_graph, skipped_invalid, failed_record, failed_write, bytes_accepted,
        bytes_written_dense, graph_captured,
        shadow_not_kept,     /* shadow mode: selected, and the candidate agreed or could not
                                judge it (off, no such entry point): not kept */
        graph_twins,         /* executable graphs given a clean twin (kcap_graphexec.c) */
        graph_clean_launches, /* graph launches that ran the twin (capture not armed) */
        shadow_by_worker;    /* eager shadowed calls whose candidate kcap's worker thread
                                launched (kcap_gpu_shadow_async.c; not a drop reason) */
} kcap_stats;
extern kcap_stats kcap_g_stats;
/* All ring drops (the old single `ring=` counter). */
unsigned long long kcap_stats_ring_drops(void);
/* One line of every counter, `key=value` separated by spaces (stats line, arm status). */
int kcap_stats_format(char *buf, size_t n);
/* The stats line on stderr at exit (`when`: "stats"); silent for a process with no capture. */
void kcap_stats_line(const char *when);

/* ---- budget: one unit per snapshot (kcap_budget.h) ---- */
/* A unit for a selected call: 1 taken, 0 when this call must not be captured (a limit is
 * reached or its last units are in flight; counted as turned away). */
int kcap_reserve(void);
void kcap_unreserve(void); /* the reserved unit did not become a snapshot */
void kcap_commit(void);    /* it did (queued, or staged on the device) */
/* KCAP_MAX for the process; a new arming of `count` (0: disarm). */
void kcap_budget_set_max(unsigned long long max);
void kcap_budget_set_arming(unsigned long long count);
void kcap_budget_count_arming(int on);
int kcap_budget_counting_arming(void);
/* The GPU path: 1 while capture is active; the drainer reserves one unit to grant the
 * device (0: none left, not counted as turned away); a GPU unit was settled (captured or
 * given back); calls turned away for want of a unit so far; 1 when no limit applies. */
int kcap_gpu_armed(void);
int kcap_gpu_unit_take(void);
void kcap_gpu_unit_settled(int captured);
unsigned long long kcap_gpu_turned_away(void);
int kcap_gpu_unlimited(void);
/* KCAP_MAX_BYTES: 1 and the bytes counted as accepted when the snapshot fits, else 0. */
int kcap_bytes_fit(size_t n);

/* ---- the real call ---- */
/* errno as the host must see it: its value before the call until the real function has
 * run, then what the real function left (our own syscalls around it must not show). */
extern _Thread_local int kcap_t_errno;
/* The one real call of a captured call: kcap_t_errno going in, the library's coming out. */
int kcap_real(kcap_call_fn real, const void *a, void *ws, size_t wsb, void *stream);

#endif
