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

/* 0: capture staged (async), 1: not handled (caller uses the synchronous path),
 * <0 handled and dropped/failed (counted), 2: graph nodes installed. */
int kcap_gpu_capture(kcap_slot *sl, const void *a, void *ws, size_t wsb, void *stream,
                     uint64_t seq, int in_capture, int *status_out);
void kcap_gpu_shutdown(int timeout_ms);
/* 1 when f (a CUfunction, e.g. from a graph kernel node's parameters) is one of libkcap's
 * own kernels (gate, staging, ring control, shadow compare): a graph's kcap nodes. */
int kcap_gpu_own_function(const void *f);
void kcap_gpu_atfork_child(void);

#endif
