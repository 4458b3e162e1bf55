/*
 * kcap_fsutil.c — the filesystem side of atomic, private snapshot files: mkdir -p with
 * 0700 components (snapshots hold KV derived from user prompts), and the temp-file /
 * rename / fsync protocol used by kcap_snapshot_write. The final rename never replaces
 * an existing file (renameat2 RENAME_NOREPLACE, or link + unlink where the file system
 * refuses that flag): two writers that pick the same name, or a name reused after a pid
 * wrapped, must not silently destroy a snapshot; the caller gets KCAP_ERR_EXISTS and picks
 * another name. Temp names keep the writer's pid as their first field
 * (.kcap-tmp.<pid>.<counter>.<rand>): kcap_dirwalk.c parses it to tell stale ones apart.
 */
#include "kcap_fsutil.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "kcap_snapshot.h" /* KCAP_ERR_EXISTS */

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

int kcap_mkdir_private(const char *dir, kcap_error *err)
{
    if (!dir || !dir[0])
        return kcap_error_set(err, KCAP_ERR_ARG, "kcap_mkdir_private: empty directory name");
    size_t n = strlen(dir);
    if (n >= PATH_MAX)
        return kcap_error_set(err, KCAP_ERR_ARG, "%.64s...: path too long", dir);
    char p[PATH_MAX];
    memcpy(p, dir, n + 1);
    while (n > 1 && p[n - 1] == '/')
        p[--n] = '\0';
    /* Intermediate components: create missing ones 0700; existing ones may be links
     * (e.g. /var/run -> /run). The final component must be a real directory. */
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        if (mkdir(p, 0700) && errno != EEXIST) {
            int e = errno;
            *s = '/';
            return kcap_error_set(err, KCAP_ERR_IO, "%s: cannot create directory: %s", dir,
                                  strerror(e));
        }
        *s = '/';
    }
    if (mkdir(p, 0700) && errno != EEXIST)
        return kcap_error_set(err, KCAP_ERR_IO, "%s: cannot create directory: %s", dir,
                              strerror(errno));
    struct stat st;
    if (lstat(p, &st))
        return kcap_error_set(err, KCAP_ERR_IO, "%s: %s", dir, strerror(errno));
    if (S_ISLNK(st.st_mode))
        return kcap_error_set(err, KCAP_ERR_IO, "%s: is a symbolic link; refusing to use it",
                              dir);
    if (!S_ISDIR(st.st_mode))
        return kcap_error_set(err, KCAP_ERR_IO, "%s: exists and is not a directory", dir);
    return KCAP_OK;
}

