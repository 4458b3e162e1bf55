/*
 * test_capture_config.c — table-driven test of libkcap.so's environment parsing
 * (capture/kcap_config.c): every variable's accepted and rejected forms, that a rejection
 * names the variable, and call selection (KCAP_CALLS ranges x KCAP_EVERY); shadow mode's
 * tolerances (KCAP_SHADOW_ATOL ..., replay's defaults) and the terms of kcap shadow's request.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kcap_compare.h" /* replay/: the default tolerances */
#include "kcap_config.h"
#include "../testkit.h"

typedef struct {
    const char *env[8]; /* "NAME=value" */
} envset;

static const char *get(const char *name, void *ud)
{
    const envset *e = ud;
    size_t n = strlen(name);
    for (int i = 0; i < 8 && e->env[i]; i++)
        if (!strncmp(e->env[i], name, n) && e->env[i][n] == '=')
            return e->env[i] + n + 1;
    return NULL;
}

int main(void)
{
    static const struct {
        envset e;
        int ok;
        const char *why_has; /* the variable named in the message */
    } cases[] = { /* .ok 0: refused, naming .why_has */
        {.e = {{"KCAP_DIR=/tmp/x"}}, .ok = 1},
        {.e = {{NULL}}, .why_has = "KCAP_DIR"},
        {.e = {{"KCAP_DIR="}}, .why_has = "KCAP_DIR"},
        {.e = {{"KCAP_DIR=/d", "KCAP_CALLS=0-9,100"}}, .ok = 1},
        {.e = {{"KCAP_DIR=/d", "KCAP_CALLS=9-0"}}, .why_has = "KCAP_CALLS"},
        {.e = {{"KCAP_DIR=/d", "KCAP_CALLS=1,,2"}}, .why_has = "KCAP_CALLS"},
        {.e = {{"KCAP_DIR=/d", "KCAP_CALLS=1,"}}, .why_has = "KCAP_CALLS"},
        {.e = {{"KCAP_DIR=/d", "KCAP_CALLS=a"}}, .why_has = "KCAP_CALLS"},
        {.e = {{"KCAP_DIR=/d", "KCAP_CALLS=-3"}}, .why_has = "KCAP_CALLS"},
        {.e = {{"KCAP_DIR=/d", "KCAP_EVERY=0"}}, .why_has = "KCAP_EVERY"},
        {.e = {{"KCAP_DIR=/d", "KCAP_EVERY=3x"}}, .why_has = "KCAP_EVERY"},
        {.e = {{"KCAP_DIR=/d", "KCAP_EVERY=-1"}}, .why_has = "KCAP_EVERY"},
        {.e = {{"KCAP_DIR=/d", "KCAP_MAX=12"}}, .ok = 1},
        {.e = {{"KCAP_DIR=/d", "KCAP_GRAPH_TWINS=2"}}, .why_has = "KCAP_GRAPH_TWINS"},
        {.e = {{"KCAP_DIR=/d", "KCAP_MAX=1e3"}}, .why_has = "KCAP_MAX"},
        {.e = {{"KCAP_DIR=/d", "KCAP_MAX_BYTES=2G"}}, .ok = 1},
        {.e = {{"KCAP_DIR=/d", "KCAP_MAX_BYTES=2GB"}}, .ok = 1},
        {.e = {{"KCAP_DIR=/d", "KCAP_MAX_BYTES=2GiB"}}, .ok = 1},
        {.e = {{"KCAP_DIR=/d", "KCAP_MAX_BYTES=2Q"}}, .why_has = "KCAP_MAX_BYTES"},
        {.e = {{"KCAP_DIR=/d", "KCAP_MAX_BYTES=G"}}, .why_has = "KCAP_MAX_BYTES"},
        {.e = {{"KCAP_DIR=/d", "KCAP_MAX_BYTES=99999999999999999999"}}, .why_has = "KCAP_MAX_BYTES"},
        {.e = {{"KCAP_DIR=/d", "KCAP_MAX_BYTES=99999999999T"}}, .why_has = "KCAP_MAX_BYTES"},
        {.e = {{"KCAP_DIR=/d", "KCAP_QUEUE_BYTES=0"}}, .why_has = "KCAP_QUEUE_BYTES"},
        {.e = {{"KCAP_DIR=/d", "KCAP_DORMANT=1"}}, .ok = 1},
        {.e = {{"KCAP_DIR=/d", "KCAP_DORMANT=maybe"}}, .why_has = "KCAP_DORMANT"},
        {.e = {{"KCAP_DIR=/d", "KCAP_LOG=loud"}}, .why_has = "KCAP_LOG"},
        {.e = {{"KCAP_DIR=/d", "KCAP_FLUSH_TIMEOUT=5000"}}, .why_has = "KCAP_FLUSH_TIMEOUT"},
        {.e = {{"KCAP_DIR=/d", "KCAP_FORK=spoon"}}, .why_has = "KCAP_FORK"},
        {.e = {{"KCAP_DIR=/d", "KCAP_RING_BYTES=1K"}}, .why_has = "KCAP_RING_BYTES"},
        {.e = {{"KCAP_DIR=/d", "KCAP_GPU_MODE=fast"}}, .why_has = "KCAP_GPU_MODE"},
        {.e = {{"KCAP_DIR=/d", "KCAP_ZSTD_LEVEL=0"}}, .why_has = "KCAP_ZSTD_LEVEL"},
        {.e = {{"KCAP_DIR=/d", "KCAP_SHADOW_ATOL=1.0", "KCAP_SHADOW_RTOL=0", "KCAP_SHADOW_LSE_ATOL=1e-4",
                "KCAP_SHADOW_LSE_RTOL=.5"}}, .ok = 1},
        {.e = {{"KCAP_DIR=/d", "KCAP_SHADOW_ATOL=-1"}}, .why_has = "KCAP_SHADOW_ATOL='-1'"},
        {.e = {{"KCAP_DIR=/d", "KCAP_SHADOW_ATOL=-0.5e-3"}}, .why_has = "KCAP_SHADOW_ATOL"},
        {.e = {{"KCAP_DIR=/d", "KCAP_SHADOW_RTOL=nan"}}, .why_has = "KCAP_SHADOW_RTOL='nan'"},
        {.e = {{"KCAP_DIR=/d", "KCAP_SHADOW_RTOL=NaN"}}, .why_has = "KCAP_SHADOW_RTOL"},
        {.e = {{"KCAP_DIR=/d", "KCAP_SHADOW_LSE_ATOL=inf"}}, .why_has = "KCAP_SHADOW_LSE_ATOL='inf'"},
        {.e = {{"KCAP_DIR=/d", "KCAP_SHADOW_LSE_ATOL=1e999"}}, .why_has = "KCAP_SHADOW_LSE_ATOL"},
        {.e = {{"KCAP_DIR=/d", "KCAP_SHADOW_LSE_RTOL=abc"}}, .why_has = "KCAP_SHADOW_LSE_RTOL='abc'"},
        {.e = {{"KCAP_DIR=/d", "KCAP_SHADOW_LSE_RTOL=0.1x"}}, .why_has = "KCAP_SHADOW_LSE_RTOL"},
        {.e = {{"KCAP_DIR=/d", "KCAP_SHADOW_ATOL=1e"}}, .why_has = "KCAP_SHADOW_ATOL"},
        {.e = {{"KCAP_DIR=/d", "KCAP_SHADOW_ATOL= 1"}}, .why_has = "KCAP_SHADOW_ATOL"},
        {.e = {{"KCAP_DIR=/d", "KCAP_SHADOW_RTOL=1 "}}, .why_has = "KCAP_SHADOW_RTOL"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        kcap_config c;
        char why[512] = "";
        int rc = kcap_config_parse(&c, get, (void *)&cases[i].e, why, sizeof why);
        TK_CHECK((rc == 0) == cases[i].ok, "case %zu (%s %s): rc %d why '%s'", i,
                 cases[i].e.env[0] ? cases[i].e.env[0] : "-",
                 cases[i].e.env[1] ? cases[i].e.env[1] : "", rc, why);
        if (!cases[i].ok)
            TK_CHECK(strstr(why, cases[i].why_has) != NULL, "case %zu: '%s' does not name %s", i,
                     why, cases[i].why_has);
    }

    /* values */
    envset e = {{"KCAP_DIR=/d", "KCAP_MAX_BYTES=3M", "KCAP_QUEUE_BYTES=512k", "KCAP_EVERY=3",
                 "KCAP_CALLS=2-10,20", "KCAP_DORMANT=yes", "KCAP_FLUSH_TIMEOUT=2", "KCAP_GRAPH_TWINS=on"}};
    kcap_config c;
    char why[256];
    TK_CHECK(kcap_config_parse(&c, get, &e, why, sizeof why) == 0, "%s", why);
    TK_CHECK(c.max_bytes == 3u << 20, "max_bytes %llu", (unsigned long long)c.max_bytes);
    TK_CHECK(c.queue_bytes == 512u << 10, "queue_bytes %llu", (unsigned long long)c.queue_bytes);
    TK_CHECK(c.dormant == 1 && c.flush_ms == 2000 && c.every == 3 && c.nranges == 2 && c.graph_twins == 1, "fields");
    /* selection: in 2-10 or 20, and seq % 3 == 0 */
    static const struct { uint64_t seq; int sel; } sel[] = {
        {0, 0}, {1, 0}, {2, 0}, {3, 1}, {6, 1}, {9, 1}, {10, 0}, {12, 0}, {18, 0}, {20, 0},
        {21, 0}};
    for (size_t i = 0; i < sizeof sel / sizeof sel[0]; i++)
        TK_CHECK(kcap_config_selects(&c, sel[i].seq) == sel[i].sel, "select(%llu)",
                 (unsigned long long)sel[i].seq);
    envset e2 = {{"KCAP_DIR=/d", "KCAP_CALLS=0-1,5"}};
    TK_CHECK(kcap_config_parse(&c, get, &e2, why, sizeof why) == 0, "%s", why);
    int want[8] = {1, 1, 0, 0, 0, 1, 0, 0};
    for (int i = 0; i < 8; i++)
        TK_CHECK(kcap_config_selects(&c, (uint64_t)i) == want[i], "calls select(%d)", i);
    envset e3 = {{"KCAP_DIR=/d"}};
    TK_CHECK(kcap_config_parse(&c, get, &e3, why, sizeof why) == 0, "%s", why);
    for (int i = 0; i < 100; i++)
        TK_CHECK(kcap_config_selects(&c, (uint64_t)i) == 1, "default selects all (%d)", i);
    TK_CHECK(c.graph_twins == 1, "clean graph twins on by default");
    TK_CHECK(c.shadow_graphs == 1, "shadow mode in CUDA graphs on by default");
    envset e5 = {{"KCAP_DIR=/d", "KCAP_SHADOW_GRAPHS=0"}};
    TK_CHECK(kcap_config_parse(&c, get, &e5, why, sizeof why) == 0 && c.shadow_graphs == 0, "KCAP_SHADOW_GRAPHS=0");
    envset e6 = {{"KCAP_DIR=/d", "KCAP_SHADOW_GRAPHS=maybe"}};
    TK_CHECK(kcap_config_parse(&c, get, &e6, why, sizeof why) != 0 && strstr(why, "KCAP_SHADOW_GRAPHS='maybe'"),
             "KCAP_SHADOW_GRAPHS=maybe refused, named: %s", why);
    TK_CHECK(c.shadow_thread == 0 && c.shadow_hold_ms == 100, "eager candidates launched by the calling "
             "thread by default; the worker's calls held at most 100 ms (%d, %d)", c.shadow_thread, c.shadow_hold_ms);
    envset e7 = {{"KCAP_DIR=/d", "KCAP_SHADOW_THREAD=1", "KCAP_SHADOW_HOLD_MS=7"}};
    TK_CHECK(kcap_config_parse(&c, get, &e7, why, sizeof why) == 0 && c.shadow_thread == 1 && c.shadow_hold_ms == 7,
             "KCAP_SHADOW_THREAD=1 KCAP_SHADOW_HOLD_MS=7: %s", why);
    envset e8 = {{"KCAP_DIR=/d", "KCAP_SHADOW_HOLD_MS=0"}};
    TK_CHECK(kcap_config_parse(&c, get, &e8, why, sizeof why) != 0 && strstr(why, "KCAP_SHADOW_HOLD_MS='0'"),
             "KCAP_SHADOW_HOLD_MS=0 refused, named: %s", why);
    /* shadow mode's tolerances: replay's by default, as set, in the KCAP_TOL_* order */
    TK_CHECK(c.shadow_tol[KCAP_TOL_ATOL] == KCAP_CMP_ATOL_BF16 &&
             c.shadow_tol[KCAP_TOL_RTOL] == KCAP_CMP_RTOL_BF16 &&
             c.shadow_tol[KCAP_TOL_LSE_ATOL] == KCAP_CMP_ATOL_F32 &&
             c.shadow_tol[KCAP_TOL_LSE_RTOL] == KCAP_CMP_RTOL_F32, "default tolerances are replay's");
    envset e4 = {{"KCAP_DIR=/d", "KCAP_SHADOW_ATOL=1.0", "KCAP_SHADOW_LSE_RTOL=2.5e-4"}};
    TK_CHECK(kcap_config_parse(&c, get, &e4, why, sizeof why) == 0, "%s", why);
    TK_CHECK(c.shadow_tol[KCAP_TOL_ATOL] == 1.0 && c.shadow_tol[KCAP_TOL_RTOL] == KCAP_CMP_RTOL_BF16 &&
             c.shadow_tol[KCAP_TOL_LSE_ATOL] == KCAP_CMP_ATOL_F32 &&
             c.shadow_tol[KCAP_TOL_LSE_RTOL] == 2.5e-4, "tolerances as set");
    double d = 7;
    TK_CHECK(kcap_parse_tol("0", &d) == 0 && d == 0 && !signbit(d), "0");
    TK_CHECK(kcap_parse_tol("-0", &d) == 0 && d == 0 && !signbit(d), "-0 is 0");
    TK_CHECK(kcap_parse_tol("", &d) != 0 && kcap_parse_tol("-inf", &d) != 0 &&
             kcap_parse_tol("1,5", &d) != 0, "empty, -inf, 1,5");
    TK_CHECK(kcap_parse_tol("0x10", &d) != 0 && kcap_parse_tol("0X1p-3", &d) != 0,
             "hexadecimal is not a tolerance (strtod would read 0x10 as 16)");
    /* the terms of kcap shadow's swap request */
    static const struct {
        const char *s;
        int rc;
        const char *rest;
        double want[KCAP_NTOL];
    } terms[] = {
        {"/abs/CAND.so", 0, "/abs/CAND.so", {1, 2, 3, 4}},
        {"atol=0.5 lse_rtol=1e-5 /a b/c.so", 0, "/a b/c.so", {0.5, 2, 3, 1e-5}},
        {"lse_atol=9 rtol=0 atol=8 lse_rtol=7 /x", 0, "/x", {8, 0, 9, 7}},
        {"atol=1", 0, "", {1, 2, 3, 4}},
        {"atol=-1 /x", -1, "atol=-1 /x", {0}},
        {"atol=nan /x", -1, "atol=nan /x", {0}},
        {"atol= /x", -1, "atol= /x", {0}},
        {"atol /x", -1, "atol /x", {0}},
        {"foo=1 /x", -1, "foo=1 /x", {0}},
        {"atolx=1 /x", -1, "atolx=1 /x", {0}},
        {"rtol=1 lse=2 /x", -1, "lse=2 /x", {0}},
        {"x.so", -1, "x.so", {0}},
    };
    for (size_t i = 0; i < sizeof terms / sizeof terms[0]; i++) {
        double t[KCAP_NTOL] = {1, 2, 3, 4};
        const char *rest = NULL;
        int rc = kcap_parse_tol_terms(terms[i].s, t, &rest);
        TK_CHECK(rc == terms[i].rc && rest && !strcmp(rest, terms[i].rest), "terms '%s': rc %d "
                 "rest '%s'", terms[i].s, rc, rest ? rest : "(null)");
        for (int k = 0; !rc && k < KCAP_NTOL; k++)
            TK_CHECK(t[k] == terms[i].want[k], "terms '%s': %s %g", terms[i].s,
                     kcap_tol_names[k].key, t[k]);
    }
    uint64_t u;
    TK_CHECK(kcap_parse_bytes("1k", &u) == 0 && u == 1024, "1k");
    TK_CHECK(kcap_parse_bytes("17", &u) == 0 && u == 17, "17");
    TK_CHECK(kcap_parse_bytes("", &u) != 0, "empty");
    TK_CHECK(kcap_parse_bytes(" 1", &u) != 0, "space");
    return tk_summary("test_capture_config");
}
