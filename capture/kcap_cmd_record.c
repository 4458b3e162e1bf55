/*
 * kcap_cmd_record.c — `kcap record -o DIR [options] -- CMD ARGS...`: run a command with
 * libkcap.so preloaded and the KCAP_* variables set, so its verify calls are snapshotted.
 *
 * Options are validated here with the same parsers the library uses, so a typo fails the
 * command up front (exit 2) instead of becoming a log line inside the host. kcap then execs
 * CMD: no wrapper process remains, signals reach CMD directly, and its exit status is ours.
 */
#include "kcap_cap.h"
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
            "usage: kcap record -o DIR [--calls R] [--every N] [--max N] [--max-bytes B]\n"
            "                   [--dormant] [--queue-bytes B] [--log quiet|warn|info]\n"
            "                   [--lib PATH] -- CMD ARGS...\n"
            "  -o DIR          write snapshots into DIR (created 0700)\n"
            "  --calls R       call numbers to capture, e.g. 0-9,100 (0-based)\n"
            "  --every N       capture every N-th call\n"
            "  --max N         stop after N snapshots\n"
            "  --max-bytes B   stop accepting snapshots past B bytes (K/M/G suffixes)\n"
            "  --dormant       start dormant; arm later with `kcap arm PID`\n"
            "  --queue-bytes B all host memory capture may use: queued snapshots, copies being\n"
            "                  made, writer buffers (default 1G)\n"
            "  --lib PATH      libkcap.so to preload (default: next to this kcap)\n"
            "CMD runs with LD_PRELOAD=libkcap.so; kcap exits with CMD's status.\n");
}

/* libkcap.so next to this kcap: <build>/lib for a build tree, <prefix>/lib installed. */
static int find_libkcap(char *out, size_t n)
{
    snprintf(out, n, "%s/lib/libkcap.so", kcap_cli_build_dir());
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

int kcap_cmd_record(int argc, char **argv)
{
    const char *dir = NULL, *lib = NULL;
    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t u;
        kcap_range r[KCAP_MAX_RANGES];
        int nr;
        if (!strcmp(a, "--")) {
            i++;
            break;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            record_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--dormant")) {
            setenv("KCAP_DORMANT", "1", 1);
            continue;
        }
        if (a[0] != '-')
            break; /* the command starts here (no "--") */
        static const char *const valued[] = {"-o", "--output", "--calls", "--every", "--max",
                                             "--max-bytes", "--queue-bytes", "--log", "--lib"};
        int known = 0;
        for (size_t k = 0; k < sizeof valued / sizeof valued[0]; k++)
            known |= !strcmp(a, valued[k]);
        if (!known) {
            fprintf(stderr, "kcap record: unknown option %s\n", a);
            record_usage(stderr);
            return 2;
        }
        if (!v) {
            fprintf(stderr, "kcap record: option %s needs a value\n", a);
            return 2;
        }
        if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            dir = v;
        } else if (!strcmp(a, "--calls")) {
            if (kcap_parse_ranges(v, r, KCAP_MAX_RANGES, &nr)) {
                fprintf(stderr, "kcap record: --calls '%s' is not a list such as 0-9,100\n", v);
                return 2;
            }
            setenv("KCAP_CALLS", v, 1);
        } else if (!strcmp(a, "--every")) {
            if (kcap_parse_u64(v, &u) || !u) {
                fprintf(stderr, "kcap record: --every '%s' is not a positive integer\n", v);
                return 2;
            }
            setenv("KCAP_EVERY", v, 1);
        } else if (!strcmp(a, "--max")) {
            if (kcap_parse_u64(v, &u)) {
                fprintf(stderr, "kcap record: --max '%s' is not a non-negative integer\n", v);
                return 2;
            }
            setenv("KCAP_MAX", v, 1);
        } else if (!strcmp(a, "--max-bytes") || !strcmp(a, "--queue-bytes")) {
            if (kcap_parse_bytes(v, &u)) {
                fprintf(stderr, "kcap record: %s '%s' is not a byte count such as 500M\n", a, v);
                return 2;
            }
            if (!u && !strcmp(a, "--queue-bytes")) {
                fprintf(stderr, "kcap record: --queue-bytes 0 leaves no memory for any snapshot "
                                "(it bounds all of capture's host memory); give a size such as 512M\n");
                return 2;
            }
            setenv(!strcmp(a, "--max-bytes") ? "KCAP_MAX_BYTES" : "KCAP_QUEUE_BYTES", v, 1);
        } else if (!strcmp(a, "--log")) {
            if (strcmp(v, "quiet") && strcmp(v, "warn") && strcmp(v, "info")) {
                fprintf(stderr, "kcap record: --log '%s' is not quiet, warn or info\n", v);
                return 2;
            }
            setenv("KCAP_LOG", v, 1);
        } else { /* --lib (the list above is every option that takes a value) */
            lib = v;
        }
        i++;
    }
    if (!dir) {
        fprintf(stderr, "kcap record: -o DIR is required\n");
        record_usage(stderr);
        return 2;
    }
    if (i >= argc) {
        fprintf(stderr, "kcap record: no command given (kcap record -o DIR -- CMD ARGS...)\n");
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
    char abs[4096];
    if (!realpath(libpath, abs))
        snprintf(abs, sizeof abs, "%s", libpath);
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
    execvp(argv[i], argv + i);
    fprintf(stderr, "kcap record: cannot run %s: %s\n", argv[i], strerror(errno));
    return errno == ENOENT ? 127 : 126;
}
