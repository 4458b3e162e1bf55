/*
 * kcap_privcopy.c — private directories for library copies, and the sweep of dead processes'
 * (kcap_privcopy.h). The sweep runs inside the live service (the shadow-mode loader), so it
 * is built to never hurt it: it reads TMP once, touches only names that parse exactly as ours,
 * works relative to directory descriptors opened with O_NOFOLLOW (a symlink planted under our
 * name is never followed, and a name swapped mid-sweep cannot redirect an unlink), removes
 * only non-directories one level down, and treats every error as "leave it".
 *
 * Liveness is asked twice. kill(pid, 0) failing with ESRCH says the creator is gone in our
 * pid namespace (a reused pid only makes us skip: harmless). But a TMPDIR shared between
 * containers holds directories of pids from other namespaces that are "dead" to us and alive
 * there; their creator holds a shared flock on the directory while it exists, released by the
 * kernel when that process dies however it dies, so the sweep skips a directory it cannot
 * lock exclusively. The same exclusive lock makes two sweepers of one directory take turns:
 * the second finds it locked or already gone (ENOENT), both fine.
 */
#include "kcap_privcopy.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The pid in NAME when it is exactly PREFIX<pid>.XXXXXX (mkdtemp's six letters and digits), a
 * pid with no sign or leading zero; else 0. Strict, so nothing merely similar is touched. */
static pid_t name_pid(const char *name, const char *prefix, size_t pl)
{
    if (strncmp(name, prefix, pl))
        return 0;
    const char *p = name + pl;
    if (*p < '1' || *p > '9')
        return 0;
    long pid = 0;
    for (; *p >= '0' && *p <= '9'; p++)
        if ((pid = pid * 10 + (*p - '0')) > INT_MAX)
            return 0;
    if (*p++ != '.' || strlen(p) != 6)
        return 0;
    for (; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')))
            return 0;
    return (pid_t)pid;
}

/* A directory this young is never swept, whatever its pid says: a TMPDIR shared by several
 * machines (NFS; flock there is local) holds other hosts' live loads under pids that mean
 * nothing here, and a creator in another pid namespace has not taken its lock yet in the
 * instant after mkdtemp. A load takes seconds; a leftover waits this long for the next. */
#define KCAP_PRIVCOPY_MIN_AGE_S 600

/* NAME is a directory named by a loader (KCAP_PRIVCOPY_LOADERS) whose process is gone. */
static int dead_loader_dir(const char *name)
{
    static const char *const loaders[] = KCAP_PRIVCOPY_LOADERS;
    for (size_t k = 0; k < sizeof loaders / sizeof loaders[0]; k++) {
        pid_t pid = name_pid(name, loaders[k], strlen(loaders[k]));
        if (pid > 0)
            return kill(pid, 0) != 0 && errno == ESRCH;
    }
    return 0;
}

/* Empty and remove TMP's entry NAME (tfd: TMP) when it is our directory, old enough and
 * nobody holds it; in a check directory (nested = 1) first the dead loaders' directories in
 * it, the same way (one level: they are swept with nested = 0). */
static void sweep_one(int tfd, const char *name, uid_t me, int nested)
{
    /* O_NOFOLLOW: a symlink under our name fails here (ELOOP), a file fails O_DIRECTORY */
    int fd = openat(tfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return;
    struct stat st;
    /* held by a live creator (another pid namespace) or by another sweeper: theirs. Any
       other flock error (no locks on this filesystem) leaves the pid's word alone. */
    if (fstat(fd, &st) || st.st_uid != me || st.st_mtime > time(NULL) - KCAP_PRIVCOPY_MIN_AGE_S ||
        (flock(fd, LOCK_EX | LOCK_NB) && errno == EWOULDBLOCK)) {
        close(fd);
        return;
    }
    DIR *d = fdopendir(fd); /* owns fd from here: closedir releases the lock, after the rmdir */
    if (!d) {
        close(fd);
        return;
    }
    for (struct dirent *e; (e = readdir(d));) {
        struct stat fs;
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        /* a subdirectory (no loader makes one) is left, and so then is the directory: one
           level only, never a recursive removal in a shared TMPDIR — except a dead loader's
           directory in a check directory, itself swept one level */
        if (fstatat(fd, e->d_name, &fs, AT_SYMLINK_NOFOLLOW) || fs.st_uid != me)
            continue;
        if (S_ISREG(fs.st_mode) || S_ISLNK(fs.st_mode))
            unlinkat(fd, e->d_name, 0); /* a symlink itself, never its target */
        else if (nested && S_ISDIR(fs.st_mode) && dead_loader_dir(e->d_name))
            sweep_one(fd, e->d_name, me, 0);
    }
    /* the name must still be the directory we emptied (not one made since under it) */
    struct stat now;
    if (fstatat(tfd, name, &now, AT_SYMLINK_NOFOLLOW) == 0 && now.st_dev == st.st_dev &&
        now.st_ino == st.st_ino)
        unlinkat(tfd, name, AT_REMOVEDIR); /* ENOTEMPTY (a subdirectory) or ENOENT: left */
    closedir(d);
}

static void sweep(const char *tmp, const char *prefix)
{
    int saved = errno;
    DIR *t = opendir(tmp);
    if (!t) {
        errno = saved;
        return;
    }
    size_t pl = strlen(prefix);
    uid_t me = geteuid();
    const int nested = !strcmp(prefix, KCAP_PRIVCOPY_CHECK_PREFIX);
    for (struct dirent *e; (e = readdir(t));) {
        if (e->d_type != DT_DIR && e->d_type != DT_UNKNOWN) /* a symlink or file named like ours */
            continue;
        pid_t pid = name_pid(e->d_name, prefix, pl);
        /* live, or not ours to ask about (EPERM: another user's process): skipped */
        if (pid > 0 && kill(pid, 0) != 0 && errno == ESRCH)
            sweep_one(dirfd(t), e->d_name, me, nested);
    }
    closedir(t);
    errno = saved;
}

int kcap_privcopy_mkdir(const char *tmp, const char *prefix, char *dir, size_t n, int *lock)
{
    *lock = -1;
    sweep(tmp, prefix); /* what loaders killed inside dlopen left (never fails the load) */
    int w = snprintf(dir, n, "%s/%s%ld.XXXXXX", tmp, prefix, (long)getpid());
    if (w < 0 || (size_t)w >= n) { /* a truncated template would be some other name */
        if (n)
            dir[0] = '\0';
        errno = ENAMETOOLONG;
        return -1;
    }
    if (!mkdtemp(dir))
        return -1;
    /* the lock is a hint for sweepers in other pid namespaces: without it (a filesystem with
       no flock) the pid still protects the directory in ours, so a failure is not an error.
       Non-blocking: the host never waits here. */
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0 && flock(fd, LOCK_SH | LOCK_NB) != 0) {
        close(fd);
        fd = -1;
    }
    *lock = fd;
    return 0;
}

void kcap_privcopy_unlock(int *lock)
{
    if (*lock >= 0)
        close(*lock);
    *lock = -1;
}
