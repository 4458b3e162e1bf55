/*
 * kcap_dirwalk.h — the one answer to "which snapshot files do these PATH arguments name",
 * shared by every reader command (kcap check, ls, replay, via replay/kcap_snapfiles.c), so
 * they never disagree on what a directory holds.
 *
 * Arguments that are not directories are taken as given (a missing one stays in the list
 * and becomes a failing case naming it). Inside a directory: names ending in ".h5" that are
 * not hidden, of any file type except directories (a FIFO or device named *.h5 is listed
 * and refused by the reader with a clear message, never opened for a blocking read);
 * subdirectories when `recurse` (never through a symlink: no loops, no escaping the tree).
 * What the walk cannot cover is an error, never a silent skip: a directory that cannot be
 * read, one nested more than 64 deep, an entry whose path would exceed 4095 bytes.
 * The writer's unfinished temp files (.kcap-tmp.<pid>.<counter>.<rand>, kcap_fsutil.c) are
 * not snapshots; they are returned apart, with whether their writer process is alive.
 * Paths are sorted bytewise, so every machine and run sees the same order.
 */
#ifndef KCAP_DIRWALK_H
#define KCAP_DIRWALK_H

#include "kcap_error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kcap_tmpfile {
    char *path;
    long pid;  /* the writer's pid (first field of the temp name) */
    int alive; /* 1: that process exists (still writing, or the pid was reused); 0: stale */
} kcap_tmpfile;

typedef struct kcap_filelist {
    int n;
    char **paths;        /* snapshot files, sorted */
    int ntmp;
    kcap_tmpfile *tmp;   /* writer temp files seen in the walked directories, sorted */
    int nerr;
    char **errors;       /* "DIR: cannot read directory: <strerror, or why not searched>" */
} kcap_filelist;

/* Walks args[0..nargs). KCAP_OK, or KCAP_ERR_NOMEM (err says so; *out is then empty). */
int kcap_dirwalk(char *const *args, int nargs, int recurse, kcap_filelist *out, kcap_error *err);
void kcap_filelist_free(kcap_filelist *l); /* accepts NULL */

/* "FIFO", "socket", "character device", "block device", "directory", "symbolic link",
 * "regular file" or "unknown file type" for a st_mode. */
const char *kcap_file_kind(unsigned mode);
/* 1 and *pid when `name` (a base name) is a writer temp file name, else 0. */
int kcap_tmpname_pid(const char *name, long *pid);

#ifdef __cplusplus
}
#endif

#endif
