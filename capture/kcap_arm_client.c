/*
 * kcap_arm_client.c — the requesting side of libkcap's control channel, shared by `kcap arm`
 * and `kcap shadow`: a one-line command for one running process, written atomically
 * (a temporary file moved in with RENAME_NOREPLACE, never over another command's pending
 * request: put_request) as ".kcap-arm-PID" into its capture directory (its KCAP_DIR from
 * /proc/PID/environ unless given) and naming the target's start time (/proc/PID/stat field
 * 22), so it can only ever reach that process; the target answers ".kcap-ack-PID.<nonce>" with
 * "ok ..." or "error ..." and its counters. Cases the answer cannot come from are refused up
 * front (no libkcap, not listening, a relative KCAP_DIR, a directory other users can write,
 * another user's process); an unanswered request not yet taken is withdrawn, never left
 * behind.
 */
#include "kcap_arm_client.h"
#include "kcap_arm.h"
#include "kcap_config.h"
#include "kcap_cli.h"
#include "kcap_names.h"

#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int kcap_env_of_pid(long pid, const char *name, char *out, size_t n)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/environ", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t nl = strlen(name);
    static char buf[1 << 20];
    size_t got = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[got] = '\0';
    for (size_t i = 0; i < got;) {
        const char *e = buf + i;
        size_t len = strnlen(e, got - i);
        if (len > nl && !strncmp(e, name, nl) && e[nl] == '=') {
            snprintf(out, n, "%s", e + nl + 1);
            return 0;
        }
        i += len + 1;
    }
    return -1;
}

static int pid_has_libkcap(long pid)
{
    char path[64], line[4096];
    snprintf(path, sizeof path, "/proc/%ld/maps", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    int found = 0;
    while (!found && fgets(line, sizeof line, f))
        found = strstr(line, "libkcap") != NULL;
    fclose(f);
    return found;
}

/* Print the target's answer (an "ok" one not at all when quiet); 0 for "ok". */
static int show_reply(const char *who, long pid, const char *txt, int quiet)
{
    const char *nl = strchr(txt, '\n');
    int ok = !strncmp(txt, "ok ", 3);
    if (ok && quiet)
        return 0;
    const char *msg = ok ? txt + 3 : !strncmp(txt, "error ", 6) ? txt + 6 : txt;
    int line = nl ? (int)(nl - msg) : (int)strlen(msg);
    fprintf(ok ? stdout : stderr, "%s: process %ld: %.*s\n", who, pid, line, msg);
    if (nl && nl[1])
        fprintf(ok ? stdout : stderr, "%s: process %ld counters: %s", who, pid, nl + 1);
    return ok ? 0 : 1;
}

int kcap_arm_dir_of(const char *who, long pid, const char *dir, char *d, size_t n)
{
    if (dir) {
        snprintf(d, n, "%s", dir);
        return 0;
    }
    if (kcap_env_of_pid(pid, "KCAP_DIR", d, n)) {
        fprintf(stderr, "%s: cannot read KCAP_DIR of process %ld; pass --dir\n", who, pid);
        return 1;
    }
    if (d[0] != '/') {
        fprintf(stderr, "%s: process %ld has a relative KCAP_DIR '%s' (relative to its "
                        "start directory); pass --dir with the absolute path\n", who, pid, d);
        return 1;
    }
    return 0;
}

int kcap_arm_target(const char *who, long pid, const char *need)
{
    int has = pid_has_libkcap(pid);
    if (has < 0) {
        fprintf(stderr, "%s: no process %ld (or not ours to inspect)\n", who, pid);
        return 1;
    }
    if (!has) {
        fprintf(stderr, "%s: process %ld has no libkcap.so loaded (start it with "
                        "kcap record %s)\n", who, pid,
                !strcmp(need, "KCAP_DORMANT") ? "--dormant" : "--shadow CAND.so");
        return 1;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld", pid);
    struct stat pst;
    if (stat(path, &pst) || (pst.st_uid != geteuid() && geteuid() != 0)) {
        fprintf(stderr, "%s: process %ld belongs to uid %ld; only that user or root may "
                        "arm it\n", who, pid, (long)pst.st_uid);
        return 1;
    }
    char dm[PATH_MAX];
    int on = 0;
    if (!strcmp(need, "KCAP_DORMANT") ? kcap_env_of_pid(pid, need, dm, sizeof dm) || kcap_parse_bool(dm, &on) || !on
                                      : kcap_env_of_pid(pid, need, dm, sizeof dm) || !dm[0]) {
        if (!strcmp(need, "KCAP_DORMANT"))
            fprintf(stderr, "%s: process %ld was not started dormant (KCAP_DORMANT=1, kcap "
                            "record --dormant): it captures per its KCAP_* settings and cannot "
                            "be armed\n", who, pid);
        else
            fprintf(stderr, "%s: process %ld was not started in shadow mode (KCAP_SHADOW=CAND.so, "
                            "kcap record --shadow): it does not listen for shadow requests\n",
                    who, pid);
        return 1;
    }
    return 0;
}

/* Sleep ms milliseconds (the waits of a request: each 20 ms). */
static void nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* A close for writing of the request name: what every libkcap's watcher wakes on. */
static void wake_watcher(const char *fin)
{
    int fd = open(fin, O_WRONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd >= 0)
        close(fd);
}

static int same_file(const struct stat *a, const struct stat *b)
{
    return a->st_ino == b->st_ino && a->st_dev == b->st_dev;
}

/* Move `from` to `to` unless `to` exists (EEXIST then): renameat2's RENAME_NOREPLACE, one
 * atomic step the watcher wakes on (IN_MOVED_TO); where the file system lacks it, a hard link
 * (then `from` removed) and a close for writing to wake the watcher; where it lacks links
 * too, a plain rename, which can replace a pending request (the protocol of before). */
static int move_noreplace(const char *from, const char *to)
{
#ifdef RENAME_NOREPLACE /* glibc 2.28; an older one goes straight to the link */
    if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) == 0)
        return 0;
    if (errno == EEXIST)
        return -1;
#endif
    if (link(from, to) == 0) {
        unlink(from);
        wake_watcher(to);
        return 0;
    }
    if (errno == EEXIST)
        return -1;
    return rename(from, to);
}

