/*
 * kcap_kernlib.h — a kernel library loaded fresh for one replay run.
 *
 * The dynamic loader caches libraries by path and inode: dlopen() of a .so that was rebuilt
 * in place can hand back the old code. So the library is first copied to a private file
 * (mkstemps in a 0700 temporary directory) and that copy is dlopen'ed RTLD_NOW|RTLD_LOCAL:
 * a new inode every run, symbols resolved up front (a half-written .so fails here, not in
 * the middle of a case), nothing leaked into the global namespace. The copy and its
 * directory are removed as soon as the copy is loaded (a replay killed or crashed by its
 * candidate leaves nothing); kcap_kernlib_free() dlcloses it.
 */
#ifndef KCAP_KERNLIB_H
#define KCAP_KERNLIB_H

#include <stddef.h>

#include "kcap_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The calling convention of every hooked entry point (kernels/vattn_hooks.def): args
 * struct, workspace, workspace bytes, stream. */
typedef int (*kcap_kern_fn)(const void *args, void *workspace, size_t workspace_bytes,
                            void *stream);

typedef struct kcap_kernlib kcap_kernlib; /* opaque */

/* Copy `path` into a private temporary file and dlopen it. Resolves the ABI helpers
 * (vattn_abi_version, vattn_backend, vattn_workspace_size, vattn_status_string); a library
 * without them is refused with KCAP_ERR_LIBRARY naming the file and the missing symbol. */
int kcap_kernlib_open(const char *path, kcap_kernlib **out, kcap_error *err);
void kcap_kernlib_free(kcap_kernlib *k); /* dlclose + unlink the copy; accepts NULL */

const char *kcap_kernlib_path(const kcap_kernlib *k);    /* the path given to open */
const char *kcap_kernlib_backend(const kcap_kernlib *k); /* "cpu" or "cuda" */
int kcap_kernlib_is_cuda(const kcap_kernlib *k);
int kcap_kernlib_abi(const kcap_kernlib *k);             /* vattn_abi_version() */
const char *kcap_kernlib_hash(const kcap_kernlib *k);    /* "xxh64:<16 hex>" of the file */

/* A kernel entry point by name; KCAP_ERR_LIBRARY naming the library when absent. */
int kcap_kernlib_sym(const kcap_kernlib *k, const char *name, kcap_kern_fn *fn,
                     kcap_error *err);

/* The workspace a call needs: the library's function `sym` (the call description's
 * workspace_fn; NULL = none, 0 bytes) on the args struct. KCAP_ERR_LIBRARY naming the
 * library when it lacks the function, KCAP_ERR_SHAPE when it rejects the sizes. */
int kcap_kernlib_workspace(const kcap_kernlib *k, const char *sym, const void *args,
                           size_t *bytes, kcap_error *err);

/* vattn_status_string(status), plus vattn_last_cuda_error() when there is one. */
void kcap_kernlib_status_text(const kcap_kernlib *k, int status, char *buf, size_t n);

#ifdef __cplusplus
}
#endif

#endif
