/*
 * test_capture_state.c — libkcap's process-wide state (capture/kcap_state.c) on its own: the
 * mode and the fast-path flag the wrappers test (also while a CUDA graph capture is open),
 * the snapshot budget as the layers above use it (KCAP_MAX ending capture once committed,
 * an arming going back to dormant, a failed snapshot's unit given back), KCAP_MAX_BYTES,
 * the GPU path's unit grants, the host's errno around the real call, and the fork reset.
 */
#include "kcap_state.h"

#include <errno.h>
#include <stdatomic.h>
#include <string.h>

#include "testkit.h"

static int g_errno_inside;

/* A "real" kernel entry point: remembers the errno it was called with, leaves another. */
static int fake_real(const void *a, void *ws, size_t wsb, void *stream)
{
    (void)a, (void)ws, (void)wsb, (void)stream;
    g_errno_inside = errno;
    errno = 9;
    return 0;
}

int main(void)
{
    kcap_config_defaults(kcap_cfg_mut());

    /* mode and fast path */
    kcap_set_mode(KCAP_M_DORMANT);
    TK_CHECK(kcap_mode() == KCAP_M_DORMANT && !atomic_load(&kcap_g_slow), "dormant: fast path");
    kcap_set_mode(KCAP_M_ACTIVE);
    TK_CHECK(atomic_load(&kcap_g_slow), "active: slow path");
    kcap_set_mode(KCAP_M_DORMANT);
    kcap_graph_capture_begin();
    TK_CHECK(atomic_load(&kcap_g_slow) && kcap_graph_capture_open(), "graph capture open: slow");
    kcap_graph_capture_begin();
    kcap_graph_capture_end();
    TK_CHECK(atomic_load(&kcap_g_slow), "one of two captures still open: slow");
    kcap_graph_capture_end();
    TK_CHECK(!atomic_load(&kcap_g_slow) && !kcap_graph_capture_open(), "all closed, dormant: fast");

    /* KCAP_MAX=3: ends capture when three are committed, not when three are reserved */
    kcap_budget_set_max(3);
    kcap_set_mode(KCAP_M_ACTIVE);
    TK_CHECK(kcap_reserve() && kcap_reserve() && kcap_reserve(), "three units");
    TK_CHECK(!kcap_reserve(), "a fourth is turned away while three are in flight");
    TK_CHECK(kcap_gpu_turned_away() == 1, "and counted as turned away");
    kcap_unreserve(); /* one snapshot failed: its unit comes back */
    TK_CHECK(kcap_mode() == KCAP_M_ACTIVE && kcap_reserve(), "a failed snapshot's unit is taken again");
    kcap_commit();
    kcap_commit();
    TK_CHECK(kcap_mode() == KCAP_M_ACTIVE, "two committed: still capturing");
    kcap_commit();
    TK_CHECK(kcap_mode() == KCAP_M_OFF, "KCAP_MAX committed: capture off");

    /* an arming of 2 in a dormant process goes back to dormant once both are committed */
    kcap_state_atfork_child(); /* fresh budget (the fork reset keeps the arming mode) */
    kcap_budget_set_max(0);
    kcap_budget_count_arming(1);
    kcap_budget_set_arming(2);
    kcap_set_mode(KCAP_M_ACTIVE);
    TK_CHECK(kcap_budget_counting_arming(), "counting the arming");
    TK_CHECK(kcap_gpu_unit_take(), "the drainer takes a unit for the device while armed");
    TK_CHECK(kcap_reserve(), "the host takes the other");
    TK_CHECK(!kcap_reserve(), "the arming is used up");
    kcap_gpu_unit_settled(1);
    kcap_commit();
    TK_CHECK(kcap_mode() == KCAP_M_DORMANT, "both committed: dormant again");
    TK_CHECK(!kcap_gpu_unit_take(), "no unit for the device while dormant");

    /* KCAP_MAX_BYTES */
    kcap_cfg_mut()->max_bytes = 100;
    TK_CHECK(kcap_bytes_fit(60) && !kcap_bytes_fit(50) && kcap_bytes_fit(40), "60 + 40 fit in 100, 50 more not");
    kcap_cfg_mut()->max_bytes = 0;

    /* errno: the host's value going in, the library's coming out */
    kcap_t_errno = 7;
    errno = 123; /* kcap's own syscalls left this: the library must not see it */
    kcap_real(fake_real, NULL, NULL, 0, NULL);
    TK_CHECK(g_errno_inside == 7 && kcap_t_errno == 9, "errno in %d (want 7), out %d (want 9)",
             g_errno_inside, kcap_t_errno);

    /* counters and the fork reset */
    atomic_fetch_add(&kcap_g_stats.calls, 5);
    char line[768];
    kcap_stats_format(line, sizeof line);
    TK_CHECK(strstr(line, "calls=5 ") != NULL, "stats line: %s", line);
    kcap_state_atfork_child();
    kcap_stats_format(line, sizeof line);
    TK_CHECK(strstr(line, "calls=0 ") != NULL && kcap_budget_counting_arming(),
             "a forked child starts its counters over and keeps the arming mode");
    return tk_summary("test_capture_state");
}
