/*
 * kcap_cmd_check.c — `kcap check PATH...`: fully validates snapshot files (seal, structure,
 * version, call description, checksums), directories recursively through the walker every
 * reader command shares; one line per file, writer temp files reported, exit 1 if any
 * file is bad, 3 if there was nothing to check.
 */
#include "kcap_cli.h"
#include "kcap_cmd_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: kcap check [-q|-v] PATH...\n\n"
               "Fully validates snapshot files: seal, HDF5 structure, format version, shapes\n"
               "and dtypes against the call description, per-tensor checksums. Directories\n"
               "are searched recursively for *.h5 (hidden names skipped). Each file is\n"
               "validated in a child process first, so a file that crashes libhdf5 fails\n"
               "alone. Prints 'OK   FILE' or 'BAD  FILE: reason' per file, and\n"
               "'TMP  FILE: ...' for each unfinished writer temp file (.kcap-tmp.<pid>.*),\n"
               "saying whether its writer is still running.\n"
               "  -q: only the BAD and TMP lines and a last line counting the files;\n"
               "  -v: each OK line also gives the call and shapes (bs, q_len, heads, KV rows).\n"
               KCAP_CLI_COMMON_HELP
               "Exit status: 0 all good, 1 a file is bad or unreadable, 2 usage error,\n"
               "3 no snapshot file found under the paths.\n");
}

/* -v: "  (vattn_verify bs=2 q_len=3 H=4 kv_rows=48)" after an OK line. */
static void print_detail(const char *path)
{
    kcap_snapshot *s = NULL;
    kcap_error err = {0};
    char sum[160], shown[sizeof sum * 4], call[KCAP_NAME_MAX * 4];
    if (kcap_snapshot_read_header(path, &s, NULL, &err))
        return;
    kcap_fmt_summary(sum, sizeof sum, s);
    printf("       %s %s\n", kcap_printable(call, sizeof call, s->meta.call),
           kcap_printable(shown, sizeof shown, sum));
    kcap_snapshot_free(s);
}

int kcap_cmd_check(int argc, char **argv)
{
    static const struct option lo[] = {KCAP_CLI_COMMON_OPTS};
    int verbosity = KCAP_NORMAL, ch;
    optind = 0;
    while ((ch = kcap_cli_getopt("check", argc, argv, KCAP_CLI_COMMON_SHORT, lo)) != -1) {
        if (ch == 'h') {
            usage(stdout);
            return 0;
        }
        if (!kcap_cli_verbosity(ch, &verbosity))
            return 2;
    }
    char **paths = argv + optind;
    int npaths = argc - optind;
    if (!npaths) {
        usage(stderr);
        return 2;
    }
    kcap_filelist l;
    int bad = kcap_cmd_collect(paths, npaths, 1, &l, stdout, "BAD  ", "TMP  ");
    if (bad < 0)
        return 1;
    char shown[4200], why[sizeof shown];
    for (int i = 0; i < l.n; i++) {
        kcap_error err = {0};
        kcap_printable(shown, sizeof shown, l.paths[i]);
        if (kcap_snapshot_check(l.paths[i], &err) == KCAP_OK) {
            if (verbosity != KCAP_QUIET)
                printf("OK   %s\n", shown);
            if (verbosity == KCAP_VERBOSE)
                print_detail(l.paths[i]);
        } else {
            /* messages start with the path already: print it once */
            size_t pl = strlen(l.paths[i]);
            const char *m = !strncmp(err.msg, l.paths[i], pl) && err.msg[pl] == ':'
                                ? err.msg + pl + 2
                                : err.msg;
            printf("BAD  %s: %s\n", shown, kcap_printable(why, sizeof why, m));
            bad++;
        }
        fflush(stdout);
    }
    int rc = bad ? 1 : 0;
    if (verbosity == KCAP_QUIET && l.n)
        printf("%d of %d snapshot files bad\n", bad - l.nerr, l.n);
    if (l.n == 0) {
        fprintf(stderr, "kcap check: no snapshot files (*.h5) found under the given paths\n");
        rc = bad ? 1 : KCAP_EXIT_NO_FILES;
    }
    kcap_filelist_free(&l);
    return rc;
}
