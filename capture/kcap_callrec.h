/*
 * kcap_callrec.h — kcap_callrec.c: recording one captured call (inputs, the real call,
 * outputs), synchronously or through the zero-stall GPU path. Policy layer.
 */
#ifndef KCAP_CALLREC_H
#define KCAP_CALLREC_H

#include <stddef.h>
#include <stdint.h>

#include "kcap_slot.h"

/* Record one selected call whose budget unit is reserved: inputs, the real call, outputs;
 * returns the real function's status. Every outcome settles the unit (commit or release). */
int kcap_capture_one(kcap_slot *sl, kcap_call_fn real, const void *a, void *ws,
                     size_t wsb, void *stream, uint64_t seq);
/* 1 when the library behind `real` accepts these arguments (the description's checker with
 * the library's own workspace size): a call it rejects is never read, staged or kept. */
int kcap_call_accepted(kcap_slot *sl, kcap_call_fn real, const void *a, const void *ws,
                       size_t wsb);

#endif
