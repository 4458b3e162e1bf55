/*
 * kcap_shadow_summary.c — shadow mode's summary file (kcap_shadow_summary.h): the JSON that
 * `kcap shadow PID --status` and the tests read, in replay's conventions (a non-finite number
 * is null; tolerances as replay's JSON writes them). Written atomically: a reader sees the
 * previous file or the new one, never a part. Strings (a candidate path may hold any byte but
 * NUL) are escaped, so the file always parses.
 */
#include "kcap_shadow_summary.h"

#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "kcap_calls.h"   /* formats/: the call names */
#include "kcap_version.h" /* common/ */

static const char *num(char *b, size_t n, double v)
{
    if (isfinite(v))
        snprintf(b, n, "%.9g", v);
    else
        snprintf(b, n, "null");
    return b;
}

/* s as a JSON string body: quote, backslash and control bytes escaped. */
static void put_str(FILE *f, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
}

static void put_field(FILE *f, const char *pre, const char *s, const char *post)
{
    fputs(pre, f);
    put_str(f, s);
    fputs(post, f);
}

int kcap_shadow_summary_tmpname(char *out, size_t n, const char *path, long pid, unsigned seq)
{
    const char *slash = strrchr(path, '/');
    int dl = slash ? (int)(slash - path) + 1 : 0;
    int w = snprintf(out, n, "%.*s.kcap-tmp.%ld.%s.%u", dl, path, pid, slash ? slash + 1 : path, seq);
    return w < 0 || (size_t)w >= n ? -1 : 0;
}

int kcap_shadow_summary_write(const char *path, const kcap_shadow_view *v)
{
    static atomic_uint seq;
    char tmp[PATH_MAX + 48], w[32];
    /* a temporary name of this write's own: writers of one path never share one (a shared
       name let one writer rename or remove another's half-written file) */
    if (kcap_shadow_summary_tmpname(tmp, sizeof tmp, path, (long)getpid(), atomic_fetch_add(&seq, 1))) {
        errno = ENAMETOOLONG;
        return -1;
    }
    FILE *f = fopen(tmp, "wx");
    if (!f)
        return -1;
    fprintf(f, "{\n  \"tool\": \"kcap shadow\",\n  \"schema_version\": 1,\n  \"kcap_version\": \"%s\",\n",
            KCAP_VERSION);
    put_field(f, "  \"candidate\": {\"path\": \"", v->path, "\", ");
    put_field(f, "\"hash\": \"", v->hash, "\", ");
    fprintf(f, "\"on\": %s},\n  \"swaps\": %llu,\n", v->on ? "true" : "false", v->swaps);
    put_field(f, "  \"production_hash\": \"", v->prod_hash, "\",\n");
    fprintf(f, "  \"tolerances\": {\"half\": {\"atol\": %.9g, \"rtol\": %.9g}, \"f32\": "
            "{\"atol\": %.9g, \"rtol\": %.9g}},\n", v->tol[0], v->tol[1], v->tol[2], v->tol[3]);
    fprintf(f, "  \"compared\": %llu,\n  \"divergent\": %llu,\n  \"kept\": %llu,\n  \"capped\": %llu,\n"
            "  \"lost\": %llu,\n  \"not_judged\": %llu,\n", v->compared, v->divergent, v->kept,
            v->capped, v->lost, v->not_judged);
    fprintf(f, "  \"worst_abs\": %s,\n  \"worst_nonfinite\": %s,\n", num(w, sizeof w, v->worst_abs),
            isinf(v->worst_abs) ? "true" : "false");
    put_field(f, "  \"worst_where\": \"", v->worst_where, "\",\n  \"shapes\": [");
    for (int i = 0; i < v->nshapes; i++) {
        const kcap_shadow_shape *s = &v->shapes[i];
        fprintf(f, "%s\n    {\"call\": \"%s\", \"bs\": %lld, \"q_len\": %lld, \"num_heads\": %lld, "
                "\"compared\": %llu, \"divergent\": %llu, \"kept\": %llu, \"worst_abs\": %s}",
                i ? "," : "", kcap_builtin_calls[s->call].name, s->bs, s->q_len, s->heads,
                s->compared, s->divergent, s->kept, num(w, sizeof w, s->worst_abs));
    }
    fprintf(f, "\n  ],\n  \"other_shapes\": {\"compared\": %llu, \"divergent\": %llu, \"kept\": %llu, "
            "\"worst_abs\": %s}\n}\n", v->other.compared, v->other.divergent, v->other.kept,
            num(w, sizeof w, v->other.worst_abs));
    int ok = fflush(f) == 0 && fsync(fileno(f)) == 0;
    ok = fclose(f) == 0 && ok;
    if (ok && rename(tmp, path) == 0)
        return 0;
    int e = errno; /* the caller names the failure */
    unlink(tmp);
    errno = e;
    return -1;
}
