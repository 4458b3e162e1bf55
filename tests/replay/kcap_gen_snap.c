/*
 * kcap_gen_snap.c — makes verify-attention snapshots WITHOUT the interposer, for replay's
 * tests and benchmark: random vattn_args, one call of a kernel library, IN and OUT recorded
 * with kcap_call_record (the path capture uses) and written with kcap_snapshot_write.
 *
 * Replay must be testable in CI on its own (no capture, no GPU), and its tests must cover
 * what real servers send: ragged prefixes including 0, slot ids scattered through a larger
 * pool (a random permutation, with prefix slots shared between requests as a radix cache
 * does), int32 and int64 indices, causal and tree visibility, strided q/o, padded pool
 * rows, a missing lse. Case i of seed s is a pure function of (s, i, size), whatever the
 * library, so the same arguments against two libraries give snapshots with equal inputs.
 *
 * usage: kcap_gen_snap --lib LIB.so --out DIR [--count N] [--seed S] [--size small|large]
 *                      [--prefix NAME]
 * A CUDA library (vattn_backend() == "cuda") gets device buffers and is recorded through
 * device memory ops, as capture would do it.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kcap_calls.h"
#include "kcap_devmem.h"
#include "kcap_kernlib.h"
#include "kcap_snapshot.h"
#include "verify_attn.h"

/* ---- deterministic RNG (xorshift64*) ---- */
static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545f4914f6cdd1dull;
}
static int64_t rng_int(uint64_t *s, int64_t lo, int64_t hi) /* inclusive */
{
    return lo + (int64_t)(rng_next(s) % (uint64_t)(hi - lo + 1));
}
static float rng_nonzero(uint64_t *s) /* uniform in [-1, 1], |v| >= 1/64 */
{
    for (;;) {
        float v = (float)((double)(rng_next(s) >> 11) / 9007199254740992.0 * 2.0 - 1.0);
        if (fabsf(v) >= 1.0f / 64)
            return v;
    }
}

static uint16_t f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}
static uint16_t f32_to_f16(float f) /* |f| <= 1 here: normal or subnormal range only */
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    float a = fabsf(f);
    if (a < ldexpf(1.0f, -14)) /* subnormal half */
        return sign | (uint16_t)lrintf(a * ldexpf(1.0f, 24));
    int e;
    float m = frexpf(a, &e); /* a = m * 2^e, m in [0.5, 1) */
    int mant = (int)lrintf((m * 2.0f - 1.0f) * 1024.0f);
    int he = e - 1 + 15;
    if (mant == 1024) {
        mant = 0;
        he++;
    }
    return sign | (uint16_t)(he << 10) | (uint16_t)mant;
}

/* ---- one random case ---- */

typedef struct gcase {
    vattn_args a;          /* host pointers */
    size_t q_elems, kv_elems, o_elems, idx_bytes, vis_bytes;
    uint16_t *q, *kv, *o;
    int32_t *indptr;
    void *indices;
    uint8_t *vis;
    float *lse;
} gcase;

static void gcase_free(gcase *g)
{
    free(g->q);
    free(g->kv);
    free(g->o);
    free(g->indptr);
    free(g->indices);
    free(g->vis);
    free(g->lse);
}

