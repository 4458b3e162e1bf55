/*
 * kcap_shadow_loadcheck.h — kcap_shadow_loadcheck.c: `kcap shadow`'s check of a candidate when
 * the capture directory holds no snapshot to replay it against. The library is loaded the
 * way replay loads one (private copy, whole-library check, the ABI's helpers, its backend) in
 * a process of its own, under a time limit, so that a candidate whose constructors crash or
 * hang is refused before it reaches the service. CLI side (kcap binary), above libkcap.
 */
#ifndef KCAP_SHADOW_LOADCHECK_H
#define KCAP_SHADOW_LOADCHECK_H

#include <stdio.h>

typedef struct {
    int ok;           /* it loaded as a kernel library */
    int signal;       /* the signal that ended the loading process, 0 none */
    int timed_out;    /* the seconds it was given, when it had not ended within them (killed) */
    char backend[16]; /* "cpu" or "cuda", when ok */
    char error[1024]; /* why not, when the loader said */
} kcap_loadcheck;

/* Load cand in a child process (its own process group, killed whole after timeout_s; 0: no
 * limit; TMPDIR tmpdir when not NULL, so what it leaves is the caller's to remove). Fills
 * *c; returns c->ok. */
int kcap_loadcheck_run(const char *cand, const char *tmpdir, int timeout_s, kcap_loadcheck *c);

/* The bytes every check looks at: a private copy of cand (TMPDIR, else /tmp) in dir[],
 * copy[], and their hash ("xxh64:..."), which the request carries so that the process loads
 * those bytes or nothing (a file replaced after the checks is refused there). 0, or -1 with
 * the reason in why. dir is kcap-shadow-check.PID.XXXXXX, held under *lock while it exists
 * (common/kcap_privcopy.c: one a killed kcap shadow left is swept by a later one, with what
 * its checks left in it). kcap_check_copy_remove removes both, all under dir (the checking
 * processes run with it as TMPDIR), and releases *lock. */
int kcap_check_copy(const char *cand, char *dir, size_t dn, char *copy, size_t cn, char *hash, size_t hn,
                    int *lock, char *why, size_t wn);
void kcap_check_copy_remove(const char *dir, const char *copy, int *lock);

/* One line to f, ending in `tail`, saying why the check refused cand. */
void kcap_loadcheck_say(FILE *f, const char *cand, const kcap_loadcheck *c, const char *tail);

#endif
