/*
 * test_capture_ring.c — the zero-stall staging ring's arithmetic (capture/kcap_ring.h) on a
 * fake device: placement (fits, next lap, full, too big, record window), release in ticket
 * order with out-of-order drains, and the sizing rule that leaves the service its memory.
 * A long random run checks the invariant that matters: no two live regions ever overlap
 * and no region crosses the end of the ring.
 */
#include "kcap_ring.h"
#include "../testkit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MiB (1ull << 20)
#define GiB (1ull << 30)

typedef struct {
    const char *name;
    uint64_t head, tail, cap, need, ticket, tail_ticket;
    int want;
    uint64_t start; /* expected on OK */
} place_case;

static void test_place(void)
{
    static const place_case cases[] = {
        {.name = "empty ring", .cap = 1024, .need = 100, .ticket = 1, .want = KCAP_PLACE_OK, .start = 0},
        {.name = "rounded to 256", .head = 256, .tail = 0, .cap = 1024, .need = 1, .ticket = 2,
         .want = KCAP_PLACE_OK, .start = 256},
        {.name = "exactly the whole ring", .cap = 1024, .need = 1024, .ticket = 1, .want = KCAP_PLACE_OK},
        {.name = "larger than the ring", .cap = 1024, .need = 1025, .ticket = 1, .want = KCAP_PLACE_BIG},
        {.name = "no ring", .cap = 0, .need = 1, .ticket = 1, .want = KCAP_PLACE_BIG},
        {.name = "would cross the end: next lap", .head = 768, .tail = 512, .cap = 1024, .need = 512,
         .ticket = 3, .tail_ticket = 1, .want = KCAP_PLACE_OK, .start = 1024},
        {.name = "next lap but the front is still busy", .head = 768, .tail = 256, .cap = 1024,
         .need = 512, .ticket = 3, .tail_ticket = 1, .want = KCAP_PLACE_FULL},
        {.name = "full", .head = 1024, .tail = 0, .cap = 1024, .need = 256, .ticket = 2, .want = KCAP_PLACE_FULL},
        {.name = "fits behind a released front", .head = 1024, .tail = 256, .cap = 1024, .need = 256,
         .ticket = 5, .tail_ticket = 1, .want = KCAP_PLACE_OK, .start = 1024},
        {.name = "record window exhausted", .head = 0, .tail = 0, .cap = 1ull << 40, .need = 256,
         .ticket = KCAP_RING_NREC + 1, .tail_ticket = 0, .want = KCAP_PLACE_FULL},
        {.name = "last record of the window", .head = 0, .tail = 0, .cap = 1ull << 40, .need = 256,
         .ticket = KCAP_RING_NREC, .tail_ticket = 0, .want = KCAP_PLACE_OK, .start = 0},
        {.name = "a long-context snapshot (305 MB) in the default 2 GiB", .head = 3 * 305 * MiB,
         .tail = 0, .cap = 2 * GiB, .need = 305 * MiB, .ticket = 4, .want = KCAP_PLACE_OK,
         .start = 3 * 305 * MiB},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const place_case *c = &cases[i];
        uint64_t s = 77, nh = 77;
        int got = kcap_ring_place(c->head, c->tail, c->cap, c->need, c->ticket, c->tail_ticket, &s, &nh);
        TK_CHECK(got == c->want, "%s: got %d, want %d", c->name, got, c->want);
        if (got == KCAP_PLACE_OK && c->want == KCAP_PLACE_OK) {
            TK_CHECK(s == c->start, "%s: start %llu, want %llu", c->name, (unsigned long long)s,
                     (unsigned long long)c->start);
            uint64_t need = (c->need + 255) & ~255ull;
            TK_CHECK(nh == s + need, "%s: new head", c->name);
            TK_CHECK(s % c->cap + need <= c->cap, "%s: region crosses the end", c->name);
        }
    }
}

static void test_books(void)
{
    kcap_ring_books *b = malloc(sizeof *b);
    kcap_ring_books_init(b);
    /* tickets 1..3 end at 100, 200, 300; drained 2, 3, then 1 */
    TK_CHECK(kcap_ring_books_done(b, 2, 200) == 0, "2 before 1 must not move the tail");
    TK_CHECK(b->tail == 0 && b->tail_ticket == 0, "tail after 2");
    TK_CHECK(kcap_ring_books_done(b, 3, 300) == 0, "3 before 1 must not move the tail");
    TK_CHECK(kcap_ring_books_done(b, 1, 100) == 1, "1 releases 1..3");
    TK_CHECK(b->tail == 300 && b->tail_ticket == 3, "tail %llu ticket %llu", (unsigned long long)b->tail,
             (unsigned long long)b->tail_ticket);
    TK_CHECK(kcap_ring_books_done(b, 3, 300) == -1, "a released ticket again is refused");
    TK_CHECK(kcap_ring_books_done(b, 3 + KCAP_RING_NREC + 1, 1) == -1, "outside the window is refused");
    TK_CHECK(kcap_ring_books_done(b, 4, 400) == 1, "next in order moves at once");
    free(b);
}

