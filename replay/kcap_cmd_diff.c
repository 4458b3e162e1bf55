/*
 * kcap_cmd_diff.c — `kcap diff A B`: the replay metrics tensor by tensor (inputs and
 * outputs) between two snapshots, plus their metadata and scalar differences; two folders
 * are paired case by case by kcap_diffdir.c with this same per-pair comparison.
 *
 * B is the trusted side (the "want" of kcap_compare), as in `diff OLD NEW` read backwards:
 * typically A is a fresh capture and B the known-good one. Exit status follows diff(1):
 * 0 when every scalar and tensor agrees within tolerance, 1 when something differs, 2 on
 * trouble (unreadable file, usage). Capture metadata that always differs between two
 * captures (time, pid, seq) is shown but does not count.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "kcap_calls.h"
#include "kcap_cli.h"
#include "kcap_compare.h"
#include "kcap_diff.h"
#include "kcap_json.h"
#include "kcap_junit.h"
#include "kcap_report.h"
#include "kcap_snapshot.h"

typedef struct meta_diff {
    const char *field;
    char a[1100], b[1100];
    int counts; /* 1: a real difference (call, ABI, status); 0: informational */
} meta_diff;

#define MAX_META 24

static int collect_meta(const kcap_meta *a, const kcap_meta *b, meta_diff *out)
{
    int n = 0;
#define MS(f, c)                                                                             \
    if (strcmp(a->f, b->f) && n < MAX_META) {                                                \
        out[n].field = #f;                                                                   \
        snprintf(out[n].a, sizeof out[n].a, "%s", a->f);                                     \
        snprintf(out[n].b, sizeof out[n].b, "%s", b->f);                                     \
        out[n++].counts = c;                                                                 \
    }
#define MI(f, c)                                                                             \
    if (a->f != b->f && n < MAX_META) {                                                      \
        out[n].field = #f;                                                                   \
        snprintf(out[n].a, sizeof out[n].a, "%lld", (long long)a->f);                        \
        snprintf(out[n].b, sizeof out[n].b, "%lld", (long long)b->f);                        \
        out[n++].counts = c;                                                                 \
    }
    MS(call, 1) MI(abi_version, 1) MI(call_status, 1) MI(format_major, 0) MI(format_minor, 0)
    MS(time_utc, 0) MS(host, 0) MI(pid, 0) MI(rank, 0) MS(device_name, 0) MI(cc_major, 0)
    MI(cc_minor, 0) MI(driver_version, 0) MI(runtime_version, 0) MS(lib_path, 0)
    MS(lib_hash, 0) MI(seq, 0) MI(in_stream_capture, 0) MS(kcap_version, 0)
#undef MS
#undef MI
    return n;
}

static const char *dir_name(kcap_dir d)
{
    return d == KCAP_DIR_IN ? "in" : d == KCAP_DIR_OUT ? "out" : "cand";
}

static void shape_str(const kcap_tensor *t, char *buf, size_t n)
{
    size_t o = (size_t)snprintf(buf, n, "%s[", kcap_dtype_name(t->dtype));
    for (int d = 0; d < t->ndim && o < n; d++)
        o += (size_t)snprintf(buf + o, n - o, "%s%" PRId64, d ? "," : "", t->shape[d]);
    if (o < n)
        snprintf(buf + o, n - o, "]");
}

static int same_shape(const kcap_tensor *a, const kcap_tensor *b)
{
    if (a->dtype != b->dtype || a->ndim != b->ndim)
        return 0;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d])
            return 0;
    return 1;
}

typedef struct tdiff {
    const kcap_tensor *a, *b;
    const char *status; /* bitwise, pass, FAIL, shape, only-in-a, only-in-b */
    kcap_cmp_result r;
    kcap_cmp_tol tol;
    int has_loc;
    int64_t loc[4];
} tdiff;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: kcap diff A B [--atol A] [--rtol R] [--lse-atol A] [--lse-rtol R]\n"
            "                 [--json FILE] [--junit FILE] [-q|-v]\n"
            "       kcap diff FILE [options]     a shadow-mode snapshot: the candidate's outputs\n"
            "                                    (a) against the production outputs (b)\n"
            "\n"
            "Compares two snapshots tensor by tensor (inputs and outputs) with the metrics of\n"
            "kcap replay (B is the reference side), and lists scalar and metadata differences.\n"
            "A and B may be two folders: files are paired by relative path, the rest by\n"
            "(call, rank, seq) when that is unique on both sides; one row per pair.\n"
            "--json (-j) / --junit FILE write JSON (docs/JSON.md) / JUnit XML; - = stdout.\n"
            "--atol/--rtol apply to bf16/fp16 tensors (default %g, %g), --lse-* to fp32\n"
            "tensors (default %g, %g); integer tensors must match exactly.\n"
            "-q prints only the last line (agree / differ, or the folder counts) and errors;\n"
            "-v is the default detail (the full table of a pair, one row per folder pair).\n"
            KCAP_CLI_COMMON_HELP
            "Exit status: 0 no difference beyond tolerance, 1 differences, 2 trouble.\n",
            KCAP_CMP_ATOL_BF16, KCAP_CMP_RTOL_BF16, KCAP_CMP_ATOL_F32, KCAP_CMP_RTOL_F32);
}

