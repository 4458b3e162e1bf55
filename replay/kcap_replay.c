/*
 * kcap_replay.c — the replay engine (see kcap_replay.h).
 *
 * One case: read and validate the snapshot, check that the library implements the call at
 * the snapshot's ABI version, run the independent reference first (so nothing the kernel
 * under test does can touch its inputs), then rebuild the inputs again for the kernel under
 * test, run it, fetch its outputs, compare. Each side gets its own rebuild in its own
 * memory (host for a CPU library, device for a CUDA one) through kcap_call_rebuild, with
 * outputs poisoned (NaN) so an element the kernel fails to write is caught.
 */
#include "kcap_replay.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kcap_bench.h"
#include "kcap_kernlib.h"
#include "kcap_saveout.h"

struct kcap_replayer {
    kcap_replay_opts o;
    kcap_kernlib *kern;
    kcap_kernlib *ref;   /* NULL: no reference, or the kernel library itself (ref_is_kern) */
    int ref_is_kern;
    const char *ref_name;
    char ref_path[4096];
    kcap_dev *dev;       /* borrowed from the caller; NULL while no CUDA library is loaded */
    kcap_writer *writer; /* --save-outputs, created on first use */
    char **saved;        /* base names written this run: two cases must not share one */
    int nsaved, capsaved;
};

void kcap_replay_opts_default(kcap_replay_opts *o)
{
    memset(o, 0, sizeof *o);
    o->ref = KCAP_REF_AUTO;
    o->pool = KCAP_POOL_AUTO;
    o->tol_half.atol = KCAP_CMP_ATOL_BF16;
    o->tol_half.rtol = KCAP_CMP_RTOL_BF16;
    o->tol_f32.atol = KCAP_CMP_ATOL_F32;
    o->tol_f32.rtol = KCAP_CMP_RTOL_F32;
    o->iters = 20;
    o->warmup = 3;
    o->build_dir = "build";
}

static int need_dev(kcap_replayer *r, kcap_dev **dev, const char *lib, kcap_error *err)
{
    if (!*dev) {
        int rc = kcap_dev_open(r->o.device, dev, err);
        if (rc) {
            kcap_error_prefix(err, "%s is a CUDA library but it cannot run here", lib);
            return rc;
        }
    }
    r->dev = *dev;
    return KCAP_OK;
}

int kcap_replayer_create(const kcap_replay_opts *o, kcap_dev **dev, kcap_replayer **out,
                         kcap_error *err)
{
    *out = NULL;
    kcap_replayer *r = calloc(1, sizeof *r);
    if (!r)
        return kcap_error_set(err, KCAP_ERR_NOMEM, "out of memory");
    r->o = *o;
    int rc = kcap_kernlib_open(o->kernel_path, &r->kern, err);
    if (!rc && kcap_kernlib_is_cuda(r->kern))
        rc = need_dev(r, dev, o->kernel_path, err);
    if (rc)
        goto fail;

    kcap_ref_mode mode = o->ref;
    if (mode == KCAP_REF_AUTO)
        mode = kcap_kernlib_is_cuda(r->kern) ? KCAP_REF_GPU : KCAP_REF_CPU;
    r->ref_name = mode == KCAP_REF_NONE ? "none" : mode == KCAP_REF_CPU ? "cpu" : "gpu";
    if (mode == KCAP_REF_GPU && kcap_kernlib_is_cuda(r->kern) && !o->ref_lib) {
        r->ref_is_kern = 1; /* the CUDA library's own plain reference kernel */
        snprintf(r->ref_path, sizeof r->ref_path, "%s", o->kernel_path);
    } else if (mode != KCAP_REF_NONE) {
        if (o->ref_lib)
            snprintf(r->ref_path, sizeof r->ref_path, "%s", o->ref_lib);
        else
            snprintf(r->ref_path, sizeof r->ref_path, "%s/lib/%s", o->build_dir,
                     mode == KCAP_REF_CPU ? "libverify_attn_cpu.so" : "libverify_attn.so");
        rc = kcap_kernlib_open(r->ref_path, &r->ref, err);
        if (rc) {
            kcap_error_prefix(err, "reference (--ref %s)", r->ref_name);
            goto fail;
        }
        int want_cuda = mode == KCAP_REF_GPU;
        if (kcap_kernlib_is_cuda(r->ref) != want_cuda) {
            rc = kcap_error_set(err, KCAP_ERR_LIBRARY,
                                "reference library %s is a %s library, but --ref %s needs a %s "
                                "one",
                                r->ref_path, kcap_kernlib_backend(r->ref), r->ref_name,
                                want_cuda ? "cuda" : "cpu");
            goto fail;
        }
        if (want_cuda && (rc = need_dev(r, dev, r->ref_path, err)))
            goto fail;
    }
    *out = r;
    return KCAP_OK;
fail:
    kcap_replayer_free(r);
    return rc;
}

