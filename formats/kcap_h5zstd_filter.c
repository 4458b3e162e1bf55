/*
 * kcap_h5zstd_filter.c — the zstd HDF5 filter (id 32015, one cd_value = the level), as a
 * plain callback that calls nothing from libhdf5, so the same object serves the in-process
 * registration (kcap_h5zstd_reg.c) and the standalone plugin build/plugins/libh5zstd.so
 * (kcap_h5zstd_plugin.c) that h5dump / h5py load through HDF5_PLUGIN_PATH.
 *
 * Compression writes one frame with its content size and zstd's checksum. Decompression
 * accepts exactly one frame that records its content size (bounded before allocating), so
 * a damaged chunk is an error, never an over-allocation. kcap's reader also says, per
 * thread, how many bytes the chunk must decode to (kcap_h5zstd_expect_bytes): libhdf5 1.10
 * copies a whole chunk's worth out of whatever the pipeline returned, so a file whose layout
 * declares bigger chunks than its frames hold would have it read past the buffer.
 */
#include "kcap_fmt_internal.h"

#include <hdf5.h> /* declarations only: this object calls nothing from libhdf5 */
#include <stdlib.h>
#include <zstd.h>

#define FILTER_MAX_OUT ((unsigned long long)1 << 32) /* HDF5 chunks are < 4 GiB */

_Thread_local size_t kcap_h5zstd_expect_bytes;

size_t kcap_h5zstd_filter(unsigned flags, size_t cd_nelmts, const unsigned cd_values[],
                          size_t nbytes, size_t *buf_size, void **buf)
{
    if (flags & H5Z_FLAG_REVERSE) {
        unsigned long long n = ZSTD_getFrameContentSize(*buf, nbytes);
        if (n == ZSTD_CONTENTSIZE_ERROR || n == ZSTD_CONTENTSIZE_UNKNOWN || n > FILTER_MAX_OUT)
            return 0;
        if (kcap_h5zstd_expect_bytes && n != kcap_h5zstd_expect_bytes)
            return 0; /* not the chunk the layout declares */
        if (ZSTD_findFrameCompressedSize(*buf, nbytes) != nbytes)
            return 0; /* trailing bytes or several frames: not ours */
        void *out = malloc(n ? (size_t)n : 1);
        if (!out)
            return 0;
        size_t r = ZSTD_decompress(out, (size_t)n, *buf, nbytes);
        if (ZSTD_isError(r) || r != n) {
            free(out);
            return 0;
        }
        free(*buf);
        *buf = out;
        *buf_size = n ? (size_t)n : 1;
        return (size_t)n;
    }
    int level = cd_nelmts >= 1 ? (int)cd_values[0] : 1;
    if (level < 1 || level > ZSTD_maxCLevel())
        level = 1;
    size_t cap = ZSTD_compressBound(nbytes);
    void *out = malloc(cap);
    ZSTD_CCtx *cc = ZSTD_createCCtx();
    size_t r = 0;
    if (out && cc) {
        ZSTD_CCtx_setParameter(cc, ZSTD_c_compressionLevel, level);
        ZSTD_CCtx_setParameter(cc, ZSTD_c_checksumFlag, 1);
        ZSTD_CCtx_setParameter(cc, ZSTD_c_contentSizeFlag, 1);
        r = ZSTD_compress2(cc, out, cap, *buf, nbytes);
    }
    ZSTD_freeCCtx(cc);
    if (!out || ZSTD_isError(r)) {
        free(out);
        return 0;
    }
    free(*buf);
    *buf = out;
    *buf_size = cap;
    return r;
}
