/*
 * kcap_cmd_arm.c — `kcap arm PID [--count N | --off | --status] [--dir DIR] [--timeout SEC]`:
 * arm a running process whose libkcap.so was started dormant (KCAP_DORMANT=1 /
 * record --dormant), and say what really happened.
 *
 * The request ".kcap-arm-PID" is written atomically (temp + rename) into the process's
 * capture directory (its KCAP_DIR from /proc/PID/environ unless --dir is given) and names the
 * target's start time (/proc/PID/stat field 22), so it can only ever arm that process. The
 * target answers ".kcap-ack-PID.<nonce>" with "ok ..." or "error ..." and its capture counters;
 * we wait for that (default 5 s) and exit 0 only on "ok". Without an answer the request is
 * withdrawn (never left behind to arm some later process) and we exit 1 saying why it may
 * have gone unanswered. Cases the answer cannot come from are refused up front: no libkcap,
 * not dormant, a relative KCAP_DIR, a directory other users can write, another user's process.
 */
#include "kcap_arm.h"
#include "kcap_config.h"
#include "kcap_snapshot.h" /* formats/ */
#include "kcap_cli.h"
#include "kcap_names.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
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

static int usage(FILE *f)
{
    fprintf(f, "usage: kcap arm PID [--count N | --off | --status] [--dir DIR] [--timeout SEC]\n"
               "  arms a dormant libkcap.so in process PID to capture its next N calls\n"
               "  (default 1); --off disarms; --status only prints its capture counters.\n"
               "  Waits up to SEC seconds (default 5) for the process's answer; exit 0 only\n"
               "  when it confirmed. DIR defaults to the process's KCAP_DIR.\n"
               "  -n, --count N      calls to capture (default 1)\n"
               "  --wait SEC         the same as --timeout SEC\n"
               "  -q, --quiet        print nothing when the process confirmed (errors only)\n"
               "  -v, --verbose      also say where the request went and what is awaited\n"
               "  -h, --help         this text\n");
    return f == stdout ? 0 : 2;
}

/* Print the target's answer (an "ok" one not at all when quiet); 0 for "ok". */
static int show_reply(long pid, const char *txt, int quiet)
{
    const char *nl = strchr(txt, '\n');
    int ok = !strncmp(txt, "ok ", 3);
    if (ok && quiet)
        return 0;
    const char *msg = ok ? txt + 3 : !strncmp(txt, "error ", 6) ? txt + 6 : txt;
    int line = nl ? (int)(nl - msg) : (int)strlen(msg);
    fprintf(ok ? stdout : stderr, "kcap arm: process %ld: %.*s\n", pid, line, msg);
    if (nl && nl[1])
        fprintf(ok ? stdout : stderr, "kcap arm: process %ld counters: %s", pid, nl + 1);
    return ok ? 0 : 1;
}

