/*
 * kcap_log.c — libkcap.so's only output: single lines on the stderr the process started with,
 * prefixed "kcap:".
 *
 * A preloaded library shares stderr with its host, so every message is one write(2) of one
 * whole line (no stdio buffering interleaved with the host's, no partial lines between
 * processes of a TP group), and repeated problems are reported once per process. Two host
 * situations must not be made worse by a log line:
 *  - stderr is a pipe whose reader went away: a write raises SIGPIPE, whose default action
 *    kills the host. SIGPIPE is blocked on the writing thread around the write, and a
 *    SIGPIPE our write left pending is consumed (sigtimedwait, zero timeout) before the
 *    mask is restored; one the host had pending already is left alone.
 *  - the host closed fd 2 and reused it for a data file: our line would land in its data.
 *    At load time fd 2 is duplicated (F_DUPFD_CLOEXEC, high number) and its identity (st_dev,
 *    st_ino) kept; a line goes to fd 2 only while fd 2 is still that file, else to the
 *    duplicate (if it is still that file), else nowhere.
 *  - stderr is a pipe or socket nobody drains (a supervisor, `Popen(stderr=PIPE)` never read):
 *    a blocking write would stall the host's calling thread, and its exit, forever. For a
 *    pipe/FIFO the line goes through our own non-blocking descriptor of the same pipe (opened
 *    through /proc/self/fd/2 at load: a new open file description, so the host's stderr keeps
 *    its flags); for a socket, send(MSG_DONTWAIT). A full pipe drops the line.
 * The line is formatted into a static buffer under a mutex, not on the caller's stack: the
 * capture path runs on host threads that may have tiny stacks; the mutex is never held
 * across a write that can block.
 */
#include "kcap_log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int kcap_log_level = KCAP_LOG_WARN;

static int g_err_dup = -1;           /* our duplicate of the original stderr */
static dev_t g_err_dev;
static ino_t g_err_ino;
static int g_err_known;              /* fd 2 was open at load time */
static int g_err_nb = -1;            /* pipe/FIFO stderr: our non-blocking descriptor of it */
static int g_err_sock;               /* stderr is a socket: send(MSG_DONTWAIT) */
static pthread_mutex_t g_log_lock = PTHREAD_MUTEX_INITIALIZER;
static char g_line[1200];

/* Runs at load time, before any host code could have replaced fd 2. */
__attribute__((constructor(102))) static void kcap_log_ctor(void)
{
    struct stat st;
    if (fstat(2, &st))
        return;
    g_err_dev = st.st_dev;
    g_err_ino = st.st_ino;
    g_err_known = 1;
    g_err_dup = fcntl(2, F_DUPFD_CLOEXEC, 700);
    if (g_err_dup < 0)
        g_err_dup = fcntl(2, F_DUPFD_CLOEXEC, 3);
    g_err_sock = S_ISSOCK(st.st_mode);
    if (S_ISFIFO(st.st_mode)) {
        int fd = open("/proc/self/fd/2", O_WRONLY | O_NONBLOCK | O_CLOEXEC);
        if (fd >= 0) {
            g_err_nb = fcntl(fd, F_DUPFD_CLOEXEC, 700);
            if (g_err_nb < 0)
                g_err_nb = fd;
            else
                close(fd);
        }
    }
}

static int kcap_is_orig_stderr(int fd)
{
    struct stat st;
    return fd >= 0 && !fstat(fd, &st) && st.st_dev == g_err_dev && st.st_ino == g_err_ino;
}

/* The fd that still is the process's original stderr, or -1. */
static int kcap_log_fd(void)
{
    if (!g_err_known)
        return -1;
    if (kcap_is_orig_stderr(2))
        return 2;
    return kcap_is_orig_stderr(g_err_dup) ? g_err_dup : -1;
}

/* write(2) that can neither raise SIGPIPE in the host nor leave one pending. */
static void kcap_write_nosigpipe(int fd, const char *buf, size_t len)
{
    sigset_t pipe_set, old, pend;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    int had_pending = 0;
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    if (!sigpending(&pend))
        had_pending = sigismember(&pend, SIGPIPE);
    int save = errno;
    ssize_t w;
    if (g_err_nb >= 0)
        w = write(g_err_nb, buf, len); /* EAGAIN when full: the line is dropped */
    else if (g_err_sock)
        w = send(fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL);
    else
        w = write(fd, buf, len);
    if (w < 0 && errno == EPIPE && !had_pending) {
        struct timespec zero = {0, 0};
        sigtimedwait(&pipe_set, NULL, &zero);
    }
    errno = save;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static void kcap_vlog(int level, const char *fmt, va_list ap)
{
    if (level > kcap_log_level)
        return;
    pthread_mutex_lock(&g_log_lock);
    int fd = kcap_log_fd();
    if (fd >= 0) {
        char *line = g_line;
        int n = snprintf(line, sizeof g_line, "kcap: [pid %ld] ", (long)getpid());
        int m = n < 0 ? -1 : vsnprintf(line + n, sizeof g_line - (size_t)n - 1, fmt, ap);
        if (m >= 0) {
            size_t len = (size_t)n + (size_t)m;
            if (len > sizeof g_line - 2)
                len = sizeof g_line - 2;
            line[len++] = '\n';
            kcap_write_nosigpipe(fd, line, len);
        }
    }
    pthread_mutex_unlock(&g_log_lock);
}

void kcap_log(int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    kcap_vlog(level, fmt, ap);
    va_end(ap);
}

void kcap_log_once(atomic_int *flag, int level, const char *fmt, ...)
{
    if (atomic_exchange(flag, 1))
        return;
    va_list ap;
    va_start(ap, fmt);
    kcap_vlog(level, fmt, ap);
    va_end(ap);
}

/* A fork may have happened while another thread held the lock. */
void kcap_log_atfork_child(void) { pthread_mutex_init(&g_log_lock, NULL); }
