/*
 * kcap_config.c — the KCAP_* environment variables of libkcap.so, parsed and validated.
 *
 * A preloaded library cannot report errors to anyone but stderr, and it must never take a
 * host down because of a typo: every variable is checked strictly here (no silent atoi),
 * and the first bad one becomes one sentence that the caller logs once before switching
 * capture off. The parsers are also used by `kcap record` and `kcap shadow` so the CLI
 * rejects the same values up front. Pure code: no mutable state, unit-tested by
 * tests/capture/test_capture_config.c.
 */
#include "kcap_config.h"
#include "kcap_compare.h" /* replay/: the default tolerances (macros only) */
#include "kcap_error.h"   /* common/ */
#include "kcap_log.h"   /* the KCAP_LOG levels */

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

int kcap_parse_u64(const char *s, uint64_t *out)
{
    if (!s || !*s)
        return -1;
    for (const char *p = s; *p; p++)
        if (!isdigit((unsigned char)*p))
            return -1;
    errno = 0;
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || !end || *end)
        return -1;
    *out = v;
    return 0;
}

int kcap_parse_bytes(const char *s, uint64_t *out)
{
    if (!s || !*s)
        return -1;
    size_t n = strlen(s);
    char num[32];
    uint64_t mul = 1;
    char last = (char)toupper((unsigned char)s[n - 1]);
    /* accept "4G", "4GB", "4GiB" as the same binary multiple */
    if (n >= 3 && (!strcasecmp(s + n - 3, "KIB") || !strcasecmp(s + n - 3, "MIB") ||
                   !strcasecmp(s + n - 3, "GIB") || !strcasecmp(s + n - 3, "TIB")))
        n -= 2, last = (char)toupper((unsigned char)s[n - 1]);
    else if (n >= 2 && toupper((unsigned char)s[n - 1]) == 'B' &&
             strchr("KMGT", toupper((unsigned char)s[n - 2])))
        n -= 1, last = (char)toupper((unsigned char)s[n - 1]);
    switch (last) {
    case 'K': mul = 1ull << 10; n--; break;
    case 'M': mul = 1ull << 20; n--; break;
    case 'G': mul = 1ull << 30; n--; break;
    case 'T': mul = 1ull << 40; n--; break;
    default: break;
    }
    if (n == 0 || n >= sizeof num)
        return -1;
    memcpy(num, s, n);
    num[n] = '\0';
    uint64_t v;
    if (kcap_parse_u64(num, &v))
        return -1;
    if (v && mul > UINT64_MAX / v)
        return -1;
    *out = v * mul;
    return 0;
}

int kcap_parse_ranges(const char *s, kcap_range *r, int max, int *n)
{
    *n = 0;
    if (!s || !*s)
        return -1;
    const char *p = s;
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char item[64];
        if (len == 0 || len >= sizeof item || *n >= max)
            return -1;
        memcpy(item, p, len);
        item[len] = '\0';
        char *dash = strchr(item, '-');
        uint64_t lo, hi;
        if (dash) {
            *dash = '\0';
            if (kcap_parse_u64(item, &lo) || kcap_parse_u64(dash + 1, &hi) || hi < lo)
                return -1;
        } else {
            if (kcap_parse_u64(item, &lo))
                return -1;
            hi = lo;
        }
        r[*n].lo = lo;
        r[*n].hi = hi;
        (*n)++;
        if (!comma)
            break;
        p = comma + 1;
        if (!*p)
            return -1; /* trailing comma */
    }
    return 0;
}

int kcap_parse_tol(const char *s, double *out)
{
    if (!s || !*s || isspace((unsigned char)*s) || strpbrk(s, "xX"))
        return -1; /* a decimal number: strtod would also read hexadecimal ("0x10" = 16) */
    errno = 0;
    char *end = NULL;
    double v = strtod(s, &end);
    if (errno || !end || *end || !isfinite(v) || !(v >= 0))
        return -1;
    *out = v == 0 ? 0 : v; /* -0 as 0 */
    return 0;
}

const kcap_tol_name kcap_tol_names[KCAP_NTOL] = {
    {"KCAP_SHADOW_ATOL", "--atol", "atol"},
    {"KCAP_SHADOW_RTOL", "--rtol", "rtol"},
    {"KCAP_SHADOW_LSE_ATOL", "--lse-atol", "lse_atol"},
    {"KCAP_SHADOW_LSE_RTOL", "--lse-rtol", "lse_rtol"}};

