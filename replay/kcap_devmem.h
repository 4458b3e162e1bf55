/*
 * kcap_devmem.h — the CUDA device as replay uses it: the primary context of one device, a
 * stream, the device's properties (for the benchmark's peak figures), and kcap_mem_ops
 * over device memory so kcap_call_rebuild / kcap_call_record place tensors on the GPU.
 *
 * Everything goes through common/kcap_cu (the driver API loaded at run time): kcap links
 * no CUDA library, and on a machine without a GPU kcap_dev_open() fails with a sentence
 * instead of the process failing to start. The primary context is the one the kernel
 * library's statically linked cudart uses, so pointers allocated here are valid there.
 */
#ifndef KCAP_DEVMEM_H
#define KCAP_DEVMEM_H

#include <stddef.h>

#include "kcap_calls.h"
#include "kcap_cu.h"
#include "kcap_error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kcap_dev kcap_dev; /* opaque */

typedef struct kcap_dev_info {
    char name[128];
    int cc_major, cc_minor;
    int sm_count;
    size_t l2_bytes;
    double mem_clock_khz;  /* CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE */
    int bus_width_bits;    /* CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH */
    double peak_bw_gbs;    /* clock x bus width x 2 (DDR), GB/s (1e9); 0 when unknown */
    size_t free_bytes, total_bytes; /* at open */
    char upload_mode[8];   /* "async" (queued, default) or "sync": KCAP_REPLAY_UPLOAD */
} kcap_dev_info;

/* Device `ordinal` (0 unless the user picks another): load the driver, make the primary
 * context current on this thread, create a stream. KCAP_ERR_UNSUPPORTED (no driver/GPU) or
 * KCAP_ERR_CUDA, with the reason. */
int kcap_dev_open(int ordinal, kcap_dev **out, kcap_error *err);
void kcap_dev_free(kcap_dev *d); /* accepts NULL */

const kcap_cu *kcap_dev_cu(const kcap_dev *d);
CUstream kcap_dev_stream(const kcap_dev *d);
const kcap_dev_info *kcap_dev_get_info(const kcap_dev *d);
size_t kcap_dev_free_bytes(const kcap_dev *d); /* cuMemGetInfo now */

/* Device memory ops for kcap_call_rebuild / kcap_call_record / kcap_call_fetch_output. */
const kcap_mem_ops *kcap_dev_mem_ops(kcap_dev *d);

/* Issue queued uploads and wait for them (the mem ops queue small host-to-device copies;
 * call this after kcap_call_rebuild, before launching on the stream). KCAP_ERR_CUDA if a
 * queued copy failed. */
int kcap_dev_sync(kcap_dev *d);

/* A driver error as "what: CUDA_ERROR_x message" into err. */
int kcap_dev_error(const kcap_dev *d, CUresult r, kcap_error *err, const char *what);

#ifdef __cplusplus
}
#endif

#endif
