/*
 * kcap_fsutil.h — atomic private file creation (formats/ only): a 0600 temp file in the
 * target directory, committed by fsync + a rename that never replaces an existing file +
 * directory fsync, or removed on abort.
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
/* Closes; aborts on failure; KCAP_ERR_EXISTS when the name appeared meanwhile. */
int kcap_atomic_commit(kcap_atomic *a, kcap_error *err);
void kcap_atomic_abort(kcap_atomic *a);                  /* idempotent */

/* Renames dirfd/from to dirfd/to unless `to` exists (then -1, errno EEXIST): renameat2
 * RENAME_NOREPLACE, or where the file system refuses it (EINVAL, ENOSYS, ENOTSUP) the
 * link + unlink fallback, kcap_link_noreplace (also called directly by the tests). */
int kcap_rename_noreplace(int dirfd, const char *from, const char *to);
int kcap_link_noreplace(int dirfd, const char *from, const char *to);

#endif
