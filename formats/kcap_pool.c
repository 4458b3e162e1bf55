/*
 * kcap_pool.c — a small fixed worker pool (FIFO jobs) plus completion counters, used by
 * the writer to shuffle+compress chunks and by the reader to decompress them and hash
 * file blocks while the calling thread alone talks to libhdf5.
 */
#include "kcap_fmt_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct job {
    kcap_job_fn fn;
    void *arg;
    struct job *next;
} job;

struct kcap_pool {
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    job *head, *tail;
    int stop, n;
    pthread_t *threads;
};

typedef struct {
    kcap_pool *p;
    int idx;
} worker_arg;

static void *worker(void *a)
{
    worker_arg wa = *(worker_arg *)a;
    free(a);
    kcap_pool *p = wa.p;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->head && !p->stop)
            pthread_cond_wait(&p->work, &p->mu);
        if (!p->head)
            break;
        job *j = p->head;
        p->head = j->next;
        if (!p->head)
            p->tail = NULL;
        pthread_mutex_unlock(&p->mu);
        j->fn(j->arg, wa.idx);
        free(j);
        pthread_mutex_lock(&p->mu);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int kcap_online_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 256 ? 256 : (int)n;
}

kcap_pool *kcap_pool_create(int nthreads)
{
    if (nthreads < 1)
        nthreads = 1;
    kcap_pool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->threads = calloc((size_t)nthreads, sizeof *p->threads);
    if (!p->threads) {
        free(p);
        return NULL;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->done, NULL);
    for (int i = 0; i < nthreads; i++) {
        worker_arg *wa = malloc(sizeof *wa);
        if (!wa)
            break;
        wa->p = p;
        wa->idx = i;
        if (pthread_create(&p->threads[i], NULL, worker, wa)) {
            free(wa);
            break;
        }
        p->n++;
    }
    if (!p->n) {
        kcap_pool_free(p);
        return NULL;
    }
    return p;
}

void kcap_pool_free(kcap_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n; i++)
        pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->work);
    pthread_cond_destroy(&p->done);
    free(p->threads);
    free(p);
}

int kcap_pool_threads(const kcap_pool *p) { return p ? p->n : 0; }

/* Without a pool, or when the queue node cannot be allocated, the job runs here and now
 * as worker kcap_pool_threads(p) (so per-worker scratch arrays have threads + 1 entries). */
int kcap_pool_submit(kcap_pool *p, kcap_job_fn fn, void *arg)
{
    job *j = p ? malloc(sizeof *j) : NULL;
    if (!j) {
        fn(arg, kcap_pool_threads(p));
        return 0;
    }
    j->fn = fn;
    j->arg = arg;
    j->next = NULL;
    pthread_mutex_lock(&p->mu);
    if (p->tail)
        p->tail->next = j;
    else
        p->head = j;
    p->tail = j;
    pthread_cond_signal(&p->work);
    pthread_mutex_unlock(&p->mu);
    return 0;
}

void kcap_pool_done(kcap_pool *p, volatile int64_t *counter)
{
    if (!p) {
        (*counter)++;
        return;
    }
    pthread_mutex_lock(&p->mu);
    (*counter)++;
    pthread_cond_broadcast(&p->done);
    pthread_mutex_unlock(&p->mu);
}

void kcap_pool_wait(kcap_pool *p, volatile int64_t *counter, int64_t target)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    while (*counter < target)
        pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
