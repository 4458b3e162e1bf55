/*
 * kcap_read_internal.h — the reader's pieces shared inside formats/ only: the read modes,
 * the per-file read context, the in-order data sink (tensor XXH64 and, for `kcap check`,
 * per-row hashes instead of the data itself) and the sandboxed probe that runs libhdf5 on
 * an untrusted file in a child process before this process parses it (kcap_sandbox.c).
 */
#ifndef KCAP_READ_INTERNAL_H
#define KCAP_READ_INTERNAL_H

#include <zstd.h>

#include "kcap_calls_internal.h"
#include "kcap_dirwalk.h"
#include "kcap_h5util.h"

/* FULL: data kept (kcap_snapshot_read). HEADER: no data read (info, ls). CHECK: every
 * byte decoded and hashed through bounded buffers, only index tensors kept (check).
 * PROBE: every libhdf5 call of the other modes, nothing decoded (the sandboxed child). */
enum { KCAP_RMODE_FULL, KCAP_RMODE_HEADER, KCAP_RMODE_CHECK, KCAP_RMODE_PROBE };

/* Memory a streaming read (CHECK, PROBE) may hold for in-flight chunks and slabs. */
#define KCAP_STREAM_BYTES (256u << 20)
/* Rows read per H5Dread in the generic (non-kcap layout) path: at most this many bytes. */
#define KCAP_SLAB_BYTES (16u << 20)
/* CHECK keeps integer tensors up to this size in memory (shapes and row ids need them;
 * 1 GiB of int64 row ids index a KV tensor of over 100 GiB, beyond the declared limit). */
#define KCAP_CHECK_KEEP_BYTES (1u << 30)

/* Consumes a tensor's dense bytes in order. */
typedef struct kcap_rsink {
    kcap_xxh64_state h;
    uint64_t row_bytes;  /* > 0: also hash each dim-0 row into row_hash[] */
    uint64_t *row_hash;
    kcap_xxh64_state rh;
    uint64_t row_fill;
    size_t row_i;
} kcap_rsink;

typedef struct kcap_rslot kcap_rslot;

typedef struct kcap_rctx {
    const char *path;
    kcap_error *err;
    int mode;
    kcap_pool *pool;
    int want_pool;   /* big file: decode with worker threads, else inline */
    int nworkers, nslots;
    ZSTD_DCtx **dctx;
    kcap_rslot *slots;
    size_t slot_cap; /* raw chunk bytes each slot can hold */
    uint8_t *slab;   /* generic path buffer (streaming modes) */
    size_t slab_cap;
    uint64_t budget; /* declared raw bytes still allowed */
} kcap_rctx;

void kcap_rctx_free(kcap_rctx *r);
/* Reads (or in PROBE mode walks) the data of dataset d into t->data (t->data NULL:
 * stream into `sink` only). Caller holds the HDF5 lock. */
int kcap_read_data(kcap_rctx *r, hid_t d, kcap_tensor *t, const char *full, kcap_rsink *sink);
/* Refuses external raw storage and virtual datasets (every mode, headers too). */
int kcap_read_storage_ok(kcap_rctx *r, hid_t d, const char *full);
/* HDF5 error text appended to "path: obj: what: ". */
int kcap_read_h5err(kcap_rctx *r, int code, const char *obj, const char *what);

/* The libhdf5 part of a read on an open, sealed file (kcap_read.c). */
int kcap_read_fd(int fd, const char *path, int mode, kcap_snapshot **out, size_t **stored,
                 kcap_error *err);

/* Runs kcap_read_fd(PROBE) in a forked child under a memory and time limit. KCAP_OK when
 * the child finished cleanly and accepted the file; else err says why (the child's own
 * refusal, or that libhdf5 crashed / ran out of time or memory on it). */
int kcap_sandbox_probe(int fd, const char *path, kcap_error *err);
int kcap_sandbox_enabled(void);

/* Re-creates the HDF5 lock in a forked child (the parent's owner thread is gone). */
void kcap_h5_lock_reset_in_child(void);

#endif
