/*
 * kcap_tags.c — per-thread call tags (kcap_tags.h). A serving backend knows what the kernel
 * ABI does not: which layer and which decode step a call belongs to. It says so with
 * kcap_tag(key, value) before the call, on the calling thread; capture copies the thread's
 * tags into the snapshot and KCAP_TAGS=layer=0-3 keeps only the calls it names. Thread-local
 * state only, so tagging costs a few stores and never takes a lock.
 */
#include "kcap_tags.h"

#include <stdio.h>
#include <string.h>

static _Thread_local struct {
    int n;
    char key[KCAP_MAX_TAGS][KCAP_TAG_KEY_MAX];
    long value[KCAP_MAX_TAGS];
} t_tags;

/* The key's length when it is a valid tag key, else 0 (reads at most 32 bytes). */
static size_t key_len(const char *k)
{
    size_t n = 0;
    while (n < KCAP_TAG_KEY_MAX && k[n]) {
        char c = k[n];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.'))
            return 0;
        n++;
    }
    return n < KCAP_TAG_KEY_MAX ? n : 0;
}

__attribute__((visibility("default"))) void kcap_tag(const char *key, long value)
{
    size_t n = key ? key_len(key) : 0;
    if (!n)
        return;
    for (int i = 0; i < t_tags.n; i++)
        if (!strcmp(t_tags.key[i], key)) {
            t_tags.value[i] = value;
            return;
        }
    if (t_tags.n == KCAP_MAX_TAGS)
        return;
    memcpy(t_tags.key[t_tags.n], key, n + 1);
    t_tags.value[t_tags.n++] = value;
}

void kcap_tags_text(char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < t_tags.n && used < n; i++) {
        int w = snprintf(buf + used, n - used, "%s%s=%ld", i ? "," : "", t_tags.key[i],
                         t_tags.value[i]);
        if (w < 0 || (size_t)w >= n - used) {
            buf[used] = '\0'; /* never a half tag */
            return;
        }
        used += (size_t)w;
    }
}

int kcap_tags_select(const kcap_config *c)
{
    for (int f = 0; f < c->ntag_filters; f++) {
        const kcap_tag_filter *tf = &c->tag_filters[f];
        int i = 0;
        while (i < t_tags.n && strcmp(t_tags.key[i], tf->key))
            i++;
        if (i == t_tags.n || t_tags.value[i] < 0)
            return 0;
        unsigned long long v = (unsigned long long)t_tags.value[i];
        int in = 0;
        for (int r = 0; r < tf->nranges && !in; r++)
            in = v >= tf->ranges[r].lo && v <= tf->ranges[r].hi;
        if (!in)
            return 0;
    }
    return 1;
}
