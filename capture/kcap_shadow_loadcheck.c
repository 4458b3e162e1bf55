/*
 * kcap_shadow_loadcheck.c — `kcap shadow`'s load check of a candidate with no snapshots to
 * replay it against (kcap_shadow_loadcheck.h). The child loads the library with replay's
 * loader and writes one line to a pipe ("ok BACKEND" or "error WHY"); the parent reads it
 * under the time limit, kills the child's process group past it, and tells a loader error
 * from a crash (a signal) and from a hang.
 */
#include "kcap_shadow_loadcheck.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kcap_kernlib.h"     /* replay/: the private-copy loader */
#include "kcap_shadow_gate.h" /* kcap_child_collect */

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
    char *buf = NULL;
    int st = -1, late = 0;
    kcap_child_collect(p, pfd[0], timeout_s, 1200, &buf, &st, &late);
    if (late)
        c->timed_out = timeout_s;
    if (!buf) {
        snprintf(c->error, sizeof c->error, "out of memory reading the checking process");
        return 0;
    }
    char *nl = strchr(buf, '\n');
    if (nl)
        *nl = '\0';
    c->signal = !c->timed_out && st != -1 && WIFSIGNALED(st) ? WTERMSIG(st) : 0;
    if (!strncmp(buf, "ok ", 3)) {
        snprintf(c->backend, sizeof c->backend, "%.15s", buf + 3);
        c->ok = !c->timed_out && st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
    } else if (!strncmp(buf, "error ", 6)) {
        snprintf(c->error, sizeof c->error, "%.1023s", buf + 6);
    }
    free(buf);
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
