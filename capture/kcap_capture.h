/*
 * kcap_capture.h — kcap_capture.c: the capture policy of libkcap.so, what the interposer
 * calls for every call that takes the slow path: initialisation (once, on a thread of
 * ours), selection and the snapshot budget, the arm requests of `kcap arm`, stopping for
 * good, and the exit / fork hooks. Policy layer: it calls the mechanisms and the state.
 */
#ifndef KCAP_CAPTURE_H
#define KCAP_CAPTURE_H

#include <stddef.h>
#include <stdint.h>

#include "kcap_slot.h"

void kcap_init_once(void);
/* One slow-path call: the real function exactly once, its status unchanged, maybe captured. */
int kcap_slow_call(kcap_slot *sl, const void *a, void *ws, size_t wsb, void *stream);
/* The arming watcher's handler (kcap_arm.h): arm (count), disarm (off) or only report. */
int kcap_arm_request(uint64_t count, int off, int status_only, char *reply, size_t n);
void kcap_capture_stop(const char *why); /* stop for good (disk full, ...) */

#endif
