/*
 * kcap_cmd_info.c — `kcap info FILE [--json] [--desc]`: a snapshot's metadata, scalars and
 * tensors (dtype, shape, strides, raw and stored bytes, compression ratio), as text or JSON;
 * --desc adds the call description table stored in the file's spirit (this kcap's copy).
 */
#include "kcap_calls.h"
#include "kcap_cli.h"
#include "kcap_cmd_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: kcap info [options] FILE\n\n"
               "Shows a snapshot's metadata (call, time, host, rank, device, library, seq),\n"
               "scalar arguments and tensors with dtype, shape, strides, raw and stored bytes\n"
               "and compression ratio. The file's seal and structure are verified first.\n"
               "  -j, --json         machine-readable output (docs/JSON.md rules)\n"
               "  -d, --desc         also print the call description (how arguments are stored)\n"
               "  -q: nothing but errors (the exit status says whether FILE reads);\n"
               "  -v: the same as --desc.\n"
               KCAP_CLI_COMMON_HELP
               "Exit status: 0 ok, 1 unreadable or invalid file, 2 usage error.\n");
}

/* JSON string; control bytes and everything from 0x7f up as \u00NN, so no byte of the
 * file reaches a terminal raw (non-ASCII text comes out as its bytes, escaped). */
static void jstr(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20 || c >= 0x7f)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

static void jarr(int n, const int64_t *v)
{
    putchar('[');
    for (int i = 0; i < n; i++)
        printf("%s%lld", i ? ", " : "", (long long)v[i]);
    putchar(']');
}

static void print_json(const char *path, const kcap_snapshot *s, const size_t *stored,
                       uint64_t fsize)
{
    const kcap_meta *m = &s->meta;
    printf("{\n  \"schema_version\": 1,\n  \"kcap_version\": ");
    jstr(KCAP_VERSION);
    printf(",\n  \"file\": ");
    jstr(path);
    printf(",\n  \"file_bytes\": %llu,\n  \"format\": \"%d.%d\",\n  \"call\": ",
           (unsigned long long)fsize, m->format_major, m->format_minor);
    jstr(m->call);
    printf(",\n  \"abi_version\": %d,\n  \"time_utc\": ", m->abi_version);
    jstr(m->time_utc);
    printf(",\n  \"host\": ");
    jstr(m->host);
    printf(",\n  \"pid\": %lld,\n  \"rank\": %d,\n  \"device_name\": ", (long long)m->pid, m->rank);
    jstr(m->device_name);
    printf(",\n  \"compute_capability\": \"%d.%d\",\n  \"cuda_driver_version\": %d,\n"
           "  \"cuda_runtime_version\": %d,\n  \"lib_path\": ",
           m->cc_major, m->cc_minor, m->driver_version, m->runtime_version);
    jstr(m->lib_path);
    printf(",\n  \"lib_hash\": ");
    jstr(m->lib_hash);
    /* the writer's version under its own key: "kcap_version" (first) is this kcap's */
    printf(",\n  \"seq\": %llu,\n  \"in_stream_capture\": %s,\n  \"call_status\": %d,\n"
           "  \"written_by_kcap_version\": ",
           (unsigned long long)m->seq, m->in_stream_capture ? "true" : "false", m->call_status);
    jstr(m->kcap_version);
    printf(",\n  \"tags\": ");
    jstr(m->tags);
    printf(",\n  \"scalars\": {");
    for (int i = 0; i < s->nscalars; i++) {
        printf("%s\n    ", i ? "," : "");
        jstr(s->scalars[i].name);
        if (s->scalars[i].type == KCAP_SC_INT)
            printf(": %lld", (long long)s->scalars[i].i);
        else
            printf(": %.17g", s->scalars[i].f);
    }
    printf("\n  },\n  \"tensors\": [");
    uint64_t raw = 0, st = 0;
    for (int i = 0; i < s->ntensors; i++) {
        const kcap_tensor *t = &s->tensors[i];
        printf("%s\n    {\"name\": ", i ? "," : "");
        jstr(t->name);
        printf(", \"dir\": \"%s\", \"dtype\": \"%s\", \"shape\": ",
               t->dir == KCAP_DIR_IN ? "in" : t->dir == KCAP_DIR_OUT ? "out" : "candidate",
               kcap_dtype_name(t->dtype));
        jarr(t->ndim, t->shape);
        if (t->has_strides) {
            printf(", \"strides\": ");
            jarr(t->ndim, t->strides);
        }
        printf(", \"raw_bytes\": %zu, \"stored_bytes\": %zu}", t->nbytes, stored[i]);
        raw += t->nbytes;
        st += stored[i];
    }
    printf("\n  ],\n  \"raw_bytes\": %llu,\n  \"stored_bytes\": %llu,\n  \"ratio\": %.3f\n}\n",
           (unsigned long long)raw, (unsigned long long)st, st ? (double)raw / (double)st : 0.0);
}

