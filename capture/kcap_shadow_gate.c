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
#include "kcap_names.h" /* kcap_proc_stat */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/resource.h>
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

/* 1 when /proc numbers processes as kill() does (not a /proc of another pid namespace,
 * whose numbers would name other processes). */
static int proc_is_ours(void)
{
    char buf[32];
    ssize_t n = readlink("/proc/self", buf, sizeof buf - 1);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    return atol(buf) == (long)getpid();
}

/* In the reaper: what it adopted (a dead child's descendants, setsid() or not), killed and
 * reaped. In rounds, since a killed process's own children come to it next: each round waits
 * only for the processes it killed, so a chain of helpers costs a round per generation, not
 * a second; within ~3 s (a process that cannot be killed is left). The reaper has no children
 * of its own but the one it forked. A helper that forks anew faster than a round (pid
 * hopping) can still escape: only a pid namespace of its own would hold it. */
static void kill_adopted(void)
{
    const long self = (long)getpid();
    const long long end = now_ms() + 3000;
    if (!proc_is_ours())
        return;
    for (int round = 0; round < 200 && now_ms() < end; round++) {
        DIR *d = opendir("/proc");
        if (!d)
            return;
        int killed = 0, zombies = 0;
        struct dirent *e;
        while ((e = readdir(d))) {
            kcap_proc_info pi;
            if (e->d_name[0] < '1' || e->d_name[0] > '9' || kcap_proc_stat(atol(e->d_name), &pi) ||
                pi.ppid != self)
                continue;
            if (pi.state == 'Z')
                zombies++;
            else
                killed += kill((pid_t)atol(e->d_name), SIGKILL) == 0;
        }
        closedir(d);
        for (int reaped = 0; reaped < killed + zombies && now_ms() < end;) {
            pid_t w = waitpid(-1, NULL, WNOHANG);
            if (w > 0)
                reaped++;
            else if (w == 0)
                usleep(1000);
            else if (errno != EINTR)
                break; /* none left */
        }
        if (!killed && !zombies)
            return;
    }
}

/* The reaper: the process kcap_child_collect waits for. It leads a process group of its own,
 * is a child subreaper (a dead descendant's orphans come to it, those that left the group
 * with setsid() too) and forks the one child that runs body; when that child has ended it
 * kills and reaps whatever the child left, then ends the way the child did (exit status, or
 * the same signal). SIGTERM (the time limit, or kcap shadow's own end: PR_SET_PDEATHSIG) is
 * kept blocked and waited for beside SIGCHLD, so one arriving at any moment, fork included,
 * is seen: the child is killed first. The child dies with the reaper (its own
 * PR_SET_PDEATHSIG), ignores terminal stops and reads /dev/null (a background group on the
 * caller's terminal must not stop it: it would look like a hang), and dumps no core. Being a
 * process of its own, the reaper adopts nothing of the CLI's: children the CLI had before (it
 * may have been exec'd by a process with children, a service among them) are never touched. */
static void reaper_main(pid_t parent, int rd, int wr, void (*body)(void *), void *arg)
{
    sigset_t waitset, old;
    sigemptyset(&waitset);
    sigaddset(&waitset, SIGTERM);
    sigaddset(&waitset, SIGCHLD);
    sigprocmask(SIG_BLOCK, &waitset, &old);
    setpgid(0, 0);
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0);
    signal(SIGCHLD, SIG_DFL); /* statuses to wait for, whatever disposition was inherited */
    signal(SIGTERM, SIG_DFL);
    int term = getppid() != parent; /* the parent went before PDEATHSIG was set */
    if (rd >= 0)
        close(rd);
    const pid_t me = getpid();
    pid_t c = term ? -1 : fork();
    if (c == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        if (getppid() != me) /* the reaper went before that was set */
            _exit(127);
        struct rlimit none = {0, 0};
        setrlimit(RLIMIT_CORE, &none);
        signal(SIGTTOU, SIG_IGN);
        signal(SIGTTIN, SIG_IGN);
        int nul = open("/dev/null", O_RDONLY);
        if (nul >= 0 && nul != STDIN_FILENO) {
            dup2(nul, STDIN_FILENO);
            close(nul);
        }
        sigprocmask(SIG_SETMASK, &old, NULL);
        body(arg);
        _exit(127);
    }
    if (wr >= 0)
        close(wr); /* the pipe's write end is the child's (and its helpers') alone */
    int cst = 0, have = 0;
    while (c > 0 && !have) {
        int st;
        pid_t w;
        while ((w = waitpid(-1, &st, WNOHANG)) > 0) /* the child, and adopted processes ending */
            if (w == c)
                cst = st, have = 1;
        if (have || (w < 0 && errno == ECHILD))
            break;
        if (term)
            kill(c, SIGKILL); /* reaped at its SIGCHLD */
        siginfo_t si;
        if (sigwaitinfo(&waitset, &si) == SIGTERM)
            term = 1;
    }
    kill_adopted();
    if (have && WIFSIGNALED(cst)) { /* the parent sees the child's signal, without a core of ours */
        struct rlimit none = {0, 0};
        setrlimit(RLIMIT_CORE, &none);
        prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); /* no piped core handler either */
        int sig = WTERMSIG(cst);
        signal(sig, SIG_DFL);
        sigset_t one;
        sigemptyset(&one);
        sigaddset(&one, sig);
        sigprocmask(SIG_UNBLOCK, &one, NULL);
        raise(sig);
    }
    _exit(have && WIFEXITED(cst) ? WEXITSTATUS(cst) : 127);
}

