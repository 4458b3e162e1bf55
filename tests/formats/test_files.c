/*
 * test_files.c — the file-system contract of kcap_snapshot_write: 0600 files and 0700
 * directories (whatever the umask), no partial file left when the write fails (file size
 * limit in a child, missing directory, directory in the way), no symlink followed or
 * replaced, an existing snapshot never replaced (up front and in a race at the rename,
 * renameat2 and its link fallback), and writers and readers running in
 * several threads at once (the global HDF5 lock).
 */
#include "fmt_testutil.h"
#include "kcap_fsutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    if (d)
        closedir(d);
    return n;
}

/* An existing name is never replaced: refused up front (KCAP_ERR_EXISTS, the file and
 * its inode untouched, no temp left), and atomically at the rename when the name appears
 * while the snapshot is being written; the link + unlink fallback of file systems without
 * renameat2 RENAME_NOREPLACE refuses the same way. */
static void no_replace(const kcap_snapshot *s, const char *file, const char *dir)
{
    kcap_error err = {0};
    struct stat a, b;
    TK_CHECK(!stat(file, &a), "%s exists", file);
    int rc = kcap_snapshot_write(NULL, s, file, &err);
    TK_CHECK(rc == KCAP_ERR_EXISTS && strstr(err.msg, "already exists"), "rewrite: rc %d %s", rc,
             err.msg);
    TK_CHECK(!stat(file, &b) && a.st_ino == b.st_ino && a.st_mtime == b.st_mtime, "file untouched");
    TK_CHECK(count_entries(dir) == 1, "nothing left beside it");
    /* the race: the name appears between open and commit */
    char *late = tu_path("a/b/c/late.h5");
    kcap_atomic at;
    TK_CHECK_OK(kcap_atomic_open(&at, late, &err), err);
    FILE *f = fopen(late, "w");
    fputs("theirs", f);
    fclose(f);
    rc = kcap_atomic_commit(&at, &err);
    TK_CHECK(rc == KCAP_ERR_EXISTS && strstr(err.msg, "never replaced"), "race: rc %d %s", rc,
             err.msg);
    TK_CHECK(!stat(late, &b) && b.st_size == 6, "their file kept");
    TK_CHECK(count_entries(dir) == 2, "no temp file left after the lost race");
    /* the fallback used where renameat2(RENAME_NOREPLACE) is refused */
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    int tfd = openat(dfd, "t1", O_CREAT | O_WRONLY, 0600);
    close(tfd);
    errno = 0;
    TK_CHECK(kcap_link_noreplace(dfd, "t1", "late.h5") == -1 && errno == EEXIST,
             "fallback onto an existing name: errno %d", errno);
    TK_CHECK(kcap_link_noreplace(dfd, "t1", "t2") == 0 && faccessat(dfd, "t1", F_OK, 0) &&
              !faccessat(dfd, "t2", F_OK, 0), "fallback moves the temp name");
    TK_CHECK(kcap_rename_noreplace(dfd, "t2", "late.h5") == -1 && errno == EEXIST,
             "renameat2 path onto an existing name: errno %d", errno);
    unlinkat(dfd, "t2", 0);
    unlink(late);
    close(dfd);
}

static kcap_snapshot *small_snap(uint64_t seed, tk_vcall *v)
{
    static const tk_vcase c = {.bs = 2, .q_len = 3, .heads = 4, .num_slots = 100, .idx64 = 1,
                               .vis = TK_VIS_RANDOM, TU_VCASE, TU_VCASE_PADDED};
    kcap_error err = {0};
    tu_vcall(&c, seed, v);
    return tu_vattn_snapshot(v, &err);
}

typedef struct {
    int id, fails;
} thr;

static void *worker(void *arg)
{
    thr *t = arg;
    tk_vcall v;
    kcap_snapshot *s = small_snap((uint64_t)t->id, &v);
    kcap_error err = {0};
    kcap_writer *w = kcap_writer_create(&(kcap_writer_opts){.threads = 2, .chunk_bytes = 8192,
                                                            .min_compress_bytes = 2048},
                                        &err);
    for (int i = 0; i < 6; i++) {
        char name[64];
        snprintf(name, sizeof name, "thr/t%d_%d.h5", t->id, i);
        kcap_snapshot *b = NULL;
        if (!s || kcap_snapshot_write(w, s, tu_path(name), &err) ||
            kcap_snapshot_read(tu_path(name), &b, &err) ||
            memcmp(b->tensors[3].data, s->tensors[3].data, s->tensors[3].nbytes)) {
            fprintf(stderr, "thread %d: %s\n", t->id, err.msg);
            t->fails++;
        }
        kcap_snapshot_free(b);
    }
    kcap_writer_free(w);
    kcap_snapshot_free(s);
    tk_vcall_free(&v);
    return NULL;
}

