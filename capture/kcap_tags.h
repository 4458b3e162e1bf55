/*
 * kcap_tags.h — kcap_tags.c: tags a backend puts on its calls (kcap_tag("layer", 3) before a
 * call; libkcap exports kcap_tag, so ctypes finds it in the process, and a process without
 * libkcap simply has none), kept per thread, stored in each snapshot's `tags` attribute and
 * selected by KCAP_TAGS. Bottom layer: no I/O, no locks.
 */
#ifndef KCAP_TAGS_H
#define KCAP_TAGS_H

#include <stddef.h>

#include "kcap_config.h"

#define KCAP_MAX_TAGS 8
#define KCAP_TAGS_TEXT 256 /* bytes of the "key=value,..." text (kcap_meta.tags) */

/* Set (or replace) this thread's tag `key` to `value`; a NULL/empty key or one of more than
 * 31 characters or outside [A-Za-z0-9_.] is ignored, as is a ninth distinct key. Exported. */
void kcap_tag(const char *key, long value);
/* This thread's tags as "key=value,..." in setting order ("" when none). */
void kcap_tags_text(char *buf, size_t n);
/* 1 when this thread's tags satisfy every KCAP_TAGS term (a missing tag does not). */
int kcap_tags_select(const kcap_config *c);

#endif
