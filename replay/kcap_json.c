/*
 * kcap_json.c — JSON output primitives and the atomic output document (see kcap_json.h).
 */
#include "kcap_json.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kcap_version.h" /* common/ */

void kcap_json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (*p < 0x20)
                fprintf(f, "\\u%04x", *p);
            else
                fputc(*p, f);
        }
    }
    fputc('"', f);
}

void kcap_json_num(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, "%.9g", v);
    else
        fputs("null", f);
}

void kcap_json_int(FILE *f, int64_t v) { fprintf(f, "%" PRId64, v); }

void kcap_json_key(FILE *f, int *first, const char *key)
{
    if (!*first)
        fputc(',', f);
    *first = 0;
    kcap_json_str(f, key);
    fputc(':', f);
}

void kcap_json_header(FILE *f, int *first, const char *tool)
{
    kcap_json_key(f, first, "tool");
    kcap_json_str(f, tool);
    kcap_json_key(f, first, "schema_version");
    kcap_json_int(f, KCAP_JSON_SCHEMA_VERSION);
    kcap_json_key(f, first, "kcap_version");
    kcap_json_str(f, KCAP_VERSION);
}

int kcap_doc_is_stdout(const char *path) { return path && !strcmp(path, "-"); }

int kcap_doc_open(kcap_doc *d, const char *path, const char *what, kcap_error *err)
{
    memset(d, 0, sizeof *d);
    d->path = path;
    d->what = what;
    if (kcap_doc_is_stdout(path)) {
        d->f = stdout;
        return KCAP_OK;
    }
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
        /* a pipe or device (`kcap shadow` reads the document from /dev/fd/3): no rename */
        d->direct = 1;
        d->f = fopen(path, "w");
        if (!d->f)
            return kcap_error_set(err, KCAP_ERR_IO, "%s %s: cannot write: %s", what, path, strerror(errno));
        return KCAP_OK;
    }
    snprintf(d->tmp, sizeof d->tmp, "%s.tmp.%d", path, (int)getpid());
    d->f = fopen(d->tmp, "w");
    if (!d->f)
        return kcap_error_set(err, KCAP_ERR_IO, "%s %s: cannot write: %s", what, path,
                              strerror(errno));
    return KCAP_OK;
}

int kcap_doc_close(kcap_doc *d, kcap_error *err)
{
    if (!d->f)
        return KCAP_OK;
    int bad = ferror(d->f);
    if (d->f == stdout) {
        d->f = NULL;
        if (fflush(stdout) != 0 || bad)
            return kcap_error_set(err, KCAP_ERR_IO, "%s -: write to stdout failed", d->what);
        return KCAP_OK;
    }
    int rc = fclose(d->f);
    d->f = NULL;
    if (d->direct)
        return rc != 0 || bad ? kcap_error_set(err, KCAP_ERR_IO, "%s %s: cannot write: %s", d->what, d->path,
                                               strerror(errno))
                              : KCAP_OK;
    if (rc != 0 || bad || rename(d->tmp, d->path) != 0) {
        int e = errno;
        unlink(d->tmp);
        return kcap_error_set(err, KCAP_ERR_IO, "%s %s: cannot write: %s", d->what, d->path,
                              strerror(e));
    }
    return KCAP_OK;
}