int kcap_cmd_arm(int argc, char **argv)
{
    static const struct option lo[] = {
        {"count", required_argument, 0, 'n'}, {"off", no_argument, 0, 'O'},
        {"status", no_argument, 0, 'S'},      {"dir", required_argument, 0, 'D'},
        {"wait", required_argument, 0, 'W'},  {"timeout", required_argument, 0, 'W'},
        KCAP_CLI_COMMON_OPTS};
    long pid = 0;
    uint64_t count = 1, wait_s = 5, u;
    int off = 0, status = 0, verbosity = KCAP_NORMAL, ch;
    const char *dir = NULL;
    optind = 0;
    while ((ch = kcap_cli_getopt("arm", argc, argv, "n:" KCAP_CLI_COMMON_SHORT, lo)) != -1) {
        switch (ch) {
        case 'h': return usage(stdout);
        case 'O': off = 1; break;
        case 'S': status = 1; break;
        case 'D': dir = optarg; break;
        case 'n':
            if (kcap_parse_u64(optarg, &count) || !count) {
                kcap_cli_usage_error("arm", "--count '%s' is not a positive integer", optarg);
                return 2;
            }
            break;
        case 'W':
            if (kcap_parse_u64(optarg, &wait_s) || wait_s > 3600) {
                kcap_cli_usage_error("arm", "--timeout/--wait '%s' is not a number of seconds "
                                     "(0..3600)", optarg);
                return 2;
            }
            break;
        case 'q':
        case 'v': kcap_cli_verbosity(ch, &verbosity); break;
        default: return 2; /* kcap_cli_getopt said what */
        }
    }
    if (argc - optind > 1) {
        kcap_cli_usage_error("arm", "one PID only (got '%s' after '%s')", argv[optind + 1],
                             argv[optind]);
        return 2;
    }
    if (argc - optind == 1) {
        if (kcap_parse_u64(argv[optind], &u) || !u || u > 0x7fffffff) {
            fprintf(stderr, "kcap arm: '%s' is not a process id\n", argv[optind]);
            return 2;
        }
        pid = (long)u;
    }
    if (!pid)
        return usage(stderr);
    if (off + status > 1) {
        fprintf(stderr, "kcap arm: --off and --status exclude each other\n");
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
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld", pid);
    struct stat pst;
    if (stat(path, &pst) || (pst.st_uid != geteuid() && geteuid() != 0)) {
        fprintf(stderr, "kcap arm: process %ld belongs to uid %ld; only that user or root may "
                        "arm it\n", pid, (long)pst.st_uid);
        return 1;
    }
    char dm[16];
    int dormant = 0;
    if (env_of_pid(pid, "KCAP_DORMANT", dm, sizeof dm) || kcap_parse_bool(dm, &dormant) || !dormant) {
        fprintf(stderr, "kcap arm: process %ld was not started dormant (KCAP_DORMANT=1, kcap "
                        "record --dormant): it captures per its KCAP_* settings and cannot be "
                        "armed\n", pid);
        return 1;
    }
    char d[4096];
    if (dir)
        snprintf(d, sizeof d, "%s", dir);
    else if (env_of_pid(pid, "KCAP_DIR", d, sizeof d)) {
        fprintf(stderr, "kcap arm: cannot read KCAP_DIR of process %ld; pass --dir\n", pid);
        return 1;
    } else if (d[0] != '/') {
        fprintf(stderr, "kcap arm: process %ld has a relative KCAP_DIR '%s' (relative to its "
                        "start directory); pass --dir with the absolute path\n", pid, d);
        return 1;
    }
    struct stat dst;
    if (stat(d, &dst) || !S_ISDIR(dst.st_mode)) {
        fprintf(stderr, "kcap arm: %s: not a directory\n", d);
        return 1;
    }
    if (dst.st_mode & (S_IWGRP | S_IWOTH)) {
        fprintf(stderr, "kcap arm: %s is writable by other users (mode %04o): libkcap refuses "
                        "such a directory, so process %ld is not capturing\n", d,
                        (unsigned)(dst.st_mode & 07777), pid);
        return 1;
    }
    unsigned long long start = kcap_proc_start_time(pid);
    uint32_t r = 0;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r)
        r = (uint32_t)time(NULL) ^ (uint32_t)getpid() << 12;
    char nonce[16];
    snprintf(nonce, sizeof nonce, "%08x", r);

    char tmp[4200], fin[4200], ack[4200];
    snprintf(fin, sizeof fin, "%s/" KCAP_ARM_FILE_FMT, d, pid);
    snprintf(tmp, sizeof tmp, "%s/.kcap-arm-tmp-%ld-%s", d, (long)getpid(), nonce);
    snprintf(ack, sizeof ack, "%s/.kcap-ack-%ld.%s", d, pid, nonce);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        fprintf(stderr, "kcap arm: cannot write %s: %s\n", tmp, strerror(errno));
        return 1;
    }
    char msg[128];
    int n = snprintf(msg, sizeof msg, "start %llu\nnonce %s\n", start, nonce);
    if (status)
        n += snprintf(msg + n, sizeof msg - (size_t)n, "status\n");
    else if (off)
        n += snprintf(msg + n, sizeof msg - (size_t)n, "off\n");
    else
        n += snprintf(msg + n, sizeof msg - (size_t)n, "count %llu\n", (unsigned long long)count);
    if (write(fd, msg, (size_t)n) != n || close(fd) || rename(tmp, fin)) {
        fprintf(stderr, "kcap arm: cannot write %s: %s\n", fin, strerror(errno));
        unlink(tmp);
        return 1;
    }
    if (verbosity == KCAP_VERBOSE)
        printf("kcap arm: request %s written; waiting up to %llu s for %s\n", fin,
               (unsigned long long)wait_s, ack);
    for (uint64_t ms = 0; ms <= wait_s * 1000; ms += 20) {
        int afd = open(ack, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
        if (afd >= 0) {
            struct stat ast;
            char txt[2048];
            ssize_t got = -1;
            if (!fstat(afd, &ast) && S_ISREG(ast.st_mode) && ast.st_uid == pst.st_uid)
                got = read(afd, txt, sizeof txt - 1);
            close(afd);
            unlink(ack);
            if (got <= 0) {
                fprintf(stderr, "kcap arm: unreadable answer in %s\n", ack);
                return 1;
            }
            txt[got] = '\0';
            return show_reply(pid, txt, verbosity == KCAP_QUIET);
        }
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    int taken = access(fin, F_OK) != 0;
    unlink(fin); /* withdrawn: a request must not outlive this command */
    fprintf(stderr, "kcap arm: process %ld did not answer within %llu s%s; nothing was armed "
                    "(a dormant process starts listening at its first verify call; a process "
                    "whose KCAP_DIR is not %s or whose capture failed to start cannot answer)\n",
            pid, (unsigned long long)wait_s, taken ? " (the request was taken)" : "", d);
    return 1;
}
