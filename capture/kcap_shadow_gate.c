/*
 * kcap_shadow_gate.c — `kcap shadow`'s replay gate (kcap_shadow_gate.h): the replay runs in a
 * child with its JSON document on a pipe (`--json -`), so the gate needs no temporary file
 * (a full or odd TMPDIR cannot turn a pass into a refusal) and leaves none; the document
 * says how many snapshots passed, failed or could not run and why a library did not load,
 * and a pass needs all three of an exit status 0, a document and every case passed (a
 * candidate that ends the replay early with exit 0 is not a pass). The replay runs in a
 * process group of its own under a time limit: a candidate that hangs is killed with every
 * process it started, and `kcap shadow` says so instead of waiting forever.
 */
#include "kcap_shadow_gate.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* The replay's document: sizes past this are not read further (tens of thousands of
 * snapshots; the summary, its last key, would then be missing: no pass). */
#define KCAP_GATE_DOC_MAX (256u << 20)

/* The JSON string that follows the first `key` in doc into out (escapes read as the
 * character they escape, enough to show it; cut at n - 1 bytes); "" when absent. */
static void json_str_after(const char *doc, const char *key, char *out, size_t n)
{
    const char *s = strstr(doc, key);
    size_t k = 0;
    for (s = s ? s + strlen(key) : NULL; s && *s && *s != '"' && k + 1 < n; s++) {
        if (*s == '\\' && s[1])
            s++;
        out[k++] = *s;
    }
    out[k] = 0;
}

void kcap_gate_parse(const char *doc, kcap_gate_result *g)
{
    int failed = 0;
    /* keys of the document's own: a quote in a file name is escaped in it, so a name
       cannot hold these texts unescaped */
    const char *s = strstr(doc, "\"summary\":{");
    if (s && sscanf(s, "\"summary\":{\"cases\":%d,\"passed\":%d,\"failed\":%d,\"errors\":%d", &g->cases,
                    &g->passed, &failed, &g->errors) == 4)
        g->have = 1;
    /* a case that ran and failed with another status than at capture (one that could not
       run keeps replay_status 0 and is an error, not this); "status" is a key of cases only */
    for (const char *c = doc; (c = strstr(c, "\"status\":\"")); c++) {
        const char *st = strstr(c, "\"captured_status\":");
        int cs, rs;
        if (!strncmp(c + strlen("\"status\":\""), "fail\"", 5) && st &&
            sscanf(st, "\"captured_status\":%d,\"replay_status\":%d", &cs, &rs) == 2 && cs != rs)
            g->status_mismatch++;
    }
    /* `failed` counts the errors too, and a case whose status differs */
    g->beyond = failed - g->errors - g->status_mismatch;
    if (g->beyond < 0)
        g->beyond = 0;
    json_str_after(doc, "\"load_error\":\"", g->load_error, sizeof g->load_error);
    json_str_after(doc, "\"status\":\"error\",\"error\":\"", g->first_error, sizeof g->first_error);
}

static long long now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* All of fd until its end, NUL-terminated (NULL when out of memory); *late set, and the
 * reading stopped, when the end has not come by deadline_ms (CLOCK_MONOTONIC; 0: none). */
