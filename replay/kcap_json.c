/*
 * kcap_json.c — JSON output primitives and the atomic output document (see kcap_json.h).
 *
 * Strings come from files and file names, which are bytes, not text: kcap_json_str writes
 * well-formed UTF-8 through unchanged, control characters (and DEL and the C1 range, which
 * a terminal showing `--json -` would act on) as \u00NN, and every byte that is not part of
 * a well-formed UTF-8 sequence as the four characters \xNN (kcap_printable's notation, the
 * one the terminal output uses; in JSON text "\\xff"), so the document always parses.
 */
#include "kcap_json.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kcap_snapshot.h" /* kcap_printable */
#include "kcap_version.h"  /* common/ */

size_t kcap_utf8_len(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    unsigned char lo = 0x80, hi = 0xbf; /* the second byte's range */
    size_t n;
    if (p[0] < 0x80)
        return 1;
    if (p[0] >= 0xc2 && p[0] <= 0xdf)
        n = 2;
    else if (p[0] >= 0xe0 && p[0] <= 0xef)
        n = 3, lo = p[0] == 0xe0 ? 0xa0 : 0x80, hi = p[0] == 0xed ? 0x9f : 0xbf;
    else if (p[0] >= 0xf0 && p[0] <= 0xf4)
        n = 4, lo = p[0] == 0xf0 ? 0x90 : 0x80, hi = p[0] == 0xf4 ? 0x8f : 0xbf;
    else
        return 0; /* a continuation byte, an overlong lead (c0, c1) or past U+10FFFF */
    if (p[1] < lo || p[1] > hi)
        return 0; /* also stops at the NUL: nothing past the string is read */
    for (size_t i = 2; i < n; i++)
        if (p[i] < 0x80 || p[i] > 0xbf)
            return 0;
    return n;
}

void kcap_json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (const char *p = s ? s : ""; *p;) {
        unsigned char c = (unsigned char)*p;
        size_t n = kcap_utf8_len(p);
        if (n == 0) {
            /* not UTF-8: "\xNN" as kcap_printable shows the byte, its backslash escaped */
            char one[2] = {*p, '\0'}, shown[8];
            fputc('\\', f);
            fputs(kcap_printable(shown, sizeof shown, one), f);
            p++;
            continue;
        }
        if (n == 2 && c == 0xc2 && (unsigned char)p[1] < 0xa0) {
            fprintf(f, "\\u%04x", (unsigned char)p[1]); /* C1 control, U+0080..U+009F */
            p += 2;
            continue;
        }
        if (n > 1) {
            fwrite(p, 1, n, f);
            p += n;
            continue;
        }
        switch (c) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (c < 0x20 || c == 0x7f)
                fprintf(f, "\\u%04x", c);
            else
                fputc(c, f);
        }
        p++;
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
