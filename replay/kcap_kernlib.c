/*
 * kcap_kernlib.c — private-copy loading of a kernel library (see kcap_kernlib.h for why).
 *
 * The copy is read from the path in one pass and hashed on the way, so the hash reported
 * in the output is the hash of the exact bytes that ran, even if the build rewrites the
 * file a moment later. The temporary directory is per library instance: concurrent replays
 * (or a watch loop) never share or race on names; it and the copy are removed as soon as the
 * copy is loaded. A replay that dies inside dlopen (a library whose constructor aborts: replay
 * loads in its own process) cannot remove them, so the directory is named by replay's pid
 * (common/kcap_privcopy.c) and each open first sweeps what dead replays left.
 */
#include "kcap_kernlib.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kcap_elf.h"      /* common/: a whole library before dlopen */
#include "kcap_privcopy.h" /* common/: the private directory, and dead replays' swept */
#include "kcap_snapshot.h" /* kcap_xxh64 */

struct kcap_kernlib {
    char path[4096];
    char tmpdir[4096];
    char copy[4400]; /* tmpdir + "/" + up to 200 bytes of name + suffix */
    int tmplock;     /* held while tmpdir exists: tells sweepers it is live (-1: none) */
    void *handle;
    int abi;
    const char *backend;
    char hash[40];
    const char *(*status_string)(int);
    const char *(*last_cuda_error)(void);
};

/* Copy src to the already-open fd, hashing the bytes. */
static int copy_file(const char *src, int fd, char *hash, size_t hn, kcap_error *err)
{
    /* O_NONBLOCK: a FIFO named as the library must be refused below, not wait for a writer
     * (it hung replay); on a regular file the flag changes nothing */
    int in = open(src, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (in < 0)
        return kcap_error_set(err, errno == ENOENT ? KCAP_ERR_IO : KCAP_ERR_LIBRARY,
                              "kernel library %s: cannot open: %s", src, strerror(errno));
    struct stat st;
    if (fstat(in, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(in);
        return kcap_error_set(err, KCAP_ERR_LIBRARY, "kernel library %s: not a regular file",
                              src);
    }
    size_t cap = (size_t)st.st_size, len = 0;
    char *buf = malloc(cap ? cap : 1);
    if (!buf) {
        close(in);
        return kcap_error_set(err, KCAP_ERR_NOMEM, "kernel library %s: out of memory", src);
    }
    for (;;) {
        if (len == cap) { /* the file grew while we read it (a build in progress) */
            char *nb = realloc(buf, cap * 2 + 4096);
            if (!nb) {
                free(buf);
                close(in);
                return kcap_error_set(err, KCAP_ERR_NOMEM, "kernel library %s: out of memory",
                                      src);
            }
            buf = nb;
            cap = cap * 2 + 4096;
        }
        ssize_t r = read(in, buf + len, cap - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            free(buf);
            close(in);
            return kcap_error_set(err, KCAP_ERR_IO, "kernel library %s: read: %s", src,
                                  strerror(e));
        }
        if (r == 0)
            break;
        len += (size_t)r;
    }
    close(in);
    const char *bad = kcap_elf_problem((const unsigned char *)buf, len);
    if (bad) {
        free(buf);
        return kcap_error_set(err, KCAP_ERR_LIBRARY,
                              "kernel library %s cannot be loaded (a half-written or broken "
                              "build?): %s (%zu bytes)",
                              src, bad, len);
    }
    snprintf(hash, hn, "xxh64:%016llx", (unsigned long long)kcap_xxh64(buf, len, 0));
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(fd, buf + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int e = errno;
            free(buf);
            return kcap_error_set(err, KCAP_ERR_IO, "private copy of %s: write: %s", src,
                                  strerror(e));
        }
        off += (size_t)w;
    }
    free(buf);
    return KCAP_OK;
}

static void *need_sym(kcap_kernlib *k, const char *name, kcap_error *err)
{
    dlerror();
    void *p = dlsym(k->handle, name);
    if (!p)
        kcap_error_set(err, KCAP_ERR_LIBRARY,
                       "kernel library %s does not export %s (not a verify-attention library "
                       "built against verify_attn.h?)",
                       k->path, name);
    return p;
}

int kcap_kernlib_open(const char *path, kcap_kernlib **out, kcap_error *err)
{
    *out = NULL;
    if (!path || !*path)
        return kcap_error_set(err, KCAP_ERR_ARG, "no kernel library given (--kernel LIB.so)");
    kcap_kernlib *k = calloc(1, sizeof *k);
    if (!k)
        return kcap_error_set(err, KCAP_ERR_NOMEM, "out of memory");
    k->tmplock = -1;
    snprintf(k->path, sizeof k->path, "%s", path);
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp)
        tmp = "/tmp";
    /* TMPDIR/kcap-replay-PID.XXXXXX, made 0700 by mkdtemp */
    if (kcap_privcopy_mkdir(tmp, "kcap-replay-", k->tmpdir, sizeof k->tmpdir, &k->tmplock)) {
        int e = errno;
        k->tmpdir[0] = '\0';
        kcap_kernlib_free(k);
        return kcap_error_set(err, KCAP_ERR_IO, "cannot create a temporary directory in %s: %s",
                              tmp, strerror(e));
    }
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    snprintf(k->copy, sizeof k->copy, "%s/%.200s.XXXXXX.so", k->tmpdir, base);
    int fd = mkstemps(k->copy, 3);
    if (fd < 0) {
        int e = errno;
        k->copy[0] = '\0';
        kcap_kernlib_free(k);
        return kcap_error_set(err, KCAP_ERR_IO, "cannot create a private copy of %s: %s", path,
                              strerror(e));
    }
    int rc = copy_file(path, fd, k->hash, sizeof k->hash, err);
    if (rc == KCAP_OK && fchmod(fd, 0700) != 0)
        rc = kcap_error_set(err, KCAP_ERR_IO, "private copy of %s: chmod: %s", path,
                            strerror(errno));
    close(fd);
    if (rc != KCAP_OK) {
        kcap_kernlib_free(k);
        return rc;
    }
    dlerror();
    k->handle = dlopen(k->copy, RTLD_NOW | RTLD_LOCAL);
    /* loaded (or not): the copy's name is no longer needed, the mapping stays; removed now,
       a replay that the candidate crashes or that is killed leaves nothing behind */
    unlink(k->copy);
    rmdir(k->tmpdir);
    kcap_privcopy_unlock(&k->tmplock);
    k->copy[0] = k->tmpdir[0] = '\0';
    if (!k->handle) {
        const char *why = dlerror();
        kcap_error_set(err, KCAP_ERR_LIBRARY,
                       "kernel library %s cannot be loaded (a half-written or broken build?): %s",
                       path, why ? why : "dlopen failed");
        kcap_kernlib_free(k);
        return KCAP_ERR_LIBRARY;
    }
    /* The first missing helper is the one reported: usually the file is simply not a
     * verify-attention library at all. */
    void *p_abi = need_sym(k, "vattn_abi_version", err);
    void *p_backend = p_abi ? need_sym(k, "vattn_backend", err) : NULL;
    void *p_ws = p_backend ? need_sym(k, "vattn_workspace_size", err) : NULL;
    void *p_str = p_ws ? need_sym(k, "vattn_status_string", err) : NULL;
    if (!p_str) {
        kcap_kernlib_free(k);
        return KCAP_ERR_LIBRARY;
    }
    int (*abi)(void) = (int (*)(void))p_abi;
    const char *(*backend)(void) = (const char *(*)(void))p_backend;
    k->status_string = (const char *(*)(int))p_str;
    k->last_cuda_error = (const char *(*)(void))dlsym(k->handle, "vattn_last_cuda_error");
    k->abi = abi();
    k->backend = backend();
    if (!k->backend || (strcmp(k->backend, "cpu") && strcmp(k->backend, "cuda"))) {
        kcap_error_set(err, KCAP_ERR_LIBRARY,
                       "kernel library %s: vattn_backend() returned \"%s\", expected \"cpu\" or "
                       "\"cuda\"",
                       path, k->backend ? k->backend : "(null)");
        kcap_kernlib_free(k);
        return KCAP_ERR_LIBRARY;
    }
    *out = k;
    return KCAP_OK;
}

