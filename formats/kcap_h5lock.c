/*
 * kcap_h5lock.c — the one lock around every libhdf5 call of kcap (Debian's libhdf5 is not
 * built thread-safe, and capture writes from a background thread while others read), and
 * the conversion of HDF5's error stack into one sentence for kcap_error messages.
 */
#include "kcap_fmt_internal.h"

#include <hdf5.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static pthread_mutex_t h5_mutex;
static pthread_once_t h5_once = PTHREAD_ONCE_INIT;

static void h5_init(void)
{
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&h5_mutex, &a);
    pthread_mutexattr_destroy(&a);
}

void kcap_h5_lock(void)
{
    pthread_once(&h5_once, h5_init);
    pthread_mutex_lock(&h5_mutex);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

void kcap_h5_unlock(void) { pthread_mutex_unlock(&h5_mutex); }

typedef struct {
    char *buf;
    size_t n;
    int found;
} walk_ctx;

/* A system call's failure inside a file driver: "..., errno = 28, error message = 'No
 * space left on device', ..." — keep the part a reader needs. */
static void put_desc(char *buf, size_t n, const char *desc, const char *func)
{
    const char *em = strstr(desc, "error message = '");
    const char *en = em ? strchr(em + 17, '\'') : NULL;
    const char *colon = strchr(desc, ':'); /* "file write failed: time = ..." */
    if (em && en && colon)
        snprintf(buf, n, "%.*s (%.*s, in %s)", (int)(en - em - 17), em + 17,
                 (int)(colon - desc), desc, func);
    else
        snprintf(buf, n, "%s (in %s)", desc, func);
}

static herr_t walk_cb(unsigned n, const H5E_error2_t *e, void *data)
{
    walk_ctx *w = data;
    (void)n;
    /* H5E_WALK_UPWARD: the first entry is the innermost (most specific) one. */
    if (!w->found && e && e->desc && e->desc[0]) {
        put_desc(w->buf, w->n, e->desc, e->func_name ? e->func_name : "?");
        w->found = 1;
    }
    return 0;
}

/* Every libhdf5 API call clears the error stack on entry, so helpers that must close
 * handles after a failure save the text first; kcap_h5_errtext falls back to it. Under
 * the HDF5 lock, so one buffer serves every thread. */
static char saved[400];

void kcap_h5_errsave(void)
{
    walk_ctx w = {saved, sizeof saved, 0};
    saved[0] = '\0';
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, walk_cb, &w);
}

const char *kcap_h5_errtext(char *buf, size_t n)
{
    walk_ctx w = {buf, n, 0};
    if (n)
        buf[0] = '\0';
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, walk_cb, &w);
    H5Eclear2(H5E_DEFAULT);
    if (!w.found && saved[0])
        snprintf(buf, n, "%s", saved);
    else if (!w.found)
        snprintf(buf, n, "no detail on libhdf5's error stack");
    saved[0] = '\0';
    for (char *c = buf; *c; c++) /* HDF5's file-driver messages span lines */
        if (*c == '\n' || *c == '\r')
            *c = ' ';
    char raw[400]; /* libhdf5 may quote bytes of the file: escape them */
    snprintf(raw, sizeof raw, "%s", buf);
    kcap_printable(buf, n, raw);
    return buf;
}

/* After fork the child's copy of the mutex may be owned by a thread that does not exist
 * there (the parent holds it across fork on purpose): start the child with a fresh one. */
void kcap_h5_lock_reset_in_child(void)
{
    pthread_once(&h5_once, h5_init);
    h5_init();
}
