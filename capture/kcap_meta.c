/*
 * kcap_meta.c — what a snapshot says about where it came from (time, host, pid, rank, the
 * library's path and hash), the library's own workspace-size function for the argument check,
 * and kcap_run_on_own_stack(), which runs the heavy one-off steps (initialisation, hashing a
 * library file) on a short-lived thread of ours.
 *
 * Why a thread of our own: the capture path runs on the host's calling thread, which may
 * have a 16 KiB stack (a 32 KiB-stack caller once died under capture). realpath,
 * directory scans and PATH_MAX buffers need more than the 4 KiB the capture path allows
 * itself, so they run once, on a thread with a default stack, and the caller waits for it
 * (once per process / per library). Nothing run there takes the dynamic loader's lock, which
 * the caller may hold (a verify call from a library constructor): dladdr stays on the caller.
 *
 * The workspace size: capture checks a call with the kernel library's own rules (the
 * description's checker) before reading anything, and those rules include the workspace
 * size only the library knows: kcap_lib_workspace_size() asks the library behind the
 * current call (its function looked up when the call was bound, by kcap_interpose.c), so
 * libkcap defines no kernel symbol it does not forward.
 */
#include "kcap_meta.h"
#include "kcap_log.h"
#include "kcap_state.h"
#include "kcap_tags.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kcap_version.h" /* common/ */

static pthread_mutex_t g_lib_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_rank = -1;

typedef size_t (*kcap_ws_fn)(const void *);
#define KCAP_NLIBS 32
static struct {
    _Atomic(kcap_call_fn) real;
    _Atomic(kcap_ws_fn) ws;
} g_libs[KCAP_NLIBS];
static _Thread_local kcap_ws_fn t_ws; /* the workspace function of the call being checked */

typedef struct {
    void (*fn)(void *);
    void *arg;
} kcap_job;

static void *kcap_job_main(void *p)
{
    kcap_job *j = p;
    j->fn(j->arg);
    return NULL;
}

int kcap_run_on_own_stack(void (*fn)(void *), void *arg)
{
    kcap_job j = {fn, arg};
    pthread_t t;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* the host's signals stay with its threads */
    int rc = pthread_create(&t, NULL, kcap_job_main, &j);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc)
        return -1;
    pthread_join(t, NULL);
    return 0;
}

/* ---- rank ---------------------------------------------------------------------------- */

void kcap_rank_init(void)
{
    static const char *const vars[] = {"KCAP_RANK", "RANK", "LOCAL_RANK", "TP_RANK",
                                       "SGLANG_TP_RANK", "OMPI_COMM_WORLD_RANK",
                                       "SLURM_PROCID", "PMI_RANK"};
    g_rank = -1;
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        uint64_t r;
        if (!v || !*v)
            continue;
        if (!kcap_parse_u64(v, &r) && r < 1000000) {
            g_rank = (int)r;
            return;
        }
        kcap_log(KCAP_LOG_WARN, "%s='%.40s' is not a rank (0..999999); ignored", vars[i], v);
    }
}

int kcap_rank(void) { return g_rank; }

/* ---- library identity + workspace function --------------------------------------------- */

typedef struct {
    kcap_slot *sl;
    const char *fname; /* dladdr's answer, taken on the calling thread */
    void *base;
} kcap_libq;

static void kcap_lib_identity_job(void *p)
{
    kcap_libq *q = p;
    kcap_slot *sl = q->sl;
    char path[PATH_MAX]; /* realpath needs PATH_MAX (FORTIFY aborts on less) */
    if (!realpath(q->fname, path))
        snprintf(path, sizeof path, "%s", q->fname);
    uint64_t h = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd >= 0 && !fstat(fd, &st) && st.st_size > 0) {
        /* mapped, not read into a buffer: page cache, not memory of ours */
        void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m != MAP_FAILED) {
            h = kcap_xxh64(m, (size_t)st.st_size, 0);
            munmap(m, (size_t)st.st_size);
        }
    }
    if (fd >= 0)
        close(fd);
    snprintf(sl->lib_path, sizeof sl->lib_path, "%.1023s", path);
    snprintf(sl->lib_hash, sizeof sl->lib_hash, "xxh64:%016llx", (unsigned long long)h);
    sl->lib_base = q->base;
}

