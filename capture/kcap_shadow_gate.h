/*
 * kcap_shadow_gate.h — kcap_shadow_gate.c: `kcap shadow`'s replay gate. A new candidate is
 * replayed (`kcap replay DIR --kernel CAND --ref none --json -`, a process of its own) on
 * the snapshots of the capture directory before it is armed; the gate reads the replay's
 * JSON document from a pipe (no temporary file) and says which refusal it is: snapshots
 * outside tolerance, error statuses from the candidate, snapshots that could not be
 * replayed, a library that does not load, or a replay that died. CLI side (kcap binary),
 * above libkcap.
 */
#ifndef KCAP_SHADOW_GATE_H
#define KCAP_SHADOW_GATE_H

#include <stdio.h>

#include "kcap_config.h" /* KCAP_NTOL */

typedef struct {
    int rc;     /* the replay's exit status; -1 not run */
    int signal; /* the signal that ended it, 0 none */
    int have;   /* its document was read (summary present) */
    int cases, passed, beyond, errors;
    int status_mismatch; /* cases whose candidate returned another status than at capture */
    int timed_out;       /* seconds it was given, when it did not end within them (killed) */
    char load_error[1024];
    char first_error[1024]; /* why the first case that could not run did not */
} kcap_gate_result;

/* Replay the snapshots in dir through cand, with each tolerance of tol[] that is not "".
 * verbose: the replay's own output shown (stderr), else silent. A replay still running after
 * timeout_s seconds (0: no limit) is killed with everything it started (a candidate that
 * hangs) and does not pass. tmpdir (NULL: inherited): the replay's TMPDIR, where its private
 * copy of cand goes. Fills *g; returns 1 when the candidate passed (exit 0, a document, every
 * case passed), 0 otherwise. */
int kcap_gate_run(const char *dir, const char *cand, char tol[KCAP_NTOL][32], int verbose, int timeout_s,
                  const char *tmpdir, kcap_gate_result *g);

/* One line to f (ending in `tail`) saying why the gate refused cand on dir's snapshots. */
void kcap_gate_say(FILE *f, const char *cand, const char *dir, const kcap_gate_result *g, const char *tail);

/* The one document a replay writes, read into *g (exposed for the tests). */
void kcap_gate_parse(const char *doc, kcap_gate_result *g);

/* The pass rule: exit status 0, a document, every case passed, the library loaded. */
int kcap_gate_passed(const kcap_gate_result *g);

#endif
