/*
 * kcap_saveout.h — `kcap replay --save-outputs DIR`: keep what the kernel under test wrote.
 *
 * A saved file is the replayed snapshot itself (same metadata, scalars and inputs) with
 * every output tensor replaced by the kernel-under-test's output and lib_path / lib_hash
 * naming the library that produced it, so `kcap diff SAVED ORIGINAL` (or two --save-outputs
 * folders of two builds) compares them with the ordinary tools.
 */
#ifndef KCAP_SAVEOUT_H
#define KCAP_SAVEOUT_H

#include <stddef.h>

#include "kcap_snapshot.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Write `snap` with outs[i] in place of each output tensor i into dir/<name> (dir created
 * 0700 if needed). *w is created on first use (free with kcap_writer_free). The outputs of
 * snap are swapped in and back, so snap is unchanged on return. The written path goes to
 * saved[n]. Errors name the file.
 */
int kcap_save_outputs(kcap_writer **w, const char *dir, const char *name, kcap_snapshot *snap,
                      void **outs, const char *lib_path, const char *lib_hash, char *saved,
                      size_t n, kcap_error *err);

#ifdef __cplusplus
}
#endif

#endif
