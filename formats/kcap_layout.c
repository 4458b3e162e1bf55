/*
 * kcap_layout.c — how a tensor is cut into HDF5 chunks. Chunks are ones on the outer
 * dimensions, k along one dimension and full on the inner ones, so every chunk is one
 * contiguous range of the dense buffer: the writer compresses straight from the tensor and
 * the reader decompresses straight into it.
 */
#include "kcap_fmt_internal.h"

size_t kcap_chunk_dims(const kcap_tensor *t, size_t target, uint64_t chunk[KCAP_MAX_DIMS])
{
    size_t inner = kcap_dtype_size(t->dtype);
    int d = t->ndim - 1;
    for (; d >= 0; d--) {
        if ((uint64_t)t->shape[d] > target / inner)
            break;
        chunk[d] = (uint64_t)t->shape[d];
        inner *= (size_t)t->shape[d];
    }
    if (d < 0)
        return inner; /* the whole tensor fits in one chunk */
    uint64_t k = target / inner;
    if (k < 1)
        k = 1;
    if (k > (uint64_t)t->shape[d])
        k = (uint64_t)t->shape[d];
    chunk[d] = k;
    for (int i = 0; i < d; i++)
        chunk[i] = 1;
    return (size_t)k * inner;
}
