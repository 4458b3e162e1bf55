/*
 * kcap_arm.c — arming a dormant process at run time, without a restart and without signals.
 *
 * `kcap arm PID` drops a request ".kcap-arm-PID" into the process's capture directory. A
 * watcher thread, started in dormant and in shadow mode, sleeps in read(2) on an inotify
 * descriptor for that directory, consumes the request and answers with ".kcap-ack-PID.<nonce>"
 * (what really happened, plus the capture counters), which `kcap arm` waits for. This keeps
 * the dormant per-call cost at one flag load — no syscall, no clock read — and takes no
 * signal the host might own. Where inotify is unavailable the thread polls every 200 ms; a
 * directory removed and made again is watched again (polled every 200 ms meanwhile).
 *
 * A request is obeyed only when it is a regular file (opened O_NOFOLLOW | O_NONBLOCK: a FIFO
 * at the name can neither block nor fool us), owned by our uid or root, and names our start
 * time (/proc/self/stat field 22): a request left over from an earlier process with the same
 * pid (container restart) is refused, never armed. The directory itself was
 * checked private at init (kcap_capture.c).
 *
 * Requests are serialised by the requesters (kcap_arm_client.c moves a request in only while
 * none is pending), and this side claims one by renaming it away before reading it.
 *
 * Request: "start <ticks>\nnonce <hex>\n" then "count N" | "off" | "status".
 * Reply:   "ok ..." or "error ...", then the kcap_stats_format line.
 */
#include "kcap_arm.h"
#include "kcap_log.h"
#include "kcap_state.h"
#include "kcap_names.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t a_lock = PTHREAD_MUTEX_INITIALIZER;
static int a_running;
static char a_dir[PATH_MAX];
static kcap_arm_handler a_handler; /* what a request does (the capture policy's) */
static kcap_arm_cmd_handler a_shadow; /* shadow-mode requests (kcap shadow) */

void kcap_arm_set_shadow_handler(kcap_arm_cmd_handler handler) { a_shadow = handler; }

/* Write the reply atomically where `kcap arm` waits for it. */
static void kcap_arm_reply(const char *nonce, const char *text)
{
    char tmp[PATH_MAX + 96], fin[PATH_MAX + 96];
    snprintf(tmp, sizeof tmp, "%s/.kcap-ack-tmp-%ld-%s", a_dir, (long)getpid(), nonce);
    snprintf(fin, sizeof fin, "%s/.kcap-ack-%ld.%s", a_dir, (long)getpid(), nonce);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    size_t n = strlen(text);
    int ok = write(fd, text, n) == (ssize_t)n;
    ok = !close(fd) && ok;
    if (!ok || rename(tmp, fin))
        unlink(tmp);
}

static atomic_int a_log_claim;

/* Consume the control file if present: claimed first by a rename to a name of ours, so a
 * request that arrives meanwhile stays under the request name for the next poll (removing
 * the name after reading it could remove a newer request unread). */
