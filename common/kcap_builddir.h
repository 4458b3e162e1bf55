/*
 * kcap_builddir.h — kcap_builddir.c: where the running program's build tree is, so tools run
 * from a checkout find build/lib/libkcap.so, build/plugins and python/ without installation.
 */
#ifndef KCAP_BUILDDIR_H
#define KCAP_BUILDDIR_H

/* The directory holding the executable's directory (…/build for …/build/bin/kcap), found
 * from /proc/self/exe; "." when that cannot be read. Static storage, computed once. */
const char *kcap_build_dir(void);

#endif
