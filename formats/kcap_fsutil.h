/*
 * kcap_fsutil.h — atomic private file creation (formats/ only): a 0600 temp file in the
 * target directory, committed by fsync + rename + directory fsync, or removed on abort.
 */
#ifndef KCAP_FSUTIL_H
#define KCAP_FSUTIL_H

#include <limits.h>

#include "kcap_error.h"

typedef struct kcap_atomic {
    int fd, dirfd, created;
    char path[PATH_MAX], dir[PATH_MAX], base[256], tmp[64], h5name[PATH_MAX + 80];
} kcap_atomic;

int kcap_atomic_open(kcap_atomic *a, const char *path, kcap_error *err);
int kcap_atomic_commit(kcap_atomic *a, kcap_error *err); /* closes; aborts on failure */
void kcap_atomic_abort(kcap_atomic *a);                  /* idempotent */

#endif
