/*
 * kcap_cmd_diff.c — `kcap diff A.h5 B.h5`: the replay metrics tensor by tensor (inputs and
 * outputs) between two snapshots, plus their metadata and scalar differences.
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

#include "kcap_calls.h"
#include "kcap_cli.h"
#include "kcap_compare.h"
#include "kcap_json.h"
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

static const char *dir_name(kcap_dir d) { return d == KCAP_DIR_IN ? "in" : "out"; }

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

/* Token-major tensors (first dimension bs*q_len, not a pool) get a (request, token, head,
 * channel) location too. */
static int token_major(const kcap_snapshot *s, const kcap_tensor *t, int64_t *q_len)
{
    const kcap_scalar *bs = kcap_snapshot_scalar(s, "bs"), *ql = kcap_snapshot_scalar(s, "q_len");
    const kcap_call_desc *d = kcap_call_find(s->meta.call);
    if (!bs || !ql || ql->i < 1 || t->ndim < 2 || t->shape[0] != bs->i * ql->i)
        return 0;
    for (int i = 0; d && i < d->nargs; i++)
        if (!strcmp(d->args[i].name, t->name) && d->args[i].gather == KCAP_GATHER_ROWS)
            return 0;
    *q_len = ql->i;
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
            "usage: kcap diff A.h5 B.h5 [--atol A] [--rtol R] [--lse-atol A] [--lse-rtol R]\n"
            "                 [--json FILE]\n"
            "\n"
            "Compares two snapshots tensor by tensor (inputs and outputs) with the metrics of\n"
            "kcap replay (B is the reference side), and lists scalar and metadata differences.\n"
            "--atol/--rtol apply to bf16/fp16 tensors (default %g, %g), --lse-* to fp32\n"
            "tensors (default %g, %g); integer tensors must match exactly.\n"
            "Exit status: 0 no difference beyond tolerance, 1 differences, 2 trouble.\n",
            KCAP_CMP_ATOL_BF16, KCAP_CMP_RTOL_BF16, KCAP_CMP_ATOL_F32, KCAP_CMP_RTOL_F32);
}

static int num_arg(const char *opt, const char *s, double *v)
{
    char *end;
    *v = strtod(s, &end);
    if (!*s || *end || !(*v >= 0)) {
        fprintf(stderr, "kcap diff: %s: '%s' is not a non-negative number\n", opt, s);
        return -1;
    }
    return 0;
}

static void write_json(FILE *f, const char *pa, const char *pb, const meta_diff *md, int nmd,
                       const kcap_snapshot *a, const kcap_snapshot *b, const tdiff *td, int ntd,
                       int same)
{
    int first = 1;
    fputc('{', f);
    kcap_json_key(f, &first, "tool");
    kcap_json_str(f, "kcap diff");
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
    fputs("]}\n", f);
}

