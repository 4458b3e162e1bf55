/*
 * kcap_callrec.h — one captured call (kcap_callrec.c) and the pieces of the capture core it
 * uses (kcap_capture.c): the real call with the host's errno, and the snapshot budget.
 */
#ifndef KCAP_CALLREC_H
#define KCAP_CALLREC_H

#include "kcap_cap.h"

/* Record one selected call whose budget unit is reserved: inputs, the real call, outputs;
 * returns the real function's status. Every outcome settles the unit (commit or release). */
int kcap_capture_one(kcap_slot *sl, kcap_call_fn real, const void *a, void *ws,
                     size_t wsb, void *stream, uint64_t seq);
/* 1 when the library behind `real` accepts these arguments (the description's checker with
 * the library's own workspace size): a call it rejects is never read, staged or kept. */
int kcap_call_accepted(kcap_slot *sl, kcap_call_fn real, const void *a, const void *ws,
                       size_t wsb);
/* The one real call: the host's errno going in, the library's coming out. */
int kcap_real(kcap_call_fn real, const void *a, void *ws, size_t wsb, void *stream);
void kcap_unreserve(void); /* the reserved unit did not become a snapshot */
void kcap_commit(void);    /* it did (queued, or staged on the device) */
/* KCAP_MAX_BYTES: 1 and the bytes counted as accepted when the snapshot fits, else 0. */
int kcap_bytes_fit(size_t n);

#endif
