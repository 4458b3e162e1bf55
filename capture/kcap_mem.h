/*
 * kcap_mem.h — kcap_mem.c: reading a call's memory without ever harming the host: host
 * memory through process_vm_readv (a bad pointer is an error, never a SIGSEGV), device
 * memory with copies and a row gather enqueued on the call's stream, and the CUDA context
 * and device identity of a pointer. Mechanism layer.
 */
#ifndef KCAP_MEM_H
#define KCAP_MEM_H

#include <stddef.h>
#include <stdint.h>

#include "kcap_calls.h"    /* formats/: kcap_mem_ops */
#include "kcap_snapshot.h" /* kcap_meta */

typedef struct kcap_devctx {
    const void *cu;    /* const kcap_cu *, NULL for host memory */
    void *stream;      /* CUstream of the call */
    void *ctx;         /* CUcontext of the pointers */
    int64_t num_slots; /* range check of gathered rows */
    size_t max_copy;   /* refuse a single copy above this (garbage sizes) */
    int err;           /* first failure: KCAP_ERR_* */
    int cu_err;        /* CUresult of that failure */
} kcap_devctx;

/* Classify the call's memory: 0 host, 1 device (CUDA driver loaded by the host and the
 * pointer known to it). On device, *cu_out and *ctx_out are set. */
int kcap_mem_classify(const void *ptr, const void **cu_out, void **ctx_out);
/* Host ops that never crash on a bad pointer (process_vm_readv, memcpy fallback). */
void kcap_mem_host_ops(kcap_devctx *dc, kcap_mem_ops *ops);
/* Device ops: copies enqueued on dc->stream, gather on the device. */
void kcap_mem_dev_ops(kcap_devctx *dc, kcap_mem_ops *ops);
/* Device helpers: make the pointer's context current (saving the host's), restore. */
int kcap_dev_push(kcap_devctx *dc, void **saved);
void kcap_dev_pop(kcap_devctx *dc, void *saved);
/* 1 if the stream is capturing (or its status cannot be read). */
int kcap_dev_stream_capturing(kcap_devctx *dc);
/* Device identity for the metadata. */
void kcap_dev_meta(kcap_devctx *dc, kcap_meta *m);
/* The embedded PTX of the gather kernels ("" when built without nvcc). */
extern const char kcap_gather_ptx[];
int kcap_dev_module(const void *cu, void **fn_gather, void **fn_stage, void **fn_gate);

#endif
