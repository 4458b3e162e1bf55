/*
 * kcap_cmd_record.c — `kcap record -o DIR [options] -- CMD ARGS...`: run a command with
 * libkcap.so preloaded and the KCAP_* variables set, so its verify calls are snapshotted.
 *
 * Options are validated here with the same parsers the library uses, so a typo fails the
 * command up front (exit 2) instead of becoming a log line inside the host. kcap then execs
 * CMD: no wrapper process remains, signals reach CMD directly, and its exit status is ours.
 */
#include "kcap_config.h"
#include "kcap_compare.h"  /* replay/: the default tolerances */
#include "kcap_snapshot.h" /* formats/: kcap_mkdir_private */
#include "kcap_cli.h"

#include <errno.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void record_usage(FILE *f)
{
    fprintf(f,
            "usage: kcap record -o DIR [--calls R] [--every N] [--tags T] [--max N] [--max-bytes B]\n"
            "                   [--dormant] [--queue-bytes B] [--log quiet|warn|info]\n"
            "                   [--shadow CAND [--atol A] [--rtol R] [--lse-atol A] [--lse-rtol R]]\n"
            "                   [--lib PATH] -- CMD ARGS...\n"
            "  -o DIR          write snapshots into DIR (created 0700)\n"
            "  --calls R       call numbers to capture, e.g. 0-9,100 (0-based)\n"
            "  --every N       capture every N-th call\n"
            "  --tags T        only calls the host tagged so (kcap_tag), e.g. layer=0-3;step=5\n"
            "  --shadow CAND   shadow mode: run the candidate library CAND.so beside each\n"
            "                  selected call and keep only the calls where it disagrees\n"
            "  --atol A, --rtol R\n"
            "                  shadow mode's tolerance of bf16/fp16 outputs, as kcap replay's\n"
            "                  (default %g, %g)\n"
            "  --lse-atol A, --lse-rtol R\n"
            "                  the same of fp32 outputs (lse) (default %g, %g)\n"
            "  --max N         stop after N snapshots\n"
            "  --max-bytes B   stop accepting snapshots past B bytes (K/M/G suffixes)\n"
            "  --dormant       start dormant; arm later with `kcap arm PID`\n"
            "  --queue-bytes B all host memory capture may use: queued snapshots, copies being\n"
            "                  made, writer buffers (default 1G)\n"
            "  --lib PATH      libkcap.so to preload (default: next to this kcap)\n"
            "  -q, --quiet     capture logs nothing (KCAP_LOG=quiet) unless --log says otherwise\n"
            "  -v, --verbose   capture logs each snapshot (KCAP_LOG=info) unless --log says\n"
            "                  otherwise, and the KCAP_* settings are printed before CMD starts\n"
            "  -h, --help      this text\n"
            "Options end at \"--\" or at the first word that is not an option (CMD).\n"
            "CMD runs with LD_PRELOAD=libkcap.so; kcap exits with CMD's status.\n",
            KCAP_CMP_ATOL_BF16, KCAP_CMP_RTOL_BF16, KCAP_CMP_ATOL_F32, KCAP_CMP_RTOL_F32);
}

/* libkcap.so next to this kcap: <build>/lib for a build tree, <prefix>/lib installed. */
static int find_libkcap(char *out, size_t n)
{
    snprintf(out, n, "%s/lib/libkcap.so", kcap_build_dir());
    return access(out, R_OK) == 0 ? 0 : -1;
}

/* dl_iterate_phdr callback: the path of a loaded AddressSanitizer runtime, if any. */
static int find_asan_runtime(struct dl_phdr_info *info, size_t size, void *out)
{
    (void)size;
    if (info->dlpi_name && strstr(info->dlpi_name, "/libasan.so")) {
        snprintf(out, 4096, "%s", info->dlpi_name);
        return 1;
    }
    return 0;
}

enum { O_TOL = 256 }; /* --atol ...: O_TOL + KCAP_TOL_* */

/* One option's value, checked with libkcap's own parsers and put into its KCAP_* variable;
 * 0, or 2 after a message. */