static void print_text(const char *path, const kcap_snapshot *s, const size_t *stored,
                       uint64_t fsize)
{
    const kcap_meta *m = &s->meta;
    char b1[32], b2[32];
    kcap_fmt_bytes(b1, sizeof b1, fsize);
    printf("file       %s (%s)\n", kcap_shown(path), b1);
    printf("format     %d.%d (written by kcap %s)\n", m->format_major, m->format_minor,
           m->kcap_version[0] ? kcap_shown(m->kcap_version) : "?");
    printf("call       %s  ABI %d  returned %d\n", kcap_shown(m->call), m->abi_version, m->call_status);
    printf("time       %s  seq %llu%s\n", kcap_shown(m->time_utc), (unsigned long long)m->seq,
           m->in_stream_capture ? "  (inside CUDA stream capture)" : "");
    printf("process    host %s  pid %lld  rank %d\n", kcap_shown(m->host), (long long)m->pid, m->rank);
    printf("device     %s  cc %d.%d  driver %d  runtime %d\n",
           m->device_name[0] ? kcap_shown(m->device_name) : "-", m->cc_major, m->cc_minor,
           m->driver_version, m->runtime_version);
    printf("library    %s  %s\n", m->lib_path[0] ? kcap_shown(m->lib_path) : "-", kcap_shown(m->lib_hash));
    if (m->tags[0])
        printf("tags       %s\n", kcap_shown(m->tags));
    printf("scalars   ");
    for (int i = 0; i < s->nscalars; i++) {
        if (s->scalars[i].type == KCAP_SC_INT)
            printf(" %s=%lld", kcap_shown(s->scalars[i].name), (long long)s->scalars[i].i);
        else
            printf(" %s=%.9g", kcap_shown(s->scalars[i].name), s->scalars[i].f);
    }
    printf("\n\n  %-4s %-12s %-9s %-16s %-18s %12s %12s %7s\n", "dir", "tensor", "dtype", "shape",
           "strides", "raw", "stored", "ratio");
    uint64_t raw = 0, st = 0;
    for (int i = 0; i < s->ntensors; i++) {
        const kcap_tensor *t = &s->tensors[i];
        char sh[64], str[64] = "-";
        kcap_fmt_shape(sh, sizeof sh, t->ndim, t->shape);
        if (t->has_strides)
            kcap_fmt_shape(str, sizeof str, t->ndim, t->strides);
        kcap_fmt_bytes(b1, sizeof b1, t->nbytes);
        kcap_fmt_bytes(b2, sizeof b2, stored[i]);
        printf("  %-4s %-12s %-9s %-16s %-18s %12s %12s %7.2f\n",
               t->dir == KCAP_DIR_IN ? "in" : t->dir == KCAP_DIR_OUT ? "out" : "cand",
               kcap_shown(t->name), kcap_dtype_name(t->dtype), sh, str, b1, b2,
               stored[i] ? (double)t->nbytes / (double)stored[i] : 0.0);
        raw += t->nbytes;
        st += stored[i];
    }
    kcap_fmt_bytes(b1, sizeof b1, raw);
    kcap_fmt_bytes(b2, sizeof b2, st);
    printf("  %-4s %-12s %-9s %-16s %-18s %12s %12s %7.2f\n", "", "total", "", "", "", b1, b2,
           st ? (double)raw / (double)st : 0.0);
}

int kcap_cmd_info(int argc, char **argv)
{
    static const struct option lo[] = {{"json", no_argument, 0, 'j'},
                                       {"desc", no_argument, 0, 'd'}, KCAP_CLI_COMMON_OPTS};
    int json = 0, desc = 0, verbosity = KCAP_NORMAL, ch;
    optind = 0;
    while ((ch = kcap_cli_getopt("info", argc, argv, "jd" KCAP_CLI_COMMON_SHORT, lo)) != -1) {
        if (ch == 'j')
            json = 1;
        else if (ch == 'd')
            desc = 1;
        else if (ch == 'h') {
            usage(stdout);
            return 0;
        } else if (!kcap_cli_verbosity(ch, &verbosity))
            return 2;
    }
    if (argc - optind > 1) {
        kcap_cli_usage_error("info", "one FILE only (got '%s' after '%s')", argv[optind + 1],
                             argv[optind]);
        return 2;
    }
    if (argc - optind < 1) {
        usage(stderr);
        return 2;
    }
    const char *path = argv[optind];
    desc |= verbosity == KCAP_VERBOSE;
    kcap_snapshot *s = NULL;
    size_t *stored = NULL;
    kcap_error err = {0};
    if (kcap_snapshot_read_header(path, &s, &stored, &err)) {
        fprintf(stderr, "kcap info: %s\n", kcap_shown(err.msg));
        return 1;
    }
    struct stat st;
    uint64_t fsize = stat(path, &st) ? 0 : (uint64_t)st.st_size;
    if (verbosity == KCAP_QUIET)
        desc = 0;
    else if (json)
        print_json(path, s, stored, fsize);
    else
        print_text(path, s, stored, fsize);
    if (desc) {
        const kcap_call_desc *d = kcap_call_find(s->meta.call);
        char *txt = d ? kcap_call_describe(d) : NULL;
        if (txt)
            printf("%s%s", json ? "" : "\n", txt);
        free(txt);
    }
    free(stored);
    kcap_snapshot_free(s);
    return 0;
}
