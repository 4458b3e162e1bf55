/*
 * kcap_cmd_shadow.c — `kcap shadow PID CAND.so [--force] [--atol A ...] | --off | --status`:
 * start or swap the candidate kernel of a process running in shadow mode (KCAP_SHADOW /
 * kcap record --shadow), stop it, or print its live summary — without restarting the process.
 *
 * A new candidate is first replayed (`kcap replay`, a process of its own) against the
 * snapshots already in the capture directory — the divergences shadow mode kept, golden
 * cases copied there — and refused when it fails them, unless --force: a candidate that
 * crashes or corrupts the CUDA context cannot be contained inside the service, so the
 * offline gate is the guard. The gate judges with the tolerances the process will use: each
 * one given (--atol ...), else the process's KCAP_SHADOW_ATOL ..., else replay's default.
 * The request itself goes through the control channel of `kcap arm` (kcap_arm_client.c):
 * "shadow [atol=A ...] /abs/CAND.so", only the tolerances given (the process takes its
 * configured ones for the rest, so without them the request is the one older libkcaps
 * know); the process loads a private copy, so a library rebuilt in place is really new code.
 */
#include "kcap_arm_client.h"
#include "kcap_cli.h"
#include "kcap_config.h"

#include <dirent.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* The longest command a request may carry (kcap_arm.c reads one line of up to 399). */
#define KCAP_SHADOW_REQUEST_MAX 399

static int usage(FILE *f)
{
    fprintf(f, "usage: kcap shadow PID CAND.so [--force] [--atol A] [--rtol R] [--lse-atol A]\n"
               "                   [--lse-rtol R] | --off | --status  [--dir DIR] [--timeout SEC]\n"
               "  swaps the candidate kernel of a process started in shadow mode (KCAP_SHADOW,\n"
               "  kcap record --shadow), stops shadow mode, or prints its live summary.\n"
               "  A new candidate must first pass `kcap replay` on the snapshots in the\n"
               "  process's capture directory (DIR, default its KCAP_DIR).\n"
               "  --force            arm a candidate that fails those snapshots anyway\n"
               "  --atol A, --rtol R, --lse-atol A, --lse-rtol R\n"
               "                     the tolerances the new candidate is judged with, live and by\n"
               "                     the replay first (kcap replay's options); one not given is\n"
               "                     the process's own (KCAP_SHADOW_ATOL ..., else replay's)\n"
               "  --timeout SEC      wait this long for the process's answer (default 5)\n"
               "  -q, --quiet        print nothing when the process confirmed (errors only)\n"
               "  -v, --verbose      also say where the request went and show the replay\n"
               "  -h, --help         this text\n");
    return f == stdout ? 0 : 2;
}

/* 1 when dir holds at least one .h5 file. */
static int has_snapshots(const char *dir)
{
    DIR *d = opendir(dir);
    int found = 0;
    for (struct dirent *e; d && !found && (e = readdir(d));) {
        size_t n = strlen(e->d_name);
        found = n > 3 && !strcmp(e->d_name + n - 3, ".h5");
    }
    if (d)
        closedir(d);
    return found;
}

/* v as the shortest decimal that reads back as the same double. */
static void tol_text(char *b, size_t n, double v)
{
    for (int p = 1; p <= 17; p++) {
        snprintf(b, n, "%.*g", p, v);
        if (strtod(b, NULL) == v)
            return;
    }
}

/* What the gate's replay said, from its JSON document (docs/JSON.md): the cases, those
 * outside tolerance, those that could not run, or why the library could not be loaded.
 * `have` 0: no document (the replay died or could not write it). */
typedef struct {
    int have, cases, beyond, errors;
    char load_error[240];
} gate_result;

static void gate_read(const char *json, gate_result *g)
{
    FILE *f = fopen(json, "r");
    long size = -1;
    if (f && fseek(f, 0, SEEK_END) == 0)
        size = ftell(f);
    char *doc = size > 0 && size < (1l << 30) ? malloc((size_t)size + 1) : NULL;
    size_t n = doc && fseek(f, 0, SEEK_SET) == 0 ? fread(doc, 1, (size_t)size, f) : 0;
    if (f)
        fclose(f);
    if (!doc)
        return;
    doc[n] = 0;
    int passed = 0, failed = 0;
    const char *s = strstr(doc, "\"summary\":{"); /* one key of the document's own (a file
                                                     name's quote is escaped in it) */
    if (s && sscanf(s, "\"summary\":{\"cases\":%d,\"passed\":%d,\"failed\":%d,\"errors\":%d", &g->cases,
                    &passed, &failed, &g->errors) == 4) {
        g->have = 1;
        g->beyond = failed - g->errors; /* `failed` counts the errors too */
    }
    const char *le = strstr(doc, "\"load_error\":\"");
    size_t k = 0;
    for (le = le ? le + strlen("\"load_error\":\"") : NULL; le && *le && *le != '"' && k + 1 < sizeof g->load_error;
         le++) {
        if (*le == '\\' && le[1]) /* an escaped character, as itself */
            le++;
        g->load_error[k++] = *le;
    }
    g->load_error[k] = 0;
    free(doc);
}

