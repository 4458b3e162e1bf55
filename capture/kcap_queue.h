/*
 * kcap_queue.h — kcap_queue.c: the bounded queue of finished snapshots and the writer thread
 * that seals them into files (atomic rename, no replace), with back-off while writes fail.
 * Mechanism layer: it calls state, names, size and formats only; what happens once the
 * writer is up (libkcap's exit flush) is handed in by the caller.
 */
#ifndef KCAP_QUEUE_H
#define KCAP_QUEUE_H

#include <stddef.h>
#include <stdint.h>

#include "kcap_snapshot.h" /* formats/ */

int kcap_queue_push(kcap_snapshot *s, uint64_t seq, int rank); /* 0 or KCAP_ERR_FULL/STOP */
int kcap_queue_would_fit(size_t bytes);
/* KCAP_QUEUE_BYTES bounds every host byte kcap allocates: queued snapshots, the writer's
 * buffers and the copies of calls being recorded. A call reserves its bound (kcap_size.h)
 * before copying (0, or KCAP_ERR_FULL: copy nothing), hands it to the queue with the
 * snapshot (push_reserved: the reservation becomes the snapshot's real size), or gives it
 * back (unreserve; 0 is a no-op). */
int kcap_queue_reserve(size_t bytes);
void kcap_queue_unreserve(size_t bytes);
int kcap_queue_push_reserved(kcap_snapshot *s, uint64_t seq, int rank, size_t reserved);
/* The most bytes one snapshot can ever get in the queue: KCAP_QUEUE_BYTES less the writer's
 * buffers. A snapshot larger than this never fits (kcap_queue_would_fit stays 0 for it). */
size_t kcap_queue_room(void);
/* 1 while writes keep failing and capture waits before the next attempt (1 s .. 60 s). */
int kcap_queue_backoff(void);
int kcap_queue_flush(int timeout_ms); /* returns snapshots still pending at the deadline */
void kcap_queue_atfork_prepare(void);
void kcap_queue_atfork_parent(void);
void kcap_queue_atfork_child(void);
void kcap_queue_drop_all(void);
uint64_t kcap_queue_pending(void);
/* Called once, on the writer thread, after libhdf5 was initialised (so an atexit handler
 * registered there runs before HDF5's own). */
void kcap_queue_on_writer_ready(void (*fn)(void));

#endif
