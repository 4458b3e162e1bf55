/*
 * kcap_names.c — run id, process start time, snapshot names, stale temp-file cleanup
 * (see kcap_names.h for why each exists).
 *
 * Cleanup is careful about what it may delete: only names kcap itself creates, only when the
 * pid in the name is dead here (kill(pid, 0) fails with ESRCH; EPERM means alive, another
 * user's), never our own, and only files not modified for `min_age_s` seconds — a process in
 * another PID namespace sharing the directory may carry a pid that means nothing here, but a
 * file it is writing keeps a fresh mtime.
 */
#include "kcap_names.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char g_runid[20] = "00000000";
static unsigned long long g_start;

int kcap_proc_stat(long pid, kcap_proc_info *pi)
{
    char path[64], buf[1024];
    memset(pi, 0, sizeof *pi);
    if (pid)
        snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    else
        snprintf(path, sizeof path, "/proc/self/stat");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    int e = errno;
    close(fd);
    errno = n < 0 ? e : EIO;
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    char *p = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
    if (!p || sscanf(p + 1, " %c %ld", &pi->state, &pi->ppid) != 2)
        return -1;
    p++;
    /* after ')' come field 3 (state) ... field 22 (starttime): skip 19 fields */
    for (int f = 3; f < 22 && p; f++) {
        while (*p == ' ')
            p++;
        p = strchr(p, ' ');
    }
    pi->start = p ? strtoull(p, NULL, 10) : 0;
    return 0;
}

unsigned long long kcap_proc_start_time(long pid)
{
    kcap_proc_info pi;
    return kcap_proc_stat(pid, &pi) ? 0 : pi.start;
}

void kcap_names_init(void)
{
    uint32_t r = 0;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        r = (uint32_t)ts.tv_nsec ^ (uint32_t)ts.tv_sec * 2654435761u ^ (uint32_t)getpid() << 16;
    }
    snprintf(g_runid, sizeof g_runid, "%08x", r);
    g_start = kcap_proc_start_time(0);
}

const char *kcap_run_id(void) { return g_runid; }

void kcap_set_run_id(const char *id)
{
    if (id && *id)
        snprintf(g_runid, sizeof g_runid, "%s", id);
}
unsigned long long kcap_self_start_time(void) { return g_start; }

int kcap_snapshot_name(char *out, size_t n, const char *dir, const char *call, int rank,
                       long pid, int graph, unsigned long long seq, int attempt)
{
    char rk[24] = "", at[16] = "";
    if (rank >= 0)
        snprintf(rk, sizeof rk, "-r%d", rank);
    if (attempt > 0)
        snprintf(at, sizeof at, "-%d", attempt);
    int w = snprintf(out, n, "%s/%s%s-p%ld-%s-%s%06llu%s.h5", dir, call, rk, pid, g_runid,
                     graph ? "g" : "s", seq, at);
    return w < 0 || (size_t)w >= n ? -1 : 0;
}

/* The pid that a kcap-made name carries, or 0 when the name is not one of ours. */
static long kcap_owner_pid(const char *name)
{
    /* temp files and withdrawn requests (pid of their writer), then requests, claimed ones
       and replies (pid of the target) */
    static const char *const prefixes[] = {".kcap-tmp.", ".kcap-arm-tmp-", ".kcap-ack-tmp-",
                                           ".kcap-arm-withdrawn-", ".kcap-arm-claimed-", ".kcap-arm-",
                                           ".kcap-ack-"};
    static const char ends[] = {'.', '-', '-', '-', '\0', '\0', '.'};
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++) {
        size_t pl = strlen(prefixes[i]);
        if (!strncmp(name, prefixes[i], pl)) {
            char *end = NULL;
            long pid = strtol(name + pl, &end, 10);
            if (end && end != name + pl && *end == ends[i])
                return pid;
        }
    }
    return 0;
}

int kcap_clean_stale(const char *dir, int min_age_s)
{
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return 0;
    DIR *d = fdopendir(dfd);
    if (!d) {
        close(dfd);
        return 0;
    }
    int removed = 0;
    time_t now = time(NULL);
    struct dirent *e;
    while ((e = readdir(d))) {
        long pid = kcap_owner_pid(e->d_name);
        if (pid <= 0 || pid == (long)getpid())
            continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue; /* alive (or another user's: EPERM) */
        struct stat st;
        if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode) ||
            st.st_uid != geteuid() || now - st.st_mtime < min_age_s)
            continue;
        if (!unlinkat(dfd, e->d_name, 0))
            removed++;
    }
    closedir(d);
    return removed;
}