/* `kcap replay DIR --kernel CAND --ref none --json TMP [--atol A ...]` in a child, with each
 * tolerance of tol[] that is not "": its exit status (-1: not run), and in *g what it said. */
static int replay_gate(const char *dir, const char *cand, char tol[KCAP_NTOL][32], int verbose, gate_result *g)
{
    char tmp[PATH_MAX], json[PATH_MAX + 16];
    const char *td = getenv("TMPDIR");
    snprintf(tmp, sizeof tmp, "%s/kcap-shadow-gate-XXXXXX", td && *td ? td : "/tmp");
    int have_tmp = mkdtemp(tmp) != NULL; /* without one the verdict is the exit status alone */
    snprintf(json, sizeof json, "%s/replay.json", tmp);
    const char *argv[10 + 2 * KCAP_NTOL] = {"kcap", "replay", dir, "--kernel", cand, "--ref",
                                            "none"};
    int n = 7;
    if (have_tmp)
        argv[n++] = "--json", argv[n++] = json;
    for (int k = 0; k < KCAP_NTOL; k++)
        if (tol[k][0])
            argv[n++] = kcap_tol_names[k].flag, argv[n++] = tol[k];
    memset(g, 0, sizeof *g);
    int rc = -1, st = 0;
    pid_t p = fork();
    if (p == 0) {
        if (!verbose) { /* what it found is said from its document (gate_say); -v shows it */
            freopen("/dev/null", "w", stdout);
            if (have_tmp)
                freopen("/dev/null", "w", stderr);
        }
        execv("/proc/self/exe", (char *const *)argv);
        _exit(127);
    }
    if (p > 0 && waitpid(p, &st, 0) == p)
        rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    if (have_tmp) {
        gate_read(json, g);
        unlink(json);
        rmdir(tmp);
    }
    return rc;
}

/* The gate's refusal (or, with --force, its warning), saying which of the three it was. */
static void gate_say(FILE *f, const char *abs, const char *d, int rc, const gate_result *g, const char *tail)
{
    if (g->load_error[0])
        fprintf(f, "kcap shadow: %s cannot be loaded as a kernel library: %s%s", abs, g->load_error, tail);
    else if (g->have && g->beyond > 0)
        fprintf(f, "kcap shadow: %s fails %d of the %d snapshots in %s (outside tolerance%s)%s", abs,
                g->beyond, g->cases, d, g->errors ? "; more could not be replayed" : "", tail);
    else if (g->have && g->errors > 0)
        fprintf(f, "kcap shadow: %s could not be judged on %d of the %d snapshots in %s (they could "
                   "not be replayed: unreadable or not replayable; none outside tolerance)%s",
                abs, g->errors, g->cases, d, tail);
    else
        fprintf(f, "kcap shadow: %s fails (or cannot replay) the snapshots in %s (kcap replay exit %d)%s",
                abs, d, rc, tail);
}

