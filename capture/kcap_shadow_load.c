/*
 * kcap_shadow_load.c — a shadow-mode candidate loaded from a private copy (kcap_shadow_load.h).
 *
 * Why a copy: the dynamic loader caches a library by path and inode, and a rebuilt library
 * at the same path must come back as the new code; the copy goes under TMPDIR because a /tmp
 * mounted noexec (common in hardened containers) refuses to map it. The copied bytes are
 * checked to be a whole library first (kcap_elf_problem): a half-written build dlopen()ed in
 * the host process would kill it with SIGBUS. The copy's directory is named by this process's
 * pid (common/kcap_privcopy.c): a candidate whose constructor kills the host inside dlopen
 * leaves it behind, and the next load sweeps what dead processes left. Why libc's dlsym:
 * libkcap's own dlsym hands back capture wrappers, which would take one of the interposer's
 * few wrapper slots per swap.
 */
#include "kcap_shadow_load.h"
#include "kcap_elf.h"      /* common/: a whole library before dlopen */
#include "kcap_privcopy.h" /* common/: the private directory, and dead processes' swept */
#include "kcap_snapshot.h" /* formats/: kcap_xxh64 */

#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* libc's dlsym, not libkcap's own (which would hand back a capture wrapper of the
 * candidate's entry point and take one of the interposer's few wrapper slots per swap). */
static void *(*libc_dlsym(void))(void *, const char *)
{
    void *f = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (!f)
        f = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    return f ? (void *(*)(void *, const char *))f : dlsym;
}

/* Copy `src` to a private 0700 directory and dlopen the copy (the loader caches by path
 * and inode: a library rebuilt in place must not come back as the old code). 0, or -1 and
 * the reason in why. */
int kcap_candidate_load(const char *cand, const char *want_hash, kcap_candidate *c, char *why, size_t n)
{
    /* the private copy goes under TMPDIR (else /tmp): a /tmp mounted noexec, common in
       hardened containers, would refuse to map it */
    const char *tmp = getenv("TMPDIR");
    char dir[PATH_MAX], copy[PATH_MAX + 16];
    if (!tmp || tmp[0] != '/' || strlen(tmp) > sizeof dir - 64)
        tmp = "/tmp";
    int lock = -1; /* held while the directory exists: tells sweepers it is live */
    int in = open(cand, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO must not block the host */
    struct stat st;
    void *m = MAP_FAILED;
    memset(c, 0, sizeof *c);
    if (in < 0 || fstat(in, &st) || !S_ISREG(st.st_mode) || st.st_size <= 0) {
        snprintf(why, n, "%s %s", cand, in < 0 ? "cannot be read" : !S_ISREG(st.st_mode) ?
                 "is not a regular file" : "is empty");
        if (in >= 0)
            close(in);
        return -1;
    }
    if ((m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, in, 0)) == MAP_FAILED ||
        kcap_privcopy_mkdir(tmp, "kcap-shadow.", dir, sizeof dir, &lock)) {
        snprintf(why, n, m == MAP_FAILED ? "%s cannot be read" : "%s: no private copy can be made "
                 "under %s (set TMPDIR to a writable directory)", cand, tmp);
        if (m != MAP_FAILED)
            munmap(m, (size_t)st.st_size);
        close(in);
        return -1;
    }
    const char *bad = kcap_elf_problem(m, (size_t)st.st_size);
    if (bad) { /* never dlopen()ed: a truncated build would fault the host process */
        snprintf(why, n, "%s cannot be loaded (a half-written or broken build?): %s (%lld bytes)", cand, bad,
                 (long long)st.st_size);
        munmap(m, (size_t)st.st_size);
        close(in);
        rmdir(dir);
        kcap_privcopy_unlock(&lock);
        return -1;
    }
    snprintf(c->hash, sizeof c->hash, "xxh64:%016llx",
             (unsigned long long)kcap_xxh64(m, (size_t)st.st_size, 0));
    if (want_hash && strcmp(want_hash, c->hash)) { /* not what kcap shadow checked */
        snprintf(why, n, "%s changed since kcap shadow checked it (%s then, %s now): not loaded", cand,
                 want_hash, c->hash);
        munmap(m, (size_t)st.st_size);
        close(in);
        rmdir(dir);
        kcap_privcopy_unlock(&lock);
        return -1;
    }
    snprintf(copy, sizeof copy, "%s/candidate.so", dir);
    int out = open(copy, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0700);
    int ok = out >= 0 && write(out, m, (size_t)st.st_size) == (ssize_t)st.st_size;
    munmap(m, (size_t)st.st_size);
    close(in);
    if (out >= 0)
        close(out);
    c->handle = ok ? dlopen(copy, RTLD_NOW | RTLD_LOCAL) : NULL;
    const char *e = ok ? dlerror() : "copying it failed";
    unlink(copy);
    rmdir(dir);
    kcap_privcopy_unlock(&lock);
    if (!c->handle) {
        snprintf(why, n, "%s cannot be loaded from its private copy under %s (%s; a directory "
                 "mounted noexec? set TMPDIR)", cand, tmp, e ? e : "?");
        return -1;
    }
    int any = 0;
    void *(*sym)(void *, const char *) = libc_dlsym();
    for (int k = 0; k < KCAP_NCALLS; k++) {
        c->fn[k] = (kcap_call_fn)sym(c->handle, kcap_builtin_calls[k].name);
        const char *w = kcap_builtin_calls[k].workspace_fn;
        c->ws_fn[k] = w ? (size_t(*)(const void *))sym(c->handle, w) : NULL;
        any |= c->fn[k] != NULL;
    }
    if (!any) {
        snprintf(why, n, "%s exports none of the hooked calls", cand);
        return -1; /* kept loaded: harmless, and dlclose of a library is never safe here */
    }
    return 0;
}

