/*
 * kcap_cmd_common.c — see kcap_cmd_common.h.
 */
#include "kcap_cmd_common.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int push(kcap_pathlist *l, const char *p)
{
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 64;
        char **nv = realloc(l->v, nc * sizeof *nv);
        if (!nv)
            return -1;
        l->v = nv;
        l->cap = nc;
    }
    if (!(l->v[l->n] = strdup(p)))
        return -1;
    l->n++;
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int kcap_pathlist_add(kcap_pathlist *l, const char *path, int recurse)
{
    struct stat st;
    if (stat(path, &st))
        return -1;
    if (!S_ISDIR(st.st_mode))
        return push(l, path);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    size_t first = l->n;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        size_t n = strlen(path) + strlen(e->d_name) + 2;
        char *p = malloc(n);
        if (!p)
            break;
        snprintf(p, n, "%s%s%s", path, path[strlen(path) - 1] == '/' ? "" : "/", e->d_name);
        struct stat cs;
        if (!lstat(p, &cs)) {
            if (S_ISREG(cs.st_mode))
                push(l, p);
            else if (S_ISDIR(cs.st_mode) && recurse)
                kcap_pathlist_add(l, p, 1);
        }
        free(p);
    }
    closedir(d);
    qsort(l->v + first, l->n - first, sizeof *l->v, cmp_str);
    return 0;
}

void kcap_pathlist_free(kcap_pathlist *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

void kcap_fmt_bytes(char *buf, size_t n, uint64_t b)
{
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)b;
    int i = 0;
    while (v >= 1024 && i < 4) {
        v /= 1024;
        i++;
    }
    if (i == 0)
        snprintf(buf, n, "%llu B", (unsigned long long)b);
    else
        snprintf(buf, n, "%.2f %s", v, u[i]);
}

void kcap_fmt_shape(char *buf, size_t n, int ndim, const int64_t *shape)
{
    size_t u = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < ndim && u < n; i++)
        u += (size_t)snprintf(buf + u, n - u, "%s%lld", i ? "," : "", (long long)shape[i]);
    if (u < n)
        snprintf(buf + u, n - u, "]");
}

void kcap_fmt_summary(char *buf, size_t n, const kcap_snapshot *s)
{
    static const char *keys[][2] = {{"bs", "bs"}, {"q_len", "q_len"}, {"num_heads", "H"}};
    size_t u = 0;
    buf[0] = '\0';
    for (int i = 0; i < 3; i++) {
        const kcap_scalar *sc = kcap_snapshot_scalar(s, keys[i][0]);
        if (sc && sc->type == KCAP_SC_INT && u < n)
            u += (size_t)snprintf(buf + u, n - u, "%s%s=%lld", u ? " " : "", keys[i][1],
                                  (long long)sc->i);
    }
    const kcap_tensor *kv = kcap_snapshot_tensor(s, "kv_cache", KCAP_DIR_IN);
    if (kv && kv->ndim >= 1 && u < n)
        u += (size_t)snprintf(buf + u, n - u, "%skv_rows=%lld", u ? " " : "",
                              (long long)kv->shape[0]);
    if (!u && s->ntensors) {
        char sh[64];
        kcap_fmt_shape(sh, sizeof sh, s->tensors[0].ndim, s->tensors[0].shape);
        snprintf(buf, n, "%s%s", s->tensors[0].name, sh);
    }
}
