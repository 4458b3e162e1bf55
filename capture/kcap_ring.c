/*
 * kcap_ring.c — host-side bookkeeping of the zero-stall staging ring (kcap_ring.h): which
 * regions may be reused, and how large a ring the device can spare. No CUDA here: the
 * drainer (kcap_gpu.c) feeds it what it read from the device, tests feed it a fake device.
 */
#include "kcap_ring.h"

#include <string.h>

void kcap_ring_books_init(kcap_ring_books *b) { memset(b, 0, sizeof *b); }

int kcap_ring_books_done(kcap_ring_books *b, uint64_t ticket, uint64_t end)
{
    if (ticket <= b->tail_ticket || ticket - b->tail_ticket > KCAP_RING_NREC)
        return -1;
    unsigned i = (unsigned)(ticket % KCAP_RING_NREC);
    b->end[i] = end;
    b->done[i] = 1;
    int moved = 0;
    for (;;) {
        unsigned j = (unsigned)((b->tail_ticket + 1) % KCAP_RING_NREC);
        if (!b->done[j])
            break;
        b->done[j] = 0;
        b->tail = b->end[j];
        b->tail_ticket++;
        moved = 1;
    }
    return moved;
}

uint64_t kcap_ring_reserve(uint64_t total_bytes)
{
    uint64_t r = total_bytes / 16;
    return r > (1ull << 30) ? r : (1ull << 30);
}

uint64_t kcap_ring_size(uint64_t want, uint64_t free_bytes, uint64_t total_bytes)
{
    uint64_t keep = kcap_ring_reserve(total_bytes);
    want &= ~(KCAP_RING_ALIGN - 1);
    if (free_bytes <= keep || want == 0)
        return 0;
    uint64_t n = free_bytes - keep < want ? free_bytes - keep : want;
    n &= ~(KCAP_RING_ALIGN - 1);
    /* a ring cut far below its bound would only drop; below 64 MiB take none */
    if (n < want && n < (64ull << 20))
        return 0;
    return n;
}