/* The request written in tmp put in place as fin, never over another command's pending one:
 * while one is there, wait for the target to take it (within wait_s; *ms is the time spent),
 * waking its watcher every 200 ms in case that request's own wakeup was lost (its command
 * killed). Nonzero (and said) when it could not be put. */
static int put_request(const char *who, const char *tmp, const char *fin, uint64_t wait_s, uint64_t *ms)
{
    for (;; *ms += 20) {
        if (move_noreplace(tmp, fin) == 0)
            return 0;
        if (errno != EEXIST)
            break;
        if (*ms >= wait_s * 1000) {
            fprintf(stderr, "%s: another request to the process has been waiting in %s for %llu s; "
                            "nothing was sent (if no kcap arm or kcap shadow command is running, remove "
                            "that file)\n", who, fin, (unsigned long long)wait_s);
            return 1;
        }
        if (*ms % 200 == 0)
            wake_watcher(fin);
        nap_ms(20);
    }
    fprintf(stderr, "%s: cannot write %s: %s\n", who, fin, strerror(errno));
    return 1;
}

/* An unanswered request taken back, if the target has not taken it: when the name holds ours
 * (the inode of `own`, held open) it is moved aside (so neither the watcher nor a waiting
 * command can change it meanwhile) and checked again: kept away if still ours, put back if
 * another command's had taken its place in between.
 * 1: it was ours and is withdrawn; 0: the target had taken ours. */
static int withdraw_request(const char *fin, const char *aside, int own)
{
    struct stat o, a;
    /* another command's request under the name (ours was taken) is left alone */
    if (fstat(own, &o) || stat(fin, &a) || !same_file(&a, &o) || rename(fin, aside))
        return 0;
    if (!stat(aside, &a) && same_file(&a, &o)) {
        unlink(aside);
        return 1;
    }
    for (int i = 0; i < 50 && move_noreplace(aside, fin) && errno == EEXIST; i++)
        nap_ms(20);
    unlink(aside); /* put back, or (another request in its place for a second) given up */
    return 0;
}

/* 1 when the process the request is for can no longer answer: it is gone, a zombie, or its
 * pid now names another process (another start time). */
static int target_gone(long pid, unsigned long long start)
{
    if (kill((pid_t)pid, 0) && errno == ESRCH)
        return 1;
    kcap_proc_info pi; /* one read of /proc/PID/stat: state and start time */
    if (kcap_proc_stat(pid, &pi))
        return errno == ENOENT;
    if (pi.state == 'Z' || pi.state == 'X')
        return 1;
    return start && pi.start && pi.start != start;
}

