/*
 * kcap_cmd_arm.c — `kcap arm PID [--count N | --off] [--dir DIR] [--wait SEC]`: arm a
 * running process whose libkcap.so was started dormant (KCAP_DORMANT=1 / record --dormant).
 *
 * The request is a control file ".kcap-arm-PID" written atomically (temp + rename) into the
 * process's capture directory, read from /proc/PID/environ unless --dir is given. The
 * process's watcher thread consumes (deletes) it; we wait for that to report success.
 */
#include "kcap_cap.h"
#include "kcap_cli.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int env_of_pid(long pid, const char *name, char *out, size_t n)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/environ", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t nl = strlen(name);
    char buf[65536];
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

int kcap_cmd_arm(int argc, char **argv)
{
    long pid = 0;
    uint64_t count = 1, wait_s = 5;
    int off = 0;
    const char *dir = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t u;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            printf("usage: kcap arm PID [--count N | --off] [--dir DIR] [--wait SEC]\n"
                   "  arms a dormant libkcap.so in process PID to capture its next N calls\n"
                   "  (default 1); --off disarms. DIR defaults to the process's KCAP_DIR.\n");
            return 0;
        } else if (!strcmp(a, "--off")) {
            off = 1;
        } else if ((!strcmp(a, "--count") || !strcmp(a, "-n")) && v) {
            if (kcap_parse_u64(v, &count) || !count) {
                fprintf(stderr, "kcap arm: --count '%s' is not a positive integer\n", v);
                return 2;
            }
            i++;
        } else if (!strcmp(a, "--dir") && v) {
            dir = v;
            i++;
        } else if (!strcmp(a, "--wait") && v) {
            if (kcap_parse_u64(v, &wait_s) || wait_s > 3600) {
                fprintf(stderr, "kcap arm: --wait '%s' is not a number of seconds\n", v);
                return 2;
            }
            i++;
        } else if (a[0] != '-' && !pid) {
            if (kcap_parse_u64(a, &u) || !u || u > 0x7fffffff) {
                fprintf(stderr, "kcap arm: '%s' is not a process id\n", a);
                return 2;
            }
            pid = (long)u;
        } else {
            fprintf(stderr, "kcap arm: unexpected argument '%s'\n", a);
            return 2;
        }
    }
    if (!pid) {
        fprintf(stderr, "usage: kcap arm PID [--count N | --off] [--dir DIR]\n");
        return 2;
    }
    int has = pid_has_libkcap(pid);
    if (has < 0) {
        fprintf(stderr, "kcap arm: no process %ld (or not ours to inspect)\n", pid);
        return 1;
    }
    if (!has) {
        fprintf(stderr, "kcap arm: process %ld has no libkcap.so loaded (start it with "
                        "kcap record --dormant)\n", pid);
        return 1;
    }
    char d[4096];
    if (dir)
        snprintf(d, sizeof d, "%s", dir);
    else if (env_of_pid(pid, "KCAP_DIR", d, sizeof d)) {
        fprintf(stderr, "kcap arm: cannot read KCAP_DIR of process %ld; pass --dir\n", pid);
        return 1;
    }
    char tmp[4200], fin[4200];
    snprintf(fin, sizeof fin, "%s/" KCAP_ARM_FILE_FMT, d, pid);
    snprintf(tmp, sizeof tmp, "%s/.kcap-arm-tmp-%ld-%ld", d, (long)getpid(), pid);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        fprintf(stderr, "kcap arm: cannot write %s: %s\n", tmp, strerror(errno));
        return 1;
    }
    char msg[64];
    int n = off ? snprintf(msg, sizeof msg, "off\n")
                : snprintf(msg, sizeof msg, "count %llu\n", (unsigned long long)count);
    if (write(fd, msg, (size_t)n) != n || close(fd) || rename(tmp, fin)) {
        fprintf(stderr, "kcap arm: cannot write %s: %s\n", fin, strerror(errno));
        unlink(tmp);
        return 1;
    }
    for (uint64_t ms = 0; ms < wait_s * 1000; ms += 20) {
        if (access(fin, F_OK)) {
            if (off)
                printf("kcap arm: process %ld disarmed\n", pid);
            else
                printf("kcap arm: process %ld armed for %llu snapshots\n", pid,
                       (unsigned long long)count);
            return 0;
        }
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    printf("kcap arm: request left in %s; process %ld takes it at its next verify call\n", fin,
           pid);
    return 0;
}