int kcap_atomic_open(kcap_atomic *a, const char *path, kcap_error *err)
{
    memset(a, 0, sizeof *a);
    a->fd = a->dirfd = -1;
    size_t n = path ? strlen(path) : 0;
    if (!n || n >= PATH_MAX || path[n - 1] == '/')
        return kcap_error_set(err, KCAP_ERR_ARG, "%s: not a file path", path ? path : "(null)");
    snprintf(a->path, sizeof a->path, "%s", path);
    const char *slash = strrchr(path, '/');
    if (strlen(slash ? slash + 1 : path) >= sizeof a->base)
        return kcap_error_set(err, KCAP_ERR_ARG, "%s: file name too long", path);
    if (slash) {
        size_t dl = (size_t)(slash - path);
        snprintf(a->dir, sizeof a->dir, "%.*s", (int)(dl ? dl : 1), path);
        snprintf(a->base, sizeof a->base, "%s", slash + 1);
    } else {
        snprintf(a->dir, sizeof a->dir, ".");
        snprintf(a->base, sizeof a->base, "%s", path);
    }
    if (!strcmp(a->base, ".") || !strcmp(a->base, ".."))
        return kcap_error_set(err, KCAP_ERR_ARG, "%s: not a file path", path);
    a->dirfd = open(a->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (a->dirfd < 0)
        return kcap_error_set(err, KCAP_ERR_IO, "%s: cannot open directory %s: %s", path,
                              a->dir, strerror(errno));
    struct stat st;
    if (!fstatat(a->dirfd, a->base, &st, AT_SYMLINK_NOFOLLOW)) {
        int bad = S_ISLNK(st.st_mode) ? 1 : !S_ISREG(st.st_mode) ? 2 : 0;
        kcap_atomic_abort(a);
        if (bad)
            return kcap_error_set(err, KCAP_ERR_IO, "%s: %s; refusing to replace it", path,
                                  bad == 1 ? "is a symbolic link" : "exists and is not a regular file");
        return kcap_error_set(err, KCAP_ERR_EXISTS, "%s: already exists; never replaced (pick "
                              "another name)", path);
    }
    static unsigned counter;
    for (int tries = 0; tries < 100; tries++) {
        unsigned c = __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED);
        snprintf(a->tmp, sizeof a->tmp, ".kcap-tmp.%ld.%u.%d", (long)getpid(), c, rand() & 0xffff);
        a->fd = openat(a->dirfd, a->tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (a->fd >= 0 || errno != EEXIST)
            break;
    }
    if (a->fd < 0) {
        int e = errno;
        kcap_atomic_abort(a);
        return kcap_error_set(err, KCAP_ERR_IO, "%s: cannot create a file in %s: %s", path,
                              a->dir, strerror(e));
    }
    fchmod(a->fd, 0600); /* umask cannot widen it, but be explicit */
    a->created = 1;
    /* libhdf5 opens by name: the /proc link reaches exactly the inode created above even if
     * someone swaps the directory entry. */
    snprintf(a->h5name, sizeof a->h5name, "/proc/self/fd/%d", a->fd);
    if (access(a->h5name, F_OK))
        snprintf(a->h5name, sizeof a->h5name, "%s/%s", a->dir, a->tmp);
    return KCAP_OK;
}

int kcap_link_noreplace(int dirfd, const char *from, const char *to)
{
    /* link() fails with EEXIST when `to` exists: no window in which it is replaced */
    if (linkat(dirfd, from, dirfd, to, 0))
        return -1;
    unlinkat(dirfd, from, 0);
    return 0;
}

int kcap_rename_noreplace(int dirfd, const char *from, const char *to)
{
#ifdef SYS_renameat2 /* glibc < 2.28 has no renameat2() wrapper */
    if (!syscall(SYS_renameat2, dirfd, from, dirfd, to, RENAME_NOREPLACE))
        return 0;
    if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP)
        return -1; /* EEXIST among them */
#endif
    return kcap_link_noreplace(dirfd, from, to);
}

int kcap_atomic_commit(kcap_atomic *a, kcap_error *err)
{
    if (fsync(a->fd)) {
        int e = errno;
        kcap_atomic_abort(a);
        return kcap_error_set(err, KCAP_ERR_IO, "%s: fsync: %s", a->path, strerror(e));
    }
    if (close(a->fd)) {
        a->fd = -1;
        int e = errno;
        kcap_atomic_abort(a);
        return kcap_error_set(err, KCAP_ERR_IO, "%s: close: %s", a->path, strerror(e));
    }
    a->fd = -1;
    if (kcap_rename_noreplace(a->dirfd, a->tmp, a->base)) {
        int e = errno;
        kcap_atomic_abort(a);
        if (e == EEXIST)
            return kcap_error_set(err, KCAP_ERR_EXISTS, "%s: appeared while it was being "
                                  "written; never replaced (pick another name)", a->path);
        return kcap_error_set(err, KCAP_ERR_IO, "%s: rename: %s", a->path, strerror(e));
    }
    a->created = 0;
    int rc = KCAP_OK;
    if (fsync(a->dirfd))
        rc = kcap_error_set(err, KCAP_ERR_IO, "%s: fsync of directory %s: %s", a->path, a->dir,
                            strerror(errno));
    close(a->dirfd);
    a->dirfd = -1;
    return rc;
}

void kcap_atomic_abort(kcap_atomic *a)
{
    if (a->fd >= 0)
        close(a->fd);
    if (a->created && a->dirfd >= 0)
        unlinkat(a->dirfd, a->tmp, 0);
    if (a->dirfd >= 0)
        close(a->dirfd);
    a->fd = a->dirfd = -1;
    a->created = 0;
}