void kcap_replayer_free(kcap_replayer *r)
{
    if (!r)
        return;
    kcap_kernlib_free(r->ref);
    kcap_kernlib_free(r->kern);
    kcap_writer_free(r->writer);
    for (int i = 0; i < r->nsaved; i++)
        free(r->saved[i]);
    free(r->saved);
    free(r);
}

const char *kcap_replayer_backend(const kcap_replayer *r) { return kcap_kernlib_backend(r->kern); }
const char *kcap_replayer_ref_name(const kcap_replayer *r) { return r->ref_name; }
const char *kcap_replayer_ref_path(const kcap_replayer *r) { return r->ref_path; }
const char *kcap_replayer_kernel_hash(const kcap_replayer *r) { return kcap_kernlib_hash(r->kern); }

/* --save-outputs keeps one file per base name: a second case with the same name (from
 * another directory) would silently replace the first one's outputs. */
static int claim_save_name(kcap_replayer *r, const char *name, kcap_error *err)
{
    for (int i = 0; i < r->nsaved; i++)
        if (!strcmp(r->saved[i], name))
            return kcap_error_set(err, KCAP_ERR_ARG,
                                  "--save-outputs %s: another snapshot named %s was saved in "
                                  "this run already (replay the folders separately)",
                                  r->o.save_dir, name);
    if (r->nsaved == r->capsaved) {
        int nc = r->capsaved ? 2 * r->capsaved : 64;
        char **p = realloc(r->saved, (size_t)nc * sizeof *p);
        if (!p)
            return kcap_error_set(err, KCAP_ERR_NOMEM, "out of memory");
        r->saved = p;
        r->capsaved = nc;
    }
    if (!(r->saved[r->nsaved] = strdup(name)))
        return kcap_error_set(err, KCAP_ERR_NOMEM, "out of memory");
    r->nsaved++;
    return KCAP_OK;
}

/* ---- one side: a library, its memory, a rebuilt call --------------------------------- */

typedef struct side {
    const kcap_kernlib *lib;
    kcap_dev *dev; /* NULL: host memory */
    const kcap_mem_ops *mem;
    kcap_rebuilt rb;
    int have_rb;
    void *ws;
    size_t wsb;
} side;

