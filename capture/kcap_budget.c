/*
 * kcap_budget.c — the snapshot budget (KCAP_MAX and `kcap arm --count`): reserve a unit
 * before recording, then commit or release it; limits end capture only on committed
 * snapshots. See kcap_budget.h for the contract; everything here is a few atomics.
 */
#include "kcap_budget.h"

void kcap_budget_reset(kcap_budget *b)
{
    b->max = 0;
    atomic_store(&b->reserved, 0);
    atomic_store(&b->committed, 0);
    atomic_store(&b->arm_counting, 0);
    atomic_store(&b->arm_left, 0);
    atomic_store(&b->arm_inflight, 0);
}

void kcap_budget_arm(kcap_budget *b, unsigned long long count) { atomic_store(&b->arm_left, count); }

int kcap_budget_reserve(kcap_budget *b)
{
    if (b->max && atomic_fetch_add(&b->reserved, 1) >= b->max) {
        atomic_fetch_sub(&b->reserved, 1);
        return atomic_load(&b->committed) >= b->max ? KCAP_BUDGET_MAX_DONE : KCAP_BUDGET_WAIT;
    }
    if (atomic_load(&b->arm_counting)) {
        /* in flight before the unit is taken: nobody may see "none left, none in flight"
         * while this reservation exists */
        atomic_fetch_add(&b->arm_inflight, 1);
        unsigned long long left = atomic_load(&b->arm_left);
        while (left && !atomic_compare_exchange_weak(&b->arm_left, &left, left - 1))
            ;
        if (!left) {
            atomic_fetch_sub(&b->arm_inflight, 1);
            if (b->max)
                atomic_fetch_sub(&b->reserved, 1);
            return atomic_load(&b->arm_inflight) ? KCAP_BUDGET_WAIT : KCAP_BUDGET_ARM_DONE;
        }
    }
    return KCAP_BUDGET_TAKEN;
}

void kcap_budget_release(kcap_budget *b)
{
    if (b->max)
        atomic_fetch_sub(&b->reserved, 1);
    if (atomic_load(&b->arm_counting)) {
        /* the unit goes back before it stops being in flight (same reason as above) */
        atomic_fetch_add(&b->arm_left, 1);
        atomic_fetch_sub(&b->arm_inflight, 1);
    }
}

int kcap_budget_commit(kcap_budget *b)
{
    int v = KCAP_BUDGET_TAKEN;
    if (b->max && atomic_fetch_add(&b->committed, 1) + 1 >= b->max)
        v = KCAP_BUDGET_MAX_DONE;
    if (atomic_load(&b->arm_counting)) {
        atomic_fetch_sub(&b->arm_inflight, 1);
        if (v == KCAP_BUDGET_TAKEN && !atomic_load(&b->arm_left) && !atomic_load(&b->arm_inflight))
            v = KCAP_BUDGET_ARM_DONE;
    }
    return v;
}

int kcap_budget_device(kcap_budget *b)
{
    int v = KCAP_BUDGET_TAKEN;
    if (b->max) {
        atomic_fetch_add(&b->reserved, 1);
        if (atomic_fetch_add(&b->committed, 1) + 1 >= b->max)
            v = KCAP_BUDGET_MAX_DONE;
    }
    if (atomic_load(&b->arm_counting)) {
        unsigned long long left = atomic_load(&b->arm_left);
        while (left && !atomic_compare_exchange_weak(&b->arm_left, &left, left - 1))
            ;
        if (v == KCAP_BUDGET_TAKEN && !atomic_load(&b->arm_left) && !atomic_load(&b->arm_inflight))
            v = KCAP_BUDGET_ARM_DONE;
    }
    return v;
}

unsigned long long kcap_budget_left(kcap_budget *b)
{
    unsigned long long left = 1ull << 30;
    if (atomic_load(&b->arm_counting) && atomic_load(&b->arm_left) < left)
        left = atomic_load(&b->arm_left);
    if (b->max) {
        unsigned long long r = atomic_load(&b->reserved);
        unsigned long long m = r >= b->max ? 0 : b->max - r;
        if (m < left)
            left = m;
    }
    return left;
}
