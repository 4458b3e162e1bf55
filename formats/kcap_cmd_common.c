/*
 * kcap_cmd_common.c — see kcap_cmd_common.h.
 */
#include "kcap_cmd_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int kcap_cmd_collect(char *const *args, int nargs, int recurse, kcap_filelist *l, FILE *f,
                     const char *bad_prefix, const char *tmp_prefix)
{
    kcap_error err = {0};
    if (kcap_dirwalk(args, nargs, recurse, l, &err)) {
        fprintf(stderr, "kcap: %s\n", err.msg);
        return -1;
    }
    char shown[4200];
    for (int i = 0; i < l->nerr; i++)
        fprintf(f, "%s%s\n", bad_prefix, kcap_printable(shown, sizeof shown, l->errors[i]));
    for (int i = 0; i < l->ntmp; i++)
        fprintf(f, "%s%s: unfinished snapshot temp file of pid %ld (%s)\n", tmp_prefix,
                kcap_printable(shown, sizeof shown, l->tmp[i].path), l->tmp[i].pid,
                l->tmp[i].alive ? "that process is running: it may be writing it now"
                                : "that process is gone: stale, safe to delete");
    return l->nerr;
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
