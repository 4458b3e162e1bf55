/*
 * kcap_report.c — terminal table, progress line and JSON of a replay run (kcap_report.h).
 *
 * A row keeps to the one number a kernel developer looks at first (the worst tensor's
 * max abs error and cosine, or where it failed); everything else is in the details block
 * printed under the table for failing cases, and in the JSON.
 */
#include "kcap_report.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "kcap_json.h"

void kcap_report_loc(const kcap_tensor_verdict *tv, char *buf, size_t n)
{
    if (tv->r.worst < 0) {
        snprintf(buf, n, "-");
    } else if (tv->has_loc) {
        if (tv->loc[3] >= 0)
            snprintf(buf, n, "(r%" PRId64 ",t%" PRId64 ",h%" PRId64 ",c%" PRId64 ")", tv->loc[0],
                     tv->loc[1], tv->loc[2], tv->loc[3]);
        else
            snprintf(buf, n, "(r%" PRId64 ",t%" PRId64 ",h%" PRId64 ")", tv->loc[0],
                     tv->loc[1], tv->loc[2]);
    } else {
        snprintf(buf, n, "[%" PRId64 "]", tv->r.worst);
    }
}

static void shape_cell(const kcap_case_result *c, char *buf, size_t n)
{
    if (c->bs < 0) {
        snprintf(buf, n, "-");
        return;
    }
    snprintf(buf, n, "bs%" PRId64 " q%" PRId64 " h%" PRId64 " kv%" PRId64 " %s %s%s%s", c->bs,
             c->q_len, c->num_heads, c->kv_total, c->index_type, c->tree ? "tree" : "causal",
             strcmp(c->dtype, "bf16") ? " " : "", strcmp(c->dtype, "bf16") ? c->dtype : "");
}

/* The tensor a side's cell talks about: the first failing one, else the first inexact one. */
static const kcap_tensor_verdict *headline(const kcap_side_verdict *v)
{
    for (int i = 0; i < v->nout; i++)
        if (!v->out[i].r.pass)
            return &v->out[i];
    for (int i = 0; i < v->nout; i++)
        if (!v->out[i].r.bitwise)
            return &v->out[i];
    return v->nout ? &v->out[0] : NULL;
}

static void side_cell(const kcap_side_verdict *v, int requested, char *buf, size_t n)
{
    if (!requested) {
        snprintf(buf, n, "-");
        return;
    }
    if (!v->ran) {
        snprintf(buf, n, "ERROR (below)");
        return;
    }
    if (v->error[0] && !v->nout) { /* a status-only verdict */
        snprintf(buf, n, "%s", v->pass ? "same status" : "FAIL status");
        return;
    }
    if (v->bitwise) {
        snprintf(buf, n, "bitwise");
        return;
    }
    const kcap_tensor_verdict *t = headline(v);
    if (!t) {
        snprintf(buf, n, "%s", v->pass ? "pass" : "FAIL");
        return;
    }
    char loc[64];
    kcap_report_loc(t, loc, sizeof loc);
    if (v->pass)
        snprintf(buf, n, "pass %s abs=%.2e cos=%.6f", t->name, t->r.max_abs, t->r.cosine);
    else if (t->r.nonfinite_mismatch)
        snprintf(buf, n, "FAIL %s %zu NaN/Inf@%s", t->name, t->r.nonfinite_mismatch, loc);
    else
        snprintf(buf, n, "FAIL %s %zu bad abs=%.2e @%s", t->name, t->r.n_beyond, t->r.max_abs,
                 loc);
}

void kcap_report_header(FILE *f, const kcap_run_info *info)
{
    fprintf(f, "kernel %s (%s, %s), reference: %s%s%s%s\n", info->kernel, info->backend,
            info->kernel_hash, info->ref, info->ref_lib && info->ref_lib[0] ? " (" : "",
            info->ref_lib && info->ref_lib[0] ? info->ref_lib : "",
            info->ref_lib && info->ref_lib[0] ? ")" : "");
    if (info->dev)
        fprintf(f,
                "device %s (sm_%d%d, %d SMs, L2 %.0f MiB, peak %.0f GB/s from clock x bus, "
                "%s uploads)\n",
                info->dev->name, info->dev->cc_major, info->dev->cc_minor, info->dev->sm_count,
                info->dev->l2_bytes / 1048576.0, info->dev->peak_bw_gbs,
                info->dev->upload_mode);
    fprintf(f, "%-32s %-34s %-8s %-38s %-38s", "snapshot", "shape", "pool", "vs captured",
            "vs reference");
    if (info->opts->bench)
        fprintf(f, " %10s %10s %8s %8s %6s", "median", "min", "GB/s", "TFLOP/s", "%peak");
    fputc('\n', f);
}

