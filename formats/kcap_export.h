/*
 * kcap_export.h — a flat C API over the snapshot reader for foreign-function callers
 * (Python ctypes: python/kcap), built into build/lib/libkcapfmt.so by python/module.mk.
 *
 * Why a separate API: kcap_snapshot / kcap_meta are C structs with fixed-size arrays whose
 * layout a ctypes mirror would have to copy (and silently break on any change). Here every
 * value is reached through a function taking plain integers and pointers, so the Python side
 * mirrors one small struct (kcap_export_tensor) versioned by KCAP_EXPORT_ABI. Opening a file
 * is kcap_snapshot_read(): the same full validation `kcap check` does, not a second reader.
 */
#ifndef KCAP_EXPORT_H
#define KCAP_EXPORT_H

#include <stddef.h>
#include <stdint.h>

#include "kcap_snapshot.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KCAP_EXPORT_ABI 1

/* KCAP_EXPORT_ABI of the library actually loaded. */
int kcap_export_abi(void);

/* Read and fully validate `path` (kcap_snapshot_read). Returns a kcap_err code; on failure
 * *out is NULL and msg (when non-NULL) holds one sentence naming the file and the problem. */
int kcap_export_open(const char *path, kcap_snapshot **out, char *msg, size_t msglen);
/* Full validation only (kcap_snapshot_check). Same return and msg as kcap_export_open. */
int kcap_export_check(const char *path, char *msg, size_t msglen);
void kcap_export_close(kcap_snapshot *s); /* accepts NULL */

/* Generic name of an error code ("checksum mismatch", ...), never NULL. */
const char *kcap_export_err_string(int code);

/* Metadata fields, by index 0..kcap_export_meta_count()-1: name and kind (0 = string,
 * 1 = integer). kcap_export_meta_str / _int return the value of field i (NULL / 0 when the
 * kind does not match). */
int kcap_export_meta_count(void);
const char *kcap_export_meta_name(int i, int *kind);
const char *kcap_export_meta_str(const kcap_snapshot *s, int i);
int64_t kcap_export_meta_int(const kcap_snapshot *s, int i);

/* Scalars: count, then by index (type 1 = int, 2 = float; see kcap_scalar). -1 if out of
 * range. */
int kcap_export_nscalars(const kcap_snapshot *s);
int kcap_export_scalar(const kcap_snapshot *s, int i, const char **name, int *type,
                       int64_t *ival, double *fval);

typedef struct kcap_export_tensor {
    const char *name;
    int dir;           /* 1 input, 2 output (kcap_dir) */
    const char *dtype; /* kcap_dtype_name(): "bfloat16", "float32", "int64", ... */
    int ndim;
    int has_strides;
    int64_t shape[KCAP_MAX_DIMS];
    int64_t strides[KCAP_MAX_DIMS]; /* the captured view's element strides (has_strides) */
    const void *data;  /* dense row-major, valid until kcap_export_close */
    size_t nbytes;
} kcap_export_tensor;

/* Tensors: count, then by index into *out. -1 if out of range. */
int kcap_export_ntensors(const kcap_snapshot *s);
int kcap_export_tensor_at(const kcap_snapshot *s, int i, kcap_export_tensor *out);

#ifdef __cplusplus
}
#endif

#endif
