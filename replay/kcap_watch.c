/*
 * kcap_watch.c — inotify watcher with a settle step (see kcap_watch.h).
 *
 * Files are watched through their directory, not the file itself: a build that writes a
 * new .so and renames it over the old one replaces the inode, and a watch on the old inode
 * would never fire again. Poll timeouts stay short so a stop request (SIGINT/SIGTERM) is
 * seen promptly even if it lands between the flag check and poll().
 */
#include "kcap_watch.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define KCAP_WATCH_MASK                                                                      \
    (IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_CREATE | IN_DELETE | IN_MODIFY |      \
     IN_ATTRIB | IN_DELETE_SELF)

typedef struct wentry {
    int wd;
    char dir[PATH_MAX];
    char name[256]; /* "" = a snapshot directory: any *.h5 and new subdirectories */
} wentry;

typedef struct fstate {
    int exists;
    off_t size;
    struct timespec mtime;
} fstate;

struct kcap_watch {
    int fd;
    int debounce_ms;
    int n, cap;
    wentry *e;
    int nfiles;
    char (*files)[PATH_MAX];
    char last[PATH_MAX + 256];
};

static int add(kcap_watch *w, const char *dir, const char *name, kcap_error *err)
{
    int wd = inotify_add_watch(w->fd, dir, KCAP_WATCH_MASK);
    if (wd < 0)
        return kcap_error_set(err, KCAP_ERR_IO, "--watch: cannot watch %s: %s", dir,
                              strerror(errno));
    if (w->n == w->cap) {
        int nc = w->cap ? w->cap * 2 : 16;
        wentry *ne = realloc(w->e, (size_t)nc * sizeof *ne);
        if (!ne)
            return kcap_error_set(err, KCAP_ERR_NOMEM, "out of memory");
        w->e = ne;
        w->cap = nc;
    }
    wentry *e = &w->e[w->n++];
    e->wd = wd;
    snprintf(e->dir, sizeof e->dir, "%s", dir);
    snprintf(e->name, sizeof e->name, "%s", name);
    return KCAP_OK;
}

