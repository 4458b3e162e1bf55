/*
 * kcap_cmd_dump.c — `kcap dump FILE [--tensor NAME] [--stats] [--limit N]`: a snapshot's
 * values, as numbers, with no HDF5 tool, no plugin path and no bf16 bit trick.
 *
 * `kcap info` shows structure; this shows contents: every tensor (or one) with its values
 * widened to double (bf16/f16 exactly, via kcap_cmp_value, the same decoding the verdicts
 * use), one line per row of the last dimension, and with --stats min / max / mean over the
 * finite elements plus NaN, +Inf and -Inf counts — what you look at first when a replay says
 * an output went bad.
 *
 * The file's name and the strings read from it are printed through kcap_printable, as
 * check, ls and replay print them: a name holding ESC or a newline stays inert text.
 */
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kcap_cli.h"
#include "kcap_compare.h"
#include "kcap_snapshot.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: kcap dump FILE [--tensor NAME] [--stats] [--limit N]\n"
               "\n"
               "Prints a snapshot's scalars and tensor values as numbers (bf16/f16 widened\n"
               "exactly), one line per row of the last dimension. Without --tensor every\n"
               "tensor is shown with its first 8 values (--limit N changes that; --limit 0\n"
               "prints all); with --tensor NAME that tensor in full. --stats adds min, max,\n"
               "mean (finite elements) and NaN / +Inf / -Inf counts per tensor; --stats alone\n"
               "(without --limit) prints no values.\n"
               "  -t, --tensor NAME  -s, --stats  -l, --limit N   (as above)\n"
               "  -q: nothing but errors (the exit status says whether FILE and the tensor\n"
               "      read); -v: every value (--limit 0) and the statistics.\n"
               KCAP_CLI_COMMON_HELP
               "Exit status: 0 ok, 1 unreadable file or no such tensor, 2 usage error.\n");
}

static void print_stats(const kcap_tensor *t, size_t n)
{
    size_t nan = 0, pinf = 0, ninf = 0, fin = 0;
    double lo = INFINITY, hi = -INFINITY, sum = 0;
    for (size_t i = 0; i < n; i++) {
        double v = kcap_cmp_value(t->dtype, t->data, i);
        if (isnan(v))
            nan++;
        else if (isinf(v))
            v > 0 ? pinf++ : ninf++;
        else {
            fin++;
            sum += v;
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
        }
    }
    if (fin)
        printf("    stats: n=%zu min=%.9g max=%.9g mean=%.9g nan=%zu +inf=%zu -inf=%zu\n", n, lo,
               hi, sum / (double)fin, nan, pinf, ninf);
    else
        printf("    stats: n=%zu min=- max=- mean=- nan=%zu +inf=%zu -inf=%zu\n", n, nan, pinf,
               ninf);
}

/* Rows of the last dimension, each prefixed by its leading index: "[3,1,:] v v v". */
static void print_values(const kcap_tensor *t, size_t n, size_t limit)
{
    size_t row = t->ndim > 0 && t->shape[t->ndim - 1] > 0 ? (size_t)t->shape[t->ndim - 1] : 1;
    size_t shown = limit && limit < n ? limit : n;
    for (size_t i = 0; i < shown; i++) {
        if (i % row == 0) {
            if (i)
                putchar('\n');
            int64_t idx[KCAP_MAX_DIMS] = {0};
            kcap_cmp_unravel((int64_t)i, t->ndim, t->shape, idx);
            printf("    [");
            for (int d = 0; d + 1 < t->ndim; d++)
                printf("%" PRId64 ",", idx[d]);
            printf(t->ndim ? ":]" : "]");
        }
        printf(" %.9g", kcap_cmp_value(t->dtype, t->data, i));
    }
    if (shown)
        putchar('\n');
    if (shown < n)
        printf("    ... %zu more (--limit 0 prints all)\n", n - shown);
}

int kcap_cmd_dump(int argc, char **argv)
{
    static const struct option lo[] = {{"tensor", required_argument, 0, 't'},
                                       {"stats", no_argument, 0, 's'},
                                       {"limit", required_argument, 0, 'l'},
                                       KCAP_CLI_COMMON_OPTS};
    const char *only = NULL;
    int stats = 0, verbosity = KCAP_NORMAL, ch;
    long limit = -1; /* -1: the default for the mode */
    optind = 0;
    while ((ch = kcap_cli_getopt("dump", argc, argv, "t:sl:" KCAP_CLI_COMMON_SHORT, lo)) != -1) {
        switch (ch) {
        case 't': only = optarg; break;
        case 's': stats = 1; break;
        case 'l':
            if (kcap_cli_count("dump", "--limit", optarg, 0, 0x7fffffffL, &limit))
                return 2;
            break;
        case 'h': usage(stdout); return 0;
        case 'q':
        case 'v': kcap_cli_verbosity(ch, &verbosity); break;
        default: return 2; /* kcap_cli_getopt said what */
        }
    }
    if (argc - optind != 1) { /* say which: no FILE, or the first extra argument */
        if (argc - optind < 1)
            kcap_cli_usage_error("dump", "no snapshot FILE given");
        else
            kcap_cli_usage_error("dump", "one FILE at a time: unexpected argument '%s'",
                                 kcap_shown(argv[optind + 1]));
        return 2;
    }
    const char *path = argv[optind];
    if (verbosity == KCAP_VERBOSE) {
        stats = 1;
        limit = 0;
    }
    if (limit < 0)
        limit = stats ? -2 : only ? 0 : 8; /* -2: --stats alone prints no values */
    kcap_snapshot *s = NULL;
    kcap_error err = {0};
    if (kcap_snapshot_read(path, &s, &err)) {
        if (!strstr(err.msg, path))
            kcap_error_prefix(&err, "%s", path);
        fprintf(stderr, "kcap dump: %s\n", kcap_shown(err.msg));
        return 1;
    }
    int show = verbosity != KCAP_QUIET;
    if (show)
        printf("%s: %s (abi %d)\n", kcap_shown(path), kcap_shown(s->meta.call), s->meta.abi_version);
    if (show && !only) {
        printf("  scalars:");
        for (int i = 0; i < s->nscalars; i++) {
            if (s->scalars[i].type == KCAP_SC_INT)
                printf(" %s=%" PRId64, s->scalars[i].name, s->scalars[i].i);
            else
                printf(" %s=%.9g", s->scalars[i].name, s->scalars[i].f);
        }
        putchar('\n');
    }
    int found = 0;
    for (int i = 0; i < s->ntensors; i++) {
        const kcap_tensor *t = &s->tensors[i];
        if (only && strcmp(only, t->name))
            continue;
        found++;
        if (!show)
            continue;
        size_t es = kcap_dtype_size(t->dtype), n = es ? t->nbytes / es : 0;
        printf("  %-3s %s %s[", t->dir == KCAP_DIR_IN ? "in" : "out", t->name,
               kcap_dtype_name(t->dtype));
        for (int d = 0; d < t->ndim; d++)
            printf("%s%" PRId64, d ? "," : "", t->shape[d]);
        printf("]\n");
        if (stats)
            print_stats(t, n);
        if (limit != -2)
            print_values(t, n, (size_t)limit);
    }
    kcap_snapshot_free(s);
    if (only && !found) {
        fprintf(stderr, "kcap dump: %s: no tensor named '%s'\n", kcap_shown(path), kcap_shown(only));
        return 1;
    }
    return 0;
}
