/*
 * kcap_shadow.c — shadow mode (kcap_shadow.h): validate a candidate kernel on live traffic.
 *
 * For each selected call that capture recorded (inputs and the production outputs, on the
 * calling thread), the candidate's entry point of the same name runs on a copy of the args
 * struct whose output pointers are buffers of ours (poisoned, the views' full spans, so the
 * candidate never writes service memory), with a workspace of ours. Its outputs are
 * recorded through the same description and compared with the production ones by replay's
 * kcap_compare (one definition of "correct"), with replay's tolerances or those configured
 * (KCAP_SHADOW_ATOL..., or given with a swap: kcap_shadow_tol). A disagreement is kept — at most
 * KCAP_SHADOW_PER_SHAPE snapshots per shape, so one systematic bug does not fill the disk —
 * and every comparison is summarised in DIR/shadow-<run>-p<pid>.json at exit. A candidate
 * that returns an error status is switched off with one log line; the service never sees it.
 */
#include "kcap_shadow.h"
#include "kcap_shadow_load.h"
#include "kcap_shadow_summary.h"
#include "kcap_gpu.h"
#include "kcap_log.h"
#include "kcap_meta.h"
#include "kcap_names.h"
#include "kcap_queue.h"
#include "kcap_state.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kcap_compare.h" /* replay/: the rules every verdict uses */

static char g_dir[PATH_MAX]; /* where the summary goes (set by kcap_shadow_summary) */

static struct {
    void *handle;
    unsigned long long swaps;
    char path[PATH_MAX], hash[40];
    atomic_int on;
    kcap_call_fn fn[KCAP_NCALLS];
    size_t (*ws_fn[KCAP_NCALLS])(const void *);
    pthread_mutex_t lock; /* the summary below */
    unsigned long long compared, divergent, kept, not_judged, capped, lost;
    double worst_abs;
    int slow_streak;
    char worst_where[160];
    char prod_hash[80];
    int nshapes;
    kcap_shadow_shape shapes[KCAP_SHADOW_SHAPES];
    kcap_shadow_shape other; /* the shapes past the table, summarised and capped together */
} g = {.lock = PTHREAD_MUTEX_INITIALIZER};

static atomic_int g_log_dev, g_log_shapes, g_log_summary;
/* one summary written at a time (the summary thread, a kcap shadow request, exit), from copy
   to rename, so the file on disk is always the latest copy; never taken by calling threads */
static pthread_mutex_t g_summary_lock = PTHREAD_MUTEX_INITIALIZER;

/* The tolerances in force: an immutable set, published by pointer so kcap_shadow_tol is one
 * atomic load on any thread. A swap publishes a new set (with its candidate, under g.lock);
 * old sets are never freed (a reader may hold one) — a swap is a human act, 32 bytes each. */
typedef struct {
    double v[KCAP_NTOL]; /* the KCAP_TOL_* order (kcap_config.h): bf16/fp16, then fp32 */
} kcap_shadow_tols;
static const kcap_shadow_tols g_tol_default = {{KCAP_CMP_ATOL_BF16, KCAP_CMP_RTOL_BF16,
                                                KCAP_CMP_ATOL_F32, KCAP_CMP_RTOL_F32}};
static _Atomic(const kcap_shadow_tols *) g_tol = &g_tol_default;

kcap_cmp_tol kcap_shadow_tol(kcap_dtype dt)
{
    const double *v = atomic_load_explicit(&g_tol, memory_order_acquire)->v;
    if (dt == KCAP_DT_BF16 || dt == KCAP_DT_F16)
        return (kcap_cmp_tol){v[KCAP_TOL_ATOL], v[KCAP_TOL_RTOL]};
    if (dt == KCAP_DT_F32 || dt == KCAP_DT_F64)
        return (kcap_cmp_tol){v[KCAP_TOL_LSE_ATOL], v[KCAP_TOL_LSE_RTOL]};
    return kcap_cmp_default_tol(dt); /* integers: exact */
}

