/*
 * kcap_h5plugindir.c — prints the plugin directory the linked libhdf5 searches by default
 * (H5PLget with HDF5_PLUGIN_PATH unset), for `make install`.
 *
 * Why: the filter plugin must land where stock HDF5 tools (h5dump, h5py) look without any
 * environment variable, and that place is compiled into libhdf5: /usr/local/hdf5/lib/plugin
 * upstream, /usr/lib/<triplet>/hdf5/serial/plugins on Debian. Asking the library is the
 * only answer that is right on both. Build-time helper only; not installed.
 */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>

int main(void)
{
    unsetenv("HDF5_PLUGIN_PATH"); /* read before libhdf5 initialises its search path */
    unsigned n = 0;
    char dir[4096];
    if (H5PLsize(&n) < 0 || n == 0 || H5PLget(0, dir, sizeof dir) <= 0) {
        fprintf(stderr, "kcap_h5plugindir: libhdf5 reports no plugin directory\n");
        return 1;
    }
    printf("%s\n", dir);
    return 0;
}
