/*
 * kcap_cli_opts.c — the option parsing every kcap command shares: getopt_long with one
 * wording of its errors, and the verbosity flags.
 *
 * Why one wrapper: each command used to say something different about the same mistake
 * ("needs a value" for an unknown option, a bare name, no hint). Here an unknown option is
 * `kcap CMD: unknown option '--bogus'`, a missing value names the option that needs one,
 * both point at `kcap CMD --help`, and the caller only has to return 2.
 */
#include "kcap_cli.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* "--name" of argv[optind-1] without any "=value", or "-c" for a short option. */
static void offending(char *buf, size_t n, char **argv, int ind, int opt)
{
    const char *a = ind > 0 ? argv[ind - 1] : NULL;
    if (a && !strncmp(a, "--", 2)) {
        size_t len = strcspn(a, "=");
        snprintf(buf, n, "%.*s", (int)(len < 200 ? len : 200), a);
    } else {
        snprintf(buf, n, "-%c", opt ? opt : '?');
    }
}

/* How many long options `name` ("--x") is a prefix of; *exact: the one it names in full. */
static int matches(const char *name, const struct option *lo, const struct option **exact)
{
    size_t len = strlen(name + 2);
    int hits = 0;
    *exact = NULL;
    for (; lo && lo->name; lo++) {
        hits += len && !strncmp(lo->name, name + 2, len);
        if (!strcmp(lo->name, name + 2))
            *exact = lo;
    }
    return hits;
}

int kcap_cli_getopt(const char *cmd, int argc, char **argv, const char *shorts,
                    const struct option *lo)
{
    char spec[128];
    int in_order = shorts[0] == '+';
    snprintf(spec, sizeof spec, "%s:%s", in_order ? "+" : "", shorts + in_order);
    opterr = 0;
    optopt = 0;
    int ch = getopt_long(argc, argv, spec, lo, NULL);
    if (ch != '?' && ch != ':')
        return ch;
    char name[224];
    /* a short option inside a cluster (-qx) leaves optind on its word: optopt names it */
    int clustered = optopt && optopt < 256 && optind < argc && argv[optind][0] == '-' &&
                    argv[optind][1] != '-';
    offending(name, sizeof name, argv, clustered ? 0 : optind, optopt < 256 ? optopt : 0);
    const struct option *exact = NULL;
    int hits = name[1] == '-' ? matches(name, lo, &exact) : 0;
    if (ch == ':')
        kcap_cli_usage_error(cmd, "option '%s' needs a value", name);
    else if (exact || hits == 1) /* "--flag=value" of an option that takes none */
        kcap_cli_usage_error(cmd, "option '%s' takes no value", name);
    else if (hits > 1)
        kcap_cli_usage_error(cmd, "option '%s' is ambiguous (give more of its name)", name);
    else
        kcap_cli_usage_error(cmd, "unknown option '%s'", name);
    return '?';
}

void kcap_cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "kcap %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(kcap %s --help describes the options)\n", cmd);
}

int kcap_cli_verbosity(int ch, int *verbosity)
{
    if (ch == 'q')
        *verbosity = KCAP_QUIET;
    else if (ch == 'v')
        *verbosity = KCAP_VERBOSE;
    else
        return 0;
    return 1;
}

int kcap_cli_number(const char *cmd, const char *opt, const char *s, double *out)
{
    char *end;
    double v = strtod(s, &end);
    /* finite: 1e400 overflows to inf, and an infinite tolerance passes every output */
    if (!*s || *end || !(v >= 0) || !isfinite(v)) {
        kcap_cli_usage_error(cmd, "%s: '%s' is not a finite non-negative number", opt, s);
        return -1;
    }
    *out = v;
    return 0;
}

int kcap_cli_count(const char *cmd, const char *opt, const char *s, long lo, long hi, long *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < lo || v > hi) {
        kcap_cli_usage_error(cmd, "%s: '%s' is not an integer from %ld to %ld", opt, s, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

int kcap_cli_is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}
