/*
 * test_capture_queue.c — capture's bounded queue and writer thread (capture/kcap_queue.c)
 * on their own: KCAP_QUEUE_BYTES bounds reservations (the writer's own buffers charged
 * first), queued snapshots reach the disk as sealed files under their names and the bytes
 * come back, a taken name is never replaced (the next suffix is used), and writes that keep
 * failing (the directory gone) pause capture (back-off) without losing count.
 */
#include "kcap_queue.h"
#include "kcap_names.h"
#include "kcap_state.h"

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testkit.h"

static int count_h5(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += strlen(e->d_name) > 3 && !strcmp(e->d_name + strlen(e->d_name) - 3, ".h5");
    if (d)
        closedir(d);
    return n;
}

/* A small snapshot of an unknown call (the writer needs no description). */
static kcap_snapshot *small(uint64_t seq)
{
    kcap_snapshot *s = kcap_snapshot_create();
    snprintf(s->meta.call, sizeof s->meta.call, "kcap_test_queue");
    s->meta.pid = getpid();
    s->meta.seq = seq;
    s->meta.rank = -1;
    kcap_snapshot_add_int(s, "n", (int64_t)seq);
    void *dst = NULL;
    int64_t shape[1] = {4096};
    kcap_snapshot_add_tensor(s, "x", KCAP_DIR_IN, KCAP_DT_F32, 1, shape, NULL, NULL, &dst);
    float *f = dst;
    for (int i = 0; i < 4096; i++)
        f[i] = (float)(i * (seq + 1));
    return s;
}

int main(void)
{
    kcap_config *c = kcap_cfg_mut();
    kcap_config_defaults(c);
    snprintf(c->dir, sizeof c->dir, "/tmp/kcap-queue.XXXXXX");
    TK_CHECK(mkdtemp(c->dir) != NULL, "temp dir");
    c->queue_bytes = 64ull << 20;
    c->threads = 1;
    kcap_names_init();

    size_t room = kcap_queue_room();
    TK_CHECK(room > 0 && room < c->queue_bytes, "the writer's buffers are charged first (room %zu)", room);
    TK_CHECK(kcap_queue_reserve(room + 1) == KCAP_ERR_FULL, "a reservation over the room is refused");
    TK_CHECK(kcap_queue_reserve(1 << 20) == 0, "1 MiB reserved");
    kcap_queue_unreserve(1 << 20);

    for (uint64_t i = 0; i < 5; i++) {
        kcap_snapshot *s = small(i);
        size_t b = kcap_snapshot_bytes(s);
        TK_CHECK(kcap_queue_reserve(b) == 0 && kcap_queue_push_reserved(s, i, -1, b) == 0, "push %llu",
                 (unsigned long long)i);
    }
    /* seq 2 again: its name is taken, the next suffix is used, nothing replaced */
    kcap_snapshot *dup = small(2);
    TK_CHECK(kcap_queue_push(dup, 2, -1) == 0, "push a second seq 2");
    for (int i = 0; i < 300 && (kcap_queue_pending() || count_h5(c->dir) < 6); i++)
        usleep(10000);
    TK_CHECK(count_h5(c->dir) == 6, "6 files written (%d)", count_h5(c->dir));
    TK_CHECK(atomic_load(&kcap_g_stats.written) == 6 && !atomic_load(&kcap_g_stats.failed_write),
             "written=6, no write failure (a taken name is not a failure)");
    TK_CHECK(kcap_queue_reserve(room) == 0, "all bytes back once written: the whole room reserved");
    kcap_queue_unreserve(room);

    /* the directory disappears: writes fail, and after three in a row capture pauses */
    char cmd[PATH_MAX + 32];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", c->dir);
    TK_CHECK(system(cmd) == 0, "directory removed");
    for (uint64_t i = 10; i < 13; i++)
        kcap_queue_push(small(i), i, -1);
    for (int i = 0; i < 300 && atomic_load(&kcap_g_stats.failed_write) < 3; i++)
        usleep(10000);
    TK_CHECK(atomic_load(&kcap_g_stats.failed_write) == 3, "three failed writes counted (%llu)",
             (unsigned long long)atomic_load(&kcap_g_stats.failed_write));
    TK_CHECK(kcap_queue_backoff(), "capture waits before retrying (back-off)");
    TK_CHECK(kcap_queue_flush(2000) == 0, "flush: nothing left pending");
    return tk_summary("test_capture_queue");
}
