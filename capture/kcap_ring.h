/*
 * kcap_ring.h — the arithmetic of the zero-stall staging ring, shared by the device-side
 * allocator (kcap_gather.cu, compiled by nvcc) and the host-side bookkeeping (kcap_ring.c),
 * so that the one rule of where a snapshot goes is unit-tested without a GPU.
 *
 * The ring is `cap` bytes of device memory. Snapshots take variable-size, contiguous
 * regions in call order: two monotonic byte counters, `head` (allocated) and `tail`
 * (released), and one ticket per region (1, 2, 3, ...). A region never wraps around the
 * end: one that would cross it starts at the next lap, the rest of the lap is skipped.
 * Regions are drained in any order but released in ticket order (the host advances `tail`
 * past every finished region at the front), so a slow snapshot delays reuse of the space
 * behind it, never corrupts it. At most KCAP_RING_NREC regions are in flight.
 */
#ifndef KCAP_RING_H
#define KCAP_RING_H

#include <stdint.h>

#ifdef __CUDACC__
#define KCAP_RING_FN __host__ __device__ static inline
#else
#define KCAP_RING_FN static inline
#endif

#define KCAP_RING_ALIGN 256ull /* region start and size granularity (coalesced 16-B copies) */
#define KCAP_RING_NREC 4096u   /* regions staged but not yet released, at most */

enum { KCAP_PLACE_OK = 0, KCAP_PLACE_FULL = 1, KCAP_PLACE_BIG = 2 };

/* Where `need` bytes go. tail ≤ head, head - tail ≤ cap, cap a multiple of KCAP_RING_ALIGN;
 * `ticket` is the region's ticket and `tail_ticket` the last released one. On OK: *start
 * (monotonic: the region is at device offset *start % cap) and *new_head. BIG: larger than
 * the whole ring (never fits); FULL: does not fit now (space or records). */
KCAP_RING_FN int kcap_ring_place(uint64_t head, uint64_t tail, uint64_t cap, uint64_t need,
                                 uint64_t ticket, uint64_t tail_ticket, uint64_t *start,
                                 uint64_t *new_head)
{
    need = (need + KCAP_RING_ALIGN - 1) & ~(KCAP_RING_ALIGN - 1);
    if (cap == 0 || need > cap)
        return KCAP_PLACE_BIG;
    if (ticket - tail_ticket > KCAP_RING_NREC)
        return KCAP_PLACE_FULL;
    uint64_t pos = head % cap, s = head;
    if (pos + need > cap)
        s = head + (cap - pos); /* next lap */
    if (s + need - tail > cap)
        return KCAP_PLACE_FULL;
    *start = s;
    *new_head = s + need;
    return KCAP_PLACE_OK;
}

/* Host bookkeeping of released regions (kcap_ring.c). */
typedef struct kcap_ring_books {
    uint64_t tail;        /* bytes released: end of the last released region */
    uint64_t tail_ticket; /* last released ticket */
    uint64_t end[KCAP_RING_NREC];   /* region end (monotonic) by ticket % NREC, when done */
    unsigned char done[KCAP_RING_NREC];
} kcap_ring_books;

void kcap_ring_books_init(kcap_ring_books *b);
/* Region `ticket` ending at `end` has been drained (or abandoned): release it and every
 * drained region after it that is now at the front. Returns 1 when tail moved, 0 when an
 * earlier region still holds the front, -1 when the ticket is out of the window. */
int kcap_ring_books_done(kcap_ring_books *b, uint64_t ticket, uint64_t end);

/* The ring size to allocate: the bound `want` (KCAP_RING_BYTES), cut to what the device can
 * spare while leaving the service max(1 GiB, total/16) of its free memory. 0: none (the
 * service's allocations come first). Multiple of KCAP_RING_ALIGN. */
uint64_t kcap_ring_size(uint64_t want, uint64_t free_bytes, uint64_t total_bytes);
/* The memory the sizing leaves the service. */
uint64_t kcap_ring_reserve(uint64_t total_bytes);

#endif
