/*
 * kcap_shadow_loadcheck.c — `kcap shadow`'s load check of a candidate with no snapshots to
 * replay it against (kcap_shadow_loadcheck.h). The child loads the library with replay's
 * loader and writes one line to a pipe ("ok BACKEND" or "error WHY"); the parent reads it
 * under the time limit, kills the child's process group past it, and tells a loader error
 * from a crash (a signal) and from a hang.
 */
#include "kcap_shadow_loadcheck.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kcap_kernlib.h" /* replay/: the private-copy loader */

static long long mono_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

int kcap_loadcheck_run(const char *cand, int timeout_s, kcap_loadcheck *c)
{
    memset(c, 0, sizeof *c);
    int pfd[2];
    if (pipe(pfd)) {
        snprintf(c->error, sizeof c->error, "no pipe to a checking process: %s", strerror(errno));
        return 0;
    }
    fflush(NULL);
    pid_t p = fork();
    if (p == 0) {
        setpgid(0, 0);
        close(pfd[0]);
        kcap_kernlib *k = NULL;
        kcap_error err = {0};
        char line[1100];
        int rc = kcap_kernlib_open(cand, &k, &err);
        int n = rc ? snprintf(line, sizeof line, "error %s\n", err.msg)
                   : snprintf(line, sizeof line, "ok %s\n", kcap_kernlib_backend(k));
        if (n > 0 && write(pfd[1], line, (size_t)n) < 0)
            _exit(3);
        _exit(rc ? 1 : 0);
    }
    close(pfd[1]);
    if (p < 0) {
        close(pfd[0]);
        snprintf(c->error, sizeof c->error, "no checking process: %s", strerror(errno));
        return 0;
    }
    setpgid(p, p);
    char buf[1200];
    size_t got = 0;
    long long end = timeout_s > 0 ? mono_ms() + 1000ll * timeout_s : 0;
    for (;;) {
        long long left = end ? end - mono_ms() : -1;
        if (end && left <= 0) {
            c->timed_out = timeout_s;
            break;
        }
        struct pollfd pf = {pfd[0], POLLIN, 0};
        int pr = poll(&pf, 1, end ? (left > 1000000 ? 1000000 : (int)left) : -1);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0)
            continue; /* the deadline is checked again */
        ssize_t r = read(pfd[0], buf + got, sizeof buf - 1 - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0 || (got += (size_t)r) == sizeof buf - 1)
            break;
    }
    close(pfd[0]);
    if (c->timed_out)
        kill(-p, SIGKILL), kill(p, SIGKILL);
    int st = 0;
    while (waitpid(p, &st, 0) < 0 && errno == EINTR)
        ;
    buf[got] = '\0';
    char *nl = strchr(buf, '\n');
    if (nl)
        *nl = '\0';
    c->signal = !c->timed_out && WIFSIGNALED(st) ? WTERMSIG(st) : 0;
    if (!strncmp(buf, "ok ", 3)) {
        snprintf(c->backend, sizeof c->backend, "%.15s", buf + 3);
        c->ok = !c->timed_out && !c->signal && WIFEXITED(st) && WEXITSTATUS(st) == 0;
    } else if (!strncmp(buf, "error ", 6)) {
        snprintf(c->error, sizeof c->error, "%.1023s", buf + 6);
    }
    return c->ok;
}

void kcap_loadcheck_say(FILE *f, const char *cand, const kcap_loadcheck *c, const char *tail)
{
    if (c->timed_out)
        fprintf(f, "kcap shadow: loading %s in a process of its own had not ended after %d s (a constructor "
                   "that hangs?); it was killed (--gate-timeout SEC gives it longer)%s", cand, c->timed_out, tail);
    else if (c->signal)
        fprintf(f, "kcap shadow: loading %s in a process of its own killed that process (signal %d, %s): it "
                   "would kill the service the same way%s", cand, c->signal, strsignal(c->signal), tail);
    else if (c->error[0])
        fprintf(f, "kcap shadow: %s cannot be loaded as a kernel library: %s%s", cand, c->error, tail);
    else
        fprintf(f, "kcap shadow: loading %s in a process of its own gave no result%s", cand, tail);
}
