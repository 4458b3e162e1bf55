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
    fprintf(f, "usage: kcap ls [-r] DIR...\n\n"
               "Lists the snapshots in DIR, one line each: capture time (UTC), seq, rank,\n"
               "call, shape summary (bs, q_len, heads H, KV rows), file size and name,\n"
               "sorted by time then seq. -r descends into subdirectories. Files that are\n"
               "not valid snapshots are named on stderr and make the exit status 1;\n"
               "unfinished writer temp files (.kcap-tmp.<pid>.*) are named on stderr with\n"
               "whether their writer is still running.\n"
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
    char **dirs = calloc((size_t)argc + 1, sizeof *dirs);
    if (!dirs)
        return 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            free(dirs);
            return 0;
        }
        if (!strcmp(argv[i], "-r")) {
            recurse = 1;
            continue;
        }
        if (argv[i][0] == '-') {
            fprintf(stderr, "kcap ls: unknown option '%s'\n", argv[i]);
            usage(stderr);
            free(dirs);
            return 2;
        }
        dirs[ndirs++] = argv[i];
    }
    if (!ndirs) {
        usage(stderr);
        free(dirs);
        return 2;
    }
    kcap_filelist l;
    bad = kcap_cmd_collect(dirs, ndirs, recurse, &l, stderr, "kcap ls: ", "kcap ls: TMP ");
    free(dirs);
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
        kcap_snapshot_free(s);
    }
    qsort(rows, nr, sizeof *rows, cmp_row);
    if (nr)
        printf("%-24s %6s %4s  %-22s %-36s %10s  %s\n", "time (UTC)", "seq", "rank", "call",
               "shape", "size", "file");
    for (size_t i = 0; i < nr; i++) {
        char sz[32], shown[4200];
        kcap_fmt_bytes(sz, sizeof sz, rows[i].size);
        printf("%-24s %6llu %4d  %-22s %-36s %10s  %s\n", rows[i].time,
               (unsigned long long)rows[i].seq, rows[i].rank, rows[i].call, rows[i].summary, sz,
               kcap_printable(shown, sizeof shown, rows[i].path));
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