/* "atol=A rtol=R lse_atol=A lse_rtol=R" (the request's terms), for replies and logs. */
static const char *tols_text(char *b, size_t n, const kcap_shadow_tols *t)
{
    snprintf(b, n, "atol=%.9g rtol=%.9g lse_atol=%.9g lse_rtol=%.9g", t->v[0], t->v[1],
             t->v[2], t->v[3]);
    return b;
}

static int device_sink(kcap_slot *sl, const void *args, int verdict, kcap_snapshot *snap,
                       kcap_snapshot *cand, uint64_t seq, const kcap_gpu_shadow_times *t);

int kcap_shadow_on(void) { return atomic_load(&g.on); }

/* The summary's counters start over (a new candidate, a forked child); under g.lock or
 * with no other thread. */
static void counts_reset(void)
{
    g.compared = g.divergent = g.kept = g.capped = g.not_judged = g.lost = 0;
    g.worst_abs = 0;
    g.slow_streak = 0;
    g.worst_where[0] = '\0';
    g.nshapes = 0;
    memset(&g.other, 0, sizeof g.other);
}

/* Make `c` the candidate, judged with tolerances `t`; the summary starts over (it describes
 * one candidate). -1 (nothing changed, why said) when there is no memory for the set. */
static int install(const char *cand, const kcap_candidate *c, const kcap_shadow_tols *t,
                   char *why, size_t n)
{
    kcap_shadow_tols *nt = malloc(sizeof *nt);
    if (!nt)
        return snprintf(why, n, "out of memory"), -1;
    *nt = *t;
    pthread_mutex_lock(&g.lock);
    atomic_store_explicit(&g_tol, nt, memory_order_release);
    g.handle = c->handle;
    snprintf(g.hash, sizeof g.hash, "%s", c->hash);
    memcpy(g.fn, c->fn, sizeof g.fn);
    memcpy(g.ws_fn, c->ws_fn, sizeof g.ws_fn);
    snprintf(g.path, sizeof g.path, "%s", cand);
    counts_reset();
    g.swaps++;
    atomic_store(&g.on, 1);
    pthread_mutex_unlock(&g.lock);
    return 0;
}

#define KCAP_SHADOW_SUMMARY_S 3 /* the summary file is rewritten this often while it changes */

/* A thread of ours: the summary on disk follows the live counters (the calling threads
 * never write files). */
static void *summary_main(void *arg)
{
    (void)arg;
    unsigned long long seen = ~0ull;
    for (;;) {
        sleep(KCAP_SHADOW_SUMMARY_S);
        pthread_mutex_lock(&g.lock);
        unsigned long long now = g.compared + g.not_judged + (g.swaps << 40);
        pthread_mutex_unlock(&g.lock);
        if (now != seen)
            kcap_shadow_summary(g_dir);
        seen = now;
    }
    return NULL;
}

static void candidate_failed(const kcap_call_desc *d, int status, uint64_t seq, unsigned long long swaps);

int kcap_shadow_init(const char *cand, const char *dir)
{
    kcap_candidate c;
    char why[PATH_MAX + 200], tt[160];
    kcap_shadow_tols tol;
    memcpy(tol.v, kcap_cfg()->shadow_tol, sizeof tol.v); /* KCAP_SHADOW_ATOL... */
    if (kcap_candidate_load(cand, NULL, &c, why, sizeof why) || install(cand, &c, &tol, why, sizeof why)) {
        kcap_log(KCAP_LOG_WARN, "KCAP_SHADOW: %s; shadow mode off", why);
        return -1;
    }
    kcap_gpu_set_shadow_sink(device_sink);
    kcap_gpu_set_shadow_tol(kcap_shadow_tol);
    kcap_gpu_set_shadow_fail(candidate_failed);
    kcap_log(KCAP_LOG_INFO, "shadow mode: candidate %s (%s), %s", cand, c.hash,
             tols_text(tt, sizeof tt, &tol));
    snprintf(g_dir, sizeof g_dir, "%s", dir);
    kcap_shadow_summary_start();
    return 0;
}

