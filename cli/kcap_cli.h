/*
 * kcap_cli.h — the subcommands of build/bin/kcap. Each module implements its own:
 * formats/ (info, check, ls), capture/ (record, arm), replay/ (replay, diff, dump), cli/
 * (export, via the Python package).
 * A command gets argv with argv[0] = the subcommand name, prints its own output and
 * errors, and returns the process exit status (0 ok, 1 failure/mismatch, 2 usage error).
 */
#ifndef KCAP_CLI_H
#define KCAP_CLI_H

#define KCAP_VERSION "0.1.0"

int kcap_cmd_info(int argc, char **argv);
int kcap_cmd_check(int argc, char **argv);
int kcap_cmd_ls(int argc, char **argv);
int kcap_cmd_record(int argc, char **argv);
int kcap_cmd_arm(int argc, char **argv);
int kcap_cmd_replay(int argc, char **argv);
int kcap_cmd_diff(int argc, char **argv);
int kcap_cmd_dump(int argc, char **argv);   /* replay/kcap_cmd_dump.c */
int kcap_cmd_export(int argc, char **argv); /* cli/kcap_python.c: python3 -m kcap */

/* Run `python3 -m kcap ARGS...` (NULL-terminated) with the kcap package of this build or
 * installation on PYTHONPATH, and wait: its exit status, or -1 (a message naming `who`
 * was printed) when it could not run. */
int kcap_cli_run_python(const char *const *args, const char *who);

/* Directory holding build/bin/kcap's siblings (…/build), found from /proc/self/exe, so the
 * CLI can locate build/lib/libkcap.so and build/plugins without installation. */
const char *kcap_cli_build_dir(void);

#endif
