/*
 * kcap_fmt_internal.h — pieces shared inside formats/ only (not a public interface):
 * streaming XXH64, the global libhdf5 lock and error capture, the worker pool used by the
 * writer and the reader, byte shuffle, the seal (the integrity header in the HDF5 user
 * block, see FORMAT.md) and the zstd filter callback shared with the plugin.
 */
#ifndef KCAP_FMT_INTERNAL_H
#define KCAP_FMT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "kcap_error.h"
#include "kcap_snapshot.h"

/* ---- XXH64 streaming ---- */
typedef struct kcap_xxh64_state {
    uint64_t v[4], seed, total;
    uint8_t buf[32];
    size_t nbuf;
} kcap_xxh64_state;
void kcap_xxh64_reset(kcap_xxh64_state *st, uint64_t seed);
void kcap_xxh64_update(kcap_xxh64_state *st, const void *data, size_t len);
uint64_t kcap_xxh64_digest(const kcap_xxh64_state *st);

/* ---- libhdf5: one global (recursive) lock, errors silenced and turned into text ---- */
void kcap_h5_lock(void);   /* also silences HDF5's automatic error printing */
void kcap_h5_unlock(void);
/* The most specific message on HDF5's error stack (or the one kcap_h5_errsave kept, when
 * a later call cleared the stack); clears both. */
const char *kcap_h5_errtext(char *buf, size_t n);
/* Keeps the stack's message before cleanup calls (which clear the stack) run. */
void kcap_h5_errsave(void);

/* ---- worker pool: N threads running fn(arg, worker) jobs FIFO ---- */
typedef struct kcap_pool kcap_pool;
typedef void (*kcap_job_fn)(void *arg, int worker);
kcap_pool *kcap_pool_create(int nthreads);
void kcap_pool_free(kcap_pool *p);          /* waits for queued jobs; accepts NULL */
int kcap_pool_threads(const kcap_pool *p);
int kcap_pool_submit(kcap_pool *p, kcap_job_fn fn, void *arg); /* 0 ok; never blocks long */
/* Completion counters: a job calls kcap_pool_done(p, &counter) when finished; a waiter
 * blocks until *counter reaches target. All under the pool's one mutex. */
void kcap_pool_done(kcap_pool *p, volatile int64_t *counter);
void kcap_pool_wait(kcap_pool *p, volatile int64_t *counter, int64_t target);
int kcap_online_cpus(void);

/* ---- byte shuffle (HDF5 filter 2 layout: byte plane j of element i at j*n + i) ---- */
void kcap_shuffle(uint8_t *dst, const uint8_t *src, size_t nelem, size_t es);
void kcap_unshuffle(uint8_t *dst, const uint8_t *src, size_t nelem, size_t es);

/* ---- seal: integrity header in the user block (FORMAT.md "Seal") ---- */
#define KCAP_UB_SIZE 16384
#define KCAP_SEAL_MAGIC "KCAPSNAP"
#define KCAP_SEAL_MAX_EXTENTS 32
#define KCAP_SEAL_MAX_LEAVES 1536
#define KCAP_SEAL_LEAF_OFF 4096
#define KCAP_SEAL_EXT_OFF 256

typedef struct kcap_extent {
    uint64_t begin, end; /* absolute file offsets of a dataset's stored bytes */
    char name[64];       /* "/inputs/kv_cache" */
} kcap_extent;

/* Seal the file open at fd (HDF5 closed): hash its body in parallel with `pool` (may be
 * NULL) and write the header at offset 0. */
int kcap_seal_write(int fd, const char *path, kcap_pool *pool, const kcap_extent *ext,
                    int next, kcap_error *err);
/* Verify the seal of the file open at fd: magic, version, size, header and body hashes.
 * `full` = 0 checks header and size only. Errors name `path` and, for damaged bytes, the
 * datasets the extents place there. */
int kcap_seal_verify(int fd, const char *path, kcap_pool *pool, int full, kcap_error *err);

/* ---- limits ---- */
/* Largest raw tensor bytes a reader will allocate in total (physical RAM, or
 * KCAP_READ_MAX_BYTES). */
uint64_t kcap_read_limit_bytes(void);
/* Largest chunk (raw bytes) accepted in a file. */
#define KCAP_MAX_CHUNK_BYTES (256u << 20)
/* chunks of a layout kcap does not write, each looked up before reading: 2^20 (the writer's
 * own layout has one chunk per dim-0 range of up to KCAP_MAX_CHUNK_BYTES) */
#define KCAP_MAX_GENERIC_CHUNKS (1u << 20)

/* ---- zstd filter (id 32015), shared by in-process registration and the plugin ---- */
#define KCAP_H5Z_ZSTD 32015
size_t kcap_h5zstd_filter(unsigned flags, size_t cd_nelmts, const unsigned cd_values[],
                          size_t nbytes, size_t *buf_size, void **buf);
/* Set by the reader around an H5Dread of a chunked dataset: the bytes every chunk must
 * decode to (0: not checked, e.g. in the standalone plugin). */
extern _Thread_local size_t kcap_h5zstd_expect_bytes;

/* ---- layout helpers shared by writer and reader ---- */
/* Chunk dims for a tensor: ones before dim d, k along d, full after (each chunk is a
 * contiguous range of the dense buffer). Returns chunk bytes. */
size_t kcap_chunk_dims(const kcap_tensor *t, size_t target, uint64_t chunk[KCAP_MAX_DIMS]);

#endif
