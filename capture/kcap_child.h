/*
 * kcap_child.h — kcap_child.c: a candidate's check (replay gate, load check) run below a
 * reaper process, and its output and end collected under a time limit. CLI side.
 */
#ifndef KCAP_CHILD_H
#define KCAP_CHILD_H

#include <signal.h> /* KCAP_CHILD_STOP_SIGNALS */
#include <stddef.h>
#include <sys/types.h> /* pid_t */

/* Start `body(arg)` (it must exec or _exit) two levels down: the process returned (-1 on
 * failure) is a reaper that leads its own process group, adopts whatever the body's process
 * leaves when it ends (setsid() or not: a child subreaper) and kills it, then ends as the
 * body's process did. rd, wr: a pipe's ends (or -1); the reaper closes both, the body keeps
 * wr. The caller is never a subreaper itself, so children it had are never touched. The
 * check carries marks (KCAP_CHECK_TOKEN in its environment, a process name of its own) by
 * which kcap_child_collect finds and kills what it left should it kill its reaper first. */
pid_t kcap_child_spawn(int rd, int wr, void (*body)(void *), void *arg);

/* A child's output and end: reads fd (the read end of the child's pipe; closed on return)
 * until the child p (kcap_child_spawn's reaper) has exited and what it wrote is read, or
 * until timeout_s seconds have passed (0: no limit; then the reaper gets SIGTERM and a few
 * seconds to kill its child), then kills p's process group. The end is the child's exit, not
 * the pipe's: a helper process it started and that holds the pipe neither delays nor hangs
 * it, and a child that closes its end early is still waited for under the limit. Keeps at
 * most max bytes (NUL-terminated; *out NULL when out of memory); *status the wait status, -1
 * when it could not be had (SIGCHLD ignored); *timed_out 1 past the limit. */
void kcap_child_collect(int p, int fd, int timeout_s, size_t max, char **out, int *status, int *timed_out);

/* The signals a CLI catches around its checks (kcap shadow): the spawn blocks them across its
 * fork and the reaper resets them before the check runs, so the CLI's handler never runs below
 * it. */
#define KCAP_CHILD_STOP_SIGNALS {SIGINT, SIGTERM, SIGHUP}

/* Async-signal-safe, for the CLI's handler of KCAP_CHILD_STOP_SIGNALS: the check running now
 * (and any started after this) is ended as if the CLI had died: its reaper gets SIGTERM,
 * kills the check and what it left, and kcap_child_collect returns soon after. */
void kcap_child_interrupt(void);

#endif