void kcap_shadow_summary_start(void)
{
    pthread_t t;
    pthread_attr_t at;
    sigset_t all, old;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* the host's signals are not ours to take */
    if (pthread_create(&t, &at, summary_main, NULL))
        kcap_log(KCAP_LOG_WARN, "shadow mode: no summary thread; the summary is written at exit");
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&at);
}

void kcap_shadow_atfork_child(void)
{
    /* the lock may have been held by another thread of the parent; the child's summary
       (its own file, named by its pid) counts its own calls only */
    pthread_mutex_init(&g.lock, NULL);
    pthread_mutex_init(&g_summary_lock, NULL);
    counts_reset();
}

int kcap_shadow_request(const char *cmd, char *reply, size_t n)
{
    char why[PATH_MAX + 200], tt[160];
    if (!strncmp(cmd, "shadow ", 7)) {
        /* "shadow [hash=xxh64:H] [atol=A] [rtol=R] [lse_atol=A] [lse_rtol=R] /abs/CAND.so":
         * the path last (it may hold spaces); a tolerance left out is the configured value,
         * so the plain "shadow /abs/CAND.so" of older clients means the configured ones; the
         * hash, of the bytes kcap shadow checked, must be the file's when it is loaded */
        kcap_candidate c;
        kcap_shadow_tols t;
        const char *cand, *terms = cmd + 7;
        char want[40] = "";
        if (!strncmp(terms, "hash=", 5)) {
            size_t hl = strcspn(terms + 5, " ");
            if (hl && hl < sizeof want && terms[5 + hl] == ' ')
                snprintf(want, sizeof want, "%.*s", (int)hl, terms + 5);
            terms += 5 + hl + (terms[5 + hl] == ' ');
        }
        memcpy(t.v, kcap_cfg()->shadow_tol, sizeof t.v);
        if (!strncmp(cmd + 7, "hash=", 5) && !want[0]) {
            snprintf(reply, n, "error malformed shadow request at '%.60s' (hash=xxh64:...)\n", cmd + 7);
            return -1;
        }
        if (kcap_parse_tol_terms(terms, t.v, &cand) || *cand != '/') {
            snprintf(reply, n, "error malformed shadow request at '%.60s' (tolerance terms "
                     "atol=, rtol=, lse_atol=, lse_rtol= with a non-negative finite number, "
                     "then an absolute candidate path)\n", cand);
            return -1;
        }
        if (kcap_candidate_load(cand, want[0] ? want : NULL, &c, why, sizeof why) ||
            install(cand, &c, &t, why, sizeof why)) {
            snprintf(reply, n, "error %s; the candidate is unchanged\n", why);
            return -1;
        }
        kcap_log(KCAP_LOG_INFO, "shadow mode: candidate now %s (%s), %s", cand, c.hash,
                 tols_text(tt, sizeof tt, &t));
        snprintf(reply, n, "ok shadow candidate %s (%s) %s\n", cand, c.hash,
                 tols_text(tt, sizeof tt, &t));
    } else if (!strcmp(cmd, "shadow-off")) {
        atomic_store(&g.on, 0);
        kcap_log(KCAP_LOG_INFO, "shadow mode off (kcap shadow --off)");
        snprintf(reply, n, "ok shadow mode off\n");
    } else if (!strcmp(cmd, "shadow-status")) {
        pthread_mutex_lock(&g.lock);
        snprintf(reply, n, "ok shadow %s candidate %s (%s): compared=%llu divergent=%llu "
                 "kept=%llu capped=%llu lost=%llu not_judged=%llu %s worst_abs=%g%s%s\n",
                 atomic_load(&g.on) ? "on" : "off", g.path[0] ? g.path : "-", g.hash,
                 g.compared, g.divergent, g.kept, g.capped, g.lost, g.not_judged,
                 tols_text(tt, sizeof tt, atomic_load(&g_tol)), g.worst_abs,
                 g.worst_where[0] ? " at " : "", g.worst_where);
        pthread_mutex_unlock(&g.lock);
    } else {
        snprintf(reply, n, "error malformed shadow request '%.60s'\n", cmd);
        return -1;
    }
    if (g_dir[0])
        kcap_shadow_summary(g_dir);
    return 0;
}

