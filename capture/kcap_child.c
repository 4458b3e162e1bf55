/*
 * kcap_child.c — the processes `kcap shadow` checks a candidate in (kcap_child.h): the replay
 * gate's `kcap replay` and the load check. Candidates are hostile: constructors that abort or
 * hang, helpers that hold the pipe or leave the process group with setsid(), a kcap shadow
 * killed midway. So each check runs two levels down, below a reaper of its own (a child
 * subreaper that kills whatever the check left and ends as it did), and the parent reads its
 * output until the reaper ends or the time limit passes. CLI side (kcap binary), above
 * libkcap.
 */
#include "kcap_child.h"
#include "kcap_names.h" /* kcap_proc_stat */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
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

/* One pass over /proc: SIGKILLs every process but this one that pick() gives 1 for; those it
 * gives 2 for (zombies) are only counted. -1 when /proc cannot be read. */
typedef int (*proc_pick)(long pid, const void *ctx);
static int kill_picked(proc_pick pick, const void *ctx, int *killed, int *zombies)
{
    DIR *d = opendir("/proc");
    if (!d)
        return -1;
    const long self = (long)getpid();
    *killed = *zombies = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        long pid = e->d_name[0] >= '1' && e->d_name[0] <= '9' ? atol(e->d_name) : 0;
        if (!pid || pid == self)
            continue;
        const int k = pick(pid, ctx);
        if (k == 2)
            (*zombies)++;
        else if (k == 1)
            *killed += kill((pid_t)pid, SIGKILL) == 0;
    }
    closedir(d);
    return 0;
}

