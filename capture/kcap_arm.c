/*
 * kcap_arm.c — arming a dormant process at run time, without a restart and without signals.
 *
 * `kcap arm PID [--count N]` drops a small control file ".kcap-arm-PID" into the process's
 * capture directory. A watcher thread, started only in dormant mode, sleeps in read(2) on an
 * inotify descriptor for that directory and arms capture when the file appears (then deletes
 * it, which tells `kcap arm` the request was taken). This keeps the dormant per-call cost at
 * one flag load — no syscall, no clock read — and takes no signal the host might own. Where
 * inotify is unavailable (exhausted instances, odd filesystems) the thread polls every 200 ms.
 *
 * File content: "count N\n" or "off\n".
 */
#include "kcap_cap.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t a_lock = PTHREAD_MUTEX_INITIALIZER;
static int a_running;
static char a_dir[PATH_MAX];

/* Consume the control file if present. */
static void kcap_arm_poll_file(void)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/" KCAP_ARM_FILE_FMT, a_dir, (long)getpid());
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return;
    char buf[128];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    unlink(path);
    if (n <= 0)
        return;
    buf[n] = '\0';
    char *nl = strchr(buf, '\n');
    if (nl)
        *nl = '\0';
    uint64_t count = 1;
    if (!strcmp(buf, "off")) {
        kcap_arm_request(0, 1);
        return;
    }
    if (!strncmp(buf, "count ", 6) && !kcap_parse_u64(buf + 6, &count) && count > 0) {
        kcap_arm_request(count, 0);
        return;
    }
    kcap_log(KCAP_LOG_WARN, "ignored a malformed arm request '%.40s' in %s", buf, path);
}

static void *kcap_arm_main(void *arg)
{
    (void)arg;
    char want[64];
    snprintf(want, sizeof want, KCAP_ARM_FILE_FMT, (long)getpid());
    kcap_arm_poll_file(); /* a request made before we started */
    int fd = inotify_init1(IN_CLOEXEC);
    if (fd >= 0 && inotify_add_watch(fd, a_dir, IN_CLOSE_WRITE | IN_MOVED_TO) < 0) {
        close(fd);
        fd = -1;
    }
    if (fd < 0) {
        for (;;) {
            struct timespec ts = {0, 200 * 1000000L};
            nanosleep(&ts, NULL);
            kcap_arm_poll_file();
        }
    }
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            struct timespec ts = {0, 200 * 1000000L};
            nanosleep(&ts, NULL);
            kcap_arm_poll_file();
            continue;
        }
        for (char *p = buf; p < buf + n;) {
            struct inotify_event *ev = (struct inotify_event *)p;
            if (ev->len && !strcmp(ev->name, want))
                kcap_arm_poll_file();
            if (ev->mask & IN_Q_OVERFLOW)
                kcap_arm_poll_file();
            p += sizeof *ev + ev->len;
        }
    }
    return NULL;
}

void kcap_arm_start(const char *dir)
{
    pthread_mutex_lock(&a_lock);
    if (a_running) {
        pthread_mutex_unlock(&a_lock);
        return;
    }
    snprintf(a_dir, sizeof a_dir, "%s", dir);
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
