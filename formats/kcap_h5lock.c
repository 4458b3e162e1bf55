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

static herr_t walk_cb(unsigned n, const H5E_error2_t *e, void *data)
{
    walk_ctx *w = data;
    (void)n;
    /* H5E_WALK_UPWARD: the first entry is the innermost (most specific) one. */
    if (!w->found && e && e->desc && e->desc[0]) {
        snprintf(w->buf, w->n, "%s (in %s)", e->desc, e->func_name ? e->func_name : "?");
        w->found = 1;
    }
    return 0;
}

const char *kcap_h5_errtext(char *buf, size_t n)
{
    walk_ctx w = {buf, n, 0};
    if (n)
        buf[0] = '\0';
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, walk_cb, &w);
    H5Eclear2(H5E_DEFAULT);
    if (!w.found)
        snprintf(buf, n, "unknown HDF5 error");
    for (char *c = buf; *c; c++) /* HDF5's file-driver messages span lines */
        if (*c == '\n' || *c == '\r')
            *c = ' ';
    return buf;
}

/* After fork the child's copy of the mutex may be owned by a thread that does not exist
 * there (the parent holds it across fork on purpose): start the child with a fresh one. */
void kcap_h5_lock_reset_in_child(void)
{
    pthread_once(&h5_once, h5_init);
    h5_init();
}
