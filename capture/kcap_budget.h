/*
 * kcap_budget.h — how many snapshots capture may still take: KCAP_MAX for the process and the
 * count of the current `kcap arm`. Lock-free (C11 atomics), no I/O, no mode changes: the
 * caller (kcap_capture.c) turns the verdicts into mode changes, so this logic is unit-tested
 * on its own (tests/capture/test_capture_budget.c).
 *
 * A call that wants a snapshot reserves one unit first, then either commits it (the snapshot
 * was queued for writing, or staged on the device) or releases it (dropped or failed). A
 * limit ends capture only once COMMITTED snapshots reach it: while the last units are merely
 * reserved by calls still in flight, other calls are turned away (KCAP_BUDGET_WAIT) but
 * capture stays on, so a unit whose snapshot fails is taken again by a later call —
 * KCAP_MAX=N yields N snapshots, not N-1 (and `kcap arm --count N` likewise).
 */
#ifndef KCAP_BUDGET_H
#define KCAP_BUDGET_H

#include <stdatomic.h>

typedef struct kcap_budget {
    unsigned long long max;     /* KCAP_MAX; 0 = no limit (set before any call) */
    atomic_ullong reserved;     /* units reserved or committed against max */
    atomic_ullong committed;    /* snapshots committed (counted against max) */
    atomic_int arm_counting;    /* snapshots limited by `kcap arm --count` (dormant mode) */
    atomic_ullong arm_left;     /* units of the current arming not reserved yet */
    atomic_ullong arm_inflight; /* arming units reserved, neither committed nor released */
} kcap_budget;

/* Verdicts of reserve / commit / device. */
enum {
    KCAP_BUDGET_TAKEN = 0,    /* reserve: the unit is the caller's; commit/device: nothing to do */
    KCAP_BUDGET_WAIT = 1,     /* reserve: full for now (units in flight may come back) */
    KCAP_BUDGET_MAX_DONE = 2, /* KCAP_MAX snapshots committed: capture is over */
    KCAP_BUDGET_ARM_DONE = 3  /* the arming is used up, none in flight: back to dormant */
};

/* Everything to zero (no limit, not counting); then set max / arm_counting. */
void kcap_budget_reset(kcap_budget *b);

/* A new arming of `count` snapshots (0 = disarm). Units in flight from before still count
 * when they come back. */
void kcap_budget_arm(kcap_budget *b, unsigned long long count);

int kcap_budget_reserve(kcap_budget *b);
void kcap_budget_release(kcap_budget *b);
int kcap_budget_commit(kcap_budget *b);

/* A snapshot the device took on its own (a graph replay): reserved and committed at once. */
int kcap_budget_device(kcap_budget *b);

/* Snapshots still allowed (what the device may take on its own), capped at 2^30. */
unsigned long long kcap_budget_left(kcap_budget *b);

#endif