void kcap_report_row(FILE *f, const kcap_case_result *c, int bench)
{
    char name[33], shape[96], cap[256], ref[256], safe[132], why[sizeof c->error * 4 + 1];
    /* a file name or message is the file's, not ours: never raw bytes to the terminal */
    snprintf(name, sizeof name, "%.32s", kcap_printable(safe, sizeof safe, c->name));
    if (c->status != KCAP_OK) {
        fprintf(f, "%-32s ERROR: %s\n", name,
                c->error[0] ? kcap_printable(why, sizeof why, c->error) : kcap_err_string(c->status));
        return;
    }
    shape_cell(c, shape, sizeof shape);
    side_cell(&c->vs_captured, 1, cap, sizeof cap);
    int ref_req = c->vs_ref.ran || c->vs_ref.error[0];
    side_cell(&c->vs_ref, ref_req, ref, sizeof ref);
    fprintf(f, "%-32s %-34s %-8s %-38s %-38s", name, shape, c->pool, cap, ref);
    if (bench) {
        const kcap_bench_result *b = &c->bench;
        if (b->ran)
            fprintf(f, " %8.4fms %8.4fms %8.1f %8.3f %5.1f%%", b->median_ms, b->min_ms, b->gbs,
                    b->tflops, b->pct_peak_bw);
        else
            fprintf(f, " %10s", "-");
    }
    fputc('\n', f);
}

static void tensor_detail(FILE *f, const char *side, const kcap_tensor_verdict *t)
{
    char loc[64];
    kcap_report_loc(t, loc, sizeof loc);
    fprintf(f, "    %-9s %-4s %s: n=%zu", side, t->name, kcap_cmp_verdict(&t->r), t->r.n);
    if (t->r.nonfinite_mismatch)
        fprintf(f, " NaN/Inf-mismatch=%zu", t->r.nonfinite_mismatch);
    fprintf(f,
            " beyond(atol=%g,rtol=%g)=%zu max_abs=%.4e max_rel=%.4e rel_l2=%.4e cos=%.8f",
            t->tol.atol, t->tol.rtol, t->r.n_beyond, t->r.max_abs, t->r.max_rel, t->r.rel_l2,
            t->r.cosine);
    if (t->r.worst >= 0)
        fprintf(f, " worst=%s got=%.6g want=%.6g", loc, t->r.worst_got, t->r.worst_want);
    fputc('\n', f);
}

void kcap_report_details(FILE *f, const kcap_case_result *cases, int n)
{
    int any = 0;
    /* paths and messages come from files: printed escaped (kcap_printable) */
    static char buf[sizeof cases->error * 4 + 1];
    for (int i = 0; i < n; i++) {
        const kcap_case_result *c = &cases[i];
        if (c->pass && !c->error[0])
            continue;
        if (!any++)
            fprintf(f, "\nproblems:\n");
        fprintf(f, "  %s\n", kcap_printable(buf, sizeof buf, c->path));
        if (c->status != KCAP_OK) {
            fprintf(f, "    error: %s\n", kcap_printable(buf, sizeof buf, c->error));
            continue;
        }
        if (c->error[0])
            fprintf(f, "    error: %s\n", kcap_printable(buf, sizeof buf, c->error));
        if (c->vs_captured.error[0])
            fprintf(f, "    captured: %s\n", kcap_printable(buf, sizeof buf, c->vs_captured.error));
        for (int k = 0; k < c->vs_captured.nout; k++)
            if (!c->vs_captured.out[k].r.bitwise)
                tensor_detail(f, "captured", &c->vs_captured.out[k]);
        if (c->vs_ref.error[0])
            fprintf(f, "    reference: %s\n", kcap_printable(buf, sizeof buf, c->vs_ref.error));
        for (int k = 0; k < c->vs_ref.nout; k++)
            if (!c->vs_ref.out[k].r.pass)
                tensor_detail(f, "reference", &c->vs_ref.out[k]);
    }
}

