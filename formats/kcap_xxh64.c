/*
 * kcap_xxh64.c — XXH64 (seed-able, 64-bit) written from the public algorithm description,
 * because the GPU machine has no xxhash headers. Used for per-tensor checksums, the file
 * seal and lib_hash. One-shot and streaming forms; output equals the reference XXH64.
 */
#include "kcap_fmt_internal.h"

#include <string.h>

#define P1 0x9E3779B185EBCA87ULL
#define P2 0xC2B2AE3D27D4EB4FULL
#define P3 0x165667B19E3779F9ULL
#define P4 0x85EBCA77C2B2AE63ULL
#define P5 0x27D4EB2F165667C5ULL

static inline uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

static inline uint64_t rd64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8); /* little-endian hosts only (x86-64, aarch64) */
    return v;
}

static inline uint32_t rd32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static inline uint64_t round1(uint64_t acc, uint64_t in)
{
    acc += in * P2;
    acc = rotl(acc, 31);
    return acc * P1;
}

static inline uint64_t merge(uint64_t acc, uint64_t v)
{
    acc ^= round1(0, v);
    return acc * P1 + P4;
}

void kcap_xxh64_reset(kcap_xxh64_state *st, uint64_t seed)
{
    memset(st, 0, sizeof *st);
    st->v[0] = seed + P1 + P2;
    st->v[1] = seed + P2;
    st->v[2] = seed;
    st->v[3] = seed - P1;
    st->seed = seed;
}

void kcap_xxh64_update(kcap_xxh64_state *st, const void *data, size_t len)
{
    const uint8_t *p = data;
    st->total += len;
    if (st->nbuf) {
        size_t take = 32 - st->nbuf;
        if (take > len)
            take = len;
        memcpy(st->buf + st->nbuf, p, take);
        st->nbuf += take;
        p += take;
        len -= take;
        if (st->nbuf < 32)
            return;
        for (int i = 0; i < 4; i++)
            st->v[i] = round1(st->v[i], rd64(st->buf + 8 * i));
        st->nbuf = 0;
    }
    uint64_t v0 = st->v[0], v1 = st->v[1], v2 = st->v[2], v3 = st->v[3];
    while (len >= 32) {
        v0 = round1(v0, rd64(p));
        v1 = round1(v1, rd64(p + 8));
        v2 = round1(v2, rd64(p + 16));
        v3 = round1(v3, rd64(p + 24));
        p += 32;
        len -= 32;
    }
    st->v[0] = v0, st->v[1] = v1, st->v[2] = v2, st->v[3] = v3;
    if (len) {
        memcpy(st->buf, p, len);
        st->nbuf = len;
    }
}

uint64_t kcap_xxh64_digest(const kcap_xxh64_state *st)
{
    uint64_t h;
    if (st->total >= 32) {
        h = rotl(st->v[0], 1) + rotl(st->v[1], 7) + rotl(st->v[2], 12) + rotl(st->v[3], 18);
        for (int i = 0; i < 4; i++)
            h = merge(h, st->v[i]);
    } else {
        h = st->seed + P5;
    }
    h += st->total;
    const uint8_t *p = st->buf;
    size_t len = st->nbuf;
    while (len >= 8) {
        h ^= round1(0, rd64(p));
        h = rotl(h, 27) * P1 + P4;
        p += 8;
        len -= 8;
    }
    if (len >= 4) {
        h ^= (uint64_t)rd32(p) * P1;
        h = rotl(h, 23) * P2 + P3;
        p += 4;
        len -= 4;
    }
    while (len--) {
        h ^= (*p++) * P5;
        h = rotl(h, 11) * P1;
    }
    h ^= h >> 33;
    h *= P2;
    h ^= h >> 29;
    h *= P3;
    h ^= h >> 32;
    return h;
}

uint64_t kcap_xxh64(const void *data, size_t len, uint64_t seed)
{
    kcap_xxh64_state st;
    kcap_xxh64_reset(&st, seed);
    kcap_xxh64_update(&st, data, len);
    return kcap_xxh64_digest(&st);
}