static int make_case(uint64_t seed, int i, int large, gcase *g)
{
    memset(g, 0, sizeof *g);
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + (uint64_t)i * 0xbf58476d1ce4e5b9ull + 1;
    for (int k = 0; k < 4; k++)
        rng_next(&s);
    vattn_args *a = &g->a;
    a->struct_size = sizeof *a;
    a->dtype = (!large && i % 7 == 6) ? VATTN_DTYPE_FP16 : VATTN_DTYPE_BF16;
    a->index_type = i % 2 ? VATTN_INDEX_INT64 : VATTN_INDEX_INT32;
    static const int ql_small[] = {1, 2, 3, 4, 5, 8}, h_small[] = {1, 2, 4, 8, 16};
    static const int ql_large[] = {4, 8}, h_large[] = {16, 16, 32, 64};
    a->bs = (int)(large ? rng_int(&s, 1, 8) : rng_int(&s, 1, 4));
    a->q_len = large ? ql_large[rng_int(&s, 0, 1)] : ql_small[rng_int(&s, 0, 5)];
    a->num_heads = large ? h_large[rng_int(&s, 0, 3)] : h_small[rng_int(&s, 0, 4)];
    a->sm_scale = rng_int(&s, 0, 1) ? 0.0625f : 1.0f / sqrtf(576.0f);
    const int bs = a->bs, ql = a->q_len, H = a->num_heads;
    const int64_t T = (int64_t)bs * ql;

    /* ragged prefixes; every even case starts with an empty prefix */
    g->indptr = malloc(sizeof(int32_t) * (size_t)(bs + 1));
    int64_t *prefix = malloc(sizeof(int64_t) * (size_t)bs);
    if (!g->indptr || !prefix)
        return -1;
    g->indptr[0] = 0;
    int64_t maxkv = 0;
    for (int b = 0; b < bs; b++) {
        prefix[b] = large ? rng_int(&s, 500, 6000) : rng_int(&s, 0, 200);
        if (b == 0 && i % 2 == 0)
            prefix[b] = 0;
        g->indptr[b + 1] = g->indptr[b] + (int32_t)(prefix[b] + ql);
        if (prefix[b] + ql > maxkv)
            maxkv = prefix[b] + ql;
    }
    const int64_t nnz = g->indptr[bs];
    a->num_slots = nnz * (large ? 2 : rng_int(&s, 1, 3)) + rng_int(&s, 0, 64);
    a->max_kv_len = i % 3 == 0 ? 0 : maxkv;

    /* slots: a random permutation of the pool, prefix slots of request 0 shared by the
     * other requests in every 5th case (as a radix cache shares a common prompt) */
    int64_t *perm = malloc(sizeof(int64_t) * (size_t)a->num_slots);
    if (!perm)
        return -1;
    for (int64_t k = 0; k < a->num_slots; k++)
        perm[k] = k;
    for (int64_t k = a->num_slots - 1; k > 0; k--) {
        int64_t j = rng_int(&s, 0, k), t = perm[k];
        perm[k] = perm[j];
        perm[j] = t;
    }
    g->idx_bytes = (size_t)nnz * (a->index_type ? 8 : 4);
    g->indices = malloc(g->idx_bytes ? g->idx_bytes : 8);
    if (!g->indices)
        return -1;
    for (int b = 0; b < bs; b++)
        for (int64_t k = g->indptr[b]; k < g->indptr[b + 1]; k++) {
            int64_t slot = perm[k];
            int64_t pos = k - g->indptr[b];
            if (i % 5 == 3 && b > 0 && pos < prefix[b] && pos < prefix[0])
                slot = perm[pos]; /* request 0's slot at the same position */
            if (a->index_type)
                ((int64_t *)g->indices)[k] = slot;
            else
                ((int32_t *)g->indices)[k] = (int32_t)slot;
        }
    free(perm);
    free(prefix);

    /* strides: every 4th case strided q/o views, every 3rd a padded pool row (multiples of
     * 8 elements keep the 16-byte alignment the CUDA path needs) */
    int strided = i % 4 == 1;
    a->q_stride_h = strided ? 576 + 64 : 576;
    a->q_stride_t = strided ? H * a->q_stride_h + 32 : H * a->q_stride_h;
    a->o_stride_h = strided ? 512 + 64 : 512;
    a->o_stride_t = strided ? H * a->o_stride_h + 48 : H * a->o_stride_h;
    a->kv_stride = i % 3 == 2 ? 576 + 64 : 576;

    g->q_elems = (size_t)((T - 1) * a->q_stride_t + (H - 1) * a->q_stride_h + 576);
    g->kv_elems = (size_t)(a->num_slots * a->kv_stride);
    g->o_elems = (size_t)((T - 1) * a->o_stride_t + (H - 1) * a->o_stride_h + 512);
    g->q = malloc(g->q_elems * 2);
    g->kv = malloc(g->kv_elems * 2);
    g->o = malloc(g->o_elems * 2);
    if (!g->q || !g->kv || !g->o)
        return -1;
    uint16_t (*conv)(float) = a->dtype == VATTN_DTYPE_FP16 ? f32_to_f16 : f32_to_bf16;
    for (size_t k = 0; k < g->q_elems; k++)
        g->q[k] = conv(rng_nonzero(&s));
    for (size_t k = 0; k < g->kv_elems; k++)
        g->kv[k] = conv(rng_nonzero(&s));
    memset(g->o, 0xff, g->o_elems * 2); /* NaN poison, gaps included */

    /* tree visibility in 2 of 3 cases: draft j visible to draft i iff j is i or one of its
     * ancestors in a random tree (parent[j] < j) */
    if (i % 3 != 0) {
        g->vis_bytes = (size_t)bs * ql * ql;
        g->vis = calloc(g->vis_bytes, 1);
        int *parent = malloc(sizeof(int) * (size_t)ql);
        if (!g->vis || !parent)
            return -1;
        for (int b = 0; b < bs; b++) {
            for (int j = 0; j < ql; j++)
                parent[j] = j ? (int)rng_int(&s, 0, j - 1) : -1;
            for (int qi = 0; qi < ql; qi++)
                for (int j = qi; j >= 0; j = parent[j])
                    g->vis[((size_t)b * ql + qi) * ql + j] = 1;
        }
        free(parent);
    }
    if (i % 6 != 5) {
        g->lse = malloc(sizeof(float) * (size_t)(T * H));
        if (!g->lse)
            return -1;
        memset(g->lse, 0xff, sizeof(float) * (size_t)(T * H));
    }
    a->q = g->q;
    a->kv_cache = g->kv;
    a->kv_indptr = g->indptr;
    a->kv_indices = g->indices;
    a->visibility = g->vis;
    a->o = g->o;
    a->lse = g->lse;
    return 0;
}