void kcap_report_summary(FILE *f, const kcap_case_result *cases, int n, double wall_ms)
{
    int pass = 0, err = 0;
    for (int i = 0; i < n; i++) {
        pass += cases[i].pass;
        err += cases[i].status != KCAP_OK;
    }
    fprintf(f, "%d case%s: %d passed, %d failed (%d error%s) in %.3f s\n", n, n == 1 ? "" : "s",
            pass, n - pass, err, err == 1 ? "" : "s", wall_ms / 1e3);
}

void kcap_report_progress(int i, int n, const char *name)
{
    if (!isatty(STDERR_FILENO))
        return;
    char safe[160];
    if (i < 0)
        fputs("\r\033[K", stderr);
    else
        fprintf(stderr, "\r\033[K[%d/%d] %s", i + 1, n, kcap_printable(safe, sizeof safe, name));
    fflush(stderr);
}

void kcap_report_cmp_json(FILE *f, const kcap_cmp_result *r, const kcap_cmp_tol *tol, int ndim,
                          const int64_t *shape, const int64_t *loc)
{
    int first = 1;
    fputc('{', f);
    kcap_json_key(f, &first, "verdict");
    kcap_json_str(f, kcap_cmp_verdict(r));
    kcap_json_key(f, &first, "pass");
    fputs(r->pass ? "true" : "false", f);
    kcap_json_key(f, &first, "bitwise");
    fputs(r->bitwise ? "true" : "false", f);
    kcap_json_key(f, &first, "n");
    kcap_json_int(f, (int64_t)r->n);
    kcap_json_key(f, &first, "nonfinite_mismatch");
    kcap_json_int(f, (int64_t)r->nonfinite_mismatch);
    kcap_json_key(f, &first, "nonfinite_matched");
    kcap_json_int(f, (int64_t)r->nonfinite_matched);
    kcap_json_key(f, &first, "max_abs");
    kcap_json_num(f, r->max_abs);
    kcap_json_key(f, &first, "max_rel");
    kcap_json_num(f, r->max_rel);
    kcap_json_key(f, &first, "rel_l2");
    kcap_json_num(f, r->rel_l2);
    kcap_json_key(f, &first, "cosine");
    kcap_json_num(f, r->cosine);
    kcap_json_key(f, &first, "n_beyond");
    kcap_json_int(f, (int64_t)r->n_beyond);
    if (tol) {
        kcap_json_key(f, &first, "atol");
        kcap_json_num(f, tol->atol);
        kcap_json_key(f, &first, "rtol");
        kcap_json_num(f, tol->rtol);
    }
    kcap_json_key(f, &first, "worst");
    if (r->worst < 0) {
        fputs("null", f);
    } else {
        int wf = 1;
        fputc('{', f);
        kcap_json_key(f, &wf, "kind");
        kcap_json_str(f, r->worst_kind == KCAP_WORST_NONFINITE ? "nonfinite" : "value");
        kcap_json_key(f, &wf, "flat");
        kcap_json_int(f, r->worst);
        if (shape && ndim > 0) {
            int64_t idx[KCAP_MAX_DIMS];
            kcap_cmp_unravel(r->worst, ndim, shape, idx);
            kcap_json_key(f, &wf, "index");
            fputc('[', f);
            for (int d = 0; d < ndim; d++) {
                if (d)
                    fputc(',', f);
                kcap_json_int(f, idx[d]);
            }
            fputc(']', f);
        }
        if (loc) {
            static const char *const names[4] = {"request", "token", "head", "channel"};
            for (int k = 0; k < 4; k++) {
                kcap_json_key(f, &wf, names[k]);
                if (loc[k] >= 0)
                    kcap_json_int(f, loc[k]);
                else
                    fputs("null", f);
            }
        }
        kcap_json_key(f, &wf, "got");
        kcap_json_num(f, r->worst_got);
        kcap_json_key(f, &wf, "want");
        kcap_json_num(f, r->worst_want);
        fputc('}', f);
    }
    fputc('}', f);
}

static void side_json(FILE *f, const kcap_side_verdict *v)
{
    int first = 1;
    fputc('{', f);
    kcap_json_key(f, &first, "ran");
    fputs(v->ran ? "true" : "false", f);
    kcap_json_key(f, &first, "pass");
    fputs(v->ran && v->pass ? "true" : "false", f);
    kcap_json_key(f, &first, "bitwise");
    fputs(v->ran && v->bitwise ? "true" : "false", f);
    kcap_json_key(f, &first, "verdict");
    kcap_json_str(f, !v->ran ? "error" : v->bitwise ? "bitwise" : v->pass ? "pass" : "FAIL");
    kcap_json_key(f, &first, "error");
    if (v->error[0])
        kcap_json_str(f, v->error);
    else
        fputs("null", f);
    kcap_json_key(f, &first, "tensors");
    fputc('{', f);
    for (int i = 0; i < v->nout; i++) {
        int tf = i == 0;
        const kcap_tensor_verdict *t = &v->out[i];
        kcap_json_key(f, &tf, t->name);
        kcap_report_cmp_json(f, &t->r, &t->tol, t->ndim, t->shape, t->has_loc ? t->loc : NULL);
    }
    fputs("}}", f);
}

