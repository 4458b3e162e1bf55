/*
 * kcap_h5util.c — typed, bounds-checked attribute access and the dtype <-> HDF5 type map.
 * Reads check the stored type class and size before reading anything, so a file that
 * claims a 1 GB string or a float where an integer belongs is an error, not a big malloc.
 */
#include "kcap_h5util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

hid_t kcap_h5_file_type(kcap_dtype dt)
{
    switch (dt) {
    case KCAP_DT_BF16:
    case KCAP_DT_F16: return H5T_STD_U16LE; /* HDF5 1.10 has no half types: raw bits */
    case KCAP_DT_F32: return H5T_IEEE_F32LE;
    case KCAP_DT_F64: return H5T_IEEE_F64LE;
    case KCAP_DT_I32: return H5T_STD_I32LE;
    case KCAP_DT_I64: return H5T_STD_I64LE;
    case KCAP_DT_U8: return H5T_STD_U8LE;
    default: return -1;
    }
}

int kcap_h5_type_matches(hid_t type, kcap_dtype dt)
{
    H5T_class_t c = H5Tget_class(type);
    size_t sz = H5Tget_size(type);
    if (sz != kcap_dtype_size(dt) || H5Tget_order(type) != H5T_ORDER_LE)
        return sz == 1 && c == H5T_INTEGER && dt == KCAP_DT_U8 &&
               H5Tget_sign(type) == H5T_SGN_NONE; /* 1-byte types have no order */
    switch (dt) {
    case KCAP_DT_BF16:
    case KCAP_DT_F16:
    case KCAP_DT_U8: return c == H5T_INTEGER && H5Tget_sign(type) == H5T_SGN_NONE;
    case KCAP_DT_I32:
    case KCAP_DT_I64: return c == H5T_INTEGER && H5Tget_sign(type) == H5T_SGN_2;
    case KCAP_DT_F32:
    case KCAP_DT_F64: return c == H5T_FLOAT;
    default: return 0;
    }
}

static int put(hid_t obj, const char *name, hid_t ftype, hid_t mtype, hid_t space, const void *v)
{
    hid_t a = H5Acreate2(obj, name, ftype, space, H5P_DEFAULT, H5P_DEFAULT);
    if (a < 0) {
        kcap_h5_errsave();
        return -1;
    }
    herr_t r = H5Awrite(a, mtype, v);
    if (r < 0)
        kcap_h5_errsave();
    H5Aclose(a);
    return r < 0 ? -1 : 0;
}

int kcap_h5_attr_put_str(hid_t obj, const char *name, const char *v)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    size_t n = strlen(v);
    H5Tset_size(t, n ? n : 1);
    H5Tset_strpad(t, H5T_STR_NULLPAD);
    H5Tset_cset(t, H5T_CSET_UTF8);
    hid_t s = H5Screate(H5S_SCALAR);
    char *tmp = n ? NULL : calloc(1, 1);
    int r = put(obj, name, t, t, s, n ? v : tmp);
    free(tmp);
    H5Sclose(s);
    H5Tclose(t);
    return r;
}

int kcap_h5_attr_put_i64(hid_t obj, const char *name, int64_t v)
{
    hid_t s = H5Screate(H5S_SCALAR);
    int r = put(obj, name, H5T_STD_I64LE, H5T_NATIVE_INT64, s, &v);
    H5Sclose(s);
    return r;
}

int kcap_h5_attr_put_u64(hid_t obj, const char *name, uint64_t v)
{
    hid_t s = H5Screate(H5S_SCALAR);
    int r = put(obj, name, H5T_STD_U64LE, H5T_NATIVE_UINT64, s, &v);
    H5Sclose(s);
    return r;
}

int kcap_h5_attr_put_i64v(hid_t obj, const char *name, const int64_t *v, int n)
{
    hsize_t d = (hsize_t)n;
    hid_t s = H5Screate_simple(1, &d, NULL);
    int r = put(obj, name, H5T_STD_I64LE, H5T_NATIVE_INT64, s, v);
    H5Sclose(s);
    return r;
}

/* Opens attribute `name` if present: 1 absent, -1 error, 0 ok with *a, *t, *npoints set. */
static int open_attr(hid_t obj, const char *name, hid_t *a, hid_t *t, hssize_t *npoints)
{
    htri_t ex = H5Aexists(obj, name);
    if (ex == 0)
        return 1;
    if (ex < 0)
        return -1;
    *a = H5Aopen(obj, name, H5P_DEFAULT);
    if (*a < 0)
        return -1;
    *t = H5Aget_type(*a);
    hid_t s = H5Aget_space(*a);
    *npoints = s < 0 ? -1 : H5Sget_simple_extent_npoints(s);
    if (s >= 0)
        H5Sclose(s);
    if (*t < 0 || *npoints < 0) {
        if (*t >= 0)
            H5Tclose(*t);
        H5Aclose(*a);
        return -1;
    }
    return 0;
}

int kcap_h5_attr_get_str_alloc(hid_t obj, const char *name, char **out)
{
    *out = NULL;
    hid_t a, t;
    hssize_t np;
    int r = open_attr(obj, name, &a, &t, &np);
    if (r)
        return r;
    size_t sz = H5Tget_size(t);
    r = -1;
    if (H5Tget_class(t) == H5T_STRING && !H5Tis_variable_str(t) && np == 1 && sz > 0 &&
        sz <= KCAP_ATTR_STR_MAX) {
        char *buf = calloc(1, sz + 1);
        hid_t mt = H5Tcopy(t);
        if (buf && mt >= 0 && H5Aread(a, mt, buf) >= 0) {
            buf[sz] = '\0';
            *out = buf;
            r = 0;
        } else {
            free(buf);
        }
        if (mt >= 0)
            H5Tclose(mt);
    }
    H5Tclose(t);
    H5Aclose(a);
    return r;
}

int kcap_h5_attr_get_str(hid_t obj, const char *name, char *buf, size_t n)
{
    char *s;
    int r = kcap_h5_attr_get_str_alloc(obj, name, &s);
    if (r)
        return r;
    snprintf(buf, n, "%s", s);
    free(s);
    return 0;
}

static int get_int(hid_t obj, const char *name, void *v, hid_t mtype, int maxn, int *n)
{
    hid_t a, t;
    hssize_t np;
    int r = open_attr(obj, name, &a, &t, &np);
    if (r)
        return r;
    r = -1;
    if (H5Tget_class(t) == H5T_INTEGER && H5Tget_size(t) <= 8 && np >= (n ? 0 : 1) &&
        np <= maxn && (n || np == 1)) {
        if (H5Aread(a, mtype, v) >= 0) {
            if (n)
                *n = (int)np;
            r = 0;
        }
    }
    H5Tclose(t);
    H5Aclose(a);
    return r;
}

int kcap_h5_attr_get_i64(hid_t obj, const char *name, int64_t *v)
{
    return get_int(obj, name, v, H5T_NATIVE_INT64, 1, NULL);
}

int kcap_h5_attr_get_u64(hid_t obj, const char *name, uint64_t *v)
{
    return get_int(obj, name, v, H5T_NATIVE_UINT64, 1, NULL);
}

int kcap_h5_attr_get_i64v(hid_t obj, const char *name, int64_t *v, int maxn, int *n)
{
    return get_int(obj, name, v, H5T_NATIVE_INT64, maxn, n);
}
