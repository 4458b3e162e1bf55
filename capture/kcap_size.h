/*
 * kcap_size.h — how many host bytes recording one call will allocate, known BEFORE anything
 * is copied, so the call can reserve them against KCAP_QUEUE_BYTES and be turned away
 * without allocating when they do not fit (32 threads each copying a whole
 * snapshot before the queue refused it added hundreds of MB to the host).
 */
#ifndef KCAP_SIZE_H
#define KCAP_SIZE_H

#include <stddef.h>

#include "kcap_calls.h"

/* Upper bound of the bytes kcap_call_record() allocates for both phases of call `d` with
 * args `args`: every tensor's dense copy, plus the largest temporary of one tensor (a strided
 * span, a row list, the gather iovecs), plus bookkeeping. Index tensors that shapes depend on
 * (kv_indptr) are read through `mem` (fault-safe). 0, or a kcap_err with err set. */
int kcap_call_bound(const kcap_call_desc *d, const void *args, const kcap_mem_ops *mem,
                    size_t *bytes, kcap_error *err);

/* Bytes a kcap_writer with these options holds (scratch buffers, zstd contexts, slots). */
size_t kcap_writer_bytes(int threads, size_t chunk_bytes, int level);

#endif
