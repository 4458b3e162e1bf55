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
 * The shape is drawn here; the call itself is the test kit's (tests/testkit_vattn.h), the
 * one the kernel tests build.
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
#include "../testkit_vattn.h"

/* ---- one random case: the shape drawn here, the call built by the test kit ---- */

#define GEN_SCALE_ALT 0.041666668f /* 1/sqrt(576), the other scale a server may pass */
#define GEN_ROW_PAD 64 /* extra elements of a padded row (a multiple of 8: 16-byte alignment) */
/* prefixes: small cases 0..200 keys, large ones 500..6000 (the benchmark's long contexts) */
#define GEN_SMALL_PREFIX_MAX 200
#define GEN_LARGE_PREFIX_MIN 500
#define GEN_LARGE_PREFIX_MAX 6000
#define GEN_POOL_EXTRA_MAX 64 /* spare pool rows beyond the multiple of the keys */

/* Case i of seed: a pure function of (seed, i, large). The shape draws (bs, q_len, heads,
 * scale, prefixes, pool size) come first, in the order the snapshots' shapes were always drawn
 * in, so `--size large` keeps the benchmark's shapes; tk_vcall_build draws the rest. */
static int make_case(uint64_t seed, int i, int large, tk_vcall *g)
{
    tk_rng s = seed * 0x9e3779b97f4a7c15ull + (uint64_t)i * 0xbf58476d1ce4e5b9ull + 1;
    for (int k = 0; k < 4; k++) /* decorrelate neighbouring seeds */
        tk_next(&s);
    static const int ql_small[] = {1, 2, 3, 4, 5, 8}, h_small[] = {1, 2, 4, 8, 16};
    static const int ql_large[] = {4, 8}, h_large[] = {16, 16, 32, 64};
    const int strided = i % 4 == 1; /* every 4th case strided q/o views */
    tk_vcase c = {
        .name = "gen",
        .fp16 = !large && i % 7 == 6,
        .idx64 = i % 2,
        .vis = i % 3 != 0 ? TK_VIS_TREE : TK_VIS_CAUSAL_NULL, /* tree in 2 of 3 cases */
        .no_lse = i % 6 == 5,
        .q_gap_h = strided ? GEN_ROW_PAD : 0,
        .q_gap_t = strided ? GEN_ROW_PAD + 32 : 0,
        .o_gap_h = strided ? GEN_ROW_PAD : 0,
        .o_gap_t = strided ? GEN_ROW_PAD + 48 : 0,
        .kv_stride = i % 3 == 2 ? VATTN_HEAD_DIM_QK + GEN_ROW_PAD : 0, /* every 3rd a padded pool row */
        .share_prefix = i % 5 == 3, /* as a radix cache shares a common prompt */
        .pass_max_kv = i % 3 != 0,
        .val = tk_vattn_nonzero_val, /* inputs never 0 (nor tiny): no score is trivially 0 */
    };
    /* draws in statements: the order of evaluation inside an initializer is unspecified */
    c.bs = (int)(large ? tk_range(&s, 1, 8) : tk_range(&s, 1, 4));
    c.q_len = large ? ql_large[tk_range(&s, 0, 1)] : ql_small[tk_range(&s, 0, 5)];
    c.heads = large ? h_large[tk_range(&s, 0, 3)] : h_small[tk_range(&s, 0, 4)];
    c.sm_scale = tk_range(&s, 0, 1) ? TK_VCASE_SCALE : GEN_SCALE_ALT;
    /* ragged prefixes; every even case starts with an empty prefix */
    int64_t *prefix = malloc(sizeof(int64_t) * (size_t)c.bs), nnz = 0;
    if (!prefix)
        return -1;
    for (int b = 0; b < c.bs; b++) {
        prefix[b] = large ? tk_range(&s, GEN_LARGE_PREFIX_MIN, GEN_LARGE_PREFIX_MAX)
                          : tk_range(&s, 0, GEN_SMALL_PREFIX_MAX);
        if (b == 0 && i % 2 == 0)
            prefix[b] = 0;
        nnz += prefix[b] + c.q_len;
    }
    c.prefixes = prefix;
    c.num_slots = nnz * (large ? 2 : tk_range(&s, 1, 3)) + tk_range(&s, 0, GEN_POOL_EXTRA_MAX);
    tk_vcall_build(&c, &s, g);
    free(prefix);
    tk_vcall_poison(g);
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

static int to_device(const tk_vcall *g, const kcap_mem_ops *m, dcase *d)
{
    memset(d, 0, sizeof *d);
    d->a = g->a;
    d->a.q = dup_dev(m, g->q, g->q_elems * 2, &d->p[0]);
    d->a.kv_cache = dup_dev(m, g->kv, g->kv_elems * 2, &d->p[1]);
    d->a.kv_indptr = dup_dev(m, g->indptr, sizeof(int32_t) * (size_t)(g->a.bs + 1), &d->p[2]);
    d->a.kv_indices = dup_dev(m, g->indices, (size_t)g->indptr[g->a.bs] * (g->a.index_type ? 8 : 4), &d->p[3]);
    d->a.o = dup_dev(m, g->o, g->o_elems * 2, &d->p[4]);
    if (g->a.visibility)
        d->a.visibility = dup_dev(m, g->vis, (size_t)g->a.bs * g->a.q_len * g->a.q_len, &d->p[5]);
    if (g->a.lse)
        d->a.lse = dup_dev(m, g->lse, sizeof(float) * (size_t)g->a.bs * g->a.q_len *
                                          g->a.num_heads, &d->p[6]);
    for (int k = 0; k < 5; k++)
        if (!d->p[k])
            return -1;
    return (g->a.visibility && !d->p[5]) || (g->a.lse && !d->p[6]) ? -1 : 0;
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
        tk_vcall g;
        dcase d;
        int have_d = 0;
        int bad = make_case(seed, i, large, &g);
        kcap_snapshot *snap = kcap_snapshot_create();
        void *ws = NULL;
        int ok = 0;
        if (!snap || bad) {
            fprintf(stderr, "kcap_gen_snap: out of memory (case %d)\n", i);
            tk_vcall_free(&g);
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
               g.a.index_type ? "int64" : "int32", g.a.visibility ? "tree" : "causal",
               g.a.q_stride_h != VATTN_HEAD_DIM_QK ? " strided" : "", g.a.lse ? "" : " no-lse");
        ok = 1;
    case_done:
        if (ws)
            mem->release(mem->ctx, ws);
        if (have_d)
            dcase_free(&d, mem);
        tk_vcall_free(&g);
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
