/*
 * kcap_seal.c — the seal: a 16 KiB header in the HDF5 user block (which every HDF5 reader
 * skips) holding the format version, the file size, XXH64 hashes of every block of the
 * HDF5 body and where each dataset's bytes lie. The reader checks it BEFORE handing the
 * file to libhdf5, whose parser is not hardened against damaged input: a truncated,
 * bit-flipped or foreign file is refused with a precise message and never parsed.
 * Layout: FORMAT.md "Seal".
 */
#include "kcap_fmt_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define OFF_MAJOR 8
#define OFF_MINOR 10
#define OFF_UBSIZE 12
#define OFF_FSIZE 16
#define OFF_BSIZE 24
#define OFF_NLEAVES 32
#define OFF_NEXT 36
#define OFF_HASH 40
#define OFF_TEXT 48
#define EXT_REC 80
#define MIB (1u << 20)
#define BLOCK_UNIT (4u << 10) /* block sizes are multiples of this */

static void put16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }
static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
static uint16_t get16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return v; }
static uint32_t get32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t get64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }

static uint64_t header_hash(const uint8_t *ub)
{
    uint8_t saved[8];
    memcpy(saved, ub + OFF_HASH, 8);
    memset((uint8_t *)ub + OFF_HASH, 0, 8);
    uint64_t h = kcap_xxh64(ub, KCAP_UB_SIZE, 0);
    memcpy((uint8_t *)ub + OFF_HASH, saved, 8);
    return h;
}

/* ---- parallel block hashing ---- */
typedef struct {
    int fd;
    uint64_t body_off, body_len, block;
    uint64_t *leaves;
    uint32_t first, count;
    int err;
    volatile int64_t *done;
    kcap_pool *pool;
} hash_job;

static void hash_blocks(void *arg, int worker)
{
    hash_job *j = arg;
    (void)worker;
    size_t bufn = MIB;
    uint8_t *buf = malloc(bufn);
    if (!buf)
        j->err = ENOMEM;
    for (uint32_t i = j->first; !j->err && i < j->first + j->count; i++) {
        uint64_t off = j->body_off + (uint64_t)i * j->block;
        uint64_t left = j->body_len - (uint64_t)i * j->block;
        if (left > j->block)
            left = j->block;
        kcap_xxh64_state st;
        kcap_xxh64_reset(&st, 0);
        while (left) {
            size_t want = left < bufn ? (size_t)left : bufn;
            ssize_t r = pread(j->fd, buf, want, (off_t)off);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0) {
                j->err = r < 0 ? errno : EIO; /* file shrank under us */
                break;
            }
            kcap_xxh64_update(&st, buf, (size_t)r);
            off += (uint64_t)r;
            left -= (uint64_t)r;
        }
        j->leaves[i] = kcap_xxh64_digest(&st);
    }
    free(buf);
    kcap_pool_done(j->pool, j->done);
}

static int hash_body(int fd, uint64_t body_len, uint64_t block, uint32_t nleaves,
                     uint64_t *leaves, kcap_pool *pool)
{
    int nt = pool ? kcap_pool_threads(pool) : 1;
    int njobs = nt * 2 < (int)nleaves ? nt * 2 : (int)nleaves;
    if (njobs < 1)
        return 0;
    hash_job *jobs = calloc((size_t)njobs, sizeof *jobs);
    if (!jobs)
        return ENOMEM;
    volatile int64_t done = 0;
    uint32_t per = nleaves / (uint32_t)njobs, extra = nleaves % (uint32_t)njobs, at = 0;
    for (int k = 0; k < njobs; k++) {
        jobs[k] = (hash_job){fd, KCAP_UB_SIZE, body_len, block, leaves, at,
                             per + ((uint32_t)k < extra), 0, &done, pool};
        at += jobs[k].count;
        kcap_pool_submit(pool, hash_blocks, &jobs[k]);
    }
    kcap_pool_wait(pool, &done, njobs);
    int err = 0;
    for (int k = 0; k < njobs; k++)
        if (jobs[k].err)
            err = jobs[k].err;
    free(jobs);
    return err;
}