void kcap_shadow_skip_device(void)
{
    kcap_log_once(&g_log_dev, KCAP_LOG_WARN, "shadow mode: calls inside CUDA graph capture run "
                  "as captured, not compared (counted as not_judged): KCAP_SHADOW_GRAPHS=0 or the "
                  "synchronous GPU mode");
}

static long long scalar(const kcap_snapshot *s, const char *name)
{
    const kcap_scalar *sc = kcap_snapshot_scalar(s, name);
    return sc && sc->type == KCAP_SC_INT ? sc->i : -1;
}

/* The shape class of a call if there is one (caller holds g.lock). */
static kcap_shadow_shape *shape_find(int call, const kcap_snapshot *s)
{
    long long bs = scalar(s, "bs"), q = scalar(s, "q_len"), h = scalar(s, "num_heads");
    for (int i = 0; i < g.nshapes; i++)
        if (g.shapes[i].call == call && g.shapes[i].bs == bs && g.shapes[i].q_len == q &&
            g.shapes[i].heads == h)
            return &g.shapes[i];
    return g.nshapes == KCAP_SHADOW_SHAPES ? &g.other : NULL;
}

/* The shape class of a call, created on first sight; past the table, the one class of all
 * further shapes (so the per-shape cap still bounds what they keep). */
static kcap_shadow_shape *shape_of(int call, const kcap_snapshot *s)
{
    kcap_shadow_shape *sh = shape_find(call, s);
    if (sh == &g.other)
        kcap_log_once(&g_log_shapes, KCAP_LOG_WARN, "shadow mode: more than %d shapes; "
                      "further ones are summarised together (other_shapes), and at most "
                      "KCAP_SHADOW_PER_SHAPE=%ld of their divergences kept", KCAP_SHADOW_SHAPES,
                      kcap_cfg()->shadow_per_shape);
    if (sh)
        return sh;
    sh = &g.shapes[g.nshapes++];
    memset(sh, 0, sizeof *sh);
    sh->call = call, sh->bs = scalar(s, "bs"), sh->q_len = scalar(s, "q_len"), sh->heads = scalar(s, "num_heads");
    return sh;
}

static void count_not_judged(void)
{
    pthread_mutex_lock(&g.lock);
    g.not_judged++;
    pthread_mutex_unlock(&g.lock);
}

/* A kept divergence that no file will hold (caller holds g.lock): lost, not kept. */
static void unkeep(kcap_shadow_shape *sh)
{
    if (sh && sh->kept > 0 && g.kept > 0)
        sh->kept--, g.kept--, g.lost++;
}

/* The candidate of this call as of now: 0 and its entry point, workspace bytes and the
 * swap count it belongs to; -1 (counted as not judged) when off, missing or refusing. */
static int candidate_of(kcap_slot *sl, const void *args, kcap_call_fn *fn, size_t *wsb,
                        unsigned long long *swaps, uint64_t *ws_ns, size_t (**ws_later)(const void *))
{
    pthread_mutex_lock(&g.lock); /* a swap replaces both together */
    *fn = g.fn[sl->call];
    size_t (*ws_fn)(const void *) = g.ws_fn[sl->call];
    *swaps = g.swaps;
    pthread_mutex_unlock(&g.lock);
    if (ws_later) { /* the caller asks the size itself, on args of its own (the CPU path) */
        *ws_later = ws_fn, *wsb = 0, *ws_ns = 0;
        if (atomic_load(&g.on) && *fn)
            return 0;
        count_not_judged();
        return -1;
    }
    /* the candidate's workspace function sees a copy of the args (it must not reach the
       service's own struct), and its time counts as the candidate's */
    unsigned char copy[1024];
    int fits = sl->desc->args_size <= sizeof copy;
    uint64_t t0 = kcap_now_ns();
    if (fits)
        memcpy(copy, args, sl->desc->args_size);
    *wsb = *fn && ws_fn && fits ? ws_fn(copy) : 0;
    *ws_ns = kcap_now_ns() - t0;
    /* a workspace past 1 TiB is no size any allocation meets (and would wrap when rounded) */
    if (atomic_load(&g.on) && *fn && fits && *wsb != (size_t)-1 && *wsb <= ((size_t)1 << 40))
        return 0;
    /* off, no such entry point in the candidate, or sizes it rejects: not judged */
    count_not_judged();
    return -1;
}

