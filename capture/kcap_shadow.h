/*
 * kcap_shadow.h — kcap_shadow.c: shadow mode. A candidate build of the kernel library
 * (KCAP_SHADOW=CAND.so) runs on the same inputs as each selected production call, into
 * outputs and workspace of kcap's own; the two results are compared with replay's rules
 * (kcap_compare: NaN/Inf positions first, then replay's tolerances, or those configured:
 * KCAP_SHADOW_ATOL/_RTOL/_LSE_ATOL/_LSE_RTOL, a swap's own) and only a call where
 * they disagree is kept, as a snapshot holding the inputs, the production outputs and the
 * candidate's (/candidate, format 1.2). The service always gets the production results.
 * Policy layer (beside kcap_callrec, which calls it). Host-memory calls (the CPU library)
 * are judged on the calling thread; eager device calls on the GPU, on the call's stream
 * (kcap_gpu_shadow.c), the drainer reporting back, and (unless KCAP_SHADOW_GRAPHS=0) calls in
 * CUDA graph capture at every replay (kcap_gpu_shadow_graph.c).
 */
#ifndef KCAP_SHADOW_H
#define KCAP_SHADOW_H

#include "kcap_slot.h"
#include "kcap_compare.h"  /* replay/: kcap_cmp_tol */
#include "kcap_snapshot.h" /* formats/ */

/* Load the candidate (a private copy, so a rebuilt file at the same path is really new
 * code) and start the thread that rewrites the summary in `dir` every few seconds; called
 * once at initialisation, on a thread of ours. 0, or -1 with a log line. */
int kcap_shadow_init(const char *cand_path, const char *dir);
/* The handler of `kcap shadow` requests (kcap_arm.h): "shadow [atol=A] [rtol=R]
 * [lse_atol=A] [lse_rtol=R] /abs/CAND.so" loads a new candidate (a private copy) and makes
 * it current with those tolerances (a key left out: the configured value) — the old one stays
 * loaded, a call may be running it — "shadow-off", "shadow-status". The reply goes to reply;
 * 0 or -1. */
int kcap_shadow_request(const char *cmd, char *reply, size_t n);
/* The tolerances in force now for outputs of dtype dt: bf16/fp16 and fp32/fp64 ones as
 * configured (or given with the last swap), else replay's kcap_cmp_default_tol. Lock-free
 * (one atomic load), for any thread at any time. */
kcap_cmp_tol kcap_shadow_tol(kcap_dtype dt);
/* The thread that rewrites the summary file every few seconds (kcap_shadow_init starts it;
 * a forked child, which has none, again from its first call). */
void kcap_shadow_summary_start(void);
/* In a forked child (atfork, before any other call): the summary's lock and counters start
 * over, so the child's summary counts its own calls. */
void kcap_shadow_atfork_child(void);
/* 1 while a candidate is loaded and has not been switched off. */
int kcap_shadow_on(void);
/* A recorded host-memory call (snap holds its inputs and production outputs, status 0; the
 * production call took prod_ns): run the candidate, compare; a candidate much slower than
 * production (KCAP_SHADOW_MAX_SLOWDOWN) is switched off. 1: they disagree and snap now also holds the candidate's
 * outputs (keep it); 0: they agree, the candidate failed (switched off) or the call was not
 * judged (counted in the summary as not_judged) — drop it. *gen: the candidate's number
 * (swap count) it was judged by, for kcap_shadow_keep_failed. */
int kcap_shadow_judge(kcap_slot *sl, const void *args, kcap_snapshot *snap, uint64_t seq,
                      uint64_t prod_ns, unsigned long long *gen);
/* A device call outside CUDA graph capture: the production call runs (its status in
 * *status), then the candidate and the compare on the GPU (kcap_gpu_shadow); 0 judged
 * there (the drainer settles it), <0 dropped, 1 not judged (counted; the caller runs the
 * production call). */
int kcap_shadow_device(kcap_slot *sl, const void *a, void *ws, size_t wsb, void *stream,
                       uint64_t seq, int *status);
/* A selected call that never reached its candidate (queue full, KCAP_MAX_BYTES, a failed
 * copy...) while shadow mode is on: counted as not judged, so that every selected call of a
 * successful production run is in the summary once. */
void kcap_shadow_not_judged(void);
/* A divergence settled as kept (kcap_shadow_judge returned 1, or the drainer's report) whose
 * snapshot could not be queued after all (KCAP_MAX_BYTES, the queue): counted as lost, not
 * kept, so that `kept` is the number of files. snap: the call's snapshot (its shape); gen:
 * the candidate that judged it (nothing moves once another has replaced it). */
void kcap_shadow_keep_failed(kcap_slot *sl, const kcap_snapshot *snap, unsigned long long gen);
/* A device call in CUDA graph capture that kcap_shadow_device did not judge (and counted):
 * one log line saying so, once. */
void kcap_shadow_skip_device(void);
/* DIR/shadow-<run>-p<pid>.json, written atomically: calls compared, divergent, the worst
 * error and where, per shape, the candidate's and production's library hashes, the
 * tolerances in force. */
void kcap_shadow_summary(const char *dir);

#endif
