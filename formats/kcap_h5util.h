/*
 * kcap_h5util.h — libhdf5 helpers shared by the writer and the reader (formats/ only):
 * dtype <-> HDF5 type mapping, typed attribute read/write with bounded sizes, chunk layout.
 * Callers hold kcap_h5_lock().
 */
#ifndef KCAP_H5UTIL_H
#define KCAP_H5UTIL_H

#include <hdf5.h>

#include "kcap_fmt_internal.h"

#define KCAP_ATTR_STR_MAX 65536 /* longest string attribute a reader accepts */

hid_t kcap_h5_file_type(kcap_dtype dt);           /* predefined type, never closed */
int kcap_h5_type_matches(hid_t type, kcap_dtype dt);

/* Attributes on `obj`; write returns 0/-1, read returns 0, 1 (absent) or -1 (bad type). */
int kcap_h5_attr_put_str(hid_t obj, const char *name, const char *v);
int kcap_h5_attr_put_i64(hid_t obj, const char *name, int64_t v);
int kcap_h5_attr_put_u64(hid_t obj, const char *name, uint64_t v);
int kcap_h5_attr_put_i64v(hid_t obj, const char *name, const int64_t *v, int n);
int kcap_h5_attr_get_str(hid_t obj, const char *name, char *buf, size_t n); /* truncates */
/* Like get_str but allocates (caller frees); *out NULL when absent. */
int kcap_h5_attr_get_str_alloc(hid_t obj, const char *name, char **out);
int kcap_h5_attr_get_i64(hid_t obj, const char *name, int64_t *v);
int kcap_h5_attr_get_u64(hid_t obj, const char *name, uint64_t *v);
int kcap_h5_attr_get_i64v(hid_t obj, const char *name, int64_t *v, int maxn, int *n);

#endif
