/*
 * kcap_shadow_loadcheck.c — `kcap shadow`'s load check of a candidate with no snapshots to
 * replay it against (kcap_shadow_loadcheck.h). The child loads the library with replay's
 * loader and writes one line to a pipe ("ok BACKEND" or "error WHY"); the parent reads it
 * under the time limit, kills the child's process group past it, and tells a loader error
 * from a crash (a signal) and from a hang.
 */
#include "kcap_shadow_loadcheck.h"
#include "kcap_privcopy.h" /* common/: the check directory, and killed checks' swept */

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kcap_kernlib.h"     /* replay/: the private-copy loader */
#include "kcap_snapshot.h"    /* formats/: kcap_xxh64 */
#include "kcap_child.h"       /* kcap_child_spawn, kcap_child_collect */

/* The checking process, below the reaper (kcap_child_spawn): loads cand as replay does and
 * says how it went on the pipe. */
struct check_child {
    const char *cand, *tmpdir;
    int wr;
};
static void check_child_main(void *arg)
{
    const struct check_child *cc = arg;
    if (cc->tmpdir)
        setenv("TMPDIR", cc->tmpdir, 1); /* its private copy where the parent removes it */
    kcap_kernlib *k = NULL;
    kcap_error err = {0};
    char line[1100];
    int rc = kcap_kernlib_open(cc->cand, &k, &err);
    int n = rc ? snprintf(line, sizeof line, "error %s\n", err.msg)
               : snprintf(line, sizeof line, "ok %s\n", kcap_kernlib_backend(k));
    if (n > 0 && write(cc->wr, line, (size_t)n) < 0)
        _exit(3);
    _exit(rc ? 1 : 0);
}

int kcap_loadcheck_run(const char *cand, const char *tmpdir, int timeout_s, kcap_loadcheck *c)
{
    memset(c, 0, sizeof *c);
    int pfd[2];
    if (pipe(pfd)) {
        snprintf(c->error, sizeof c->error, "no pipe to a checking process: %s", strerror(errno));
        return 0;
    }
    struct check_child cc = {cand, tmpdir, pfd[1]};
    pid_t p = kcap_child_spawn(pfd[0], pfd[1], check_child_main, &cc);
    close(pfd[1]);
    if (p < 0) {
        close(pfd[0]);
        snprintf(c->error, sizeof c->error, "no checking process: %s", strerror(errno));
        return 0;
    }
    char *buf = NULL;
    int st = -1, late = 0;
    kcap_child_collect(p, pfd[0], timeout_s, 1200, &buf, &st, &late);
    if (late)
        c->timed_out = timeout_s;
    if (!buf) {
        snprintf(c->error, sizeof c->error, "out of memory reading the checking process");
        return 0;
    }
    char *nl = strchr(buf, '\n');
    if (nl)
        *nl = '\0';
    c->signal = !c->timed_out && st != -1 && WIFSIGNALED(st) ? WTERMSIG(st) : 0;
    if (!strncmp(buf, "ok ", 3)) {
        snprintf(c->backend, sizeof c->backend, "%.15s", buf + 3);
        c->ok = !c->timed_out && st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
    } else if (!strncmp(buf, "error ", 6)) {
        snprintf(c->error, sizeof c->error, "%.1023s", buf + 6);
    }
    free(buf);
    return c->ok;
}

void kcap_loadcheck_say(FILE *f, const char *cand, const kcap_loadcheck *c, const char *tail)
{
    if (c->timed_out)
        fprintf(f, "kcap shadow: loading %s in a process of its own had not ended after %d s (a constructor "
                   "that hangs?); it was killed (--gate-timeout SEC gives it longer)%s", cand, c->timed_out, tail);
    else if (c->signal)
        fprintf(f, "kcap shadow: loading %s in a process of its own killed that process (signal %d, %s): it "
                   "would kill the service the same way%s", cand, c->signal, strsignal(c->signal), tail);
    else if (c->error[0])
        fprintf(f, "kcap shadow: %s cannot be loaded as a kernel library: %s%s", cand, c->error, tail);
    else
        fprintf(f, "kcap shadow: loading %s in a process of its own gave no result%s", cand, tail);
}

int kcap_check_copy(const char *cand, char *dir, size_t dn, char *copy, size_t cn, char *hash, size_t hn,
                    int *lock, char *why, size_t wn)
{
    *lock = -1;
    const char *tmp = getenv("TMPDIR");
    if (!tmp || tmp[0] != '/')
        tmp = "/tmp";
    dir[0] = copy[0] = '\0';
    int in = open(cand, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat st;
    if (in < 0 || fstat(in, &st) || !S_ISREG(st.st_mode)) {
        snprintf(why, wn, "%s %s", cand, in < 0 ? "cannot be read" : "is not a regular file");
        if (in >= 0)
            close(in);
        return -1;
    }
    size_t cap = st.st_size > 0 ? (size_t)st.st_size : 1, len = 0;
    char *b = malloc(cap);
    int rd_err = 0;
    for (ssize_t r; b;) { /* one read of the bytes: what is hashed is what is checked */
        if (len == cap) {
            char *nb = realloc(b, cap * 2);
            if (!nb) {
                free(b), b = NULL;
                break;
            }
            b = nb, cap *= 2;
        }
        r = read(in, b + len, cap - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            rd_err = r < 0 ? errno : 0;
            break;
        }
        len += (size_t)r;
    }
    close(in);
    if (rd_err) { /* a part of the file, checked and hashed, would be refused by its hash later */
        snprintf(why, wn, "%s cannot be read: %s", cand, strerror(rd_err));
        free(b);
        return -1;
    }
    if (!b || kcap_privcopy_mkdir(tmp, KCAP_PRIVCOPY_CHECK_PREFIX, dir, dn, lock))
        dir[0] = '\0'; /* nothing made: nothing to remove */
    if (dir[0])
        snprintf(copy, cn, "%s/candidate.so", dir);
    int fd = dir[0] ? open(copy, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0700) : -1;
    int ok = fd >= 0 && write(fd, b, len) == (ssize_t)len;
    if (fd >= 0)
        ok = close(fd) == 0 && ok;
    if (ok)
        snprintf(hash, hn, "xxh64:%016llx", (unsigned long long)kcap_xxh64(b, len, 0));
    free(b);
    if (!ok) {
        snprintf(why, wn, "%s: no private copy to check can be made under %s (set TMPDIR to a writable "
                 "directory)", cand, tmp);
        kcap_check_copy_remove(dir, copy, lock);
        return -1;
    }
    return 0;
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

void kcap_check_copy_remove(const char *dir, const char *copy, int *lock)
{
    if (copy[0])
        unlink(copy);
    /* and whatever the checking processes left there (their TMPDIR: a private copy of a
       candidate that crashed or hung in its constructors) */
    if (dir[0])
        nftw(dir, remove_one, 8, FTW_DEPTH | FTW_PHYS);
    kcap_privcopy_unlock(lock);
}