int kcap_parse_tol_terms(const char *s, double tol[KCAP_NTOL], const char **rest)
{
    for (*rest = s; **rest && **rest != '/';) {
        const char *p = *rest, *eq = strchr(p, '=');
        size_t len = strcspn(p, " "), klen = eq ? (size_t)(eq - p) : len;
        char num[64];
        int k = 0;
        while (k < KCAP_NTOL && (klen != strlen(kcap_tol_names[k].key) ||
                                 strncmp(p, kcap_tol_names[k].key, klen)))
            k++;
        if (k == KCAP_NTOL || klen >= len || len - klen - 1 >= sizeof num)
            return -1;
        snprintf(num, sizeof num, "%.*s", (int)(len - klen - 1), eq + 1);
        if (kcap_parse_tol(num, &tol[k]))
            return -1;
        *rest = p + len + (p[len] == ' ');
    }
    return 0;
}

/* A tag key: 1..31 of [A-Za-z0-9_.] (kcap_tags.c accepts the same). */
static int kcap_tag_key_ok(const char *k, size_t n)
{
    if (n < 1 || n >= KCAP_TAG_KEY_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)k[i]) && k[i] != '_' && k[i] != '.')
            return 0;
    return 1;
}

int kcap_parse_tag_filters(const char *s, kcap_tag_filter *f, int max, int *n)
{
    *n = 0;
    char buf[512];
    if (strlen(s) >= sizeof buf)
        return -1;
    snprintf(buf, sizeof buf, "%s", s);
    for (char *save = NULL, *term = strtok_r(buf, ";", &save); term; term = strtok_r(NULL, ";", &save)) {
        char *eq = strchr(term, '=');
        if (!eq || *n == max || !kcap_tag_key_ok(term, (size_t)(eq - term)))
            return -1;
        kcap_tag_filter *t = &f[(*n)++];
        memset(t, 0, sizeof *t);
        memcpy(t->key, term, (size_t)(eq - term));
        if (kcap_parse_ranges(eq + 1, t->ranges, 16, &t->nranges) || !t->nranges)
            return -1;
    }
    return *n ? 0 : -1;
}

void kcap_config_defaults(kcap_config *c)
{
    memset(c, 0, sizeof *c);
    c->every = 1;
    c->queue_bytes = 1ull << 30;
    c->log = KCAP_LOG_WARN;
    c->flush_ms = 10000;
    c->fork_follow = 1;
    c->level = 1;
    c->threads = 0;
    c->ring_bytes = 2ull << 30; /* bound; shrunk to what the device can spare (kcap_gpu.c) */
    c->gpu_async = 1;
    c->shadow_per_shape = 4;
    c->shadow_max_slowdown = 8;
    c->shadow_tol[KCAP_TOL_ATOL] = KCAP_CMP_ATOL_BF16; /* replay's, kcap_cmp_default_tol */
    c->shadow_tol[KCAP_TOL_RTOL] = KCAP_CMP_RTOL_BF16;
    c->shadow_tol[KCAP_TOL_LSE_ATOL] = KCAP_CMP_ATOL_F32;
    c->shadow_tol[KCAP_TOL_LSE_RTOL] = KCAP_CMP_RTOL_F32;
    c->graph_twins = 1; /* a disarmed graph replay runs none of kcap's nodes (docs/PERF.md) */
    c->shadow_graphs = 1; /* shadow mode judges graph replays too (test_capture_gpu_shadow.sh) */
    c->shadow_thread = 0; /* opt-in: less host time, more stream time (docs/PERF.md) */
    c->shadow_hold_ms = 100;
}

#define BAD(...)                                                                           \
    do {                                                                                   \
        snprintf(why, whylen, __VA_ARGS__);                                                \
        return KCAP_ERR_CONFIG;                                                            \
    } while (0)

int kcap_parse_bool(const char *v, int *out)
{
    if (!strcmp(v, "1") || !strcasecmp(v, "yes") || !strcasecmp(v, "true") || !strcasecmp(v, "on"))
        return *out = 1, 0;
    if (!strcmp(v, "0") || !strcasecmp(v, "no") || !strcasecmp(v, "false") || !strcasecmp(v, "off"))
        return *out = 0, 0;
    return -1;
}

