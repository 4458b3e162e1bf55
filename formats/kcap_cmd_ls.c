/*
 * kcap_cmd_ls.c — `kcap ls DIR`: one line per snapshot (time, seq, rank, call, shape
 * summary, size, file), sorted by capture time then seq. Files that are not valid
 * snapshots are reported on stderr (exit 1) and not listed, so are writer temp files;
 * nothing found at all is exit 3. Every string from a file is printed escaped.
 */
#include "kcap_cli.h"
#include "kcap_cmd_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: kcap ls [-r] [-q|-v] DIR...\n\n"
               "Lists the snapshots in DIR, one line each: capture time (UTC), seq, rank,\n"
               "call, shape summary (bs, q_len, heads H, KV rows), file size and name,\n"
               "sorted by time then seq. -r descends into subdirectories. Files that are\n"
               "not valid snapshots are named on stderr and make the exit status 1;\n"
               "unfinished writer temp files (.kcap-tmp.<pid>.*) are named on stderr with\n"
               "whether their writer is still running.\n"
               "  -r, --recursive    descend into subdirectories\n"
               "  -q: no table, only problems and a last line with the count and total size;\n"
               "  -v: under each row the host, pid, device and library hash of the capture.\n"
               KCAP_CLI_COMMON_HELP
               "Exit status: 0 listed, 1 a file is bad or unreadable, 2 usage error,\n"
               "3 no snapshot file found.\n");
}

typedef struct {
    char time[40];
    uint64_t seq;
    int rank;
    char call[KCAP_NAME_MAX];
    char summary[128];
    uint64_t size;
    const char *path;
    char detail[400]; /* -v: host, pid, device, library hash */
} row;

static int cmp_row(const void *a, const void *b)
{
    const row *x = a, *y = b;
    int c = strcmp(x->time, y->time);
    if (c)
        return c;
    if (x->seq != y->seq)
        return x->seq < y->seq ? -1 : 1;
    return strcmp(x->path, y->path);
}

int kcap_cmd_ls(int argc, char **argv)
{
    static const struct option lo[] = {{"recursive", no_argument, 0, 'r'},
                                       KCAP_CLI_COMMON_OPTS};
    int recurse = 0, bad = 0, verbosity = KCAP_NORMAL, ch;
    optind = 0;
    while ((ch = kcap_cli_getopt("ls", argc, argv, "r" KCAP_CLI_COMMON_SHORT, lo)) != -1) {
        if (ch == 'r')
            recurse = 1;
        else if (ch == 'h') {
            usage(stdout);
            return 0;
        } else if (!kcap_cli_verbosity(ch, &verbosity))
            return 2;
    }
    char **dirs = argv + optind;
    int ndirs = argc - optind;
    if (!ndirs) {
        usage(stderr);
        return 2;
    }
    kcap_filelist l;
    bad = kcap_cmd_collect(dirs, ndirs, recurse, &l, stderr, "kcap ls: ", "kcap ls: TMP ");
    if (bad < 0)
        return 1;
    row *rows = calloc(l.n ? (size_t)l.n : 1, sizeof *rows);
    size_t nr = 0;
    for (int i = 0; rows && i < l.n; i++) {
        kcap_snapshot *s = NULL;
        kcap_error err = {0};
        if (kcap_snapshot_read_header(l.paths[i], &s, NULL, &err)) {
            char shown[sizeof err.msg * 4];
            fprintf(stderr, "kcap ls: %s\n", kcap_printable(shown, sizeof shown, err.msg));
            bad = 1;
            continue;
        }
        row *r = &rows[nr++];
        kcap_printable(r->time, sizeof r->time, s->meta.time_utc);
        r->seq = s->meta.seq;
        r->rank = s->meta.rank;
        kcap_printable(r->call, sizeof r->call, s->meta.call);
        char sum[sizeof r->summary];
        kcap_fmt_summary(sum, sizeof sum, s);
        kcap_printable(r->summary, sizeof r->summary, sum);
        struct stat st;
        r->size = stat(l.paths[i], &st) ? 0 : (uint64_t)st.st_size;
        r->path = l.paths[i];
        char host[sizeof s->meta.host * 4], dev[sizeof s->meta.device_name * 4],
            lh[sizeof s->meta.lib_hash * 4];
        snprintf(r->detail, sizeof r->detail, "host %.120s  pid %lld  device %.120s  lib %.40s",
                 kcap_printable(host, sizeof host, s->meta.host), (long long)s->meta.pid,
                 s->meta.device_name[0] ? kcap_printable(dev, sizeof dev, s->meta.device_name)
                                        : "-",
                 kcap_printable(lh, sizeof lh, s->meta.lib_hash));
        kcap_snapshot_free(s);
    }
    qsort(rows, nr, sizeof *rows, cmp_row);
    uint64_t total = 0;
    for (size_t i = 0; i < nr; i++)
        total += rows[i].size;
    if (nr && verbosity == KCAP_QUIET) {
        char sz[32];
        kcap_fmt_bytes(sz, sizeof sz, total);
        printf("%zu snapshots, %s\n", nr, sz);
        nr = 0; /* no table */
    }
    if (nr)
        printf("%-24s %6s %4s  %-22s %-36s %10s  %s\n", "time (UTC)", "seq", "rank", "call",
               "shape", "size", "file");
    for (size_t i = 0; i < nr; i++) {
        char sz[32], shown[4200];
        kcap_fmt_bytes(sz, sizeof sz, rows[i].size);
        printf("%-24s %6llu %4d  %-22s %-36s %10s  %s\n", rows[i].time,
               (unsigned long long)rows[i].seq, rows[i].rank, rows[i].call, rows[i].summary, sz,
               kcap_printable(shown, sizeof shown, rows[i].path));
        if (verbosity == KCAP_VERBOSE)
            printf("%24s %s\n", "", rows[i].detail);
    }
    int rc = bad ? 1 : 0;
    if (l.n == 0 && !bad) {
        fprintf(stderr, "kcap ls: no snapshot files (*.h5) found\n");
        rc = KCAP_EXIT_NO_FILES;
    }
    free(rows);
    kcap_filelist_free(&l);
    return rc;
}