static void case_json(FILE *f, const kcap_case_result *c, int bench)
{
    int first = 1;
    fputc('{', f);
    kcap_json_key(f, &first, "file");
    kcap_json_str(f, c->path);
    kcap_json_key(f, &first, "name");
    kcap_json_str(f, c->name);
    kcap_json_key(f, &first, "pass");
    fputs(c->pass ? "true" : "false", f);
    kcap_json_key(f, &first, "status");
    kcap_json_str(f, c->status == KCAP_OK ? (c->pass ? "pass" : "fail") : "error");
    kcap_json_key(f, &first, "error");
    if (c->error[0])
        kcap_json_str(f, c->error);
    else
        fputs("null", f);
    kcap_json_key(f, &first, "call");
    kcap_json_str(f, c->call);
    kcap_json_key(f, &first, "saved");
    if (c->saved[0])
        kcap_json_str(f, c->saved);
    else
        fputs("null", f);
    kcap_json_key(f, &first, "shape");
    {
        int sf = 1;
        fputc('{', f);
        kcap_json_key(f, &sf, "bs");
        kcap_json_int(f, c->bs);
        kcap_json_key(f, &sf, "q_len");
        kcap_json_int(f, c->q_len);
        kcap_json_key(f, &sf, "num_heads");
        kcap_json_int(f, c->num_heads);
        kcap_json_key(f, &sf, "kv_total");
        kcap_json_int(f, c->kv_total);
        kcap_json_key(f, &sf, "kv_max");
        kcap_json_int(f, c->kv_max);
        kcap_json_key(f, &sf, "num_slots");
        kcap_json_int(f, c->num_slots);
        kcap_json_key(f, &sf, "dtype");
        kcap_json_str(f, c->dtype);
        kcap_json_key(f, &sf, "index_type");
        kcap_json_str(f, c->index_type);
        kcap_json_key(f, &sf, "visibility");
        kcap_json_str(f, c->tree ? "tree" : "causal");
        fputc('}', f);
    }
    kcap_json_key(f, &first, "pool_mode");
    kcap_json_str(f, c->pool);
    kcap_json_key(f, &first, "pool_bytes");
    kcap_json_int(f, (int64_t)c->pool_bytes);
    kcap_json_key(f, &first, "captured_status");
    kcap_json_int(f, c->captured_status);
    kcap_json_key(f, &first, "replay_status");
    kcap_json_int(f, c->replay_status);
    kcap_json_key(f, &first, "vs_captured");
    side_json(f, &c->vs_captured);
    kcap_json_key(f, &first, "vs_ref");
    if (c->vs_ref.ran || c->vs_ref.error[0])
        side_json(f, &c->vs_ref);
    else
        fputs("null", f);
    kcap_json_key(f, &first, "wall_ms");
    kcap_json_num(f, c->wall_ms);
    kcap_json_key(f, &first, "phases_ms");
    fprintf(f, "{\"read\":%.3f,\"reference\":%.3f,\"rebuild\":%.3f,\"run\":%.3f,"
               "\"fetch_compare\":%.3f,\"bench\":%.3f}",
            c->read_ms, c->ref_ms, c->rebuild_ms, c->run_ms, c->check_ms, c->bench_ms);
    if (bench) {
        const kcap_bench_result *b = &c->bench;
        kcap_json_key(f, &first, "bench");
        if (!b->ran) {
            fputs("null", f);
        } else {
            int bf = 1;
            fputc('{', f);
            kcap_json_key(f, &bf, "timer");
            kcap_json_str(f, b->cuda ? "cuda_events_l2_flushed" : "host_wall_clock");
            kcap_json_key(f, &bf, "iters");
            kcap_json_int(f, b->iters);
            kcap_json_key(f, &bf, "median_ms");
            kcap_json_num(f, b->median_ms);
            kcap_json_key(f, &bf, "min_ms");
            kcap_json_num(f, b->min_ms);
            kcap_json_key(f, &bf, "bytes");
            kcap_json_num(f, b->bytes);
            kcap_json_key(f, &bf, "flops");
            kcap_json_num(f, b->flops);
            kcap_json_key(f, &bf, "gbs");
            kcap_json_num(f, b->gbs);
            kcap_json_key(f, &bf, "tflops");
            kcap_json_num(f, b->tflops);
            kcap_json_key(f, &bf, "pct_peak_bw");
            kcap_json_num(f, b->pct_peak_bw);
            fputc('}', f);
        }
    }
    fputc('}', f);
}