static int record_setting(int ch, const char *v)
{
    uint64_t u;
    kcap_range r[KCAP_MAX_RANGES];
    int nr;
    switch (ch) {
    case 'c':
        if (kcap_parse_ranges(v, r, KCAP_MAX_RANGES, &nr)) {
            kcap_cli_usage_error("record", "--calls '%s' is not a list such as 0-9,100", v);
            return 2;
        }
        setenv("KCAP_CALLS", v, 1);
        return 0;
    case 'e':
        if (kcap_parse_u64(v, &u) || !u) {
            kcap_cli_usage_error("record", "--every '%s' is not a positive integer", v);
            return 2;
        }
        setenv("KCAP_EVERY", v, 1);
        return 0;
    case 't': {
        kcap_tag_filter tf[KCAP_MAX_TAG_FILTERS];
        if (kcap_parse_tag_filters(v, tf, KCAP_MAX_TAG_FILTERS, &nr)) {
            kcap_cli_usage_error("record", "--tags '%s' is not terms key=ranges separated by "
                                 "';', such as layer=0-3;step=100-199", v);
            return 2;
        }
        setenv("KCAP_TAGS", v, 1);
        return 0;
    }
    case 'm':
        if (kcap_parse_u64(v, &u)) {
            kcap_cli_usage_error("record", "--max '%s' is not a non-negative integer", v);
            return 2;
        }
        setenv("KCAP_MAX", v, 1);
        return 0;
    case 'B':
    case 'Q': {
        const char *opt = ch == 'B' ? "--max-bytes" : "--queue-bytes";
        if (kcap_parse_bytes(v, &u)) {
            kcap_cli_usage_error("record", "%s '%s' is not a byte count such as 500M", opt, v);
            return 2;
        }
        if (!u && ch == 'Q') {
            fprintf(stderr, "kcap record: --queue-bytes 0 leaves no memory for any snapshot "
                            "(it bounds all of capture's host memory); give a size such as 512M\n");
            return 2;
        }
        setenv(ch == 'B' ? "KCAP_MAX_BYTES" : "KCAP_QUEUE_BYTES", v, 1);
        return 0;
    }
    case O_TOL + KCAP_TOL_ATOL:
    case O_TOL + KCAP_TOL_RTOL:
    case O_TOL + KCAP_TOL_LSE_ATOL:
    case O_TOL + KCAP_TOL_LSE_RTOL: {
        double d;
        const kcap_tol_name *t = &kcap_tol_names[ch - O_TOL];
        if (kcap_parse_tol(v, &d)) {
            kcap_cli_usage_error("record", "%s '%s' is not a non-negative finite number", t->flag,
                                 v);
            return 2;
        }
        setenv(t->env, v, 1);
        return 0;
    }
    default: /* 'L', --log */
        if (strcmp(v, "quiet") && strcmp(v, "warn") && strcmp(v, "info")) {
            kcap_cli_usage_error("record", "--log '%s' is not quiet, warn or info", v);
            return 2;
        }
        setenv("KCAP_LOG", v, 1);
        return 0;
    }
}

