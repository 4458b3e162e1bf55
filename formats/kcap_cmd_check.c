/*
 * kcap_cmd_check.c — `kcap check PATH...`: fully validates snapshot files (seal, structure,
 * version, call description, checksums), directories recursively; one line per file,
 * exit 1 if any file is bad.
 */
#include "kcap_cli.h"
#include "kcap_cmd_common.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: kcap check PATH...\n\n"
               "Fully validates snapshot files: seal, HDF5 structure, format version, shapes\n"
               "and dtypes against the call description, per-tensor checksums. Directories\n"
               "are searched recursively (hidden files, e.g. unfinished temp files, are\n"
               "skipped). Prints 'OK   FILE' or 'BAD  FILE: reason' per file.\n"
               "Exit status: 0 all good, 1 a file is bad or unreadable, 2 usage error.\n");
}

int kcap_cmd_check(int argc, char **argv)
{
    kcap_pathlist l = {0};
    int bad = 0, npaths = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            kcap_pathlist_free(&l);
            return 0;
        }
        if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "kcap check: unknown option '%s'\n", argv[i]);
            usage(stderr);
            kcap_pathlist_free(&l);
            return 2;
        }
        npaths++;
        if (kcap_pathlist_add(&l, argv[i], 1)) {
            printf("BAD  %s: %s\n", argv[i], strerror(errno));
            bad++;
        }
    }
    if (!npaths) {
        usage(stderr);
        return 2;
    }
    for (size_t i = 0; i < l.n; i++) {
        kcap_error err = {0};
        if (kcap_snapshot_check(l.v[i], &err) == KCAP_OK) {
            printf("OK   %s\n", l.v[i]);
        } else {
            /* messages start with the path already: print it once */
            size_t pl = strlen(l.v[i]);
            const char *why = !strncmp(err.msg, l.v[i], pl) && err.msg[pl] == ':' ? err.msg + pl + 2
                                                                                : err.msg;
            printf("BAD  %s: %s\n", l.v[i], why);
            bad++;
        }
        fflush(stdout);
    }
    if (l.n == 0 && !bad)
        fprintf(stderr, "kcap check: no files found\n");
    kcap_pathlist_free(&l);
    return bad ? 1 : 0;
}