int kcap_arm_send(const char *who, long pid, const char *dir, const char *need,
                  const char *cmd, uint64_t wait_s, int verbosity)
{
    if (kcap_arm_target(who, pid, need))
        return 1;
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld", pid);
    struct stat pst; /* its owner: the answer must be that user's */
    if (stat(path, &pst)) {
        fprintf(stderr, "%s: no process %ld\n", who, pid);
        return 1;
    }
    char d[4096];
    if (kcap_arm_dir_of(who, pid, dir, d, sizeof d))
        return 1;
    struct stat dst;
    if (stat(d, &dst) || !S_ISDIR(dst.st_mode)) {
        fprintf(stderr, "%s: %s: not a directory\n", who, d);
        return 1;
    }
    if (dst.st_mode & (S_IWGRP | S_IWOTH)) {
        fprintf(stderr, "%s: %s is writable by other users (mode %04o): libkcap refuses "
                        "such a directory, so process %ld is not capturing\n", who, d,
                        (unsigned)(dst.st_mode & 07777), pid);
        return 1;
    }
    unsigned long long start = kcap_proc_start_time(pid);
    uint32_t r = 0;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r)
        r = (uint32_t)time(NULL) ^ (uint32_t)getpid() << 12;
    char nonce[16];
    snprintf(nonce, sizeof nonce, "%08x", r);

    char tmp[4200], fin[4200], ack[4200], aside[4200];
    snprintf(fin, sizeof fin, "%s/" KCAP_ARM_FILE_FMT, d, pid);
    snprintf(tmp, sizeof tmp, "%s/.kcap-arm-tmp-%ld-%s", d, (long)getpid(), nonce);
    snprintf(ack, sizeof ack, "%s/.kcap-ack-%ld.%s", d, pid, nonce);
    snprintf(aside, sizeof aside, "%s/.kcap-arm-withdrawn-%ld-%s", d, (long)getpid(), nonce);
    /* kept open to the end: the request's inode, ours while we hold it (withdraw_request) */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        fprintf(stderr, "%s: cannot write %s: %s\n", who, tmp, strerror(errno));
        return 1;
    }
    char msg[KCAP_ARM_REQUEST_MAX];
    int n = snprintf(msg, sizeof msg, "start %llu\nnonce %s\n%s\n", start, nonce, cmd);
    /* 0600 whatever the umask: the watcher wakes on a close for writing of it */
    if (fchmod(fd, 0600) || write(fd, msg, (size_t)n) != n) {
        fprintf(stderr, "%s: cannot write %s: %s\n", who, tmp, strerror(errno));
        close(fd), unlink(tmp);
        return 1;
    }
    uint64_t ms = 0;
    if (put_request(who, tmp, fin, wait_s, &ms)) {
        close(fd), unlink(tmp);
        return 1;
    }
    if (verbosity == KCAP_VERBOSE)
        printf("%s: request %s written; waiting up to %llu s for %s\n", who, fin,
               (unsigned long long)wait_s, ack);
    for (; ms <= wait_s * 1000; ms += 20) {
        int afd = open(ack, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
        if (afd >= 0) {
            struct stat ast;
            char txt[2048];
            ssize_t got = -1;
            if (!fstat(afd, &ast) && S_ISREG(ast.st_mode) && ast.st_uid == pst.st_uid)
                got = read(afd, txt, sizeof txt - 1);
            close(afd);
            unlink(ack);
            close(fd);
            if (got <= 0) {
                fprintf(stderr, "%s: unreadable answer in %s\n", who, ack);
                return 1;
            }
            txt[got] = '\0';
            return show_reply(who, pid, txt, verbosity == KCAP_QUIET);
        }
        if (target_gone(pid, start)) { /* no answer is coming */
            int taken = !withdraw_request(fin, aside, fd);
            close(fd);
            fprintf(stderr, "%s: process %ld exited before it answered%s\n", who, pid,
                    taken ? " (it had taken the request: it may have died carrying it out; see its log)"
                          : "; the request was withdrawn");
            return 1;
        }
        nap_ms(20);
    }
    int taken = !withdraw_request(fin, aside, fd); /* a request must not outlive this command */
    close(fd);
    if (taken)
        fprintf(stderr, "%s: process %ld took the request but did not answer within %llu s: it may "
                        "still carry it out (ask again with --status)\n", who, pid, (unsigned long long)wait_s);
    else
        fprintf(stderr, "%s: process %ld did not answer within %llu s; the request was withdrawn, "
                        "nothing was changed (a dormant process starts listening at its first verify "
                        "call; a process whose KCAP_DIR is not %s or whose capture failed to start "
                        "cannot answer)\n", who, pid, (unsigned long long)wait_s, d);
    return 1;
}
