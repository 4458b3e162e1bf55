/*
 * kcap_meta.h — kcap_meta.c: snapshot metadata helpers, the library behind a call (its own
 * workspace rule), and running one-off work on a thread of ours. Bottom layer (it calls
 * log and state only; the device identity of a snapshot is kcap_mem.h's kcap_dev_meta).
 */
#ifndef KCAP_META_H
#define KCAP_META_H

#include <stddef.h>
#include <stdint.h>

#include "kcap_slot.h"
#include "kcap_snapshot.h" /* formats/: kcap_meta */

/* Where a snapshot came from: time, host, pid, rank, sequence, kcap version, the call, its
 * library (path, hash) and the calling thread's tags (unless m->tags is set); device_name "cpu" (callers on the device path then fill the
 * device identity with kcap_dev_meta). */
void kcap_fill_meta(kcap_slot *sl, kcap_meta *m, uint64_t seq);
int kcap_rank(void);

void kcap_rank_init(void);                 /* read once at init; a garbage value is logged */
void kcap_call_library(kcap_call_fn real); /* this thread's call goes to `real`'s library */
/* At bind time: `real`'s library has this workspace-size function (the description's
 * workspace_fn; NULL: none). */
void kcap_library_bind(kcap_call_fn real, void *ws_fn);
/* The workspace size the bound library of this thread's call asks for (0 when it has no rule). */
size_t kcap_lib_workspace_size(const void *args);
void kcap_meta_atfork_child(void);
/* Run fn(arg) on a short-lived thread of ours and wait for it: for one-off steps that need
 * more stack than a host thread may have (the capture path uses <= 4 KiB of the caller's).
 * -1 when no thread could be started (fn did not run). */
int kcap_run_on_own_stack(void (*fn)(void *), void *arg);

#endif
