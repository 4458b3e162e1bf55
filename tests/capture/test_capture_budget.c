/*
 * test_capture_budget.c — the snapshot budget (capture/kcap_budget.c) on its own: a table of
 * call sequences with the verdict expected at each step, then a threaded stress in which
 * reservations fail at random: exactly KCAP_MAX (or the armed count) snapshots must be
 * committed, never one fewer (a failing in-flight snapshot must not end capture) and never
 * one more.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kcap_budget.h"
#include "../testkit.h"

/* One step: op r (reserve), c (commit), l (release), d (device); the verdict expected
 * (T, W, M, A = TAKEN, WAIT, MAX_DONE, ARM_DONE; '-' for release). */
typedef struct {
    const char *name;
    unsigned long long max;
    int arm;                /* arm_counting */
    unsigned long long armn; /* armed count */
    const char *ops;        /* "rT rW lW ..." : op letter then verdict letter */
    unsigned long long left; /* kcap_budget_left() after the sequence */
} scenario;

/* fields not named are 0: no max, not arm counting, budget left 0 */
static const scenario k_cases[] = {
    {.name = "max 2 in order", .max = 2, .ops = "rT cT rT cM rM"},
    {.name = "max 1: last unit in flight turns calls away, not capture off", .max = 1, .ops = "rT rW rW"},
    {.name = "max 1: in-flight failure gives the unit back (no N-1)", .max = 1, .ops = "rT rW l- rT cM rM"},
    {.name = "max 3: two in flight, one fails", .max = 3, .ops = "rT cT rT rT rW l- rT cT cM rM"},
    {.name = "no limit", .ops = "rT cT rT l- rT cT", .left = 1ull << 30},
    {.name = "arm 1: done only on commit", .arm = 1, .armn = 1, .ops = "rT rW cA rA"},
    {.name = "arm 1: failure re-opens the unit", .arm = 1, .armn = 1, .ops = "rT rW l- rT cA"},
    {.name = "arm 2 and max 5", .max = 5, .arm = 1, .armn = 2, .ops = "rT rT rW cT cA"},
    {.name = "max 2 before arm 3", .max = 2, .arm = 1, .armn = 3, .ops = "rT rT rW cT cM rM"},
    {.name = "device snapshots count", .max = 3, .ops = "dT rT dT cM rM"},
    {.name = "device uses the arming", .arm = 1, .armn = 2, .ops = "dT dA"},
    {.name = "device with one in flight", .arm = 1, .armn = 2, .ops = "rT dT cA"},
    {.name = "left: max minus reserved", .max = 5, .ops = "rT cT rT", .left = 3},
    {.name = "left: arming smaller than max", .max = 5, .arm = 1, .armn = 2, .ops = "rT", .left = 1},
};

static int verdict_of(char ch)
{
    switch (ch) {
    case 'T': return KCAP_BUDGET_TAKEN;
    case 'W': return KCAP_BUDGET_WAIT;
    case 'M': return KCAP_BUDGET_MAX_DONE;
    case 'A': return KCAP_BUDGET_ARM_DONE;
    default: return -1;
    }
}

static void run_case(const scenario *sc)
{
    kcap_budget b;
    kcap_budget_reset(&b);
    b.max = sc->max;
    atomic_store(&b.arm_counting, sc->arm);
    kcap_budget_arm(&b, sc->armn);
    int step = 0;
    for (const char *p = sc->ops; *p; p++) {
        if (*p == ' ')
            continue;
        char op = p[0], want = p[1];
        p++;
        step++;
        int got = -1;
        switch (op) {
        case 'r': got = kcap_budget_reserve(&b); break;
        case 'c': got = kcap_budget_commit(&b); break;
        case 'd': got = kcap_budget_device(&b); break;
        case 'l': kcap_budget_release(&b); continue;
        default: TK_CHECK(0, "%s: bad op %c", sc->name, op); return;
        }
        TK_CHECK(got == verdict_of(want), "%s: step %d (%c): verdict %d, want %c", sc->name, step, op, got,
                 want);
    }
    unsigned long long left = kcap_budget_left(&b);
    TK_CHECK(left == sc->left, "%s: left %llu, want %llu", sc->name, left, sc->left);
}

/* ---- threaded stress: every thread loops reserve -> (commit | release at random) ---- */
typedef struct {
    kcap_budget *b;
    unsigned seed;
    atomic_int *over;     /* some thread saw MAX_DONE / ARM_DONE */
    atomic_ullong *commits;
    int fail_pct;
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    for (long it = 0; it < 2000000 && !atomic_load(w->over); it++) {
        int v = kcap_budget_reserve(w->b);
        if (v == KCAP_BUDGET_MAX_DONE || v == KCAP_BUDGET_ARM_DONE) {
            atomic_store(w->over, 1);
            break;
        }
        if (v != KCAP_BUDGET_TAKEN)
            continue;
        if ((int)(rand_r(&w->seed) % 100) < w->fail_pct) {
            kcap_budget_release(w->b);
        } else {
            atomic_fetch_add(w->commits, 1);
            int c = kcap_budget_commit(w->b);
            if (c == KCAP_BUDGET_MAX_DONE || c == KCAP_BUDGET_ARM_DONE)
                atomic_store(w->over, 1);
        }
    }
    return NULL;
}

static void stress(const char *name, unsigned long long max, unsigned long long armn, int fail_pct)
{
    enum { NT = 8 };
    for (int round = 0; round < 50; round++) {
        kcap_budget b;
        kcap_budget_reset(&b);
        b.max = max;
        atomic_store(&b.arm_counting, armn != 0);
        kcap_budget_arm(&b, armn);
        atomic_int over = 0;
        atomic_ullong commits = 0;
        worker w[NT];
        pthread_t t[NT];
        for (int i = 0; i < NT; i++) {
            w[i] = (worker){&b, (unsigned)(round * 131 + i * 7 + 1), &over, &commits, fail_pct};
            pthread_create(&t[i], NULL, work, &w[i]);
        }
        for (int i = 0; i < NT; i++)
            pthread_join(t[i], NULL);
        const unsigned long long want = max && (!armn || max < armn) ? max : armn;
        TK_CHECK(atomic_load(&over), "%s round %d: the limit was never declared reached", name, round);
        TK_CHECK(atomic_load(&commits) == want, "%s round %d: %llu snapshots committed, want exactly %llu", name,
                 round, (unsigned long long)atomic_load(&commits), want);
        TK_CHECK(atomic_load(&b.arm_inflight) == 0, "%s round %d: %llu arming units still in flight", name, round,
                 (unsigned long long)atomic_load(&b.arm_inflight));
        if (tk_failures)
            return;
    }
    printf("ok   %s: 50 rounds x 8 threads, exactly the limit committed\n", name);
}

int main(void)
{
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) {
        int before = tk_failures;
        run_case(&k_cases[i]);
        if (tk_failures == before)
            printf("ok   %s\n", k_cases[i].name);
    }
    stress("KCAP_MAX=7, 30 % of snapshots fail", 7, 0, 30);
    stress("KCAP_MAX=1, 50 % fail", 1, 0, 50);
    stress("arm --count 5, 30 % fail", 0, 5, 30);
    stress("KCAP_MAX=4 under arm --count 9, 20 % fail", 4, 9, 20);
    return tk_summary("test_capture_budget");
}