static uint64_t pick_block(uint64_t body)
{
    uint64_t b = (body + KCAP_SEAL_MAX_LEAVES - 1) / KCAP_SEAL_MAX_LEAVES;
    b = (b + BLOCK_UNIT - 1) / BLOCK_UNIT * BLOCK_UNIT;
    return b < BLOCK_UNIT ? BLOCK_UNIT : b;
}

int kcap_seal_write(int fd, const char *path, kcap_pool *pool, const kcap_extent *ext, int next,
                    kcap_error *err)
{
    struct stat st;
    if (fstat(fd, &st) || (uint64_t)st.st_size < KCAP_UB_SIZE)
        return kcap_error_set(err, KCAP_ERR_IO, "%s: cannot seal: file is %lld bytes",
                              path, (long long)st.st_size);
    uint64_t fsize = (uint64_t)st.st_size, body = fsize - KCAP_UB_SIZE;
    uint64_t block = pick_block(body);
    uint32_t nleaves = (uint32_t)((body + block - 1) / block);
    uint8_t *ub = calloc(1, KCAP_UB_SIZE);
    if (!ub)
        return kcap_error_set(err, KCAP_ERR_NOMEM, "%s: out of memory sealing", path);
    int e = hash_body(fd, body, block, nleaves, (uint64_t *)(void *)(ub + KCAP_SEAL_LEAF_OFF),
                      pool);
    if (e) {
        free(ub);
        return kcap_error_set(err, KCAP_ERR_IO, "%s: reading back to seal: %s", path,
                              strerror(e));
    }
    memcpy(ub, KCAP_SEAL_MAGIC, 8);
    put16(ub + OFF_MAJOR, KCAP_FORMAT_MAJOR);
    put16(ub + OFF_MINOR, KCAP_FORMAT_MINOR);
    put32(ub + OFF_UBSIZE, KCAP_UB_SIZE);
    put64(ub + OFF_FSIZE, fsize);
    put64(ub + OFF_BSIZE, block);
    put32(ub + OFF_NLEAVES, nleaves);
    if (next > KCAP_SEAL_MAX_EXTENTS)
        next = KCAP_SEAL_MAX_EXTENTS;
    put32(ub + OFF_NEXT, (uint32_t)(next < 0 ? 0 : next));
    snprintf((char *)ub + OFF_TEXT, 200,
             "\nkcap snapshot, format %d.%d: HDF5 file after this %d-byte sealed user block "
             "(see kcap formats/FORMAT.md)\n",
             KCAP_FORMAT_MAJOR, KCAP_FORMAT_MINOR, KCAP_UB_SIZE);
    for (int i = 0; i < next; i++) {
        uint8_t *r = ub + KCAP_SEAL_EXT_OFF + (size_t)i * EXT_REC;
        put64(r, ext[i].begin);
        put64(r + 8, ext[i].end);
        snprintf((char *)r + 16, 64, "%s", ext[i].name);
    }
    put64(ub + OFF_HASH, header_hash(ub));
    size_t off = 0;
    while (off < KCAP_UB_SIZE) {
        ssize_t w = pwrite(fd, ub + off, KCAP_UB_SIZE - off, (off_t)off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int en = w < 0 ? errno : EIO;
            free(ub);
            return kcap_error_set(err, KCAP_ERR_IO, "%s: writing the seal: %s", path,
                                  strerror(en));
        }
        off += (size_t)w;
    }
    free(ub);
    return KCAP_OK;
}

static int is_hdf5_sig(const uint8_t *p) { return !memcmp(p, "\211HDF\r\n\032\n", 8); }

/* A damaged kcap magic: a few bits off "KCAPSNAP", or the seal's own text still there. */
static int near_magic(const uint8_t *ub, size_t got)
{
    int bits = 0;
    for (int i = 0; i < 8; i++)
        bits += __builtin_popcount((unsigned)(ub[i] ^ (uint8_t)KCAP_SEAL_MAGIC[i]));
    return bits <= 4 || (got >= OFF_TEXT + 40 && memmem(ub + OFF_TEXT, 200, "kcap snapshot, format",
                                                       21) != NULL);
}

