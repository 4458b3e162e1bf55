/*
 * kcap_cmd_shadow.c — `kcap shadow PID CAND.so [--force] [--atol A ...] | --off | --status`:
 * start or swap the candidate kernel of a process running in shadow mode (KCAP_SHADOW /
 * kcap record --shadow), stop it, or print its live summary — without restarting the process.
 *
 * A new candidate is first replayed (`kcap replay`, a process of its own: kcap_shadow_gate.c)
 * against the snapshots already in the capture directory — the divergences shadow mode kept,
 * golden cases copied there — and refused when it fails them, unless --force: a candidate that
 * crashes or corrupts the CUDA context cannot be contained inside the service, so the
 * offline gate is the guard. The gate judges with the tolerances the process will use: each
 * one given (--atol ...), else the process's KCAP_SHADOW_ATOL ..., else replay's default.
 * The request itself goes through the control channel of `kcap arm` (kcap_arm_client.c):
 * "shadow [atol=A ...] /abs/CAND.so", only the tolerances given (the process takes its
 * configured ones for the rest, so without them the request is the one older libkcaps
 * know); the process loads a private copy, so a library rebuilt in place is really new code.
 */
#include "kcap_arm_client.h"
#include "kcap_child.h" /* kcap_child_interrupt: the check ended by Ctrl-C too */
#include "kcap_cli.h"
#include "kcap_config.h"
#include "kcap_shadow_gate.h"
#include "kcap_shadow_loadcheck.h"

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The longest command a request may carry (kcap_arm.c reads one line of up to 399). */
#define KCAP_SHADOW_REQUEST_MAX 399

/* The checks take seconds (a replay of every snapshot) and hold a private copy of the
 * candidate on disk: Ctrl-C, a supervisor's SIGTERM or a closed terminal's SIGHUP during them
 * must leave neither that copy nor a check running. The handler only records the signal and
 * ends the check (kcap_child_interrupt); the normal path then removes the copy, and the signal
 * is raised again once it is gone, so the exit status still says what ended kcap shadow. A
 * signal the caller ignored (nohup) stays ignored; SIGKILL cannot be caught: then the copy
 * stays in TMPDIR until a later kcap shadow sweeps it (kcap_check_copy), and the check itself
 * still dies with kcap shadow (kcap_child.c). */
static const int k_stop_signals[] = KCAP_CHILD_STOP_SIGNALS;
#define KCAP_NSTOP ((int)(sizeof k_stop_signals / sizeof k_stop_signals[0]))
static volatile sig_atomic_t g_stop_signal;
static struct sigaction g_stop_old[KCAP_NSTOP];
static int g_stop_set[KCAP_NSTOP];

static void on_stop_signal(int sig)
{
    const int e = errno;
    g_stop_signal = sig;
    kcap_child_interrupt();
    errno = e;
}

static void stop_signals_catch(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal; /* no SA_RESTART: a blocking call returns to be noticed */
    sigemptyset(&sa.sa_mask);
    for (int k = 0; k < KCAP_NSTOP; k++) {
        struct sigaction cur;
        g_stop_set[k] = sigaction(k_stop_signals[k], NULL, &cur) == 0 && cur.sa_handler != SIG_IGN &&
                        sigaction(k_stop_signals[k], &sa, &g_stop_old[k]) == 0;
    }
}

/* The handlers go; a signal that came meanwhile ends kcap shadow now, as it would have. */
static void stop_signals_release(const char *cand)
{
    for (int k = 0; k < KCAP_NSTOP; k++)
        if (g_stop_set[k])
            sigaction(k_stop_signals[k], &g_stop_old[k], NULL);
    const int sig = g_stop_signal;
    if (!sig)
        return;
    fprintf(stderr, "kcap shadow: %s during the check of %s: nothing armed, the check ended and its copy "
                    "removed\n", strsignal(sig), cand);
    signal(sig, SIG_DFL);
    raise(sig);
    _exit(128 + sig); /* (a caller that blocked it) */
}

