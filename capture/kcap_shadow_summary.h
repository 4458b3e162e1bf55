/*
 * kcap_shadow_summary.h — kcap_shadow_summary.c: shadow mode's per-process summary
 * (DIR/shadow-<run>-p<pid>.json), written from a copy of the counters so that no file work
 * happens under the lock the host's calls take. Mechanism layer below kcap_shadow.c.
 */
#ifndef KCAP_SHADOW_SUMMARY_H
#define KCAP_SHADOW_SUMMARY_H

#include <limits.h>
#include <stddef.h>

#define KCAP_SHADOW_SHAPES 64

/* One shape class: the call, its sizes, what was judged of it. */
typedef struct {
    int call;
    long long bs, q_len, heads;
    unsigned long long compared, divergent, kept;
    double worst_abs;
} kcap_shadow_shape;

/* Everything the summary says, copied out of shadow mode's state at one instant. */
typedef struct {
    char path[PATH_MAX], hash[40], prod_hash[80], worst_where[160];
    int on;
    unsigned long long swaps; /* candidates installed after the first */
    double tol[4];            /* the KCAP_TOL_* order: half atol, rtol; f32 atol, rtol */
    unsigned long long compared, divergent, kept, capped, lost, not_judged;
    double worst_abs;
    int nshapes;
    kcap_shadow_shape shapes[KCAP_SHADOW_SHAPES];
    kcap_shadow_shape other; /* every shape past the table, together (sizes unset) */
} kcap_shadow_view;

/* Write v to `path` atomically (a temporary file of this call's own, fsync, rename); strings
 * JSON-escaped; safe from several threads at once (each rename replaces the file whole).
 * 0, or -1 with errno (nothing replaced). */
int kcap_shadow_summary_write(const char *path, const kcap_shadow_view *v);

/* The temporary name of write number seq by process pid for `path`: in path's directory and
 * named as kcap's other temporaries (.kcap-tmp.<pid>.…), so that the next start of kcap there
 * removes one a killed process left behind (kcap_clean_stale). 0, or -1 when it does not fit. */
int kcap_shadow_summary_tmpname(char *out, size_t n, const char *path, long pid, unsigned seq);

#endif
