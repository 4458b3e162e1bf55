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

/* The gather iovecs kcap_mem.c's memory ops allocate per ROWS copy (KCAP_IOV_BATCH = 1024
 * pairs of 16 bytes): the scratch kcap_call_bound (formats/kcap_calls.h) is told of. */
#define KCAP_GATHER_SCRATCH (2u * 1024u * 16u)

/* Bytes a kcap_writer with these options holds (scratch buffers, zstd contexts, slots). */
size_t kcap_writer_bytes(int threads, size_t chunk_bytes, int level);

#endif