/* A candidate slower than KCAP_SHADOW_MAX_SLOWDOWN x the production call (plus a slack for
 * calls of a few microseconds, where launch noise dominates) on this many judged calls in a
 * row is switched off: shadow mode must not become the service's bottleneck. */
#define KCAP_SHADOW_SLOW_CALLS 3
/* A KV pool of the candidate's copy larger than this is rebuilt compact (the rows it reads,
 * remapped, as replay does with a pool too big for memory): a full copy of a large pool per
 * call cost the host ~190 ms at 254 MiB */
#define KCAP_SHADOW_POOL_BYTES ((size_t)16 << 20)
#define KCAP_SHADOW_SLACK_US 20.0

static void slow_check(const kcap_call_desc *d, double prod_us, double cand_us, uint64_t seq,
                       unsigned long long swaps)
{
    const long m = kcap_cfg()->shadow_max_slowdown;
    if (!m || prod_us < 0 || cand_us < 0)
        return;
    int slow = cand_us > (double)m * prod_us + KCAP_SHADOW_SLACK_US;
    pthread_mutex_lock(&g.lock);
    if (g.swaps != swaps) { /* a call of a candidate replaced since: not this one's time */
        pthread_mutex_unlock(&g.lock);
        return;
    }
    g.slow_streak = slow ? g.slow_streak + 1 : 0;
    int off = g.slow_streak >= KCAP_SHADOW_SLOW_CALLS;
    pthread_mutex_unlock(&g.lock);
    if (off && atomic_exchange(&g.on, 0))
        kcap_log(KCAP_LOG_WARN, "shadow mode off: the candidate %s took %.1f us against the "
                 "production call's %.1f us on %s call %llu, the %d-th call in a row over "
                 "KCAP_SHADOW_MAX_SLOWDOWN=%ld times production (the service is unaffected)",
                 g.path, cand_us, prod_us, d->name, (unsigned long long)seq,
                 KCAP_SHADOW_SLOW_CALLS, m);
}

static void candidate_failed(const kcap_call_desc *d, int status, uint64_t seq, unsigned long long swaps)
{
    pthread_mutex_lock(&g.lock);
    int current = g.swaps == swaps; /* a replaced candidate's late error says nothing of this one */
    pthread_mutex_unlock(&g.lock);
    if (current && atomic_exchange(&g.on, 0))
        kcap_log(KCAP_LOG_WARN, "shadow mode off: the candidate %s returned status %d on %s "
                 "call %llu, which the production library ran (the service is unaffected)",
                 g.path, status, d->name, (unsigned long long)seq);
}

/* Production outputs (snap) against the candidate's (cs, may be NULL: the device compare
 * agreed) by replay's rules; the summary counts it under the candidate of `swaps`. 1 when
 * divergent and kept: snap then also holds cs's tensors under /candidate. */
