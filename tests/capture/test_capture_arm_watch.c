/*
 * test_capture_arm_watch.c — the arming watcher (capture/kcap_arm.c) on its own: a request
 * file naming this process's start time is answered with the handler's reply; one naming
 * another start time (an earlier process with our pid) is refused unanswered; a malformed
 * command is answered with an error and never reaches the handler; shadow commands go to
 * the shadow handler. The client side is kcap_arm_client.c; here the files are written by
 * hand, as a hostile or confused writer would.
 */
#include "kcap_arm.h"
#include "kcap_names.h"

#include <fcntl.h>
#include <limits.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "testkit.h"

static char g_dir[PATH_MAX];
static int g_calls, g_shadow_calls;
static unsigned long long g_count;

static int handler(uint64_t count, int off, int status_only, char *reply, size_t n)
{
    g_calls++;
    g_count = count;
    snprintf(reply, n, "ok handled count=%llu off=%d status=%d\n", (unsigned long long)count, off,
             status_only);
    return 0;
}

static int shadow_handler(const char *cmd, char *reply, size_t n)
{
    g_shadow_calls++;
    snprintf(reply, n, "ok shadow got '%s'\n", cmd);
    return 0;
}

/* Write a request (temp + rename, as kcap arm did before it stopped replacing a pending
 * request; the watcher takes both) and wait up to 3 s for its answer; the
 * answer text in out, or "" when none came. */
static void request(unsigned long long start, const char *nonce, const char *cmd, char *out,
                    size_t n)
{
    char tmp[PATH_MAX + 64], fin[PATH_MAX + 64], ack[PATH_MAX + 64];
    snprintf(tmp, sizeof tmp, "%s/req.tmp", g_dir);
    snprintf(fin, sizeof fin, "%s/" KCAP_ARM_FILE_FMT, g_dir, (long)getpid());
    snprintf(ack, sizeof ack, "%s/.kcap-ack-%ld.%s", g_dir, (long)getpid(), nonce);
    FILE *f = fopen(tmp, "w");
    fprintf(f, "start %llu\nnonce %s\n%s\n", start, nonce, cmd);
    fclose(f);
    rename(tmp, fin);
    out[0] = '\0';
    for (int i = 0; i < 300; i++) {
        FILE *a = fopen(ack, "r");
        if (a) {
            size_t got = fread(out, 1, n - 1, a);
            out[got] = '\0';
            fclose(a);
            unlink(ack);
            return;
        }
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
}

int main(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/kcap-armwatch.XXXXXX");
    TK_CHECK(mkdtemp(g_dir) != NULL, "temp dir");
    kcap_names_init();
    kcap_arm_set_shadow_handler(shadow_handler);
    kcap_arm_start(g_dir, handler);
    unsigned long long me = kcap_self_start_time();
    char out[1024];

    request(me, "0000aaaa", "count 7", out, sizeof out);
    TK_CHECK(!strcmp(out, "ok handled count=7 off=0 status=0\n") && g_calls == 1 && g_count == 7,
             "arm request answered by the handler: '%s'", out);
    request(me, "0000bbbb", "status", out, sizeof out);
    TK_CHECK(strstr(out, "status=1") && g_calls == 2, "status request: '%s'", out);
    request(me + 1, "0000cccc", "count 3", out, sizeof out);
    TK_CHECK(!out[0] && g_calls == 2, "a request for another start time is refused, unanswered");
    request(me, "0000dddd", "count 0", out, sizeof out);
    TK_CHECK(!strncmp(out, "error malformed", 15) && g_calls == 2, "count 0 refused: '%s'", out);
    request(me, "0000eeee", "rm -rf /", out, sizeof out);
    TK_CHECK(!strncmp(out, "error malformed", 15) && g_calls == 2, "garbage refused: '%s'", out);
    request(me, "0000ffff", "shadow /x/cand.so", out, sizeof out);
    TK_CHECK(strstr(out, "ok shadow got 'shadow /x/cand.so'") && g_shadow_calls == 1 && g_calls == 2,
             "shadow request to the shadow handler: '%s'", out);
    DIR *d = opendir(g_dir); /* the directory and whatever the refused requests left in it */
    int left = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        char p[PATH_MAX + 300];
        if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2])))
            continue;
        snprintf(p, sizeof p, "%s/%s", g_dir, e->d_name);
        left += unlink(p) == 0;
    }
    if (d)
        closedir(d);
    TK_CHECK(left == 0, "no request or answer left in the directory (%d)", left);
    rmdir(g_dir);
    return tk_summary("test_capture_arm_watch");
}
