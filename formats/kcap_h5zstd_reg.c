/*
 * kcap_h5zstd_reg.c — registers the zstd filter (id 32015) with the in-process libhdf5, so
 * the writer can declare it in a dataset's pipeline and the fallback read path (H5Dread)
 * can decode it without any plugin path set.
 */
#include "kcap_fmt_internal.h"

#include <hdf5.h>

static const H5Z_class2_t kcap_h5zstd_class = {
    H5Z_CLASS_T_VERS,
    (H5Z_filter_t)KCAP_H5Z_ZSTD,
    1,
    1,
    "zstd (kcap)",
    NULL,
    NULL,
    (H5Z_func_t)kcap_h5zstd_filter,
};

int kcap_h5zstd_register(void)
{
    kcap_h5_lock();
    int rc = KCAP_OK;
    static int done;
    /* Registering replaces any plugin loaded for the same id: the in-process copy wins. */
    if (!done) {
        if (H5Zregister(&kcap_h5zstd_class) < 0)
            rc = KCAP_ERR_HDF5;
        else
            done = 1;
    }
    H5Eclear2(H5E_DEFAULT);
    kcap_h5_unlock();
    return rc;
}
