/*
 * kcap_snapfiles.h — turn the PATH... arguments of `kcap replay` into a sorted list of
 * snapshot files: files are taken as given, directories are walked recursively for *.h5
 * by formats/kcap_dirwalk.h (the walker `kcap check` and `kcap ls` use too).
 *
 * Sorted by path so that a corpus replays in the same order on every machine and every run
 * (tables and JSON diff cleanly); a path that does not exist is kept in the list, so it
 * becomes one failing case that names it instead of silently shrinking the set.
 */
#ifndef KCAP_SNAPFILES_H
#define KCAP_SNAPFILES_H

#include "kcap_error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kcap_snapfiles {
    int n;
    char **paths; /* malloc'd strings */
} kcap_snapfiles;

int kcap_snapfiles_collect(char *const *args, int nargs, kcap_snapfiles *out, kcap_error *err);
void kcap_snapfiles_free(kcap_snapfiles *s); /* accepts NULL */

#ifdef __cplusplus
}
#endif

#endif