/* kill_adopted's pick: a child of the reaper (ctx: its pid), 2 for a zombie */
static int pick_adopted(long pid, const void *ctx)
{
    kcap_proc_info pi;
    if (kcap_proc_stat(pid, &pi) || pi.ppid != *(const long *)ctx)
        return 0;
    return pi.state == 'Z' ? 2 : 1;
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
        int killed, zombies;
        if (kill_picked(pick_adopted, &self, &killed, &zombies))
            return;
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

/* The check's marks, for a check that SIGKILLs its own reaper (which then never runs
 * kill_adopted) and so leaves its helpers to init: the collect finds them and kills them.
 * Two marks, since /proc shows a process's environment as it was at its last exec:
 * KCAP_CHECK_TOKEN=<pid.ns.count> in the environment the reaper and everything below it
 * inherit (set only around the spawn's fork: seen in whatever the check execs), and a process
 * name (comm, 15 characters from the token) given to the check's process before its body runs
 * (seen in whatever it forks without exec). A helper that execs with a cleared environment, or
 * renames itself, still escapes; a pid namespace of its own would hold it. */
#define KCAP_TOKEN_VAR "KCAP_CHECK_TOKEN"
static char g_token[64], g_comm[16];
static pid_t g_token_reaper; /* the reaper the marks above belong to */

/* 1 when the NUL-separated environment in fd holds exactly the entry `want` (read in chunks,
 * an entry split across two reads included). */
static int environ_has(int fd, const char *want)
{
    char buf[8192], cur[128];
    size_t have = 0, wlen = strlen(want);
    int skip = 0; /* the entry in progress is longer than any match */
    ssize_t r;
    while ((r = read(fd, buf, sizeof buf)) > 0)
        for (ssize_t i = 0; i < r; i++) {
            if (buf[i] == 0) {
                if (!skip && have == wlen && memcmp(cur, want, wlen) == 0)
                    return 1;
                have = 0, skip = 0;
            } else if (!skip && have < sizeof cur && have < wlen) {
                cur[have++] = buf[i];
            } else {
                skip = 1;
            }
        }
    return 0;
}

/* 1 when /proc/PID/comm is exactly `comm`. */
static int comm_is(long pid, const char *comm)
{
    char path[64], buf[32];
    snprintf(path, sizeof path, "/proc/%ld/comm", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    buf[strcspn(buf, "\n")] = 0;
    return strcmp(buf, comm) == 0;
}

/* kill_token_holders' pick: a process whose environment holds ctx[0] or whose name is ctx[1] */
static int pick_marked(long pid, const void *ctx)
{
    const char *const *m = ctx;
    char path[64];
    if (comm_is(pid, m[1]))
        return 1;
    snprintf(path, sizeof path, "/proc/%ld/environ", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0; /* gone, another user's, or not dumpable (its name was looked at first) */
    const int hit = environ_has(fd, m[0]);
    close(fd);
    return hit;
}

/* Kills every process carrying this check's marks (not the caller), in rounds while a round
 * finds one (a killed helper's children carry them too), for at most ~1 s. */
static void kill_token_holders(const char *token, const char *comm)
{
    char want[sizeof g_token + sizeof KCAP_TOKEN_VAR + 1];
    snprintf(want, sizeof want, "%s=%s", KCAP_TOKEN_VAR, token);
    const char *marks[2] = {want, comm};
    const long long end = now_ms() + 1000;
    if (!proc_is_ours())
        return;
    for (int round = 0; round < 50 && now_ms() < end; round++) {
        int killed, zombies;
        if (kill_picked(pick_marked, marks, &killed, &zombies) || !killed)
            return;
        usleep(5000);
    }
}

/* KCAP_CHILD_STOP_SIGNALS: blocked across the fork (one that arrives meanwhile is delivered
 * in the parent, which knows the reaper by then) and set back to their default in the reaper
 * before they are unblocked, so the CLI's handler runs neither in the reaper nor in the check. */
static const int k_stops[] = KCAP_CHILD_STOP_SIGNALS;

static void stop_signals(sigset_t *set)
{
    sigemptyset(set);
    for (size_t k = 0; k < sizeof k_stops / sizeof k_stops[0]; k++)
        sigaddset(set, k_stops[k]);
}

/* The reaper: the process kcap_child_collect waits for. It leads a process group of its own,
 * is a child subreaper (a dead descendant's orphans come to it, those that left the group
 * with setsid() too) and forks the one child that runs body; when that child has ended it
 * kills and reaps whatever the child left, then ends the way the child did (exit status, or
 * the same signal). SIGTERM (the time limit, kcap shadow's own end: PR_SET_PDEATHSIG, or its
 * interrupt), SIGINT and SIGHUP are kept blocked and waited for beside SIGCHLD, so one
 * arriving at any moment, fork included, is seen: the child is killed first. The child dies
 * with the reaper (its own PR_SET_PDEATHSIG), ignores terminal stops and reads /dev/null (a background group on the
 * caller's terminal must not stop it: it would look like a hang), and dumps no core. Being a
 * process of its own, the reaper adopts nothing of the CLI's: children the CLI had before (it
 * may have been exec'd by a process with children, a service among them) are never touched. */
/* mask: the caller's signal mask before the spawn, which the check gets back. */
static void reaper_main(pid_t parent, int rd, int wr, void (*body)(void *), void *arg, const sigset_t *mask)
{
    /* the CLI's handler goes before anything unblocks (the check inherits these dispositions:
       default, or ignored where the caller ignored it) */
    for (size_t k = 0; k < sizeof k_stops / sizeof k_stops[0]; k++) {
        struct sigaction cur;
        if (sigaction(k_stops[k], NULL, &cur) == 0 && cur.sa_handler != SIG_IGN)
            signal(k_stops[k], SIG_DFL); /* still blocked: one pending stays pending */
    }
    /* the reaper itself takes all three like SIGTERM, waited for: one that would kill it (an
       orphaned process group gets SIGHUP) must not skip kill_adopted */
    sigset_t waitset, old = *mask, reaper_mask = *mask;
    stop_signals(&waitset);
    sigaddset(&waitset, SIGCHLD);
    sigorset(&reaper_mask, &reaper_mask, &waitset);
    sigprocmask(SIG_SETMASK, &reaper_mask, NULL);
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
        prctl(PR_SET_NAME, g_comm, 0, 0, 0); /* the check's mark for what it forks (g_comm) */
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
        const int got = sigwaitinfo(&waitset, &si);
        if (got > 0 && got != SIGCHLD)
            term = 1; /* SIGTERM, SIGINT or SIGHUP */
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

/* The reaper of the check running now (0: none), and whether kcap_child_interrupt was called:
 * what a signal handler of the CLI reads and signals. */
static volatile sig_atomic_t g_reaper, g_interrupted;

void kcap_child_interrupt(void)
{
    g_interrupted = 1;
    const pid_t r = (pid_t)g_reaper;
    if (r > 0)
        kill(r, SIGTERM); /* the reaper's own end (PR_SET_PDEATHSIG): the check is killed first */
}

pid_t kcap_child_spawn(int rd, int wr, void (*body)(void *), void *arg)
{
    signal(SIGCHLD, SIG_DFL); /* a caller that ignored it would get no status of the reaper */
    fflush(NULL);
    sigset_t stops, before;
    stop_signals(&stops);
    sigprocmask(SIG_BLOCK, &stops, &before);
    static unsigned count;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(g_token, sizeof g_token, "%ld.%lld.%u", (long)getpid(),
             (long long)ts.tv_sec * 1000000000ll + ts.tv_nsec, ++count);
    uint64_t hsh = 1469598103934665603ull; /* FNV-1a of the token: the name's 13 hex digits */
    for (const char *c = g_token; *c; c++)
        hsh = (hsh ^ (unsigned char)*c) * 1099511628211ull;
    snprintf(g_comm, sizeof g_comm, "kc%013llx", (unsigned long long)(hsh & 0xfffffffffffffull));
    const char *had = getenv(KCAP_TOKEN_VAR); /* a CLI itself below a check keeps its own */
    char *saved = had ? strdup(had) : NULL;
    const int set = (!had || saved) && setenv(KCAP_TOKEN_VAR, g_token, 1) == 0; /* else no token: the name alone */
    pid_t parent = getpid(), p = fork();
    if (p == 0)
        reaper_main(parent, rd, wr, body, arg, &before);
    if (saved)
        setenv(KCAP_TOKEN_VAR, saved, 1);
    else if (set)
        unsetenv(KCAP_TOKEN_VAR);
    free(saved);
    g_token_reaper = p > 0 ? p : 0;
    if (p > 0) {
        setpgid(p, p); /* as the reaper does, whichever runs first */
        g_reaper = p;
        if (g_interrupted) /* the interrupt came before the reaper was known */
            kill(p, SIGTERM);
    }
    sigprocmask(SIG_SETMASK, &before, NULL); /* one that came across the fork is delivered now */
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
    if (g_reaper == p)
        g_reaper = 0; /* before the reap: an interrupt never signals a pid reused after it */
    pid_t w;
    while ((w = waitpid(p, &st, 0)) < 0 && errno == EINTR)
        ;
    if (w == p)
        *status = st;
    /* what a reaper killed before its kill_adopted left behind: only then is /proc read (a
       process's environ can block while it holds its memory lock) */
    const int reaper_killed = *timed_out || w != p || (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    if (g_token_reaper == p) {
        g_token_reaper = 0;
        if (reaper_killed)
            kill_token_holders(g_token, g_comm);
    }
    if (b)
        b[n] = 0;
    *out = b;
}