static char *read_all(int fd, long long deadline_ms, int *late)
{
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    *late = 0;
    for (ssize_t r; b;) {
        if (deadline_ms) { /* wait for the next bytes no later than the deadline */
            long long left = deadline_ms - now_ms();
            if (left <= 0) {
                *late = 1;
                break;
            }
            struct pollfd pf = {fd, POLLIN, 0};
            int pr = poll(&pf, 1, left > 1000000 ? 1000000 : (int)left);
            if (pr < 0 && errno != EINTR)
                break;
            if (pr <= 0)
                continue; /* interrupted or timed out: the deadline is checked again */
        }
        if (n + 1 == cap) {
            char *nb = cap < KCAP_GATE_DOC_MAX ? realloc(b, cap * 2) : NULL;
            if (!nb) { /* drain the rest so the child is never blocked on the pipe */
                char sink[4096];
                for (ssize_t d; (d = read(fd, sink, sizeof sink)) > 0 || (d < 0 && errno == EINTR);)
                    ;
                break;
            }
            b = nb, cap *= 2;
        }
        r = read(fd, b + n, cap - 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    if (b)
        b[n] = 0;
    return b;
}

int kcap_gate_run(const char *dir, const char *cand, char tol[KCAP_NTOL][32], int verbose, int timeout_s,
                  kcap_gate_result *g)
{
    memset(g, 0, sizeof *g);
    g->rc = -1;
    const char *argv[10 + 2 * KCAP_NTOL] = {"kcap", "replay", dir, "--kernel", cand, "--ref", "none",
                                            "--json", "-"};
    int n = 9;
    for (int k = 0; k < KCAP_NTOL; k++)
        if (tol[k][0])
            argv[n++] = kcap_tol_names[k].flag, argv[n++] = tol[k];
    int pfd[2];
    if (pipe(pfd))
        return 0;
    fflush(NULL);
    pid_t p = fork();
    if (p == 0) {
        setpgid(0, 0); /* its own group: a time limit kills the candidate's children too */
        dup2(pfd[1], STDOUT_FILENO); /* the document; the human table goes to stderr */
        close(pfd[0]), close(pfd[1]);
        if (!verbose) /* what it found is said from its document (kcap_gate_say) */
            freopen("/dev/null", "w", stderr);
        execv("/proc/self/exe", (char *const *)argv);
        _exit(127);
    }
    close(pfd[1]);
    if (p > 0)
        setpgid(p, p); /* as the child does, whichever runs first */
    int late = 0;
    char *doc = p > 0 ? read_all(pfd[0], timeout_s > 0 ? now_ms() + 1000ll * timeout_s : 0, &late) : NULL;
    close(pfd[0]);
    if (late) {
        kill(-p, SIGKILL); /* the replay and whatever it started */
        kill(p, SIGKILL);
        g->timed_out = timeout_s;
        free(doc);
        doc = NULL;
    }
    int st = 0;
    pid_t w = -1;
    while (p > 0 && (w = waitpid(p, &st, 0)) < 0 && errno == EINTR)
        ;
    if (p > 0 && w == p) { /* else (SIGCHLD ignored: no status to wait for) rc stays -1: no pass */
        g->rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
        g->signal = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
    }
    if (doc)
        kcap_gate_parse(doc, g);
    free(doc);
    return kcap_gate_passed(g);
}

int kcap_gate_passed(const kcap_gate_result *g)
{
    return g->rc == 0 && !g->signal && !g->timed_out && g->have && g->passed == g->cases && !g->load_error[0];
}

void kcap_gate_say(FILE *f, const char *cand, const char *dir, const kcap_gate_result *g, const char *tail)
{
    char also[96] = "", why[1100] = "";
    if (g->have && g->errors && (g->beyond || g->status_mismatch))
        snprintf(also, sizeof also, "; %d more could not be replayed", g->errors);
    if (g->first_error[0])
        snprintf(why, sizeof why, "; the first: %s", g->first_error);
    if (g->timed_out)
        fprintf(f, "kcap shadow: the replay of %s on the snapshots in %s had not ended after %d s (a "
                   "candidate that hangs?); it was killed (--gate-timeout SEC gives it longer)%s", cand, dir,
                g->timed_out, tail);
    else if (g->signal)
        fprintf(f, "kcap shadow: the replay of %s on the snapshots in %s was killed by signal %d (%s)%s%s", cand,
                dir, g->signal, strsignal(g->signal),
                g->have && g->passed == g->cases ? ", after every snapshot had passed: the candidate "
                                                   "crashes the process it runs in" : "", tail);
    else if (g->load_error[0])
        fprintf(f, "kcap shadow: %s cannot be loaded as a kernel library: %s%s", cand, g->load_error, tail);
    else if (g->have && g->beyond)
        fprintf(f, "kcap shadow: %s fails %d of the %d snapshots in %s (outside tolerance%s%s)%s", cand, g->beyond,
                g->cases, dir, g->status_mismatch ? "; it also returned other statuses than at capture" : "",
                also, tail);
    else if (g->have && g->status_mismatch)
        fprintf(f, "kcap shadow: %s returns another status than at capture on %d of the %d snapshots in %s "
                   "(an error where the production kernel ran, or the reverse)%s%s",
                cand, g->status_mismatch, g->cases, dir, also, tail);
    else if (g->have && g->errors)
        fprintf(f, "kcap shadow: %s could not be judged on %d of the %d snapshots in %s (they could not be "
                   "replayed, none was outside tolerance%s)%s",
                cand, g->errors, g->cases, dir, why, tail);
    else if (g->rc == 0)
        fprintf(f, "kcap shadow: the replay of %s on the snapshots in %s ended with no result (the candidate "
                   "ended the process early?)%s", cand, dir, tail);
    else
        fprintf(f, "kcap shadow: %s fails (or cannot replay) the snapshots in %s (kcap replay exit %d)%s", cand,
                dir, g->rc, tail);
}