pid_t kcap_child_spawn(int rd, int wr, void (*body)(void *), void *arg)
{
    signal(SIGCHLD, SIG_DFL); /* a caller that ignored it would get no status of the reaper */
    fflush(NULL);
    pid_t parent = getpid(), p = fork();
    if (p == 0)
        reaper_main(parent, rd, wr, body, arg);
    if (p > 0)
        setpgid(p, p); /* as the reaper does, whichever runs first */
    return p;
}

void kcap_child_collect(int p, int fd, int timeout_s, size_t max, char **out, int *status, int *timed_out)
{
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    long long end = timeout_s > 0 ? now_ms() + 1000ll * timeout_s : 0;
    int exited = 0, st = 0;
    long long drain_end = 0; /* after the exit, what is left is read for at most a second */
    *status = -1, *timed_out = 0;
    for (;;) {
        if (!exited) { /* ended, not reaped yet: its group id stays its own for the kill below */
            siginfo_t si;
            memset(&si, 0, sizeof si);
            int w = waitid(P_PID, (id_t)p, &si, WEXITED | WNOHANG | WNOWAIT);
            if ((w == 0 && si.si_pid == p) || (w < 0 && errno == ECHILD))
                exited = 1; /* (ECHILD: SIGCHLD ignored, no status to be had) */
            if (exited)
                drain_end = now_ms() + 1000;
        }
        if (exited && now_ms() > drain_end)
            break; /* a helper that keeps writing: the child's own output is in */
        long long left = end ? end - now_ms() : 1000;
        if (!exited && end && left <= 0) {
            *timed_out = 1;
            break;
        }
        int wait_ms = exited ? 0 : (int)(left < 50 ? left : 50);
        if (fd < 0) { /* the pipe's end is read: only the child's exit is waited for */
            if (exited)
                break;
            struct timespec ts = {0, (long)wait_ms * 1000000L};
            nanosleep(&ts, NULL);
            continue;
        }
        struct pollfd pf = {fd, POLLIN, 0};
        int pr = poll(&pf, 1, wait_ms);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr == 0) {
            if (exited) /* exited, and nothing more is there: what a helper may still write is not its */
                break;
            continue;
        }
        char sink[4096];
        int keep = b && n + 1 < max;
        if (keep && n + 1 == cap) {
            char *nb = realloc(b, cap * 2);
            if (nb)
                b = nb, cap *= 2;
            keep = nb != NULL;
        }
        ssize_t r = keep ? read(fd, b + n, cap - 1 - n) : read(fd, sink, sizeof sink);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            close(fd);
            fd = -1;
            continue;
        }
        if (keep)
            n += (size_t)r;
    }
    if (fd >= 0)
        close(fd);
    if (*timed_out) { /* the reaper kills its child and what it left, for a few seconds */
        kill(p, SIGTERM);
        for (long long until = now_ms() + 5000; now_ms() < until;) {
            siginfo_t si;
            memset(&si, 0, sizeof si);
            if (waitid(P_PID, (id_t)p, &si, WEXITED | WNOHANG | WNOWAIT) != 0 || si.si_pid == p)
                break;
            usleep(10000);
        }
    }
    /* whatever is left in the reaper's group goes with it (past the limit the reaper too,
       should it not have ended), then the reaper is reaped */
    kill(-p, SIGKILL);
    if (*timed_out)
        kill(p, SIGKILL);
    pid_t w;
    while ((w = waitpid(p, &st, 0)) < 0 && errno == EINTR)
        ;
    if (w == p)
        *status = st;
    if (b)
        b[n] = 0;
    *out = b;
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