int kcap_report_json(const char *path, const kcap_run_info *info,
                     const kcap_case_result *cases, int n, kcap_error *err)
{
    kcap_doc doc;
    int rc = kcap_doc_open(&doc, path, "--json", err);
    if (rc)
        return rc;
    FILE *f = doc.f;
    const kcap_replay_opts *o = info->opts;
    int first = 1, pass = 0, errors = 0;
    for (int i = 0; i < n; i++) {
        pass += cases[i].pass;
        errors += cases[i].status != KCAP_OK;
    }
    fputc('{', f);
    kcap_json_header(f, &first, "kcap replay");
    kcap_json_key(f, &first, "run");
    kcap_json_int(f, info->run);
    kcap_json_key(f, &first, "kernel");
    kcap_json_str(f, info->kernel);
    kcap_json_key(f, &first, "kernel_hash");
    kcap_json_str(f, info->kernel_hash);
    kcap_json_key(f, &first, "backend");
    kcap_json_str(f, info->backend);
    kcap_json_key(f, &first, "ref");
    kcap_json_str(f, info->ref);
    kcap_json_key(f, &first, "ref_lib");
    kcap_json_str(f, info->ref_lib);
    kcap_json_key(f, &first, "load_error");
    if (info->load_error)
        kcap_json_str(f, info->load_error);
    else
        fputs("null", f);
    kcap_json_key(f, &first, "pool");
    kcap_json_str(f, o->pool == KCAP_POOL_ORIGINAL ? "original"
                     : o->pool == KCAP_POOL_REMAP ? "remap" : "auto");
    kcap_json_key(f, &first, "tolerances");
    fprintf(f, "{\"half\":{\"atol\":%.9g,\"rtol\":%.9g},\"f32\":{\"atol\":%.9g,\"rtol\":%.9g}}",
            o->tol_half.atol, o->tol_half.rtol, o->tol_f32.atol, o->tol_f32.rtol);
    kcap_json_key(f, &first, "device");
    if (info->dev) {
        int df = 1;
        fputc('{', f);
        kcap_json_key(f, &df, "name");
        kcap_json_str(f, info->dev->name);
        kcap_json_key(f, &df, "cc");
        fprintf(f, "\"%d.%d\"", info->dev->cc_major, info->dev->cc_minor);
        kcap_json_key(f, &df, "sm_count");
        kcap_json_int(f, info->dev->sm_count);
        kcap_json_key(f, &df, "l2_bytes");
        kcap_json_int(f, (int64_t)info->dev->l2_bytes);
        kcap_json_key(f, &df, "mem_clock_khz");
        kcap_json_num(f, info->dev->mem_clock_khz);
        kcap_json_key(f, &df, "bus_width_bits");
        kcap_json_int(f, info->dev->bus_width_bits);
        kcap_json_key(f, &df, "peak_bw_gbs");
        kcap_json_num(f, info->dev->peak_bw_gbs);
        kcap_json_key(f, &df, "upload_mode");
        kcap_json_str(f, info->dev->upload_mode);
        fputc('}', f);
    } else {
        fputs("null", f);
    }
    kcap_json_key(f, &first, "cases");
    fputc('[', f);
    for (int i = 0; i < n; i++) {
        if (i)
            fputc(',', f);
        fputc('\n', f);
        case_json(f, &cases[i], o->bench);
    }
    fputs("]", f);
    kcap_json_key(f, &first, "summary");
    fprintf(f, "{\"cases\":%d,\"passed\":%d,\"failed\":%d,\"errors\":%d,\"wall_ms\":", n, pass,
            n - pass, errors);
    kcap_json_num(f, info->wall_ms);
    fputs("}", f);
    kcap_json_key(f, &first, "pass");
    fputs(!info->load_error && pass == n ? "true" : "false", f);
    fputs("}\n", f);
    return kcap_doc_close(&doc, err);
}
