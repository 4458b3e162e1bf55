/*
 * test_capture_child.c — kcap_child.c's interrupt (kcap shadow's SIGINT / SIGTERM / SIGHUP
 * handler): a check is ended whenever the signal arrives — before the spawn, across the fork,
 * right after it — and the CLI's handler never runs in the reaper or in the check. Each case
 * is repeated, since the fork race it guards against is lost only some of the time (7 of 20
 * runs of the first case let a 2 s check run to its end before the fix).
 */
#include "kcap_child.h"
#include "testkit.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t g_seen;

static void on_stop(int sig)
{
    g_seen = sig;
    kcap_child_interrupt();
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

/* The check: says whether SIGINT, SIGTERM and SIGHUP are at their default and unblocked
 * (not the CLI's handler), then sleeps 3 s unless told to end at once. */
static void check_body(void *arg)
{
    const int wr = *(const int *)arg;
    sigset_t m;
    sigprocmask(SIG_SETMASK, NULL, &m);
    int clean = 1;
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (int k = 0; k < 3; k++) {
        struct sigaction cur;
        clean &= sigaction(sigs[k], NULL, &cur) == 0 && cur.sa_handler == SIG_DFL && !sigismember(&m, sigs[k]);
    }
    const char *say = clean ? "clean\n" : "dirty\n";
    if (write(wr, say, strlen(say)) < 0)
        _exit(3);
    sleep(3);
    _exit(0);
}

/* A check that signals its reaper with SIGHUP (what the kernel sends an orphaned process group)
 * after starting a helper that leaves the group: says the helper's pid, then ends. The reaper
 * must live on to kill the helper it adopts. */
static void hup_body(void *arg)
{
    const int wr = *(const int *)arg;
    pid_t h = fork();
    if (h == 0) {
        setsid();
        sleep(30);
        _exit(0);
    }
    char buf[32];
    int n = snprintf(buf, sizeof buf, "%d\n", (int)h);
    if (write(wr, buf, (size_t)n) < 0)
        _exit(3);
    kill(getppid(), SIGHUP);
    usleep(200000);
    _exit(0);
}

/* One check with the interrupt at `when` (0 before the spawn, 1 right after it, 2 never):
 * its wall time, its output, its status. */
static double run(int when, char *out, size_t n, int *status)
{
    int pfd[2];
    if (pipe(pfd))
        return -1;
    g_seen = 0;
    const double t0 = now_s();
    if (when == 0)
        raise(SIGTERM); /* handled now: the interrupt is recorded before the reaper exists */
    pid_t p = kcap_child_spawn(pfd[0], pfd[1], check_body, &pfd[1]);
    close(pfd[1]);
    if (when == 1)
        kill(getpid(), SIGTERM);
    char *doc = NULL;
    int st = -1, late = 0;
    kcap_child_collect(p, pfd[0], 20, 256, &doc, &st, &late);
    snprintf(out, n, "%s", doc ? doc : "");
    free(doc);
    *status = st;
    return now_s() - t0;
}

int main(void)
{
    /* the CLI's handler installed, as kcap shadow does around its checks */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    /* not interrupted: the check runs its 3 s, without that handler and with nothing blocked */
    char out[256];
    int st;
    double el = run(2, out, sizeof out, &st);
    TK_CHECK(el >= 2.5 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "uninterrupted check: %.2f s, status %x", el, st);
    TK_CHECK(strstr(out, "clean") != NULL, "uninterrupted check: the CLI's handler or a blocked signal in the "
             "check (it said '%s')", out);
    /* a SIGHUP to the reaper: it takes it like SIGTERM (kills the check), and still kills what
     * the check left behind */
    int pfd[2];
    if (pipe(pfd) == 0) {
        pid_t p = kcap_child_spawn(pfd[0], pfd[1], hup_body, &pfd[1]);
        close(pfd[1]);
        char *doc = NULL;
        int late = 0;
        kcap_child_collect(p, pfd[0], 20, 256, &doc, &st, &late);
        const pid_t h = doc ? (pid_t)atoi(doc) : 0;
        free(doc);
        int gone = 0;
        for (int k = 0; h > 0 && k < 200 && !gone; k++) {
            gone = kill(h, 0) != 0 && errno == ESRCH;
            if (!gone)
                usleep(10000);
        }
        TK_CHECK(h > 0 && gone, "SIGHUP to the reaper: the helper %d the check left %s", (int)h,
                 gone ? "killed" : "outlived it");
        if (h > 0 && !gone)
            kill(h, SIGKILL);
    }
    /* interrupted before the spawn and right after it (the interrupt then stays: kcap shadow
     * ends every check after it) */
    for (int when = 0; when < 2; when++) {
        int slow = 0, exited = 0, seen = 0;
        for (int r = 0; r < 20; r++) {
            el = run(when, out, sizeof out, &st);
            slow += el > 1.5;
            exited += st != -1 && WIFEXITED(st);
            seen += g_seen == SIGTERM;
        }
        TK_CHECK(slow == 0 && exited == 0 && seen == 20,
                 "interrupt %s the spawn: %d of 20 checks ran on, %d ended by themselves, handler ran %d times",
                 when ? "right after" : "before", slow, exited, seen);
    }
    return tk_summary("test_capture_child");
}