/* ---- device copy of a case (CUDA libraries) ---- */

typedef struct dcase {
    vattn_args a;
    void *p[7];
} dcase;

static void *dup_dev(const kcap_mem_ops *m, const void *src, size_t n, void **slot)
{
    void *d = m->alloc(m->ctx, n ? n : 16);
    if (d && n && m->copy_from_host(m->ctx, d, src, n)) {
        m->release(m->ctx, d);
        d = NULL;
    }
    *slot = d;
    return d;
}

static int to_device(const gcase *g, const kcap_mem_ops *m, dcase *d)
{
    memset(d, 0, sizeof *d);
    d->a = g->a;
    d->a.q = dup_dev(m, g->q, g->q_elems * 2, &d->p[0]);
    d->a.kv_cache = dup_dev(m, g->kv, g->kv_elems * 2, &d->p[1]);
    d->a.kv_indptr = dup_dev(m, g->indptr, sizeof(int32_t) * (size_t)(g->a.bs + 1), &d->p[2]);
    d->a.kv_indices = dup_dev(m, g->indices, g->idx_bytes, &d->p[3]);
    d->a.o = dup_dev(m, g->o, g->o_elems * 2, &d->p[4]);
    if (g->vis)
        d->a.visibility = dup_dev(m, g->vis, g->vis_bytes, &d->p[5]);
    if (g->lse)
        d->a.lse = dup_dev(m, g->lse, sizeof(float) * (size_t)g->a.bs * g->a.q_len *
                                          g->a.num_heads, &d->p[6]);
    for (int k = 0; k < 5; k++)
        if (!d->p[k])
            return -1;
    return (g->vis && !d->p[5]) || (g->lse && !d->p[6]) ? -1 : 0;
}

static void dcase_free(dcase *d, const kcap_mem_ops *m)
{
    for (int k = 0; k < 7; k++)
        m->release(m->ctx, d->p[k]);
}

/* ---- main ---- */

static void fill_meta(kcap_snapshot *snap, const kcap_kernlib *lib, const char *lib_path,
                      kcap_dev *dev, uint64_t seq, int status)
{
    kcap_meta *m = &snap->meta;
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(m->time_utc, sizeof m->time_utc, "%Y-%m-%dT%H:%M:%S.000Z", &tm);
    gethostname(m->host, sizeof m->host - 1);
    m->pid = getpid();
    m->rank = -1;
    if (dev) {
        const kcap_dev_info *in = kcap_dev_get_info(dev);
        snprintf(m->device_name, sizeof m->device_name, "%s", in->name);
        m->cc_major = in->cc_major;
        m->cc_minor = in->cc_minor;
    } else {
        snprintf(m->device_name, sizeof m->device_name, "cpu");
    }
    snprintf(m->lib_path, sizeof m->lib_path, "%s", lib_path);
    snprintf(m->lib_hash, sizeof m->lib_hash, "%s", kcap_kernlib_hash(lib));
    m->seq = seq;
    m->call_status = status;
    snprintf(m->kcap_version, sizeof m->kcap_version, "kcap_gen_snap");
}

static int usage(void)
{
    fprintf(stderr, "usage: kcap_gen_snap --lib LIB.so --out DIR [--count N] [--seed S] "
                    "[--size small|large] [--prefix NAME]\n");
    return 2;
}

