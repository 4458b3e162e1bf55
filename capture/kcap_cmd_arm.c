/*
 * kcap_cmd_arm.c — `kcap arm PID [--count N | --off | --status] [--dir DIR] [--timeout SEC]`:
 * arm a running process whose libkcap.so was started dormant (KCAP_DORMANT=1 /
 * record --dormant), and say what really happened (the channel: kcap_arm_client.c).
 *
 * The request ".kcap-arm-PID" is written atomically (a temporary file moved in, never over
 * another command's pending request) into the process's
 * capture directory (its KCAP_DIR from /proc/PID/environ unless --dir is given) and names the
 * target's start time (/proc/PID/stat field 22), so it can only ever arm that process. The
 * target answers ".kcap-ack-PID.<nonce>" with "ok ..." or "error ..." and its capture counters;
 * we wait for that (default 5 s) and exit 0 only on "ok". Without an answer the request is
 * withdrawn (never left behind to arm some later process) and we exit 1 saying why it may
 * have gone unanswered. Cases the answer cannot come from are refused up front: no libkcap,
 * not dormant, a relative KCAP_DIR, a directory other users can write, another user's process.
 */
#include "kcap_arm.h"
#include "kcap_arm_client.h"
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
    char cmd[64];
    if (status)
        snprintf(cmd, sizeof cmd, "status");
    else if (off)
        snprintf(cmd, sizeof cmd, "off");
    else
        snprintf(cmd, sizeof cmd, "count %llu", (unsigned long long)count);
    return kcap_arm_send("kcap arm", pid, dir, "KCAP_DORMANT", cmd, wait_s, verbosity);
}
