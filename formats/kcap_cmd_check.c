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
    fprintf(f, "usage: kcap check PATH...\n\n"
               "Fully validates snapshot files: seal, HDF5 structure, format version, shapes\n"
               "and dtypes against the call description, per-tensor checksums. Directories\n"
               "are searched recursively for *.h5 (hidden names skipped). Each file is\n"
               "validated in a child process first, so a file that crashes libhdf5 fails\n"
               "alone. Prints 'OK   FILE' or 'BAD  FILE: reason' per file, and\n"
               "'TMP  FILE: ...' for each unfinished writer temp file (.kcap-tmp.<pid>.*),\n"
               "saying whether its writer is still running.\n"
               "Exit status: 0 all good, 1 a file is bad or unreadable, 2 usage error,\n"
               "3 no snapshot file found under the paths.\n");
}

int kcap_cmd_check(int argc, char **argv)
{
    int npaths = 0;
    char **paths = calloc((size_t)argc + 1, sizeof *paths);
    if (!paths)
        return 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            free(paths);
            return 0;
        }
        if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "kcap check: unknown option '%s'\n", argv[i]);
            usage(stderr);
            free(paths);
            return 2;
        }
        paths[npaths++] = argv[i];
    }
    if (!npaths) {
        usage(stderr);
        free(paths);
        return 2;
    }
    kcap_filelist l;
    int bad = kcap_cmd_collect(paths, npaths, 1, &l, stdout, "BAD  ", "TMP  ");
    free(paths);
    if (bad < 0)
        return 1;
    char shown[4200], why[sizeof shown];
    for (int i = 0; i < l.n; i++) {
        kcap_error err = {0};
        kcap_printable(shown, sizeof shown, l.paths[i]);
        if (kcap_snapshot_check(l.paths[i], &err) == KCAP_OK) {
            printf("OK   %s\n", shown);
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
    if (l.n == 0) {
        fprintf(stderr, "kcap check: no snapshot files (*.h5) found under the given paths\n");
        rc = bad ? 1 : KCAP_EXIT_NO_FILES;
    }
    kcap_filelist_free(&l);
    return rc;
}
