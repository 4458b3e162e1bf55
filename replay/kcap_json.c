/*
 * kcap_json.c — JSON output primitives (see kcap_json.h).
 */
#include "kcap_json.h"

#include <inttypes.h>
#include <math.h>

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
