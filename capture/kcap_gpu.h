/*
 * kcap_gpu.h — kcap_gpu.c + kcap_gpu_drain.c: zero-stall capture on the GPU, eager and in
 * CUDA graphs (staging kernels on the call's stream into a device ring, a drainer thread
 * reading regions back). Mechanism layer: it calls state, meta, mem, queue and formats.
 */
#ifndef KCAP_GPU_H
#define KCAP_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "kcap_slot.h"
#include "kcap_snapshot.h" /* formats/ */
#include "kcap_compare.h"  /* replay/: kcap_cmp_tol */

/* 0: capture staged (async), 1: not handled (caller uses the synchronous path),
 * <0 handled and dropped/failed (counted), 2: graph nodes installed. */
int kcap_gpu_capture(kcap_slot *sl, const void *a, void *ws, size_t wsb, void *stream,
                     uint64_t seq, int in_capture, int *status_out);
void kcap_gpu_shutdown(int timeout_ms);

/* Shadow mode on the GPU (kcap_gpu_shadow.c), zero-stall calls: the production call, then
 * on the same stream the candidate `cand` into outputs and workspace of ours (cand_wsb
 * bytes), the compare kernel, and staging that runs only when the compare found a
 * divergence; in CUDA graph capture (unless KCAP_SHADOW_GRAPHS=0) all of it as graph nodes,
 * judged at every replay. The host never waits. cand_gen (the policy's candidate number)
 * comes back with every report of this call, so results of a replaced candidate can be told
 * apart. Returns as kcap_gpu_capture (0 staged: the drainer settles it; 1 not handled; <0
 * dropped; 2 graph nodes); *cand_failed = the candidate's status when it returned an error
 * (nothing of it was compared), else 0. */
int kcap_gpu_shadow(kcap_slot *sl, const void *a, void *ws, size_t wsb, void *stream,
                    uint64_t seq, kcap_call_fn cand, size_t cand_wsb, unsigned long long cand_gen,
                    int *status_out, int *cand_failed);
/* What the drainer reports of a shadowed call (the policy layer registers it), args being
 * the production call's: KCAP_SHADOW_AGREED (snap, cand NULL); KCAP_SHADOW_DIVERGED, snap
 * holding its inputs and production outputs and cand the candidate's outputs; or
 * KCAP_SHADOW_LOST, divergent but not staged (ring full...: counted by the ring too); or
 * KCAP_SHADOW_UNJUDGED, a call whose stream went on before its candidate had run (the worker
 * thread's watchdog let it go; kcap_gpu_shadow_async.c): what it compared may have changed;
 * or KCAP_SHADOW_UNKEPT, a divergence the sink kept (DIVERGED returned 1) whose snapshot
 * could not be queued after all (KCAP_MAX_BYTES, the queue): snap still the call's.
 * Returns 1 to keep snap (the sink has added the candidate's outputs to it). */
enum { KCAP_SHADOW_AGREED = 0, KCAP_SHADOW_DIVERGED = 1, KCAP_SHADOW_LOST = 2, KCAP_SHADOW_UNJUDGED = 3,
       KCAP_SHADOW_UNKEPT = 4 };
typedef struct {
    double prod_us, cand_us; /* stream time of each call (CUDA events); < 0 when unknown */
    unsigned long long cand_gen; /* the caller's cand_gen when the call (or graph) was made */
} kcap_gpu_shadow_times;
typedef int (*kcap_gpu_shadow_sink)(kcap_slot *sl, const void *args, int verdict,
                                    kcap_snapshot *snap, kcap_snapshot *cand, uint64_t seq,
                                    const kcap_gpu_shadow_times *t);
void kcap_gpu_set_shadow_sink(kcap_gpu_shadow_sink f);
/* The tolerances the device compare uses for outputs of a dtype (the policy layer registers
 * kcap_shadow_tol; without one, replay's defaults). */
typedef kcap_cmp_tol (*kcap_gpu_shadow_tol_fn)(kcap_dtype dt);
void kcap_gpu_set_shadow_tol(kcap_gpu_shadow_tol_fn f);
/* A candidate that returned status (not OK) on a call whose candidate part kcap's worker
 * thread ran (the calling thread had already returned): the policy layer switches it off. */
typedef void (*kcap_gpu_shadow_fail_fn)(const kcap_call_desc *d, int status, uint64_t seq,
                                        unsigned long long cand_gen);
void kcap_gpu_set_shadow_fail(kcap_gpu_shadow_fail_fn f);
/* 1 when f (a CUfunction, e.g. from a graph kernel node's parameters) is one of libkcap's
 * own kernels (gate, staging, ring control, shadow compare): a graph's kcap nodes. */
int kcap_gpu_own_function(const void *f);
/* The same, by role: 0 not ours, 1 gate / staging / ring control, 2 shadow mode's poison
 * kernel (the candidate's nodes follow it in a graph), 3 shadow mode's compare (they end). */
int kcap_gpu_own_kind(const void *f);
void kcap_gpu_atfork_child(void);

#endif