/* The library's workspace function, found when its entry point was bound (kcap_interpose.c:
 * dlsym on the same handle, or RTLD_NEXT), so no lookup ever runs on the call path. */
void kcap_library_bind(kcap_call_fn real, void *ws_fn)
{
    pthread_mutex_lock(&g_lib_lock);
    for (int i = 0; i < KCAP_NLIBS; i++) {
        kcap_call_fn r = atomic_load(&g_libs[i].real);
        if (r == real)
            break;
        if (!r) {
            atomic_store(&g_libs[i].ws, (kcap_ws_fn)ws_fn);
            atomic_store(&g_libs[i].real, real);
            break;
        }
    }
    pthread_mutex_unlock(&g_lib_lock);
}

/* Select the library of this call for kcap_lib_workspace_size. A library bound without one
 * (or past the table) checks no workspace; every read stays fault-safe regardless. */
void kcap_call_library(kcap_call_fn real)
{
    t_ws = NULL;
    for (int i = 0; i < KCAP_NLIBS; i++) {
        kcap_call_fn r = atomic_load(&g_libs[i].real);
        if (r == real) {
            t_ws = atomic_load(&g_libs[i].ws);
            return;
        }
        if (!r)
            return;
    }
}

/* A library without the function needs no workspace. */
size_t kcap_lib_workspace_size(const void *a) { return t_ws ? t_ws(a) : 0; }

void kcap_fill_meta(kcap_slot *sl, kcap_meta *m, uint64_t seq)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char base[32];
    strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(m->time_utc, sizeof m->time_utc, "%.20s.%03dZ", base, (int)(ts.tv_nsec / 1000000));
    if (gethostname(m->host, sizeof m->host))
        snprintf(m->host, sizeof m->host, "unknown");
    m->host[sizeof m->host - 1] = '\0';
    m->pid = (int64_t)getpid();
    m->rank = kcap_rank();
    m->seq = seq;
    snprintf(m->kcap_version, sizeof m->kcap_version, "%s", KCAP_VERSION);
    if (!m->tags[0]) /* the GPU path brings the tags of the call's thread along */
        kcap_tags_text(m->tags, sizeof m->tags);
    if (!m->call[0])
        snprintf(m->call, sizeof m->call, "%s", sl->desc->name);
    pthread_mutex_lock(&g_lib_lock);
    Dl_info di;
    void *fn = (void *)atomic_load(&sl->real);
    /* dladdr runs here (it takes the loader's lock, which this thread may hold if it calls us
       from a library constructor); realpath and the hash, once per load address, on ours */
    int known = dladdr(fn, &di) && di.dli_fname;
    if (!known) {
        snprintf(sl->lib_path, sizeof sl->lib_path, "unknown");
        snprintf(sl->lib_hash, sizeof sl->lib_hash, "xxh64:0000000000000000");
    } else if (!atomic_load(&sl->lib_ready) || sl->lib_base != di.dli_fbase) {
        kcap_libq q = {sl, di.dli_fname, di.dli_fbase};
        if (kcap_run_on_own_stack(kcap_lib_identity_job, &q)) {
            snprintf(sl->lib_path, sizeof sl->lib_path, "unknown");
            snprintf(sl->lib_hash, sizeof sl->lib_hash, "xxh64:0000000000000000");
        } else {
            atomic_store(&sl->lib_ready, 1);
        }
    }
    snprintf(m->lib_path, sizeof m->lib_path, "%s", sl->lib_path);
    snprintf(m->lib_hash, sizeof m->lib_hash, "%s", sl->lib_hash);
    pthread_mutex_unlock(&g_lib_lock);
    snprintf(m->device_name, sizeof m->device_name, "cpu");
}

/* held by another thread at fork (hashing a library file): never released in the child */
void kcap_meta_atfork_child(void) { pthread_mutex_init(&g_lib_lock, NULL); }
