/*
 * kcap_cmd_common.h — helpers shared by `kcap info`, `kcap check` and `kcap ls`: listing
 * snapshot files under a path, human-readable sizes and shape text.
 */
#ifndef KCAP_CMD_COMMON_H
#define KCAP_CMD_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "kcap_snapshot.h"

typedef struct kcap_pathlist {
    char **v;
    size_t n, cap;
} kcap_pathlist;

/* Adds `path` if a regular file, or the files under it if a directory (recursively when
 * `recurse`), skipping hidden names (the writer's temp files start with a dot). Returns 0,
 * or -1 with errno set when `path` cannot be read. */
int kcap_pathlist_add(kcap_pathlist *l, const char *path, int recurse);
void kcap_pathlist_free(kcap_pathlist *l);

void kcap_fmt_bytes(char *buf, size_t n, uint64_t bytes); /* "1.23 GiB" */
void kcap_fmt_shape(char *buf, size_t n, int ndim, const int64_t *shape);
/* "bs=2 q_len=3 H=4 kv_rows=48" from the usual scalars/tensors, or the first shapes. */
void kcap_fmt_summary(char *buf, size_t n, const kcap_snapshot *s);

#endif