/* The pair's fields (no braces, no header): shared by the file and the folder documents. */
static void write_json(FILE *f, const char *pa, const char *pb, const meta_diff *md, int nmd,
                       const kcap_snapshot *a, const kcap_snapshot *b, const tdiff *td, int ntd,
                       int same)
{
    int first = 1;
    kcap_json_key(f, &first, "a");
    kcap_json_str(f, pa);
    kcap_json_key(f, &first, "b");
    kcap_json_str(f, pb);
    kcap_json_key(f, &first, "same");
    fputs(same ? "true" : "false", f);
    kcap_json_key(f, &first, "meta");
    fputc('[', f);
    for (int i = 0; i < nmd; i++) {
        fprintf(f, "%s{\"field\":", i ? "," : "");
        kcap_json_str(f, md[i].field);
        fputs(",\"a\":", f);
        kcap_json_str(f, md[i].a);
        fputs(",\"b\":", f);
        kcap_json_str(f, md[i].b);
        fprintf(f, ",\"counts\":%s}", md[i].counts ? "true" : "false");
    }
    fputs("]", f);
    kcap_json_key(f, &first, "scalars");
    fputc('[', f);
    int ns = 0;
    for (int i = 0; i < a->nscalars; i++) {
        const kcap_scalar *sa = &a->scalars[i], *sb = kcap_snapshot_scalar(b, sa->name);
        double va = sa->type == KCAP_SC_INT ? (double)sa->i : sa->f;
        double vb = !sb ? 0 : sb->type == KCAP_SC_INT ? (double)sb->i : sb->f;
        if (sb && va == vb)
            continue;
        fprintf(f, "%s{\"name\":", ns++ ? "," : "");
        kcap_json_str(f, sa->name);
        fputs(",\"a\":", f);
        kcap_json_num(f, va);
        fputs(",\"b\":", f);
        if (sb)
            kcap_json_num(f, vb);
        else
            fputs("null", f);
        fputc('}', f);
    }
    for (int i = 0; i < b->nscalars; i++) {
        if (kcap_snapshot_scalar(a, b->scalars[i].name))
            continue;
        const kcap_scalar *sb = &b->scalars[i];
        fprintf(f, "%s{\"name\":", ns++ ? "," : "");
        kcap_json_str(f, sb->name);
        fputs(",\"a\":null,\"b\":", f);
        kcap_json_num(f, sb->type == KCAP_SC_INT ? (double)sb->i : sb->f);
        fputc('}', f);
    }
    fputs("]", f);
    kcap_json_key(f, &first, "tensors");
    fputc('[', f);
    for (int i = 0; i < ntd; i++) {
        const kcap_tensor *t = td[i].a ? td[i].a : td[i].b;
        fprintf(f, "%s\n{\"name\":", i ? "," : "");
        kcap_json_str(f, t->name);
        fputs(",\"dir\":", f);
        kcap_json_str(f, dir_name(t->dir));
        fputs(",\"status\":", f);
        kcap_json_str(f, td[i].status);
        char sa[128] = "", sb[128] = "";
        if (td[i].a)
            shape_str(td[i].a, sa, sizeof sa);
        if (td[i].b)
            shape_str(td[i].b, sb, sizeof sb);
        fputs(",\"a_shape\":", f);
        kcap_json_str(f, sa);
        fputs(",\"b_shape\":", f);
        kcap_json_str(f, sb);
        fputs(",\"metrics\":", f);
        if (td[i].a && td[i].b && same_shape(td[i].a, td[i].b))
            kcap_report_cmp_json(f, &td[i].r, &td[i].tol, t->ndim, t->shape,
                                 td[i].has_loc ? td[i].loc : NULL);
        else
            fputs("null", f);
        fputc('}', f);
    }
    fputs("]", f);
}

