/*
 * kcap_h5zstd_plugin.c — the HDF5 dynamic-plugin entry points of build/plugins/libh5zstd.so,
 * so stock tools (h5dump, h5ls, h5py) decode kcap snapshots with
 * HDF5_PLUGIN_PATH=build/plugins. Built against the HDF5 headers only: it links libzstd,
 * never libhdf5, so it loads into whichever libhdf5 the tool uses.
 */
#include "kcap_fmt_internal.h"

#include <H5PLextern.h> /* declarations only: the plugin never links libhdf5 */
#include <hdf5.h>

static const H5Z_class2_t kcap_h5zstd_plugin_class = {
    H5Z_CLASS_T_VERS,
    (H5Z_filter_t)KCAP_H5Z_ZSTD,
    1, /* encoder present */
    1, /* decoder present */
    "zstd (kcap)",
    NULL,
    NULL,
    (H5Z_func_t)kcap_h5zstd_filter,
};

H5PL_type_t H5PLget_plugin_type(void) { return H5PL_TYPE_FILTER; }

const void *H5PLget_plugin_info(void) { return &kcap_h5zstd_plugin_class; }