int kcap_cmd_shadow(int argc, char **argv)
{
    enum { O_TOL = 256 }; /* --atol ...: O_TOL + KCAP_TOL_* */
    static const struct option lo[] = {
        {"off", no_argument, 0, 'O'},       {"status", no_argument, 0, 'S'},
        {"force", no_argument, 0, 'F'},     {"dir", required_argument, 0, 'D'},
        {"timeout", required_argument, 0, 'W'},
        {"atol", required_argument, 0, O_TOL + KCAP_TOL_ATOL},
        {"rtol", required_argument, 0, O_TOL + KCAP_TOL_RTOL},
        {"lse-atol", required_argument, 0, O_TOL + KCAP_TOL_LSE_ATOL},
        {"lse-rtol", required_argument, 0, O_TOL + KCAP_TOL_LSE_RTOL}, KCAP_CLI_COMMON_OPTS};
    int off = 0, status = 0, force = 0, verbosity = KCAP_NORMAL, ch, ntol = 0;
    int tol_given[KCAP_NTOL] = {0};
    double tol[KCAP_NTOL] = {0};
    uint64_t wait_s = 5, u;
    const char *dir = NULL;
    optind = 0;
    while ((ch = kcap_cli_getopt("shadow", argc, argv, KCAP_CLI_COMMON_SHORT, lo)) != -1) {
        switch (ch) {
        case 'h': return usage(stdout);
        case 'O': off = 1; break;
        case 'S': status = 1; break;
        case 'F': force = 1; break;
        case 'D': dir = optarg; break;
        case 'W':
            if (kcap_parse_u64(optarg, &wait_s) || wait_s > 3600) {
                kcap_cli_usage_error("shadow", "--timeout '%s' is not a number of seconds "
                                     "(0..3600)", optarg);
                return 2;
            }
            break;
        case 'q':
        case 'v': kcap_cli_verbosity(ch, &verbosity); break;
        case O_TOL + KCAP_TOL_ATOL:
        case O_TOL + KCAP_TOL_RTOL:
        case O_TOL + KCAP_TOL_LSE_ATOL:
        case O_TOL + KCAP_TOL_LSE_RTOL:
            if (kcap_parse_tol(optarg, &tol[ch - O_TOL])) {
                kcap_cli_usage_error("shadow", "%s '%s' is not a non-negative finite number",
                                     kcap_tol_names[ch - O_TOL].flag, optarg);
                return 2;
            }
            ntol += !tol_given[ch - O_TOL];
            tol_given[ch - O_TOL] = 1;
            break;
        default: return 2;
        }
    }
    int nargs = argc - optind;
    if (nargs < 1 || kcap_parse_u64(argv[optind], &u) || !u || u > 0x7fffffff) {
        if (nargs >= 1)
            fprintf(stderr, "kcap shadow: '%s' is not a process id\n", argv[optind]);
        return usage(stderr);
    }
    long pid = (long)u;
    const char *cand = nargs >= 2 ? argv[optind + 1] : NULL;
    if (nargs > 2 || off + status + (cand != NULL) != 1) {
        fprintf(stderr, "kcap shadow: give exactly one of CAND.so, --off, --status\n");
        return 2;
    }
    if (ntol && !cand) {
        fprintf(stderr, "kcap shadow: --atol, --rtol, --lse-atol and --lse-rtol go with a new "
                        "CAND.so (the tolerances it is judged with)\n");
        return 2;
    }
    char cmd[PATH_MAX + 16];
    if (off || status) {
        snprintf(cmd, sizeof cmd, "%s", off ? "shadow-off" : "shadow-status");
    } else {
        char abs[PATH_MAX];
        if (!realpath(cand, abs) || access(abs, R_OK) || !kcap_cli_is_file(abs)) {
            fprintf(stderr, "kcap shadow: %s: not a readable kernel library\n", cand);
            return 1;
        }
        for (const char *q = abs; *q; q++)
            if ((unsigned char)*q < 0x20 || *q == 0x7f) { /* the request is one line */
                fprintf(stderr, "kcap shadow: %s: a control character (0x%02x) in the path; "
                        "rename or link the library to a plain path\n", cand, (unsigned char)*q);
                return 1;
            }
        if (strlen(abs) > 380) {
            fprintf(stderr, "kcap shadow: %s: path too long for a request (380 characters at "
                            "most)\n", abs);
            return 1;
        }
        /* the tolerances of the gate: given, else the process's own, else replay's default
         * (tols[k] ""); the request carries the given ones as terms "atol=A " */
        char tols[KCAP_NTOL][32] = {{0}}, terms[KCAP_NTOL * 48] = "", flags[KCAP_NTOL * 48] = "";
        for (int k = 0; k < KCAP_NTOL; k++) {
            char env[64];
            double v = tol[k];
            if (!tol_given[k] && (kcap_env_of_pid(pid, kcap_tol_names[k].env, env, sizeof env) ||
                                  !env[0] || kcap_parse_tol(env, &v)))
                continue;
            tol_text(tols[k], sizeof tols[k], v);
            snprintf(flags + strlen(flags), sizeof flags - strlen(flags), " %s %s",
                     kcap_tol_names[k].flag, tols[k]);
            if (tol_given[k])
                snprintf(terms + strlen(terms), sizeof terms - strlen(terms), "%s=%s ",
                         kcap_tol_names[k].key, tols[k]);
        }
        if (strlen(terms) + strlen(abs) > KCAP_SHADOW_REQUEST_MAX - 7) {
            fprintf(stderr, "kcap shadow: %s with those tolerances makes a request too long "
                            "(%d characters at most)\n", abs, KCAP_SHADOW_REQUEST_MAX);
            return 1;
        }
        char d[PATH_MAX]; /* the process checked, and its directory found, before any replay */
        if (kcap_arm_target("kcap shadow", pid, "KCAP_SHADOW") ||
            kcap_arm_dir_of("kcap shadow", pid, dir, d, sizeof d))
            return 1;
        if (!has_snapshots(d)) {
            if (verbosity != KCAP_QUIET)
                printf("kcap shadow: no snapshots in %s to replay the candidate against first\n", d);
        } else {
            gate_result g;
            int rc = replay_gate(d, abs, tols, verbosity == KCAP_VERBOSE, &g);
            if (rc && !force) {
                gate_say(stderr, abs, d, rc, &g, "; not armed (--force arms it anyway)\n");
                fprintf(stderr, "kcap shadow: run `kcap replay %s --kernel %s%s` to see where\n", d, abs, flags);
                return 1;
            }
            if (rc && verbosity != KCAP_QUIET)
                gate_say(stdout, abs, d, rc, &g, "; armed anyway (--force)\n");
            else if (verbosity != KCAP_QUIET)
                printf("kcap shadow: %s passes the snapshots in %s%s%s\n", abs, d, flags[0] ? " with" : "",
                       flags);
        }
        snprintf(cmd, sizeof cmd, "shadow %s%s", terms, abs);
    }
    return kcap_arm_send("kcap shadow", pid, dir, "KCAP_SHADOW", cmd, wait_s, verbosity);
}
