/*
 * kcap_cli.h — the subcommands of build/bin/kcap. Each module implements its own:
 * formats/ (info, check, ls), capture/ (record, arm), replay/ (replay, diff, dump), cli/
 * (export, via the Python package).
 * A command gets argv with argv[0] = the subcommand name, prints its own output and
 * errors, and returns the process exit status (0 ok, 1 failure/mismatch, 2 usage error).
 */
#ifndef KCAP_CLI_H
#define KCAP_CLI_H

#include <getopt.h>

#include "kcap_builddir.h" /* common/: kcap_build_dir */
#include "kcap_version.h"  /* common/: KCAP_VERSION */

int kcap_cmd_info(int argc, char **argv);
int kcap_cmd_check(int argc, char **argv);
int kcap_cmd_ls(int argc, char **argv);
int kcap_cmd_record(int argc, char **argv);
int kcap_cmd_arm(int argc, char **argv);
int kcap_cmd_shadow(int argc, char **argv); /* capture/kcap_cmd_shadow.c */
int kcap_cmd_replay(int argc, char **argv);
int kcap_cmd_diff(int argc, char **argv);
int kcap_cmd_dump(int argc, char **argv);   /* replay/kcap_cmd_dump.c */
int kcap_cmd_export(int argc, char **argv); /* cli/kcap_python.c: python3 -m kcap */

/* Run `python3 -m kcap ARGS...` (NULL-terminated) with the kcap package of this build or
 * installation on PYTHONPATH, and wait: its exit status, or -1 (a message naming `who`
 * was printed) when it could not run. */
int kcap_cli_run_python(const char *const *args, const char *who);

/*
 * Option parsing of every command (cli/kcap_cli_opts.c). Each command's table ends with
 * KCAP_CLI_COMMON_OPTS and its short options include KCAP_CLI_COMMON_SHORT:
 *   -q/--quiet    only errors and the final verdict (or nothing but the exit status)
 *   -v/--verbose  per-item detail; each command's --help says what it adds
 *   -h/--help
 * `--opt=value` and `--opt value` both work (getopt_long); a value of "-" for a file that is
 * written means stdout.
 */
#define KCAP_CLI_COMMON_OPTS                                                                  \
    {"quiet", no_argument, 0, 'q'}, {"verbose", no_argument, 0, 'v'},                       \
        {"help", no_argument, 0, 'h'}, { 0, 0, 0, 0 }
#define KCAP_CLI_COMMON_SHORT "qvh"
#define KCAP_CLI_COMMON_HELP                                                                  \
    "  -q, --quiet        only errors and the final verdict (see above)\n"                  \
    "  -v, --verbose      more detail per item (see above)\n"                               \
    "  -h, --help         this text\n"
enum { KCAP_QUIET = -1, KCAP_NORMAL = 0, KCAP_VERBOSE = 1 };

/* getopt_long over argv for command `cmd` ("replay"): returns the option's value, -1 after
 * the last option (optind = first operand), or '?' once the error was printed (an unknown
 * option, a missing value; the caller exits 2). `shorts` as for getopt without the leading
 * ':' ("+..." stops at the first operand). Start each parse with optind = 0. */
int kcap_cli_getopt(const char *cmd, int argc, char **argv, const char *shorts,
                    const struct option *lo);
/* "kcap CMD: <message>" and the --help hint on stderr (a usage error: exit 2). */
void kcap_cli_usage_error(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Option values: a number >= 0 (tolerances), an integer in [lo, hi]; on a bad value a usage
 * error naming the option is printed and -1 returned. */
int kcap_cli_number(const char *cmd, const char *opt, const char *s, double *out);
int kcap_cli_count(const char *cmd, const char *opt, const char *s, long lo, long hi, long *out);
/* -q / -v: sets *verbosity (KCAP_QUIET / KCAP_VERBOSE) and returns 1; 0 for any other ch. */
int kcap_cli_verbosity(int ch, int *verbosity);
/* 1 when `path` names a regular file (a directory or a device is no kernel library). */
int kcap_cli_is_file(const char *path);


#endif
