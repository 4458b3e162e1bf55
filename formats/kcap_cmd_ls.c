/*
 * kcap_cmd_ls.c — `kcap ls DIR`: one line per snapshot (time, seq, rank, call, shape
 * summary, size, file), sorted by capture time then seq. Files that are not valid
 * snapshots are reported on stderr (exit 1) and not listed.
 */
#include "kcap_cli.h"
#include "kcap_cmd_common.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: kcap ls [-r] DIR...\n\n"
               "Lists the snapshots in DIR, one line each: capture time (UTC), seq, rank,\n"
               "call, shape summary (bs, q_len, heads H, KV rows), file size and name,\n"
               "sorted by time then seq. -r descends into subdirectories. Files that are\n"
               "not valid snapshots are named on stderr and make the exit status 1.\n");
}

typedef struct {
    char time[40];
    uint64_t seq;
    int rank;
    char call[KCAP_NAME_MAX];
    char summary[128];
    uint64_t size;
    const char *path;
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
    int recurse = 0, ndirs = 0, bad = 0;
    kcap_pathlist l = {0};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            kcap_pathlist_free(&l);
            return 0;
        }
        if (!strcmp(argv[i], "-r")) {
            recurse = 1;
            continue;
        }
        if (argv[i][0] == '-') {
            fprintf(stderr, "kcap ls: unknown option '%s'\n", argv[i]);
            usage(stderr);
            kcap_pathlist_free(&l);
            return 2;
        }
        ndirs++;
        if (kcap_pathlist_add(&l, argv[i], recurse)) {
            fprintf(stderr, "kcap ls: %s: %s\n", argv[i], strerror(errno));
            bad = 1;
        }
    }
    if (!ndirs) {
        usage(stderr);
        return 2;
    }
    row *rows = calloc(l.n ? l.n : 1, sizeof *rows);
    size_t nr = 0;
    for (size_t i = 0; rows && i < l.n; i++) {
        kcap_snapshot *s = NULL;
        kcap_error err = {0};
        if (kcap_snapshot_read_header(l.v[i], &s, NULL, &err)) {
            fprintf(stderr, "kcap ls: %s\n", err.msg);
            bad = 1;
            continue;
        }
        row *r = &rows[nr++];
        snprintf(r->time, sizeof r->time, "%s", s->meta.time_utc);
        r->seq = s->meta.seq;
        r->rank = s->meta.rank;
        snprintf(r->call, sizeof r->call, "%s", s->meta.call);
        kcap_fmt_summary(r->summary, sizeof r->summary, s);
        struct stat st;
        r->size = stat(l.v[i], &st) ? 0 : (uint64_t)st.st_size;
        r->path = l.v[i];
        kcap_snapshot_free(s);
    }
    qsort(rows, nr, sizeof *rows, cmp_row);
    if (nr)
        printf("%-24s %6s %4s  %-22s %-36s %10s  %s\n", "time (UTC)", "seq", "rank", "call",
               "shape", "size", "file");
    for (size_t i = 0; i < nr; i++) {
        char sz[32];
        kcap_fmt_bytes(sz, sizeof sz, rows[i].size);
        printf("%-24s %6llu %4d  %-22s %-36s %10s  %s\n", rows[i].time,
               (unsigned long long)rows[i].seq, rows[i].rank, rows[i].call, rows[i].summary, sz,
               rows[i].path);
    }
    free(rows);
    kcap_pathlist_free(&l);
    return bad ? 1 : 0;
}
