/*
 * kcap_size.c — the host bytes recording one call holds (kcap_size.h): the recording's own
 * bound comes from the description engine (formats/kcap_bound.c, with this process's gather
 * scratch); the writer's scratch is sized here from its options. If the host changes
 * kv_indptr while we look, the copy limit set from the bound (kcap_devctx.max_copy) still
 * refuses the oversized copy.
 */
#include "kcap_size.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define ZSTD_STATIC_LINKING_ONLY /* ZSTD_estimateCCtxSize_usingCParams: exported by libzstd.so */
#include <zstd.h>

size_t kcap_writer_bytes(int threads, size_t chunk, int level)
{
    /* kcap_write.c: per worker (threads + 1) a shuffle and a pad buffer of one chunk and a
       zstd context; 2 * workers + 2 output slots of ZSTD_compressBound(chunk) */
    size_t workers = (size_t)threads + 1;
    size_t cctx = ZSTD_estimateCCtxSize_usingCParams(ZSTD_getCParams(level, chunk, 0));
    return workers * (2 * chunk + cctx) + (2 * workers + 2) * ZSTD_compressBound(chunk) +
           (1u << 20); /* libhdf5's per-file metadata while a file is open */
}
