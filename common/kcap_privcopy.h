/*
 * kcap_privcopy.h — kcap_privcopy.c: the private directories a kernel library is copied into
 * before dlopen (the loader caches by path and inode, so a library rebuilt in place must be
 * loaded from a fresh copy), and the sweep of those a dead process left. A loader removes its
 * directory as soon as dlopen returns; a process that dies inside dlopen (a constructor that
 * aborts) cannot, and each leftover is a whole kernel library. So the directory is named by
 * the creating process's pid and held under a shared flock while it exists, and the next
 * loader of the same kind removes those whose process is gone. Used by the shadow-mode loader
 * inside the service (capture/kcap_shadow_load.c), by replay's (replay/kcap_kernlib.c) and for
 * the directory `kcap shadow` checks a candidate in (capture/kcap_shadow_loadcheck.c).
 */
#ifndef KCAP_PRIVCOPY_H
#define KCAP_PRIVCOPY_H

#include <stddef.h>

/* Make TMP/PREFIX<pid>.XXXXXX (mkdtemp: mode 0700) into dir[0..n), after sweeping what dead
 * loaders of the same PREFIX left under TMP. PREFIX carries its own separator ("kcap-shadow."
 * gives kcap-shadow.1234.Ab3dEf). *lock is a descriptor holding a shared flock on the
 * directory (-1 where the filesystem has no locks: the pid alone then tells sweepers it is
 * live); close it with kcap_privcopy_unlock once the directory is removed. 0, or -1 with
 * errno set (mkdtemp's, or ENAMETOOLONG) and nothing made.
 *
 * The sweep removes the directories named PREFIX<pid>.XXXXXX that this user owns, whose pid
 * is no live process (kill(pid, 0): ESRCH), that are at least 10 minutes old (another
 * machine's live load in a shared TMPDIR has a pid that means nothing here) and whose lock no
 * live process holds: the regular files and symlinks in them (never followed), then the
 * directory. Symlinks and files named like one, other users' directories and subdirectories
 * are left alone (but see KCAP_PRIVCOPY_CHECK_PREFIX). One readdir of TMP; it never fails
 * the call (every error means "leave it"). */
int kcap_privcopy_mkdir(const char *tmp, const char *prefix, char *dir, size_t n, int *lock);

/* The directory `kcap shadow` checks a candidate in (capture/kcap_shadow_loadcheck.c): its
 * checks run with it as TMPDIR, so a check killed inside dlopen leaves its loader's own
 * directory (KCAP_PRIVCOPY_LOADERS) one level down. Its sweep (this PREFIX given to
 * kcap_privcopy_mkdir) also sweeps those, by the same rules, before the directory itself;
 * nothing deeper, and no other subdirectory. */
#define KCAP_PRIVCOPY_CHECK_PREFIX "kcap-shadow-check."
#define KCAP_PRIVCOPY_LOADERS {"kcap-replay-", "kcap-shadow."}

/* Close *lock (when >= 0) and set it to -1. */
void kcap_privcopy_unlock(int *lock);

#endif
