/*
 * kcap_snapfiles.c — recursive, sorted snapshot file collection (see kcap_snapfiles.h).
 *
 * Hidden files and names without the .h5 suffix are skipped inside directories: the
 * snapshot writer's temporary files (written then renamed) must never be replayed half
 * written while a capture is still filling the directory.
 */
#include "kcap_snapfiles.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct grow {
    kcap_snapfiles *s;
    int cap;
} grow;

static int push(grow *g, const char *path)
{
    if (g->s->n == g->cap) {
        int nc = g->cap ? g->cap * 2 : 32;
        char **np = realloc(g->s->paths, (size_t)nc * sizeof *np);
        if (!np)
            return KCAP_ERR_NOMEM;
        g->s->paths = np;
        g->cap = nc;
    }
    char *dup = strdup(path);
    if (!dup)
        return KCAP_ERR_NOMEM;
    g->s->paths[g->s->n++] = dup;
    return KCAP_OK;
}

static int has_h5_suffix(const char *name)
{
    size_t n = strlen(name);
    return n > 3 && !strcmp(name + n - 3, ".h5");
}

static int walk(grow *g, const char *dir, int depth, kcap_error *err)
{
    if (depth > 64) /* a symlink loop */
        return kcap_error_set(err, KCAP_ERR_IO, "%s: directories nested too deep (a loop?)", dir);
    DIR *d = opendir(dir);
    if (!d)
        return push(g, dir); /* reported as that case's error */
    struct dirent *de;
    int rc = KCAP_OK;
    while (!rc && (de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        struct stat st;
        if (stat(p, &st) != 0)
            continue;
        if (S_ISDIR(st.st_mode))
            rc = walk(g, p, depth + 1, err);
        else if (S_ISREG(st.st_mode) && has_h5_suffix(de->d_name))
            rc = push(g, p);
    }
    closedir(d);
    if (rc == KCAP_ERR_NOMEM)
        kcap_error_set(err, rc, "out of memory listing %s", dir);
    return rc;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int kcap_snapfiles_collect(char *const *args, int nargs, kcap_snapfiles *out, kcap_error *err)
{
    memset(out, 0, sizeof *out);
    grow g = {out, 0};
    int rc = KCAP_OK;
    for (int i = 0; i < nargs && !rc; i++) {
        struct stat st;
        char p[4096];
        snprintf(p, sizeof p, "%s", args[i]);
        size_t l = strlen(p);
        while (l > 1 && p[l - 1] == '/')
            p[--l] = '\0';
        if (stat(p, &st) == 0 && S_ISDIR(st.st_mode))
            rc = walk(&g, p, 0, err);
        else
            rc = push(&g, p);
        if (rc == KCAP_ERR_NOMEM)
            kcap_error_set(err, rc, "out of memory");
    }
    if (rc) {
        kcap_snapfiles_free(out);
        return rc;
    }
    qsort(out->paths, (size_t)out->n, sizeof *out->paths, cmp_str);
    return KCAP_OK;
}

void kcap_snapfiles_free(kcap_snapfiles *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->n; i++)
        free(s->paths[i]);
    free(s->paths);
    s->paths = NULL;
    s->n = 0;
}
