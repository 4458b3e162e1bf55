/*
 * kcap_watch.h — `kcap replay --watch`: block until the kernel library (or a snapshot
 * directory) changes, then until the change has settled.
 *
 * A build writes a .so in several steps (the linker truncates and writes it, or writes a
 * temporary and renames it), so one inotify event is not "the new library is ready". After
 * the first relevant event the watcher waits for ~300 ms without events and then for the
 * library's size and mtime to stay the same over another quiet interval; only then does it
 * report a change. A library that still fails to load after that is the caller's business
 * (it reports and keeps watching).
 */
#ifndef KCAP_WATCH_H
#define KCAP_WATCH_H

#include <signal.h>

#include "kcap_error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kcap_watch kcap_watch; /* opaque: an inotify descriptor and its watches */

/* Watch the given files (their directories, filtered by name) and snapshot paths
 * (directories recursively, including ones created later; files by name). */
int kcap_watch_create(const char *const *files, int nfiles, char *const *snap_paths,
                      int npaths, int debounce_ms, kcap_watch **out, kcap_error *err);
void kcap_watch_free(kcap_watch *w); /* accepts NULL */

/* 1: something changed and settled; 0: *stop became non-zero (a signal); <0: error. */
int kcap_watch_wait(kcap_watch *w, volatile sig_atomic_t *stop, kcap_error *err);

/* The last changed name (for the "change detected" line). */
const char *kcap_watch_last(const kcap_watch *w);

#ifdef __cplusplus
}
#endif

#endif
