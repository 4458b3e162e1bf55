/*
 * kcap_json.h — the few JSON primitives replay and diff need to write their --json files.
 *
 * Hand-written rather than a dependency: output only, no parsing, and the two rules that
 * matter for machines reading it are enforced here: strings are escaped (and valid UTF-8
 * whatever bytes a file name holds), and non-finite numbers (JSON has no NaN/Inf) become null.
 */
#ifndef KCAP_JSON_H
#define KCAP_JSON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "kcap_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* "escaped": well-formed UTF-8 as is, control characters (C0, DEL, C1) as \u00NN, and any
 * byte that is not well-formed UTF-8 (a file name is bytes) as the text \xNN, the notation of
 * kcap_printable (a literal backslash in the input reads the same: enough for a person or a
 * script to find the file, not an exact inverse). */
void kcap_json_str(FILE *f, const char *s);
void kcap_json_num(FILE *f, double v);          /* %.9g, or null when not finite */
void kcap_json_int(FILE *f, int64_t v);
/* Length (1..4) of the well-formed UTF-8 sequence s starts with (RFC 3629: no overlong
 * form, no surrogate, nothing past U+10FFFF), 0 when s[0] starts none; never reads past the
 * terminating NUL. Shared with the JUnit writer. */
size_t kcap_utf8_len(const char *s);
/* "key": prefix, with a leading comma unless *first (then clears *first) */
void kcap_json_key(FILE *f, int *first, const char *key);

/* Version of the documents' layout (docs/JSON.md): bumped when a field is removed or
 * changes meaning; fields are only ever added within a version. */
#define KCAP_JSON_SCHEMA_VERSION 1

/* The keys every document starts with: "tool", "schema_version", "kcap_version". */
void kcap_json_header(FILE *f, int *first, const char *tool);

/*
 * An output document (--json, --junit): "-" is stdout; a path that exists and is not a
 * regular file (a pipe such as /dev/fd/3, a terminal) is written directly; any other path is
 * written beside the target and renamed over it on close, so a reader polling the file (a CI
 * step, a dashboard) never sees half a document. `what` ("--json") names the option in error
 * messages.
 */
typedef struct kcap_doc {
    FILE *f;
    const char *path, *what;
    int direct; /* written in place (not a regular file) */
    char tmp[4200];
} kcap_doc;

int kcap_doc_open(kcap_doc *d, const char *path, const char *what, kcap_error *err);
/* Flush and publish (rename); on any write error the target is left untouched. */
int kcap_doc_close(kcap_doc *d, kcap_error *err);
/* 1 when path means stdout. */
int kcap_doc_is_stdout(const char *path);

#ifdef __cplusplus
}
#endif

#endif