/* The seal text names the version it was written for ("format 2.0"). */
static int text_says_version(const uint8_t *ub, unsigned major)
{
    char want[40];
    snprintf(want, sizeof want, "kcap snapshot, format %u.", major);
    return memmem(ub + OFF_TEXT, 200, want, strlen(want)) != NULL;
}

/* Names the datasets whose stored bytes overlap [a, b). */
static void overlap_names(const uint8_t *ub, uint32_t next, uint64_t a, uint64_t b, char *out,
                          size_t n)
{
    out[0] = '\0';
    size_t used = 0;
    for (uint32_t i = 0; i < next && i < KCAP_SEAL_MAX_EXTENTS; i++) {
        const uint8_t *r = ub + KCAP_SEAL_EXT_OFF + (size_t)i * EXT_REC;
        uint64_t eb = get64(r), ee = get64(r + 8);
        char raw[65], name[4 * 64 + 1]; /* bytes from the file: escaped for any printer */
        memcpy(raw, r + 16, 64);
        raw[64] = '\0';
        kcap_printable(name, sizeof name, raw);
        if (eb < b && a < ee && used + strlen(name) + 3 < n)
            used += (size_t)snprintf(out + used, n - used, "%s%s", used ? ", " : "", name);
    }
}

int kcap_seal_verify(int fd, const char *path, kcap_pool *pool, int full, kcap_error *err)
{
    struct stat st;
    if (fstat(fd, &st))
        return kcap_error_set(err, KCAP_ERR_IO, "%s: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return kcap_error_set(err, KCAP_ERR_NOT_SNAPSHOT, "%s: not a regular file", path);
    uint64_t fsize = (uint64_t)st.st_size;
    if (fsize == 0)
        return kcap_error_set(err, KCAP_ERR_NOT_SNAPSHOT, "%s: empty file, not a kcap snapshot",
                              path);
    uint8_t *ub = calloc(1, KCAP_UB_SIZE);
    if (!ub)
        return kcap_error_set(err, KCAP_ERR_NOMEM, "%s: out of memory", path);
    size_t want = fsize < KCAP_UB_SIZE ? (size_t)fsize : KCAP_UB_SIZE, got = 0;
    while (got < want && got < KCAP_UB_SIZE) {
        size_t left = KCAP_UB_SIZE - got; /* never past the buffer (also what the compiler can see) */
        if (left > want - got)
            left = want - got;
        ssize_t r = pread(fd, ub + got, left, (off_t)got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    int rc = KCAP_OK;
    uint32_t nleaves = 0, next = 0;
    uint64_t block = 0, body = 0;
    if (got < 8 || memcmp(ub, KCAP_SEAL_MAGIC, 8)) {
        int hdf5 = got >= 8 && is_hdf5_sig(ub);
        for (size_t o = 512; !hdf5 && o + 8 <= got; o *= 2)
            hdf5 = is_hdf5_sig(ub + o);
        if (!hdf5 && got >= 8 && near_magic(ub, got))
            rc = kcap_error_set(err, KCAP_ERR_CORRUPT, "%s: corrupt: the kcap seal's magic "
                                "bytes are damaged (a damaged snapshot, not another format)",
                                path);
        else
            rc = kcap_error_set(err, KCAP_ERR_NOT_SNAPSHOT,
                                hdf5 ? "%s: an HDF5 file but not a kcap snapshot (no kcap seal)"
                                     : "%s: not a kcap snapshot (neither a kcap seal nor an "
                                       "HDF5 signature at the start)",
                                path);
        goto out;
    }
    unsigned major = get16(ub + OFF_MAJOR), minor = get16(ub + OFF_MINOR);
    if (got < KCAP_UB_SIZE) {
        rc = kcap_error_set(err, KCAP_ERR_CORRUPT,
                            "%s: truncated: %llu bytes, shorter than its %d-byte header", path,
                            (unsigned long long)fsize, KCAP_UB_SIZE);
        goto out;
    }
    /* The header hash before the version: a bit flip in the version field is damage, not
     * a newer format. A genuinely newer header (which this kcap may not know how to hash)
     * says its version in the text too. */
    int hash_ok = get32(ub + OFF_UBSIZE) == KCAP_UB_SIZE && get64(ub + OFF_HASH) == header_hash(ub);
    if (major != KCAP_FORMAT_MAJOR && (hash_ok || text_says_version(ub, major))) {
        rc = kcap_error_set(err, KCAP_ERR_VERSION,
                            "%s: snapshot format version %u.%u is not supported (this kcap "
                            "reads %d.x)",
                            path, major, minor, KCAP_FORMAT_MAJOR);
        goto out;
    }
    if (!hash_ok) {
        if (major != KCAP_FORMAT_MAJOR)
            rc = kcap_error_set(err, KCAP_ERR_CORRUPT, "%s: corrupt: seal header damaged "
                                "(header checksum mismatch; its version field reads %u.%u, "
                                "which the damage explains)", path, major, minor);
        else
            rc = kcap_error_set(err, KCAP_ERR_CORRUPT, "%s: corrupt: seal header damaged "
                                "(header checksum mismatch)", path);
        goto out;
    }
    uint64_t want_size = get64(ub + OFF_FSIZE);
    block = get64(ub + OFF_BSIZE);
    nleaves = get32(ub + OFF_NLEAVES);
    next = get32(ub + OFF_NEXT);
    if (fsize < want_size) {
        rc = kcap_error_set(err, KCAP_ERR_CORRUPT, "%s: truncated: %llu of %llu bytes", path,
                            (unsigned long long)fsize, (unsigned long long)want_size);
        goto out;
    }
    if (fsize > want_size) {
        rc = kcap_error_set(err, KCAP_ERR_CORRUPT,
                            "%s: %llu unexpected bytes after the sealed end (%llu bytes)", path,
                            (unsigned long long)(fsize - want_size),
                            (unsigned long long)want_size);
        goto out;
    }
    body = fsize - KCAP_UB_SIZE;
    if (want_size < KCAP_UB_SIZE || block < BLOCK_UNIT || block % BLOCK_UNIT || nleaves > KCAP_SEAL_MAX_LEAVES ||
        nleaves != (body + block - 1) / block || next > KCAP_SEAL_MAX_EXTENTS) {
        rc = kcap_error_set(err, KCAP_ERR_CORRUPT, "%s: seal header inconsistent", path);
        goto out;
    }
    if (!full || !nleaves)
        goto out;
    uint64_t *leaves = malloc((size_t)nleaves * 8);
    if (!leaves) {
        rc = kcap_error_set(err, KCAP_ERR_NOMEM, "%s: out of memory", path);
        goto out;
    }
    int e = hash_body(fd, body, block, nleaves, leaves, pool);
    if (e) {
        free(leaves);
        rc = kcap_error_set(err, KCAP_ERR_IO, "%s: %s", path, strerror(e));
        goto out;
    }
    uint32_t bad = 0, first = 0;
    for (uint32_t i = 0; i < nleaves; i++)
        if (leaves[i] != get64(ub + KCAP_SEAL_LEAF_OFF + (size_t)i * 8) && !bad++)
            first = i;
    free(leaves);
    if (bad) {
        uint64_t a = KCAP_UB_SIZE + (uint64_t)first * block, b = a + block;
        if (b > fsize)
            b = fsize;
        char names[512];
        overlap_names(ub, next, a, b, names, sizeof names);
        rc = kcap_error_set(err, KCAP_ERR_CHECKSUM,
                            "%s: %s: data damaged: bytes [%llu, %llu) fail the file checksum "
                            "(%u damaged block%s of %u)",
                            path, names[0] ? names : "HDF5 metadata", (unsigned long long)a,
                            (unsigned long long)b, bad, bad > 1 ? "s" : "", nleaves);
    }
out:
    free(ub);
    return rc;
}