int main(int argc, char **argv)
{
    const char *lib_path = NULL, *out = NULL, *prefix = "snap";
    int count = 8, large = 0;
    uint64_t seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--lib") && v)
            lib_path = argv[++i];
        else if (!strcmp(argv[i], "--out") && v)
            out = argv[++i];
        else if (!strcmp(argv[i], "--count") && v)
            count = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--seed") && v)
            seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--size") && v)
            large = !strcmp(argv[++i], "large");
        else if (!strcmp(argv[i], "--prefix") && v)
            prefix = argv[++i];
        else
            return usage();
    }
    if (!lib_path || !out || count < 1)
        return usage();

    kcap_error err = {0};
    kcap_kernlib *lib = NULL;
    kcap_dev *dev = NULL;
    kcap_writer *w = NULL;
    kcap_kern_fn fn = NULL;
    const kcap_call_desc *desc = kcap_call_find("vattn_verify");
    int rc = 1;
    if (!desc) {
        fprintf(stderr, "kcap_gen_snap: no call description for vattn_verify\n");
        return 1;
    }
    if (kcap_kernlib_open(lib_path, &lib, &err) || kcap_kernlib_sym(lib, "vattn_verify", &fn, &err) ||
        (kcap_kernlib_is_cuda(lib) && kcap_dev_open(0, &dev, &err)) ||
        kcap_mkdir_private(out, &err) || !(w = kcap_writer_create(NULL, &err))) {
        fprintf(stderr, "kcap_gen_snap: %s\n", err.msg);
        goto out;
    }
    const kcap_mem_ops *mem = dev ? kcap_dev_mem_ops(dev) : kcap_host_mem_ops();
    for (int i = 0; i < count; i++) {
        gcase g;
        dcase d;
        int have_d = 0;
        int bad = make_case(seed, i, large, &g);
        kcap_snapshot *snap = kcap_snapshot_create();
        void *ws = NULL;
        int ok = 0;
        if (!snap || bad) {
            fprintf(stderr, "kcap_gen_snap: out of memory (case %d)\n", i);
            gcase_free(&g);
            kcap_snapshot_free(snap);
            goto out;
        }
        const vattn_args *args = &g.a;
        if (dev) {
            have_d = 1;
            if (to_device(&g, mem, &d) || kcap_dev_sync(dev)) {
                fprintf(stderr, "kcap_gen_snap: device allocation failed (case %d)\n", i);
                goto case_done;
            }
            args = &d.a;
        }
        size_t wsb = 0;
        if (kcap_kernlib_workspace(lib, desc->workspace_fn, args, &wsb, &err) ||
            (wsb && !(ws = mem->alloc(mem->ctx, wsb)))) {
            fprintf(stderr, "kcap_gen_snap: workspace for case %d failed\n", i);
            goto case_done;
        }
        if (kcap_call_record(desc, args, KCAP_ARG_IN, mem, snap, &err)) {
            fprintf(stderr, "kcap_gen_snap: record IN (case %d): %s\n", i, err.msg);
            goto case_done;
        }
        int st = fn(args, ws, wsb, dev ? (void *)kcap_dev_stream(dev) : NULL);
        if (dev && kcap_dev_cu(dev)->cuStreamSynchronize(kcap_dev_stream(dev)) != CUDA_SUCCESS) {
            fprintf(stderr, "kcap_gen_snap: kernel fault (case %d)\n", i);
            goto case_done;
        }
        if (st) {
            char why[256];
            kcap_kernlib_status_text(lib, st, why, sizeof why);
            fprintf(stderr, "kcap_gen_snap: case %d: vattn_verify returned %s\n", i, why);
            goto case_done;
        }
        if (kcap_call_record(desc, args, KCAP_ARG_OUT, mem, snap, &err)) {
            fprintf(stderr, "kcap_gen_snap: record OUT (case %d): %s\n", i, err.msg);
            goto case_done;
        }
        fill_meta(snap, lib, lib_path, dev, (uint64_t)i, st);
        char path[4096];
        snprintf(path, sizeof path, "%s/%s-%04d.h5", out, prefix, i);
        if (kcap_snapshot_write(w, snap, path, &err)) {
            fprintf(stderr, "kcap_gen_snap: %s\n", err.msg);
            goto case_done;
        }
        printf("%s bs=%d q_len=%d heads=%d kv=%d slots=%lld %s %s%s%s\n", path, g.a.bs,
               g.a.q_len, g.a.num_heads, g.indptr[g.a.bs], (long long)g.a.num_slots,
               g.a.index_type ? "int64" : "int32", g.vis ? "tree" : "causal",
               g.a.q_stride_h != 576 ? " strided" : "", g.lse ? "" : " no-lse");
        ok = 1;
    case_done:
        if (ws)
            mem->release(mem->ctx, ws);
        if (have_d)
            dcase_free(&d, mem);
        gcase_free(&g);
        kcap_snapshot_free(snap);
        if (!ok)
            goto out;
    }
    rc = 0;
out:
    kcap_writer_free(w);
    kcap_dev_free(dev);
    kcap_kernlib_free(lib);
    return rc;
}
