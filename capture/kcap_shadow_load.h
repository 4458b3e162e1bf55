/*
 * kcap_shadow_load.h — kcap_shadow_load.c: loading a shadow-mode candidate kernel library
 * from a private copy, so that a library rebuilt at the same path is really the new code
 * (the loader caches by path and inode). Mechanism layer below kcap_shadow.c.
 */
#ifndef KCAP_SHADOW_LOAD_H
#define KCAP_SHADOW_LOAD_H

#include "kcap_slot.h"

#include <stddef.h>

/* One loaded candidate: a private copy's handle and its entry points. Never unloaded:
 * a call may be running it when a newer candidate takes its place. */
typedef struct {
    void *handle;
    char hash[40];
    kcap_call_fn fn[KCAP_NCALLS];
    size_t (*ws_fn[KCAP_NCALLS])(const void *);
} kcap_candidate;

/* Copy `cand` to a private 0700 directory under TMPDIR (else /tmp), dlopen the copy and find
 * the hooked calls' entry points in it (libc's dlsym: libkcap's would hand back capture
 * wrappers). want_hash (NULL: any): the bytes must hash to it ("xxh64:..."), checked before
 * anything of them runs — `kcap shadow` sends the hash of what it checked, so a file
 * replaced since is refused, not loaded into the service. 0, or -1 and the reason, naming
 * `cand`, in why. */
int kcap_candidate_load(const char *cand, const char *want_hash, kcap_candidate *c, char *why, size_t n);

#endif
