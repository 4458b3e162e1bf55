/*
 * snapcmp.c — checks capture's snapshots against what the test client really passed and
 * received. Every *.h5 in SNAPDIR is read with the formats API (full validation, the same as
 * `kcap check`), matched to the client's dump whose q is byte-identical, and then every
 * tensor is compared: q, kv_indptr, kv_indices, visibility, the KV rows (row i must equal
 * the client's pool row kv_indices[i], i.e. slot ids preserved and nothing else dumped), o,
 * lse, scalars and the call status. Exit 0 only if all match and the counts are as expected.
 *
 * usage: snapcmp [--expect N] [--min N] [--max N] [--all] SNAPDIR DUMPDIR
 *   --all: every dump in DUMPDIR must have been matched by a snapshot.
 *   DUMPDIR "-": only read + validate every snapshot and count them.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kcap_calls.h"
#include "kcap_snapshot.h"
#include "testkit.h"

typedef struct {
    char tag[256];
    int matched;
} dump_ent;

static void *slurp(const char *dir, const char *tag, const char *ext, size_t *n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.%s", dir, tag, ext);
    return tk_slurp(path, n);
}

static long meta_int(const char *meta, const char *key)
{
    const char *p = strstr(meta, key);
    return p ? atol(p + strlen(key) + 1) : -999;
}

static int cmp_tensor(const kcap_snapshot *s, const char *name, kcap_dir dir, const void *want,
                      size_t n, const char *file)
{
    const kcap_tensor *t = kcap_snapshot_tensor(s, name, dir);
    if (!t) {
        if (!want)
            return 0;
        fprintf(stderr, "%s: tensor %s missing\n", file, name);
        return 1;
    }
    if (!want) {
        fprintf(stderr, "%s: tensor %s present but the client passed NULL\n", file, name);
        return 1;
    }
    if (t->nbytes != n) {
        fprintf(stderr, "%s: tensor %s has %zu bytes, client %zu\n", file, name, t->nbytes, n);
        return 1;
    }
    if (memcmp(t->data, want, n)) {
        size_t i = 0;
        while (((const unsigned char *)t->data)[i] == ((const unsigned char *)want)[i])
            i++;
        fprintf(stderr, "%s: tensor %s differs from the client's at byte %zu\n", file, name, i);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    long expect = -1, minn = -1, maxn = -1;
    int all = 0, multi = 0;
    const char *sd = NULL, *dd = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--expect") && i + 1 < argc)
            expect = atol(argv[++i]);
        else if (!strcmp(argv[i], "--min") && i + 1 < argc)
            minn = atol(argv[++i]);
        else if (!strcmp(argv[i], "--max") && i + 1 < argc)
            maxn = atol(argv[++i]);
        else if (!strcmp(argv[i], "--all"))
            all = 1;
        else if (!strcmp(argv[i], "--multi"))
            multi = 1; /* graph replays of identical inputs: one dump, many snapshots */
        else if (!sd)
            sd = argv[i];
        else
            dd = argv[i];
    }
    if (!sd || !dd) {
        fprintf(stderr, "usage: snapcmp [--expect N] [--min N] [--max N] [--all] SNAPDIR DUMPDIR\n");
        return 2;
    }
    kcap_h5zstd_register();
    static dump_ent dumps[4096];
    int nd = 0;
    DIR *d = strcmp(dd, "-") ? opendir(dd) : NULL;
    struct dirent *e;
    while (d && (e = readdir(d)) && nd < 4096) {
        size_t l = strlen(e->d_name);
        if (l > 5 && !strcmp(e->d_name + l - 5, ".meta") && l - 5 < sizeof dumps[0].tag) {
            memcpy(dumps[nd].tag, e->d_name, l - 5);
            dumps[nd].tag[l - 5] = '\0';
            nd++;
        }
    }
    if (d)
        closedir(d);
    d = opendir(sd);
    if (!d) {
        fprintf(stderr, "snapcmp: cannot open %s\n", sd);
        return 1;
    }
    int nsnap = 0, bad = 0;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 4 || strcmp(e->d_name + l - 3, ".h5"))
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", sd, e->d_name);
        nsnap++;
        kcap_snapshot *s = NULL;
        kcap_error err = {0};
        if (kcap_snapshot_read(path, &s, &err)) {
            fprintf(stderr, "snapcmp: %s\n", err.msg);
            bad++;
            continue;
        }
        if (!strcmp(dd, "-")) { /* validation only (calls made without dumps) */
            kcap_snapshot_free(s);
            continue;
        }
        const kcap_tensor *q = kcap_snapshot_tensor(s, "q", KCAP_DIR_IN);
        /* The client call with this q; when an eager call and a graph replay share the same q
         * (a warm-up before capture), prefer the one of the snapshot's own kind. */
        int found = -1, found_kind = 0;
        for (int i = 0; q && i < nd && !found_kind; i++) {
            size_t n, nm;
            void *qd = slurp(dd, dumps[i].tag, "q", &n);
            if (qd && n == q->nbytes && !memcmp(qd, q->data, n)) {
                char *mi = slurp(dd, dumps[i].tag, "meta", &nm);
                char *mz = mi ? calloc(1, nm + 1) : NULL;
                if (mz)
                    memcpy(mz, mi, nm);
                int same = mz && (meta_int(mz, "graph") == 1) == (s->meta.in_stream_capture != 0);
                if (found < 0 || same)
                    found = i;
                found_kind = same;
                free(mi);
                free(mz);
            }
            free(qd);
        }
        if (found < 0) {
            fprintf(stderr, "%s: no client call has this q\n", path);
            bad++;
            kcap_snapshot_free(s);
            continue;
        }
        dumps[found].matched++;
        const char *tag = dumps[found].tag;
        size_t nmeta, n1, n2, n3, n4, n5, n6;
        char *meta = slurp(dd, tag, "meta", &nmeta);
        char *m = calloc(1, nmeta + 1);
        memcpy(m, meta, nmeta);
        void *indptr = slurp(dd, tag, "indptr", &n1), *indices = slurp(dd, tag, "indices", &n2);
        void *vis = slurp(dd, tag, "vis", &n3), *o = slurp(dd, tag, "o", &n4);
        void *lse = slurp(dd, tag, "lse", &n5), *pool = slurp(dd, tag, "pool", &n6);
        int b = 0;
        b |= cmp_tensor(s, "kv_indptr", KCAP_DIR_IN, indptr, n1, path);
        b |= cmp_tensor(s, "kv_indices", KCAP_DIR_IN, indices, n2, path);
        b |= cmp_tensor(s, "visibility", KCAP_DIR_IN, vis, n3, path);
        b |= cmp_tensor(s, "o", KCAP_DIR_OUT, o, n4, path);
        b |= cmp_tensor(s, "lse", KCAP_DIR_OUT, lse, n5, path);
        /* KV rows: row i is the pool row of slot kv_indices[i] */
        long nnz = meta_int(m, "nnz"), kvs = meta_int(m, "kv_stride");
        long isz = meta_int(m, "index_size");
        const kcap_tensor *kv = kcap_snapshot_tensor(s, "kv_cache", KCAP_DIR_IN);
        if (!kv || kv->nbytes != (size_t)nnz * 1152) {
            fprintf(stderr, "%s: kv_cache has %zu bytes, want %ld rows of 1152\n", path,
                    kv ? kv->nbytes : 0, nnz);
            b = 1;
        } else {
            for (long i = 0; i < nnz && !b; i++) {
                long slot = isz == 8 ? (long)((int64_t *)indices)[i] : (long)((int32_t *)indices)[i];
                if (memcmp((char *)kv->data + i * 1152, (char *)pool + slot * kvs * 2, 1152)) {
                    fprintf(stderr, "%s: kv_cache row %ld is not the pool row of slot %ld\n",
                            path, i, slot);
                    b = 1;
                }
            }
        }
        const kcap_scalar *sc = kcap_snapshot_scalar(s, "num_heads");
        if (!sc || sc->i != meta_int(m, "heads")) {
            fprintf(stderr, "%s: scalar num_heads wrong\n", path);
            b = 1;
        }
        sc = kcap_snapshot_scalar(s, "sm_scale");
        if (!sc || sc->f != 0.0625) {
            fprintf(stderr, "%s: scalar sm_scale wrong\n", path);
            b = 1;
        }
        if (s->meta.call_status != meta_int(m, "status") || s->meta.pid <= 0 ||
            !s->meta.lib_path[0] || strncmp(s->meta.lib_hash, "xxh64:", 6) ||
            !s->meta.time_utc[0] || !s->meta.host[0] ||
            s->meta.in_stream_capture != (meta_int(m, "graph") == 1)) {
            fprintf(stderr, "%s: metadata wrong (status %d, pid %lld, lib '%s' '%s')\n", path,
                    s->meta.call_status, (long long)s->meta.pid, s->meta.lib_path,
                    s->meta.lib_hash);
            b = 1;
        }
        bad += b;
        free(meta);
        free(m);
        free(indptr);
        free(indices);
        free(vis);
        free(o);
        free(lse);
        free(pool);
        kcap_snapshot_free(s);
    }
    closedir(d);
    for (int i = 0; i < nd; i++) {
        if (dumps[i].matched > 1 && !multi) {
            fprintf(stderr, "snapcmp: call %s captured %d times\n", dumps[i].tag, dumps[i].matched);
            bad++;
        }
        if (all && !dumps[i].matched) {
            fprintf(stderr, "snapcmp: call %s has no snapshot\n", dumps[i].tag);
            bad++;
        }
    }
    if ((expect >= 0 && nsnap != expect) || (minn >= 0 && nsnap < minn) ||
        (maxn >= 0 && nsnap > maxn)) {
        fprintf(stderr, "snapcmp: %d snapshots (expected %ld, min %ld, max %ld)\n", nsnap, expect,
                minn, maxn);
        bad++;
    }
    printf("snapcmp: %d snapshots, %d dumps, %d problems\n", nsnap, nd, bad);
    return bad ? 1 : 0;
}