static int settle(kcap_slot *sl, kcap_snapshot *snap, const kcap_snapshot *cs, uint64_t seq,
                  unsigned long long swaps)
{
    const kcap_call_desc *d = sl->desc;
    double worst = 0;
    char where[160] = "";
    int divergent = 0, keep = 0;
    for (int i = 0; cs && i < cs->ntensors; i++) {
        const kcap_tensor *c = &cs->tensors[i];
        const kcap_tensor *p = kcap_snapshot_tensor(snap, c->name, KCAP_DIR_OUT);
        if (!p || p->nbytes != c->nbytes)
            continue;
        kcap_cmp_tol tol = kcap_shadow_tol(c->dtype);
        kcap_cmp_result r;
        kcap_compare(c->dtype, c->data, p->data, c->nbytes / kcap_dtype_size(c->dtype), &tol, &r);
        if (r.pass)
            continue;
        divergent = 1;
        double e = r.nonfinite_mismatch ? INFINITY : r.max_abs;
        if (e >= worst) {
            worst = e;
            int64_t per, loc[4];
            if (r.worst >= 0 && kcap_call_tokens_per_request(d, snap, c->name, &per) &&
                !kcap_cmp_locate(r.worst, c->ndim, c->shape, per, loc))
                snprintf(where, sizeof where, "%s call %llu: %s element %lld (request %lld, token "
                         "%lld, head %lld, channel %lld), got %g want %g", d->name,
                         (unsigned long long)seq, c->name, (long long)r.worst, (long long)loc[0],
                         (long long)loc[1], (long long)loc[2], (long long)loc[3], r.worst_got,
                         r.worst_want);
            else
                snprintf(where, sizeof where, "%s call %llu: %s element %lld", d->name,
                         (unsigned long long)seq, c->name, (long long)r.worst);
        }
    }
    pthread_mutex_lock(&g.lock);
    if (g.swaps != swaps) { /* judged by a candidate replaced meanwhile: not counted */
        pthread_mutex_unlock(&g.lock);
        return 0;
    }
    kcap_shadow_shape *sh = shape_of(sl->call, snap);
    g.compared++;
    sh->compared++;
    if (!g.prod_hash[0] && sl->lib_hash[0])
        snprintf(g.prod_hash, sizeof g.prod_hash, "%s", sl->lib_hash);
    if (divergent) {
        g.divergent++;
        sh->divergent++;
        if (worst > sh->worst_abs)
            sh->worst_abs = worst;
        if (worst >= g.worst_abs) {
            g.worst_abs = worst;
            snprintf(g.worst_where, sizeof g.worst_where, "%s", where);
        }
        const long per_shape = kcap_cfg()->shadow_per_shape;
        keep = (long)sh->kept < per_shape;
        if (keep)
            sh->kept++, g.kept++;
        else
            g.capped++;
    }
    pthread_mutex_unlock(&g.lock);
    /* a kept divergence carries the candidate's outputs beside the production ones */
    for (int i = 0; keep && i < cs->ntensors; i++) {
        const kcap_tensor *c = &cs->tensors[i];
        void *dst = NULL;
        if (kcap_snapshot_add_tensor(snap, c->name, KCAP_DIR_CAND, c->dtype, c->ndim, c->shape,
                                     NULL, NULL, &dst) || !dst) {
            keep = 0; /* no memory for them: counted lost, not kept */
            kcap_shadow_keep_failed(sl, snap, swaps);
            break;
        }
        memcpy(dst, c->data, c->nbytes);
    }
    return keep;
}