void kcap_kernlib_free(kcap_kernlib *k)
{
    if (!k)
        return;
    if (k->handle)
        dlclose(k->handle);
    if (k->copy[0])
        unlink(k->copy);
    if (k->tmpdir[0])
        rmdir(k->tmpdir);
    kcap_privcopy_unlock(&k->tmplock);
    free(k);
}

const char *kcap_kernlib_path(const kcap_kernlib *k) { return k->path; }
const char *kcap_kernlib_backend(const kcap_kernlib *k) { return k->backend; }
int kcap_kernlib_is_cuda(const kcap_kernlib *k) { return !strcmp(k->backend, "cuda"); }
int kcap_kernlib_abi(const kcap_kernlib *k) { return k->abi; }
const char *kcap_kernlib_hash(const kcap_kernlib *k) { return k->hash; }

int kcap_kernlib_sym(const kcap_kernlib *k, const char *name, kcap_kern_fn *fn,
                     kcap_error *err)
{
    dlerror();
    void *p = dlsym(k->handle, name);
    if (!p)
        return kcap_error_set(err, KCAP_ERR_LIBRARY, "kernel library %s does not export %s",
                              k->path, name);
    *fn = (kcap_kern_fn)p;
    return KCAP_OK;
}

int kcap_kernlib_workspace(const kcap_kernlib *k, const char *sym, const void *args,
                           size_t *bytes, kcap_error *err)
{
    *bytes = 0;
    if (!sym)
        return KCAP_OK;
    size_t (*ws)(const void *) = (size_t(*)(const void *))dlsym(k->handle, sym);
    if (!ws)
        return kcap_error_set(err, KCAP_ERR_LIBRARY, "kernel library %s does not export %s",
                              k->path, sym);
    *bytes = ws(args);
    if (*bytes == (size_t)-1)
        return kcap_error_set(err, KCAP_ERR_SHAPE, "%s: %s() rejects the snapshot's sizes",
                              k->path, sym);
    return KCAP_OK;
}

void kcap_kernlib_status_text(const kcap_kernlib *k, int status, char *buf, size_t n)
{
    const char *s = k->status_string(status);
    const char *c = k->last_cuda_error ? k->last_cuda_error() : NULL;
    if (c && *c)
        snprintf(buf, n, "status %d (%s; %s)", status, s ? s : "?", c);
    else
        snprintf(buf, n, "status %d (%s)", status, s ? s : "?");
}
