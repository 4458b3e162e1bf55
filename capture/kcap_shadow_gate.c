/*
 * kcap_shadow_gate.c — `kcap shadow`'s replay gate (kcap_shadow_gate.h): the replay runs in a
 * child with its JSON document on a pipe (`--json -`), so the gate needs no temporary file
 * (a full or odd TMPDIR cannot turn a pass into a refusal) and leaves none; the document
 * says how many snapshots passed, failed or could not run and why a library did not load,
 * and a pass needs all three of an exit status 0, a document and every case passed (a
 * candidate that ends the replay early with exit 0 is not a pass). The replay runs below a
 * reaper under a time limit (kcap_child.c): a candidate that hangs is killed with every
 * process it started, and `kcap shadow` says so instead of waiting forever.
 */
#include "kcap_shadow_gate.h"
#include "kcap_child.h" /* the replay below a reaper, collected under the time limit */

#include <fcntl.h>
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


/* The replay the gate runs, below the reaper (kcap_child_spawn): its TMPDIR, the document's
 * descriptor (3), its stdout and stderr, then exec. */
struct gate_child {
    const char **argv;
    const char *tmpdir;
    int wr, verbose;
};
static void gate_child_main(void *arg)
{
    const struct gate_child *gc = arg;
    if (gc->tmpdir)
        setenv("TMPDIR", gc->tmpdir, 1);
    if (gc->wr != 3) {
        dup2(gc->wr, 3); /* the document */
        close(gc->wr);
    }
    fcntl(3, F_SETFD, 0); /* kept across exec */
    if (gc->verbose) { /* the human table (stdout) and the replay's problems on stderr */
        dup2(STDERR_FILENO, STDOUT_FILENO);
    } else { /* what it found is said from its document (kcap_gate_say) */
        int nul = open("/dev/null", O_WRONLY); /* dup2, not freopen: nothing to ignore */
        if (nul >= 0) {
            dup2(nul, STDOUT_FILENO);
            dup2(nul, STDERR_FILENO);
            if (nul > STDERR_FILENO && nul != 3)
                close(nul);
        }
    }
    execv("/proc/self/exe", (char *const *)gc->argv);
}

int kcap_gate_run(const char *dir, const char *cand, char tol[KCAP_NTOL][32], int verbose, int timeout_s,
                  const char *tmpdir, kcap_gate_result *g)
{
    memset(g, 0, sizeof *g);
    g->rc = -1;
    /* the document on a descriptor of its own (3), not stdout: a candidate that writes to,
       closes or redirects its stdout cannot spoil or hide it */
    const char *argv[10 + 2 * KCAP_NTOL] = {"kcap", "replay", dir, "--kernel", cand, "--ref", "none",
                                            "--json", "/dev/fd/3"};
    int n = 9;
    for (int k = 0; k < KCAP_NTOL; k++)
        if (tol[k][0])
            argv[n++] = kcap_tol_names[k].flag, argv[n++] = tol[k];
    int pfd[2];
    if (pipe(pfd))
        return 0;
    struct gate_child gc = {argv, tmpdir, pfd[1], verbose};
    pid_t p = kcap_child_spawn(pfd[0], pfd[1], gate_child_main, &gc);
    close(pfd[1]);
    if (p < 0) {
        close(pfd[0]);
        return 0;
    }
    char *doc = NULL;
    int st = -1, late = 0;
    kcap_child_collect(p, pfd[0], timeout_s, KCAP_GATE_DOC_MAX, &doc, &st, &late);
    if (late) {
        g->timed_out = timeout_s;
        free(doc);
        doc = NULL;
    } else if (st != -1) { /* else (SIGCHLD ignored: no status to wait for) rc stays -1: no pass */
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