int main(void)
{
    tk_vcall v;
    kcap_error err = {0};
    kcap_snapshot *s = small_snap(1, &v);
    TK_CHECK(s != NULL, "snapshot");
    if (!s)
        return 1;

    /* permissions: 0600 / 0700 even with a permissive umask */
    mode_t old = umask(0);
    char *dir = tu_path("a/b/c");
    TK_CHECK_OK(kcap_mkdir_private(dir, &err), err);
    struct stat st;
    const char *levels[] = {"a", "a/b", "a/b/c"};
    for (int i = 0; i < 3; i++)
        TK_CHECK(!stat(tu_path(levels[i]), &st) && (st.st_mode & 0777) == 0700, "%s mode %o",
                 levels[i], st.st_mode & 0777);
    TK_CHECK_OK(kcap_mkdir_private(dir, &err), err); /* exists: fine */
    char *file = tu_path("a/b/c/s.h5");
    TK_CHECK_OK(kcap_snapshot_write(NULL, s, file, &err), err);
    TK_CHECK(!stat(file, &st) && (st.st_mode & 0777) == 0600, "file mode %o", st.st_mode & 0777);
    umask(old);
    TK_CHECK(count_entries(dir) == 1, "only the snapshot in the directory");
    no_replace(s, file, dir);

    /* symlinks: never followed, never replaced */
    char *target = tu_path("victim.txt"), *link = tu_path("a/b/c/link.h5");
    FILE *f = fopen(target, "w");
    fputs("precious", f);
    fclose(f);
    TK_CHECK(!symlink(target, link), "symlink");
    int rc = kcap_snapshot_write(NULL, s, link, &err);
    TK_CHECK(rc == KCAP_ERR_IO && strstr(err.msg, "symbolic link"), "write to a symlink: %s", err.msg);
    TK_CHECK(!lstat(link, &st) && S_ISLNK(st.st_mode) && !stat(target, &st) && st.st_size == 8,
             "link and its target untouched");
    char *dlink = tu_path("dirlink");
    TK_CHECK(!symlink(dir, dlink), "dir symlink");
    rc = kcap_mkdir_private(dlink, &err);
    TK_CHECK(rc == KCAP_ERR_IO && strstr(err.msg, "symbolic link"), "mkdir on a symlink: %s", err.msg);

    /* failures leave nothing behind */
    rc = kcap_snapshot_write(NULL, s, tu_path("missing/dir/s.h5"), &err);
    TK_CHECK(rc == KCAP_ERR_IO && strstr(err.msg, "missing/dir"), "missing dir: %s", err.msg);
    TK_CHECK_OK(kcap_mkdir_private(tu_path("d"), &err), err);
    TK_CHECK_OK(kcap_mkdir_private(tu_path("d/x.h5"), &err), err);
    rc = kcap_snapshot_write(NULL, s, tu_path("d/x.h5"), &err);
    TK_CHECK(rc == KCAP_ERR_IO && strstr(err.msg, "not a regular file"), "dir in the way: %s", err.msg);
    TK_CHECK(count_entries(tu_path("d")) == 1, "nothing left beside the directory");
    /* a file size limit (like ENOSPC) in a child: the write fails, nothing is left, and no
     * HDF5 object stays open (a file id left open by a failed close made HDF5's teardown,
     * run here by H5close as at exit, touch freed memory). Limits inside the user block,
     * the metadata and the tensor data. */
    char *full = tu_path("full");
    TK_CHECK_OK(kcap_mkdir_private(full, &err), err);
    const long limits[] = {5000, 20000, 40000, 70000};
    for (int li = 0; li < 4; li++) {
        pid_t pid = fork();
        if (pid == 0) {
            signal(SIGXFSZ, SIG_IGN);
            struct rlimit rl = {(rlim_t)limits[li], (rlim_t)limits[li]};
            setrlimit(RLIMIT_FSIZE, &rl);
            kcap_error e2 = {0};
            int r = kcap_snapshot_write(NULL, s, tu_path("full/s.h5"), &e2);
            fprintf(stderr, "child (limit %ld): rc %d: %s\n", limits[li], r, e2.msg);
            ssize_t open_objs = H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL);
            H5close();
            _exit(r == 0 ? 1 : !strstr(e2.msg, "full/s.h5") ? 2 : open_objs != 0 ? 3 : 0);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        TK_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                 "write under RLIMIT_FSIZE %ld fails cleanly (status %#x)", limits[li], status);
        TK_CHECK(count_entries(full) == 0, "no partial or temp file left (%d entries)",
                 count_entries(full));
    }

    /* several writers and readers at once */
    TK_CHECK_OK(kcap_mkdir_private(tu_path("thr"), &err), err);
    pthread_t th[4];
    thr t[4];
    for (int i = 0; i < 4; i++) {
        t[i] = (thr){i, 0};
        pthread_create(&th[i], NULL, worker, &t[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        TK_CHECK(t[i].fails == 0, "thread %d failed %d times", i, t[i].fails);
    }
    TK_CHECK(count_entries(tu_path("thr")) == 24, "24 snapshots from 4 threads");
    kcap_snapshot_free(s);
    tk_vcall_free(&v);
    return tk_summary("test_files");
}