int kcap_cmd_diff(int argc, char **argv)
{
    static const struct option lo[] = {{"atol", required_argument, 0, 'a'},
                                       {"rtol", required_argument, 0, 'r'},
                                       {"lse-atol", required_argument, 0, 'A'},
                                       {"lse-rtol", required_argument, 0, 'R'},
                                       {"json", required_argument, 0, 'j'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
    kcap_cmp_tol th = kcap_cmp_default_tol(KCAP_DT_BF16), tf = kcap_cmp_default_tol(KCAP_DT_F32);
    const char *json = NULL;
    optind = 0;
    opterr = 0;
    int ch;
    while ((ch = getopt_long(argc, argv, ":h", lo, NULL)) != -1) {
        int bad = 0;
        switch (ch) {
        case 'a': bad = num_arg("--atol", optarg, &th.atol); break;
        case 'r': bad = num_arg("--rtol", optarg, &th.rtol); break;
        case 'A': bad = num_arg("--lse-atol", optarg, &tf.atol); break;
        case 'R': bad = num_arg("--lse-rtol", optarg, &tf.rtol); break;
        case 'j': json = optarg; break;
        case 'h': usage(stdout); return 0;
        case ':':
            fprintf(stderr, "kcap diff: option %s needs a value\n", argv[optind - 1]);
            return 2;
        default:
            fprintf(stderr, "kcap diff: unknown option '%s'\n", argv[optind - 1]);
            return 2;
        }
        if (bad)
            return 2;
    }
    if (argc - optind != 2) {
        usage(stderr);
        return 2;
    }
    const char *pa = argv[optind], *pb = argv[optind + 1];
    kcap_snapshot *a = NULL, *b = NULL;
    kcap_error err = {0};
    if (kcap_snapshot_read(pa, &a, &err) || kcap_snapshot_read(pb, &b, &err)) {
        if (!strstr(err.msg, a ? pb : pa))
            kcap_error_prefix(&err, "%s", a ? pb : pa);
        fprintf(stderr, "kcap diff: %s\n", err.msg);
        kcap_snapshot_free(a);
        kcap_snapshot_free(b);
        return 2;
    }

    int differs = 0;
    meta_diff md[MAX_META];
    int nmd = collect_meta(&a->meta, &b->meta, md);
    printf("kcap diff %s (a) vs %s (b, reference)\n", pa, pb);
    for (int i = 0; i < nmd; i++) {
        printf("  meta %-18s a=%s  b=%s%s\n", md[i].field, md[i].a, md[i].b,
               md[i].counts ? "" : "  (informational)");
        differs |= md[i].counts;
    }
    for (int i = 0; i < a->nscalars; i++) {
        const kcap_scalar *sa = &a->scalars[i], *sb = kcap_snapshot_scalar(b, sa->name);
        double va = sa->type == KCAP_SC_INT ? (double)sa->i : sa->f;
        double vb = !sb ? 0 : sb->type == KCAP_SC_INT ? (double)sb->i : sb->f;
        if (!sb)
            printf("  scalar %-16s a=%.9g  b=(absent)\n", sa->name, va);
        else if (va != vb)
            printf("  scalar %-16s a=%.9g  b=%.9g\n", sa->name, va, vb);
        differs |= !sb || va != vb;
    }
    for (int i = 0; i < b->nscalars; i++)
        if (!kcap_snapshot_scalar(a, b->scalars[i].name)) {
            printf("  scalar %-16s a=(absent)  b=%.9g\n", b->scalars[i].name,
                   b->scalars[i].type == KCAP_SC_INT ? (double)b->scalars[i].i : b->scalars[i].f);
            differs = 1;
        }

    tdiff *td = calloc((size_t)(a->ntensors + b->ntensors + 1), sizeof *td);
    if (!td) {
        fprintf(stderr, "kcap diff: out of memory\n");
        kcap_snapshot_free(a);
        kcap_snapshot_free(b);
        return 2;
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
            t->tol = (dt == KCAP_DT_BF16 || dt == KCAP_DT_F16) ? th
                     : (dt == KCAP_DT_F32 || dt == KCAP_DT_F64) ? tf
                                                                : kcap_cmp_default_tol(dt);
            size_t es = kcap_dtype_size(dt);
            kcap_compare(dt, t->a->data, t->b->data, es ? t->a->nbytes / es : 0, &t->tol, &t->r);
            t->status = kcap_cmp_verdict(&t->r);
            int64_t ql;
            if (t->r.worst >= 0 && token_major(b, t->b, &ql))
                t->has_loc = !kcap_cmp_locate(t->r.worst, t->a->ndim, t->a->shape, ql, t->loc);
        }
    }
    for (int i = 0; i < b->ntensors; i++)
        if (!kcap_snapshot_tensor(a, b->tensors[i].name, b->tensors[i].dir)) {
            td[ntd].b = &b->tensors[i];
            td[ntd++].status = "only-in-b";
        }

    printf("  %-12s %-4s %-26s %-9s %10s %10s %10s %12s %9s  %s\n", "tensor", "dir", "shape",
           "verdict", "max_abs", "max_rel", "rel_l2", "cosine", "beyond", "worst");
    for (int i = 0; i < ntd; i++) {
        tdiff *t = &td[i];
        const kcap_tensor *x = t->a ? t->a : t->b;
        char sh[128];
        shape_str(x, sh, sizeof sh);
        int cmp = t->a && t->b && same_shape(t->a, t->b);
        differs |= !cmp || !t->r.pass;
        if (!cmp) {
            char sb[128] = "";
            if (t->a && t->b)
                shape_str(t->b, sb, sizeof sb);
            printf("  %-12s %-4s %-26s %-9s %s%s\n", x->name, dir_name(x->dir), sh, t->status,
                   sb[0] ? "b is " : "", sb);
            continue;
        }
        char where[160] = "-";
        if (t->r.worst >= 0) {
            int64_t idx[KCAP_MAX_DIMS] = {0};
            kcap_cmp_unravel(t->r.worst, x->ndim, x->shape, idx);
            int o = snprintf(where, sizeof where, "[");
            for (int d = 0; d < x->ndim; d++)
                o += snprintf(where + o, sizeof where - (size_t)o, "%s%" PRId64, d ? "," : "",
                              idx[d]);
            o += snprintf(where + o, sizeof where - (size_t)o, "]");
            if (t->has_loc)
                o += snprintf(where + o, sizeof where - (size_t)o,
                              " (r%" PRId64 ",t%" PRId64 ",h%" PRId64 ",c%" PRId64 ")",
                              t->loc[0], t->loc[1], t->loc[2], t->loc[3]);
            snprintf(where + o, sizeof where - (size_t)o, " a=%.6g b=%.6g", t->r.worst_got,
                     t->r.worst_want);
        }
        char beyond[40];
        if (t->r.nonfinite_mismatch)
            snprintf(beyond, sizeof beyond, "%zu+%zuNaN", t->r.n_beyond, t->r.nonfinite_mismatch);
        else
            snprintf(beyond, sizeof beyond, "%zu", t->r.n_beyond);
        printf("  %-12s %-4s %-26s %-9s %10.3e %10.3e %10.3e %12.8f %9s  %s\n", x->name,
               dir_name(x->dir), sh, t->status, t->r.max_abs, t->r.max_rel, t->r.rel_l2,
               t->r.cosine, beyond, where);
    }
    printf("%s\n", differs ? "snapshots differ" : "snapshots agree (within tolerance)");

    int status = differs ? 1 : 0;
    if (json) {
        FILE *f = fopen(json, "w");
        if (!f) {
            fprintf(stderr, "kcap diff: --json %s: cannot write\n", json);
            status = 2;
        } else {
            write_json(f, pa, pb, md, nmd, a, b, td, ntd, !differs);
            if (fclose(f) != 0) {
                fprintf(stderr, "kcap diff: --json %s: write failed\n", json);
                status = 2;
            }
        }
    }
    free(td);
    kcap_snapshot_free(a);
    kcap_snapshot_free(b);
    return status;
}