int kcap_config_parse(kcap_config *c, kcap_getenv_fn get, void *ud, char *why, size_t whylen)
{
    kcap_config_defaults(c);
    const char *v;
    uint64_t u;

    /* KCAP_LOG first, so the caller knows whether to print the problem found later. */
    if ((v = get("KCAP_LOG", ud)) && *v) {
        if (!strcasecmp(v, "quiet") || !strcmp(v, "0"))
            c->log = KCAP_LOG_QUIET;
        else if (!strcasecmp(v, "warn") || !strcmp(v, "1"))
            c->log = KCAP_LOG_WARN;
        else if (!strcasecmp(v, "info") || !strcmp(v, "2") || !strcasecmp(v, "debug"))
            c->log = KCAP_LOG_INFO;
        else
            BAD("KCAP_LOG='%.64s' is not quiet, warn or info", v);
    }
    v = get("KCAP_DIR", ud);
    if (!v || !*v)
        BAD("KCAP_DIR is not set (the directory where snapshots go)");
    if (strlen(v) >= sizeof c->dir - 64)
        BAD("KCAP_DIR is too long (%zu characters)", strlen(v));
    snprintf(c->dir, sizeof c->dir, "%s", v);

    if ((v = get("KCAP_CALLS", ud)) && *v &&
        kcap_parse_ranges(v, c->ranges, KCAP_MAX_RANGES, &c->nranges))
        BAD("KCAP_CALLS='%.64s' is not a list of at most %d call numbers or ranges such as "
            "0-9,100", v, KCAP_MAX_RANGES);
    if ((v = get("KCAP_TAGS", ud)) && *v &&
        kcap_parse_tag_filters(v, c->tag_filters, KCAP_MAX_TAG_FILTERS, &c->ntag_filters))
        BAD("KCAP_TAGS='%.64s' is not up to %d terms key=ranges separated by ';' (e.g. "
            "layer=0-3;step=100-199; keys of letters, digits, '_' and '.')", v, KCAP_MAX_TAG_FILTERS);
    if ((v = get("KCAP_SHADOW", ud)) && *v) {
        if (strlen(v) >= sizeof c->shadow || access(v, R_OK)) /* relative: kcap_capture_ctor */
            BAD("KCAP_SHADOW=%.200s is not a readable kernel library (the candidate of shadow "
                "mode)", v);
        snprintf(c->shadow, sizeof c->shadow, "%s", v);
    }
    if ((v = get("KCAP_SHADOW_PER_SHAPE", ud)) && *v) {
        if (kcap_parse_u64(v, &u) || !u || u > 1000000)
            BAD("KCAP_SHADOW_PER_SHAPE='%.64s' is not a count of snapshots (1..1000000)", v);
        c->shadow_per_shape = (long)u;
    }
    if ((v = get("KCAP_SHADOW_MAX_SLOWDOWN", ud)) && *v) {
        if (kcap_parse_u64(v, &u) || u > 1000)
            BAD("KCAP_SHADOW_MAX_SLOWDOWN='%.64s' is not a multiple of the production call's time "
                "(0..1000; 0 = never switch a slow candidate off)", v);
        c->shadow_max_slowdown = (long)u;
    }
    for (int i = 0; i < KCAP_NTOL; i++)
        if ((v = get(kcap_tol_names[i].env, ud)) && *v && kcap_parse_tol(v, &c->shadow_tol[i]))
            BAD("%s='%.64s' is not a non-negative finite number (a compare tolerance of shadow "
                "mode, such as 0.02 or 1e-3)", kcap_tol_names[i].env, v);
    if ((v = get("KCAP_EVERY", ud)) && *v) {
        if (kcap_parse_u64(v, &u) || u == 0)
            BAD("KCAP_EVERY='%.64s' is not a positive integer", v);
        c->every = u;
    }
    if ((v = get("KCAP_MAX", ud)) && *v) {
        if (kcap_parse_u64(v, &u))
            BAD("KCAP_MAX='%.64s' is not a non-negative integer (0 = unlimited)", v);
        c->max = u;
    }
    if ((v = get("KCAP_MAX_BYTES", ud)) && *v) {
        if (kcap_parse_bytes(v, &u))
            BAD("KCAP_MAX_BYTES='%.64s' is not a byte count such as 500M or 2G", v);
        c->max_bytes = u;
    }
    if ((v = get("KCAP_QUEUE_BYTES", ud)) && *v) {
        if (kcap_parse_bytes(v, &u) || u == 0)
            BAD("KCAP_QUEUE_BYTES='%.64s' is not a positive byte count such as 512M", v);
        c->queue_bytes = u;
    }
    if ((v = get("KCAP_RING_BYTES", ud)) && *v) {
        if (kcap_parse_bytes(v, &u) || u < 4096 || u > (1ull << 40))
            BAD("KCAP_RING_BYTES='%.64s' is not a byte count from 4K to 1T", v);
        c->ring_bytes = u;
    }
    if ((v = get("KCAP_DORMANT", ud)) && *v && kcap_parse_bool(v, &c->dormant))
        BAD("KCAP_DORMANT='%.64s' is not 0 or 1", v);
    if ((v = get("KCAP_GRAPH_TWINS", ud)) && *v && kcap_parse_bool(v, &c->graph_twins))
        BAD("KCAP_GRAPH_TWINS='%.64s' is not 0 or 1", v);
    if ((v = get("KCAP_SHADOW_GRAPHS", ud)) && *v && kcap_parse_bool(v, &c->shadow_graphs))
        BAD("KCAP_SHADOW_GRAPHS='%.64s' is not 0 or 1", v);
    if ((v = get("KCAP_SHADOW_THREAD", ud)) && *v && kcap_parse_bool(v, &c->shadow_thread))
        BAD("KCAP_SHADOW_THREAD='%.64s' is not 0 or 1", v);
    if ((v = get("KCAP_SHADOW_HOLD_MS", ud)) && *v) {
        if (kcap_parse_u64(v, &u) || !u || u > 60000)
            BAD("KCAP_SHADOW_HOLD_MS='%.64s' is not a number of milliseconds in 1..60000", v);
        c->shadow_hold_ms = (int)u;
    }
    if ((v = get("KCAP_FLUSH_TIMEOUT", ud)) && *v) {
        if (kcap_parse_u64(v, &u) || u > 3600)
            BAD("KCAP_FLUSH_TIMEOUT='%.64s' is not a number of seconds in 0..3600", v);
        c->flush_ms = (int)u * 1000;
    }
    if ((v = get("KCAP_FORK", ud)) && *v) {
        if (!strcasecmp(v, "follow"))
            c->fork_follow = 1;
        else if (!strcasecmp(v, "dormant"))
            c->fork_follow = 0;
        else
            BAD("KCAP_FORK='%.64s' is not follow or dormant", v);
    }
    if ((v = get("KCAP_ZSTD_LEVEL", ud)) && *v) {
        if (kcap_parse_u64(v, &u) || u < 1 || u > 19)
            BAD("KCAP_ZSTD_LEVEL='%.64s' is not in 1..19", v);
        c->level = (int)u;
    }
    if ((v = get("KCAP_THREADS", ud)) && *v) {
        if (kcap_parse_u64(v, &u) || u > 256)
            BAD("KCAP_THREADS='%.64s' is not in 0..256 (0 = min(4, CPUs))", v);
        c->threads = (int)u;
    }
    if ((v = get("KCAP_RUN_ID", ud)) && *v) {
        size_t n = strlen(v), ok = n <= 16;
        for (size_t i = 0; ok && i < n; i++)
            ok = isalnum((unsigned char)v[i]) || v[i] == '_';
        if (!ok)
            BAD("KCAP_RUN_ID='%.64s' is not 1..16 letters, digits or '_'", v);
        snprintf(c->run_id, sizeof c->run_id, "%s", v);
    }
    if ((v = get("KCAP_GPU_MODE", ud)) && *v) {
        if (!strcasecmp(v, "async"))
            c->gpu_async = 1;
        else if (!strcasecmp(v, "sync"))
            c->gpu_async = 0;
        else
            BAD("KCAP_GPU_MODE='%.64s' is not async or sync", v);
    }
    return 0;
}

int kcap_config_selects(const kcap_config *c, uint64_t seq)
{
    if (c->nranges) {
        int in = 0;
        for (int i = 0; i < c->nranges && !in; i++)
            in = seq >= c->ranges[i].lo && seq <= c->ranges[i].hi;
        if (!in)
            return 0;
    }
    return c->every <= 1 || seq % c->every == 0;
}