static int add_tree(kcap_watch *w, const char *dir, int depth, kcap_error *err)
{
    int rc = add(w, dir, "", err);
    if (rc || depth > 32) /* deeper is a symlink loop, not a snapshot tree */
        return rc;
    DIR *d = opendir(dir);
    if (!d)
        return KCAP_OK;
    struct dirent *de;
    while (!rc && (de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char p[PATH_MAX];
        struct stat st;
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        if (stat(p, &st) == 0 && S_ISDIR(st.st_mode))
            rc = add_tree(w, p, depth + 1, err);
    }
    closedir(d);
    return rc;
}

static void split(const char *path, char *dir, size_t dn, char *base, size_t bn)
{
    const char *s = strrchr(path, '/');
    if (!s) {
        snprintf(dir, dn, ".");
        snprintf(base, bn, "%s", path);
    } else if (s == path) {
        snprintf(dir, dn, "/");
        snprintf(base, bn, "%s", s + 1);
    } else {
        snprintf(dir, dn, "%.*s", (int)(s - path), path);
        snprintf(base, bn, "%s", s + 1);
    }
}

int kcap_watch_create(const char *const *files, int nfiles, char *const *snap_paths,
                      int npaths, int debounce_ms, kcap_watch **out, kcap_error *err)
{
    *out = NULL;
    kcap_watch *w = calloc(1, sizeof *w);
    if (!w)
        return kcap_error_set(err, KCAP_ERR_NOMEM, "out of memory");
    w->debounce_ms = debounce_ms > 0 ? debounce_ms : 300;
    w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (w->fd < 0) {
        int e = errno;
        free(w);
        return kcap_error_set(err, KCAP_ERR_IO, "--watch: inotify_init1: %s", strerror(e));
    }
    w->files = calloc((size_t)(nfiles > 0 ? nfiles : 1), sizeof *w->files);
    if (!w->files) {
        kcap_watch_free(w);
        return kcap_error_set(err, KCAP_ERR_NOMEM, "out of memory");
    }
    int rc = KCAP_OK;
    char dir[PATH_MAX], base[256];
    for (int i = 0; i < nfiles && !rc; i++) {
        snprintf(w->files[w->nfiles++], PATH_MAX, "%s", files[i]);
        split(files[i], dir, sizeof dir, base, sizeof base);
        rc = add(w, dir, base, err);
    }
    for (int i = 0; i < npaths && !rc; i++) {
        struct stat st;
        if (stat(snap_paths[i], &st) == 0 && S_ISDIR(st.st_mode)) {
            rc = add_tree(w, snap_paths[i], 0, err);
        } else {
            split(snap_paths[i], dir, sizeof dir, base, sizeof base);
            rc = add(w, dir, base, err);
        }
    }
    if (rc) {
        kcap_watch_free(w);
        return rc;
    }
    *out = w;
    return KCAP_OK;
}

void kcap_watch_free(kcap_watch *w)
{
    if (!w)
        return;
    if (w->fd >= 0)
        close(w->fd);
    free(w->e);
    free(w->files);
    free(w);
}

const char *kcap_watch_last(const kcap_watch *w) { return w->last; }

static int has_h5(const char *name)
{
    size_t n = strlen(name);
    return n > 3 && !strcmp(name + n - 3, ".h5");
}

/* Drain pending events; returns how many were relevant (new directories get watched). */
static int drain(kcap_watch *w)
{
    char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
    int relevant = 0;
    for (;;) {
        ssize_t len = read(w->fd, buf, sizeof buf);
        if (len <= 0)
            return relevant;
        for (char *p = buf; p < buf + len;) {
            const struct inotify_event *ev = (const struct inotify_event *)p;
            p += sizeof *ev + ev->len;
            const char *name = ev->len ? ev->name : "";
            int nentries = w->n; /* add_tree below may grow the array */
            for (int i = 0; i < nentries; i++) {
                wentry *e = &w->e[i];
                if (e->wd != ev->wd)
                    continue;
                int hit = 0;
                if (e->name[0])
                    hit = !strcmp(e->name, name);
                else if ((ev->mask & IN_ISDIR) && (ev->mask & (IN_CREATE | IN_MOVED_TO))) {
                    char sub[PATH_MAX + 256];
                    snprintf(sub, sizeof sub, "%s/%s", e->dir, name);
                    add_tree(w, sub, 0, NULL);
                    hit = 1;
                } else {
                    hit = has_h5(name) && name[0] != '.';
                }
                if (hit) {
                    relevant++;
                    snprintf(w->last, sizeof w->last, "%s/%s", w->e[i].dir, name);
                    break;
                }
            }
        }
    }
}

/* Wait up to ms for events; returns relevant count, or -1 when stopped. */
static int wait_events(kcap_watch *w, int ms, volatile sig_atomic_t *stop)
{
    int waited = 0;
    for (;;) {
        if (stop && *stop)
            return -1;
        int slice = ms < 0 ? 200 : (ms - waited < 100 ? ms - waited : 100);
        if (ms >= 0 && slice <= 0)
            return 0;
        struct pollfd pfd = {.fd = w->fd, .events = POLLIN};
        int r = poll(&pfd, 1, slice);
        if (r > 0) {
            int rel = drain(w);
            if (rel)
                return rel;
        }
        waited += slice;
    }
}

static void snap_state(const kcap_watch *w, fstate *s)
{
    for (int i = 0; i < w->nfiles; i++) {
        struct stat st;
        memset(&s[i], 0, sizeof s[i]);
        if (stat(w->files[i], &st) == 0) {
            s[i].exists = 1;
            s[i].size = st.st_size;
            s[i].mtime = st.st_mtim;
        }
    }
}

int kcap_watch_wait(kcap_watch *w, volatile sig_atomic_t *stop, kcap_error *err)
{
    fstate *a = calloc((size_t)w->nfiles + 1, sizeof *a);
    fstate *b = calloc((size_t)w->nfiles + 1, sizeof *b);
    if (!a || !b) {
        free(a);
        free(b);
        kcap_error_set(err, KCAP_ERR_NOMEM, "out of memory");
        return -1;
    }
    int result = 1;
    if (wait_events(w, -1, stop) < 0) {
        result = 0;
        goto out;
    }
    for (;;) {
        int r;
        /* quiet period: no relevant event for debounce_ms */
        while ((r = wait_events(w, w->debounce_ms, stop)) > 0)
            ;
        if (r < 0) {
            result = 0;
            goto out;
        }
        /* settled: every watched file exists and keeps its size and mtime */
        snap_state(w, a);
        if ((r = wait_events(w, w->debounce_ms, stop)) < 0) {
            result = 0;
            goto out;
        }
        if (r > 0)
            continue;
        snap_state(w, b);
        int stable = 1, missing = 0;
        for (int i = 0; i < w->nfiles; i++) {
            missing |= !b[i].exists;
            stable &= a[i].exists == b[i].exists && a[i].size == b[i].size &&
                      a[i].mtime.tv_sec == b[i].mtime.tv_sec &&
                      a[i].mtime.tv_nsec == b[i].mtime.tv_nsec;
        }
        if (missing) { /* deleted mid-build: wait for it to come back */
            if (wait_events(w, -1, stop) < 0) {
                result = 0;
                goto out;
            }
            continue;
        }
        if (stable)
            break;
    }
out:
    free(a);
    free(b);
    return result;
}
