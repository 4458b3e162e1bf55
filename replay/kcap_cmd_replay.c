/*
 * kcap_cmd_replay.c — `kcap replay`: option parsing, the run loop and --watch.
 *
 * A run = load the libraries fresh (kcap_replayer), collect the snapshot set again (a
 * watched directory may have gained files), replay every case, print the table, write the
 * JSON. --watch repeats runs on every settled change of the library or the snapshot paths,
 * and keeps going when a run cannot even start (a half-written or broken .so): the message
 * says so and the next rebuild gets its turn. The CUDA device is opened once and reused.
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kcap_cli.h"
#include "kcap_json.h"
#include "kcap_junit.h"
#include "kcap_replay.h"
#include "kcap_report.h"
#include "kcap_snapfiles.h"
#include "kcap_watch.h"

typedef struct cmd_opts {
    kcap_replay_opts ro;
    const char *json;
    const char *junit;
    const char *report;    /* --report DIR: replay.json, outputs/, index.html + heatmaps */
    char report_outputs[4200];
    char report_json[4200];
    FILE *out;      /* the table: stdout, or stderr when a document goes to stdout */
    int watch;
    int watch_runs; /* stop after this many runs (0 = until a signal) */
    int verbosity;  /* KCAP_QUIET: failing rows + summary; KCAP_VERBOSE: every output's metrics */
    char *const *paths;
    int npaths;
} cmd_opts;

static volatile sig_atomic_t g_stop;

static void on_signal(int sig)
{
    (void)sig;
    g_stop = 1;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: kcap replay PATH... --kernel LIB.so [options]\n"
            "\n"
            "Replays snapshot files (or directories of them, recursively, in sorted order)\n"
            "through a kernel library loaded fresh from a private copy, and judges each output\n"
            "against the captured output and against an independent reference.\n"
            "\n"
            "  --kernel LIB.so     the library under test (CPU or CUDA; vattn_backend() decides)\n"
            "  --ref cpu|gpu|none  reference: cpu = libverify_attn_cpu.so, gpu = the CUDA\n"
            "                      library's vattn_verify_reference (default: gpu for a CUDA\n"
            "                      library, cpu for a CPU one)\n"
            "  --ref-lib LIB.so    reference library (default: next to kcap, BUILD/lib/)\n"
            "  --atol A --rtol R   tolerance of bf16/fp16 outputs (default %g, %g)\n"
            "  --lse-atol A --lse-rtol R   tolerance of fp32 outputs (lse) (default %g, %g)\n"
            "  --pool auto|original|remap  KV pool rebuild: the captured slot ids (original),\n"
            "                      or a compact pool with the same scatter (remap); auto keeps\n"
            "                      the original ids while the pool fits in half of free memory\n"
            "  --bench             time each case (CUDA events, L2 flushed; host clock on CPU)\n"
            "  --iters N           timed runs per case (default 20); --warmup N (default 3)\n"
            "  --watch             re-run whenever the library or the snapshots change\n"
            "  --watch-runs N      with --watch: stop after N runs\n"
            "  --json FILE         write the results as JSON (docs/JSON.md; - = stdout)\n"
            "  --junit FILE        write the results as JUnit XML, one testcase per\n"
            "                      snapshot (- = stdout)\n"
            "  --save-outputs DIR  write each replayed snapshot with the kernel-under-test's\n"
            "                      outputs (and its lib_path/lib_hash) to DIR/<name>\n"
            "                      (with --watch: DIR/run-N/<name> for run N)\n"
            "  --report DIR        an HTML page DIR/index.html: every case, and per failing\n"
            "                      case error heatmaps (token x head, matplotlib) from the\n"
            "                      outputs saved in DIR/outputs (python3 -m kcap report)\n"
            "  --device N          CUDA device ordinal (default 0)\n"
            "  -q, --quiet         print only failing rows, problems and the summary\n"
            "  -v, --verbose       under each row, every output's metrics against the\n"
            "                      captured output and the reference\n"
            "  -h, --help          this text\n"
            "Every option also takes --opt=value; short forms: -k LIB, -b (--bench),\n"
            "-w (--watch), -j FILE (--json).\n"
            "\n"
            "Exit status: 0 when every case passes, 1 otherwise, 2 on a usage error.\n",
            KCAP_CMP_ATOL_BF16, KCAP_CMP_RTOL_BF16, KCAP_CMP_ATOL_F32, KCAP_CMP_RTOL_F32);
}

