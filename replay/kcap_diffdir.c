/*
 * kcap_diffdir.c — `kcap diff DIR_A DIR_B`: pair the snapshots of two folders and diff
 * every pair (kcap_diff_pair), one row per pair, then the unpaired files.
 *
 * Pairing: first by relative path (two --save-outputs folders of two builds, or a folder
 * and its copy), then, among the files left, by (call, rank, seq) from the header when
 * that key is unique on both sides (two captures of the same workload under different
 * file names). Anything left is "only in a/b" and counts as a difference: a case that
 * vanished from a corpus must not pass silently.
 *
 * File names are bytes: the table prints them (and messages holding them) through
 * kcap_printable, as check, ls and replay do, and the JSON through kcap_json_str.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kcap_diff.h"
#include "kcap_json.h"
#include "kcap_snapfiles.h"

typedef struct entry {
    const char *path, *rel;
    int have_key;
    char call[KCAP_NAME_MAX];
    int rank;
    uint64_t seq;
    int pair;        /* index into the other side, -1 if unpaired */
    const char *how; /* "path" or "call+seq" */
} entry;

static int load_side(const char *dir, kcap_snapfiles *files, entry **out)
{
    char *args[1] = {(char *)dir};
    kcap_error err = {0};
    if (kcap_snapfiles_collect(args, 1, files, &err)) {
        fprintf(stderr, "kcap diff: %s\n", kcap_shown(err.msg));
        return -1;
    }
    entry *e = calloc((size_t)(files->n ? files->n : 1), sizeof *e);
    if (!e) {
        fprintf(stderr, "kcap diff: out of memory\n");
        return -1;
    }
    size_t dl = strlen(dir);
    for (int i = 0; i < files->n; i++) {
        const char *p = files->paths[i];
        e[i].path = p;
        e[i].rel = !strncmp(p, dir, dl) ? p + dl + (p[dl] == '/') : p;
        e[i].pair = -1;
        kcap_snapshot *h = NULL;
        kcap_error he = {0};
        if (kcap_snapshot_read_header(p, &h, NULL, &he) == KCAP_OK) {
            e[i].have_key = 1;
            snprintf(e[i].call, sizeof e[i].call, "%s", h->meta.call);
            e[i].rank = h->meta.rank;
            e[i].seq = h->meta.seq;
        }
        kcap_snapshot_free(h);
    }
    *out = e;
    return 0;
}

static int same_key(const entry *x, const entry *y)
{
    return x->have_key && y->have_key && !strcmp(x->call, y->call) && x->rank == y->rank &&
           x->seq == y->seq;
}

/* How many unpaired entries of side v (n of them) share x's key. */
static int key_count(const entry *x, const entry *v, int n)
{
    int c = 0;
    for (int i = 0; i < n; i++)
        c += v[i].pair < 0 && same_key(x, &v[i]);
    return c;
}

static void pair_up(entry *a, int na, entry *b, int nb)
{
    for (int i = 0; i < na; i++)
        for (int j = 0; j < nb; j++)
            if (b[j].pair < 0 && !strcmp(a[i].rel, b[j].rel)) {
                a[i].pair = j, b[j].pair = i;
                a[i].how = b[j].how = "path";
                break;
            }
    for (int i = 0; i < na; i++) {
        if (a[i].pair >= 0 || key_count(&a[i], a, na) != 1 || key_count(&a[i], b, nb) != 1)
            continue;
        for (int j = 0; j < nb; j++)
            if (b[j].pair < 0 && same_key(&a[i], &b[j])) {
                a[i].pair = j, b[j].pair = i;
                a[i].how = b[j].how = "call+seq";
                break;
            }
    }
}

static void json_only(FILE *f, int *first, const char *key, const entry *v, int n)
{
    kcap_json_key(f, first, key);
    fputc('[', f);
    for (int i = 0, k = 0; i < n; i++)
        if (v[i].pair < 0) {
            if (k++)
                fputc(',', f);
            kcap_json_str(f, v[i].path);
        }
    fputc(']', f);
}

