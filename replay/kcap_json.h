/*
 * kcap_json.h — the few JSON primitives replay and diff need to write their --json files.
 *
 * Hand-written rather than a dependency: output only, no parsing, and the two rules that
 * matter for machines reading it are enforced here: strings are escaped, and non-finite
 * numbers (JSON has no NaN/Inf) become null.
 */
#ifndef KCAP_JSON_H
#define KCAP_JSON_H

#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

void kcap_json_str(FILE *f, const char *s);     /* "escaped" */
void kcap_json_num(FILE *f, double v);          /* %.9g, or null when not finite */
void kcap_json_int(FILE *f, int64_t v);
/* "key": prefix, with a leading comma unless *first (then clears *first) */
void kcap_json_key(FILE *f, int *first, const char *key);

#ifdef __cplusplus
}
#endif

#endif