int kcap_shadow_judge(kcap_slot *sl, const void *args, kcap_snapshot *snap, uint64_t seq,
                      uint64_t prod_ns, unsigned long long *gen)
{
    const kcap_call_desc *d = sl->desc;
    kcap_call_fn fn;
    size_t wsb;
    unsigned long long swaps;
    uint64_t ws_ns;
    size_t (*ws_fn)(const void *) = NULL;
    if (candidate_of(sl, args, &fn, &wsb, &swaps, &ws_ns, &ws_fn))
        return 0;
    *gen = swaps;
    int keep = 0;
    /* the candidate's call rebuilt from the snapshot (kcap_call_rebuild): its inputs are
       kcap's copies of the service's (a candidate that writes its inputs cannot reach the
       service's memory), its outputs poisoned buffers of kcap's with the same strides.
       cargs: those args as kcap made them, read back after the call; run: the copy the
       candidate gets (what it changes there never reaches kcap's reading) */
    kcap_rebuilt rb;
    memset(&rb, 0, sizeof rb);
    unsigned char *cargs = malloc(2 * d->args_size), *run = cargs ? cargs + d->args_size : NULL;
    kcap_snapshot *cs = kcap_snapshot_create();
    kcap_error *err = calloc(1, sizeof *err);
    void *ws = NULL;
    int rc = cargs && cs && err ? 0 : -1;
    if (!rc && kcap_call_rebuild(d, snap, kcap_host_mem_ops(), KCAP_POOL_AUTO, KCAP_SHADOW_POOL_BYTES, &rb, err))
        rc = -1;
    if (!rc) { /* the workspace it asks for, on a copy of its own call (it sees no service memory) */
        memcpy(cargs, rb.args, d->args_size);
        memcpy(run, cargs, d->args_size);
        uint64_t w0 = kcap_now_ns();
        wsb = ws_fn ? ws_fn(run) : 0;
        ws_ns = kcap_now_ns() - w0;
        /* past 1 TiB no allocation meets it (and the rounding would wrap) */
        if (wsb == (size_t)-1 || wsb > ((size_t)1 << 40) || (wsb && !(ws = aligned_alloc(64, (wsb + 63) / 64 * 64))))
            rc = -1;
    }
    if (rc) /* sizes it rejects, or no memory for its copy of the call: not judged, counted */
        count_not_judged();
    if (!rc)
        memcpy(run, cargs, d->args_size);
    uint64_t t0 = kcap_now_ns();
    int status = rc ? 0 : fn(run, ws, wsb, NULL);
    uint64_t cand_ns = kcap_now_ns() - t0 + ws_ns;
    if (!rc && status == KCAP_CALL_OK)
        slow_check(d, prod_ns * 1e-3, cand_ns * 1e-3, seq, swaps);
    if (!rc && status != KCAP_CALL_OK) {
        candidate_failed(d, status, seq, swaps);
        rc = -1;
    }
    if (!rc && (kcap_call_record_scalars(d, cargs, cs, err) ||
                kcap_call_record(d, cargs, KCAP_ARG_OUT, kcap_host_mem_ops(), cs, err))) {
        rc = -1; /* its outputs could not be read back (memory): not judged */
        count_not_judged();
    }
    if (!rc)
        keep = settle(sl, snap, cs, seq, swaps);
    kcap_rebuilt_free(&rb, kcap_host_mem_ops());
    free(cargs);
    free(ws);
    free(err);
    kcap_snapshot_free(cs);
    return keep;
}

void kcap_shadow_not_judged(void)
{
    if (atomic_load(&g.on))
        count_not_judged();
}

void kcap_shadow_keep_failed(kcap_slot *sl, const kcap_snapshot *snap, unsigned long long gen)
{
    pthread_mutex_lock(&g.lock);
    if (g.swaps == gen) /* (judged by a candidate replaced since: the counts are another's) */
        unkeep(shape_find(sl->call, snap));
    pthread_mutex_unlock(&g.lock);
}

/* ---- device calls (kcap_gpu_shadow.c runs them, the drainer reports back) ---- */

int kcap_shadow_device(kcap_slot *sl, const void *a, void *ws, size_t wsb, void *stream,
                       uint64_t seq, int *status)
{
    kcap_call_fn fn;
    size_t cwsb;
    unsigned long long swaps;
    uint64_t ws_ns;
    if (candidate_of(sl, a, &fn, &cwsb, &swaps, &ws_ns, NULL))
        return 1; /* counted as not judged; the caller captures it as usual */
    int failed = 0;
    int h = kcap_gpu_shadow(sl, a, ws, wsb, stream, seq, fn, cwsb, swaps, status, &failed);
    if (failed)
        candidate_failed(sl->desc, failed, seq, swaps);
    if (h == 1 || (h < 0 && *status == KCAP_CALL_OK && !failed)) { /* not a call the device
        path shadows (sizes, graph, sync mode), or dropped before its candidate (ring, sites) */
        count_not_judged();
    }
    return h;
}