int kcap_diff_dirs(const char *da, const char *db, const kcap_diff_opts *o)
{
    kcap_snapfiles fa = {0}, fb = {0};
    entry *a = NULL, *b = NULL;
    kcap_diff_result *res = NULL;
    const char **names = NULL;
    int status = 2, ncase = 0;
    kcap_doc doc = {0};
    kcap_error err = {0};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (load_side(da, &fa, &a) || load_side(db, &fb, &b))
        goto out;
    if (fa.n + fb.n == 0) {
        fprintf(stderr, "kcap diff: no snapshots (*.h5) in %s or %s\n", kcap_shown(da), kcap_shown(db));
        goto out;
    }
    pair_up(a, fa.n, b, fb.n);
    res = calloc((size_t)(fa.n + fb.n), sizeof *res);
    names = calloc((size_t)(fa.n + fb.n), sizeof *names);
    if (!res || !names) {
        fprintf(stderr, "kcap diff: out of memory\n");
        goto out;
    }
    if (o->json && kcap_doc_open(&doc, o->json, "--json", &err)) {
        fprintf(stderr, "kcap diff: %s\n", kcap_shown(err.msg));
        goto out;
    }
    int first = 1;
    if (doc.f) {
        fputc('{', doc.f);
        kcap_json_header(doc.f, &first, "kcap diff");
        kcap_json_key(doc.f, &first, "a");
        kcap_json_str(doc.f, da);
        kcap_json_key(doc.f, &first, "b");
        kcap_json_str(doc.f, db);
        kcap_json_key(doc.f, &first, "pairs");
        fputc('[', doc.f);
    }
    fprintf(o->out, "kcap diff %s (a) vs %s (b, reference)\n", kcap_shown(da), kcap_shown(db));
    fprintf(o->out, "  %-34s %-34s %-9s %-8s %-12s %-10s %10s\n", "a", "b", "paired", "result",
            "worst", "verdict", "max_abs");
    int nagree = 0, ndiff = 0, nerr = 0, nonly = 0;
    for (int i = 0; i < fa.n; i++) {
        if (a[i].pair < 0)
            continue;
        const entry *y = &b[a[i].pair];
        kcap_diff_result *r = &res[ncase];
        names[ncase++] = a[i].rel;
        if (doc.f) {
            fprintf(doc.f, "%s\n{\"paired_by\":", ncase > 1 ? "," : "");
            kcap_json_str(doc.f, a[i].how);
            fputs(",\"diff\":{", doc.f);
        }
        kcap_diff_pair(a[i].path, y->path, o, NULL, doc.f, r);
        if (doc.f) {
            fputc('}', doc.f);
            kcap_json_key(doc.f, &(int){0}, "status");
            kcap_json_str(doc.f, r->status == 0 ? "agree" : r->status == 1 ? "differ" : "error");
            kcap_json_key(doc.f, &(int){0}, "error");
            kcap_json_str(doc.f, r->error);
            fputc('}', doc.f);
        }
        nagree += r->status == 0;
        ndiff += r->status == 1;
        nerr += r->status == 2;
        fprintf(o->out, "  %-34s %-34s %-9s %-8s %-12s %-10s %10.3e\n", kcap_shown(a[i].rel),
                kcap_shown(y->rel), a[i].how,
                r->status == 0 ? "agree" : r->status == 1 ? "DIFFER" : "ERROR",
                r->worst[0] ? r->worst : "-", r->verdict[0] ? r->verdict : "-", r->max_abs);
        if (r->status)
            fprintf(o->out, "      %s\n", kcap_shown(r->error));
    }
    for (int s = 0; s < 2; s++) {
        const entry *v = s ? b : a;
        for (int i = 0; i < (s ? fb.n : fa.n); i++) {
            if (v[i].pair >= 0)
                continue;
            kcap_diff_result *r = &res[ncase];
            names[ncase++] = v[i].rel;
            r->status = 1;
            snprintf(r->error, sizeof r->error, "only in %s: no file of %s pairs with %s",
                     s ? "b" : "a", s ? da : db, v[i].path);
            fprintf(o->out, "  only in %s: %s\n", s ? "b" : "a", kcap_shown(v[i].path));
            nonly++;
        }
    }
    fprintf(o->out, "%d pairs: %d agree, %d differ, %d errors; %d unpaired\n",
            nagree + ndiff + nerr, nagree, ndiff, nerr, nonly);
    status = nerr ? 2 : (ndiff || nonly) ? 1 : 0;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double wall = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
    if (doc.f) {
        fputc(']', doc.f);
        json_only(doc.f, &first, "only_in_a", a, fa.n);
        json_only(doc.f, &first, "only_in_b", b, fb.n);
        kcap_json_key(doc.f, &first, "summary");
        fprintf(doc.f, "{\"pairs\":%d,\"agree\":%d,\"differ\":%d,\"errors\":%d,\"unpaired\":%d}",
                nagree + ndiff + nerr, nagree, ndiff, nerr, nonly);
        kcap_json_key(doc.f, &first, "same");
        fputs(status == 0 ? "true" : "false", doc.f);
        fputs("}\n", doc.f);
        if (kcap_doc_close(&doc, &err)) {
            fprintf(stderr, "kcap diff: %s\n", kcap_shown(err.msg));
            status = 2;
        }
    }
    if (o->junit && kcap_diff_junit(o, names, res, ncase, wall))
        status = 2;
out:
    if (doc.f && doc.f != stdout)
        fclose(doc.f);
    free(res);
    free(names);
    free(a);
    free(b);
    kcap_snapfiles_free(&fa);
    kcap_snapfiles_free(&fb);
    return status;
}