/* Remember the worst tensor: unmatched (shape, one side only) over failing over passing,
 * then the largest max abs difference. */
static void note_worst(kcap_diff_result *res, const tdiff *t, int *cls, double *score)
{
    const kcap_tensor *x = t->a ? t->a : t->b;
    int cmp = t->a && t->b && same_shape(t->a, t->b);
    int k = !cmp ? 2 : !t->r.pass ? 1 : 0;
    double s = cmp ? t->r.max_abs : 0;
    if (res->worst[0] && (k < *cls || (k == *cls && !(s > *score))))
        return;
    *cls = k;
    *score = s;
    snprintf(res->worst, sizeof res->worst, "%s", x->name);
    snprintf(res->verdict, sizeof res->verdict, "%s", t->status);
    res->max_abs = s;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* A shadow-mode file read twice: side a keeps the candidate's outputs (as its outputs),
 * side b the production outputs; the other set is taken out of each side. 0 (reason in res)
 * when the file holds no candidate outputs. */
static int candidate_sides(const char *path, kcap_snapshot *a, kcap_snapshot *b,
                           kcap_diff_result *res)
{
    int n = 0;
    for (int i = 0; i < a->ntensors; i++)
        n += a->tensors[i].dir == KCAP_DIR_CAND;
    if (!n) {
        snprintf(res->error, sizeof res->error, "%s: no /candidate outputs (not a shadow-mode "
                 "snapshot): give two files A B", path);
        return 0;
    }
    int k = 0;
    for (int i = 0; i < a->ntensors; i++) {
        kcap_tensor *t = &a->tensors[i];
        if (t->dir == KCAP_DIR_OUT) {
            if (t->owned) /* out of the way, freed here */
                free(t->data);
            continue;
        }
        if (t->dir == KCAP_DIR_CAND)
            t->dir = KCAP_DIR_OUT;
        a->tensors[k++] = *t;
    }
    a->ntensors = k;
    k = 0;
    for (int i = 0; i < b->ntensors; i++) {
        kcap_tensor *t = &b->tensors[i];
        if (t->dir == KCAP_DIR_CAND) {
            if (t->owned)
                free(t->data);
            continue;
        }
        b->tensors[k++] = *t;
    }
    b->ntensors = k;
    return 1;
}

int kcap_diff_pair(const char *pa, const char *pb, const kcap_diff_opts *o, FILE *table,
                   FILE *json, kcap_diff_result *res)
{
    memset(res, 0, sizeof *res);
    double t0 = now_ms();
    kcap_snapshot *a = NULL, *b = NULL;
    kcap_error err = {0};
    if (kcap_snapshot_read(pa, &a, &err) || kcap_snapshot_read(pb, &b, &err)) {
        if (!strstr(err.msg, a ? pb : pa))
            kcap_error_prefix(&err, "%s", a ? pb : pa);
        snprintf(res->error, sizeof res->error, "%s", err.msg);
        kcap_snapshot_free(a);
        kcap_snapshot_free(b);
        res->wall_ms = now_ms() - t0;
        return res->status = 2;
    }
    if (o->candidate && !candidate_sides(pa, a, b, res)) {
        kcap_snapshot_free(a);
        kcap_snapshot_free(b);
        res->wall_ms = now_ms() - t0;
        return res->status = 2;
    }
    FILE *devnull = NULL;
    if (!table && !(table = devnull = fopen("/dev/null", "w"))) {
        snprintf(res->error, sizeof res->error, "cannot open /dev/null");
        kcap_snapshot_free(a);
        kcap_snapshot_free(b);
        return res->status = 2;
    }

    int differs = 0;
    meta_diff md[MAX_META];
    int nmd = collect_meta(&a->meta, &b->meta, md);
    if (o->candidate)
        fprintf(table, "kcap diff %s: the candidate's outputs (a) vs production's (b, reference)\n",
                kcap_shown(pa));
    else
        fprintf(table, "kcap diff %s (a) vs %s (b, reference)\n", kcap_shown(pa), kcap_shown(pb));
    for (int i = 0; i < nmd; i++) {
        fprintf(table, "  meta %-18s a=%s  b=%s%s\n", md[i].field, kcap_shown(md[i].a), kcap_shown(md[i].b),
                md[i].counts ? "" : "  (informational)");
        if (md[i].counts && !differs)
            snprintf(res->error, sizeof res->error, "meta %s differs", md[i].field);
        differs |= md[i].counts;
    }
    for (int i = 0; i < a->nscalars; i++) {
        const kcap_scalar *sa = &a->scalars[i], *sb = kcap_snapshot_scalar(b, sa->name);
        double va = sa->type == KCAP_SC_INT ? (double)sa->i : sa->f;
        double vb = !sb ? 0 : sb->type == KCAP_SC_INT ? (double)sb->i : sb->f;
        if (!sb)
            fprintf(table, "  scalar %-16s a=%.9g  b=(absent)\n", sa->name, va);
        else if (va != vb)
            fprintf(table, "  scalar %-16s a=%.9g  b=%.9g\n", sa->name, va, vb);
        if ((!sb || va != vb) && !differs)
            snprintf(res->error, sizeof res->error, "scalar %s differs", sa->name);
        differs |= !sb || va != vb;
    }
    for (int i = 0; i < b->nscalars; i++)
        if (!kcap_snapshot_scalar(a, b->scalars[i].name)) {
            fprintf(table, "  scalar %-16s a=(absent)  b=%.9g\n", b->scalars[i].name,
                    b->scalars[i].type == KCAP_SC_INT ? (double)b->scalars[i].i
                                                      : b->scalars[i].f);
            if (!differs)
                snprintf(res->error, sizeof res->error, "scalar %s only in b",
                         b->scalars[i].name);
            differs = 1;
        }

    tdiff *td = calloc((size_t)(a->ntensors + b->ntensors + 1), sizeof *td);
    if (!td) {
        snprintf(res->error, sizeof res->error, "out of memory");
        kcap_snapshot_free(a);
        kcap_snapshot_free(b);
        if (devnull)
            fclose(devnull);
        return res->status = 2;
    }
    int ntd = 0;
    for (int i = 0; i < a->ntensors; i++) {
        tdiff *t = &td[ntd++];
        t->a = &a->tensors[i];
        t->b = kcap_snapshot_tensor(b, t->a->name, t->a->dir);
        if (!t->b) {
            t->status = "only-in-a";
        } else if (!same_shape(t->a, t->b)) {
            t->status = "shape";
        } else {
            kcap_dtype dt = t->a->dtype;
            t->tol = (dt == KCAP_DT_BF16 || dt == KCAP_DT_F16) ? o->half
                     : (dt == KCAP_DT_F32 || dt == KCAP_DT_F64) ? o->f32
                                                                : kcap_cmp_default_tol(dt);
            size_t es = kcap_dtype_size(dt);
            kcap_compare(dt, t->a->data, t->b->data, es ? t->a->nbytes / es : 0, &t->tol, &t->r);
            t->status = kcap_cmp_verdict(&t->r);
            int64_t ql;
            /* token-major tensors (the description says which) get a (request, token, head,
               channel) location too */
            if (t->r.worst >= 0 &&
                kcap_call_tokens_per_request(kcap_call_find(b->meta.call), b, t->b->name, &ql))
                t->has_loc = !kcap_cmp_locate(t->r.worst, t->a->ndim, t->a->shape, ql, t->loc);
        }
    }
    for (int i = 0; i < b->ntensors; i++)
        if (!kcap_snapshot_tensor(a, b->tensors[i].name, b->tensors[i].dir)) {
            td[ntd].b = &b->tensors[i];
            td[ntd++].status = "only-in-b";
        }

    fprintf(table, "  %-12s %-4s %-26s %-9s %10s %10s %10s %12s %9s  %s\n", "tensor", "dir",
            "shape", "verdict", "max_abs", "max_rel", "rel_l2", "cosine", "beyond", "worst");
    double score = 0;
    int cls = 0;
    for (int i = 0; i < ntd; i++) {
        tdiff *t = &td[i];
        const kcap_tensor *x = t->a ? t->a : t->b;
        char sh[128];
        shape_str(x, sh, sizeof sh);
        int cmp = t->a && t->b && same_shape(t->a, t->b);
        note_worst(res, t, &cls, &score);
        if ((!cmp || !t->r.pass) && !differs)
            snprintf(res->error, sizeof res->error, "tensor %s (%s): %s", x->name,
                     dir_name(x->dir), t->status);
        differs |= !cmp || !t->r.pass;
        if (!cmp) {
            char sb[128] = "";
            if (t->a && t->b)
                shape_str(t->b, sb, sizeof sb);
            fprintf(table, "  %-12s %-4s %-26s %-9s %s%s\n", x->name, dir_name(x->dir), sh,
                    t->status, sb[0] ? "b is " : "", sb);
            continue;
        }
        char where[160] = "-";
        if (t->r.worst >= 0) {
            int64_t idx[KCAP_MAX_DIMS] = {0};
            kcap_cmp_unravel(t->r.worst, x->ndim, x->shape, idx);
            int w = snprintf(where, sizeof where, "[");
            for (int d = 0; d < x->ndim; d++)
                w += snprintf(where + w, sizeof where - (size_t)w, "%s%" PRId64, d ? "," : "",
                              idx[d]);
            w += snprintf(where + w, sizeof where - (size_t)w, "]");
            if (t->has_loc)
                w += snprintf(where + w, sizeof where - (size_t)w,
                              " (r%" PRId64 ",t%" PRId64 ",h%" PRId64 ",c%" PRId64 ")",
                              t->loc[0], t->loc[1], t->loc[2], t->loc[3]);
            snprintf(where + w, sizeof where - (size_t)w, " a=%.6g b=%.6g", t->r.worst_got,
                     t->r.worst_want);
        }
        char beyond[40];
        if (t->r.nonfinite_mismatch)
            snprintf(beyond, sizeof beyond, "%zu+%zuNaN", t->r.n_beyond, t->r.nonfinite_mismatch);
        else
            snprintf(beyond, sizeof beyond, "%zu", t->r.n_beyond);
        fprintf(table, "  %-12s %-4s %-26s %-9s %10.3e %10.3e %10.3e %12.8f %9s  %s\n", x->name,
                dir_name(x->dir), sh, t->status, t->r.max_abs, t->r.max_rel, t->r.rel_l2,
                t->r.cosine, beyond, where);
    }
    fprintf(table, "%s\n", differs ? "snapshots differ" : "snapshots agree (within tolerance)");
    if (!differs)
        res->error[0] = '\0';
    if (json)
        write_json(json, pa, pb, md, nmd, a, b, td, ntd, !differs);
    free(td);
    kcap_snapshot_free(a);
    kcap_snapshot_free(b);
    if (devnull)
        fclose(devnull);
    res->wall_ms = now_ms() - t0;
    return res->status = differs ? 1 : 0;
}

int kcap_diff_junit(const kcap_diff_opts *o, const char *const *names,
                    const kcap_diff_result *res, int n, double wall_ms)
{
    kcap_junit_case *jc = calloc((size_t)(n ? n : 1), sizeof *jc);
    if (!jc) {
        fprintf(stderr, "kcap diff: out of memory for --junit\n");
        return KCAP_ERR_NOMEM;
    }
    for (int i = 0; i < n; i++) {
        jc[i].classname = "kcap.diff";
        jc[i].name = names[i];
        jc[i].time_s = res[i].wall_ms / 1e3;
        jc[i].status = res[i].status == 0   ? KCAP_JUNIT_PASS
                       : res[i].status == 1 ? KCAP_JUNIT_FAIL
                                            : KCAP_JUNIT_ERROR;
        jc[i].message = res[i].error;
        jc[i].detail = res[i].error;
    }
    kcap_error err = {0};
    int rc = kcap_junit_write(o->junit, "kcap diff", jc, n, wall_ms / 1e3, &err);
    if (rc)
        fprintf(stderr, "kcap diff: %s\n", kcap_shown(err.msg));
    free(jc);
    return rc;
}

/* Single pair: the full table, then the documents. */
static int diff_files(const char *pa, const char *pb, const kcap_diff_opts *o)
{
    kcap_error err = {0};
    kcap_doc doc = {0};
    if (o->json && kcap_doc_open(&doc, o->json, "--json", &err)) {
        fprintf(stderr, "kcap diff: %s\n", kcap_shown(err.msg));
        return 2;
    }
    int first = 1;
    if (doc.f) {
        fputc('{', doc.f);
        kcap_json_header(doc.f, &first, "kcap diff");
        fputc(',', doc.f);
    }
    kcap_diff_result res;
    int status = kcap_diff_pair(pa, pb, o, o->out, doc.f, &res);
    if (status == 2)
        fprintf(stderr, "kcap diff: %s\n", kcap_shown(res.error));
    if (doc.f) {
        if (status == 2) { /* no pair fields were written: "error" follows the ',' */
            int ef = 1;
            kcap_json_key(doc.f, &ef, "error");
            kcap_json_str(doc.f, res.error);
        }
        fputs("}\n", doc.f);
        if (kcap_doc_close(&doc, &err)) {
            fprintf(stderr, "kcap diff: %s\n", kcap_shown(err.msg));
            status = 2;
        }
    }
    const char *name = strrchr(pa, '/') ? strrchr(pa, '/') + 1 : pa;
    if (o->junit && kcap_diff_junit(o, &name, &res, 1, res.wall_ms))
        status = 2;
    return status;
}

static int is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* -q: the table goes to memory and only its last line (the verdict) is shown. */
static void print_last_line(FILE *to, const char *buf, size_t len)
{
    while (len && buf[len - 1] == '\n')
        len--;
    size_t start = len;
    while (start && buf[start - 1] != '\n')
        start--;
    if (len > start)
        fprintf(to, "%.*s\n", (int)(len - start), buf + start);
}

int kcap_cmd_diff(int argc, char **argv)
{
    static const struct option lo[] = {{"atol", required_argument, 0, 'a'},
                                       {"rtol", required_argument, 0, 'r'},
                                       {"lse-atol", required_argument, 0, 'A'},
                                       {"lse-rtol", required_argument, 0, 'R'},
                                       {"json", required_argument, 0, 'j'},
                                       {"junit", required_argument, 0, 'J'},
                                       KCAP_CLI_COMMON_OPTS};
    kcap_diff_opts o = {.half = kcap_cmp_default_tol(KCAP_DT_BF16),
                        .f32 = kcap_cmp_default_tol(KCAP_DT_F32)};
    int verbosity = KCAP_NORMAL, ch;
    optind = 0;
    while ((ch = kcap_cli_getopt("diff", argc, argv, "j:" KCAP_CLI_COMMON_SHORT, lo)) != -1) {
        int bad = 0;
        switch (ch) {
        case 'a': bad = kcap_cli_number("diff", "--atol", optarg, &o.half.atol); break;
        case 'r': bad = kcap_cli_number("diff", "--rtol", optarg, &o.half.rtol); break;
        case 'A': bad = kcap_cli_number("diff", "--lse-atol", optarg, &o.f32.atol); break;
        case 'R': bad = kcap_cli_number("diff", "--lse-rtol", optarg, &o.f32.rtol); break;
        case 'j': o.json = optarg; break;
        case 'J': o.junit = optarg; break;
        case 'h': usage(stdout); return 0;
        case 'q':
        case 'v': kcap_cli_verbosity(ch, &verbosity); break;
        default: return 2; /* kcap_cli_getopt said what */
        }
        if (bad)
            return 2;
    }
    if (argc - optind == 1 && !is_dir(argv[optind])) {
        o.candidate = 1; /* one file: its two output sets */
    } else if (argc - optind != 2) {
        if (argc - optind > 2)
            kcap_cli_usage_error("diff", "two paths A B, not %d", argc - optind);
        else
            usage(stderr);
        return 2;
    }
    if (kcap_doc_is_stdout(o.json) && kcap_doc_is_stdout(o.junit)) {
        kcap_cli_usage_error("diff", "--json - and --junit - cannot both use stdout");
        return 2;
    }
    FILE *table = kcap_doc_is_stdout(o.json) || kcap_doc_is_stdout(o.junit) ? stderr : stdout;
    char *held = NULL;
    size_t held_len = 0;
    o.out = verbosity == KCAP_QUIET ? open_memstream(&held, &held_len) : table;
    if (!o.out) {
        fprintf(stderr, "kcap diff: out of memory\n");
        return 2;
    }
    const char *pa = argv[optind], *pb = argv[optind + (o.candidate ? 0 : 1)];
    int da = is_dir(pa), db = is_dir(pb), rc;
    if (da != db) {
        fprintf(stderr, "kcap diff: %s is a %s but %s is not: compare two files or two "
                        "folders\n", kcap_shown(da ? pa : pb), "folder", kcap_shown(da ? pb : pa));
        rc = 2;
    } else {
        rc = da ? kcap_diff_dirs(pa, pb, &o) : diff_files(pa, pb, &o);
    }
    if (o.out != table) {
        fclose(o.out);
        print_last_line(table, held, held_len);
        free(held);
    }
    return rc;
}