static size_t host_avail_bytes(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    unsigned long long kb = 0;
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    if (!kb) {
        long pages = sysconf(_SC_AVPHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
        return pages > 0 && psz > 0 ? (size_t)pages * (size_t)psz : (size_t)1 << 30;
    }
    return (size_t)kb * 1024;
}

static void side_free(side *s)
{
    if (s->ws)
        s->mem->release(s->mem->ctx, s->ws);
    s->ws = NULL;
    if (s->have_rb)
        kcap_rebuilt_free(&s->rb, s->mem);
    s->have_rb = 0;
}

static int side_prepare(side *s, const kcap_kernlib *lib, kcap_dev *dev,
                        const kcap_call_desc *d, const kcap_snapshot *snap,
                        kcap_pool_mode pool, kcap_error *err)
{
    memset(s, 0, sizeof *s);
    s->lib = lib;
    s->dev = kcap_kernlib_is_cuda(lib) ? dev : NULL;
    s->mem = s->dev ? kcap_dev_mem_ops(s->dev) : kcap_host_mem_ops();
    /* The original slot ids are kept while the full pool takes at most half of what is
     * free, leaving room for the rest of the call and whatever else shares the device. */
    size_t cap = (s->dev ? kcap_dev_free_bytes(s->dev) : host_avail_bytes()) / 2;
    int rc = kcap_call_rebuild(d, snap, s->mem, pool, cap, &s->rb, err);
    if (rc)
        return rc;
    s->have_rb = 1;
    if (s->dev && kcap_dev_sync(s->dev))
        return kcap_error_set(err, KCAP_ERR_CUDA, "uploading the rebuilt inputs failed");
    if ((rc = kcap_kernlib_workspace(lib, d->workspace_fn, s->rb.args, &s->wsb, err)))
        return rc;
    if (s->wsb && !(s->ws = s->mem->alloc(s->mem->ctx, s->wsb)))
        return kcap_error_set(err, KCAP_ERR_NOMEM, "cannot allocate %zu bytes of workspace",
                              s->wsb);
    return KCAP_OK;
}

/* Run `sym` on the rebuilt call; *status gets the kernel's return value. */
static int side_call(side *s, kcap_kern_fn fn, int *status, kcap_error *err)
{
    void *stream = s->dev ? (void *)kcap_dev_stream(s->dev) : NULL;
    *status = fn(s->rb.args, s->ws, s->wsb, stream);
    if (s->dev) {
        CUresult r = kcap_dev_cu(s->dev)->cuStreamSynchronize(kcap_dev_stream(s->dev));
        if (r != CUDA_SUCCESS)
            return kcap_dev_error(s->dev, r, err, "the kernel failed on the device");
    }
    return KCAP_OK;
}

/* Fetch every output tensor of the snapshot into host buffers outs[i] (caller frees). */
static int side_fetch(side *s, const kcap_call_desc *d, const kcap_snapshot *snap, void **outs,
                      kcap_error *err)
{
    for (int i = 0; i < snap->ntensors; i++) {
        const kcap_tensor *t = &snap->tensors[i];
        if (t->dir != KCAP_DIR_OUT)
            continue;
        outs[i] = malloc(t->nbytes ? t->nbytes : 1);
        if (!outs[i])
            return kcap_error_set(err, KCAP_ERR_NOMEM, "out of memory for output %s", t->name);
        int rc = kcap_call_fetch_output(d, &s->rb, snap, t->name, s->mem, outs[i], err);
        if (rc)
            return rc;
    }
    return KCAP_OK;
}

static void free_outs(const kcap_snapshot *snap, void **outs)
{
    for (int i = 0; outs && i < snap->ntensors; i++)
        free(outs[i]);
    free(outs);
}

/* Judge every output of the snapshot: got[i] against want (the captured data or ref[i]). */
static void judge(const kcap_replayer *r, const kcap_call_desc *d, const kcap_snapshot *snap,
                  void **got, void **want_or_null, kcap_side_verdict *v)
{
    v->ran = 1;
    v->pass = 1;
    v->bitwise = 1;
    for (int i = 0; i < snap->ntensors && v->nout < KCAP_MAX_OUTS; i++) {
        const kcap_tensor *t = &snap->tensors[i];
        if (t->dir != KCAP_DIR_OUT)
            continue;
        kcap_tensor_verdict *tv = &v->out[v->nout++];
        snprintf(tv->name, sizeof tv->name, "%s", t->name);
        tv->dtype = t->dtype;
        tv->ndim = t->ndim;
        memcpy(tv->shape, t->shape, sizeof tv->shape);
        if (t->dtype == KCAP_DT_BF16 || t->dtype == KCAP_DT_F16)
            tv->tol = r->o.tol_half;
        else if (t->dtype == KCAP_DT_F32 || t->dtype == KCAP_DT_F64)
            tv->tol = r->o.tol_f32;
        else
            tv->tol = kcap_cmp_default_tol(t->dtype);
        const void *want = want_or_null ? want_or_null[i] : t->data;
        size_t n = t->nbytes / kcap_dtype_size(t->dtype);
        kcap_compare(t->dtype, got[i], want, n, &tv->tol, &tv->r);
        int64_t per;
        if (tv->r.worst >= 0 && kcap_call_tokens_per_request(d, snap, t->name, &per))
            tv->has_loc = kcap_cmp_locate(tv->r.worst, t->ndim, t->shape, per, tv->loc) == 0;
        v->pass &= tv->r.pass;
        v->bitwise &= tv->r.bitwise;
    }
}

/* The description's summary of the shape (nothing per call here). */
static void summarise_shape(const kcap_call_desc *d, const kcap_snapshot *s,
                            kcap_case_result *res)
{
    kcap_call_summary sum;
    memset(&sum, 0, sizeof sum);
    sum.bs = sum.q_len = sum.num_heads = sum.num_slots = sum.kv_total = sum.kv_max = -1;
    snprintf(sum.dtype, sizeof sum.dtype, "?");
    snprintf(sum.index_type, sizeof sum.index_type, "?");
    if (d && d->summarise)
        d->summarise(s, &sum);
    res->bs = sum.bs;
    res->q_len = sum.q_len;
    res->num_heads = sum.num_heads;
    res->num_slots = sum.num_slots;
    res->kv_total = sum.kv_total;
    res->kv_max = sum.kv_max;
    res->tree = sum.tree;
    snprintf(res->dtype, sizeof res->dtype, "%s", sum.dtype);
    snprintf(res->index_type, sizeof res->index_type, "%s", sum.index_type);
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Reference side: its own rebuild, run, fetch; filled into ref_outs. */
static int run_reference(kcap_replayer *r, const kcap_call_desc *d, const kcap_snapshot *snap,
                         void **ref_outs, kcap_error *err)
{
    const kcap_kernlib *lib = r->ref_is_kern ? r->kern : r->ref;
    kcap_kern_fn fn;
    if (!d->reference)
        return kcap_error_set(err, KCAP_ERR_UNKNOWN_CALL, "call %s has no reference entry point "
                              "in its description", d->name);
    int rc = kcap_kernlib_sym(lib, d->reference, &fn, err);
    if (rc)
        return rc;
    if (kcap_kernlib_abi(lib) != snap->meta.abi_version)
        return kcap_error_set(err, KCAP_ERR_LIBRARY,
                              "reference library %s implements ABI version %d, the snapshot "
                              "was captured at version %d",
                              kcap_kernlib_path(lib), kcap_kernlib_abi(lib),
                              snap->meta.abi_version);
    side s;
    rc = side_prepare(&s, lib, r->dev, d, snap, r->o.pool, err);
    int st = 0;
    if (!rc)
        rc = side_call(&s, fn, &st, err);
    if (!rc && st) {
        char why[512];
        kcap_kernlib_status_text(lib, st, why, sizeof why);
        rc = kcap_error_set(err, KCAP_ERR_KERNEL, "reference %s returned %s",
                            kcap_kernlib_path(lib), why);
    }
    if (!rc)
        rc = side_fetch(&s, d, snap, ref_outs, err);
    side_free(&s);
    return rc;
}

static void set_case_error(kcap_case_result *res, int code, const kcap_error *e)
{
    res->status = code;
    snprintf(res->error, sizeof res->error, "%s", e->msg[0] ? e->msg : kcap_err_string(code));
}

int kcap_replayer_run(kcap_replayer *r, const char *path, kcap_case_result *res)
{
    double t0 = now_ms();
    memset(res, 0, sizeof *res);
    snprintf(res->path, sizeof res->path, "%s", path);
    const char *base = strrchr(path, '/');
    snprintf(res->name, sizeof res->name, "%s", base ? base + 1 : path);
    res->bs = res->q_len = res->num_heads = res->kv_total = res->kv_max = res->num_slots = -1;
    snprintf(res->pool, sizeof res->pool, "-");

    kcap_error e = {0};
    kcap_snapshot *snap = NULL;
    void **outs = NULL, **ref_outs = NULL;
    side s;
    memset(&s, 0, sizeof s);
    int rc = kcap_snapshot_read(path, &snap, &e);
    double t1 = now_ms();
    res->read_ms = t1 - t0;
    if (rc) {
        if (!strstr(e.msg, path))
            kcap_error_prefix(&e, "%s", path);
        set_case_error(res, rc, &e);
        goto done;
    }
    snprintf(res->call, sizeof res->call, "%s", snap->meta.call);
    res->captured_status = snap->meta.call_status;
    const kcap_call_desc *d = kcap_call_find(snap->meta.call);
    summarise_shape(d, snap, res);
    if (!d) {
        rc = kcap_error_set(&e, KCAP_ERR_UNKNOWN_CALL,
                            "%s: call \"%s\" has no call description in this kcap build", path,
                            snap->meta.call);
        set_case_error(res, rc, &e);
        goto done;
    }
    if (kcap_kernlib_abi(r->kern) != snap->meta.abi_version) {
        rc = kcap_error_set(&e, KCAP_ERR_LIBRARY,
                            "%s: captured at ABI version %d, but %s implements version %d "
                            "(vattn_abi_version)",
                            path, snap->meta.abi_version, kcap_kernlib_path(r->kern),
                            kcap_kernlib_abi(r->kern));
        set_case_error(res, rc, &e);
        goto done;
    }
    kcap_kern_fn fn;
    if ((rc = kcap_kernlib_sym(r->kern, snap->meta.call, &fn, &e))) {
        kcap_error_prefix(&e, "%s", path);
        set_case_error(res, rc, &e);
        goto done;
    }
    outs = calloc((size_t)snap->ntensors + 1, sizeof *outs);
    ref_outs = calloc((size_t)snap->ntensors + 1, sizeof *ref_outs);
    if (!outs || !ref_outs) {
        rc = kcap_error_set(&e, KCAP_ERR_NOMEM, "%s: out of memory", path);
        set_case_error(res, rc, &e);
        goto done;
    }

    /* A call that failed at capture time is replayed to check the kernel still rejects it
     * the same way; there is no output to compare. */
    int want_ref = strcmp(r->ref_name, "none") && snap->meta.call_status == 0;
    if (want_ref) {
        kcap_error re = {0};
        int rrc = run_reference(r, d, snap, ref_outs, &re);
        if (rrc) {
            res->vs_ref.ran = 0;
            snprintf(res->vs_ref.error, sizeof res->vs_ref.error, "%s", re.msg);
            want_ref = -1; /* requested but failed: the case fails */
        }
    }

    double t2 = now_ms();
    res->ref_ms = t2 - t1;
    rc = side_prepare(&s, r->kern, r->dev, d, snap, r->o.pool, &e);
    double t3 = now_ms();
    res->rebuild_ms = t3 - t2;
    if (rc) {
        kcap_error_prefix(&e, "%s", path);
        set_case_error(res, rc, &e);
        goto done;
    }
    snprintf(res->pool, sizeof res->pool, "%s", s.rb.pool_remapped ? "remap" : "original");
    res->pool_bytes = s.rb.pool_bytes;
    int st = 0;
    rc = side_call(&s, fn, &st, &e);
    double t4 = now_ms();
    res->run_ms = t4 - t3;
    if (rc) {
        kcap_error_prefix(&e, "%s", path);
        set_case_error(res, rc, &e);
        goto done;
    }
    res->replay_status = st;
    if (snap->meta.call_status != 0 || st != 0) {
        kcap_side_verdict *v = &res->vs_captured;
        v->ran = 1;
        v->pass = st == snap->meta.call_status;
        char why[512];
        kcap_kernlib_status_text(r->kern, st, why, sizeof why);
        snprintf(v->error, sizeof v->error, "captured call returned status %d, replay returned %s",
                 snap->meta.call_status, why);
    } else {
        if ((rc = side_fetch(&s, d, snap, outs, &e))) {
            kcap_error_prefix(&e, "%s", path);
            set_case_error(res, rc, &e);
            goto done;
        }
        judge(r, d, snap, outs, NULL, &res->vs_captured);
        if (want_ref == 1)
            judge(r, d, snap, outs, ref_outs, &res->vs_ref);
        if (r->o.save_dir) {
            rc = claim_save_name(r, res->name, &e);
            if (!rc)
                rc = kcap_save_outputs(&r->writer, r->o.save_dir, res->name, snap, outs,
                                       kcap_kernlib_path(r->kern), kcap_kernlib_hash(r->kern),
                                       res->saved, sizeof res->saved, &e);
        }
        if (rc) {
            res->saved[0] = '\0';
            set_case_error(res, rc, &e);
            goto done;
        }
    }

    double t5 = now_ms();
    res->check_ms = t5 - t4;
    if (r->o.bench && st == 0) {
        kcap_error be = {0};
        kcap_bench_result *b = &res->bench;
        if (kcap_bench_run(s.dev, fn, s.rb.args, s.ws, s.wsb, r->o.warmup, r->o.iters, b, &be)) {
            b->ran = 0;
            snprintf(res->error, sizeof res->error, "--bench: %.1000s", be.msg);
        } else {
            kcap_bench_traffic(d, snap, &b->bytes, &b->flops);
            double sec = b->median_ms / 1e3;
            if (sec > 0) {
                b->gbs = b->bytes / sec / 1e9;
                b->tflops = b->flops / sec / 1e12;
            }
            if (s.dev && kcap_dev_get_info(s.dev)->peak_bw_gbs > 0)
                b->pct_peak_bw = 100.0 * b->gbs / kcap_dev_get_info(s.dev)->peak_bw_gbs;
        }
    }
    res->bench_ms = now_ms() - t5;
    res->status = KCAP_OK;
    /* a benchmark that could not run is a failure too: a library that breaks on its
     * second call is not fit to ship */
    res->pass = res->vs_captured.pass && want_ref != -1 &&
                (want_ref != 1 || res->vs_ref.pass) && (!r->o.bench || st || res->bench.ran);
done:
    side_free(&s);
    if (snap) {
        free_outs(snap, outs);
        free_outs(snap, ref_outs);
    } else {
        free(outs);
        free(ref_outs);
    }
    kcap_snapshot_free(snap);
    res->wall_ms = now_ms() - t0;
    return res->status;
}
