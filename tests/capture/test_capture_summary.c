/*
 * test_capture_summary.c — shadow mode's summary file (capture/kcap_shadow_summary.c) on its
 * own: written whole from several threads at once (the summary thread, a `kcap shadow`
 * request and exit can write one process's summary together), every write succeeds, the file
 * left is one complete summary of one of them and no temporary file stays behind; a write
 * into a folder that is gone fails with errno and leaves nothing; strings are escaped.
 * With one shared temporary name (the previous writer) concurrent writes failed or renamed
 * each other's half-written files. The temporary name is one kcap's stale-file cleaner knows:
 * a half-written summary of a killed process is removed at the next start (the previous name,
 * `<summary>.<pid>.<n>.tmp`, stayed forever).
 */
#include "kcap_names.h"
#include "kcap_shadow_summary.h"
#include "testkit.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define WRITERS 4
#define WRITES 100

static char g_dir[PATH_MAX], g_path[PATH_MAX + 32];
static int g_failed[WRITERS];

static void *writer(void *arg)
{
    int t = (int)(intptr_t)arg;
    kcap_shadow_view *v = calloc(1, sizeof *v);
    if (!v)
        return NULL;
    snprintf(v->path, sizeof v->path, "/cand/\"t%d\".so", t);
    snprintf(v->hash, sizeof v->hash, "h%d", t);
    for (int i = 0; i < WRITES; i++) {
        v->compared = (unsigned long long)(t * 1000 + i);
        v->nshapes = i % 3; /* files of different lengths */
        if (kcap_shadow_summary_write(g_path, v))
            g_failed[t]++;
    }
    free(v);
    return NULL;
}

static int tmp_files_left(void)
{
    DIR *d = opendir(g_dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += strstr(e->d_name, ".tmp") != NULL; /* the old name and the new (.kcap-tmp.) */
    if (d)
        closedir(d);
    return n;
}

int main(void)
{
    const char *tmpdir = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(g_dir, sizeof g_dir, "%s/kcap-summary-XXXXXX", tmpdir);
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 2;
    }
    snprintf(g_path, sizeof g_path, "%s/shadow-run-p1.json", g_dir);

    pthread_t th[WRITERS];
    for (int t = 0; t < WRITERS; t++)
        pthread_create(&th[t], NULL, writer, (void *)(intptr_t)t);
    for (int t = 0; t < WRITERS; t++)
        pthread_join(th[t], NULL);
    for (int t = 0; t < WRITERS; t++)
        TK_CHECK(g_failed[t] == 0, "writer %d: %d of %d writes failed", t, g_failed[t], WRITES);
    TK_CHECK(tmp_files_left() == 0, "no temporary file left in %s (%d)", g_dir, tmp_files_left());

    FILE *f = fopen(g_path, "r");
    char buf[1 << 16];
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = 0;
    int t = -1;
    unsigned long long compared = 0;
    const char *c = strstr(buf, "\"compared\": ");
    const char *p = strstr(buf, "\"path\": \"/cand/\\\"t");
    if (p)
        t = p[strlen("\"path\": \"/cand/\\\"t")] - '0';
    if (c)
        compared = strtoull(c + strlen("\"compared\": "), NULL, 10);
    TK_CHECK(n > 0 && !strncmp(buf, "{\n  \"tool\": \"kcap shadow\"", 25) && n > 2 && !strcmp(buf + n - 2, "}\n"),
             "the summary is one whole file (%zu bytes)", n);
    TK_CHECK(t >= 0 && t < WRITERS && compared / 1000 == (unsigned long long)t && compared % 1000 == WRITES - 1,
             "it is one writer's last summary, whole: writer %d, compared %llu", t, compared);
    TK_CHECK(strstr(buf, "\"hash\": \"h") && strchr(buf, '\\'), "the candidate path's quotes escaped");

    /* a folder that is gone: -1 with errno, nothing written */
    char gone[PATH_MAX + 48];
    snprintf(gone, sizeof gone, "%s/gone/shadow.json", g_dir);
    kcap_shadow_view *v = calloc(1, sizeof *v);
    errno = 0;
    TK_CHECK(v && kcap_shadow_summary_write(gone, v) == -1 && errno == ENOENT,
             "a missing folder: -1 and ENOENT (errno %d)", errno);
    free(v);
    TK_CHECK(tmp_files_left() == 0, "still no temporary file");

    /* a summary half-written by a process that died: the cleaner of the next start removes it */
    pid_t dead = fork();
    if (dead == 0)
        _exit(0);
    waitpid(dead, NULL, 0);
    char left[PATH_MAX + 64];
    TK_CHECK(kcap_shadow_summary_tmpname(left, sizeof left, g_path, (long)dead, 3) == 0 &&
                 !strncmp(left, g_dir, strlen(g_dir)) && strstr(left, "/.kcap-tmp.") &&
                 strstr(left, "shadow-run-p1.json"),
             "the temporary is in the summary's folder, kcap-named: %s", left);
    FILE *lf = fopen(left, "w");
    if (lf)
        fputs("{\n  \"tool\": \"kcap sha", lf), fclose(lf);
    TK_CHECK(kcap_clean_stale(g_dir, 0) == 1 && access(left, F_OK) != 0 && access(g_path, F_OK) == 0,
             "a killed writer's temporary removed by kcap_clean_stale, the summary kept");

    unlink(g_path);
    rmdir(g_dir);
    return tk_summary("test_capture_summary");
}
