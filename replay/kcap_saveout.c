/*
 * kcap_saveout.c — write a replayed snapshot with the kernel-under-test's outputs
 * (see kcap_saveout.h). Reuses the capture writer, so saved files are ordinary snapshots:
 * atomic, checksummed, compressed, readable by kcap check / info / diff / kcap.load.
 */
#include "kcap_saveout.h"

#include <stdio.h>
#include <string.h>

/* Exchange the snapshot's output buffers with outs[] (twice restores them). */
static void swap_outputs(kcap_snapshot *snap, void **outs)
{
    for (int i = 0; i < snap->ntensors; i++) {
        if (snap->tensors[i].dir != KCAP_DIR_OUT || !outs[i])
            continue;
        void *t = snap->tensors[i].data;
        snap->tensors[i].data = outs[i];
        outs[i] = t;
    }
}

int kcap_save_outputs(kcap_writer **w, const char *dir, const char *name, kcap_snapshot *snap,
                      void **outs, const char *lib_path, const char *lib_hash, char *saved,
                      size_t n, kcap_error *err)
{
    int rc = kcap_mkdir_private(dir, err);
    if (rc) {
        kcap_error_prefix(err, "--save-outputs %s", dir);
        return rc;
    }
    if (!*w && !(*w = kcap_writer_create(NULL, err)))
        return err && err->code ? err->code : KCAP_ERR_NOMEM;
    snprintf(saved, n, "%s/%s", dir, name);

    kcap_meta keep = snap->meta;
    snprintf(snap->meta.lib_path, sizeof snap->meta.lib_path, "%s", lib_path);
    snprintf(snap->meta.lib_hash, sizeof snap->meta.lib_hash, "%s", lib_hash);
    swap_outputs(snap, outs);
    rc = kcap_snapshot_write(*w, snap, saved, err);
    swap_outputs(snap, outs);
    snap->meta = keep;
    if (rc && err && !strstr(err->msg, saved))
        kcap_error_prefix(err, "--save-outputs %s", saved);
    return rc;
}