/* The drainer's report of a device call (kcap_gpu_shadow_sink). */
static int device_sink(kcap_slot *sl, const void *args, int verdict, kcap_snapshot *snap,
                       kcap_snapshot *cand, uint64_t seq, const kcap_gpu_shadow_times *t)
{
    if (verdict == KCAP_SHADOW_UNKEPT) { /* kept, then not queued: no file holds it (counted
        whether or not the candidate is still on) */
        kcap_shadow_keep_failed(sl, snap, t->cand_gen);
        return 0;
    }
    if (!atomic_load(&g.on))
        return 0; /* switched off (kcap shadow --off, slow, failing): its results are not counted */
    if (verdict == KCAP_SHADOW_UNJUDGED) { /* let go before its candidate ran: no verdict */
        count_not_judged();
        return 0;
    }
    slow_check(sl->desc, t->prod_us, t->cand_us, seq, t->cand_gen);
    /* the candidate the call (or its graph) was launched with: a result of one replaced
       since is not counted (settle), not even as agreed */
    unsigned long long swaps = t->cand_gen;
    if (verdict == KCAP_SHADOW_DIVERGED)
        return settle(sl, snap, cand, seq, swaps);
    /* agreed, or divergent and lost: counted under its shape (the scalars give it) */
    kcap_snapshot *sc = kcap_snapshot_create();
    kcap_error *err = calloc(1, sizeof *err);
    if (sc && err && !kcap_call_record_scalars(sl->desc, args, sc, err))
        settle(sl, sc, NULL, seq, swaps);
    if (verdict == KCAP_SHADOW_LOST) {
        pthread_mutex_lock(&g.lock);
        if (g.swaps == swaps)
            g.divergent++, g.lost++;
        pthread_mutex_unlock(&g.lock);
    }
    kcap_snapshot_free(sc);
    free(err);
    return 0;
}

/* The summary file: a copy of the state under the lock, written after it (kcap_shadow_summary.c). */
void kcap_shadow_summary(const char *dir)
{
    if (!g.handle)
        return;
    kcap_shadow_view *v = calloc(1, sizeof *v);
    if (!v)
        return;
    pthread_mutex_lock(&g_summary_lock); /* also over g_dir, which the other writers read */
    if (dir != g_dir)
        snprintf(g_dir, sizeof g_dir, "%s", dir);
    char path[PATH_MAX];
    int pn = snprintf(path, sizeof path, "%s/shadow-%s-p%ld.json", g_dir, kcap_run_id(), (long)getpid());
    if (pn < 0 || pn >= (int)sizeof path) { /* a directory path at PATH_MAX: no summary file */
        pthread_mutex_unlock(&g_summary_lock);
        free(v);
        return;
    }
    pthread_mutex_lock(&g.lock); /* a copy under the lock; the file work after it */
    snprintf(v->path, sizeof v->path, "%s", g.path);
    snprintf(v->hash, sizeof v->hash, "%s", g.hash);
    snprintf(v->prod_hash, sizeof v->prod_hash, "%s", g.prod_hash);
    snprintf(v->worst_where, sizeof v->worst_where, "%s", g.worst_where);
    v->on = atomic_load(&g.on);
    v->swaps = g.swaps - 1;
    memcpy(v->tol, atomic_load(&g_tol)->v, sizeof v->tol);
    v->compared = g.compared, v->divergent = g.divergent, v->kept = g.kept;
    v->capped = g.capped, v->lost = g.lost, v->not_judged = g.not_judged;
    v->worst_abs = g.worst_abs;
    v->nshapes = g.nshapes;
    memcpy(v->shapes, g.shapes, sizeof g.shapes[0] * (size_t)g.nshapes);
    v->other = g.other;
    pthread_mutex_unlock(&g.lock);
    if (kcap_shadow_summary_write(path, v))
        kcap_log_once(&g_log_summary, KCAP_LOG_WARN, "shadow mode: cannot write the summary %s "
                      "(%s); the counts stay readable with kcap shadow PID --status", path,
                      strerror(errno));
    pthread_mutex_unlock(&g_summary_lock);
    free(v);
}
