/*
 * kcap_cmd_common.h — helpers shared by `kcap info`, `kcap check` and `kcap ls`: collecting
 * snapshot files (and reporting writer temp files) under the PATH arguments, human-
 * readable sizes and shape text.
 */
#ifndef KCAP_CMD_COMMON_H
#define KCAP_CMD_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include <stdio.h>

#include "kcap_dirwalk.h"
#include "kcap_snapshot.h"

/* Walks the PATH arguments with the one walker of every reader command (kcap_dirwalk.h).
 * Prints each unreadable directory as "<bad_prefix><reason>" and each writer temp file seen
 * as "<tmp_prefix><path>: <what it is>" to `f`; returns how many directories could not be
 * read, or -1 (message on stderr) when out of memory. */
int kcap_cmd_collect(char *const *args, int nargs, int recurse, kcap_filelist *l, FILE *f,
                     const char *bad_prefix, const char *tmp_prefix);
/* Exit status of check and ls when the arguments name no snapshot file at all. */
#define KCAP_EXIT_NO_FILES 3

void kcap_fmt_bytes(char *buf, size_t n, uint64_t bytes); /* "1.23 GiB" */
void kcap_fmt_shape(char *buf, size_t n, int ndim, const int64_t *shape);
/* "bs=2 q_len=3 H=4 kv_rows=48" from the usual scalars/tensors, or the first shapes. */
void kcap_fmt_summary(char *buf, size_t n, const kcap_snapshot *s);

#endif
