/*
 * kcap_snapfiles.c — `kcap replay`'s PATH arguments → the sorted snapshot list (see
 * kcap_snapfiles.h), through the walker every reader command shares
 * (formats/kcap_dirwalk.h), so replay and check always agree on what a directory holds.
 *
 * Hidden names (among them the writer's temp files, written then renamed) are never
 * replayed half written while a capture is still filling the directory. A directory that
 * cannot be read stays in the list as a case of its own, so it fails visibly by name.
 */
#include "kcap_snapfiles.h"

#include "kcap_dirwalk.h"

#include <stdlib.h>
#include <string.h>

int kcap_snapfiles_collect(char *const *args, int nargs, kcap_snapfiles *out, kcap_error *err)
{
    memset(out, 0, sizeof *out);
    kcap_filelist l;
    int rc = kcap_dirwalk(args, nargs, 1, &l, err);
    if (rc)
        return rc;
    out->paths = calloc((size_t)(l.n + l.nerr) + 1, sizeof *out->paths);
    if (!out->paths) {
        kcap_filelist_free(&l);
        return kcap_error_set(err, KCAP_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < l.n; i++) /* ownership moves to out */
        out->paths[out->n++] = l.paths[i];
    for (int i = 0; i < l.nerr; i++) { /* "DIR: cannot read directory: ..." -> DIR */
        char *colon = strstr(l.errors[i], ": cannot read directory");
        if (colon)
            *colon = '\0';
        out->paths[out->n++] = l.errors[i];
    }
    l.n = l.nerr = 0;
    kcap_filelist_free(&l);
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