static void kcap_arm_poll_file(void)
{
    char req[PATH_MAX + 64], path[PATH_MAX + 64];
    snprintf(req, sizeof req, "%s/" KCAP_ARM_FILE_FMT, a_dir, (long)getpid());
    snprintf(path, sizeof path, "%s/.kcap-arm-claimed-%ld", a_dir, (long)getpid());
    if (rename(req, path)) {
        int e = errno;
        if (e == ENOENT) /* nothing there */
            return;
        /* a directory in the way of the claim is removed and the claim tried once more */
        if (rmdir(path) || rename(req, path)) {
            kcap_log_once(&a_log_claim, KCAP_LOG_WARN, "cannot take arm requests from %s: %s (remove %s "
                          "if it is in the way)", req, strerror(e), path);
            return;
        }
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) { /* a symbolic link at the name (O_NOFOLLOW), or gone */
        kcap_log(KCAP_LOG_WARN, "refused arm request %s: it cannot be opened as a file", req);
        unlink(path);
        return;
    }
    struct stat st;
    char buf[512];
    ssize_t n = -1;
    const char *bad = NULL;
    if (fstat(fd, &st))
        bad = "cannot be inspected";
    else if (!S_ISREG(st.st_mode))
        bad = "is not a regular file";
    else if (st.st_uid != geteuid() && st.st_uid != 0)
        bad = "belongs to another user";
    else
        n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (unlink(path) && errno == EISDIR) /* a directory was put at the request's name */
        rmdir(path);
    if (bad) {
        kcap_log(KCAP_LOG_WARN, "refused arm request %s: it %s", req, bad);
        return;
    }
    if (n <= 0)
        return;
    buf[n] = '\0';
    unsigned long long start = 0;
    char nonce[24] = "", cmd[400] = "";
    int off = 0;
    if (sscanf(buf, "start %llu\nnonce %16[0-9a-f]\n%399[^\n]", &start, nonce, cmd) != 3) {
        kcap_log(KCAP_LOG_WARN, "ignored a malformed arm request in %s", req);
        return;
    }
    if (start != kcap_self_start_time()) {
        /* written for an earlier process that had our pid */
        kcap_log(KCAP_LOG_WARN, "refused arm request %s: it names another process (start "
                 "time %llu, ours %llu)", req, start, kcap_self_start_time());
        return;
    }
    uint64_t count = 1;
    int status_only = !strcmp(cmd, "status");
    off = !strcmp(cmd, "off");
    char reply[1024];
    if (!strncmp(cmd, "shadow", 6)) {
        if (a_shadow)
            a_shadow(cmd, reply, sizeof reply);
        else
            snprintf(reply, sizeof reply, "error this process has no shadow mode\n");
    } else if (!status_only && !off &&
        (strncmp(cmd, "count ", 6) || kcap_parse_u64(cmd + 6, &count) || !count)) {
        snprintf(reply, sizeof reply, "error malformed request '%.40s'\n", cmd);
    } else {
        a_handler(count, off, status_only, reply, sizeof reply);
    }
    kcap_arm_reply(nonce, reply);
}

/* The 200 ms between two reads of the request name when no inotify event can come. */
static void poll_pause(void)
{
    struct timespec ts = {0, 200 * 1000000L};
    nanosleep(&ts, NULL);
}

static void *kcap_arm_main(void *arg)
{
    (void)arg;
    char want[64];
    snprintf(want, sizeof want, KCAP_ARM_FILE_FMT, (long)getpid());
    kcap_arm_poll_file(); /* a request made before we started */
    int fd = inotify_init1(IN_CLOEXEC);
    const uint32_t mask = IN_CLOSE_WRITE | IN_MOVED_TO;
    if (fd >= 0 && inotify_add_watch(fd, a_dir, mask) < 0) {
        close(fd);
        fd = -1;
    }
    if (fd < 0) {
        for (;;) {
            poll_pause();
            kcap_arm_poll_file();
        }
    }
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    int watching = 1;
    for (;;) {
        if (!watching) {
            /* the directory was removed (or renamed): its watch is gone; wait for one of
               that name to come back, and read a request that may already be there */
            poll_pause();
            if (inotify_add_watch(fd, a_dir, mask) >= 0)
                watching = 1;
            kcap_arm_poll_file();
            continue;
        }
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            poll_pause();
            kcap_arm_poll_file();
            continue;
        }
        for (char *p = buf; p < buf + n;) {
            struct inotify_event *ev = (struct inotify_event *)p;
            if (ev->len && !strcmp(ev->name, want))
                kcap_arm_poll_file();
            if (ev->mask & IN_Q_OVERFLOW)
                kcap_arm_poll_file();
            if (ev->mask & IN_IGNORED)
                watching = 0;
            p += sizeof *ev + ev->len;
        }
    }
    return NULL;
}

void kcap_arm_start(const char *dir, kcap_arm_handler handler)
{
    pthread_mutex_lock(&a_lock);
    if (a_running || !handler) {
        pthread_mutex_unlock(&a_lock);
        return;
    }
    snprintf(a_dir, sizeof a_dir, "%s", dir);
    a_handler = handler;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&at, 64 * 1024);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t t;
    if (pthread_create(&t, &at, kcap_arm_main, NULL) == 0)
        a_running = 1;
    else
        kcap_log(KCAP_LOG_WARN, "cannot start the arming watcher thread; kcap arm will not work");
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&at);
    pthread_mutex_unlock(&a_lock);
}

void kcap_arm_atfork_child(void)
{
    pthread_mutex_init(&a_lock, NULL);
    a_running = 0; /* the parent's watcher did not follow us */
}