/* An integer option into an int field. */
static int parse_int(const char *opt, const char *s, int lo, int *out)
{
    long v;
    if (kcap_cli_count("replay", opt, s, lo, 1000000, &v))
        return -1;
    *out = (int)v;
    return 0;
}

/* 0 ok, 1 --help, 2 usage error */
static int parse(int argc, char **argv, cmd_opts *c)
{
    enum { O_REF_LIB = 256, O_LSE_ATOL, O_LSE_RTOL, O_ITERS, O_WARMUP, O_WATCH_RUNS, O_DEVICE,
           O_POOL, O_JUNIT, O_SAVE, O_REPORT };
    static const struct option lo[] = {
        {"kernel", required_argument, 0, 'k'},  {"ref", required_argument, 0, 'r'},
        {"ref-lib", required_argument, 0, O_REF_LIB}, {"bench", no_argument, 0, 'b'},
        {"watch", no_argument, 0, 'w'},         {"json", required_argument, 0, 'j'},
        {"atol", required_argument, 0, 'a'},    {"rtol", required_argument, 0, 'R'},
        {"lse-atol", required_argument, 0, O_LSE_ATOL},
        {"lse-rtol", required_argument, 0, O_LSE_RTOL},
        {"pool", required_argument, 0, O_POOL}, {"iters", required_argument, 0, O_ITERS},
        {"warmup", required_argument, 0, O_WARMUP},
        {"watch-runs", required_argument, 0, O_WATCH_RUNS},
        {"device", required_argument, 0, O_DEVICE},
        {"junit", required_argument, 0, O_JUNIT}, {"save-outputs", required_argument, 0, O_SAVE},
        {"report", required_argument, 0, O_REPORT}, KCAP_CLI_COMMON_OPTS};
    memset(c, 0, sizeof *c);
    kcap_replay_opts_default(&c->ro);
    c->ro.build_dir = kcap_build_dir();
    optind = 0; /* GNU: full re-initialisation */
    int ch;
    while ((ch = kcap_cli_getopt("replay", argc, argv, "k:bwj:" KCAP_CLI_COMMON_SHORT, lo)) !=
           -1) {
        switch (ch) {
        case 'k': c->ro.kernel_path = optarg; break;
        case 'r':
            if (!strcmp(optarg, "cpu"))
                c->ro.ref = KCAP_REF_CPU;
            else if (!strcmp(optarg, "gpu"))
                c->ro.ref = KCAP_REF_GPU;
            else if (!strcmp(optarg, "none"))
                c->ro.ref = KCAP_REF_NONE;
            else if (!strcmp(optarg, "auto"))
                c->ro.ref = KCAP_REF_AUTO;
            else {
                kcap_cli_usage_error("replay", "--ref: '%s' is not cpu, gpu or none", optarg);
                return 2;
            }
            break;
        case O_REF_LIB: c->ro.ref_lib = optarg; break;
        case 'b': c->ro.bench = 1; break;
        case 'w': c->watch = 1; break;
        case 'j': c->json = optarg; break;
        case O_JUNIT: c->junit = optarg; break;
        case O_SAVE: c->ro.save_dir = optarg; break;
        case O_REPORT: c->report = optarg; break;
        case 'q':
        case 'v': kcap_cli_verbosity(ch, &c->verbosity); break;
        case 'a':
            if (kcap_cli_number("replay", "--atol", optarg, &c->ro.tol_half.atol))
                return 2;
            break;
        case 'R':
            if (kcap_cli_number("replay", "--rtol", optarg, &c->ro.tol_half.rtol))
                return 2;
            break;
        case O_LSE_ATOL:
            if (kcap_cli_number("replay", "--lse-atol", optarg, &c->ro.tol_f32.atol))
                return 2;
            break;
        case O_LSE_RTOL:
            if (kcap_cli_number("replay", "--lse-rtol", optarg, &c->ro.tol_f32.rtol))
                return 2;
            break;
        case O_POOL:
            if (!strcmp(optarg, "auto"))
                c->ro.pool = KCAP_POOL_AUTO;
            else if (!strcmp(optarg, "original"))
                c->ro.pool = KCAP_POOL_ORIGINAL;
            else if (!strcmp(optarg, "remap"))
                c->ro.pool = KCAP_POOL_REMAP;
            else {
                kcap_cli_usage_error("replay", "--pool: '%s' is not auto, original or remap",
                                     optarg);
                return 2;
            }
            break;
        case O_ITERS:
            if (parse_int("--iters", optarg, 1, &c->ro.iters))
                return 2;
            break;
        case O_WARMUP:
            if (parse_int("--warmup", optarg, 0, &c->ro.warmup))
                return 2;
            break;
        case O_WATCH_RUNS:
            if (parse_int("--watch-runs", optarg, 1, &c->watch_runs))
                return 2;
            break;
        case O_DEVICE:
            if (parse_int("--device", optarg, 0, &c->ro.device))
                return 2;
            break;
        case 'h': return 1;
        default: return 2; /* kcap_cli_getopt said what */
        }
    }
    c->paths = argv + optind;
    c->npaths = argc - optind;
    if (!c->ro.kernel_path) {
        kcap_cli_usage_error("replay", "--kernel LIB.so is required");
        return 2;
    }
    if (c->npaths < 1) {
        kcap_cli_usage_error("replay", "no snapshot files or directories given");
        return 2;
    }
    if (kcap_doc_is_stdout(c->json) && kcap_doc_is_stdout(c->junit)) {
        kcap_cli_usage_error("replay", "--json - and --junit - cannot both use stdout");
        return 2;
    }
    c->out = kcap_doc_is_stdout(c->json) || kcap_doc_is_stdout(c->junit) ? stderr : stdout;
    if (c->report) { /* the page is drawn from the JSON and the saved outputs */
        snprintf(c->report_json, sizeof c->report_json, "%s/replay.json", c->report);
        if (!c->ro.save_dir) {
            snprintf(c->report_outputs, sizeof c->report_outputs, "%s/outputs", c->report);
            c->ro.save_dir = c->report_outputs;
        }
    }
    return 0;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* One <testcase> per case; the failure text is the same block the table's problems list
 * shows for that case. */
static int write_junit(const cmd_opts *c, const kcap_case_result *cases, int n, double wall_ms)
{
    kcap_junit_case *jc = calloc((size_t)(n ? n : 1), sizeof *jc);
    char **detail = calloc((size_t)(n ? n : 1), sizeof *detail);
    int rc = KCAP_ERR_NOMEM;
    kcap_error err = {0};
    if (jc && detail) {
        for (int i = 0; i < n; i++) {
            const kcap_case_result *r = &cases[i];
            jc[i].classname = "kcap.replay";
            jc[i].name = r->name;
            jc[i].time_s = r->wall_ms / 1e3;
            jc[i].status = r->status != KCAP_OK ? KCAP_JUNIT_ERROR
                           : r->pass            ? KCAP_JUNIT_PASS
                                                : KCAP_JUNIT_FAIL;
            if (jc[i].status == KCAP_JUNIT_PASS)
                continue;
            size_t len = 0;
            FILE *m = open_memstream(&detail[i], &len);
            if (m) {
                kcap_report_details(m, r, 1);
                fclose(m);
            }
            jc[i].message = r->error[0] ? r->error
                            : r->vs_captured.error[0] ? r->vs_captured.error
                            : r->vs_ref.error[0] ? r->vs_ref.error
                                                 : "outputs outside tolerance";
            jc[i].detail = detail[i];
        }
        rc = kcap_junit_write(c->junit, "kcap replay", jc, n, wall_ms / 1e3, &err);
        if (rc)
            fprintf(stderr, "kcap replay: %s\n", err.msg);
    } else {
        fprintf(stderr, "kcap replay: out of memory for --junit\n");
    }
    for (int i = 0; detail && i < n; i++)
        free(detail[i]);
    free(detail);
    free(jc);
    return rc;
}

/* --report: the run's JSON beside the saved outputs, then the Python side draws the page. */
static int write_report(const cmd_opts *c, const kcap_run_info *info,
                        const kcap_case_result *cases, int n)
{
    kcap_error err = {0};
    if (kcap_mkdir_private(c->report, &err) ||
        kcap_report_json(c->report_json, info, cases, n, &err)) {
        fprintf(stderr, "kcap replay: --report %s: %s\n", c->report, err.msg);
        return 1;
    }
    const char *args[] = {"report", c->report, NULL};
    int rc = kcap_cli_run_python(args, "kcap replay --report");
    if (rc != 0) {
        fprintf(stderr, "kcap replay: --report %s: python3 -m kcap report failed (%d)\n",
                c->report, rc);
        return 1;
    }
    fprintf(c->out, "report: %s/index.html\n", c->report);
    return 0;
}

/* -v: one line per output and side under the case's row. */
static void verbose_case(FILE *f, const kcap_case_result *r)
{
    const kcap_side_verdict *sides[2] = {&r->vs_captured, &r->vs_ref};
    static const char *const names[2] = {"captured", "reference"};
    for (int s = 0; s < 2; s++)
        for (int k = 0; sides[s]->ran && k < sides[s]->nout; k++) {
            const kcap_tensor_verdict *t = &sides[s]->out[k];
            fprintf(f, "      vs %-9s %-4s %-8s max_abs=%.3e max_rel=%.3e cos=%.8f beyond=%zu/%zu\n",
                    names[s], t->name, kcap_cmp_verdict(&t->r), t->r.max_abs, t->r.max_rel,
                    t->r.cosine, t->r.n_beyond, t->r.n);
        }
}

/* One run over the whole set. Returns the exit status of the run (0 all pass, 1 not). */
static int run_once(const cmd_opts *c, kcap_dev **dev, int run_no)
{
    double t0 = now_ms();
    kcap_error err = {0};
    kcap_replayer *r = NULL;
    /* --watch: each run saves into a directory of its own (the saver never replaces a file,
     * so with one directory every run after the first failed each case as "exists") */
    kcap_replay_opts ro = c->ro;
    char run_dir[4300];
    if (c->watch && ro.save_dir) {
        snprintf(run_dir, sizeof run_dir, "%s/run-%d", c->ro.save_dir, run_no);
        ro.save_dir = run_dir;
    }
    kcap_run_info info = {.kernel = c->ro.kernel_path, .kernel_hash = "", .backend = "?",
                          .ref = "?", .ref_lib = "", .opts = &ro, .run = run_no};
    int rc = kcap_replayer_create(&ro, dev, &r, &err);
    if (rc) {
        fprintf(stderr, "kcap replay: %s\n", err.msg);
        if (c->json) {
            info.load_error = err.msg;
            info.wall_ms = now_ms() - t0;
            kcap_error je = {0};
            if (kcap_report_json(c->json, &info, NULL, 0, &je))
                fprintf(stderr, "kcap replay: %s\n", je.msg);
        }
        if (c->junit) {
            kcap_junit_case jc = {.classname = "kcap.replay", .name = "load",
                                  .status = KCAP_JUNIT_ERROR, .message = err.msg,
                                  .detail = err.msg};
            kcap_error je = {0};
            if (kcap_junit_write(c->junit, "kcap replay", &jc, 1, 0, &je))
                fprintf(stderr, "kcap replay: %s\n", je.msg);
        }
        return 1;
    }
    info.kernel_hash = kcap_replayer_kernel_hash(r);
    info.backend = kcap_replayer_backend(r);
    info.ref = kcap_replayer_ref_name(r);
    info.ref_lib = kcap_replayer_ref_path(r);
    info.dev = !strcmp(info.backend, "cuda") && *dev ? kcap_dev_get_info(*dev) : NULL;

    kcap_snapfiles files;
    if ((rc = kcap_snapfiles_collect(c->paths, c->npaths, &files, &err))) {
        fprintf(stderr, "kcap replay: %s\n", err.msg);
        kcap_replayer_free(r);
        return 1;
    }
    kcap_case_result *cases = calloc((size_t)(files.n ? files.n : 1), sizeof *cases);
    if (!cases) {
        fprintf(stderr, "kcap replay: out of memory\n");
        kcap_snapfiles_free(&files);
        kcap_replayer_free(r);
        return 1;
    }
    if (c->verbosity != KCAP_QUIET)
        kcap_report_header(c->out, &info);
    int n = 0;
    for (int i = 0; i < files.n && !g_stop; i++, n++) {
        kcap_report_progress(i, files.n, files.paths[i]);
        kcap_replayer_run(r, files.paths[i], &cases[i]);
        kcap_report_progress(-1, 0, NULL);
        if (c->verbosity != KCAP_QUIET || !cases[i].pass)
            kcap_report_row(c->out, &cases[i], c->ro.bench);
        if (c->verbosity == KCAP_VERBOSE)
            verbose_case(c->out, &cases[i]);
        fflush(c->out);
    }
    info.wall_ms = now_ms() - t0;
    kcap_report_details(c->out, cases, n);
    if (files.n == 0)
        fprintf(c->out, "no snapshots (*.h5) found under the given paths\n");
    kcap_report_summary(c->out, cases, n, info.wall_ms);
    fflush(c->out);
    int all = files.n > 0 && n == files.n;
    for (int i = 0; i < n; i++)
        all &= cases[i].pass;
    if (c->json && (rc = kcap_report_json(c->json, &info, cases, n, &err))) {
        fprintf(stderr, "kcap replay: %s\n", err.msg);
        all = 0;
    }
    if (c->junit && write_junit(c, cases, n, info.wall_ms))
        all = 0;
    if (c->report && write_report(c, &info, cases, n))
        all = 0;
    free(cases);
    kcap_snapfiles_free(&files);
    kcap_replayer_free(r);
    return all ? 0 : 1;
}

static int watch_loop(const cmd_opts *c, kcap_dev **dev)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal; /* no SA_RESTART: poll() returns on the signal */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    const char *files[2] = {c->ro.kernel_path, c->ro.ref_lib};
    kcap_watch *w = NULL;
    kcap_error err = {0};
    if (kcap_watch_create(files, c->ro.ref_lib ? 2 : 1, c->paths, c->npaths, 300, &w, &err)) {
        fprintf(stderr, "kcap replay: %s\n", err.msg);
        return 1;
    }
    int status = run_once(c, dev, 1);
    for (int run = 2; !g_stop && (!c->watch_runs || run <= c->watch_runs); run++) {
        fprintf(c->out, "\nwatching %s and the snapshots for changes (Ctrl-C to stop)\n",
                c->ro.kernel_path);
        fflush(c->out);
        int r = kcap_watch_wait(w, &g_stop, &err);
        if (r < 0) {
            fprintf(stderr, "kcap replay: %s\n", err.msg);
            status = 1;
            break;
        }
        if (r == 0)
            break;
        fprintf(c->out, "\nchange detected (%s): run %d\n", kcap_watch_last(w), run);
        fflush(c->out);
        status = run_once(c, dev, run);
    }
    kcap_watch_free(w);
    return status;
}

int kcap_cmd_replay(int argc, char **argv)
{
    cmd_opts c;
    int p = parse(argc, argv, &c);
    if (p == 1) {
        usage(stdout);
        return 0;
    }
    if (p)
        return 2; /* the message and the --help hint are out */
    kcap_dev *dev = NULL;
    int status = c.watch ? watch_loop(&c, &dev) : run_once(&c, &dev, 1);
    kcap_dev_free(dev);
    return status;
}