static void test_size(void)
{
    /* RTX PRO 6000 under SGLang (96 GB, ~11 GB left free): the full 2 GiB bound */
    TK_CHECK(kcap_ring_size(2 * GiB, 11 * GiB, 96 * GiB) == 2 * GiB, "serving GPU gets the bound");
    /* a GPU nearly full: keep max(1 GiB, total/16) for the service */
    TK_CHECK(kcap_ring_size(2 * GiB, 6 * GiB, 96 * GiB) == 0, "6 GiB free of 96 keeps all for the service");
    uint64_t n = kcap_ring_size(2 * GiB, 7 * GiB, 96 * GiB);
    TK_CHECK(n == 1 * GiB, "7 GiB free of 96: 1 GiB ring, got %llu", (unsigned long long)n);
    TK_CHECK(kcap_ring_size(2 * GiB, 1 * GiB + 32 * MiB, 8 * GiB) == 0, "a 32 MiB remnant is not worth a ring");
    TK_CHECK(kcap_ring_size(2 * MiB, 4 * GiB, 8 * GiB) == 2 * MiB, "a small bound is kept as asked");
    TK_CHECK(kcap_ring_size(1000, 4 * GiB, 8 * GiB) == 768, "rounded down to the alignment");
    TK_CHECK(kcap_ring_reserve(141 * GiB) == 141 * GiB / 16, "H200 reserve");
    TK_CHECK(kcap_ring_reserve(8 * GiB) == 1 * GiB, "reserve floor");
}

/* A fake device: random sizes, out-of-order drains; live regions never overlap. */
typedef struct {
    uint64_t ticket, start, end;
    int live;
} region;

static void test_random(void)
{
    enum { NLIVE = 64 };
    const uint64_t cap = 1 << 20;
    uint64_t head = 0, ticket = 0, placed = 0, full = 0, big = 0;
    kcap_ring_books *b = malloc(sizeof *b);
    kcap_ring_books_init(b);
    region live[NLIVE];
    memset(live, 0, sizeof live);
    srand(12345);
    for (int step = 0; step < 200000; step++) {
        if (rand() % 2) {
            uint64_t need = (uint64_t)(rand() % (int)(cap / 3)) + 1;
            if (rand() % 50 == 0)
                need = cap + 1 + (uint64_t)(rand() % 100);
            uint64_t s, nh;
            int slot = -1;
            for (int i = 0; i < NLIVE; i++)
                if (!live[i].live) {
                    slot = i;
                    break;
                }
            if (slot < 0)
                continue;
            int r = kcap_ring_place(head, b->tail, cap, need, ticket + 1, b->tail_ticket, &s, &nh);
            if (r == KCAP_PLACE_BIG) {
                TK_CHECK(need > cap, "BIG for a region that fits (%llu)", (unsigned long long)need);
                big++;
                continue;
            }
            if (r == KCAP_PLACE_FULL) {
                full++;
                continue;
            }
            ticket++;
            placed++;
            head = nh;
            region g = {ticket, s, nh, 1};
            TK_CHECK(g.start % cap + (g.end - g.start) <= cap, "region crosses the ring's end");
            for (int i = 0; i < NLIVE; i++) {
                if (!live[i].live)
                    continue;
                /* physical overlap in the same or an adjacent lap */
                TK_CHECK(g.start >= live[i].end || g.end <= live[i].start, "overlaps a live region");
                TK_CHECK(g.end - live[i].start <= cap, "more than one lap in flight");
            }
            live[slot] = g;
        } else {
            int i = rand() % NLIVE;
            if (!live[i].live)
                continue;
            TK_CHECK(kcap_ring_books_done(b, live[i].ticket, live[i].end) >= 0, "drain refused");
            live[i].live = 0;
        }
        TK_CHECK(b->tail <= head && head - b->tail <= cap, "counters out of order");
    }
    TK_CHECK(placed > 5000 && full > 1000 && big > 100, "the random run exercised every path "
             "(placed %llu full %llu big %llu)", (unsigned long long)placed, (unsigned long long)full,
             (unsigned long long)big);
    free(b);
}

int main(void)
{
    test_place();
    test_books();
    test_size();
    test_random();
    return tk_summary("test_capture_ring");
}
