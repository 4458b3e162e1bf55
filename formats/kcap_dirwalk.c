/*
 * kcap_dirwalk.c — see kcap_dirwalk.h: the directory walker of every reader command.
 */
#include "kcap_dirwalk.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_DEPTH 64

typedef struct walker {
    kcap_filelist *l;
    int cap, tcap, ecap, recurse, nomem;
} walker;

static int grow(void **v, int *cap, int n, size_t es)
{
    if (n < *cap)
        return 0;
    int nc = *cap ? *cap * 2 : 32;
    void *nv = realloc(*v, (size_t)nc * es);
    if (!nv)
        return -1;
    *v = nv;
    *cap = nc;
    return 0;
}

static void push_str(walker *w, char ***v, int *cap, int *n, const char *str)
{
    char *d = strdup(str);
    if (!d || grow((void **)v, cap, *n, sizeof(char *))) {
        free(d);
        w->nomem = 1;
        return;
    }
    (*v)[(*n)++] = d;
}

static void add_path(walker *w, const char *p) { push_str(w, &w->l->paths, &w->cap, &w->l->n, p); }

/* "DIR: cannot read directory: WHY" (kcap_snapfiles.c turns it into a failing case DIR) */
static void add_error_why(walker *w, const char *dir, const char *why)
{
    char buf[4096 + 512]; /* a directory path of up to 4095 bytes and the reason */
    snprintf(buf, sizeof buf, "%s: cannot read directory: %s", dir, why);
    push_str(w, &w->l->errors, &w->ecap, &w->l->nerr, buf);
}

static void add_error(walker *w, const char *dir, int e) { add_error_why(w, dir, strerror(e)); }

static void add_tmp(walker *w, const char *p, long pid)
{
    char *d = strdup(p);
    if (!d || grow((void **)&w->l->tmp, &w->tcap, w->l->ntmp, sizeof(kcap_tmpfile))) {
        free(d);
        w->nomem = 1;
        return;
    }
    /* EPERM: the process exists but belongs to someone else */
    int alive = pid > 0 && (kill((pid_t)pid, 0) == 0 || errno == EPERM);
    w->l->tmp[w->l->ntmp++] = (kcap_tmpfile){d, pid, alive};
}

int kcap_tmpname_pid(const char *name, long *pid)
{
    static const char pre[] = ".kcap-tmp.";
    if (strncmp(name, pre, sizeof pre - 1))
        return 0;
    char *end;
    errno = 0;
    long v = strtol(name + sizeof pre - 1, &end, 10);
    if (errno || end == name + sizeof pre - 1 || *end != '.' || v <= 0)
        return 0;
    *pid = v;
    return 1;
}

const char *kcap_file_kind(unsigned mode)
{
    switch (mode & S_IFMT) {
    case S_IFREG: return "regular file";
    case S_IFDIR: return "directory";
    case S_IFIFO: return "FIFO";
    case S_IFSOCK: return "socket";
    case S_IFCHR: return "character device";
    case S_IFBLK: return "block device";
    case S_IFLNK: return "symbolic link";
    default: return "unknown file type";
    }
}

static int has_h5_suffix(const char *name)
{
    size_t n = strlen(name);
    return n > 3 && !strcmp(name + n - 3, ".h5");
}

static void walk(walker *w, const char *dir, int depth)
{
    DIR *d = opendir(dir);
    if (!d) {
        add_error(w, dir, errno);
        return;
    }
    struct dirent *de;
    while (!w->nomem && (de = readdir(d))) {
        const char *nm = de->d_name;
        if (!strcmp(nm, ".") || !strcmp(nm, ".."))
            continue;
        char p[4096];
        if ((size_t)snprintf(p, sizeof p, "%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/",
                             nm) >= sizeof p) { /* said, not skipped: a bad file must not go unseen */
            char why[400];
            snprintf(why, sizeof why, "a path longer than %zu bytes, not searched: entry '%.255s'",
                     sizeof p - 1, nm);
            add_error_why(w, dir, why);
            continue;
        }
        long pid;
        if (kcap_tmpname_pid(nm, &pid)) {
            add_tmp(w, p, pid);
            continue;
        }
        if (nm[0] == '.')
            continue;
        struct stat ls, st;
        if (lstat(p, &ls))
            continue; /* vanished while we looked */
        if (S_ISDIR(ls.st_mode)) {
            if (w->recurse && depth < MAX_DEPTH)
                walk(w, p, depth + 1);
            else if (w->recurse) {
                char why[80];
                snprintf(why, sizeof why, "nested more than %d directories deep: not searched",
                         MAX_DEPTH);
                add_error_why(w, p, why);
            }
            continue;
        }
        if (!has_h5_suffix(nm))
            continue;
        /* a symlink to a directory is not descended; to anything else it is listed */
        if (S_ISLNK(ls.st_mode) && !stat(p, &st) && S_ISDIR(st.st_mode))
            continue;
        add_path(w, p);
    }
    closedir(d);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int cmp_tmp(const void *a, const void *b)
{
    return strcmp(((const kcap_tmpfile *)a)->path, ((const kcap_tmpfile *)b)->path);
}

int kcap_dirwalk(char *const *args, int nargs, int recurse, kcap_filelist *out, kcap_error *err)
{
    memset(out, 0, sizeof *out);
    walker w = {.l = out, .recurse = recurse};
    for (int i = 0; i < nargs && !w.nomem; i++) {
        struct stat st;
        if (!stat(args[i], &st) && S_ISDIR(st.st_mode))
            walk(&w, args[i], 0);
        else
            add_path(&w, args[i]);
    }
    if (w.nomem) {
        kcap_filelist_free(out);
        return kcap_error_set(err, KCAP_ERR_NOMEM, "out of memory listing snapshot files");
    }
    if (out->n) /* qsort's base may not be NULL, even for 0 elements */
        qsort(out->paths, (size_t)out->n, sizeof *out->paths, cmp_str);
    if (out->ntmp)
        qsort(out->tmp, (size_t)out->ntmp, sizeof *out->tmp, cmp_tmp);
    return KCAP_OK;
}

void kcap_filelist_free(kcap_filelist *l)
{
    if (!l)
        return;
    for (int i = 0; i < l->n; i++)
        free(l->paths[i]);
    for (int i = 0; i < l->ntmp; i++)
        free(l->tmp[i].path);
    for (int i = 0; i < l->nerr; i++)
        free(l->errors[i]);
    free(l->paths);
    free(l->tmp);
    free(l->errors);
    memset(l, 0, sizeof *l);
}