int kcap_cmd_record(int argc, char **argv)
{
    static const struct option lo[] = {
        {"output", required_argument, 0, 'o'},     {"calls", required_argument, 0, 'c'},
        {"every", required_argument, 0, 'e'},      {"max", required_argument, 0, 'm'},
        {"max-bytes", required_argument, 0, 'B'},  {"queue-bytes", required_argument, 0, 'Q'},
        {"log", required_argument, 0, 'L'},        {"lib", required_argument, 0, 'l'},
        {"dormant", no_argument, 0, 'd'},          {"tags", required_argument, 0, 't'},
        {"shadow", required_argument, 0, 'S'},
        {"atol", required_argument, 0, O_TOL + KCAP_TOL_ATOL},
        {"rtol", required_argument, 0, O_TOL + KCAP_TOL_RTOL},
        {"lse-atol", required_argument, 0, O_TOL + KCAP_TOL_LSE_ATOL},
        {"lse-rtol", required_argument, 0, O_TOL + KCAP_TOL_LSE_RTOL},
        KCAP_CLI_COMMON_OPTS};
    const char *dir = NULL, *lib = NULL;
    int verbosity = KCAP_NORMAL, log_given = 0, tol_given = 0, ch;
    optind = 0;
    /* "+": options stop at CMD, whose own options are its business */
    while ((ch = kcap_cli_getopt("record", argc, argv, "+o:" KCAP_CLI_COMMON_SHORT, lo)) != -1) {
        switch (ch) {
        case 'o': dir = optarg; break;
        case 'l': lib = optarg; break;
        case 'd': setenv("KCAP_DORMANT", "1", 1); break;
        case 'S':
            if (access(optarg, R_OK) || !kcap_cli_is_file(optarg)) {
                kcap_cli_usage_error("record", "--shadow '%s' is not a readable kernel library",
                                     optarg);
                return 2;
            }
            setenv("KCAP_SHADOW", optarg, 1);
            break;
        case 'h': record_usage(stdout); return 0;
        case 'q':
        case 'v': kcap_cli_verbosity(ch, &verbosity); break;
        case 'c':
        case 'e':
        case 't':
        case 'm':
        case 'B':
        case 'Q':
        case 'L':
        case O_TOL + KCAP_TOL_ATOL:
        case O_TOL + KCAP_TOL_RTOL:
        case O_TOL + KCAP_TOL_LSE_ATOL:
        case O_TOL + KCAP_TOL_LSE_RTOL:
            log_given |= ch == 'L';
            tol_given |= ch >= O_TOL;
            if (record_setting(ch, optarg))
                return 2;
            break;
        default: return 2; /* kcap_cli_getopt said what */
        }
    }
    if (!log_given && verbosity != KCAP_NORMAL)
        setenv("KCAP_LOG", verbosity == KCAP_QUIET ? "quiet" : "info", 1);
    if (tol_given && !getenv("KCAP_SHADOW")) {
        kcap_cli_usage_error("record", "--atol, --rtol, --lse-atol and --lse-rtol are shadow "
                             "mode's tolerances: give --shadow CAND.so too");
        return 2;
    }
    if (!dir) {
        kcap_cli_usage_error("record", "-o DIR is required");
        return 2;
    }
    int i = optind;
    if (i >= argc) {
        kcap_cli_usage_error("record", "no command given (kcap record -o DIR -- CMD ARGS...)");
        return 2;
    }
    char libpath[4096];
    if (lib)
        snprintf(libpath, sizeof libpath, "%s", lib);
    else if (find_libkcap(libpath, sizeof libpath)) {
        fprintf(stderr, "kcap record: %s not found (build it with make, or pass --lib)\n",
                libpath);
        return 1;
    }
    if (access(libpath, R_OK)) {
        fprintf(stderr, "kcap record: cannot read %s: %s\n", libpath, strerror(errno));
        return 1;
    }
    /* the dynamic loader would block on a FIFO and skip a directory: CMD would run uncaptured */
    if (!kcap_cli_is_file(libpath)) {
        fprintf(stderr, "kcap record: %s is not a regular file (libkcap.so)\n", libpath);
        return 1;
    }
    char abs[4096];
    if (!realpath(libpath, abs))
        snprintf(abs, sizeof abs, "%s", libpath);
    /* LD_PRELOAD splits on spaces and colons: such a path would load nothing, silently, and
     * CMD would run uncaptured with kcap exiting 0 */
    if (strpbrk(abs, " \t\n:")) {
        fprintf(stderr, "kcap record: %s: LD_PRELOAD cannot carry a path with a space, tab, "
                "newline or ':' (copy libkcap.so elsewhere and pass --lib)\n", abs);
        return 1;
    }
    kcap_error e = {0};
    if (kcap_mkdir_private(dir, &e)) {
        fprintf(stderr, "kcap record: %s\n", e.msg);
        return 1;
    }
    char absdir[4096];
    if (!realpath(dir, absdir))
        snprintf(absdir, sizeof absdir, "%s", dir);
    setenv("KCAP_DIR", absdir, 1);
    const char *old = getenv("LD_PRELOAD");
    /* A sanitizer build of libkcap.so needs the sanitizer runtime first in LD_PRELOAD. */
    char asan[4096] = "";
    dl_iterate_phdr(find_asan_runtime, asan);
    size_t n = strlen(asan) + strlen(abs) + (old ? strlen(old) : 0) + 3;
    char *pre = malloc(n);
    if (!pre)
        return 1;
    snprintf(pre, n, "%s%s%s%s%s", asan, asan[0] ? ":" : "", abs, old && *old ? ":" : "",
             old && *old ? old : "");
    setenv("LD_PRELOAD", pre, 1);
    free(pre);
    if (verbosity == KCAP_VERBOSE) {
        extern char **environ;
        for (char **e = environ; *e; e++)
            if (!strncmp(*e, "KCAP_", 5) || !strncmp(*e, "LD_PRELOAD=", 11))
                fprintf(stderr, "kcap record: %s\n", *e);
        fprintf(stderr, "kcap record: exec %s\n", argv[i]);
    }
    execvp(argv[i], argv + i);
    fprintf(stderr, "kcap record: cannot run %s: %s\n", argv[i], strerror(errno));
    return errno == ENOENT ? 127 : 126;
}