static int usage(FILE *f)
{
    fprintf(f, "usage: kcap shadow PID CAND.so [--force] [--atol A] [--rtol R] [--lse-atol A]\n"
               "                   [--lse-rtol R] [--gate-timeout SEC] | --off | --status\n"
               "                   [--dir DIR] [--timeout SEC]\n"
               "  swaps the candidate kernel of a process started in shadow mode (KCAP_SHADOW,\n"
               "  kcap record --shadow), stops shadow mode, or prints its live summary.\n"
               "  A new candidate must first pass `kcap replay` on the snapshots in the\n"
               "  process's capture directory (DIR, default its KCAP_DIR).\n"
               "  --force            arm a candidate that fails those snapshots anyway (never\n"
               "                     one that crashes, hangs or does not load)\n"
               "  --atol A, --rtol R, --lse-atol A, --lse-rtol R\n"
               "                     the tolerances the new candidate is judged with, live and by\n"
               "                     the replay first (kcap replay's options); one not given is\n"
               "                     the process's own (KCAP_SHADOW_ATOL ..., else replay's)\n"
               "  --timeout SEC      wait this long for the process's answer (default 5)\n"
               "  --gate-timeout SEC kill the replay of the snapshots if it runs longer (default\n"
               "                     600; 0 = no limit): a candidate that hangs is refused\n"
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

int kcap_cmd_shadow(int argc, char **argv)
{
    enum { O_TOL = 256 }; /* --atol ...: O_TOL + KCAP_TOL_* */
    static const struct option lo[] = {
        {"off", no_argument, 0, 'O'},       {"status", no_argument, 0, 'S'},
        {"force", no_argument, 0, 'F'},     {"dir", required_argument, 0, 'D'},
        {"timeout", required_argument, 0, 'W'}, {"gate-timeout", required_argument, 0, 'G'},
        {"atol", required_argument, 0, O_TOL + KCAP_TOL_ATOL},
        {"rtol", required_argument, 0, O_TOL + KCAP_TOL_RTOL},
        {"lse-atol", required_argument, 0, O_TOL + KCAP_TOL_LSE_ATOL},
        {"lse-rtol", required_argument, 0, O_TOL + KCAP_TOL_LSE_RTOL}, KCAP_CLI_COMMON_OPTS};
    int off = 0, status = 0, force = 0, verbosity = KCAP_NORMAL, ch, ntol = 0;
    int tol_given[KCAP_NTOL] = {0};
    double tol[KCAP_NTOL] = {0};
    uint64_t wait_s = 5, gate_s = 600, u;
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
        case 'G':
            if (kcap_parse_u64(optarg, &gate_s) || gate_s > 86400) {
                kcap_cli_usage_error("shadow", "--gate-timeout '%s' is not a number of seconds "
                                     "(0..86400; 0 = no limit)", optarg);
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
        char tols[KCAP_NTOL][32] = {{0}}, terms[KCAP_NTOL * 48 + 64] = "", flags[KCAP_NTOL * 48] = "";
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
        if (strlen(terms) + strlen(abs) > KCAP_SHADOW_REQUEST_MAX - 7 - 32) { /* and the hash term */
            fprintf(stderr, "kcap shadow: %s with those tolerances makes a request too long "
                            "(%d characters at most)\n", abs, KCAP_SHADOW_REQUEST_MAX);
            return 1;
        }
        char d[PATH_MAX]; /* the process checked, and its directory found, before any replay */
        if (kcap_arm_target("kcap shadow", pid, "KCAP_SHADOW") ||
            kcap_arm_dir_of("kcap shadow", pid, dir, d, sizeof d))
            return 1;
        /* every check runs on one private copy, whose hash the request carries: the process
           loads those bytes or nothing (a rebuild in place meanwhile is refused there) */
        char cdir[PATH_MAX], ccopy[PATH_MAX + 32], chash[40], cwhy[PATH_MAX + 200];
        int clock_fd = -1;
        stop_signals_catch();
        if (kcap_check_copy(abs, cdir, sizeof cdir, ccopy, sizeof ccopy, chash, sizeof chash, &clock_fd, cwhy,
                            sizeof cwhy)) {
            stop_signals_release(abs);
            fprintf(stderr, "kcap shadow: %s\n", cwhy);
            return 1;
        }
        char hterm[64];
        snprintf(hterm, sizeof hterm, "hash=%s ", chash);
        memmove(terms + strlen(hterm), terms, strlen(terms) + 1);
        memcpy(terms, hterm, strlen(hterm));
        if (!has_snapshots(d)) { /* nothing to replay: it is at least loaded, away from the service */
            kcap_loadcheck lc;
            int pass = g_stop_signal ? 0 : kcap_loadcheck_run(ccopy, cdir, (int)gate_s, &lc);
            kcap_check_copy_remove(cdir, ccopy, &clock_fd);
            stop_signals_release(abs);
            /* --force overrides a verdict on results, never a candidate that crashed or hung
             * while loading: armed, it would do the same to the service (a constructor that
             * aborts killed the host under --force) */
            int unsafe = lc.signal || lc.timed_out;
            if (!pass && (!force || unsafe)) {
                kcap_loadcheck_say(stderr, abs, &lc,
                                   unsafe ? "; not armed (--force does not arm a candidate that crashes "
                                            "or hangs)\n"
                                          : "; not armed (--force arms it anyway)\n");
                return 1;
            }
            if (!pass && verbosity != KCAP_QUIET)
                kcap_loadcheck_say(stdout, abs, &lc, "; armed anyway (--force)\n");
            else if (verbosity != KCAP_QUIET)
                printf("kcap shadow: no snapshots in %s to replay the candidate against first; it loads as a "
                       "%s kernel library in a process of its own\n", d, lc.backend);
        } else {
            kcap_gate_result g;
            int pass = g_stop_signal ? 0 : kcap_gate_run(d, ccopy, tols, verbosity == KCAP_VERBOSE, (int)gate_s, cdir, &g);
            kcap_check_copy_remove(cdir, ccopy, &clock_fd);
            stop_signals_release(abs);
            /* as above: a replay the candidate killed, hung or could not load in is no verdict
             * --force may override */
            int unsafe = g.signal || g.timed_out || g.load_error[0] || !g.have;
            if (!pass && (!force || unsafe)) {
                kcap_gate_say(stderr, abs, d, &g,
                              unsafe ? "; not armed (--force does not arm a candidate that crashes, "
                                       "hangs or does not load)\n"
                                     : "; not armed (--force arms it anyway)\n");
                fprintf(stderr, "kcap shadow: run `kcap replay '%s' --kernel '%s'%s` to see where\n", d, abs,
                        flags);
                return 1;
            }
            if (!pass && verbosity != KCAP_QUIET)
                kcap_gate_say(stdout, abs, d, &g, "; armed anyway (--force)\n");
            else if (verbosity != KCAP_QUIET)
                printf("kcap shadow: %s passes the snapshots in %s%s%s\n", abs, d, flags[0] ? " with" : "",
                       flags);
        }
        snprintf(cmd, sizeof cmd, "shadow %s%s", terms, abs);
        /* a test seam: a window between the checks and the request, for the test of a file
           replaced in between (test_capture_shadow_hostile.sh) */
        const char *delay = getenv("KCAP_SHADOW_TEST_DELAY_MS");
        if (delay && atoi(delay) > 0 && atoi(delay) <= 10000)
            usleep((useconds_t)atoi(delay) * 1000);
    }
    return kcap_arm_send("kcap shadow", pid, dir, "KCAP_SHADOW", cmd, wait_s, verbosity);
}
